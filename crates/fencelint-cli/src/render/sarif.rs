//! SARIF 2.1.0 (`--format sarif`) for GitHub code scanning and other SARIF viewers, built with
//! the typed model of `serde-sarif`.
//!
//! Every rule and every non-rule code is a `reportingDescriptor` whose `id` is its stable name.
//! A result points at the original source line when the input carries line info (and
//! `--locations source`), with the PTX/SASS instruction as a related location; otherwise at the
//! instruction itself, with the SASS offset as its `address`. Secondary labels become related
//! locations in the same way. The kernel is a logical location, and `Diagnostic::fingerprint` is
//! the partial fingerprint `fencelintFingerprint/v1`.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_rules::RuleMeta;
use fencelint_source::{Dialect, SourceDb, SourceLocation};
use serde_json::json;
use serde_sarif::sarif::{
    Address, ArtifactLocation, Location, LogicalLocation, Message, MultiformatMessageString,
    PhysicalLocation, PropertyBag, Region, ReportingConfiguration, ReportingDescriptor, Result,
    ResultLevel, Run, Sarif, Stack, StackFrame, Tool, ToolComponent,
};

use super::{Locations, Paths, known_source, project_frame};

/// The `$schema` written into the log.
const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// The key of `Diagnostic::fingerprint` in `partialFingerprints`.
const FINGERPRINT_KEY: &str = "fencelintFingerprint/v1";

/// The codes that do not come from a rule: name, default level, summary, description.
const TOOL_CODES: &[(&str, &str, &str, &str)] = &[
    (
        codes::INPUT_ERROR,
        "error",
        "An input could not be read or decoded",
        "The file is missing, unreadable, empty, binary where text was expected, not UTF-8, or a \
         binary whose disassembly failed. Other inputs are still linted, and the run exits with \
         code 2.",
    ),
    (
        codes::PARSE_ERROR,
        "error",
        "A statement or line could not be parsed",
        "The front end could not parse this statement; it is kept as an unknown instruction and \
         the rest of the function is still analysed, but findings that involve it may be missing.",
    ),
    (
        codes::ANALYSIS_INCOMPLETE,
        "warning",
        "An analysis stopped at its budget",
        "An analysis of this function reached its budget and stopped; findings in the function may \
         be missing.",
    ),
    (
        codes::INTERNAL_ERROR,
        "error",
        "A rule failed on this function",
        "A rule stopped with an internal error on this function; other rules and kernels were \
         still checked. Please report it together with the input file.",
    ),
    (
        codes::UNKNOWN_ARCHITECTURE,
        "note",
        "A SASS input for an architecture newer than any checked",
        "The SASS semantics table was checked against older architectures: an instruction new to \
         this one is kept as an unknown one, and a hazard it takes part in may go unreported.",
    ),
    (
        codes::CALLS_NOT_FOLLOWED,
        "note",
        "Calls whose callee was not checked in the caller's context",
        "Calls by name whose callee's code was not copied into the caller (a listing that names \
         no callee, a budget, a callee in another cubin): a hazard across such a call may go \
         unreported.",
    ),
    (
        codes::DEBUG_BUILD,
        "note",
        "PTX of a debug build",
        "The PTX names a `debug` target (`nvcc -G`): variables live in memory and library \
         functions are called rather than inlined, so its findings differ from the release \
         build's. Lint the release build.",
    ),
    (
        "unused-suppression",
        "warning",
        "A suppression comment suppresses nothing",
        "An inline `fencelint: allow(...)` comment names a rule that reports nothing on its line, \
         or a rule that does not exist; remove it or fix the rule name.",
    ),
];

