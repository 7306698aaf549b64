//! JSON (`--format json`, one document) and JSON Lines (`--format jsonl`, one diagnostic a
//! line). The schema is documented in docs/json-output.md and docs/fencelint-output.schema.json.

use fencelint_diagnostics::{Diagnostic, Label, Severity};
use fencelint_source::{Dialect, SourceDb, SourceLocation};
use serde::Serialize;

/// The version of the JSON output schema (docs/json-output.md).
pub(super) const JSON_VERSION: u32 = 1;

#[derive(Serialize)]
struct JsonDocument<'a> {
    version: u32,
    diagnostics: Vec<JsonDiagnostic<'a>>,
}

/// One line of JSON Lines: a diagnostic with the schema version in front.
#[derive(Serialize)]
struct JsonLine<'a> {
    version: u32,
    #[serde(flatten)]
    diagnostic: JsonDiagnostic<'a>,
}

#[derive(Serialize)]
struct JsonSpan {
    start: u64,
    end: u64,
    line: u32,
    column: u32,
    end_line: u32,
    end_column: u32,
}

#[derive(Serialize)]
struct JsonLabel<'a> {
    file: &'a str,
    span: JsonSpan,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    sass_address: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    source: Option<&'a SourceLocation>,
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    rule: &'a str,
    severity: Severity,
    message: &'a str,
    file: &'a str,
    kernel: Option<&'a str>,
    dialect: Option<Dialect>,
    span: JsonSpan,
    sass_address: Option<u64>,
    source: Option<&'a SourceLocation>,
    help: Option<&'a str>,
    notes: &'a [String],
    related: Vec<JsonLabel<'a>>,
    fingerprint: Option<&'a str>,
}

fn span(db: &SourceDb, label: &Label) -> JsonSpan {
    let file = db.file(label.file);
    let start = file.line_col(label.range.start);
    let end = file.line_col(label.range.end);
    JsonSpan {
        start: file.file_offset(label.range.start),
        end: file.file_offset(label.range.end),
        line: start.line,
        column: start.column,
        end_line: end.line,
        end_column: end.column,
    }
}

fn diagnostic<'a>(db: &'a SourceDb, d: &'a Diagnostic) -> JsonDiagnostic<'a> {
    JsonDiagnostic {
        rule: &d.rule,
        severity: d.severity,
        message: &d.message,
        file: db.file(d.primary.file).name(),
        kernel: d.kernel.as_deref(),
        dialect: d.dialect,
        span: span(db, &d.primary),
        sass_address: d.primary.address,
        source: d.primary.source.as_ref(),
        help: d.help.as_deref(),
        notes: &d.notes,
        related: d
            .secondary
            .iter()
            .map(|label| JsonLabel {
                file: db.file(label.file).name(),
                span: span(db, label),
                message: &label.message,
                sass_address: label.address,
                source: label.source.as_ref(),
            })
            .collect(),
        fingerprint: d.fingerprint.as_deref(),
    }
}

/// One pretty-printed document: `{"version": 1, "diagnostics": [...]}`.
pub(super) fn document(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let diagnostics = diagnostics.iter().map(|d| diagnostic(db, d)).collect();
    let document = JsonDocument { version: JSON_VERSION, diagnostics };
    let mut out = serde_json::to_string_pretty(&document).unwrap_or_else(|_| "{}".to_owned());
    out.push('\n');
    out
}

/// One compact object a line, each with `version`; nothing at all when there is no finding.
pub(super) fn lines(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for d in diagnostics {
        let line = JsonLine { version: JSON_VERSION, diagnostic: diagnostic(db, d) };
        if let Ok(text) = serde_json::to_string(&line) {
            out.push_str(&text);
            out.push('\n');
        }
    }
    out
}
