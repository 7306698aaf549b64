//! Inline suppressions: `// fencelint: allow(rule)` comments in the input text, matched against
//! the diagnostics after the rules ran.
//!
//! Three forms, each naming one or more comma-separated rules:
//!
//! - `// fencelint: allow(rule-a, rule-b)` at the end of an instruction's line covers that line.
//!   On a line of its own it covers the next line that is not itself a comment (so several
//!   suppression comments can be stacked above one instruction).
//! - `// fencelint: allow-function(rule)` anywhere inside a function's body, or on a line of its
//!   own just before the function's header, covers the whole function.
//! - `// fencelint: allow-file(rule)` in the first [`FILE_HEAD_LINES`] lines covers the file.
//!
//! A diagnostic is covered when its primary label starts inside the covered range. Names that
//! covered nothing, names that are no rule, and unreadable `allow` comments are reported as
//! `unused-suppression`. A known rule that is not enabled in this run is not reported: another
//! configuration may enable it.

use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_rules::{all_rules, find_rule};
use fencelint_source::{Dialect, FileId, TextRange};

use crate::Settings;

/// `allow-file` comments must start in this many first lines of the file.
pub const FILE_HEAD_LINES: usize = 20;

const MARKER: &str = "fencelint:";

/// Whether `text` holds a `fencelint:` comment at all (most inputs have none). A search for the
/// `:`, which is rare in listings, and a look behind it: the letters of the marker are hex
/// digits and opcode letters, which a general substring search keeps stopping at in SASS
/// (2.3% of linting a cuobjdump listing, against about 0.6% for this).
pub fn has_marker(text: &str) -> bool {
    let bytes = text.as_bytes();
    let word = &MARKER.as_bytes()[..MARKER.len() - 1];
    memchr::memchr_iter(b':', bytes)
        .any(|at| at >= word.len() && &bytes[at - word.len()..at] == word)
}

/// Diagnostics that are never suppressed inline: they say the input was not (fully) read, or
/// that a suppression is wrong.
const NOT_SUPPRESSIBLE: &[&str] =
    &[codes::PARSE_ERROR, codes::INPUT_ERROR, codes::INTERNAL_ERROR, codes::UNUSED_SUPPRESSION];

/// What a suppression covers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SuppressionKind {
    Line,
    Function,
    File,
}

impl SuppressionKind {
    fn directive(self) -> &'static str {
        match self {
            Self::Line => "allow",
            Self::Function => "allow-function",
            Self::File => "allow-file",
        }
    }

    fn place(self, standalone: bool) -> &'static str {
        match self {
            Self::Line if standalone => "on the next line",
            Self::Line => "on this line",
            Self::Function => "in this function",
            Self::File => "in this file",
        }
    }
}

/// One name inside a suppression comment.
#[derive(Clone, Debug)]
struct SuppressedName {
    name: String,
    range: TextRange,
    used: bool,
}

/// One `// fencelint: allow...(...)` comment.
#[derive(Clone, Debug)]
struct Suppression {
    kind: SuppressionKind,
    /// The comment from `//` to the end of its line.
    comment: TextRange,
    /// Whether the line holds nothing but the comment.
    standalone: bool,
    /// The byte ranges this suppression covers (empty until resolved).
    covers: Vec<TextRange>,
    /// The function the comment is in, or covers.
    kernel: Option<String>,
    names: Vec<SuppressedName>,
}

/// An `allow` comment that could not be read or placed.
#[derive(Clone, Debug)]
struct Malformed {
    range: TextRange,
    message: String,
    help: String,
}

/// The suppressions of one text.
#[derive(Clone, Debug, Default)]
pub struct Suppressions {
    items: Vec<Suppression>,
    malformed: Vec<Malformed>,
}

/// A function's name and its range in the text, as the lowered IR has them.
#[derive(Clone, Debug)]
pub struct FunctionSpan {
    pub name: String,
    pub range: TextRange,
}

