//! Cuts a SASS listing read from a stream into one owned chunk per function.
//!
//! A whole-library disassembly is gigabytes of text; [`FunctionSplitter`] keeps only the
//! function being read in memory and hands out [`SassChunk`]s that the zero-copy parser reads
//! one at a time, or in parallel. Text listings are cut at their function headers; a
//! `nvdisasm -json` stream is cut at its function objects.

use std::io::{self, BufRead};

use fencelint_source::TextRange;
use rayon::prelude::*;

use crate::ast::{Arch, SassModule};
use crate::json::{metadata_arch_of, parse_function_object_in, split_json};
use crate::scan::{find_byte, find_either};
use crate::text::{
    Context, code_section_function, function_type, parse_listing_in, separator_section, skip_blanks,
};
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
    /// The byte offset in the stream of the function's text (after any `target_line`).
    pub offset: u64,
    /// The 0-based line of the stream where the function starts (0 for every function of
    /// nvdisasm's JSON, which writes the document on one line).
    pub line: u64,
    /// The 0-based character column on that line where the function starts: 0 for a text
    /// function, the position of the object on its line for a JSON function.
    pub column: u64,
    /// The length of the `\t.target\tsm_XX\n` line that
    /// [`FunctionSplitter::with_target_lines`] put in front of a text function (0 otherwise):
    /// the function's own text is `text[target_line..]`, at `offset` in the stream.
    pub target_line: u32,
    /// Where in `text` the first byte that was not UTF-8 was (such bytes are replaced by
    /// U+FFFD), or `None` when the function's bytes were all UTF-8.
    pub invalid_utf8: Option<u32>,
}

impl SassChunk {
    /// Parses the chunk. Ranges are relative to [`SassChunk::text`]; add [`SassChunk::offset`]
    /// for positions in the stream.
    pub fn parse(&self) -> Parsed<SassModule<'_>> {
        match self.format {
            SassFormat::NvdisasmJson => crate::parse_function_object(&self.text, self.arch),
            format => {
                let context =
                    Context { arch: self.arch, binary: self.binary.as_deref(), one_function: true };
                parse_listing_in(&self.text, 0, self.text.len(), format, context)
            }
        }
    }
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Mode {
    #[default]
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
    reader: Lookahead<R>,
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
    /// The character column on the current line (kept for JSON, whose objects start inside a
    /// line; see [`advance`]).
    column: u64,
    sniffed: bool,
    failed: bool,
    /// Put a `.target` line in front of each text function (see [`SassChunk::target_line`]).
    target_lines: bool,
    /// The length of the `.target` line at the front of `chunk` (0 when there is none).
    chunk_prefix: usize,
    /// Buffers of finished chunks handed back by [`FunctionSplitter::recycle`].
    spare: Vec<Vec<u8>>,
    /// The architecture of text functions whose stream does not name one
    /// ([`FunctionSplitter::with_default_arch`]).
    default_arch: Option<Arch>,
}

/// The UTF-8 byte-order mark.
const BOM: &[u8] = b"\xef\xbb\xbf";

/// A reader with bytes already taken from it kept in front, so that the format can be decided
/// from bytes beyond the end of the reader's buffer without losing them.
struct Lookahead<R> {
    ahead: Vec<u8>,
    /// How much of `ahead` was consumed.
    at: usize,
    inner: R,
}

