//! Keeping only the lines that findings point at. A function of a streamed listing or of a
//! disassembled binary can be tens of thousands of lines, and vendor code has findings in most
//! functions: holding every such function until the report is written would make memory grow
//! with the input. Instead, the lines under each label are cut out as small excerpts that still
//! report the lines, columns and byte offsets of the whole text.

use fencelint_diagnostics::{Diagnostic, Label};
use fencelint_source::{Excerpt, FileId, TextRange};

/// Lines of a text, and where they start in its file.
pub(crate) struct Snippet {
    pub text: String,
    pub base: Excerpt,
}

/// Cuts out of `text` (which starts at `base` in its file) the lines under every label of
/// `diagnostics` that is on `file`, merging lines that touch. Those labels are moved onto the
/// snippets: afterwards their `file` is `FileId(i)`, the index of their snippet in the result.
/// Labels on other files are left alone.
pub(crate) fn cut(
    text: &str,
    base: Excerpt,
    file: FileId,
    diagnostics: &mut [Diagnostic],
) -> Vec<Snippet> {
    let mut snippets = Vec::new();
    cut_into(&mut snippets, text, base, file, diagnostics);
    snippets
}

/// [`cut`], adding the snippets to `snippets`: the labels moved get the index of their snippet
/// there. Cutting several texts into one vector this way gives the excerpts of findings whose
/// labels lie in several places of a file (a function and the functions it calls).
pub(crate) fn cut_into(
    snippets: &mut Vec<Snippet>,
    text: &str,
    base: Excerpt,
    file: FileId,
    diagnostics: &mut [Diagnostic],
) {
    let first = snippets.len();
    let len = text.len();
    // The lines under a label, or, on a line longer than `LONG_LINE` (nvdisasm writes its JSON
    // on one line), `CONTEXT` bytes on either side of the label.
    let line_span = |range: TextRange| {
        let start = (range.start as usize).min(len);
        let end = (range.end as usize).clamp(start, len);
        let mut from = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let mut to = text[end..].find('\n').map_or(len, |i| end + i + 1);
        if to - from > LONG_LINE {
            from = floor_char_boundary(text, start.saturating_sub(CONTEXT).max(from));
            to = ceil_char_boundary(text, (end + CONTEXT).min(to));
        }
        (from, to)
    };
    let mut spans: Vec<(usize, usize)> = labels(diagnostics)
        .filter(|label| label.file == file)
        .map(|label| line_span(label.range))
        .collect();
    spans.sort_unstable();
    let mut merged: Vec<(usize, usize)> = Vec::new();
    for (from, to) in spans {
        match merged.last_mut() {
            // Lines a few apart share a snippet, so that a report shows them in one block.
            Some(last)
                if from <= last.1
                    || (from - last.1 < MAX_GAP_BYTES
                        && newlines(&text[last.1..from]) < MAX_GAP) =>
            {
                last.1 = last.1.max(to);
            }
            _ => merged.push((from, to)),
        }
    }
    snippets.reserve(merged.len());
    // The line and character column of each snippet's start, counted on from the previous one
    // (each byte once: a JSON function is one line of up to megabytes with many findings).
    let (mut line, mut column, mut counted) = (base.line, base.column, 0usize);
    for &(from, to) in &merged {
        let gap = &text[counted..from];
        match gap.rfind('\n') {
            Some(last) => {
                line += newlines(gap) as u32;
                column = gap[last + 1..].chars().count() as u32;
            }
            None => column += gap.chars().count() as u32,
        }
        counted = from;
        snippets.push(Snippet {
            text: text[from..to].to_owned(),
            base: Excerpt { line, column, offset: base.offset + from as u64 },
        });
    }
    for label in labels_mut(diagnostics).filter(|label| label.file == file) {
        let (from, _) = line_span(label.range);
        let index = merged.partition_point(|&(start, _)| start <= from) - 1;
        let shift = merged[index].0 as u32;
        label.file = FileId((first + index) as u32);
        label.range = TextRange::new(
            label.range.start.min(len as u32) - shift,
            label.range.end.min(len as u32).max(label.range.start.min(len as u32)) - shift,
        );
    }
}

/// Labels fewer lines apart than this share a snippet.
const MAX_GAP: usize = 8;

/// Snippets this many bytes apart or more are not merged, however few lines lie between.
const MAX_GAP_BYTES: usize = 4 << 10;

/// Lines longer than this are cut around their labels: a function of nvdisasm JSON is one line
/// of up to megabytes, and keeping it whole for each function with a finding took hundreds of
/// megabytes (570 → 272 MB peak on NCCL's 364 MB listing).
const LONG_LINE: usize = 16 << 10;

/// The bytes kept on either side of a label on a long line.
const CONTEXT: usize = 1 << 10;

fn floor_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at -= 1;
    }
    at
}

fn ceil_char_boundary(text: &str, mut at: usize) -> usize {
    while !text.is_char_boundary(at) {
        at += 1;
    }
    at
}

fn newlines(text: &str) -> usize {
    memchr::memchr_iter(b'\n', text.as_bytes()).count()
}

fn labels(diagnostics: &[Diagnostic]) -> impl Iterator<Item = &Label> {
    diagnostics.iter().flat_map(|d| std::iter::once(&d.primary).chain(&d.secondary))
}