impl Suppressions {
    /// Finds the suppression comments in `text`. `functions` are the functions of the lowered
    /// text (needed for `allow-function` and to name the kernel of an unused suppression).
    pub fn parse(text: &str, functions: &[FunctionSpan]) -> Self {
        let mut out = Self::default();
        if !has_marker(text) {
            return out;
        }
        let head_end = file_head_end(text);
        for (at, _) in text.match_indices(MARKER) {
            let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
            let line_end = text[at..].find('\n').map_or(text.len(), |i| at + i);
            let before = &text[line_start..at];
            let Some(slashes) = before.trim_end().strip_suffix("//") else {
                continue;
            };
            let comment_start = line_start + slashes.len();
            let standalone = slashes.trim().is_empty();
            let body_start = at + MARKER.len();
            let body = &text[body_start..line_end];
            let comment = TextRange::from_usize(comment_start, line_end);
            match parse_directive(body, body_start) {
                Directive::NotOurs => {}
                Directive::Malformed(message) => out.malformed.push(Malformed {
                    range: comment,
                    message,
                    help: "write `// fencelint: allow(rule-name)`, `allow-function(rule-name)` or \
                           `allow-file(rule-name)`"
                        .to_owned(),
                }),
                Directive::Allow(kind, names) => {
                    let mut suppression = Suppression {
                        kind,
                        comment,
                        standalone,
                        covers: Vec::new(),
                        kernel: None,
                        names,
                    };
                    let placed =
                        suppression.resolve(text, line_start, line_end, head_end, functions);
                    if let Err(message) = placed {
                        out.malformed.push(Malformed {
                            range: comment,
                            message,
                            help: "move the comment or remove it".to_owned(),
                        });
                    } else {
                        out.items.push(suppression);
                    }
                }
            }
        }
        out
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty() && self.malformed.is_empty()
    }

    /// Removes the diagnostics of `file` that a suppression covers and returns how many were
    /// removed. Then appends the `unused-suppression` diagnostics (unless `settings` turns them
    /// off). `paired` says whether the pair rules ran on this text (it was linted with the PTX
    /// it was assembled from): when they did not, their suppressions cannot be judged unused.
    pub fn apply(
        &mut self,
        file: FileId,
        dialect: Dialect,
        diagnostics: &mut Vec<Diagnostic>,
        settings: &Settings,
        paired: bool,
    ) -> usize {
        let before = diagnostics.len();
        diagnostics.retain(|diagnostic| !self.covers(file, diagnostic));
        let suppressed = before - diagnostics.len();
        if let Some(severity) = settings.unused_suppression() {
            diagnostics.extend(self.unused(file, dialect, severity, settings, paired));
        }
        suppressed
    }

    /// Whether a suppression covers `diagnostic`; marks every covering name used.
    fn covers(&mut self, file: FileId, diagnostic: &Diagnostic) -> bool {
        if diagnostic.primary.file != file || NOT_SUPPRESSIBLE.contains(&diagnostic.rule.as_str()) {
            return false;
        }
        let at = diagnostic.primary.range.start;
        let mut covered = false;
        for suppression in &mut self.items {
            if !suppression.covers.iter().any(|range| range.contains(at)) {
                continue;
            }
            for name in &mut suppression.names {
                if name.name == diagnostic.rule {
                    name.used = true;
                    covered = true;
                }
            }
        }
        covered
    }

