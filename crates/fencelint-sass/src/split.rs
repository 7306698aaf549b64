//! Cuts a SASS listing read from a stream into one owned chunk per function.
//!
//! A whole-library disassembly is gigabytes of text; [`FunctionSplitter`] keeps only the
//! function being read in memory and hands out [`SassChunk`]s that the zero-copy parser reads
//! one at a time, or in parallel. Text listings are cut at their function headers; a
//! `nvdisasm -json` stream is cut at its function objects.

use std::io::{self, BufRead};

use crate::ast::{Arch, SassModule};
use crate::json::{metadata_arch_of, parse_function_object};
use crate::text::{Context, code_section_function, parse_listing, separator_section, skip_blanks};
use crate::{Parsed, SassFormat};

/// The longest line kept when skipping text outside functions; the rest is discarded.
const SKIPPED_LINE_CAP: usize = 64 * 1024;

/// The metadata object of a JSON stream is never larger than this in practice.
const JSON_METADATA_CAP: usize = 16 * 1024 * 1024;

/// One function's text with what the stream said about it before it started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SassChunk {
    /// The function's lines (from its header on), or its JSON object.
    pub text: String,
    pub format: SassFormat,
    /// The function name from the header (empty for code with no header).
    pub function: String,
    /// The architecture of the enclosing cubin (`code for sm_XX`, `.target`, JSON `SM`).
    pub arch: Option<Arch>,
    /// The `identifier = x.cu` of the enclosing fat-binary entry.
    pub binary: Option<String>,
    /// The byte offset of `text` in the stream.
    pub offset: u64,
    /// The 0-based line of the stream where `text` starts (0 for JSON, which is one line).
    pub line: u64,
}

