//! The parser of the text listings: `cuobjdump -sass` and `nvdisasm` (with or without `-c`,
//! `-g`, `-gi`, `-gp`, `-hex`), and hand-written snippets in either style.
//!
//! One pass over the lines, no backtracking. Each line is classified by its first bytes:
//! `/*0030*/` starts an instruction, `/* 0x` continues its encoding, `//` is a comment (line-info
//! markers and section separators are comments too), `.` a directive or label, and a few fixed
//! words start the cuobjdump headers. Lines in data sections are skipped.

use std::sync::Arc;

use fencelint_source::TextRange;

use crate::ast::{
    Arch, Guard, Operand, OperandKind, RegFile, Register, SassFunction, SassInst, SassLabel,
    SassModule, SrcLine,
};
use crate::operand::{Stop, claim_symbols, parse_hex, scan_operands};
pub(crate) use crate::scan::skip_blanks;
use crate::scan::{find_byte, find_pair, opcode_end};
use crate::{ParseError, Parsed, SassFormat};

/// The most call sites kept for one source line (damaged `-gi` markers can chain any number).
const MAX_INLINE_DEPTH: usize = 64;

/// What the parser knows about the cubin around the functions it reads.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Context<'a> {
    pub(crate) arch: Option<Arch>,
    pub(crate) binary: Option<&'a str>,
    /// The text is one function (a chunk): its instruction vector is sized from the text's
    /// length up front instead of growing.
    pub(crate) one_function: bool,
}

/// Receives what the text parser reads, one instruction at a time, instead of a syntax tree.
///
/// A consumer that turns each instruction into something else at once (the lowering into the
/// IR) keeps neither the tree nor an operand vector per instruction: the parser reuses one
/// operand buffer for every line. [`crate::parse_text`] and the other tree-building entry
/// points are this parser with a sink that collects a [`SassModule`].
pub trait ListingSink<'a> {
    /// The listing is read as `format`: called once, before anything else.
    fn listing(&mut self, format: SassFormat) {
        let _ = format;
    }

    /// A function starts; about `expected` instructions follow when the text is known to be
    /// one function (0 when unknown).
    fn open_function(&mut self, expected: usize) {
        let _ = expected;
    }

    /// One instruction of the open function, in input order. `inst.operands` is empty: the
    /// operands are `operands`, valid for this call only. `inst.branch_target` holds a numeric
    /// target; a `` `(.L_x_8) `` label target is left to the sink, which knows all the labels
    /// only at [`Self::close_function`].
    fn instruction(&mut self, inst: SassInst<'a>, operands: &[Operand<'a>]);

    /// The encoding comment of the last instruction grew by `range` (cuobjdump writes the
    /// second word on a line of its own).
    fn extend_encoding(&mut self, range: TextRange) {
        let _ = range;
    }

    /// The open function ends. `function.instructions` is empty (they went to
    /// [`Self::instruction`]); every label has its address.
    fn close_function(&mut self, function: SassFunction<'a>);
}

/// The sink that builds the syntax tree.
#[derive(Default)]
struct TreeSink<'a> {
    functions: Vec<SassFunction<'a>>,
    instructions: Vec<SassInst<'a>>,
}

impl<'a> ListingSink<'a> for TreeSink<'a> {
    fn open_function(&mut self, expected: usize) {
        self.instructions = Vec::with_capacity(expected);
    }

    fn instruction(&mut self, mut inst: SassInst<'a>, operands: &[Operand<'a>]) {
        // Copied out of the parser's buffer at their exact size: one allocation per
        // instruction, none for growth.
        inst.operands = operands.to_vec();
        self.instructions.push(inst);
    }

    fn extend_encoding(&mut self, range: TextRange) {
        if let Some(inst) = self.instructions.last_mut() {
            inst.encoding = Some(inst.encoding.map_or(range, |old| old.cover(range)));
        }
    }

    fn close_function(&mut self, mut function: SassFunction<'a>) {
        function.instructions = std::mem::take(&mut self.instructions);
        resolve_targets(function.name, &mut function.instructions, &function.labels);
        self.functions.push(function);
    }
}

/// Parses a text listing. `context` is what is known from outside the text (for chunks cut by
/// [`crate::FunctionSplitter`]).
pub(crate) fn parse_listing<'a>(
    text: &'a str,
    format: SassFormat,
    context: Context<'a>,
) -> Parsed<SassModule<'a>> {
    parse_listing_in(text, 0, text.len(), format, context)
}

