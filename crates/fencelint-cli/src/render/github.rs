//! GitHub Actions workflow annotations (`--format github`): one
//! `::error file=...,line=...,col=...,endLine=...,endColumn=...,title=fencelint(rule)::message`
//! command a finding, which the runner turns into inline annotations on the pull request.

use std::fmt::Write as _;

use fencelint_diagnostics::{Diagnostic, Severity};
use fencelint_source::SourceDb;

use super::{Locations, Paths, Place, known_source, project_frame};

pub(super) fn annotations(
    db: &SourceDb,
    diagnostics: &[Diagnostic],
    locations: Locations,
    paths: &Paths<'_>,
) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        let command = match diagnostic.severity {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "notice",
        };
        let place = Place::of(db, &diagnostic.primary, locations, paths);
        let mut properties = vec![
            ("file", paths.relative(place.file).into_owned()),
            ("line", place.start.line.to_string()),
        ];
        if place.start.column > 0 {
            properties.push(("col", place.start.column.to_string()));
        }
        if let Some(end) = place.end {
            properties.push(("endLine", end.line.to_string()));
            properties.push(("endColumn", end.column.to_string()));
        }
        properties.push(("title", format!("fencelint({})", diagnostic.rule)));

        let mut message = diagnostic.message.clone();
        if let Some(help) = &diagnostic.help {
            let _ = write!(message, "\nhelp: {help}");
        }
        if place.is_source {
            let input = Place::input(db, &diagnostic.primary);
            let _ = write!(
                message,
                "\ninput: {}:{}:{}",
                paths.relative(input.file),
                input.start.line,
                input.start.column
            );
            if let Some(source) = known_source(&diagnostic.primary)
                && !std::ptr::eq(project_frame(source, paths), source)
            {
                let (file, line) = (paths.relative(&source.file), source.line);
                let _ = match source.column {
                    0 => write!(message, "\ninlined code: {file}:{line}"),
                    column => write!(message, "\ninlined code: {file}:{line}:{column}"),
                };
            }
        }

        let properties: Vec<String> = properties
            .iter()
            .map(|(key, value)| format!("{key}={}", escape_property(value)))
            .collect();
        let _ = writeln!(out, "::{command} {}::{}", properties.join(","), escape_data(&message));
    }
    out
}

/// Escapes the message of a workflow command: `%`, CR and LF.
fn escape_data(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            _ => out.push(c),
        }
    }
    out
}

/// Escapes a property value of a workflow command: as [`escape_data`], plus `:` and `,`.
fn escape_property(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '%' => out.push_str("%25"),
            '\r' => out.push_str("%0D"),
            '\n' => out.push_str("%0A"),
            ':' => out.push_str("%3A"),
            ',' => out.push_str("%2C"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn data_escapes_percent_and_line_breaks_only() {
        assert_eq!(escape_data("50% done\r\nnext: a, b"), "50%25 done%0D%0Anext: a, b");
    }

    #[test]
    fn a_source_line_without_column_has_no_col_and_no_end() {
        use fencelint_diagnostics::Label;
        use fencelint_source::{SourceLocation, TextRange};

        let mut db = SourceDb::new();
        let file = db.add("/repo/build/k.ptx", "\n  ld.acquire.gpu.u32 %r1, [%rd1];\n");
        let source = SourceLocation::new("src/k,1.cu", 7, 0);
        let label = Label::new(file, TextRange::new(3, 32), "").with_source(Some(source));
        let diagnostic = Diagnostic::new("some-rule", Severity::Note, "50% of `x`", label);
        let paths = Paths { base_dir: Some(std::path::Path::new("/repo")) };
        assert_eq!(
            annotations(&db, std::slice::from_ref(&diagnostic), Locations::Source, &paths),
            "::notice file=src/k%2C1.cu,line=7,title=fencelint(some-rule)::50%25 of `x`\
             %0Ainput: build/k.ptx:2:3\n"
        );
        assert_eq!(
            annotations(&db, &[diagnostic], Locations::Input, &paths),
            "::notice file=build/k.ptx,line=2,col=3,endLine=2,endColumn=32,\
             title=fencelint(some-rule)::50%25 of `x`\n"
        );
    }

    #[test]
    fn properties_also_escape_colon_and_comma() {
        assert_eq!(escape_property("C:\\a,b%\n"), "C%3A\\a%2Cb%25%0A");
    }
}
