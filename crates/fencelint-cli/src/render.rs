//! Rendering diagnostics for people, CI systems and editors. Every format renders from the same
//! sorted diagnostics and [`SourceDb`], and the same inputs always give the same bytes: rich
//! (codespan-reporting) and short here, JSON and JSON Lines in [`json`], SARIF in [`sarif`], and
//! GitHub workflow annotations in [`github`]. Conversion to codespan happens only in
//! [`to_codespan`].

mod github;
mod json;
mod sarif;

use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use codespan_reporting::diagnostic as cs;
use codespan_reporting::term::{self, termcolor};
use fencelint_diagnostics::{Diagnostic, Label, Severity};
use fencelint_source::{FileId, LineCol, SourceDb, SourceLocation};

use crate::check::Format;

/// Where the line-oriented outputs (`short`, `github`, `sarif`) point a finding.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Locations {
    /// The original `.cu`/`.py` line when the input carries line info, else the PTX/SASS input.
    #[default]
    Source,
    /// Always the PTX/SASS input.
    Input,
}

/// How to render, besides the format.
#[derive(Clone, Debug)]
pub(crate) struct Options {
    /// ANSI colours in the rich output.
    pub color: bool,
    pub locations: Locations,
    /// The directory that relative paths in `github` and `sarif` output are relative to.
    pub base_dir: Option<PathBuf>,
}

/// Renders `diagnostics` (already sorted) in `format`.
pub(crate) fn render(
    format: Format,
    db: &SourceDb,
    diagnostics: &[Diagnostic],
    options: &Options,
) -> String {
    let paths = Paths { base_dir: options.base_dir.as_deref() };
    match format {
        Format::Rich => rich(db, diagnostics, options.color, options.locations),
        Format::Short => short(db, diagnostics, options.locations),
        Format::Json => json::document(db, diagnostics),
        Format::Jsonl => json::lines(db, diagnostics),
        Format::Sarif => sarif::log(db, diagnostics, options.locations, &paths),
        Format::Github => github::annotations(db, diagnostics, options.locations, &paths),
    }
}

/// Converts one diagnostic to codespan's model.
pub(crate) fn to_codespan(diagnostic: &Diagnostic, locations: Locations) -> cs::Diagnostic<FileId> {
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
    if locations == Locations::Source
        && let Some(source) = known_source(&diagnostic.primary)
    {
        notes.push(format!("source: {}", source_position(source)));
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

/// Source snippets with labels; the PTX/SASS text is always shown, with a `source:` note.
pub(crate) fn rich(
    db: &SourceDb,
    diagnostics: &[Diagnostic],
    color: bool,
    locations: Locations,
) -> String {
    let config = term::Config::default();
    let mut buffer = if color { termcolor::Buffer::ansi() } else { termcolor::Buffer::no_color() };
    for diagnostic in diagnostics {
        let _ = term::emit_to_write_style(
            &mut buffer,
            &config,
            db,
            &to_codespan(diagnostic, locations),
        );
    }
    String::from_utf8_lossy(buffer.as_slice()).into_owned()
}

/// One line a finding: `file:line:col: severity[rule]: message`.
pub(crate) fn short(db: &SourceDb, diagnostics: &[Diagnostic], locations: Locations) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        let place = Place::of(db, &diagnostic.primary, locations);
        let _ = writeln!(
            out,
            "{}:{}:{}: {}[{}]: {}",
            place.file,
            place.start.line,
            place.start.column.max(1),
            diagnostic.severity,
            diagnostic.rule,
            diagnostic.message
        );
    }
    out
}

/// The label's source location, unless it is missing or has no line (`.loc 1 0 0`).
fn known_source(label: &Label) -> Option<&SourceLocation> {
    label.source.as_ref().filter(|source| source.line > 0)
}

/// `file:line`, or `file:line:column` when the column is known.
fn source_position(source: &SourceLocation) -> String {
    if source.column > 0 {
        format!("{}:{}:{}", source.file, source.line, source.column)
    } else {
        format!("{}:{}", source.file, source.line)
    }
}

/// Where a line-oriented output shows a label: in the original source or in the input.
#[derive(Clone, Debug)]
struct Place<'a> {
    /// The file name as given on the command line, or as written in the line info.
    file: &'a str,
    /// Line and column (column 0 when the line info has none).
    start: LineCol,
    /// Where the label ends; only known in the input.
    end: Option<LineCol>,
    /// True when the place is the original source rather than the input.
    is_source: bool,
}

impl<'a> Place<'a> {
    fn of(db: &'a SourceDb, label: &'a Label, locations: Locations) -> Self {
        match known_source(label) {
            Some(source) if locations == Locations::Source => Self::source(source),
            _ => Self::input(db, label),
        }
    }

    fn source(source: &'a SourceLocation) -> Self {
        Self {
            file: &source.file,
            start: LineCol { line: source.line, column: source.column },
            end: None,
            is_source: true,
        }
    }

    fn input(db: &'a SourceDb, label: &Label) -> Self {
        let file = db.file(label.file);
        Self {
            file: file.name(),
            start: file.line_col(label.range.start),
            end: Some(file.line_col(label.range.end)),
            is_source: false,
        }
    }
}

/// Turns the names of files into paths relative to the base directory where they can be.
#[derive(Clone, Copy, Debug)]
struct Paths<'a> {
    base_dir: Option<&'a Path>,
}

impl Paths<'_> {
    /// `name` relative to the base directory when it lies below it; relative names lose a
    /// leading `./`; anything else is returned as it is.
    fn relative<'n>(&self, name: &'n str) -> Cow<'n, str> {
        let path = Path::new(name);
        if path.is_absolute() {
            if let Some(base) = self.base_dir
                && let Ok(rest) = path.strip_prefix(base)
                && !rest.as_os_str().is_empty()
            {
                return Cow::Owned(rest.to_string_lossy().replace('\\', "/"));
            }
            return Cow::Borrowed(name);
        }
        let mut rest = name;
        while let Some(stripped) = rest.strip_prefix("./") {
            rest = stripped.trim_start_matches('/');
        }
        if rest.is_empty() || path.components().any(|c| matches!(c, Component::Prefix(_))) {
            Cow::Borrowed(name)
        } else {
            Cow::Borrowed(rest)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_below_the_base_become_relative() {
        let base = Path::new("/work/repo");
        let paths = Paths { base_dir: Some(base) };
        assert_eq!(paths.relative("/work/repo/build/k.ptx"), "build/k.ptx");
        assert_eq!(paths.relative("/elsewhere/k.ptx"), "/elsewhere/k.ptx");
        assert_eq!(paths.relative("./build/k.ptx"), "build/k.ptx");
        assert_eq!(paths.relative(".//build/k.ptx"), "build/k.ptx");
        assert_eq!(paths.relative("../k.cu"), "../k.cu");
        assert_eq!(paths.relative("k.cu"), "k.cu");
    }

    #[test]
    fn a_source_line_zero_is_no_source() {
        let label = Label::new(FileId(0), fencelint_source::TextRange::empty(0), "")
            .with_source(Some(SourceLocation { file: "k.cu".to_owned(), line: 0, column: 0 }));
        assert!(known_source(&label).is_none());
    }
}
