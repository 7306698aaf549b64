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
    let len = text.len();
    let line_span = |range: TextRange| {
        let start = (range.start as usize).min(len);
        let end = (range.end as usize).clamp(start, len);
        let from = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let to = text[end..].find('\n').map_or(len, |i| end + i + 1);
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
            Some(last) if from <= last.1 || newlines(&text[last.1..from]) < MAX_GAP => {
                last.1 = last.1.max(to);
            }
            _ => merged.push((from, to)),
        }
    }
    let mut snippets = Vec::with_capacity(merged.len());
    let (mut line, mut counted) = (base.line, 0usize);
    for &(from, to) in &merged {
        line += newlines(&text[counted..from]) as u32;
        counted = from;
        snippets.push(Snippet {
            text: text[from..to].to_owned(),
            base: Excerpt {
                line,
                column: if from == 0 { base.column } else { 0 },
                offset: base.offset + from as u64,
            },
        });
    }
    for label in labels_mut(diagnostics).filter(|label| label.file == file) {
        let (from, _) = line_span(label.range);
        let index = merged.partition_point(|&(start, _)| start <= from) - 1;
        let shift = merged[index].0 as u32;
        label.file = FileId(index as u32);
        label.range = TextRange::new(
            label.range.start.min(len as u32) - shift,
            label.range.end.min(len as u32).max(label.range.start.min(len as u32)) - shift,
        );
    }
    snippets
}

/// Labels fewer lines apart than this share a snippet.
const MAX_GAP: usize = 8;

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
    use fencelint_source::SourceFile;

    use super::*;

    #[test]
    fn labels_keep_their_positions_in_the_whole_text() {
        let filler = "-\n".repeat(MAX_GAP);
        let text = format!("l1\nl2 abc\nl3\nl4 xyz\n{filler}l5\nl6 end");
        let text = text.as_str();
        let base = Excerpt { line: 100, column: 0, offset: 5000 };
        let whole = SourceFile::excerpt("f", text, base);
        let at = |needle: &str| {
            let start = text.find(needle).unwrap() as u32;
            TextRange::new(start, start + needle.len() as u32)
        };
        let file = FileId(7);
        let mut diagnostics = vec![
            Diagnostic::new("r", Severity::Error, "m", Label::new(file, at("abc"), ""))
                .with_secondary(Label::new(file, at("xyz"), ""))
                .with_secondary(Label::new(FileId(9), at("l1"), "on another file")),
            Diagnostic::new("r", Severity::Error, "m", Label::new(file, at("end"), "")),
        ];
        let expected: Vec<_> = [at("abc"), at("xyz"), at("end")]
            .into_iter()
            .map(|r| (whole.line_col(r.start), whole.line_col(r.end), whole.file_offset(r.start)))
            .collect();
        let snippets = cut(text, base, file, &mut diagnostics);
        assert_eq!(snippets.len(), 2);
        assert_eq!(snippets[0].text, "l2 abc\nl3\nl4 xyz\n");
        let files: Vec<SourceFile> =
            snippets.iter().map(|s| SourceFile::excerpt("f", s.text.clone(), s.base)).collect();
        let found: Vec<_> =
            [&diagnostics[0].primary, &diagnostics[0].secondary[0], &diagnostics[1].primary]
                .into_iter()
                .map(|l| {
                    let f = &files[l.file.0 as usize];
                    (
                        f.line_col(l.range.start),
                        f.line_col(l.range.end),
                        f.file_offset(l.range.start),
                    )
                })
                .collect();
        assert_eq!(found, expected);
        assert_eq!(diagnostics[0].secondary[1].file, FileId(9));
    }
}
