//! The reader of `nvdisasm -json` output.
//!
//! The document is `[ {metadata}, [ {function}, ... ] ]` on one line. A small scanner walks the
//! two outer levels and each function object, so that spans are known and a truncated document
//! still yields the functions and instructions that are complete; serde reads the metadata and
//! each instruction object, borrowing its strings from the input. Unknown fields are ignored.

use fencelint_source::TextRange;
use serde::Deserialize;
use serde_json::value::RawValue;

use crate::ast::{Arch, Operand, SassFunction, SassInst, SassModule};
use crate::operand::{Stop, claim_symbols, scan_operands};
use crate::scan::find_either;
use crate::text::{numeric_target, parse_guard, resolve_targets};
use crate::{ParseError, Parsed, SassFormat};

/// The size of one instruction: JSON has no addresses, so instruction `i` is at `start + 16*i`.
const INST_SIZE: u64 = 16;

#[derive(Deserialize)]
struct Metadata<'a> {
    #[serde(rename = "SM", default)]
    sm: Option<SmInfo>,
    #[serde(rename = "Producer", borrow, default)]
    producer: Option<&'a RawValue>,
    #[serde(rename = ".note.nv.tkinfo", borrow, default)]
    tkinfo: Option<TkInfo<'a>>,
}

#[derive(Deserialize)]
struct SmInfo {
    #[serde(default)]
    version: Option<SmVersion>,
}

#[derive(Deserialize)]
struct SmVersion {
    major: u32,
    #[serde(default)]
    minor: u32,
}

#[derive(Deserialize)]
struct TkInfo<'a> {
    #[serde(rename = "tki_toolOptions", borrow, default)]
    tool_options: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct JsonInst<'a> {
    #[serde(borrow, default)]
    predicate: Option<&'a str>,
    #[serde(borrow)]
    opcode: &'a str,
    #[serde(borrow, default)]
    operands: Option<&'a str>,
}

/// Why a value could not be scanned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ScanError {
    /// The text ends inside the value.
    Truncated,
    /// The text is not JSON here.
    Invalid,
}

struct Scanner<'a> {
    text: &'a str,
    pos: usize,
    errors: Vec<ParseError>,
    /// A reused buffer for the operands of one instruction.
    scratch: Vec<Operand<'a>>,
}

/// The byte offset of `inner` in `outer`; `inner` must be a slice of `outer`.
fn offset_in(outer: &str, inner: &str) -> usize {
    (inner.as_ptr() as usize).saturating_sub(outer.as_ptr() as usize)
}

/// The contents of a JSON string given as raw JSON, when it has no escapes.
fn raw_str(raw: &RawValue) -> Option<&str> {
    let inner = raw.get().strip_prefix('"')?.strip_suffix('"')?;
    (!inner.contains('\\')).then_some(inner)
}

pub(crate) fn parse_json(text: &str) -> Parsed<SassModule<'_>> {
    let mut scanner = Scanner { text, pos: 0, errors: Vec::new(), scratch: Vec::new() };
    let mut module =
        SassModule { format: SassFormat::NvdisasmJson, functions: Vec::new(), producer: None };
    scanner.document(&mut module);
    Parsed { value: module, errors: scanner.errors }
}

/// Parses the function object in `text[start..end]` (a chunk of a JSON listing); ranges are
/// relative to `text`.
pub(crate) fn parse_function_object_in(
    text: &str,
    start: usize,
    end: usize,
    arch: Option<Arch>,
) -> Parsed<SassModule<'_>> {
    let text = &text[..end.min(text.len())];
    let mut scanner = Scanner { text, pos: start, errors: Vec::new(), scratch: Vec::new() };
    let mut module =
        SassModule { format: SassFormat::NvdisasmJson, functions: Vec::new(), producer: None };
    scanner.skip_ws();
    if scanner.peek() == Some(b'{') {
        scanner.function(&mut module, arch);
        scanner.skip_ws();
        if scanner.pos < text.len() {
            scanner.error(scanner.pos, text.len(), "unexpected text after the function object");
        }
    } else {
        scanner.error(start, text.len(), "expected a JSON function object");
    }
    Parsed { value: module, errors: scanner.errors }
}