impl SassChunk {
    /// Parses the chunk. Ranges are relative to [`SassChunk::text`]; add [`SassChunk::offset`]
    /// for positions in the stream.
    pub fn parse(&self) -> Parsed<SassModule<'_>> {
        match self.format {
            SassFormat::NvdisasmJson => parse_function_object(&self.text, self.arch),
            format => {
                let context = Context { arch: self.arch, binary: self.binary.as_deref() };
                parse_listing(&self.text, format, context)
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    Outside,
    Code,
    Data,
}

/// Where a JSON stream is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum JsonPhase {
    /// Before the `[` of the document.
    Start,
    /// Before the metadata object.
    Metadata,
    /// Between the metadata and the `[` of the functions.
    BeforeFunctions,
    /// Inside the array of functions.
    Functions,
    Done,
}

/// Splits a SASS listing from any [`BufRead`] into per-function [`SassChunk`]s.
///
/// Memory stays bounded by the largest function (plus a 64 KiB line cap outside functions).
/// The format is recognised from the first bytes: a stream starting with `[` is read as
/// `nvdisasm -json`, anything else as a text listing (cuobjdump or nvdisasm). Lines that are
/// not valid UTF-8 are kept with replacement characters.
pub struct FunctionSplitter<R> {
    reader: R,
    json: Option<JsonPhase>,
    mode: Mode,
    arch: Option<Arch>,
    binary: Option<String>,
    /// The chunk being built: its bytes, header and whether code was seen yet.
    chunk: Vec<u8>,
    function: Option<String>,
    format: SassFormat,
    has_code: bool,
    chunk_offset: u64,
    chunk_line: u64,
    /// A line read while inside a chunk that belongs after it.
    scratch: Vec<u8>,
    offset: u64,
    line: u64,
    sniffed: bool,
    failed: bool,
}

impl<R: BufRead> FunctionSplitter<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader,
            json: None,
            mode: Mode::Outside,
            arch: None,
            binary: None,
            chunk: Vec::new(),
            function: None,
            format: SassFormat::NvdisasmText,
            has_code: false,
            chunk_offset: 0,
            chunk_line: 0,
            scratch: Vec::new(),
            offset: 0,
            line: 0,
            sniffed: false,
            failed: false,
        }
    }

    /// Decides between JSON and text from the first non-blank byte.
    fn sniff(&mut self) -> io::Result<()> {
        self.sniffed = true;
        loop {
            let buffer = self.reader.fill_buf()?;
            let blanks = buffer.iter().take_while(|b| b.is_ascii_whitespace()).count();
            if buffer.is_empty() || blanks < buffer.len() {
                if buffer.get(blanks) == Some(&b'[') {
                    self.reader.consume(blanks);
                    self.offset += blanks as u64;
                    self.json = Some(JsonPhase::Start);
                }
                return Ok(());
            }
            // Only whitespace in this block: count its lines and look further.
            self.line += count_newlines(buffer);
            let len = buffer.len();
            self.reader.consume(len);
            self.offset += len as u64;
        }
    }

    fn finish_chunk(&mut self) -> Option<SassChunk> {
        let function = self.function.take()?;
        let bytes = std::mem::take(&mut self.chunk);
        let text = String::from_utf8(bytes)
            .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned());
        self.has_code = false;
        Some(SassChunk {
            text,
            format: self.format,
            function,
            arch: self.arch,
            binary: self.binary.clone(),
            offset: self.chunk_offset,
            line: self.chunk_line,
        })
    }

    /// Starts a chunk whose first line is in `self.scratch`.
    fn start_chunk(
        &mut self,
        function: String,
        format: SassFormat,
        line_offset: u64,
        line_number: u64,
    ) {
        self.function = Some(function);
        self.format = format;
        self.chunk.clear();
        self.chunk.extend_from_slice(&self.scratch);
        self.chunk_offset = line_offset;
        self.chunk_line = line_number;
        self.mode = Mode::Code;
        self.has_code = false;
    }

    /// Reads one line into `self.scratch` (capped), or appends it to the chunk when in code.
    /// Returns the number of bytes consumed (0 at the end of the stream).
    fn read_line(&mut self) -> io::Result<(usize, bool)> {
        if self.mode == Mode::Code {
            let before = self.chunk.len();
            let read = self.reader.read_until(b'\n', &mut self.chunk)?;
            return Ok((read, before < self.chunk.len()));
        }
        self.scratch.clear();
        let mut consumed = 0;
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok((consumed, false));
            }
            let (take, done) = match buffer.iter().position(|&b| b == b'\n') {
                Some(newline) => (newline + 1, true),
                None => (buffer.len(), false),
            };
            let room = SKIPPED_LINE_CAP.saturating_sub(self.scratch.len());
            self.scratch.extend_from_slice(&buffer[..take.min(room)]);
            self.reader.consume(take);
            consumed += take;
            if done {
                return Ok((consumed, false));
            }
        }
    }

    /// Reads text lines until a chunk is complete.
    fn next_text(&mut self) -> io::Result<Option<SassChunk>> {
        loop {
            let line_offset = self.offset;
            let line_number = self.line;
            let (read, in_chunk) = self.read_line()?;
            if read == 0 {
                return Ok(self.finish_chunk());
            }
            self.offset += read as u64;
            self.line += 1;
            if in_chunk {
                // The line was appended to the chunk; move it out if it starts something else.
                let start = self.chunk.len() - read;
                let action =
                    classify(&self.chunk[start..], self.function.as_deref(), self.has_code);
                match action {
                    Action::Code => self.has_code = true,
                    Action::Keep => {}
                    Action::KeepAndClose => {
                        let chunk = self.finish_chunk();
                        self.mode = Mode::Outside;
                        return Ok(chunk);
                    }
                    _ => {
                        self.scratch.clear();
                        self.scratch.extend_from_slice(&self.chunk[start..]);
                        self.chunk.truncate(start);
                        let chunk = self.finish_chunk();
                        self.mode = Mode::Outside;
                        self.outside_line(action, line_offset, line_number);
                        if chunk.is_some() {
                            return Ok(chunk);
                        }
                    }
                }
                continue;
            }
            let action = classify(&self.scratch, None, false);
            self.outside_line(action, line_offset, line_number);
        }
    }

    /// Handles a line (in `self.scratch`) read outside any chunk.
    fn outside_line(&mut self, action: Action, line_offset: u64, line_number: u64) {
        match action {
            Action::Start(name, format) => self.start_chunk(name, format, line_offset, line_number),
            Action::Code if self.mode == Mode::Outside => {
                self.start_chunk(String::new(), SassFormat::NvdisasmText, line_offset, line_number);
                self.has_code = true;
            }
            Action::EnterData => self.mode = Mode::Data,
            Action::Fatbin { ptx } => {
                self.arch = None;
                self.binary = None;
                self.mode = if ptx { Mode::Data } else { Mode::Outside };
            }
            Action::Arch(arch) => {
                self.arch = Some(arch);
                if self.mode == Mode::Data {
                    self.mode = Mode::Outside;
                }
            }
            Action::CodeFor(arch) => {
                self.arch = arch.or(self.arch);
                self.mode = Mode::Outside;
            }
            Action::Header(key, value) if self.mode == Mode::Outside => match key {
                HeaderKey::Arch => self.arch = Arch::parse(&value),
                HeaderKey::Identifier => self.binary = Some(value),
            },
            _ => {}
        }
    }

    /// Reads JSON until a function object is complete.
    fn next_json(&mut self) -> io::Result<Option<SassChunk>> {
        loop {
            let phase = self.json.unwrap_or(JsonPhase::Done);
            match phase {
                JsonPhase::Done => return Ok(None),
                JsonPhase::Start => {
                    if !self.expect_byte(b'[')? {
                        self.json = Some(JsonPhase::Done);
                        return Ok(None);
                    }
                    self.json = Some(JsonPhase::Metadata);
                }
                JsonPhase::Metadata => {
                    self.skip_json_blanks()?;
                    let mut metadata = Vec::new();
                    let complete = self.capture_value(&mut metadata, JSON_METADATA_CAP)?;
                    if let Ok(text) = std::str::from_utf8(&metadata) {
                        self.arch = metadata_arch_of(text);
                    }
                    self.json =
                        Some(if complete { JsonPhase::BeforeFunctions } else { JsonPhase::Done });
                }
                JsonPhase::BeforeFunctions => {
                    let ok = self.expect_byte(b',')? && self.expect_byte(b'[')?;
                    self.json = Some(if ok { JsonPhase::Functions } else { JsonPhase::Done });
                }
                JsonPhase::Functions => {
                    self.skip_json_blanks()?;
                    let next = self.reader.fill_buf()?.first().copied();
                    match next {
                        Some(b',') => {
                            self.reader.consume(1);
                            self.offset += 1;
                        }
                        Some(b'{') => {
                            let offset = self.offset;
                            let mut object = Vec::new();
                            self.capture_value(&mut object, usize::MAX)?;
                            let text = String::from_utf8(object).unwrap_or_else(|error| {
                                String::from_utf8_lossy(error.as_bytes()).into_owned()
                            });
                            let function = function_name_of(&text);
                            return Ok(Some(SassChunk {
                                text,
                                format: SassFormat::NvdisasmJson,
                                function,
                                arch: self.arch,
                                binary: None,
                                offset,
                                line: 0,
                            }));
                        }
                        _ => {
                            self.json = Some(JsonPhase::Done);
                            return Ok(None);
                        }
                    }
                }
            }
        }
    }

    fn skip_json_blanks(&mut self) -> io::Result<()> {
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(());
            }
            let blanks = buffer.iter().take_while(|b| b.is_ascii_whitespace()).count();
            let all = blanks == buffer.len();
            self.reader.consume(blanks);
            self.offset += blanks as u64;
            if !all {
                return Ok(());
            }
        }
    }

    fn expect_byte(&mut self, byte: u8) -> io::Result<bool> {
        self.skip_json_blanks()?;
        let found = self.reader.fill_buf()?.first() == Some(&byte);
        if found {
            self.reader.consume(1);
            self.offset += 1;
        }
        Ok(found)
    }

    /// Copies one JSON value into `out` (at most `cap` bytes kept); returns whether it ended.
    fn capture_value(&mut self, out: &mut Vec<u8>, cap: usize) -> io::Result<bool> {
        let mut depth = 0usize;
        let mut in_string = false;
        let mut escaped = false;
        let mut started = false;
        loop {
            let buffer = self.reader.fill_buf()?;
            if buffer.is_empty() {
                return Ok(false);
            }
            let mut end = None;
            for (index, &byte) in buffer.iter().enumerate() {
                if in_string {
                    if escaped {
                        escaped = false;
                    } else if byte == b'\\' {
                        escaped = true;
                    } else if byte == b'"' {
                        in_string = false;
                        if depth == 0 {
                            end = Some(index + 1);
                            break;
                        }
                    }
                    continue;
                }
                match byte {
                    b'"' => {
                        in_string = true;
                        started = true;
                    }
                    b'{' | b'[' => {
                        depth += 1;
                        started = true;
                    }
                    b'}' | b']' => {
                        if depth == 0 {
                            end = Some(index);
                            break;
                        }
                        depth -= 1;
                        if depth == 0 {
                            end = Some(index + 1);
                            break;
                        }
                    }
                    b',' if depth == 0 && started => {
                        end = Some(index);
                        break;
                    }
                    _ => started = true,
                }
            }
            let take = end.unwrap_or(buffer.len());
            let room = cap.saturating_sub(out.len());
            out.extend_from_slice(&buffer[..take.min(room)]);
            self.reader.consume(take);
            self.offset += take as u64;
            if end.is_some() {
                return Ok(true);
            }
        }
    }
}

