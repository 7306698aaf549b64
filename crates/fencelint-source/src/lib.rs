//! File identities, byte ranges and the source database shared by every fencelint crate.
//!
//! Everything inside fencelint speaks in byte offsets ([`TextRange`]); line and column are
//! computed only here, by [`SourceDb`], when something is rendered for people.

use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// An opaque handle to one file in a [`SourceDb`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct FileId(pub u32);

/// A half-open byte range `start..end` in one file.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
pub struct TextRange {
    pub start: u32,
    pub end: u32,
}

impl TextRange {
    pub const fn new(start: u32, end: u32) -> Self {
        Self { start, end }
    }

    /// Builds a range from `usize` offsets; offsets beyond `u32::MAX` saturate.
    pub fn from_usize(start: usize, end: usize) -> Self {
        let clamp = |v: usize| u32::try_from(v).unwrap_or(u32::MAX);
        Self { start: clamp(start), end: clamp(end) }
    }

    pub const fn empty(at: u32) -> Self {
        Self { start: at, end: at }
    }

    pub const fn len(self) -> u32 {
        self.end - self.start
    }

    pub const fn is_empty(self) -> bool {
        self.start == self.end
    }

    /// The smallest range that covers both.
    #[must_use]
    pub fn cover(self, other: Self) -> Self {
        Self { start: self.start.min(other.start), end: self.end.max(other.end) }
    }

    /// Shifts the range right by `offset` bytes.
    #[must_use]
    pub fn shifted(self, offset: u32) -> Self {
        Self { start: self.start.saturating_add(offset), end: self.end.saturating_add(offset) }
    }

    pub fn contains(self, offset: u32) -> bool {
        self.start <= offset && offset < self.end
    }

    pub fn to_usize(self) -> Range<usize> {
        self.start as usize..self.end as usize
    }
}

impl fmt::Display for TextRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}..{}", self.start, self.end)
    }
}

/// The two languages fencelint reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dialect {
    Ptx,
    Sass,
}

impl Dialect {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Ptx => "ptx",
            Self::Sass => "sass",
        }
    }
}

impl fmt::Display for Dialect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A location in the original `.cu`/`.py` source, from `.loc` or `//## File` line info.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct SourceLocation {
    pub file: String,
    pub line: u32,
    /// 1-based column; 0 when unknown.
    pub column: u32,
    /// Where the code at this location was inlined, the innermost call site first and the
    /// kernel's own line last (PTX `.loc ..., inlined_at`, `nvdisasm -gi`); `None` when the
    /// code was not inlined or the line info does not say. The call sites carry none of their
    /// own. Shared by every instruction of one inlined stretch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inlined_at: Option<Arc<[SourceLocation]>>,
}

impl SourceLocation {
    /// A location that was not inlined (or whose inlining is not known).
    pub fn new(file: impl Into<String>, line: u32, column: u32) -> Self {
        Self { file: file.into(), line, column, inlined_at: None }
    }

    /// This location, then every call site it was inlined at, out to the kernel's own line.
    pub fn frames(&self) -> impl Iterator<Item = &SourceLocation> {
        std::iter::once(self).chain(self.inlined_at.iter().flat_map(|sites| sites.iter()))
    }
}

/// A 1-based line and column (column counted in characters) for people and editors.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LineCol {
    pub line: u32,
    pub column: u32,
}

/// One file's name, text and cached line starts. The text is the whole file, or an excerpt of
/// a file too large to hold (one function of a streamed listing): then `base` says where the
/// excerpt starts, and every line, column and byte offset reported is one of the whole file.
#[derive(Debug, Clone)]
pub struct SourceFile {
    name: String,
    text: String,
    line_starts: Vec<u32>,
    base: Excerpt,
}