/// Finds the architecture and the function objects (`start..end`) of a JSON listing without
/// parsing them; a truncated last object reaches the end of the text.
pub(crate) fn split_json(text: &str) -> (Option<Arch>, Vec<(usize, usize)>) {
    let mut scanner = Scanner { text, pos: 0, errors: Vec::new(), scratch: Vec::new() };
    let mut objects = Vec::new();
    scanner.skip_ws();
    if text[scanner.pos..].starts_with('\u{feff}') {
        scanner.pos += '\u{feff}'.len_utf8();
    }
    if !scanner.eat(b'[') {
        return (None, objects);
    }
    scanner.skip_ws();
    let meta_start = scanner.pos;
    let Ok(meta_end) = scanner.value_end(meta_start) else { return (None, objects) };
    let arch = metadata_arch_of(&text[meta_start..meta_end]);
    scanner.pos = meta_end;
    if !scanner.eat(b',') || !scanner.eat(b'[') {
        return (arch, objects);
    }
    loop {
        scanner.skip_ws();
        if scanner.peek() != Some(b'{') {
            break;
        }
        let start = scanner.pos;
        let Ok(end) = scanner.value_end(start) else {
            objects.push((start, text.len()));
            break;
        };
        objects.push((start, end));
        scanner.pos = end;
        if !scanner.eat(b',') {
            break;
        }
    }
    (arch, objects)
}

/// The architecture named by a JSON metadata object.
pub(crate) fn metadata_arch_of(text: &str) -> Option<Arch> {
    serde_json::from_str::<Metadata<'_>>(text).ok().as_ref().and_then(metadata_arch)
}

impl<'a> Scanner<'a> {
    fn error(&mut self, start: usize, end: usize, message: impl Into<String>) {
        self.errors
            .push(ParseError { range: TextRange::from_usize(start, end), message: message.into() });
    }

    fn truncated(&mut self, start: usize) {
        self.error(start, self.text.len(), "the JSON document is truncated here");
    }

    fn skip_ws(&mut self) {
        let bytes = self.text.as_bytes();
        while self.pos < bytes.len() && matches!(bytes[self.pos], b' ' | b'\t' | b'\n' | b'\r') {
            self.pos += 1;
        }
    }

    fn peek(&self) -> Option<u8> {
        self.text.as_bytes().get(self.pos).copied()
    }

    /// Skips whitespace and consumes `byte` when it is next.
    fn eat(&mut self, byte: u8) -> bool {
        self.skip_ws();
        if self.peek() == Some(byte) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    /// Finds the end of the value starting at `start` (after whitespace).
    fn value_end(&self, start: usize) -> Result<usize, ScanError> {
        let bytes = self.text.as_bytes();
        let mut index = start;
        let mut depth = 0usize;
        loop {
            let Some(&byte) = bytes.get(index) else { return Err(ScanError::Truncated) };
            match byte {
                b'"' => {
                    index += 1;
                    loop {
                        // Jump to the next quote or backslash.
                        let Some(at) = find_either(bytes, index, b'"', b'\\') else {
                            return Err(ScanError::Truncated);
                        };
                        if bytes[at] == b'"' {
                            index = at + 1;
                            break;
                        }
                        index = at + 2;
                    }
                }
                b'{' | b'[' => {
                    depth += 1;
                    index += 1;
                }
                b'}' | b']' => {
                    if depth == 0 {
                        return Err(ScanError::Invalid);
                    }
                    depth -= 1;
                    index += 1;
                }
                b',' | b':' | b' ' | b'\t' | b'\n' | b'\r' if depth > 0 => index += 1,
                b'-' | b'+' | b'.' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z' => {
                    while bytes.get(index).is_some_and(|b| {
                        b.is_ascii_alphanumeric() || matches!(b, b'-' | b'+' | b'.')
                    }) {
                        index += 1;
                    }
                    if depth == 0 && index == bytes.len() {
                        return Err(ScanError::Truncated);
                    }
                }
                _ => return Err(ScanError::Invalid),
            }
            if depth == 0 {
                return Ok(index);
            }
        }
    }