impl<R: BufRead> Iterator for FunctionSplitter<R> {
    type Item = io::Result<SassChunk>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        if !self.sniffed
            && let Err(error) = self.sniff()
        {
            self.failed = true;
            return Some(Err(error));
        }
        let result = if self.json.is_some() { self.next_json() } else { self.next_text() };
        match result {
            Ok(chunk) => chunk.map(Ok),
            Err(error) => {
                self.failed = true;
                Some(Err(error))
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum HeaderKey {
    Arch,
    Identifier,
}

/// What a line means to the splitter.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Action {
    /// Part of the current function (or ignorable outside one).
    Keep,
    /// An instruction or encoding line.
    Code,
    /// The cuobjdump terminator: part of the function, which ends with it.
    KeepAndClose,
    /// A function header.
    Start(String, SassFormat),
    /// A data section or the symbol trailer begins.
    EnterData,
    /// A fat-binary entry header.
    Fatbin {
        ptx: bool,
    },
    /// `.target sm_XX`.
    Arch(Arch),
    /// `code for sm_XX`.
    CodeFor(Option<Arch>),
    Header(HeaderKey, String),
}

/// Classifies a line for the splitter; `function` and `has_code` describe the open chunk.
fn classify(line: &[u8], function: Option<&str>, has_code: bool) -> Action {
    let first = skip_blanks(line, 0);
    let rest = &line[first..];
    let Some(&head) = rest.first() else { return Action::Keep };
    if head == b'/' {
        if rest.get(1) == Some(&b'*') {
            return Action::Code;
        }
        if rest.starts_with(b"//---") {
            let text = String::from_utf8_lossy(rest);
            let Some(section) = separator_section(text.trim_end()) else { return Action::Keep };
            if let Some(name) = code_section_function(section) {
                return Action::Start(name.to_owned(), SassFormat::NvdisasmText);
            }
            if section.starts_with('.') || section == "SYMBOLS" {
                return Action::EnterData;
            }
        }
        return Action::Keep;
    }
    if head == b'.' {
        if rest.starts_with(b".section") && rest.get(8).is_some_and(u8::is_ascii_whitespace) {
            let text = String::from_utf8_lossy(rest);
            let argument = text[".section".len()..].trim_start();
            let section = argument.split([',', ' ', '\t', '\r', '\n']).next().unwrap_or("");
            return match code_section_function(section) {
                Some(name) if function == Some(name) && !has_code => Action::Keep,
                Some(name) => Action::Start(name.to_owned(), SassFormat::NvdisasmText),
                None => Action::EnterData,
            };
        }
        if rest.starts_with(b".target") && rest.get(7).is_some_and(u8::is_ascii_whitespace) {
            let text = String::from_utf8_lossy(&rest[".target".len()..]);
            if let Some(arch) = Arch::parse(text.trim()) {
                return if function.is_some() { Action::Keep } else { Action::Arch(arch) };
            }
        }
        return Action::Keep;
    }
    if rest.starts_with(b"Function :") || rest.starts_with(b"Function:") {
        let text = String::from_utf8_lossy(rest);
        let name = text.split_once(':').map_or("", |(_, name)| name).trim();
        return Action::Start(name.to_owned(), SassFormat::CuobjdumpText);
    }
    if rest.starts_with(b"..........") {
        return Action::KeepAndClose;
    }
    if rest.starts_with(b"Fatbin ") {
        return Action::Fatbin { ptx: rest.starts_with(b"Fatbin ptx") };
    }
    if let Some(arch) = rest.strip_prefix(b"code for ") {
        return Action::CodeFor(Arch::parse(String::from_utf8_lossy(arch).trim()));
    }
    if function.is_none() {
        let text = String::from_utf8_lossy(rest);
        let text = text.trim_end();
        if let Some(value) = text.strip_prefix("arch = ") {
            return Action::Header(HeaderKey::Arch, value.trim().to_owned());
        }
        if let Some(value) = text.strip_prefix("identifier = ") {
            return Action::Header(HeaderKey::Identifier, value.trim().to_owned());
        }
        let looks_like_inst = head == b'@' || head.is_ascii_uppercase();
        if looks_like_inst && text.contains(';') && !text.contains(" = ") {
            return Action::Code;
        }
    }
    Action::Keep
}

/// The `function-name` of a JSON function object, found without parsing the whole object.
fn function_name_of(object: &str) -> String {
    let Some(at) = object.find("\"function-name\"") else { return String::new() };
    let rest = object[at + "\"function-name\"".len()..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else { return String::new() };
    let Some(rest) = rest.trim_start().strip_prefix('"') else { return String::new() };
    rest.find('"').map_or_else(String::new, |end| rest[..end].to_owned())
}

fn count_newlines(bytes: &[u8]) -> u64 {
    bytes.split(|&b| b == b'\n').count() as u64 - 1
}
