//! Lowering: PTX and SASS syntax trees in, [`fencelint_ir::Module`]s out.
//!
//! This is the only crate that knows both the front ends and the IR. The classification of PTX
//! opcodes lives in [`ptx`]; the SASS semantics table lives in [`sass`].

mod constants;
mod frames;
pub mod ptx;
pub mod sass;

use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_ir::Module;
use fencelint_source::{FileId, TextRange};

/// Makes `insts` end in an instruction that does not fall through, so that copies of called
/// code placed after a function's own instructions are not reached by falling off its end (a
/// PTX function that ends in a conditional branch; a SASS listing's `NOP`s after its `BRA` to
/// itself): an exit of no width (`opcode`) at its end.
pub(crate) fn seal(insts: &mut Vec<fencelint_ir::Inst>, opcode: &str) {
    if let Some(last) = insts.last().filter(|last| last.falls_to_next()) {
        let control = fencelint_ir::Control { exits: true, ..fencelint_ir::Control::default() };
        let exit = last.after(opcode, fencelint_ir::InstKind::Exit, control);
        insts.push(exit);
    }
}

/// What kind of text an input is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InputKind {
    Ptx,
    Sass(fencelint_sass::SassFormat),
}

impl InputKind {
    pub const fn dialect(self) -> fencelint_source::Dialect {
        match self {
            Self::Ptx => fencelint_source::Dialect::Ptx,
            Self::Sass(_) => fencelint_source::Dialect::Sass,
        }
    }
}

/// Recognises PTX and the SASS formats from the content.
pub fn detect(text: &str) -> Option<InputKind> {
    if let Some(format) = fencelint_sass::detect(text) {
        return Some(InputKind::Sass(format));
    }
    looks_like_ptx(text).then_some(InputKind::Ptx)
}

fn looks_like_ptx(text: &str) -> bool {
    // Cut at a character boundary: the 64 KiB limit may fall inside a character.
    let head = &text[..text.floor_char_boundary(text.len().min(64 * 1024))];
    head.contains(".version")
        || head.contains(".entry")
        || head.contains(".target")
        || head.contains(".func")
}

/// Lowered modules and the front end's diagnostics (parse errors).
#[derive(Debug, Default)]
pub struct Lowered {
    pub modules: Vec<Module>,
    pub diagnostics: Vec<Diagnostic>,
}

/// Parses and lowers one text. Ranges are shifted by `base` (for texts that are a slice of a
/// larger file).
pub fn lower(file: FileId, text: &str, kind: InputKind, base: u32) -> Lowered {
    match kind {
        InputKind::Ptx => ptx::lower_text(file, text, base),
        InputKind::Sass(format) => sass::lower_text(file, text, format, base),
    }
}

/// A `parse-error` diagnostic.
pub(crate) fn parse_error(
    file: FileId,
    range: TextRange,
    message: &str,
    dialect: fencelint_source::Dialect,
) -> Diagnostic {
    Diagnostic::new(
        codes::PARSE_ERROR,
        Severity::Error,
        message.to_owned(),
        Label::new(file, range, "not understood"),
    )
    .with_dialect(dialect)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `pipeline` fuzz target: a multi-byte character across the 64 KiB that
    /// detection looks at made it slice inside the character and panic.
    #[test]
    fn detection_cuts_its_window_at_a_character_boundary() {
        for pad in 65_533..=65_536 {
            let text = format!("{}\u{20ac}.version 8.5\n", "a".repeat(pad));
            assert_eq!(detect(&text), None, "pad {pad}");
        }
        let text = format!(".version 8.5\n{}\u{20ac}", "a".repeat(65_522));
        assert_eq!(detect(&text), Some(InputKind::Ptx));
    }
}