    fn unused(
        &self,
        file: FileId,
        dialect: Dialect,
        severity: Severity,
        settings: &Settings,
        paired: bool,
    ) -> Vec<Diagnostic> {
        let mut out = Vec::new();
        for malformed in &self.malformed {
            out.push(
                Diagnostic::new(
                    codes::UNUSED_SUPPRESSION,
                    severity,
                    malformed.message.clone(),
                    Label::new(file, malformed.range, "this suppression has no effect"),
                )
                .with_help(malformed.help.clone())
                .with_dialect(dialect),
            );
        }
        for suppression in &self.items {
            let n_names = suppression.names.len();
            for name in &suppression.names {
                if name.used {
                    continue;
                }
                let known = is_suppressible_name(&name.name);
                // A pair rule runs only when the PTX and its SASS are linted together, so its
                // suppression is not known to be unused when this text was linted alone.
                let pair_rule = find_rule(&name.name).is_some_and(|r| r.meta().dialects.pair);
                if known && ((pair_rule && !paired) || !is_enabled(&name.name, settings)) {
                    continue;
                }
                let mut diagnostic = if known {
                    let help = if n_names == 1 {
                        "remove this comment".to_owned()
                    } else {
                        format!("remove `{}` from this comment", name.name)
                    };
                    Diagnostic::new(
                        codes::UNUSED_SUPPRESSION,
                        severity,
                        format!(
                            "unused suppression: no `{}` finding {}",
                            name.name,
                            suppression.kind.place(suppression.standalone)
                        ),
                        Label::new(file, name.range, "suppresses nothing"),
                    )
                    .with_help(help)
                } else {
                    let help = closest_rule(&name.name).map_or_else(
                        || "see `fencelint rules` for the rule names".to_owned(),
                        |close| format!("replace it with `{close}`"),
                    );
                    Diagnostic::new(
                        codes::UNUSED_SUPPRESSION,
                        severity,
                        format!("unknown rule `{}` in suppression", name.name),
                        Label::new(file, name.range, "no rule has this name"),
                    )
                    .with_help(help)
                };
                diagnostic.secondary.push(Label::new(
                    file,
                    suppression.comment,
                    format!("in this `{}` comment", suppression.kind.directive()),
                ));
                if let Some(kernel) = &suppression.kernel {
                    diagnostic = diagnostic.with_kernel(kernel.clone());
                }
                out.push(diagnostic.with_dialect(dialect));
            }
        }
        out
    }
}

impl Suppression {
    /// Works out the ranges this suppression covers.
    fn resolve(
        &mut self,
        text: &str,
        line_start: usize,
        line_end: usize,
        head_end: usize,
        functions: &[FunctionSpan],
    ) -> Result<(), String> {
        let enclosing = functions.iter().find(|f| f.range.contains(self.comment.start));
        match self.kind {
            SuppressionKind::Line => {
                let end =
                    if self.standalone { next_code_line_end(text, line_end) } else { line_end };
                // The end is inclusive: a label may start at the line break itself.
                self.covers.push(TextRange::from_usize(line_start, end + 1));
                self.kernel = enclosing.map(|f| f.name.clone());
            }
            SuppressionKind::Function => {
                let function = enclosing.or_else(|| {
                    if !self.standalone {
                        return None;
                    }
                    let header_line = next_code_line_start(text, line_end)?;
                    functions.iter().find(|f| {
                        let start = f.range.start as usize;
                        start >= header_line && start <= line_end_at(text, header_line)
                    })
                });
                let Some(function) = function else {
                    return Err(format!(
                        "`allow-function` must be inside a function or on the line before its \
                         header ({})",
                        self.names_list()
                    ));
                };
                self.covers.push(function.range);
                self.kernel = Some(function.name.clone());
            }
            SuppressionKind::File => {
                if line_start >= head_end {
                    return Err(format!(
                        "`allow-file` must be in the first {FILE_HEAD_LINES} lines of the file ({})",
                        self.names_list()
                    ));
                }
                self.covers.push(TextRange::from_usize(0, text.len() + 1));
            }
        }
        Ok(())
    }

    fn names_list(&self) -> String {
        let names: Vec<_> = self.names.iter().map(|n| format!("`{}`", n.name)).collect();
        format!("suppresses {}", names.join(", "))
    }
}

enum Directive {
    /// Another `fencelint:` comment (for example a fixture header), not a suppression.
    NotOurs,
    Malformed(String),
    Allow(SuppressionKind, Vec<SuppressedName>),
}

