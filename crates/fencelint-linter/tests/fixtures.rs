//! Fixture tests: one fixture file, one test.
//!
//! - `fixtures/ptx/<rule>/*.ptx` and `fixtures/sass/<rule>/*.sass`: minimal inputs with inline
//!   expectations (`// expect: [rule] "substring"` on the line it claims, or alone on a line to
//!   claim the next non-assertion line). Only the rule named by the directory runs, unless a
//!   header `// fencelint: rules=a, b` names others.
//! - `fixtures/compiled/<arch>/<stem>.*`: compiler output of `fixtures/kernels/<stem>.cu` (or of
//!   the translation units `fixtures/kernels/<stem>/*.cu` linked together), whose
//!   kernels carry `// expect: [rule] "substring"` lines (optionally `expect(ptx)` /
//!   `expect(sass)` for the files of the build without `-rdc`, or `expect(rdc)` for the
//!   `<stem>.rdc.*` files of a `-rdc` build) above their definitions, and so may `__device__`
//!   functions (matched by their mangled name). Every rule runs; matching is by kernel. A
//!   cuobjdump listing of a `-rdc` build names no callee, so there every finding must be
//!   expected but not every expectation met.
//!
//! `[rule:note]` (or `:warning`, `:error`) also requires the finding's severity.
//!
//! Matching is exhaustive both ways: every diagnostic is claimed and every expectation met.
//! Kernel expectations that name a rule not (yet) in the registry document a hazard for a rule
//! still to be built; they are skipped, and the test output lists them.

#![allow(clippy::print_stderr)] // lists skipped expectations for rules not yet built

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use codespan_reporting::term;
use datatest_stable::Utf8Path;
use fencelint_diagnostics::Diagnostic;
use fencelint_linter::{InputKind, Settings, detect, lint_text};
use fencelint_source::SourceDb;

datatest_stable::harness! {
    { test = annotated, root = "../../fixtures/ptx", pattern = r"\.ptx$" },
    { test = annotated, root = "../../fixtures/sass", pattern = r"\.sass$" },
    { test = compiled, root = "../../fixtures/compiled", pattern = r"\.(ptx|sass|json)$" },
}

type TestResult = datatest_stable::Result<()>;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// One `expect:` assertion.
#[derive(Debug, Clone)]
struct Expectation {
    /// 1-based line of the fixture it claims (annotated fixtures), or the kernel (compiled).
    line: usize,
    kernel: Option<String>,
    rule: String,
    /// The severity the finding must have (`[rule:note]`), when written.
    severity: Option<String>,
    substring: Option<String>,
    column: Option<usize>,
    dialect: Option<String>,
    /// Where the assertion itself is written, for messages.
    written_at: String,
}

/// The parts of one assertion: column, rule, severity, substring.
type Assertion = (Option<usize>, String, Option<String>, Option<String>);

/// Parses `[rule] "substring"` or `[rule:severity] "substring"` with an optional leading
/// column number.
fn parse_assertion(text: &str) -> Option<Assertion> {
    let text = text.trim();
    let (column, rest) = match text.split_once(' ') {
        Some((first, rest)) if first.chars().all(|c| c.is_ascii_digit()) && !first.is_empty() => {
            (first.parse().ok(), rest.trim())
        }
        _ => (None, text),
    };
    let rest = rest.strip_prefix('[')?;
    let (rule, rest) = rest.split_once(']')?;
    let rest = rest.trim();
    let substring = rest.strip_prefix('"').and_then(|r| r.strip_suffix('"')).map(ToOwned::to_owned);
    let (rule, severity) = match rule.trim().split_once(':') {
        // A misspelt severity would match nothing and read as a missing finding.
        Some((rule, severity)) => {
            let severity = severity.trim();
            if !matches!(severity, "note" | "warning" | "error") {
                return None;
            }
            (rule, Some(severity.to_owned()))
        }
        None => (rule.trim(), None),
    };
    Some((column, rule.to_owned(), severity, substring))
}

/// Finds `expect:` or `expect(dialect):` in a comment on this line.
fn find_assertion(line: &str) -> Option<(Option<String>, &str, bool)> {
    let comment_at = line.find("//")?;
    let comment = &line[comment_at + 2..];
    let trimmed = comment.trim_start();
    let (dialect, rest) = if let Some(rest) = trimmed.strip_prefix("expect:") {
        (None, rest)
    } else if let Some(rest) = trimmed.strip_prefix("expect(") {
        let (dialect, rest) = rest.split_once("):")?;
        (Some(dialect.to_owned()), rest)
    } else {
        return None;
    };
    let standalone = line[..comment_at].trim().is_empty();
    Some((dialect, rest, standalone))
}