/// Parses the lines of `text[start..end]` (`start` at a line start); ranges are relative to
/// `text`.
pub(crate) fn parse_listing_in<'a>(
    text: &'a str,
    start: usize,
    end: usize,
    format: SassFormat,
    context: Context<'a>,
) -> Parsed<SassModule<'a>> {
    let mut sink = TreeSink::default();
    let errors = parse_listing_into(text, start, end, format, context, &mut sink);
    Parsed { value: SassModule { format, functions: sink.functions, producer: None }, errors }
}

/// Parses the lines of `text[start..end]` into `sink` and returns the errors.
pub(crate) fn parse_listing_into<'a, S: ListingSink<'a>>(
    text: &'a str,
    start: usize,
    end: usize,
    format: SassFormat,
    context: Context<'a>,
    sink: &mut S,
) -> Vec<ParseError> {
    sink.listing(format);
    let text_end = end.min(text.len());
    let mut parser = Parser {
        text,
        errors: Vec::new(),
        sink,
        context,
        mode: Mode::Outside,
        function: None,
        src_line: None,
        inlined_at: None,
        ptx_line: None,
        last_was_inst: false,
        inline_pending: false,
        scratch: Vec::new(),
        format,
        text_end,
    };
    let bytes = &text.as_bytes()[..text_end];
    let mut start = start;
    // A byte-order mark at the start of the input is no part of the listing (format detection
    // and the streaming splitter pass over it too).
    if start == 0 && text.starts_with('\u{feff}') {
        start = '\u{feff}'.len_utf8();
    }
    while start < bytes.len() {
        // Leading blanks are skipped once, and the newline is searched only after them (an
        // encoding continuation line is mostly blanks).
        let first = skip_blanks(bytes, start);
        let newline = find_byte(bytes, first, b'\n').unwrap_or(bytes.len());
        let mut end = newline;
        if end > first && bytes[end - 1] == b'\r' {
            end -= 1;
        }
        parser.line(start, first, end);
        start = newline + 1;
    }
    parser.close_function();
    parser.errors
}

/// Where the parser is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Before the first function, between cuobjdump functions, or in a cubin header.
    Outside,
    /// Inside a function's code.
    Code,
    /// Inside a data section, the symbol trailer, or a PTX entry of a fat binary: skipped.
    Data,
}

struct FunctionBuilder<'a> {
    name: &'a str,
    start: usize,
    end: usize,
    /// How many instructions went to the sink, and the addresses of the last two.
    count: usize,
    before_last: Option<u64>,
    last: Option<u64>,
    labels: Vec<SassLabel<'a>>,
    /// Labels from this index on wait for the address of the next instruction.
    pending_labels: usize,
    /// The last instruction that is not a `NOP`, where it lies, and whether the code can go on
    /// past it (see [`Parser::close_function`]).
    last_inst: Option<(usize, usize, &'a str, bool)>,
    /// Whether cuobjdump's `..........` line closed the function.
    terminated: bool,
}

