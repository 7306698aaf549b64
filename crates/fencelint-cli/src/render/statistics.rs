//! `check --statistics`: the findings counted per rule, worst first, instead of the findings
//! themselves. A table for people (`rich`, `short`) and the same rows as JSON (`json`, `jsonl`);
//! documented in docs/json-output.md and as `#/$defs/statistics_document` and
//! `#/$defs/statistics_line` of docs/fencelint-output.schema.json.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use fencelint_diagnostics::{Diagnostic, Severity};
use fencelint_source::FileId;
use serde::Serialize;

use super::json::JSON_VERSION;

/// One rule at one severity.
#[derive(Debug, Serialize)]
pub(crate) struct Row<'a> {
    pub rule: &'a str,
    pub severity: Severity,
    /// Findings.
    pub count: usize,
    /// Distinct functions with a finding: a kernel name counts once per file. Findings outside
    /// any function (input errors) count none.
    pub functions: usize,
    /// Distinct files with a finding; each cubin or PTX of a binary counts as a file of its
    /// own (`lib.so[sm_90a:lib.1.sm_90a.cubin]`).
    pub files: usize,
}

/// The rows, worst first: errors before warnings before notes, then the most findings first,
/// then by rule name (so that the order is the same for the same findings).
///
/// `unit_of` names the file a finding is counted in: the input file, or the cubin or PTX of a
/// binary.
pub(crate) fn rows<'a>(
    diagnostics: &'a [Diagnostic],
    unit_of: impl Fn(FileId) -> &'a str,
) -> Vec<Row<'a>> {
    #[derive(Default)]
    struct Group<'a> {
        count: usize,
        functions: BTreeSet<(&'a str, &'a str)>,
        files: BTreeSet<&'a str>,
    }
    let mut groups: BTreeMap<(&str, Severity), Group<'_>> = BTreeMap::new();
    for diagnostic in diagnostics {
        let key = (diagnostic.rule.as_str(), diagnostic.severity);
        let group = groups.entry(key).or_default();
        let file = unit_of(diagnostic.primary.file);
        group.count += 1;
        group.files.insert(file);
        if let Some(kernel) = &diagnostic.kernel {
            group.functions.insert((file, kernel.as_str()));
        }
    }
    let mut rows: Vec<Row<'_>> = groups
        .into_iter()
        .map(|((rule, severity), group)| Row {
            rule,
            severity,
            count: group.count,
            functions: group.functions.len(),
            files: group.files.len(),
        })
        .collect();
    rows.sort_by(|a, b| {
        b.severity.cmp(&a.severity).then(b.count.cmp(&a.count)).then(a.rule.cmp(b.rule))
    });
    rows
}

/// A table with a header; nothing when there is no finding.
pub(crate) fn table(rows: &[Row<'_>]) -> String {
    let mut out = String::new();
    if rows.is_empty() {
        return out;
    }
    let width = |header: &str, value: fn(&Row<'_>) -> usize| {
        rows.iter().map(|row| value(row).to_string().len()).max().unwrap_or(0).max(header.len())
    };
    let count = width("count", |row| row.count);
    let functions = width("functions", |row| row.functions);
    let files = width("files", |row| row.files);
    let _ = writeln!(
        out,
        "{:>count$}  {:>functions$}  {:>files$}  {:<8}  rule",
        "count", "functions", "files", "severity"
    );
    for row in rows {
        let _ = writeln!(
            out,
            "{:>count$}  {:>functions$}  {:>files$}  {:<8}  {}",
            row.count, row.functions, row.files, row.severity, row.rule
        );
    }
    out
}

#[derive(Serialize)]
struct Document<'a, 'r> {
    version: u32,
    statistics: &'r [Row<'a>],
}

#[derive(Serialize)]
struct Line<'a, 'r> {
    version: u32,
    #[serde(flatten)]
    row: &'r Row<'a>,
}

/// One JSON document: `{"version": 1, "statistics": [...]}`.
pub(crate) fn document(rows: &[Row<'_>]) -> String {
    let document = Document { version: JSON_VERSION, statistics: rows };
    let mut out = serde_json::to_string_pretty(&document).unwrap_or_else(|_| "{}".to_owned());
    out.push('\n');
    out
}

/// JSON Lines: one row a line, each with `version`; nothing when there is no finding.
pub(crate) fn lines(rows: &[Row<'_>]) -> String {
    let mut out = String::new();
    for row in rows {
        let line = Line { version: JSON_VERSION, row };
        if let Ok(text) = serde_json::to_string(&line) {
            out.push_str(&text);
            out.push('\n');
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use fencelint_diagnostics::Label;
    use fencelint_source::{SourceDb, TextRange};

    use super::*;

    fn finding(file: FileId, rule: &str, severity: Severity) -> Diagnostic {
        let label = Label::new(file, TextRange::empty(0), "");
        Diagnostic::new(rule, severity, String::new(), label)
    }

    #[test]
    fn rows_count_findings_functions_and_files_worst_first() {
        let mut db = SourceDb::new();
        let a = db.add("a.ptx".to_owned(), String::new());
        let b = db.add("b.ptx".to_owned(), String::new());
        let in_kernel = |file, rule, severity, kernel: &str| {
            let mut d = finding(file, rule, severity);
            d.kernel = Some(kernel.to_owned());
            d
        };
        let diagnostics = vec![
            in_kernel(a, "perf-rule", Severity::Warning, "k1"),
            in_kernel(a, "perf-rule", Severity::Warning, "k1"),
            in_kernel(a, "perf-rule", Severity::Warning, "k2"),
            // The same kernel name in another file is another function.
            in_kernel(b, "perf-rule", Severity::Warning, "k1"),
            in_kernel(a, "bad-rule", Severity::Error, "k1"),
            finding(b, "input-error", Severity::Error),
            finding(b, "input-error", Severity::Error),
            in_kernel(a, "a-note", Severity::Note, "k3"),
        ];
        let rows = rows(&diagnostics, |file| db.file(file).name());
        let got: Vec<_> =
            rows.iter().map(|r| (r.rule, r.severity, r.count, r.functions, r.files)).collect();
        assert_eq!(
            got,
            [
                ("input-error", Severity::Error, 2, 0, 1),
                ("bad-rule", Severity::Error, 1, 1, 1),
                ("perf-rule", Severity::Warning, 4, 3, 2),
                ("a-note", Severity::Note, 1, 1, 1),
            ]
        );
        assert_eq!(
            table(&rows),
            "count  functions  files  severity  rule\n\
             \x20   2          0      1  error     input-error\n\
             \x20   1          1      1  error     bad-rule\n\
             \x20   4          3      2  warning   perf-rule\n\
             \x20   1          1      1  note      a-note\n"
        );
        assert_eq!(table(&[]), "");
        assert_eq!(lines(&[]), "");
    }
}