impl<R: BufRead> Lookahead<R> {
    /// Moves the inner reader's buffered bytes behind those already ahead, so that
    /// [`BufRead::fill_buf`] shows them all; returns how many were moved (0 at the end).
    fn read_ahead(&mut self) -> io::Result<usize> {
        if self.at > 0 {
            self.ahead.drain(..self.at);
            self.at = 0;
        }
        let buffer = self.inner.fill_buf()?;
        let n = buffer.len();
        self.ahead.extend_from_slice(buffer);
        self.inner.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> io::Read for Lookahead<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let buffer = self.fill_buf()?;
        let n = buffer.len().min(out.len());
        out[..n].copy_from_slice(&buffer[..n]);
        self.consume(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Lookahead<R> {
    fn fill_buf(&mut self) -> io::Result<&[u8]> {
        if self.at < self.ahead.len() { Ok(&self.ahead[self.at..]) } else { self.inner.fill_buf() }
    }

    fn consume(&mut self, amount: usize) {
        if self.at < self.ahead.len() {
            self.at = (self.at + amount).min(self.ahead.len());
            if self.at == self.ahead.len() {
                self.ahead = Vec::new();
                self.at = 0;
            }
        } else {
            self.inner.consume(amount);
        }
    }
}

/// Whether `bytes` (from the first non-blank byte of a stream) start nvdisasm JSON: `[`
/// followed by `{` or `[`, as in [`crate::detect`].
fn starts_json(bytes: &[u8]) -> bool {
    let after = bytes.iter().skip(1).find(|b| !b.is_ascii_whitespace());
    bytes.first() == Some(&b'[') && after.is_none_or(|b| matches!(b, b'{' | b'['))
}

/// Spare buffers kept for reuse, and the largest capacity kept: a listing's functions are a
/// few megabytes each, and a buffer grown for a rare huge one is given back to the allocator.
const SPARE_BUFFERS: usize = 16;
const SPARE_CAPACITY: usize = 8 << 20;

impl<R: BufRead> FunctionSplitter<R> {
    pub fn new(reader: R) -> Self {
        Self {
            reader: Lookahead { ahead: Vec::new(), at: 0, inner: reader },
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
            column: 0,
            sniffed: false,
            failed: false,
            target_lines: false,
            chunk_prefix: 0,
            spare: Vec::new(),
            default_arch: None,
        }
    }

    /// The architecture of the text functions that come before any `code for sm_XX` or
    /// `.target` line (a caller that disassembled a cubin knows it from the cubin): their chunks
    /// carry it, and with [`FunctionSplitter::with_target_lines`] their `.target` line says it.
    #[must_use]
    pub fn with_default_arch(mut self, arch: Option<Arch>) -> Self {
        self.default_arch = arch;
        self
    }

    /// Hands back the text of a chunk that is no longer needed, so that a later chunk is read
    /// into its memory: no new pages to fault in, and no copy from a shared buffer.
    pub fn recycle(&mut self, text: String) {
        let mut bytes = text.into_bytes();
        if self.spare.len() < SPARE_BUFFERS && bytes.capacity() <= SPARE_CAPACITY {
            bytes.clear();
            self.spare.push(bytes);
        }
    }

    /// The largest recycled buffer (empty), or a new one: the largest needs the fewest
    /// regrowths, each of which maps and faults in fresh memory.
    fn take_spare(&mut self) -> Vec<u8> {
        let largest = (0..self.spare.len()).max_by_key(|&i| self.spare[i].capacity());
        largest.map(|i| self.spare.swap_remove(i)).unwrap_or_default()
    }

    /// Puts a `\t.target\tsm_XX\n` line in front of every text function whose architecture
    /// the stream named, so that the function's text alone still says it; cheaper than
    /// prepending it to the finished text.
    #[must_use]
    pub fn with_target_lines(mut self) -> Self {
        self.target_lines = true;
        self
    }

    /// Decides between JSON and text from the first non-blank bytes: `[` followed by `{` or
    /// `[` is JSON, as in [`crate::detect`].
    fn sniff(&mut self) -> io::Result<()> {
        self.sniffed = true;
        // A byte-order mark at the start (an editor may add one in front of JSON) is passed
        // over, as the whole-file JSON reader and format detection pass over it: one character
        // of the first line. Only a mark that the first read returns whole is seen (any file
        // read through a buffer of 3 bytes or more).
        let buffer = self.reader.fill_buf()?;
        if self.offset == 0 && buffer.starts_with(BOM) {
            self.reader.consume(BOM.len());
            self.offset = BOM.len() as u64;
            self.column = 1;
        }
        loop {
            let buffer = self.reader.fill_buf()?;
            let blanks = buffer.iter().take_while(|b| b.is_ascii_whitespace()).count();
            if buffer.is_empty() || blanks < buffer.len() {
                // A `[` with only blanks after it up to the end of the buffer: the byte that
                // decides is further on. The bytes read meanwhile are kept in front of the
                // reader, so that the chunks are the same whatever the buffer's size.
                let undecided = |buffer: &[u8]| {
                    buffer[blanks..].starts_with(b"[")
                        && buffer[blanks + 1..].iter().all(u8::is_ascii_whitespace)
                };
                while undecided(self.reader.fill_buf()?) && self.reader.read_ahead()? > 0 {}
                let buffer = self.reader.fill_buf()?;
                if starts_json(&buffer[blanks..]) {
                    // The blanks before the `[` are left to the JSON reader, which counts
                    // their lines.
                    self.json = Some(JsonPhase::Start);
                }
                return Ok(());
            }
            // Only whitespace in this block: pass over its complete lines, which no format
            // reads, and look further. The blanks after its last line end begin the next line
            // (a form feed in front of a text line changes what the line is), so they are
            // kept, in front of the reader if need be.
            match memchr::memrchr(b'\n', buffer) {
                Some(last) => {
                    advance(&mut self.line, &mut self.column, &buffer[..=last]);
                    self.reader.consume(last + 1);
                    self.offset += last as u64 + 1;
                }
                None => {
                    if self.reader.read_ahead()? == 0 {
                        return Ok(());
                    }
                }
            }
        }
    }

    fn finish_chunk(&mut self) -> Option<SassChunk> {
        let function = self.function.take()?;
        // The chunk's buffer becomes the text, and the next chunk is read into a recycled one.
        let next = self.take_spare();
        let bytes = std::mem::replace(&mut self.chunk, next);
        let (text, invalid_utf8) = match String::from_utf8(bytes) {
            Ok(text) => (text, None),
            Err(error) => {
                // The `.target` prefix is ASCII: the offset is the same in the text.
                let at = error.utf8_error().valid_up_to() as u32;
                (String::from_utf8_lossy(error.as_bytes()).into_owned(), Some(at))
            }
        };
        let prefix = std::mem::take(&mut self.chunk_prefix);
        self.has_code = false;
        Some(SassChunk {
            text,
            format: self.format,
            function,
            arch: self.arch.or(self.default_arch),
            binary: self.binary.clone(),
            offset: self.chunk_offset,
            line: self.chunk_line,
            column: 0,
            target_line: prefix as u32,
            invalid_utf8,
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
        if let Some(arch) = self.arch.or(self.default_arch).filter(|_| self.target_lines) {
            use std::io::Write;
            let _ = writeln!(self.chunk, "\t.target\t{arch}");
        }
        self.chunk_prefix = self.chunk.len();
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

    /// Inside a function, appends the complete instruction, encoding, label and marker lines
    /// that are already in the reader's buffer to the chunk with one copy, and stops before the
    /// first other line or an incomplete one, which [`Self::next_text`] reads line by line.
    /// Those lines only extend the chunk there too: this is the same result, without a call,
    /// a copy and a buffer check for each of the millions of lines of a large listing.
    fn take_code_lines(&mut self) -> io::Result<()> {
        let buffer = self.reader.fill_buf()?;
        let mut at = 0;
        let mut lines = 0;
        let mut code = false;
        while let Some(newline) = find_byte(buffer, at, b'\n') {
            let line = &buffer[at..=newline];
            if is_code_line(line) {
                code = true;
            } else if !is_plain_function_line(line) {
                break;
            }
            at = newline + 1;
            lines += 1;
        }
        self.chunk.extend_from_slice(&buffer[..at]);
        self.reader.consume(at);
        self.offset += at as u64;
        self.line += lines;
        self.has_code |= code;
        Ok(())
    }

    /// Reads text lines until a chunk is complete.
    fn next_text(&mut self) -> io::Result<Option<SassChunk>> {
        loop {
            if self.mode == Mode::Code {
                self.take_code_lines()?;
            }
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
                if is_code_line(&self.chunk[start..]) {
                    self.has_code = true;
                    continue;
                }
                if is_plain_function_line(&self.chunk[start..]) {
                    continue;
                }
                let line = String::from_utf8_lossy(&self.chunk[start..]);
                let mut action = classify(&line, self.function.as_deref());
                if let Action::Section(name) = action {
                    action = section_action(name, self.function.as_deref(), self.has_code);
                }
                match action {
                    Action::Code => self.has_code = true,
                    Action::Keep => {}
                    Action::Type(name) => {
                        if !self.has_code {
                            self.function = Some(name.to_owned());
                        }
                    }
                    Action::KeepAndClose => {
                        let chunk = self.finish_chunk();
                        self.mode = Mode::Outside;
                        return Ok(chunk);
                    }
                    _ => {
                        drop(line);
                        self.scratch.clear();
                        self.scratch.extend_from_slice(&self.chunk[start..]);
                        self.chunk.truncate(start);
                        let chunk = self.finish_chunk();
                        self.mode = Mode::Outside;
                        self.outside_line(line_offset, line_number);
                        if chunk.is_some() {
                            return Ok(chunk);
                        }
                    }
                }
                continue;
            }
            self.outside_line(line_offset, line_number);
        }
    }

    /// Handles the line in `self.scratch`, read outside any chunk.
    fn outside_line(&mut self, line_offset: u64, line_number: u64) {
        let line = String::from_utf8_lossy(&self.scratch).into_owned();
        let action = classify(&line, None);
        match outside(&mut self.mode, &mut self.arch, action) {
            Outside::Nothing => {}
            Outside::Binary(binary) => self.binary = binary.map(str::to_owned),
            Outside::Start { function, format, has_code } => {
                self.start_chunk(function.to_owned(), format, line_offset, line_number);
                self.has_code = has_code;
            }
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
                    // Past the cap, the metadata's lines are not counted.
                    advance(&mut self.line, &mut self.column, &metadata);
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
                            self.column += 1;
                        }
                        Some(b'{') => {
                            let (offset, line, column) = (self.offset, self.line, self.column);
                            let mut object = self.take_spare();
                            self.capture_value(&mut object, usize::MAX)?;
                            advance(&mut self.line, &mut self.column, &object);
                            let (text, invalid_utf8) = match String::from_utf8(object) {
                                Ok(text) => (text, None),
                                Err(error) => {
                                    let at = error.utf8_error().valid_up_to() as u32;
                                    (
                                        String::from_utf8_lossy(error.as_bytes()).into_owned(),
                                        Some(at),
                                    )
                                }
                            };
                            let function = json_function_name(&text).to_owned();
                            return Ok(Some(SassChunk {
                                text,
                                format: SassFormat::NvdisasmJson,
                                function,
                                arch: self.arch,
                                binary: None,
                                offset,
                                line,
                                column,
                                target_line: 0,
                                invalid_utf8,
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
            advance(&mut self.line, &mut self.column, &buffer[..blanks]);
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
            self.column += 1;
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
            let mut index = 0;
            while index < buffer.len() {
                let byte = buffer[index];
                if in_string {
                    if escaped {
                        escaped = false;
                        index += 1;
                        continue;
                    }
                    // Jump to the next quote or backslash.
                    let Some(at) = find_either(buffer, index, b'"', b'\\') else { break };
                    index = at + 1;
                    if buffer[at] == b'\\' {
                        escaped = true;
                    } else {
                        in_string = false;
                        if depth == 0 {
                            end = Some(index);
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
                index += 1;
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

/// What a line means to the splitters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Action<'l> {
    /// Part of the current function (or ignorable outside one).
    Keep,
    /// An instruction or encoding line.
    Code,
    /// The cuobjdump terminator: part of the function, which ends with it.
    KeepAndClose,
    /// A function header.
    Start(&'l str, SassFormat),
    /// `.section .text.name`: a function header unless it repeats the separator just before.
    Section(&'l str),
    /// `.type name,@function`: the function's own name ([`function_type`]).
    Type(&'l str),
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
    Header(HeaderKey, &'l str),
}

/// Whether a line is an instruction or encoding line (`/*...`): the common case, decided
/// without looking further.
fn is_code_line(line: &[u8]) -> bool {
    is_code_head(&line[skip_blanks(line, 0)..])
}

/// [`is_code_line`] for a line whose leading blanks are already skipped.
fn is_code_head(head: &[u8]) -> bool {
    head.starts_with(b"/*")
}

/// Whether a line inside a function can be kept without classifying it: a `.L_x_N:` label or a
/// `//##` line-info marker.
fn is_plain_function_line(line: &[u8]) -> bool {
    is_plain_function_head(&line[skip_blanks(line, 0)..])
}

/// [`is_plain_function_line`] for a line whose leading blanks are already skipped.
fn is_plain_function_head(head: &[u8]) -> bool {
    matches!(head.get(..3), Some(b".L_" | b"//#"))
}

/// Classifies a line for the splitters; `function` names the open chunk, if any.
fn classify<'l>(line: &'l str, function: Option<&str>) -> Action<'l> {
    let first = skip_blanks(line.as_bytes(), 0);
    let rest = line[first..].trim_end();
    let Some(&head) = rest.as_bytes().first() else { return Action::Keep };
    if head == b'/' {
        if rest.starts_with("/*") {
            return Action::Code;
        }
        if rest.starts_with("//---") {
            let Some(section) = separator_section(rest) else { return Action::Keep };
            if let Some(name) = code_section_function(section) {
                return Action::Start(name, SassFormat::NvdisasmText);
            }
            if section.starts_with('.') || section == "SYMBOLS" {
                return Action::EnterData;
            }
        }
        return Action::Keep;
    }
    if head == b'.' {
        let (directive, argument) = rest.split_once([' ', '\t']).unwrap_or((rest, ""));
        let argument = argument.trim_start();
        if directive == ".section" {
            let section = argument.split([',', ' ', '\t']).next().unwrap_or("");
            return match code_section_function(section) {
                Some(name) => Action::Section(name),
                None => Action::EnterData,
            };
        }
        if directive == ".target"
            && let Some(arch) = Arch::parse(argument)
        {
            return if function.is_some() { Action::Keep } else { Action::Arch(arch) };
        }
        if directive == ".type"
            && let Some(name) = function_type(argument)
        {
            return Action::Type(name);
        }
        return Action::Keep;
    }
    if let Some(name) = rest.strip_prefix("Function :").or_else(|| rest.strip_prefix("Function:")) {
        return Action::Start(name.trim(), SassFormat::CuobjdumpText);
    }
    if rest.starts_with("..........") {
        return Action::KeepAndClose;
    }
    if rest.starts_with("Fatbin ") {
        return Action::Fatbin { ptx: rest.starts_with("Fatbin ptx") };
    }
    if let Some(arch) = rest.strip_prefix("code for ") {
        return Action::CodeFor(Arch::parse(arch));
    }
    if function.is_none() {
        if let Some(value) = rest.strip_prefix("arch = ") {
            return Action::Header(HeaderKey::Arch, value.trim());
        }
        if let Some(value) = rest.strip_prefix("identifier = ") {
            return Action::Header(HeaderKey::Identifier, value.trim());
        }
    }
    // An instruction written without its address column (hand-written snippets).
    let looks_like_inst = head == b'@' || head.is_ascii_uppercase();
    if looks_like_inst && rest.contains(';') && !rest.contains(" = ") {
        return Action::Code;
    }
    Action::Keep
}

/// `.section .text.name` repeats the separator of the function just opened (nothing to do)
/// or starts a function.
fn section_action<'l>(name: &'l str, function: Option<&str>, has_code: bool) -> Action<'l> {
    if function == Some(name) && !has_code {
        Action::Keep
    } else {
        Action::Start(name, SassFormat::NvdisasmText)
    }
}

/// What a line outside any function does.
enum Outside<'l> {
    Nothing,
    /// The fat-binary identifier changes.
    Binary(Option<&'l str>),
    /// A function starts with this line.
    Start {
        function: &'l str,
        format: SassFormat,
        has_code: bool,
    },
}

/// Applies a line read outside any function to the splitter state.
fn outside<'l>(mode: &mut Mode, arch: &mut Option<Arch>, action: Action<'l>) -> Outside<'l> {
    match action {
        Action::Start(function, format) => {
            *mode = Mode::Code;
            Outside::Start { function, format, has_code: false }
        }
        Action::Section(function) => {
            *mode = Mode::Code;
            Outside::Start { function, format: SassFormat::NvdisasmText, has_code: false }
        }
        Action::Code if *mode == Mode::Outside => {
            *mode = Mode::Code;
            Outside::Start { function: "", format: SassFormat::NvdisasmText, has_code: true }
        }
        Action::EnterData => {
            *mode = Mode::Data;
            Outside::Nothing
        }
        Action::Fatbin { ptx } => {
            *arch = None;
            *mode = if ptx { Mode::Data } else { Mode::Outside };
            Outside::Binary(None)
        }
        Action::Arch(parsed) => {
            *arch = Some(parsed);
            if *mode == Mode::Data {
                *mode = Mode::Outside;
            }
            Outside::Nothing
        }
        Action::CodeFor(parsed) => {
            *arch = parsed.or(*arch);
            *mode = Mode::Outside;
            Outside::Nothing
        }
        Action::Header(key, value) if *mode == Mode::Outside => match key {
            HeaderKey::Arch => {
                *arch = Arch::parse(value);
                Outside::Nothing
            }
            HeaderKey::Identifier => Outside::Binary(Some(value)),
        },
        _ => Outside::Nothing,
    }
}

/// One function of a text held in memory, with its context; made by [`split_functions`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TextChunk<'a> {
    /// The whole input.
    pub input: &'a str,
    /// The function's part of the input (its lines, or its JSON object).
    pub range: TextRange,
    pub format: SassFormat,
    /// The function name from the header (empty for code with no header).
    pub function: &'a str,
    pub arch: Option<Arch>,
    pub binary: Option<&'a str>,
    /// The 0-based line of the input on which the chunk starts.
    pub line: u64,
}

impl<'a> TextChunk<'a> {
    /// The function's text.
    pub fn text(&self) -> &'a str {
        &self.input[self.range.to_usize()]
    }

    /// Parses the chunk; ranges are relative to the whole input, as with [`crate::parse`].
    pub fn parse(&self) -> Parsed<SassModule<'a>> {
        let range = self.range.to_usize();
        match self.format {
            SassFormat::NvdisasmJson => {
                parse_function_object_in(self.input, range.start, range.end, self.arch)
            }
            format => {
                let context = Context { arch: self.arch, binary: self.binary, one_function: true };
                parse_listing_in(self.input, range.start, range.end, format, context)
            }
        }
    }
}

/// Cuts a listing held in memory into its functions without copying, so that they can be
/// parsed in parallel (`chunks.par_iter().map(TextChunk::parse)`). The chunks are the same as
/// [`FunctionSplitter`]'s; parsing them all gives the functions of [`crate::parse`].
pub fn split_functions(text: &str) -> Vec<TextChunk<'_>> {
    split_with(text, SEGMENT, |segments| {
        segments.iter().map(|&(start, end)| scan_segment(&text[start..end], start)).collect()
    })
}

/// [`split_functions`] with the line scan spread over rayon's threads; the result is the
/// same. Worth it for listings of hundreds of megabytes, where a sequential scan would
/// dominate the parallel parse.
pub fn split_functions_parallel(text: &str) -> Vec<TextChunk<'_>> {
    split_functions_parallel_with(text, |_| {})
}

/// [`split_functions_parallel`] that calls `scanned` with each byte range of the text once the
/// scan is done with it (the ranges cover the text, in no particular order): a caller reading
/// a memory-mapped file gives the pages back as the scan goes.
pub fn split_functions_parallel_with(
    text: &str,
    scanned: impl Fn(std::ops::Range<usize>) + Sync,
) -> Vec<TextChunk<'_>> {
    split_with(text, SEGMENT, |segments| {
        segments
            .par_iter()
            .map(|&(start, end)| {
                let items = scan_segment(&text[start..end], start);
                scanned(start..end);
                items
            })
            .collect()
    })
}

/// [`split_functions_parallel_with`] for bytes not yet known to be UTF-8 (a memory-mapped
/// file): each piece is checked as it is scanned, in the same pass, so the bytes are read
/// once. Returns `None` when some piece is not UTF-8, and for `nvdisasm -json` (cut it with
/// [`split_functions`] once it is a `str`, or stream it). The chunks are those of
/// [`split_functions`] for the same text.
pub fn split_bytes_parallel_with(
    bytes: &[u8],
    scanned: impl Fn(std::ops::Range<usize>) + Sync,
) -> Option<Vec<TextChunk<'_>>> {
    split_bytes(bytes, SEGMENT, scanned)
}

fn split_bytes(
    bytes: &[u8],
    segment: usize,
    scanned: impl Fn(std::ops::Range<usize>) + Sync,
) -> Option<Vec<TextChunk<'_>>> {
    if is_json(bytes) {
        return None;
    }
    let scanned_segments: Option<Vec<Segment<'_>>> = (0..segment_count(bytes, segment))
        .into_par_iter()
        .map(|index| segment_bounds(bytes, segment, index))
        .filter(|(start, end)| start < end)
        .map(|(start, end)| {
            let items = scan_segment(piece_str(&bytes[start..end])?, start);
            scanned(start..end);
            Some(items)
        })
        .collect();
    let scanned_segments = scanned_segments?;
    // SAFETY: the pieces cover `bytes` and each is UTF-8; they end at line ends, which are
    // never inside a UTF-8 sequence, so their concatenation is UTF-8 too.
    #[allow(unsafe_code)]
    let text = unsafe { std::str::from_utf8_unchecked(bytes) };
    Some(merge_segments(text, scanned_segments))
}

/// Whether `bytes` read as `nvdisasm -json`, judged as [`crate::detect`] judges the longest
/// UTF-8 prefix that it would read.
fn is_json(bytes: &[u8]) -> bool {
    let head = &bytes[..bytes.len().min(crate::detect::DETECT_PREFIX)];
    let head = std::str::from_utf8(head)
        .unwrap_or_else(|err| std::str::from_utf8(&head[..err.valid_up_to()]).unwrap_or_default());
    crate::detect(head) == Some(SassFormat::NvdisasmJson)
}

/// A piece of a listing as text, if it is UTF-8.
fn piece_str(piece: &[u8]) -> Option<&str> {
    // Listings are ASCII, which `is_ascii` checks a word at a time, faster than `from_utf8`.
    if piece.is_ascii() {
        // SAFETY: ASCII is UTF-8.
        #[allow(unsafe_code)]
        let text = unsafe { std::str::from_utf8_unchecked(piece) };
        Some(text)
    } else {
        std::str::from_utf8(piece).ok()
    }
}

/// [`split_bytes_parallel_with`] one piece after another from the start, handing each
/// function to `emit` as soon as the piece that ends it has been checked and scanned, so that
/// the functions can be linted while the rest of a file is still being read from the disk.
/// The chunks are those of [`split_functions`] for the same text (each one's `input` is the
/// text up to the end of the piece that closed it). `emit` returns whether to go on.
///
/// Returns `None`, as [`split_bytes_parallel_with`] does, for `nvdisasm -json` and for bytes
/// that are not UTF-8; the functions already handed out are then to be dropped.
pub fn split_bytes_in_order<'a>(
    bytes: &'a [u8],
    scanned: impl FnMut(std::ops::Range<usize>),
    emit: impl FnMut(TextChunk<'a>) -> bool,
) -> Option<()> {
    split_bytes_ordered(bytes, SEGMENT, scanned, emit)
}

fn split_bytes_ordered<'a>(
    bytes: &'a [u8],
    segment: usize,
    mut scanned: impl FnMut(std::ops::Range<usize>),
    mut emit: impl FnMut(TextChunk<'a>) -> bool,
) -> Option<()> {
    if is_json(bytes) {
        return None;
    }
    let mut merger = Merger::default();
    let mut lines = 0;
    for index in 0..segment_count(bytes, segment) {
        let (start, end) = segment_bounds(bytes, segment, index);
        if start >= end {
            continue;
        }
        let Segment { items, lines: in_piece } =
            scan_segment(piece_str(&bytes[start..end])?, start);
        // SAFETY: the pieces up to this one were checked, and they end at line ends, which are
        // never inside a UTF-8 sequence: the bytes up to `end` are UTF-8.
        #[allow(unsafe_code)]
        let text = unsafe { std::str::from_utf8_unchecked(&bytes[..end]) };
        for item in items {
            let item = Item { line: lines + item.line, ..item };
            if let Some(chunk) = merger.push(text, item)
                && !emit(chunk)
            {
                return Some(());
            }
        }
        // Only now: the merger reads the names its items point at in the piece (section and
        // function names), and reading a page given back maps it again until the function
        // that holds it is linted (NCCL's 476 MB nvdisasm listing: 363 MB of it).
        scanned(start..end);
        lines += in_piece;
    }
    // SAFETY: every piece was checked (as above).
    #[allow(unsafe_code)]
    let text = unsafe { std::str::from_utf8_unchecked(bytes) };
    if let Some(chunk) = merger.finish(text) {
        emit(chunk);
    }
    Some(())
}

/// The size of the pieces that [`split_functions_parallel`] scans independently.
const SEGMENT: usize = 4 << 20;

fn split_with<'a>(
    text: &'a str,
    segment: usize,
    scan: impl FnOnce(&[(usize, usize)]) -> Vec<Segment<'a>>,
) -> Vec<TextChunk<'a>> {
    if crate::detect(text) == Some(SassFormat::NvdisasmJson) {
        let (arch, objects) = split_json(text);
        let (mut line, mut counted) = (0, 0);
        return objects
            .into_iter()
            .map(|(start, end)| {
                line += memchr::memchr_iter(b'\n', &text.as_bytes()[counted..start]).count() as u64;
                counted = start;
                TextChunk {
                    input: text,
                    range: TextRange::from_usize(start, end),
                    format: SassFormat::NvdisasmJson,
                    function: json_function_name(&text[start..end]),
                    arch,
                    binary: None,
                    line,
                }
            })
            .collect();
    }
    let segments = line_segments(text.as_bytes(), segment);
    merge_segments(text, scan(&segments))
}

/// Cuts `bytes` into pieces of about `size` bytes (at least one) that end at line ends, so that
/// no line is cut; the pieces cover `bytes` in order. Pieces that a line longer than `size`
/// swallowed are left out.
pub(crate) fn line_segments(bytes: &[u8], size: usize) -> Vec<(usize, usize)> {
    (0..segment_count(bytes, size))
        .map(|index| segment_bounds(bytes, size, index))
        .filter(|(start, end)| start < end)
        .collect()
}

/// How many pieces [`segment_bounds`] cuts `bytes` into.
fn segment_count(bytes: &[u8], size: usize) -> usize {
    bytes.len().div_ceil(size.max(1))
}

/// The piece `index` of `bytes`: from the line start after the nominal cut `index * size` to the
/// line start after the next cut. Each piece is found from the bytes at its own two cuts, so
/// that a parallel scan finds its piece inside its own task: a first pass over every cut of a
/// mapped file would map (and keep mapped) a large folio of the page cache at each cut, which
/// was 570 MB of resident memory before the scan began on the 1.6 GB listing. A piece is empty
/// where one line spans the whole of it.
fn segment_bounds(bytes: &[u8], size: usize, index: usize) -> (usize, usize) {
    let size = size.max(1);
    let line_start_after = |cut: usize| {
        if cut == 0 || cut >= bytes.len() {
            cut.min(bytes.len())
        } else {
            find_byte(bytes, cut, b'\n').map_or(bytes.len(), |newline| newline + 1)
        }
    };
    let start = line_start_after(index.saturating_mul(size));
    let end = line_start_after(index.saturating_add(1).saturating_mul(size));
    (start, end.max(start))
}

/// Joins the scans of consecutive segments and cuts the chunks.
fn merge_segments<'a>(text: &'a str, segments: Vec<Segment<'a>>) -> Vec<TextChunk<'a>> {
    // Item lines count from their segment's start; the segments before it add theirs.
    let mut base = 0;
    let items = segments.into_iter().flat_map(|segment| {
        let at = base;
        base += segment.lines;
        segment.items.into_iter().map(move |item| Item { line: at + item.line, ..item })
    });
    merge(text, items)
}

/// The items of one segment, and the number of line ends in it.
struct Segment<'a> {
    items: Vec<Item<'a>>,
    lines: u64,
}

/// A line that matters to the splitter: a header, a section change, a terminator, or the first
/// code line after the previous item (later code lines change nothing).
#[derive(Clone, Copy)]
struct Item<'a> {
    start: usize,
    end: usize,
    /// The 0-based line (within the item's segment until [`split_with`] makes it absolute).
    line: u64,
    action: Action<'a>,
}