struct Parser<'a, 's, S> {
    text: &'a str,
    errors: Vec<ParseError>,
    sink: &'s mut S,
    context: Context<'a>,
    mode: Mode,
    function: Option<FunctionBuilder<'a>>,
    src_line: Option<SrcLine<'a>>,
    /// The call sites of `src_line`, innermost first (`-gi`), shared by its instructions.
    inlined_at: Option<Arc<[SrcLine<'a>]>>,
    ptx_line: Option<u32>,
    /// Whether the previous non-blank line was an instruction (for encoding continuations).
    last_was_inst: bool,
    /// Whether the last marker was an `inlined at` one and no instruction followed it yet.
    inline_pending: bool,
    scratch: Vec<Operand<'a>>,
    format: SassFormat,
    /// Where the parsed part of `text` ends.
    text_end: usize,
}

fn trim_end_blanks(bytes: &[u8], from: usize, mut end: usize) -> usize {
    while end > from && matches!(bytes[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    end
}

/// The function name of a code section name (`.text.name`), if it is one.
pub(crate) fn code_section_function(section: &str) -> Option<&str> {
    section.strip_prefix(".text.").filter(|name| !name.is_empty())
}

/// The name that `.type name,@function` gives a function: nvdisasm names a function's section
/// and its symbol apart when several functions of a cubin share a name (the compiler's helpers,
/// one copy per section): `.section .text.__cuda_sm20_div_s64__1` holds
/// `.type __cuda_sm20_div_s64__5,@function`, and calls name `__cuda_sm20_div_s64__5`. For any
/// other function the two names are the same.
pub(crate) fn function_type(argument: &str) -> Option<&str> {
    let (name, kind) = argument.split_once(',')?;
    let name = name.trim();
    (kind.trim() == "@function" && !name.is_empty()).then_some(name)
}

/// The section named by an nvdisasm separator `//----- .text.name -----`, if the line is one.
pub(crate) fn separator_section(comment: &str) -> Option<&str> {
    let rest = comment.strip_prefix("//---")?;
    let name = rest.trim_start_matches('-').trim().trim_end_matches('-').trim_end();
    Some(name)
}

/// Whether `line` (trimmed) is a label definition `name:`: one word ending in a colon.
pub(crate) fn label_name(trimmed: &str) -> Option<&str> {
    let name = trimmed.strip_suffix(':')?;
    (!name.is_empty() && !name.bytes().any(|b| b.is_ascii_whitespace() || b == b'"' || b == b','))
        .then_some(name)
}

/// Cuts a trailing `//` comment off a non-instruction line.
fn strip_comment(line: &str) -> &str {
    find_pair(line.as_bytes(), 0, b'/', b'/').map_or(line, |at| &line[..at]).trim_end()
}

/// Whether an opcode may be a control-flow instruction that names a code target. A cheap
/// first-letter test guards the string comparisons of the hot path.
pub(crate) fn may_transfer_control(opcode: &str) -> bool {
    matches!(opcode.as_bytes().first(), Some(b'B' | b'C' | b'J' | b'P' | b'R' | b'S'))
}

impl<'a, S: ListingSink<'a>> Parser<'a, '_, S> {
    fn error(&mut self, start: usize, end: usize, message: impl Into<String>) {
        self.errors
            .push(ParseError { range: TextRange::from_usize(start, end), message: message.into() });
    }

    fn line(&mut self, start: usize, first: usize, end: usize) {
        let bytes = self.text.as_bytes();
        if first >= end {
            return;
        }
        let end = trim_end_blanks(bytes, first, end);
        let was_inst = std::mem::replace(&mut self.last_was_inst, false);
        match bytes[first] {
            b'/' => match bytes.get(first + 1) {
                Some(b'*') if bytes.get(first + 2).is_some_and(u8::is_ascii_hexdigit) => {
                    self.address_line(start, first, end);
                }
                Some(b'*') => {
                    if was_inst && self.mode == Mode::Code {
                        self.extend_encoding(first, end);
                        self.last_was_inst = true;
                    }
                }
                Some(b'/') => self.comment(start, first, end),
                _ => self.other_line(start, first, end),
            },
            b'.' => self.dot_line(start, first, end),
            _ => self.other_line(start, first, end),
        }
    }

    /// Marks the current function as reaching `end`.
    fn touch(&mut self, end: usize) {
        if self.mode == Mode::Code
            && let Some(function) = &mut self.function
        {
            function.end = end;
        }
    }

    fn open_function(&mut self, name: &'a str, start: usize, end: usize) {
        self.close_function();
        let expected = if std::mem::take(&mut self.context.one_function) {
            // About 200 bytes per instruction in cuobjdump (two lines), 70 in nvdisasm.
            let per_inst = if self.format == SassFormat::CuobjdumpText { 192 } else { 64 };
            (self.text_end - start) / per_inst + 1
        } else {
            0
        };
        self.sink.open_function(expected);
        self.function = Some(FunctionBuilder {
            name,
            start,
            end,
            count: 0,
            before_last: None,
            last: None,
            labels: Vec::new(),
            pending_labels: 0,
            last_inst: None,
            terminated: false,
        });
        self.mode = Mode::Code;
        self.src_line = None;
        self.inlined_at = None;
        self.inline_pending = false;
        self.ptx_line = None;
    }

    fn close_function(&mut self) {
        let Some(mut function) = self.function.take() else { return };
        self.check_complete(&function);
        let end_address = end_address(function.before_last, function.last);
        for label in &mut function.labels[function.pending_labels..] {
            label.address = end_address;
        }
        self.sink.close_function(SassFunction {
            name: function.name,
            arch: self.context.arch,
            binary: self.context.binary,
            range: TextRange::from_usize(function.start, function.end),
            instructions: Vec::new(),
            labels: function.labels,
        });
        if self.mode == Mode::Code {
            self.mode = Mode::Outside;
        }
    }

    /// Reports a function whose code stops where no complete listing stops it: a listing cut
    /// short at a line boundary (a full disk, `head -c`, a killed disassembler) otherwise reads
    /// as a shorter function, with no word said. cuobjdump closes every function with a
    /// `..........` line; ptxas ends every function's code with a branch to itself (after the
    /// last `EXIT` or `RET`), which nvdisasm prints before the section's padding `NOP`s. Only
    /// functions with a header are checked (hand-written snippets have none).
    fn check_complete(&mut self, function: &FunctionBuilder<'a>) {
        let Some((first, end, opcode, goes_on)) = function.last_inst else { return };
        if function.name.is_empty() {
            return;
        }
        let message = match self.format {
            SassFormat::CuobjdumpText if !function.terminated => format!(
                "the listing ends inside `{}`: no `..........` line closes its code (the text \
                 looks truncated)",
                function.name
            ),
            SassFormat::NvdisasmText if goes_on => format!(
                "the listing ends inside `{}`: its last instruction `{opcode}` can fall through, \
                 and a function's code ends with a branch or an exit (the text looks truncated)",
                function.name
            ),
            _ => return,
        };
        self.error(first, end, message);
    }

    /// Makes sure there is a function to add code to (hand-written snippets have no header).
    fn ensure_function(&mut self, start: usize) {
        if self.function.is_none() || self.mode != Mode::Code {
            self.open_function("", start, start);
        }
    }

    fn extend_encoding(&mut self, first: usize, end: usize) {
        if self.function.as_ref().is_none_or(|f| f.count == 0) {
            return;
        }
        self.sink.extend_encoding(TextRange::from_usize(first, end));
        self.touch(end);
    }

    fn address_line(&mut self, start: usize, first: usize, end: usize) {
        let bytes = self.text.as_bytes();
        let digits_start = first + 2;
        let mut close = digits_start;
        while close < end && bytes[close].is_ascii_hexdigit() {
            close += 1;
        }
        let address = parse_hex(&self.text[digits_start..close]);
        let body = skip_blanks(bytes, (close + 2).min(end));
        if self.mode == Mode::Data || (body < end && bytes[body] == b'.') {
            // A data directive (`/*0000*/ .byte 0xff, ...`) or a line in a data section.
            return;
        }
        if bytes.get(close..close + 2) != Some(b"*/") || address.is_none() {
            self.error(first, end, "malformed address column");
            return;
        }
        self.ensure_function(start);
        self.instruction(first, body, end, address);
    }

    /// Parses the instruction text from `body` to `end`; `first` is where its range starts.
    fn instruction(&mut self, first: usize, body: usize, end: usize, address: Option<u64>) {
        let text = self.text;
        let bytes = text.as_bytes();
        let mut malformed = false;
        let mut index = body;
        let mut guard = None;
        if bytes.get(index) == Some(&b'@') {
            let guard_end = index
                + bytes[index..end]
                    .iter()
                    .position(|b| matches!(b, b' ' | b'\t'))
                    .unwrap_or(end - index);
            if let Some(parsed) = parse_guard(&text[index + 1..guard_end]) {
                guard = Some(parsed);
            } else {
                self.error(
                    index,
                    guard_end,
                    format!("unrecognised predicate `{}`", &text[index..guard_end]),
                );
                malformed = true;
            }
            index = skip_blanks(bytes, guard_end);
        }
        let opcode_start = index;
        index = opcode_end(bytes, index, end);
        let opcode = &text[opcode_start..index];
        if opcode.is_empty() || !bytes[opcode_start].is_ascii_alphabetic() {
            self.error(first, end, "missing opcode");
            malformed = true;
        }
        // Operands are collected in a reused buffer, which the sink reads.
        let mut operands = std::mem::take(&mut self.scratch);
        operands.clear();
        let stop = scan_operands(&text[..end], index, 0, &mut operands);
        let (inst_end, tail) = match stop {
            Stop::Semicolon(at) => (at + 1, at + 1),
            Stop::Comment(at) => (trim_end_blanks(bytes, first, at), at),
            Stop::End => (end, end),
        };
        if !matches!(stop, Stop::Semicolon(_)) && !malformed {
            self.error(first, inst_end, "instruction is not terminated by `;`");
        }
        let encoding = self.tail(tail, end);
        let function = self.function.as_mut().expect("a function is open");
        let address = address.unwrap_or_else(|| end_address(function.before_last, function.last));
        for label in &mut function.labels[function.pending_labels..] {
            label.address = address;
        }
        function.pending_labels = function.labels.len();
        let out_of_order = function.last.is_some_and(|last| last >= address);
        function.before_last = function.last;
        function.last = Some(address);
        function.count += 1;
        if out_of_order {
            self.errors.push(ParseError {
                range: TextRange::from_usize(first, inst_end),
                message: format!("address {address:#06x} does not follow the previous instruction"),
            });
        }
        claim_symbols(opcode, &mut operands);
        let branch_target = numeric_target(opcode, &operands);
        let function = self.function.as_mut().expect("a function is open");
        function.end = end;
        if opcode_base(opcode) != "NOP" {
            function.last_inst = Some((first, inst_end, opcode, !ends_the_code(opcode, guard)));
        }
        self.sink.instruction(
            SassInst {
                address,
                guard,
                opcode,
                operands: Vec::new(),
                range: TextRange::from_usize(first, inst_end),
                src_line: self.src_line,
                inlined_at: self.inlined_at.clone(),
                ptx_line: self.ptx_line,
                branch_target,
                encoding,
                malformed,
            },
            &operands,
        );
        self.scratch = operands;
        self.last_was_inst = true;
        self.inline_pending = false;
    }

    /// Reads what follows the `;`: encoding comments and `//` comments.
    fn tail(&mut self, from: usize, end: usize) -> Option<TextRange> {
        let bytes = self.text.as_bytes();
        let index = skip_blanks(bytes, from);
        if index >= end {
            return None;
        }
        if bytes[index..end].starts_with(b"//") {
            return None;
        }
        if bytes[index..end].starts_with(b"/*") {
            let close = find_pair(&bytes[..end], index + 2, b'*', b'/').map_or(end, |at| at + 2);
            let after = skip_blanks(bytes, close);
            if after < end && !bytes[after..end].starts_with(b"//") {
                self.error(after, end, "unexpected text after the instruction");
            }
            let is_encoding = bytes[index + 2..close].contains(&b'x');
            return is_encoding.then(|| TextRange::from_usize(index, close));
        }
        self.error(index, end, "unexpected text after the instruction");
        None
    }

    fn comment(&mut self, start: usize, first: usize, end: usize) {
        let comment = &self.text[first..end];
        if let Some(marker) = comment.strip_prefix("//##") {
            self.marker(first, end, marker.trim_start());
            return;
        }
        if let Some(section) = separator_section(comment) {
            if let Some(name) = code_section_function(section) {
                self.open_function(name, start, end);
            } else if section.starts_with('.') || section == "SYMBOLS" {
                self.close_function();
                self.mode = Mode::Data;
            }
            return;
        }
        // Any other comment (`// expect: ...` in fixtures) is ignored.
        self.touch(end);
    }

    /// Reads `File "x.cu", line N [inlined at "y.cu", line M]...`.
    fn marker(&mut self, first: usize, end: usize, marker: &'a str) {
        if self.mode == Mode::Data {
            return;
        }
        let Some((file, line, mut rest)) =
            parse_location(marker.strip_prefix("File ").unwrap_or(""))
        else {
            self.error(first, end, "unrecognised line-info marker");
            return;
        };
        if file == ".nv_debug_ptx_txt" {
            self.ptx_line = Some(line);
        } else {
            let mut sites = Vec::new();
            while let Some(next) = rest.trim_start().strip_prefix("inlined at ") {
                let Some((file, line, after)) = parse_location(next) else {
                    self.error(first, end, "unrecognised `inlined at` location");
                    break;
                };
                sites.push(SrcLine { file, line });
                rest = after;
            }
            let location = SrcLine { file, line };
            // `-gi` writes `A inlined at B`, then `B inlined at C`, ..., then the kernel's own
            // line, for the same instructions: a marker that continues the chain of the one
            // before (with no instruction between) extends it instead of replacing it.
            let chain = self.inlined_at.as_deref().unwrap_or_default();
            let continues = self.inline_pending && chain.last() == Some(&location);
            if continues {
                if !sites.is_empty() && chain.len() < MAX_INLINE_DEPTH {
                    let mut longer = chain.to_vec();
                    longer.extend(sites);
                    longer.truncate(MAX_INLINE_DEPTH);
                    self.inlined_at = Some(longer.into());
                }
            } else {
                self.src_line = Some(location);
                sites.truncate(MAX_INLINE_DEPTH);
                self.inlined_at = (!sites.is_empty()).then(|| sites.into());
            }
            self.inline_pending = self.inlined_at.is_some();
        }
        self.touch(end);
    }

    fn dot_line(&mut self, start: usize, first: usize, end: usize) {
        let line = strip_comment(&self.text[first..end]);
        if let Some(name) = label_name(line) {
            if self.mode == Mode::Code {
                let function = self.function.as_mut().expect("code mode has a function");
                function.labels.push(SassLabel {
                    name,
                    address: 0,
                    range: TextRange::from_usize(first, first + line.len()),
                });
                function.end = end;
            }
            return;
        }
        let (directive, argument) = line.split_once([' ', '\t']).unwrap_or((line, ""));
        let argument = argument.trim();
        match directive {
            ".section" => {
                let section = argument.split([',', ' ', '\t']).next().unwrap_or("");
                if let Some(name) = code_section_function(section) {
                    let same = self.mode == Mode::Code
                        && self.function.as_ref().is_some_and(|f| f.name == name && f.count == 0);
                    if same {
                        self.touch(end);
                    } else {
                        self.open_function(name, start, end);
                    }
                } else {
                    self.close_function();
                    self.mode = Mode::Data;
                }
            }
            ".target" => {
                if let Some(arch) = Arch::parse(argument) {
                    self.context.arch = Some(arch);
                }
                self.touch(end);
            }
            ".type" => {
                // The function's own name, where nvdisasm names its section apart.
                if let Some(name) = function_type(argument)
                    && self.mode == Mode::Code
                    && let Some(function) = self.function.as_mut().filter(|f| f.count == 0)
                {
                    function.name = name;
                }
                self.touch(end);
            }
            _ => {
                // cuobjdump's `..........` after a function's code: the function stays open (its
                // range ends here) until the next header.
                if directive.starts_with("..........")
                    && self.mode == Mode::Code
                    && let Some(function) = &mut self.function
                {
                    function.terminated = true;
                }
                self.touch(end);
            }
        }
    }

    fn other_line(&mut self, start: usize, first: usize, end: usize) {
        let text = self.text;
        let line = &text[first..end];
        if let Some(name) =
            line.strip_prefix("Function :").or_else(|| line.strip_prefix("Function:"))
        {
            self.open_function(name.trim(), start, end);
            return;
        }
        if line.starts_with("..........") {
            self.touch(end);
            if let Some(function) = &mut self.function {
                function.terminated = true;
            }
            self.close_function();
            self.mode = Mode::Outside;
            return;
        }
        if line.starts_with("Fatbin ") {
            self.close_function();
            self.context = Context::default();
            self.mode =
                if line.starts_with("Fatbin ptx code") { Mode::Data } else { Mode::Outside };
            return;
        }
        if let Some(arch) = line.strip_prefix("code for ") {
            self.close_function();
            self.mode = Mode::Outside;
            self.context.arch = Arch::parse(arch).or(self.context.arch);
            return;
        }
        if self.mode != Mode::Code {
            if let Some((key, value)) = line.split_once(" = ")
                && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b' ')
            {
                let value = value.trim();
                match key.trim() {
                    "arch" if self.mode == Mode::Outside => {
                        self.context.arch = Arch::parse(value);
                    }
                    "identifier" if self.mode == Mode::Outside => {
                        self.context.binary = Some(value);
                    }
                    _ => {}
                }
                return;
            }
            if self.mode == Mode::Data || line.bytes().all(|b| b == b'=') || line == "compressed" {
                return;
            }
        }
        let stripped = strip_comment(line);
        if let Some(name) = label_name(stripped) {
            if self.mode == Mode::Code {
                let function = self.function.as_mut().expect("code mode has a function");
                function.labels.push(SassLabel {
                    name,
                    address: 0,
                    range: TextRange::from_usize(first, first + stripped.len()),
                });
                function.end = end;
            }
            return;
        }
        let looks_like_inst = line.as_bytes()[0] == b'@' || line.as_bytes()[0].is_ascii_uppercase();
        if looks_like_inst && stripped.contains(';') {
            self.ensure_function(start);
            self.instruction(first, first, end, None);
            return;
        }
        self.error(first, end, "unrecognised line");
        self.touch(end);
    }
}

/// Whether the code cannot go on past this instruction: an unguarded (or `@PT`) branch, jump,
/// exit or return.
fn ends_the_code(opcode: &str, guard: Option<Guard>) -> bool {
    guard.is_none_or(Guard::is_always)
        && matches!(opcode_base(opcode), "BRA" | "BRX" | "JMP" | "JMX" | "EXIT" | "RET" | "KILL")
}

/// Reads `"file", line N` and returns the rest of the text.
fn parse_location(text: &str) -> Option<(&str, u32, &str)> {
    let quoted = text.strip_prefix('"')?;
    let close = quoted.find('"')?;
    let file = &quoted[..close];
    let rest = quoted[close + 1..].strip_prefix(", line ")?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let line = rest[..digits].parse().ok()?;
    Some((file, line, &rest[digits..]))
}

/// Reads a guard without its `@`: `P0`, `!P1`, `!PT`, `UP0`, `!UPT`.
pub(crate) fn parse_guard(text: &str) -> Option<Guard> {
    let (negated, name) = match text.strip_prefix('!') {
        Some(name) => (true, name),
        None => (false, text),
    };
    let (uniform, number) = match name.strip_prefix("UP") {
        Some(number) => (true, number),
        None => (false, name.strip_prefix('P')?),
    };
    let index = match number.as_bytes() {
        [b'T'] => Register::SPECIAL,
        [digit] if digit.is_ascii_digit() => u16::from(digit - b'0'),
        _ => return None,
    };
    let file = if uniform { RegFile::UP } else { RegFile::P };
    Some(Guard { reg: Register::new(file, index), negated, uniform })
}

/// The address after the last instruction, from the addresses of the last two: the last plus
/// the instruction size (16 bytes, or the step between the last two when that is smaller); 0
/// with no instruction.
pub(crate) fn end_address(before_last: Option<u64>, last: Option<u64>) -> u64 {
    match (before_last, last) {
        (_, None) => 0,
        (Some(before), Some(last)) if last > before && last - before < 16 => last + (last - before),
        (_, Some(last)) => last + 16,
    }
}

/// The opcode up to its first `.`.
pub(crate) fn opcode_base(opcode: &str) -> &str {
    let dot = opcode.bytes().position(|b| b == b'.').unwrap_or(opcode.len());
    &opcode[..dot]
}

/// The target of a branch written as a number (`BRA 0x200`, `BSSY B0, 0x210`,
/// `CALL.REL.NOINC 0x2b0`): the last operand of a relative control-flow opcode.
pub(crate) fn numeric_target(opcode: &str, operands: &[crate::ast::Operand<'_>]) -> Option<u64> {
    if !may_transfer_control(opcode) {
        return None;
    }
    let base = opcode_base(opcode);
    let takes_target = matches!(
        base,
        "BRA" | "BSSY" | "CALL" | "JMP" | "SSY" | "PBK" | "PCNT" | "PRET" | "CAL" | "JCAL"
    );
    if !takes_target || opcode.as_bytes().windows(4).any(|window| window == b".ABS") {
        return None;
    }
    match operands.last()?.kind {
        OperandKind::Imm(target) => u64::try_from(target).ok(),
        _ => None,
    }
}

/// Resolves `` `(label) `` targets against the function's labels (and its own name).
pub(crate) fn resolve_targets(
    name: &str,
    instructions: &mut [SassInst<'_>],
    labels: &[SassLabel<'_>],
) {
    if !instructions
        .iter()
        .any(|inst| inst.operands.iter().any(|op| matches!(op.kind, OperandKind::Label(_))))
    {
        return;
    }
    let mut sorted: Vec<(&str, u64)> =
        labels.iter().map(|label| (label.name, label.address)).collect();
    sorted.sort_unstable();
    let lookup = |target: &str| match sorted.binary_search_by(|(name, _)| (*name).cmp(target)) {
        Ok(index) => Some(sorted[index].1),
        Err(_) => (target == name).then_some(0),
    };
    for inst in instructions {
        if inst.branch_target.is_some() || inst.opcode.starts_with("RET") {
            continue;
        }
        let label = inst.operands.iter().rev().find_map(super::ast::Operand::label);
        if let Some(label) = label {
            inst.branch_target = lookup(label);
        }
    }
}