fn labels_mut(diagnostics: &mut [Diagnostic]) -> impl Iterator<Item = &mut Label> {
    diagnostics
        .iter_mut()
        .flat_map(|d| std::iter::once(&mut d.primary).chain(d.secondary.iter_mut()))
}

#[cfg(test)]
mod tests {
    use fencelint_diagnostics::Severity;
    use fencelint_source::{LineCol, SourceFile};

    use super::*;

    /// Start, end and byte offset of a label.
    type Position = (LineCol, LineCol, u64);

    /// The range of the first `needle` in `text`.
    fn range_of(text: &str, needle: &str) -> TextRange {
        let start = text.find(needle).unwrap() as u32;
        TextRange::new(start, start + needle.len() as u32)
    }

    /// Line and column of the start and end, and byte offset, of each label in its snippet.
    fn positions(snippets: &[Snippet], labels: &[&Label]) -> Vec<Position> {
        let files: Vec<SourceFile> =
            snippets.iter().map(|s| SourceFile::excerpt("f", s.text.clone(), s.base)).collect();
        labels
            .iter()
            .map(|l| {
                let f = &files[l.file.0 as usize];
                (f.line_col(l.range.start), f.line_col(l.range.end), f.file_offset(l.range.start))
            })
            .collect()
    }

    /// The same for ranges of the whole text.
    fn whole_positions(whole: &SourceFile, ranges: &[TextRange]) -> Vec<Position> {
        ranges
            .iter()
            .map(|r| (whole.line_col(r.start), whole.line_col(r.end), whole.file_offset(r.start)))
            .collect()
    }

    #[test]
    fn labels_keep_their_positions_in_the_whole_text() {
        let filler = "-\n".repeat(MAX_GAP);
        let text = format!("l1\nl2 abc\nl3\nl4 xyz\n{filler}l5\nl6 end");
        let text = text.as_str();
        let base = Excerpt { line: 100, column: 0, offset: 5000 };
        let whole = SourceFile::excerpt("f", text, base);
        let at = |needle: &str| range_of(text, needle);
        let file = FileId(7);
        let mut diagnostics = vec![
            Diagnostic::new("r", Severity::Error, "m", Label::new(file, at("abc"), ""))
                .with_secondary(Label::new(file, at("xyz"), ""))
                .with_secondary(Label::new(FileId(9), at("l1"), "on another file")),
            Diagnostic::new("r", Severity::Error, "m", Label::new(file, at("end"), "")),
        ];
        let expected = whole_positions(&whole, &[at("abc"), at("xyz"), at("end")]);
        let snippets = cut(text, base, file, &mut diagnostics);
        assert_eq!(snippets.len(), 2);
        assert_eq!(snippets[0].text, "l2 abc\nl3\nl4 xyz\n");
        let labels =
            [&diagnostics[0].primary, &diagnostics[0].secondary[0], &diagnostics[1].primary];
        assert_eq!(positions(&snippets, &labels), expected);
        assert_eq!(diagnostics[0].secondary[1].file, FileId(9));
    }

    /// On one long line (nvdisasm JSON), only the bytes around each label are kept, and the
    /// labels still report the line, the character column and the byte offset of the whole
    /// text, after a multi-byte character and on a chunk that starts mid-line.
    #[test]
    fn a_long_line_is_cut_around_its_labels() {
        let pad = "x".repeat(LONG_LINE);
        let text = format!("head\n[{{\"\u{20ac}\":1}},{pad}AAA{pad}BBB{pad}]\nlast");
        let text = text.as_str();
        let base = Excerpt { line: 3, column: 40, offset: 900 };
        let whole = SourceFile::excerpt("f", text, base);
        let at = |needle: &str| range_of(text, needle);
        let file = FileId(0);
        let mut diagnostics = vec![
            Diagnostic::new("r", Severity::Error, "m", Label::new(file, at("AAA"), ""))
                .with_secondary(Label::new(file, at("BBB"), "")),
        ];
        let expected = whole_positions(&whole, &[at("AAA"), at("BBB")]);
        let snippets = cut(text, base, file, &mut diagnostics);
        assert_eq!(snippets.len(), 2, "labels far apart on one line share no snippet");
        assert!(snippets.iter().all(|s| s.text.len() <= 2 * CONTEXT + 3));
        let labels = [&diagnostics[0].primary, &diagnostics[0].secondary[0]];
        assert_eq!(positions(&snippets, &labels), expected);

        // The first line of a chunk that starts mid-line adds the chunk's own column.
        let mid_line = format!("{pad}{pad}CCC tail");
        let mid_line = mid_line.as_str();
        let whole = SourceFile::excerpt("f", mid_line, base);
        let mut diagnostics = vec![Diagnostic::new(
            "r",
            Severity::Error,
            "m",
            Label::new(file, range_of(mid_line, "CCC"), ""),
        )];
        let expected = whole_positions(&whole, &[range_of(mid_line, "CCC")]);
        let snippets = cut(mid_line, base, file, &mut diagnostics);
        assert_eq!(positions(&snippets, &[&diagnostics[0].primary]), expected);
    }
}