/// Finds the items of the lines of `segment`, which starts at byte `base` of the listing (item
/// offsets are the listing's); needs no state from earlier lines.
fn scan_segment(segment: &str, base: usize) -> Segment<'_> {
    let bytes = segment.as_bytes();
    let end = bytes.len();
    let mut items = Vec::new();
    let mut code_noted = false;
    let mut line_start = 0;
    let mut lines = 0;
    while line_start < end {
        // Leading blanks are skipped once and the line end searched only after them: an
        // encoding continuation line of cuobjdump is mostly blanks.
        let first = skip_blanks(bytes, line_start);
        let line_end = find_byte(bytes, first, b'\n').map_or(end, |newline| newline + 1);
        let head = &bytes[first.min(line_end)..line_end];
        let action = if is_code_head(head) {
            Action::Code
        } else if is_plain_function_head(head) {
            Action::Keep
        } else {
            classify(&segment[line_start..line_end], None)
        };
        let (start, end) = (base + line_start, base + line_end);
        match action {
            Action::Keep => {}
            Action::Code if code_noted => {}
            Action::Code => {
                code_noted = true;
                items.push(Item { start, end, line: lines, action });
            }
            _ => {
                code_noted = false;
                items.push(Item { start, end, line: lines, action });
            }
        }
        lines += u64::from(bytes[line_end - 1] == b'\n');
        line_start = line_end;
    }
    Segment { items, lines }
}