fn annotated_expectations(path: &Utf8Path, text: &str) -> Result<Vec<Expectation>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut stacked: Vec<Expectation> = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if let Some((dialect, rest, standalone)) = find_assertion(line) {
            let (column, rule, severity, substring) = parse_assertion(rest)
                .ok_or_else(|| format!("{path}:{}: malformed expectation `{line}`", i + 1))?;
            let expectation = Expectation {
                line: i + 1,
                kernel: None,
                rule,
                severity,
                substring,
                column,
                dialect,
                written_at: format!("{path}:{}", i + 1),
            };
            if standalone {
                stacked.push(expectation);
            } else {
                out.push(expectation);
            }
            continue;
        }
        for mut expectation in stacked.drain(..) {
            expectation.line = i + 1;
            out.push(expectation);
        }
    }
    if let Some(e) = stacked.first() {
        return Err(format!("{}: expectation with no line after it", e.written_at));
    }
    Ok(out)
}

fn header_rules(text: &str) -> Option<Vec<String>> {
    text.lines().take(5).find_map(|line| {
        let rest = line.split_once("// fencelint:")?.1;
        let rules = rest.split(';').find_map(|part| part.trim().strip_prefix("rules="))?;
        Some(rules.split(',').map(|s| s.trim().to_owned()).filter(|s| !s.is_empty()).collect())
    })
}

fn render(db: &SourceDb, diagnostics: &[&Diagnostic]) -> String {
    let config = term::Config::default();
    let mut out = String::new();
    for diagnostic in diagnostics {
        let mut labels = vec![
            codespan_reporting::diagnostic::Label::primary(
                diagnostic.primary.file,
                diagnostic.primary.range.to_usize(),
            )
            .with_message(diagnostic.primary.message.clone()),
        ];
        labels.extend(diagnostic.secondary.iter().map(|l| {
            codespan_reporting::diagnostic::Label::secondary(l.file, l.range.to_usize())
                .with_message(l.message.clone())
        }));
        let cs = codespan_reporting::diagnostic::Diagnostic::error()
            .with_code(diagnostic.rule.clone())
            .with_message(format!(
                "{} (kernel `{}`)",
                diagnostic.message,
                diagnostic.kernel.as_deref().unwrap_or("?")
            ))
            .with_labels(labels);
        out.push_str(&term::emit_into_string(&config, db, &cs).unwrap_or_default());
    }
    out
}

/// What must be claimed.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claims {
    /// Every diagnostic, and every expectation met.
    Both,
    /// Every diagnostic; expectations may go unmet.
    FindingsOnly,
}

/// Claims diagnostics with expectations; returns a failure report when anything is left over.
fn match_all(
    db: &SourceDb,
    diagnostics: &[Diagnostic],
    expectations: &[Expectation],
    by_line: bool,
    claims: Claims,
) -> Result<(), String> {
    let file = db.file(fencelint_source::FileId(0));
    let mut claimed = vec![false; diagnostics.len()];
    let mut unmet = Vec::new();
    for expectation in expectations {
        let found = diagnostics.iter().enumerate().position(|(i, d)| {
            if claimed[i] || d.rule != expectation.rule {
                return false;
            }
            if let Some(sub) = &expectation.substring
                && !d.message.contains(sub.as_str())
            {
                return false;
            }
            if let Some(severity) = &expectation.severity
                && d.severity.as_str() != severity
            {
                return false;
            }
            if by_line {
                let at = file.line_col(d.primary.range.start);
                if at.line as usize != expectation.line {
                    return false;
                }
                if let Some(column) = expectation.column
                    && at.column as usize != column
                {
                    return false;
                }
                true
            } else {
                same_function(d.kernel.as_deref(), expectation.kernel.as_deref())
            }
        });
        match found {
            Some(i) => claimed[i] = true,
            None if claims == Claims::Both => unmet.push(expectation),
            None => {}
        }
    }
    let unclaimed: Vec<&Diagnostic> =
        diagnostics.iter().zip(&claimed).filter(|(_, c)| !**c).map(|(d, _)| d).collect();
    if unmet.is_empty() && unclaimed.is_empty() {
        return Ok(());
    }
    let mut report = String::new();
    for e in &unmet {
        let what = e.substring.as_deref().map(|s| format!(" \"{s}\"")).unwrap_or_default();
        match &e.kernel {
            Some(kernel) => writeln!(
                report,
                "{}: expected [{}]{what} in kernel `{kernel}` not emitted",
                e.written_at, e.rule
            ),
            None => writeln!(
                report,
                "{}: expected [{}]{what} not emitted on line {}",
                e.written_at, e.rule, e.line
            ),
        }
        .unwrap();
    }
    if !unclaimed.is_empty() {
        writeln!(report, "{} unclaimed diagnostic(s):", unclaimed.len()).unwrap();
        report.push_str(&render(db, &unclaimed));
    }
    Err(report)
}

