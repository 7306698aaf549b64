//! The SASS front end of fencelint: parsers for `cuobjdump -sass` listings, `nvdisasm` listings
//! (plain, `-g`, `-gi`, `-gp`, `-hex`, with or without `-c`) and `nvdisasm -json`, all into one
//! zero-copy syntax tree ([`SassModule`]).
//!
//! # Entry points
//! - [`parse`] recognises the format ([`detect`]) and parses a whole text;
//!   [`parse_text`] and [`parse_json`] parse a known format. One thread, one pass.
//! - [`detect_input`] also recognises PTX, so that a caller can route a file to the right front
//!   end; [`detect`] answers only for the SASS formats.
//! - [`split_functions`] / [`split_functions_parallel`] cut a listing held in memory (a read or
//!   memory-mapped file) into [`TextChunk`]s without copying; parse them with rayon
//!   (`chunks.par_iter().map(TextChunk::parse)`). Ranges stay relative to the whole text, and
//!   the functions are exactly those of [`parse`]. This is the fast path for files.
//!   [`split_bytes_parallel_with`] does the same for bytes not yet checked to be UTF-8 (a
//!   memory map), checking each piece in the pass that cuts it; [`split_bytes_in_order`] hands
//!   out each function as soon as the pieces up to its end are checked, one piece after another,
//!   so that a caller can lint while the rest of the file is still being read from the disk.
//! - [`FunctionSplitter`] reads a listing from any [`std::io::BufRead`] (a disassembler's pipe)
//!   and yields one owned [`SassChunk`] per function with its context (architecture, fat-binary
//!   identifier, name, offset and line in the stream); [`SassChunk::parse`] parses it. Memory
//!   stays bounded by the largest function. This is the path for pipes.
//!
//! # What the tree holds
//! A [`SassFunction`] per kernel code section (device subroutines that ptxas placed in the
//! section stay inside it, named by [`SassFunction::labels`]), with its architecture and
//! instructions. A [`SassInst`] has its address, guard, full dotted opcode (with
//! [`SassInst::base`] and [`SassInst::modifiers`]), typed [`Operand`]s, byte range, source line
//! (`-g`, innermost location; [`SassInst::inlined_at`] with `-gi`), PTX line (`-gp`; both kinds
//! of marker are sticky until the next one), resolved branch target and encoding range.
//! Memory operands expose their registers and offset ([`Address`]), so that a later pass can
//! tell `[UR6]` from `[UR6+0x8]`.
//!
//! # Invariants
//! - **Parsing never fails.** Every function returns [`Parsed`]: the tree plus
//!   [`ParseError`]s with byte ranges. An instruction line that cannot be read completely is
//!   kept with [`SassInst::malformed`] set; a line that is not an instruction is reported and
//!   skipped; a truncated input yields what is complete. No input makes the parser panic, and
//!   the work is linear in the input (no recursion, no backtracking).
//! - **Zero copy.** Names, opcodes and operand texts borrow from the input; the only
//!   allocations are the vectors of functions, instructions, operands and labels (one
//!   exact-size allocation for the operands of an instruction).
//! - **Unknown opcodes and operand shapes are kept** ([`OperandKind::Other`]): new
//!   architectures add opcodes every year, and meaning is assigned by the lowering, not here.
//! - **`//` comments are accepted anywhere** in the text listings (fixtures carry
//!   `// expect: ...` annotations) and never become part of an instruction.
//! - **Both splitters and [`parse`] agree**: the chunks of [`FunctionSplitter`] and
//!   [`split_functions`] are the same, and parsing them gives the functions of [`parse`]
//!   (checked on every test listing, and on mutated ones).
//!
//! # Known limits
//! - nvdisasm JSON names subroutines only by symbol and has no labels, so `CALL` targets stay
//!   unresolved there ([`OperandKind::Label`] keeps the name); JSON has no line information.
//! - `RET` carries no [`SassInst::branch_target`]: the symbol nvdisasm prints after it names
//!   the function returned into.
//! - Instructions are taken to be 16 bytes (Volta and later) where a listing gives no address:
//!   JSON, address-less hand-written lines, and the end address of a trailing label.
//! - Byte ranges are `u32`: a single text over 4 GiB must be streamed (chunk ranges are
//!   relative to the chunk, [`SassChunk::offset`] is `u64`).

mod ast;
mod detect;
mod json;
mod operand;
mod scan;
mod split;
mod text;