/// Runs the splitter's state over the items in order and cuts the chunks.
fn merge<'a>(text: &'a str, items: impl Iterator<Item = Item<'a>>) -> Vec<TextChunk<'a>> {
    let mut merger = Merger::default();
    let mut chunks: Vec<TextChunk<'a>> = items.filter_map(|item| merger.push(text, item)).collect();
    chunks.extend(merger.finish(text));
    chunks
}

/// The splitter's state between items: the items of a listing go in, in order, and each
/// function comes out once an item closes it.
#[derive(Default)]
struct Merger<'a> {
    mode: Mode,
    arch: Option<Arch>,
    binary: Option<&'a str>,
    /// The open chunk: its function, format, start, line and whether it has code.
    open: Option<(&'a str, SassFormat, usize, u64, bool)>,
}

impl<'a> Merger<'a> {
    /// Takes the next item; returns the chunk it closes, if any. `text` holds every byte up to
    /// the item's end (chunks are cut from it).
    fn push(&mut self, text: &'a str, item: Item<'a>) -> Option<TextChunk<'a>> {
        let mut closed = None;
        if let Some((function, format, chunk_start, line, has_code)) = &mut self.open {
            let close_at = match item.action {
                Action::Code => {
                    *has_code = true;
                    None
                }
                Action::Section(name) => match section_action(name, Some(function), *has_code) {
                    Action::Keep => None,
                    _ => Some(item.start),
                },
                Action::Type(name) => {
                    if !*has_code {
                        *function = name;
                    }
                    None
                }
                // Inside a function these are plain lines.
                Action::Arch(_) | Action::Header(..) | Action::Keep => None,
                Action::KeepAndClose => Some(item.end),
                _ => Some(item.start),
            };
            let close_at = close_at?;
            closed = Some(TextChunk {
                input: text,
                range: TextRange::from_usize(*chunk_start, close_at),
                format: *format,
                function,
                arch: self.arch,
                binary: self.binary,
                line: *line,
            });
            self.open = None;
            self.mode = Mode::Outside;
            if close_at == item.end {
                return closed;
            }
        }
        match outside(&mut self.mode, &mut self.arch, item.action) {
            Outside::Nothing => {}
            Outside::Binary(value) => self.binary = value,
            Outside::Start { function, format, has_code } => {
                self.open = Some((function, format, item.start, item.line, has_code));
            }
        }
        closed
    }

    /// The function still open at the end of `text`, the whole listing.
    fn finish(self, text: &'a str) -> Option<TextChunk<'a>> {
        let (function, format, chunk_start, line, _) = self.open?;
        Some(TextChunk {
            input: text,
            range: TextRange::from_usize(chunk_start, text.len()),
            format,
            function,
            arch: self.arch,
            binary: self.binary,
            line,
        })
    }
}