    /// Reads a string's raw contents (escapes kept) and moves past it.
    fn string(&mut self) -> Result<&'a str, ScanError> {
        self.skip_ws();
        if self.peek() != Some(b'"') {
            return if self.pos >= self.text.len() {
                Err(ScanError::Truncated)
            } else {
                Err(ScanError::Invalid)
            };
        }
        let end = self.value_end(self.pos)?;
        let inner = &self.text[self.pos + 1..end - 1];
        self.pos = end;
        Ok(inner)
    }

    /// Skips one value.
    fn skip_value(&mut self) -> Result<(), ScanError> {
        self.skip_ws();
        self.pos = self.value_end(self.pos)?;
        Ok(())
    }

    /// Reports a scan error at the current position; returns `false`.
    fn fail(&mut self, error: ScanError, what: &str) -> bool {
        match error {
            ScanError::Truncated => self.truncated(self.pos),
            ScanError::Invalid => {
                let mut end = (self.pos + 1).min(self.text.len());
                while !self.text.is_char_boundary(end) {
                    end += 1;
                }
                self.error(self.pos, end, format!("invalid JSON in {what}"));
            }
        }
        false
    }

    fn document(&mut self, module: &mut SassModule<'a>) {
        self.skip_ws();
        if self.text[self.pos..].starts_with('\u{feff}') {
            self.pos += '\u{feff}'.len_utf8();
        }
        if !self.eat(b'[') {
            self.error(self.pos, self.text.len(), "expected `[` at the start of nvdisasm JSON");
            return;
        }
        self.skip_ws();
        let meta_start = self.pos;
        let mut arch = None;
        match self.value_end(meta_start) {
            Ok(end) => {
                self.pos = end;
                match serde_json::from_str::<Metadata<'a>>(&self.text[meta_start..end]) {
                    Ok(meta) => {
                        module.producer = meta.producer.and_then(raw_str);
                        arch = metadata_arch(&meta);
                    }
                    Err(error) => {
                        self.error(meta_start, end, format!("unreadable metadata: {error}"));
                    }
                }
            }
            Err(error) => {
                self.fail(error, "the metadata");
                return;
            }
        }
        if !self.eat(b',') || !self.eat(b'[') {
            if self.pos >= self.text.len() {
                self.truncated(self.pos);
            } else {
                self.error(self.pos, self.text.len(), "expected the array of functions");
            }
            return;
        }
        loop {
            self.skip_ws();
            match self.peek() {
                None => {
                    self.truncated(self.pos);
                    return;
                }
                Some(b']') => {
                    self.pos += 1;
                    break;
                }
                Some(b'{') => {
                    let complete = self.function(module, arch);
                    if !complete {
                        return;
                    }
                }
                Some(_) => {
                    self.error(self.pos, self.text.len(), "expected a function object");
                    return;
                }
            }
            if self.eat(b',') {
                continue;
            }
            if self.eat(b']') {
                break;
            }
            if self.pos >= self.text.len() {
                self.truncated(self.pos);
            } else {
                self.error(self.pos, self.text.len(), "expected `,` or `]` after a function");
            }
            return;
        }
        if !self.eat(b']') {
            if self.pos >= self.text.len() {
                self.truncated(self.pos);
            } else {
                self.error(self.pos, self.text.len(), "expected `]` at the end of nvdisasm JSON");
            }
        }
    }

    /// Reads one function object at the current position. Returns `false` when the document
    /// cannot be read past it (what was complete is kept).
    fn function(&mut self, module: &mut SassModule<'a>, arch: Option<Arch>) -> bool {
        let start = self.pos;
        self.pos += 1;
        let mut name = "";
        let mut base = 0u64;
        let mut instructions = Vec::new();
        let mut complete = true;
        loop {
            self.skip_ws();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    break;
                }
                None => {
                    complete = self.fail(ScanError::Truncated, "a function");
                    break;
                }
                _ => {}
            }
            let key = match self.string() {
                Ok(key) => key,
                Err(error) => {
                    complete = self.fail(error, "a function");
                    break;
                }
            };
            if !self.eat(b':') {
                complete = self.fail(
                    if self.pos >= self.text.len() {
                        ScanError::Truncated
                    } else {
                        ScanError::Invalid
                    },
                    "a function",
                );
                break;
            }
            let result = match key {
                "function-name" => self.string().map(|value| {
                    name = value;
                }),
                "start" => self.number().map(|value| base = value),
                "sass-instructions" => self.instructions(&mut instructions),
                _ => self.skip_value(),
            };
            if let Err(error) = result {
                complete = self.fail(error, "a function");
                break;
            }
            if self.eat(b',') {
                continue;
            }
            self.skip_ws();
            if self.peek() != Some(b'}') {
                let error = if self.pos >= self.text.len() {
                    ScanError::Truncated
                } else {
                    ScanError::Invalid
                };
                complete = self.fail(error, "a function");
                break;
            }
        }
        if name.contains('\\') {
            self.error(start, self.pos, "the function name has escapes; it is kept as written");
        }
        // Branch targets are section offsets already; only the addresses move.
        for inst in &mut instructions {
            inst.address += base;
        }
        resolve_targets(name, &mut instructions, &[]);
        module.functions.push(SassFunction {
            name,
            arch,
            binary: None,
            range: TextRange::from_usize(start, self.pos.min(self.text.len())),
            instructions,
            labels: Vec::new(),
        });
        complete
    }

    fn number(&mut self) -> Result<u64, ScanError> {
        self.skip_ws();
        let start = self.pos;
        let end = self.value_end(start)?;
        self.pos = end;
        self.text[start..end].parse().map_err(|_| ScanError::Invalid)
    }

    /// Reads the `sass-instructions` array; a truncated array keeps its complete elements.
    fn instructions(&mut self, out: &mut Vec<SassInst<'a>>) -> Result<(), ScanError> {
        if !self.eat(b'[') {
            return Err(if self.pos >= self.text.len() {
                ScanError::Truncated
            } else {
                ScanError::Invalid
            });
        }
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Err(ScanError::Truncated),
                Some(b']') => {
                    self.pos += 1;
                    return Ok(());
                }
                Some(_) => {}
            }
            let start = self.pos;
            let end = self.value_end(start)?;
            self.pos = end;
            let address = INST_SIZE * out.len() as u64;
            out.push(self.instruction(start, end, address));
            if self.eat(b',') {
                continue;
            }
            self.skip_ws();
            if self.peek() != Some(b']') {
                return Err(if self.pos >= self.text.len() {
                    ScanError::Truncated
                } else {
                    ScanError::Invalid
                });
            }
        }
    }

    fn instruction(&mut self, start: usize, end: usize, address: u64) -> SassInst<'a> {
        let text = self.text;
        let range = TextRange::from_usize(start, end);
        let mut inst = SassInst {
            address,
            guard: None,
            opcode: "",
            operands: Vec::new(),
            range,
            src_line: None,
            inlined_at: None,
            ptx_line: None,
            branch_target: None,
            encoding: None,
            malformed: false,
        };
        let parsed = match serde_json::from_str::<JsonInst<'a>>(&text[start..end]) {
            Ok(parsed) => parsed,
            Err(error) => {
                self.error(start, end, format!("unreadable instruction: {error}"));
                inst.malformed = true;
                return inst;
            }
        };
        inst.opcode = parsed.opcode;
        // nvdisasm's JSON writer files the `PR` operand of `P2R Rd, PR, Rb, mask` under
        // "predicate" (`{"predicate":"PR","opcode":"P2R","operands":"R0,RZ,0x4"}`, 689 times
        // in NCCL's sm_90 cubin); it goes back to where the text listing has it.
        let mut moved_operand = None;
        if let Some(predicate) = parsed.predicate.filter(|p| *p == "PR") {
            let at = offset_in(text, predicate);
            moved_operand = Some(crate::operand::parse_operand(predicate, at));
        } else if let Some(predicate) = parsed.predicate {
            inst.guard = predicate.strip_prefix('@').and_then(parse_guard);
            if inst.guard.is_none() {
                let at = offset_in(text, predicate);
                self.error(
                    at,
                    at + predicate.len(),
                    format!("unrecognised predicate `{predicate}`"),
                );
                inst.malformed = true;
            }
        }
        if let Some(operands) = parsed.operands {
            let at = offset_in(text, operands);
            self.scratch.clear();
            if let Stop::Semicolon(_) | Stop::Comment(_) =
                scan_operands(operands, 0, at, &mut self.scratch)
            {
                self.error(at, at + operands.len(), "unexpected `;` or comment in JSON operands");
            }
            inst.operands = self.scratch.as_slice().to_vec();
        }
        if let Some(operand) = moved_operand {
            inst.operands.insert(inst.operands.len().min(1), operand);
        }
        claim_symbols(inst.opcode, &mut inst.operands);
        inst.branch_target = numeric_target(inst.opcode, &inst.operands);
        inst
    }
}

/// The architecture from `-arch sm_XX` in the ptxas options, else from `SM.version`.
fn metadata_arch(meta: &Metadata<'_>) -> Option<Arch> {
    let options = meta.tkinfo.as_ref().and_then(|tk| tk.tool_options).and_then(raw_str);
    let from_options = options.and_then(|options| {
        let mut words = options.split_whitespace();
        words.find(|word| *word == "-arch" || *word == "--gpu-name")?;
        Arch::parse(words.next()?)
    });
    from_options.or_else(|| {
        let version = meta.sm.as_ref()?.version.as_ref()?;
        Some(Arch::from_version(version.major, version.minor))
    })
}