/// Renders the whole run as one pretty-printed SARIF log.
pub(super) fn log(
    db: &SourceDb,
    diagnostics: &[Diagnostic],
    locations: Locations,
    paths: &Paths<'_>,
) -> String {
    let (rules, index) = descriptors(diagnostics);
    let results: Vec<Result> = diagnostics
        .iter()
        .map(|diagnostic| result(db, diagnostic, locations, paths, index.get(&diagnostic.rule)))
        .collect();
    let driver = ToolComponent::builder()
        .name("fencelint")
        .full_name(format!("fencelint {}", env!("CARGO_PKG_VERSION")))
        .version(env!("CARGO_PKG_VERSION"))
        .semantic_version(env!("CARGO_PKG_VERSION"))
        .information_uri(env!("CARGO_PKG_REPOSITORY"))
        .rules(rules)
        .build();
    let run = Run::builder()
        .tool(Tool::builder().driver(driver).build())
        .results(results)
        .column_kind(json!("unicodeCodePoints"))
        .build();
    let log = Sarif::builder().schema(SCHEMA_URI).version(json!("2.1.0")).runs(vec![run]).build();
    let mut out = serde_json::to_string_pretty(&log).unwrap_or_else(|_| "{}".to_owned());
    out.push('\n');
    out
}

/// Every rule, then every tool code, then any other name that a diagnostic carries; and the
/// index of each name in that list.
fn descriptors(diagnostics: &[Diagnostic]) -> (Vec<ReportingDescriptor>, BTreeMap<String, i64>) {
    let mut rules: Vec<ReportingDescriptor> =
        fencelint_rules::all_rules().iter().map(|rule| rule_descriptor(rule.meta())).collect();
    for &(name, level, summary, description) in TOOL_CODES {
        rules.push(tool_descriptor(name, level, summary, description));
    }
    let mut index: BTreeMap<String, i64> = BTreeMap::new();
    for (i, rule) in rules.iter().enumerate() {
        index.insert(rule.id.clone(), i64::try_from(i).unwrap_or(i64::MAX));
    }
    let mut others: Vec<&str> = diagnostics
        .iter()
        .map(|d| d.rule.as_str())
        .filter(|name| !index.contains_key(*name))
        .collect();
    others.sort_unstable();
    others.dedup();
    for name in others {
        index.insert(name.to_owned(), i64::try_from(rules.len()).unwrap_or(i64::MAX));
        rules.push(tool_descriptor(name, "warning", name, name));
    }
    (rules, index)
}

fn rule_descriptor(meta: &RuleMeta) -> ReportingDescriptor {
    let level = meta.default_severity().map_or("none", Severity::as_str);
    let mut configuration = ReportingConfiguration::builder().level(json!(level)).build();
    if meta.default_severity().is_none() {
        configuration.enabled = Some(false);
    }
    let what = what_it_does(meta.doc);
    let mut properties = BTreeMap::new();
    properties.insert("category".to_owned(), json!(meta.category.as_str()));
    properties.insert("dialects".to_owned(), json!(meta.dialects.to_string()));
    ReportingDescriptor::builder()
        .id(meta.name)
        .name(meta.name)
        .short_description(MultiformatMessageString::builder().text(meta.summary).build())
        .full_description(
            MultiformatMessageString::builder().text(plain(&what)).markdown(what.clone()).build(),
        )
        .help(MultiformatMessageString::builder().text(meta.doc).markdown(meta.doc).build())
        .help_uri(format!("{}/blob/main/rules/{}.md", env!("CARGO_PKG_REPOSITORY"), meta.name))
        .default_configuration(configuration)
        .properties(
            PropertyBag::builder()
                .tags(vec![meta.category.as_str().to_owned()])
                .additional_properties(properties)
                .build(),
        )
        .build()
}

fn tool_descriptor(
    name: &str,
    level: &str,
    summary: &str,
    description: &str,
) -> ReportingDescriptor {
    let mut properties = BTreeMap::new();
    properties.insert("category".to_owned(), json!("tool"));
    ReportingDescriptor::builder()
        .id(name)
        .name(name)
        .short_description(MultiformatMessageString::builder().text(summary).build())
        .full_description(MultiformatMessageString::builder().text(description).build())
        .default_configuration(ReportingConfiguration::builder().level(json!(level)).build())
        .properties(
            PropertyBag::builder()
                .tags(vec!["tool".to_owned()])
                .additional_properties(properties)
                .build(),
        )
        .build()
}

