//! Rendering diagnostics: rich (codespan-reporting), short, and JSON. Conversion to codespan
//! happens only in [`to_codespan`].

use std::fmt::Write as _;

use codespan_reporting::diagnostic as cs;
use codespan_reporting::term::{self, termcolor};
use fencelint_diagnostics::{Diagnostic, Label, Severity};
use fencelint_source::{FileId, SourceDb};
use serde::Serialize;

/// The version of the JSON output schema (docs/json-output.md).
pub(crate) const JSON_VERSION: u32 = 1;

/// Converts one diagnostic to codespan's model.
pub(crate) fn to_codespan(diagnostic: &Diagnostic) -> cs::Diagnostic<FileId> {
    let severity = match diagnostic.severity {
        Severity::Error => cs::Severity::Error,
        Severity::Warning => cs::Severity::Warning,
        Severity::Note => cs::Severity::Note,
    };
    let mut labels = vec![
        cs::Label::primary(diagnostic.primary.file, diagnostic.primary.range.to_usize())
            .with_message(diagnostic.primary.message.clone()),
    ];
    labels.extend(diagnostic.secondary.iter().map(|label| {
        cs::Label::secondary(label.file, label.range.to_usize()).with_message(label.message.clone())
    }));
    let mut notes = Vec::new();
    if let Some(kernel) = &diagnostic.kernel {
        notes.push(format!("in `{kernel}`"));
    }
    if let Some(address) = diagnostic.primary.address {
        notes.push(format!("at SASS address /*{address:04x}*/"));
    }
    if let Some(source) = &diagnostic.primary.source {
        notes.push(format!("from {}:{}", source.file, source.line));
    }
    notes.extend(diagnostic.notes.iter().cloned());
    if let Some(help) = &diagnostic.help {
        notes.push(format!("help: {help}"));
    }
    if fencelint_rules::find_rule(&diagnostic.rule).is_some() {
        notes.push(format!("see: fencelint explain {}", diagnostic.rule));
    }
    cs::Diagnostic::new(severity)
        .with_code(diagnostic.rule.clone())
        .with_message(diagnostic.message.clone())
        .with_labels(labels)
        .with_notes(notes)
}

pub(crate) fn rich(db: &SourceDb, diagnostics: &[Diagnostic], color: bool) -> String {
    let config = term::Config::default();
    let mut buffer = if color { termcolor::Buffer::ansi() } else { termcolor::Buffer::no_color() };
    for diagnostic in diagnostics {
        let _ = term::emit_to_write_style(&mut buffer, &config, db, &to_codespan(diagnostic));
    }
    String::from_utf8_lossy(buffer.as_slice()).into_owned()
}

pub(crate) fn short(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        let file = db.file(diagnostic.primary.file);
        let at = file.line_col(diagnostic.primary.range.start);
        let _ = writeln!(
            out,
            "{}:{}:{}: {}[{}]: {}",
            file.name(),
            at.line,
            at.column,
            diagnostic.severity,
            diagnostic.rule,
            diagnostic.message
        );
    }
    out
}

#[derive(Serialize)]
struct JsonDocument<'a> {
    version: u32,
    diagnostics: Vec<JsonDiagnostic<'a>>,
}

#[derive(Serialize)]
struct JsonSpan {
    start: u32,
    end: u32,
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
    source: Option<&'a fencelint_source::SourceLocation>,
}

#[derive(Serialize)]
struct JsonDiagnostic<'a> {
    rule: &'a str,
    severity: Severity,
    message: &'a str,
    file: &'a str,
    kernel: Option<&'a str>,
    dialect: Option<fencelint_source::Dialect>,
    span: JsonSpan,
    sass_address: Option<u64>,
    source: Option<&'a fencelint_source::SourceLocation>,
    help: Option<&'a str>,
    notes: &'a [String],
    related: Vec<JsonLabel<'a>>,
}

fn span(db: &SourceDb, label: &Label) -> JsonSpan {
    let file = db.file(label.file);
    let start = file.line_col(label.range.start);
    let end = file.line_col(label.range.end);
    JsonSpan {
        start: label.range.start,
        end: label.range.end,
        line: start.line,
        column: start.column,
        end_line: end.line,
        end_column: end.column,
    }
}

pub(crate) fn json(db: &SourceDb, diagnostics: &[Diagnostic]) -> String {
    let diagnostics = diagnostics
        .iter()
        .map(|d| JsonDiagnostic {
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
                .map(|l| JsonLabel {
                    file: db.file(l.file).name(),
                    span: span(db, l),
                    message: &l.message,
                    sass_address: l.address,
                    source: l.source.as_ref(),
                })
                .collect(),
        })
        .collect();
    let document = JsonDocument { version: JSON_VERSION, diagnostics };
    let mut out = serde_json::to_string_pretty(&document).unwrap_or_else(|_| "{}".to_owned());
    out.push('\n');
    out
}