/// The `function-name` of a JSON function object, found without parsing the whole object.
fn json_function_name(object: &str) -> &str {
    let Some(at) = object.find("\"function-name\"") else { return "" };
    let rest = object[at + "\"function-name\"".len()..].trim_start();
    let Some(rest) = rest.strip_prefix(':') else { return "" };
    let Some(rest) = rest.trim_start().strip_prefix('"') else { return "" };
    rest.find('"').map_or("", |end| &rest[..end])
}

/// Moves a stream position, a 0-based line and the character column on it, over `bytes`.
fn advance(line: &mut u64, column: &mut u64, bytes: &[u8]) {
    // Characters are the bytes that do not continue a UTF-8 sequence.
    let chars = |bytes: &[u8]| bytes.iter().filter(|&&b| b & 0xc0 != 0x80).count() as u64;
    match memchr::memrchr(b'\n', bytes) {
        Some(last) => {
            *line += memchr::memchr_iter(b'\n', bytes).count() as u64;
            *column = chars(&bytes[last + 1..]);
        }
        None => *column += chars(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small segments put segment borders inside functions, headers and code runs.
    #[test]
    fn segment_borders_do_not_change_the_chunks() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_none_or(|ext| ext != "sass") {
                continue;
            }
            let text = std::fs::read_to_string(&path).unwrap();
            let whole = split_functions(&text);
            for segment in [1, 97, 1000, 4096] {
                let pieces = split_with(&text, segment, |segments| {
                    segments
                        .par_iter()
                        .map(|&(start, end)| scan_segment(&text[start..end], start))
                        .collect()
                });
                let scanned = std::sync::Mutex::new(Vec::new());
                let from_bytes = split_bytes(text.as_bytes(), segment, |range| {
                    scanned.lock().unwrap().push(range);
                });
                assert_eq!(from_bytes.as_ref(), Some(&pieces), "{} from bytes", path.display());
                let mut in_order = Vec::new();
                let mut scanned_in_order = Vec::new();
                let done = split_bytes_ordered(
                    text.as_bytes(),
                    segment,
                    |range| scanned_in_order.push(range),
                    |chunk| {
                        // Handed out only once the text up to its end is known.
                        assert!(chunk.input.len() >= chunk.range.end as usize);
                        in_order.push(TextChunk { input: &text, ..chunk });
                        true
                    },
                );
                assert_eq!(done, Some(()), "{}", path.display());
                assert_eq!(in_order, pieces, "{} in order", path.display());
                let covered_in_order = scanned_in_order.iter().try_fold(0, |at, range| {
                    (range.start == at && range.end > at).then_some(range.end)
                });
                assert_eq!(covered_in_order, Some(text.len()), "{} in order", path.display());
                let mut scanned = scanned.into_inner().unwrap();
                scanned.sort_by_key(|range| range.start);
                let covered = scanned.iter().try_fold(0, |at, range| {
                    (range.start == at && range.end > at).then_some(range.end)
                });
                assert_eq!(covered, Some(text.len()), "{} scanned ranges", path.display());
                let lines: Vec<u64> = pieces.iter().map(|chunk| chunk.line).collect();
                let expected: Vec<u64> = pieces
                    .iter()
                    .map(|chunk| text[..chunk.range.start as usize].matches('\n').count() as u64)
                    .collect();
                assert_eq!(lines, expected, "{} with segments of {segment}", path.display());
                assert_eq!(pieces, whole, "{} with segments of {segment}", path.display());
            }
            assert_eq!(split_functions_parallel(&text), whole);
        }
    }

    #[test]
    fn bytes_that_are_not_utf8_are_not_split() {
        let listing: &[u8] = b"\n\tcode for sm_90a\n\t\tFunction : k\n        /*0000*/                   EXIT ; // \xff\n";
        for segment in [1, 16, 4096] {
            assert_eq!(split_bytes(listing, segment, |_| {}), None);
            let mut handed_out = 0;
            let done = split_bytes_ordered(
                listing,
                segment,
                |_| {},
                |_| {
                    handed_out += 1;
                    true
                },
            );
            assert_eq!((done, handed_out), (None, 0));
        }
        // A function that ends before the bad bytes is handed out first; the caller drops it.
        let late: &[u8] = b"\tcode for sm_90a\n\t\tFunction : a\n        /*0000*/                   EXIT ;\n\t\tFunction : b\n        /*0000*/                   EXIT ; // \xff\n";
        let mut names = Vec::new();
        let done = split_bytes_ordered(
            late,
            1,
            |_| {},
            |chunk| {
                names.push(chunk.function);
                true
            },
        );
        assert_eq!((done, names), (None, vec!["a"]));
        // `emit` can stop the split.
        let mut names = Vec::new();
        let two = "\tcode for sm_90a\n\t\tFunction : a\n        /*0000*/                   EXIT ;\n\t\tFunction : b\n        /*0000*/                   EXIT ;\n";
        let done = split_bytes_ordered(
            two.as_bytes(),
            4096,
            |_| {},
            |chunk| {
                names.push(chunk.function);
                false
            },
        );
        assert_eq!((done, names), (Some(()), vec!["a"]));
        let valid = "\n\tcode for sm_90a\n\t\tFunction : k\n        /*0000*/                   EXIT ; // \u{e9}\n";
        assert_eq!(split_bytes(valid.as_bytes(), 16, |_| {}), Some(split_functions(valid)));
    }

    #[test]
    fn line_segments_cover_the_bytes_and_end_at_line_ends() {
        let text = b"a\nbb\n\nccc\nd";
        for size in [1, 2, 3, 5, 100] {
            let segments = line_segments(text, size);
            let mut at = 0;
            for &(start, end) in &segments {
                assert_eq!(start, at);
                assert!(end > start);
                assert!(end == text.len() || text[end - 1] == b'\n', "{size}: {start}..{end}");
                at = end;
            }
            assert_eq!(at, text.len());
        }
        assert!(line_segments(b"", 4).is_empty());
    }

    /// `with_target_lines` puts the architecture line in front of each function and says how
    /// long it is; the function's own text and position are unchanged. A byte that is not UTF-8
    /// is reported where it lands in the chunk's text.
    #[test]
    fn target_lines_and_invalid_bytes_are_reported_in_the_chunk() {
        let listing: &[u8] = b"\n\tcode for sm_90a\n\t\tFunction : k\n        /*0000*/                   EXIT ;\n        /*0010*/                   BRA 0x10 ; // \xff\n";
        let plain: Vec<SassChunk> =
            FunctionSplitter::new(listing).collect::<io::Result<_>>().unwrap();
        let with: Vec<SassChunk> =
            FunctionSplitter::new(listing).with_target_lines().collect::<io::Result<_>>().unwrap();
        assert_eq!((plain.len(), with.len()), (1, 1));
        let (plain, with) = (&plain[0], &with[0]);
        assert_eq!(plain.target_line, 0);
        assert_eq!(&with.text[..with.target_line as usize], "\t.target\tsm_90a\n");
        assert_eq!(&with.text[with.target_line as usize..], plain.text);
        assert_eq!((with.offset, with.line), (plain.offset, plain.line));
        let at = plain.invalid_utf8.expect("the 0xff byte") as usize;
        assert!(plain.text[at..].starts_with('\u{fffd}'), "{:?}", &plain.text[at..]);
        assert_eq!(with.invalid_utf8, Some((at + with.target_line as usize) as u32));
    }

    /// The chunks do not depend on the reader's buffer size when the stream starts with more
    /// blanks than the buffer holds (both found by fuzzing): a `[` with blanks after it is
    /// JSON or text by the byte after the blanks, as for the whole text; and blanks other than
    /// spaces and tabs in front of a line (a form feed) stay part of it.
    #[test]
    fn the_format_is_decided_past_the_end_of_the_buffer() {
        let text: &[u8] = b"\t\n[\t\t\t\x0e\n\t\n\tFunction:";
        let json: &[u8] =
            b"\n[   \n\n   {\"SM\":{\"version\":{\"major\":9}}}, [{\"function-name\":\"a\"}]]";
        let form_feeds: &[u8] =
            b"\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c\x0c  @@PP ;\n\x0c\n  @P0 BRA 0x0 ;\n";
        for (listing, chunks) in [(text, 1), (json, 1), (form_feeds, 1)] {
            let split = |capacity: usize| -> Vec<SassChunk> {
                let reader = std::io::BufReader::with_capacity(capacity, listing);
                FunctionSplitter::new(reader).map(|chunk| chunk.unwrap()).collect()
            };
            let whole = split(4096);
            assert_eq!(whole.len(), chunks, "{:?}: {whole:?}", String::from_utf8_lossy(listing));
            for capacity in 1..listing.len() {
                assert_eq!(split(capacity), whole, "{capacity}-byte buffer");
            }
        }
    }

    /// JSON function objects carry the line and the character column where they start, for
    /// blank lines before the document, values spread over lines and multi-byte characters
    /// before an object on its line; with any reader buffer size.
    #[test]
    fn json_chunks_know_their_line_and_column() {
        let json = "\n\n [{\"Description\":\"d\u{e9}j\u{e0}\",\n \"SM\":{\"version\":{\"major\":9}}}, [{\"function-name\":\"a\"},\n  {\"function-name\":\"b\",\n\"x\":\"\u{e9}\"},{\"function-name\":\"c\"}]]";
        for capacity in [1, 2, 5, 4096] {
            let reader = std::io::BufReader::with_capacity(capacity, json.as_bytes());
            let chunks: Vec<SassChunk> =
                FunctionSplitter::new(reader).collect::<io::Result<_>>().unwrap();
            let places: Vec<(&str, u64, u64, u64)> =
                chunks.iter().map(|c| (c.function.as_str(), c.line, c.column, c.offset)).collect();
            let offset =
                |name: &str| json.find(&format!("{{\"function-name\":\"{name}\"")).unwrap() as u64;
            assert_eq!(
                places,
                [("a", 3, 33, offset("a")), ("b", 4, 2, offset("b")), ("c", 5, 9, offset("c"))],
                "{capacity}-byte buffer"
            );
        }
    }

    /// The default architecture is used only where the listing names none.
    #[test]
    fn the_default_arch_fills_in_only_for_listings_that_name_none() {
        let named: &[u8] =
            b"\tcode for sm_90a\n\t\tFunction : k\n        /*0000*/                   EXIT ;\n";
        let unnamed: &[u8] = b"\t\tFunction : k\n        /*0000*/                   EXIT ;\n";
        let split = |listing: &'static [u8]| -> SassChunk {
            let mut chunks: Vec<SassChunk> = FunctionSplitter::new(listing)
                .with_target_lines()
                .with_default_arch(Arch::parse("sm_100a"))
                .collect::<io::Result<_>>()
                .unwrap();
            assert_eq!(chunks.len(), 1);
            chunks.remove(0)
        };
        let (named, unnamed) = (split(named), split(unnamed));
        assert_eq!(named.arch, Arch::parse("sm_90a"));
        assert!(named.text.starts_with("\t.target\tsm_90a\n"), "{:?}", named.text);
        assert_eq!(unnamed.arch, Arch::parse("sm_100a"));
        assert!(unnamed.text.starts_with("\t.target\tsm_100a\n"), "{:?}", unnamed.text);
        assert_eq!(unnamed.target_line as usize, "\t.target\tsm_100a\n".len());
    }
}