/// The paragraph under `## What it does` in a rule's document, with its Markdown line breaks
/// joined.
fn what_it_does(doc: &str) -> String {
    let mut lines = doc.lines().skip_while(|line| line.trim() != "## What it does").skip(1);
    let mut paragraph: Vec<&str> = Vec::new();
    for line in lines.by_ref() {
        let line = line.trim();
        if line.starts_with('#') {
            break;
        }
        if line.is_empty() {
            if paragraph.is_empty() {
                continue;
            }
            break;
        }
        paragraph.push(line);
    }
    paragraph.join(" ")
}

/// Markdown with its backticks removed, for the plain-text variant.
fn plain(markdown: &str) -> String {
    markdown.replace('`', "")
}

fn level(severity: Severity) -> ResultLevel {
    match severity {
        Severity::Error => ResultLevel::Error,
        Severity::Warning => ResultLevel::Warning,
        Severity::Note => ResultLevel::Note,
    }
}

fn result(
    db: &SourceDb,
    diagnostic: &Diagnostic,
    locations: Locations,
    paths: &Paths<'_>,
    rule_index: Option<&i64>,
) -> Result {
    let mut text = diagnostic.message.clone();
    if let Some(help) = &diagnostic.help {
        text.push_str("\nhelp: ");
        text.push_str(help);
    }
    let mapped =
        if locations == Locations::Source { known_source(&diagnostic.primary) } else { None };
    let physical = match mapped {
        Some(source) => source_location(project_frame(source, paths), paths),
        None => input_location(db, &diagnostic.primary, paths),
    };
    let mut primary = Location::builder().physical_location(physical).build();
    if let Some(kernel) = &diagnostic.kernel {
        primary.logical_locations = Some(vec![
            LogicalLocation::builder()
                .name(kernel.clone())
                .fully_qualified_name(kernel.clone())
                .kind("function")
                .build(),
        ]);
    }

    // With source locations, each instruction also stays reachable in the input: the primary
    // one first, then every secondary label at its source line and at its instruction.
    let dialect = match diagnostic.dialect {
        Some(Dialect::Ptx) => "PTX",
        Some(Dialect::Sass) => "SASS",
        None => "input",
    };
    let in_input = |message: &str| {
        if message.is_empty() {
            format!("the {dialect} instruction")
        } else {
            format!("the {dialect} instruction: {message}")
        }
    };
    let mut related = Vec::new();
    if let Some(source) = mapped {
        let message = in_input(&diagnostic.primary.message);
        related.push((input_location(db, &diagnostic.primary, paths), message));
        // Shown at a call site in the project: the inlined code it calls, where it is.
        if !std::ptr::eq(project_frame(source, paths), source) {
            let message = "the inlined code, called from the result's line".to_owned();
            related.push((source_location(source, paths), message));
        }
    }
    for label in &diagnostic.secondary {
        match known_source(label) {
            Some(source) if locations == Locations::Source => {
                let frame = project_frame(source, paths);
                related.push((source_location(frame, paths), label.message.clone()));
                related.push((input_location(db, label, paths), in_input(&label.message)));
            }
            _ => related.push((input_location(db, label, paths), label.message.clone())),
        }
    }
    let related: Vec<Location> = related
        .into_iter()
        .zip(1i64..)
        .map(|((physical, message), id)| {
            Location::builder()
                .id(id)
                .physical_location(physical)
                .message(Message::builder().text(message).build())
                .build()
        })
        .collect();

    let mut result = Result::builder()
        .rule_id(diagnostic.rule.clone())
        .level(level(diagnostic.severity))
        .message(Message::builder().text(text).build())
        .locations(vec![primary])
        .build();
    result.rule_index = rule_index.copied();
    if !related.is_empty() {
        result.related_locations = Some(related);
    }
    // Inlined code: the call stack of the inlining, the code itself on top, the kernel's own
    // line at the bottom.
    if let Some(source) = mapped
        && source.inlined_at.is_some()
    {
        let frames: Vec<StackFrame> = source
            .frames()
            .map(|frame| {
                let location = Location::builder().physical_location(source_location(frame, paths));
                StackFrame::builder().location(location.build()).build()
            })
            .collect();
        let message =
            Message::builder().text("where the code was inlined, innermost first").build();
        result.stacks = Some(vec![Stack::builder().frames(frames).message(message).build()]);
    }
    if let Some(fingerprint) = &diagnostic.fingerprint {
        let mut fingerprints = BTreeMap::new();
        fingerprints.insert(FINGERPRINT_KEY.to_owned(), fingerprint.clone());
        result.partial_fingerprints = Some(fingerprints);
    }
    result
}

