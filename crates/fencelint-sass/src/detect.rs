//! Recognises which kind of listing a text is, from its content.
//!
//! Only a bounded prefix is looked at, so that detection costs nothing on multi-gigabyte
//! inputs and works on the first block read from a pipe.

use crate::text::{separator_section, skip_blanks};

/// The SASS listing formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SassFormat {
    /// `cuobjdump -sass`: `Function : name` headers, numeric branch targets, encodings.
    CuobjdumpText,
    /// `nvdisasm` text (`-c`, `-g`, `-gi`, `-gp`, `-hex`): sections, labels, line info.
    NvdisasmText,
    /// `nvdisasm -json`.
    NvdisasmJson,
}

impl SassFormat {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CuobjdumpText => "cuobjdump",
            Self::NvdisasmText => "nvdisasm",
            Self::NvdisasmJson => "nvdisasm-json",
        }
    }

    pub const fn is_text(self) -> bool {
        !matches!(self, Self::NvdisasmJson)
    }
}

/// What an input text is, so that a caller can route it to the PTX or the SASS front end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InputFormat {
    Sass(SassFormat),
    /// PTX text (`.version`, `.target`, `.entry`, ...): for the PTX front end.
    Ptx,
}

/// How many bytes of the input detection looks at.
pub const DETECT_PREFIX: usize = 256 * 1024;

/// The SASS format of `text`, or `None` when it is PTX or not recognised.
///
/// This is [`detect_input`] without the PTX case.
pub fn detect(text: &str) -> Option<SassFormat> {
    match detect_input(text)? {
        InputFormat::Sass(format) => Some(format),
        InputFormat::Ptx => None,
    }
}

/// Recognises SASS listings and PTX from the first [`DETECT_PREFIX`] bytes of `text`.
///
/// - JSON: the text starts with `[` followed by `{` or `[` (nvdisasm writes one line).
/// - cuobjdump: a `Fatbin elf code:`, `Function :`, `code for sm_` or `.headerflags` line.
/// - nvdisasm: a `//-----` section separator, `.section`, `.elftype`, a `//## File` marker, or a
///   label line.
/// - PTX: a `.version`, `.address_size`, `.entry`, `.func` or `.visible`/`.extern` directive.
/// - Otherwise the first instruction line `/*0000*/ ...` decides: with a `/* 0x...` encoding
///   comment it is cuobjdump, without one nvdisasm (hand-written snippets parse the same way).
///
/// `.target` alone decides nothing: PTX and both SASS listings have it.
pub fn detect_input(text: &str) -> Option<InputFormat> {
    let mut prefix_end = text.len().min(DETECT_PREFIX);
    while !text.is_char_boundary(prefix_end) {
        prefix_end -= 1;
    }
    let prefix = text[..prefix_end].trim_start_matches('\u{feff}');
    let start = prefix.trim_start();
    if let Some(rest) = start.strip_prefix('[')
        && rest.trim_start().starts_with(['{', '['])
    {
        return Some(InputFormat::Sass(SassFormat::NvdisasmJson));
    }
    for line in prefix.lines() {
        let first = skip_blanks(line.as_bytes(), 0);
        let line = line[first..].trim_end();
        if line.is_empty() {
            continue;
        }
        if let Some(found) = classify(line) {
            return Some(found);
        }
    }
    None
}

fn classify(line: &str) -> Option<InputFormat> {
    use InputFormat::{Ptx, Sass};
    use SassFormat::{CuobjdumpText, NvdisasmText};
    if line.starts_with("Fatbin elf code")
        || line.starts_with("Function :")
        || line.starts_with("code for sm_")
        || line.starts_with(".headerflags")
    {
        return Some(Sass(CuobjdumpText));
    }
    if line.starts_with("//##")
        || line.starts_with(".section\t")
        || line.starts_with(".section ")
        || line.starts_with(".elftype")
    {
        return Some(Sass(NvdisasmText));
    }
    if line.starts_with("//") {
        return separator_section(line).map(|_| Sass(NvdisasmText));
    }
    let directive = line.split([' ', '\t']).next().unwrap_or("");
    if matches!(
        directive,
        ".version" | ".address_size" | ".entry" | ".func" | ".visible" | ".extern"
    ) && !line.contains(",@")
    {
        return Some(Ptx);
    }
    if line.starts_with("/*") && line.as_bytes().get(2).is_some_and(u8::is_ascii_hexdigit) {
        let format = if line.contains("/* 0x") { CuobjdumpText } else { NvdisasmText };
        return Some(Sass(format));
    }
    if line.starts_with(".L_") && line.ends_with(':') {
        return Some(Sass(NvdisasmText));
    }
    None
}

#[cfg(test)]
mod tests {
    //! Hand-written prefixes of each format.

    use super::*;

    #[test]
    fn recognises_each_format() {
        let cuobjdump = "\n\tcode for sm_90a\n\t.target\tsm_90a\n\n\t\tFunction : k\n";
        assert_eq!(detect(cuobjdump), Some(SassFormat::CuobjdumpText));
        let fatbin = "\nFatbin elf code:\n================\narch = sm_90a\n";
        assert_eq!(detect(fatbin), Some(SassFormat::CuobjdumpText));
        let nvdisasm = "\t.target\tsm_90a\n\n\t.elftype\t@\"ET_EXEC\"\n";
        assert_eq!(detect(nvdisasm), Some(SassFormat::NvdisasmText));
        let separator = "//--------------------- .text.k --------------------------\n";
        assert_eq!(detect(separator), Some(SassFormat::NvdisasmText));
        let json = "[{\"ELF\":{}},[{\"function-name\":\"k\"}]]";
        assert_eq!(detect(json), Some(SassFormat::NvdisasmJson));
        let snippet = "// expect: nothing\n        /*0000*/  MEMBAR.ALL.GPU ;\n";
        assert_eq!(detect(snippet), Some(SassFormat::NvdisasmText));
        let encoded = "        /*0000*/  NOP ;   /* 0x0000000000007918 */\n";
        assert_eq!(detect(encoded), Some(SassFormat::CuobjdumpText));
    }

    #[test]
    fn recognises_ptx() {
        let ptx = "//\n// Generated by NVIDIA NVVM Compiler\n//\n.version 9.0\n.target sm_90a\n";
        assert_eq!(detect_input(ptx), Some(InputFormat::Ptx));
        assert_eq!(detect(ptx), None);
        let entry = ".target sm_80\n.visible .entry k(\n";
        assert_eq!(detect_input(entry), Some(InputFormat::Ptx));
        assert_eq!(detect_input(".target sm_80\n"), None);
        assert_eq!(detect_input(""), None);
        assert_eq!(detect_input("hello"), None);
    }
}