/// Where an excerpt starts in its file (all zero for a whole file).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Excerpt {
    /// The 0-based line of the file where the excerpt starts.
    pub line: u32,
    /// The 0-based character column of the excerpt's first byte on that line.
    pub column: u32,
    /// The byte offset of the excerpt in the file.
    pub offset: u64,
}

impl SourceFile {
    pub fn new(name: impl Into<String>, text: impl Into<String>) -> Self {
        Self::excerpt(name, text, Excerpt::default())
    }

    /// A part of a larger file, starting at `base`.
    pub fn excerpt(name: impl Into<String>, text: impl Into<String>, base: Excerpt) -> Self {
        let text = text.into();
        let line_starts = line_starts(&text);
        Self { name: name.into(), text, line_starts, base }
    }

    /// Where the text starts in its file.
    pub fn base(&self) -> Excerpt {
        self.base
    }

    /// The byte offset in the whole file of `offset` in the text.
    pub fn file_offset(&self, offset: u32) -> u64 {
        self.base.offset + u64::from(offset)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// The 0-based line index that contains `offset`.
    pub fn line_index(&self, offset: u32) -> usize {
        match self.line_starts.binary_search(&offset) {
            Ok(line) => line,
            Err(next) => next - 1,
        }
    }

    /// The byte range of the 0-based line `line`, without its line terminator.
    pub fn line_range(&self, line: usize) -> Option<Range<usize>> {
        let start = *self.line_starts.get(line)? as usize;
        let mut end = self.line_starts.get(line + 1).map_or(self.text.len(), |&next| next as usize);
        let bytes = self.text.as_bytes();
        while end > start && matches!(bytes[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        Some(start..end)
    }

    pub fn line_count(&self) -> usize {
        self.line_starts.len()
    }

    /// 1-based line and character column of a byte offset (clamped to the text).
    pub fn line_col(&self, offset: u32) -> LineCol {
        let offset = offset.min(u32::try_from(self.text.len()).unwrap_or(u32::MAX));
        let line = self.line_index(offset);
        let start = self.line_starts[line] as usize;
        let mut end = offset as usize;
        while !self.text.is_char_boundary(end) {
            end -= 1;
        }
        let mut column = self.text[start..end].chars().count() as u32 + 1;
        if line == 0 {
            column += self.base.column;
        }
        LineCol { line: line as u32 + 1 + self.base.line, column }
    }
}

fn line_starts(text: &str) -> Vec<u32> {
    std::iter::once(0)
        .chain(memchr_newlines(text.as_bytes()).map(|i| u32::try_from(i + 1).unwrap_or(u32::MAX)))
        .collect()
}

fn memchr_newlines(bytes: &[u8]) -> impl Iterator<Item = usize> + '_ {
    memchr::memchr_iter(b'\n', bytes)
}

/// All files of one run. Implements [`codespan_reporting::files::Files`].
#[derive(Debug, Default, Clone)]
pub struct SourceDb {
    files: Vec<SourceFile>,
}

impl SourceDb {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn add(&mut self, name: impl Into<String>, text: impl Into<String>) -> FileId {
        self.add_excerpt(name, text, Excerpt::default())
    }

    /// Adds a part of a file that starts at `base` (see [`SourceFile::excerpt`]).
    pub fn add_excerpt(
        &mut self,
        name: impl Into<String>,
        text: impl Into<String>,
        base: Excerpt,
    ) -> FileId {
        let id = FileId(u32::try_from(self.files.len()).expect("fewer than 2^32 files"));
        self.files.push(SourceFile::excerpt(name, text, base));
        id
    }

    /// # Panics
    /// Panics when `id` was not made by this database.
    pub fn file(&self, id: FileId) -> &SourceFile {
        &self.files[id.0 as usize]
    }

    pub fn get(&self, id: FileId) -> Option<&SourceFile> {
        self.files.get(id.0 as usize)
    }

    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    pub fn ids(&self) -> impl Iterator<Item = FileId> + '_ {
        (0..self.files.len()).map(|i| FileId(i as u32))
    }
}

impl<'a> codespan_reporting::files::Files<'a> for SourceDb {
    type FileId = FileId;
    type Name = &'a str;
    type Source = &'a str;