/// A location in the PTX/SASS input: the full region, byte offsets, and the SASS offset.
fn input_location(db: &SourceDb, label: &Label, paths: &Paths<'_>) -> PhysicalLocation {
    let file = db.file(label.file);
    let start = file.line_col(label.range.start);
    let end = file.line_col(label.range.end);
    let region = Region::builder()
        .start_line(i64::from(start.line))
        .start_column(i64::from(start.column))
        .end_line(i64::from(end.line))
        .end_column(i64::from(end.column))
        .byte_offset(i64::try_from(file.file_offset(label.range.start)).unwrap_or(i64::MAX))
        .byte_length(i64::from(label.range.len()))
        .build();
    let mut physical = PhysicalLocation::builder()
        .artifact_location(ArtifactLocation::builder().uri(uri(file.name(), paths)).build())
        .region(region)
        .build();
    if let Some(address) = label.address.and_then(|a| i64::try_from(a).ok()) {
        physical.address =
            Some(Address::builder().absolute_address(address).kind("instruction").build());
    }
    physical
}

/// A location in the original source: line, and column when known.
fn source_location(source: &SourceLocation, paths: &Paths<'_>) -> PhysicalLocation {
    let mut region = Region::builder().start_line(i64::from(source.line)).build();
    if source.column > 0 {
        region.start_column = Some(i64::from(source.column));
    }
    PhysicalLocation::builder()
        .artifact_location(ArtifactLocation::builder().uri(uri(&source.file, paths)).build())
        .region(region)
        .build()
}

/// A URI reference for a file name: relative to the base directory where possible, otherwise a
/// `file://` URI for absolute paths; percent-encoded.
fn uri(name: &str, paths: &Paths<'_>) -> String {
    let relative = paths.relative(name);
    let relative = relative.replace('\\', "/");
    if relative.starts_with('/') {
        format!("file://{}", percent_encode(&relative))
    } else {
        percent_encode(&relative)
    }
}

/// Percent-encodes everything but unreserved characters, `/` and the sub-delimiters that are
/// safe in a path. `:` is encoded so that a relative path never reads as a scheme.
fn percent_encode(path: &str) -> String {
    let mut out = String::with_capacity(path.len());
    for byte in path.bytes() {
        let keep = byte.is_ascii_alphanumeric()
            || matches!(byte, b'-' | b'.' | b'_' | b'~' | b'/' | b'!' | b'$' | b'&' | b'\'')
            || matches!(byte, b'(' | b')' | b'*' | b'+' | b',' | b';' | b'=' | b'@');
        if keep {
            out.push(char::from(byte));
        } else {
            let _ = write!(out, "%{byte:02X}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_it_does_is_the_first_paragraph_under_its_heading() {
        let doc = "# r\n\n| a |\n\n## What it does\n\nFinds `x`\nand y.\n\nMore.\n\n## Why is this bad?\n";
        assert_eq!(what_it_does(doc), "Finds `x` and y.");
    }

    #[test]
    fn every_rule_has_a_full_description() {
        for rule in fencelint_rules::all_rules() {
            assert!(!what_it_does(rule.meta().doc).is_empty(), "{}", rule.meta().name);
        }
    }

    #[test]
    fn uris_are_relative_and_percent_encoded() {
        let paths = Paths { base_dir: Some(std::path::Path::new("/repo")) };
        assert_eq!(uri("/repo/build/a b.ptx", &paths), "build/a%20b.ptx");
        assert_eq!(uri("/opt/k#1.cu", &paths), "file:///opt/k%231.cu");
        assert_eq!(uri("lib.so:sm_90", &paths), "lib.so%3Asm_90");
        assert_eq!(uri("dir/ü.cu", &paths), "dir/%C3%BC.cu");
    }
}