use std::fmt;

use fencelint_source::TextRange;

pub use ast::{
    Address, Arch, ConstBank, ConstOperand, FloatImm, Guard, MemOperand, MemPrefix,
    NEWEST_CHECKED_ARCH, Operand, OperandKind, RegFile, RegRef, Register, SassFunction, SassInst,
    SassLabel, SassModule, SrcLine, Suffix, control_bits, encoding_control_bits,
};
pub use detect::{DETECT_PREFIX, InputFormat, SassFormat, detect, detect_input};
/// The blank skipping of the hot path, for the `scan-floor` example, which times it.
pub use scan::skip_blanks;
pub use split::{
    FunctionSplitter, SassChunk, TextChunk, split_bytes_in_order, split_bytes_parallel_with,
    split_functions, split_functions_parallel, split_functions_parallel_with,
};
pub use text::ListingSink;

/// Parses one function object of an nvdisasm JSON listing, as [`FunctionSplitter`] cuts them,
/// with the architecture its document named; ranges are relative to `text`.
pub fn parse_function_object(text: &str, arch: Option<Arch>) -> Parsed<SassModule<'_>> {
    json::parse_function_object_in(text, 0, text.len(), arch)
}

/// A problem found while parsing, with the byte range it concerns.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub range: TextRange,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.range, self.message)
    }
}

/// A parse result: always a value, and the errors met on the way.
#[derive(Clone, Debug, PartialEq)]
pub struct Parsed<T> {
    pub value: T,
    pub errors: Vec<ParseError>,
}

impl<T> Parsed<T> {
    pub fn is_clean(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Parses a SASS listing of any supported format, recognised from its content.
///
/// Text that [`detect`] does not recognise (including PTX) is read as a text listing, which
/// reports what it cannot read.
pub fn parse(text: &str) -> Parsed<SassModule<'_>> {
    match detect(text) {
        Some(SassFormat::NvdisasmJson) => parse_json(text),
        Some(format) => text::parse_listing(text, format, text::Context::default()),
        None => text::parse_listing(text, SassFormat::NvdisasmText, text::Context::default()),
    }
}

/// The format a text listing is parsed as: cuobjdump's when [`detect`] says so, nvdisasm's
/// otherwise (the two share one grammar here).
pub fn text_format(text: &str) -> SassFormat {
    match detect(text) {
        Some(SassFormat::CuobjdumpText) => SassFormat::CuobjdumpText,
        _ => SassFormat::NvdisasmText,
    }
}

/// Parses a `cuobjdump -sass` or `nvdisasm` text listing (both share one grammar here).
pub fn parse_text(text: &str) -> Parsed<SassModule<'_>> {
    let format = text_format(text);
    text::parse_listing(text, format, text::Context::default())
}

/// Parses a text listing that holds one function: a chunk that [`FunctionSplitter`] or
/// [`split_functions`] cut out of a larger listing, with `arch`, the architecture the listing
/// named before it (the text's own `.target` line, if any, takes precedence). Otherwise the
/// result is [`parse_text`]'s; knowing that the text is one function lets the parser size the
/// instruction table from its length instead of growing it.
pub fn parse_function_text(text: &str, arch: Option<Arch>) -> Parsed<SassModule<'_>> {
    let format = text_format(text);
    let context = text::Context { arch, one_function: true, ..text::Context::default() };
    text::parse_listing(text, format, context)
}

/// [`parse_text`] into a [`ListingSink`] instead of a syntax tree; returns the parse errors.
pub fn parse_text_into<'a>(text: &'a str, sink: &mut impl ListingSink<'a>) -> Vec<ParseError> {
    let format = text_format(text);
    text::parse_listing_into(text, 0, text.len(), format, text::Context::default(), sink)
}

/// [`parse_function_text`] into a [`ListingSink`] instead of a syntax tree; returns the parse
/// errors.
pub fn parse_function_text_into<'a>(
    text: &'a str,
    arch: Option<Arch>,
    sink: &mut impl ListingSink<'a>,
) -> Vec<ParseError> {
    let format = text_format(text);
    let context = text::Context { arch, one_function: true, ..text::Context::default() };
    text::parse_listing_into(text, 0, text.len(), format, context, sink)
}

/// Parses `nvdisasm -json` output.
pub fn parse_json(text: &str) -> Parsed<SassModule<'_>> {
    json::parse_json(text)
}