    fn name(&'a self, id: FileId) -> Result<&'a str, codespan_reporting::files::Error> {
        self.get(id).map(SourceFile::name).ok_or(codespan_reporting::files::Error::FileMissing)
    }

    fn source(&'a self, id: FileId) -> Result<&'a str, codespan_reporting::files::Error> {
        self.get(id).map(SourceFile::text).ok_or(codespan_reporting::files::Error::FileMissing)
    }

    fn line_index(
        &'a self,
        id: FileId,
        byte_index: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        let file = self.get(id).ok_or(codespan_reporting::files::Error::FileMissing)?;
        Ok(file.line_index(u32::try_from(byte_index).unwrap_or(u32::MAX)))
    }

    fn line_range(
        &'a self,
        id: FileId,
        line_index: usize,
    ) -> Result<Range<usize>, codespan_reporting::files::Error> {
        let file = self.get(id).ok_or(codespan_reporting::files::Error::FileMissing)?;
        let start = *file.line_starts.get(line_index).ok_or(
            codespan_reporting::files::Error::LineTooLarge {
                given: line_index,
                max: file.line_starts.len() - 1,
            },
        )? as usize;
        let end =
            file.line_starts.get(line_index + 1).map_or(file.text.len(), |&next| next as usize);
        Ok(start..end)
    }

    fn line_number(
        &'a self,
        id: FileId,
        line_index: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        let file = self.get(id).ok_or(codespan_reporting::files::Error::FileMissing)?;
        Ok(line_index + 1 + file.base.line as usize)
    }

    fn column_number(
        &'a self,
        id: FileId,
        line_index: usize,
        byte_index: usize,
    ) -> Result<usize, codespan_reporting::files::Error> {
        let file = self.get(id).ok_or(codespan_reporting::files::Error::FileMissing)?;
        let range = self.line_range(id, line_index)?;
        let end = byte_index.clamp(range.start, range.end);
        let mut column =
            file.text.get(range.start..end).map_or(end - range.start, |t| t.chars().count()) + 1;
        if line_index == 0 {
            column += file.base.column as usize;
        }
        Ok(column)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_col_counts_characters() {
        let file = SourceFile::new("a", "ab\nçd\n");
        assert_eq!(file.line_col(0), LineCol { line: 1, column: 1 });
        assert_eq!(file.line_col(3), LineCol { line: 2, column: 1 });
        assert_eq!(file.line_col(5), LineCol { line: 2, column: 2 });
        assert_eq!(file.line_range(1), Some(3..6));
    }

    #[test]
    fn an_excerpt_reports_positions_in_its_whole_file() {
        let base = Excerpt { line: 41, column: 0, offset: 1000 };
        let file = SourceFile::excerpt("big.sass", "a\nbc\n", base);
        assert_eq!(file.line_col(3), LineCol { line: 43, column: 2 });
        assert_eq!(file.file_offset(3), 1003);
        // A JSON excerpt starts inside the file's one line.
        let json =
            SourceFile::excerpt("k.json", "{\"x\":1}", Excerpt { line: 0, column: 70, offset: 70 });
        assert_eq!(json.line_col(1), LineCol { line: 1, column: 72 });
        let mut db = SourceDb::new();
        let id = db.add_excerpt("big.sass", "a\nbc\n", base);
        let files: &dyn for<'a> Fn(&'a SourceDb) -> usize =
            &|db| codespan_reporting::files::Files::line_number(db, id, 1).unwrap();
        assert_eq!(files(&db), 43);
    }

    #[test]
    fn offsets_past_the_end_clamp() {
        let file = SourceFile::new("a", "x");
        assert_eq!(file.line_col(99), LineCol { line: 1, column: 2 });
    }
}