/// Reads `allow(...)`, `allow-function(...)` or `allow-file(...)` from the text after the
/// marker. `offset` is the byte offset of `body` in the file.
fn parse_directive(body: &str, offset: usize) -> Directive {
    let trimmed = body.trim_start();
    let mut at = offset + (body.len() - trimmed.len());
    if !trimmed.starts_with("allow") {
        return Directive::NotOurs;
    }
    let word_len = trimmed.find(|c: char| !(c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    let word = &trimmed[..word_len.unwrap_or(trimmed.len())];
    let kind = match word {
        "allow" => SuppressionKind::Line,
        "allow-function" => SuppressionKind::Function,
        "allow-file" => SuppressionKind::File,
        _ => return Directive::Malformed(format!("unknown suppression `{word}`")),
    };
    let rest = trimmed[word.len()..].trim_start();
    at += trimmed.len() - rest.len();
    let Some(inner) = rest.strip_prefix('(') else {
        return Directive::Malformed(format!("`{word}` needs rule names in parentheses"));
    };
    at += 1;
    let Some(close) = inner.find(')') else {
        return Directive::Malformed(format!("`{word}(` is not closed with `)`"));
    };
    let mut names = Vec::new();
    let mut start = 0;
    for part in inner[..close].split(',') {
        let name = part.trim();
        let lead = part.len() - part.trim_start().len();
        if !name.is_empty() {
            let from = at + start + lead;
            names.push(SuppressedName {
                name: name.to_owned(),
                range: TextRange::from_usize(from, from + name.len()),
                used: false,
            });
        }
        start += part.len() + 1;
    }
    if names.is_empty() {
        return Directive::Malformed(format!("`{word}()` names no rule"));
    }
    Directive::Allow(kind, names)
}

/// The byte offset where line [`FILE_HEAD_LINES`] + 1 starts (or the end of the text).
fn file_head_end(text: &str) -> usize {
    text.match_indices('\n').nth(FILE_HEAD_LINES - 1).map_or(text.len(), |(i, _)| i + 1)
}

fn line_end_at(text: &str, start: usize) -> usize {
    text[start..].find('\n').map_or(text.len(), |i| start + i)
}

/// The start of the first line after `line_end` that is not a comment-only line.
fn next_code_line_start(text: &str, mut line_end: usize) -> Option<usize> {
    while line_end < text.len() {
        let start = line_end + 1;
        let end = line_end_at(text, start);
        if !text[start..end].trim_start().starts_with("//") {
            return Some(start);
        }
        line_end = end;
    }
    None
}

/// The end of the first line after `line_end` that is not a comment-only line.
fn next_code_line_end(text: &str, line_end: usize) -> usize {
    next_code_line_start(text, line_end).map_or(text.len(), |start| line_end_at(text, start))
}

/// A rule name, or a non-rule code that may be suppressed.
fn is_suppressible_name(name: &str) -> bool {
    find_rule(name).is_some() || name == codes::ANALYSIS_INCOMPLETE
}

fn is_enabled(name: &str, settings: &Settings) -> bool {
    name == codes::ANALYSIS_INCOMPLETE || settings.is_enabled(name)
}

/// The rule name nearest to `name` in edit distance, when it is near enough to be a typo.
fn closest_rule(name: &str) -> Option<&'static str> {
    all_rules()
        .iter()
        .map(|rule| rule.meta().name)
        .map(|candidate| (edit_distance(name, candidate), candidate))
        .filter(|&(distance, _)| distance <= 3 && distance < name.len() / 2 + 1)
        .min()
        .map(|(_, candidate)| candidate)
}

/// Levenshtein distance over bytes (rule names are ASCII).
fn edit_distance(a: &str, b: &str) -> usize {
    let b = b.as_bytes();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, &ca) in a.as_bytes().iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let above = row[j + 1];
            let substitution = diagonal + usize::from(ca != cb);
            row[j + 1] = substitution.min(above + 1).min(row[j] + 1);
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(s: &Suppressions) -> Vec<(SuppressionKind, Vec<String>)> {
        s.items.iter().map(|i| (i.kind, i.names.iter().map(|n| n.name.clone()).collect())).collect()
    }

    #[test]
    fn the_marker_search_finds_the_marker_and_nothing_else() {
        for text in ["fencelint:", "// fencelint: allow(x)\n", "a:b fencelint: c", "::fencelint::"]
        {
            assert!(has_marker(text), "{text:?}");
        }
        for text in ["", ":", "fencelint", "encelint:", "fencelint :", "x: y", "fencelin:t"] {
            assert!(!has_marker(text), "{text:?}");
        }
    }

    #[test]
    fn reads_the_three_forms_and_ignores_other_headers() {
        let text = "// fencelint: rules=a, b\n\
                    // fencelint: allow-file(costly-fence)\n\
                    .entry k()\n{\n\
                    // fencelint: allow-function( cp-async-not-waited )\n\
                    ld.global.u32 %r1, [%rd1]; // fencelint: allow(a-rule,b-rule) reason\n\
                    }\n";
        let functions = [FunctionSpan {
            name: "k".to_owned(),
            range: TextRange::from_usize(text.find(".entry").unwrap(), text.len() - 1),
        }];
        let parsed = Suppressions::parse(text, &functions);
        assert!(parsed.malformed.is_empty(), "{:?}", parsed.malformed);
        assert_eq!(
            names(&parsed),
            vec![
                (SuppressionKind::File, vec!["costly-fence".to_owned()]),
                (SuppressionKind::Function, vec!["cp-async-not-waited".to_owned()]),
                (SuppressionKind::Line, vec!["a-rule".to_owned(), "b-rule".to_owned()]),
            ]
        );
        let line = &parsed.items[2];
        assert_eq!(&text[line.names[1].range.to_usize()], "b-rule");
        assert_eq!(line.kernel.as_deref(), Some("k"));
        let function = &parsed.items[1];
        assert_eq!(&text[function.names[0].range.to_usize()], "cp-async-not-waited");
    }

    #[test]
    fn standalone_comments_cover_the_next_code_line_through_a_stack() {
        let text = "a\n// fencelint: allow(x)\n// fencelint: allow(y)\nb\nc\n";
        let parsed = Suppressions::parse(text, &[]);
        let b = text.find("b\n").unwrap() as u32;
        let c = text.find("c\n").unwrap() as u32;
        for item in &parsed.items {
            assert!(item.covers[0].contains(b));
            assert!(!item.covers[0].contains(c));
        }
    }

    #[test]
    fn misplaced_and_unreadable_comments_are_malformed() {
        let mut text = String::new();
        for _ in 0..FILE_HEAD_LINES {
            text.push_str("// filler\n");
        }
        text.push_str("// fencelint: allow-file(x)\n// fencelint: allow-function(y)\n");
        text.push_str("// fencelint: allow x\n// fencelint: allowed(x)\n// fencelint: allow()\n");
        let parsed = Suppressions::parse(&text, &[]);
        assert!(parsed.items.is_empty());
        let messages: Vec<_> = parsed.malformed.iter().map(|m| m.message.as_str()).collect();
        assert_eq!(messages.len(), 5, "{messages:?}");
        assert!(messages[0].contains("first 20 lines"));
        assert!(messages[1].contains("inside a function"));
        assert!(messages[2].contains("parentheses"));
        assert!(messages[3].contains("unknown suppression `allowed`"));
        assert!(messages[4].contains("names no rule"));
    }

    #[test]
    fn lint_text_applies_suppressions_and_reports_unused_ones() {
        let text = include_str!("../../../fixtures/ptx/spin-poll-without-acquire/relaxed_poll.ptx");
        let expect = text.find(" // expect:").unwrap();
        let line_end = expect + text[expect..].find('\n').unwrap();
        let base = format!("{}{}", &text[..expect], &text[line_end..]);
        let lint = |text: &str| {
            let output =
                crate::lint_text(FileId(0), text, crate::InputKind::Ptx, &Settings::default());
            let rules: Vec<_> = output.diagnostics.iter().map(|d| d.rule.clone()).collect();
            (rules, output.suppressed)
        };
        assert_eq!(lint(&base), (vec!["spin-poll-without-acquire".to_owned()], 0));

        let read = "    ld.global.u32 %r2, [%rd2];";
        let suppressed =
            base.replace(read, &format!("{read} // fencelint: allow(spin-poll-without-acquire)"));
        assert_eq!(lint(&suppressed), (vec![], 1));

        let wrong_line = base.replace(
            "    st.global.u32",
            "    st.global.u32 [%rd3], %r2; // fencelint: allow(spin-poll-without-acquire)\n    // ",
        );
        assert_eq!(
            lint(&wrong_line),
            (vec!["spin-poll-without-acquire".to_owned(), codes::UNUSED_SUPPRESSION.to_owned()], 0)
        );

        let mut quiet = Settings::default();
        quiet.set_unused_suppression(None);
        let output = crate::lint_text(FileId(0), &wrong_line, crate::InputKind::Ptx, &quiet);
        assert_eq!(output.diagnostics.len(), 1);
    }

    #[test]
    fn typos_get_the_closest_rule() {
        assert_eq!(closest_rule("spin-pol-without-acquire"), Some("spin-poll-without-acquire"));
        assert_eq!(closest_rule("zzz"), None);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
    }
}