fn annotated(path: &Utf8Path, text: String) -> TestResult {
    let rule_dir = path
        .parent()
        .and_then(|p| p.file_name())
        .ok_or("fixture must live in a directory named after its rule")?
        .to_owned();
    let names = header_rules(&text).unwrap_or_else(|| vec![rule_dir.clone()]);
    let names: Vec<&str> = names.iter().map(String::as_str).collect();
    let settings = Settings::only(&names)?;
    let kind = detect(&text).ok_or_else(|| format!("{path}: not recognised as PTX or SASS"))?;
    let dialect = kind.dialect().as_str();
    let expectations: Vec<Expectation> = annotated_expectations(path, &text)?
        .into_iter()
        .filter(|e| e.dialect.as_deref().is_none_or(|d| d == dialect))
        .collect();
    let mut db = SourceDb::new();
    let file = db.add(path.to_string(), text);
    let output = lint_text(file, db.file(file).text(), kind, &settings);
    match_all(&db, &output.diagnostics, &expectations, true, Claims::Both).map_err(Into::into)
}

/// Kernel-level expectations from a `.cu` source.
fn kernel_expectations(cu: &Path) -> Result<Vec<Expectation>, String> {
    let text = std::fs::read_to_string(cu).map_err(|e| format!("{}: {e}", cu.display()))?;
    let mut out = Vec::new();
    let mut stacked: Vec<Expectation> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if let Some((dialect, rest, true)) = find_assertion(line) {
            let (_, rule, severity, substring) = parse_assertion(rest)
                .ok_or_else(|| format!("{}:{}: malformed expectation", cu.display(), i + 1))?;
            stacked.push(Expectation {
                line: i + 1,
                kernel: None,
                rule,
                severity,
                substring,
                column: None,
                dialect,
                written_at: format!("{}:{}", cu.display(), i + 1),
            });
            continue;
        }
        if stacked.is_empty() || line.trim_start().starts_with("//") {
            continue;
        }
        let kernel = kernel_name(line).or_else(|| device_function_name(line)).ok_or_else(|| {
            format!(
                "{}:{}: expectations must stand right above a kernel or device function definition",
                cu.display(),
                i + 1
            )
        })?;
        for mut e in stacked.drain(..) {
            e.kernel = Some(kernel.clone());
            out.push(e);
        }
    }
    Ok(out)
}

fn kernel_name(line: &str) -> Option<String> {
    if !line.contains("__global__") {
        return None;
    }
    // `extern "C" __global__ void __cluster_dims__(2, 1, 1) name(...)` or `void MACRO name(...)`:
    // the name is the identifier that opens the parameter list, skipping `__x__(...)` qualifiers.
    let mut rest = line.split_once(" void ")?.1.trim_start();
    loop {
        let end =
            rest.find(|c: char| !(c.is_ascii_alphanumeric() || c == '_')).unwrap_or(rest.len());
        let (word, after) = rest.split_at(end);
        if word.is_empty() {
            return None;
        }
        let after = after.trim_start();
        if !after.starts_with('(') {
            rest = after;
            continue;
        }
        if word.starts_with("__") && word.ends_with("__") {
            let close = after.find(')')?;
            rest = after[close + 1..].trim_start();
            continue;
        }
        return Some(word.to_owned());
    }
}

/// The name of the `__device__` function defined on this line (`__device__ __noinline__ float
/// wait(const unsigned *flag) {`): the identifier before the parameter list. Expectations above
/// one match findings in its own SASS function, which a `-rdc` build keeps (`expect(rdc):`).
fn device_function_name(line: &str) -> Option<String> {
    if !line.starts_with("__device__") {
        return None;
    }
    let name = line[..line.find('(')?].split_whitespace().last()?;
    let name = name.trim_start_matches(['*', '&']);
    (!name.is_empty()).then(|| name.to_owned())
}

