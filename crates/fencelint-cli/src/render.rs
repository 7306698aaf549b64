//! Rendering diagnostics for people, CI systems and editors. Every format renders from the same
//! sorted diagnostics and [`SourceDb`], and the same inputs always give the same bytes: rich
//! (codespan-reporting) and short here, JSON and JSON Lines in [`json`], SARIF in [`sarif`], and
//! GitHub workflow annotations in [`github`]. Conversion to codespan happens only in
//! [`to_codespan`].

mod github;
mod json;
mod sarif;
mod statistics;

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
        Format::Short => short(db, diagnostics, options.locations, &paths),
        Format::Json => json::document(db, diagnostics),
        Format::Jsonl => json::lines(db, diagnostics),
        Format::Sarif => sarif::log(db, diagnostics, options.locations, &paths),
        Format::Github => github::annotations(db, diagnostics, options.locations, &paths),
    }
}

/// `--statistics`: the findings counted per rule, worst first, in `format`; `None` for the
/// formats that only carry findings (`sarif`, `github`).
///
/// `unit_of` names the file that a finding's primary label is counted in (see
/// [`statistics::Row::files`]).
pub(crate) fn statistics<'a>(
    format: Format,
    diagnostics: &'a [Diagnostic],
    unit_of: impl Fn(FileId) -> &'a str,
) -> Option<String> {
    let rows = statistics::rows(diagnostics, unit_of);
    match format {
        Format::Rich | Format::Short => Some(statistics::table(&rows)),
        Format::Json => Some(statistics::document(&rows)),
        Format::Jsonl => Some(statistics::lines(&rows)),
        Format::Sarif | Format::Github => None,
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
        let mut note = format!("source: {}", source_position(source));
        for site in source.frames().skip(1) {
            let _ = write!(note, "\n  inlined at {}", source_position(site));
        }
        notes.push(note);
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
fn short(
    db: &SourceDb,
    diagnostics: &[Diagnostic],
    locations: Locations,
    paths: &Paths<'_>,
) -> String {
    let mut out = String::new();
    for diagnostic in diagnostics {
        let place = Place::of(db, &diagnostic.primary, locations, paths);
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

/// The frame of `source` that the line-oriented outputs point at. Code inlined from a header
/// outside the project (CUDA's own `cooperative_groups/`, `cuda/std/`, a library installed
/// elsewhere) is shown at the innermost call site that lies in the project: the line its
/// author can change. Without such a site, or without inlining, the location itself.
fn project_frame<'s>(source: &'s SourceLocation, paths: &Paths<'_>) -> &'s SourceLocation {
    if source.inlined_at.is_none() || paths.in_project(&source.file) {
        return source;
    }
    source.frames().find(|frame| paths.in_project(&frame.file)).unwrap_or(source)
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
    fn of(db: &'a SourceDb, label: &'a Label, locations: Locations, paths: &Paths<'_>) -> Self {
        match known_source(label) {
            Some(source) if locations == Locations::Source => {
                Self::source(project_frame(source, paths))
            }
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

/// Directory names that only a CUDA toolkit's or a Python environment's files lie below: a
/// header found through them is not the project's own, wherever the environment lives.
const FOREIGN_DIRS: &[&str] = &["site-packages", "dist-packages"];

/// Entries of an `include` directory that hold CUDA's device code wherever they lie (a vendored
/// copy of CUB or Thrust is not the project's own code either).
const TOOLKIT_DIRS: &[&str] =
    &["cooperative_groups", "cooperative_groups.h", "cub", "thrust", "cccl"];

/// Entries that are CUDA's only in a toolkit's own `include` directory ([`is_toolkit_root`]):
/// names a project may use for headers of its own elsewhere.
const TOOLKIT_ENTRIES: &[&str] = &["cuda", "nv", "crt", "mma.h"];

/// Prefixes of the toolkit's single headers (`cuda_fp16.hpp`, `sm_30_intrinsics.hpp`,
/// `device_atomic_functions.h`, `math_functions.h`, `vector_types.h`), in its own `include`.
const TOOLKIT_HEADER_PREFIXES: &[&str] = &["cuda_", "sm_", "device_", "math_", "vector_"];

/// Whether a directory holding an `include` directory is a CUDA toolkit's root: `cuda`,
/// `cuda-13.0`, a wheel's `cu13`, or `targets/x86_64-linux`.
fn is_toolkit_root(name: &str) -> bool {
    let wheel = name
        .strip_prefix("cu")
        .is_some_and(|rest| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit()));
    name.starts_with("cuda") || wheel || name.ends_with("-linux")
}

/// Whether `entry`, an entry of an `include` directory whose parent is `root`, is CUDA's.
fn is_toolkit_include(root: &str, entry: &str) -> bool {
    if TOOLKIT_DIRS.contains(&entry) {
        return true;
    }
    if !is_toolkit_root(root) {
        return false;
    }
    let header = Path::new(entry)
        .extension()
        .is_some_and(|ext| ext.eq_ignore_ascii_case("h") || ext.eq_ignore_ascii_case("hpp"));
    TOOLKIT_ENTRIES.contains(&entry)
        || header && TOOLKIT_HEADER_PREFIXES.iter().any(|prefix| entry.starts_with(prefix))
}

impl Paths<'_> {
    /// Whether a source file named in line info is the project's own: a relative name or one
    /// below the base directory, and not in a CUDA toolkit's `include` directory or a Python
    /// environment's packages.
    fn in_project(&self, name: &str) -> bool {
        let path = Path::new(name);
        // The last two directory names: an entry of `include` is checked against its root.
        let (mut before, mut last) = (Cow::Borrowed(""), Cow::Borrowed(""));
        for component in path.components() {
            let Component::Normal(part) = component else {
                (before, last) = (Cow::Borrowed(""), Cow::Borrowed(""));
                continue;
            };
            let part = part.to_string_lossy();
            if FOREIGN_DIRS.contains(&part.as_ref())
                || last == "include" && is_toolkit_include(&before, &part)
            {
                return false;
            }
            (before, last) = (last, part);
        }
        if path.is_absolute() {
            return self.base_dir.is_some_and(|base| path.starts_with(base));
        }
        true
    }

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
    fn project_files_are_below_the_base_and_outside_toolkits() {
        let paths = Paths { base_dir: Some(Path::new("/work/repo")) };
        for name in [
            "/work/repo/src/k.cu",
            "src/k.cuh",
            "k.cu",
            "./include/mine.h",
            // Names the toolkit also uses, in the project's own `include`.
            "/work/repo/include/cuda_utils.h",
            "/work/repo/include/cuda/kernels.cuh",
            "include/device_helpers.h",
        ] {
            assert!(paths.in_project(name), "{name}");
        }
        for name in [
            "/elsewhere/k.cu",
            "/usr/local/cuda/include/cooperative_groups/details/sync.h",
            "/work/repo/.venv/lib/python3.11/site-packages/nvidia/cu13/include/cuda/atomic",
            "/work/repo/third_party/cuda/include/cuda/std/__atomic/api/reference.h",
            "cuda/include/cooperative_groups.h",
            "cuda/include/sm_30_intrinsics.hpp",
            "/work/repo/cuda-13.0/targets/x86_64-linux/include/cuda_fp16.hpp",
            "/work/repo/third_party/include/cub/block/block_reduce.cuh",
            "/opt/env/dist-packages/x/k.cuh",
        ] {
            assert!(!paths.in_project(name), "{name}");
        }
        // Without a base directory only relative names can be the project's.
        assert!(!Paths { base_dir: None }.in_project("/work/repo/src/k.cu"));
    }

    #[test]
    fn inlined_code_is_shown_at_the_innermost_call_site_in_the_project() {
        let paths = Paths { base_dir: Some(Path::new("/work/repo")) };
        let mut source = SourceLocation::new("/usr/local/cuda/include/cuda/std/atomic", 40, 3);
        source.inlined_at = Some(
            [
                SourceLocation::new("/usr/local/cuda/include/cuda/atomic", 12, 1),
                SourceLocation::new("/work/repo/src/wait.cuh", 7, 5),
                SourceLocation::new("/work/repo/src/k.cu", 30, 5),
            ]
            .into(),
        );
        let shown = project_frame(&source, &paths);
        assert_eq!((shown.file.as_str(), shown.line), ("/work/repo/src/wait.cuh", 7));
        // Inlined code of the project's own is shown where it is.
        let mut own = SourceLocation::new("/work/repo/src/wait.cuh", 7, 5);
        own.inlined_at = Some([SourceLocation::new("/work/repo/src/k.cu", 30, 5)].into());
        assert!(std::ptr::eq(project_frame(&own, &paths), &raw const own));
        // No call site in the project: the location itself.
        let elsewhere = Paths { base_dir: Some(Path::new("/other")) };
        assert!(std::ptr::eq(project_frame(&source, &elsewhere), &raw const source));
    }

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
            .with_source(Some(SourceLocation::new("k.cu", 0, 0)));
        assert!(known_source(&label).is_none());
    }
}