/// Whether the finding's function is `name`: by the name, or by a mangled C++ name of it
/// (`_Z21wait_relaxed_and_readPKjPKf`, and a copy of it, `...$1`).
fn same_function(found: Option<&str>, name: Option<&str>) -> bool {
    match (found, name) {
        (Some(found), Some(name)) => {
            found == name
                || found
                    .strip_prefix("_Z")
                    .and_then(|rest| rest.strip_prefix(name.len().to_string().as_str()))
                    .is_some_and(|rest| rest.starts_with(name))
        }
        (found, name) => found == name,
    }
}

fn compiled(path: &Utf8Path, text: String) -> TestResult {
    let file_name = path.file_name().ok_or("no file name")?;
    let stem = file_name.split('.').next().ok_or("no stem")?;
    // One source, or a folder of translation units linked together (`fixtures/kernels/linked/`).
    let kernels = repo_root().join("fixtures/kernels");
    let sources: Vec<PathBuf> = if kernels.join(format!("{stem}.cu")).exists() {
        vec![kernels.join(format!("{stem}.cu"))]
    } else {
        let folder = kernels.join(stem);
        let mut found: Vec<PathBuf> = std::fs::read_dir(&folder)
            .map(|entries| entries.filter_map(|e| Some(e.ok()?.path())).collect())
            .unwrap_or_default();
        found.retain(|source| source.extension().is_some_and(|ext| ext == "cu"));
        found.sort();
        found
    };
    if sources.is_empty() {
        return Err(
            format!("{path}: no source {stem}.cu or {stem}/*.cu in {}", kernels.display()).into()
        );
    }
    let Some(kind) = detect(&text) else {
        return Err(format!("{path}: not recognised as PTX or SASS").into());
    };
    let dialect = kind.dialect().as_str();
    // `<stem>.rdc.*` is built with -rdc=true (scripts/build-fixtures.sh): `expect(rdc):` holds
    // there only, `expect(ptx):` and `expect(sass):` in the other files only. `expect(encoded):`
    // holds in the SASS listings that print each instruction's encoding (cuobjdump and
    // `nvdisasm -hex`), whose scoreboard bits show `tcgen05.wait::ld`.
    let rdc = file_name.contains(".rdc.");
    let encoded = file_name.contains(".cuobjdump.") || file_name.contains(".nvdisasm-hex.");
    let mut all = Vec::new();
    for cu in &sources {
        all.extend(kernel_expectations(cu)?);
    }
    let (expectations, pending): (Vec<Expectation>, Vec<Expectation>) = all
        .into_iter()
        // `expect(ptx,encoded):` holds where either does.
        .filter(|e| match e.dialect.as_deref() {
            None => true,
            Some(dialects) => dialects.split(',').any(|d| match d.trim() {
                "rdc" => rdc,
                "encoded" => encoded && !rdc,
                d => d == dialect && !rdc,
            }),
        })
        .partition(|e| fencelint_rules::find_rule(&e.rule).is_some());
    for e in &pending {
        eprintln!(
            "{}: [{}] is not a registered rule yet; expectation skipped",
            e.written_at, e.rule
        );
    }
    let mut db = SourceDb::new();
    let file = db.add(path.to_string(), text);
    let output = lint_text(file, db.file(file).text(), kind, &Settings::all());
    let parse_errors: Vec<_> =
        output.diagnostics.iter().filter(|d| d.rule == "parse-error").collect();
    if !parse_errors.is_empty() {
        return Err(format!(
            "{path}: compiler output must parse cleanly\n{}",
            render(&db, &parse_errors)
        )
        .into());
    }
    if matches!(kind, InputKind::Sass(_)) && output.functions == 0 {
        return Err(format!("{path}: no SASS function found").into());
    }
    // cuobjdump prints a call by name as `CALL.ABS.NOINC 0x0`: what needs the call followed is
    // missing, and the output says so.
    let unnamed = rdc && file_name.contains(".cuobjdump.");
    if unnamed && output.unnamed_calls.calls == 0 {
        return Err(format!("{path}: no call without a callee counted").into());
    }
    let claims = if unnamed { Claims::FindingsOnly } else { Claims::Both };
    match_all(&db, &output.diagnostics, &expectations, false, claims).map_err(Into::into)
}
