//! `fencelint.toml`: finding the configuration file, reading it with exact error locations, and
//! applying it (rule selection, severities, `[[ignore]]` entries) to a run.

use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};

use fencelint_diagnostics::{Diagnostic, Severity, codes};
use fencelint_linter::{RuleSelection, SelectionError, Settings};
use fencelint_rules::{Category, find_rule};
use fencelint_source::SourceDb;
use globset::{GlobBuilder, GlobSet, GlobSetBuilder};
use serde::Deserialize;
use toml::Spanned;

use super::FailLevel;

/// The name of the configuration file.
pub(crate) const FILE_NAME: &str = "fencelint.toml";

/// A configuration error at a place in the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ConfigError {
    pub path: PathBuf,
    /// 1-based line and column, when the error has a place.
    pub line_col: Option<(usize, usize)>,
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.line_col {
            Some((line, column)) => {
                write!(f, "{}:{line}:{column}: {}", self.path.display(), self.message)
            }
            None => write!(f, "{}: {}", self.path.display(), self.message),
        }
    }
}

/// The file as written. Every key is listed: unknown keys are errors.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawConfig {
    #[serde(default)]
    rules: RawRules,
    #[serde(default)]
    ignore: Vec<Spanned<RawIgnore>>,
    #[serde(default)]
    arch: Vec<Spanned<String>>,
    #[serde(default)]
    fail_level: Option<Spanned<String>>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawRules {
    #[serde(default)]
    select: Vec<Spanned<String>>,
    #[serde(default)]
    ignore: Vec<Spanned<String>>,
    #[serde(default)]
    severity: SeverityTable,
}

/// `[rules.severity]`, with the spans of keys and values.
#[derive(Default)]
struct SeverityTable(Vec<(Spanned<String>, Spanned<String>)>);

impl<'de> Deserialize<'de> for SeverityTable {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = SeverityTable;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of rule names and severities")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    entries.push(entry);
                }
                Ok(SeverityTable(entries))
            }
        }
        deserializer.deserialize_map(Visitor)
    }
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
struct RawIgnore {
    #[serde(default)]
    rules: Vec<Spanned<String>>,
    #[serde(default)]
    kernels: Vec<Spanned<String>>,
    #[serde(default)]
    paths: Vec<Spanned<String>>,
    #[serde(default)]
    sources: Vec<Spanned<String>>,
}

/// One `[[ignore]]` entry: a finding is dropped when it matches every list the entry has.
#[derive(Debug, Clone)]
pub(crate) struct IgnoreEntry {
    /// Rule names and non-rule codes; empty means every rule.
    rules: Vec<String>,
    kernels: Option<GlobSet>,
    /// Input paths: relative to the configuration's folder.
    paths: FileGlobs,
    /// The source file of the finding's code (its innermost line-info location), as the line
    /// info writes it.
    sources: FileGlobs,
}

/// The globs of one file list of an `[[ignore]]` entry (`paths`, `sources`): patterns with a `/`
/// are matched against the whole name, the others against the file name.
#[derive(Debug, Clone, Default)]
struct FileGlobs {
    whole: Option<GlobSet>,
    names: Option<GlobSet>,
}

impl FileGlobs {
    /// Whether the entry has this list at all (then a finding must match it).
    fn is_set(&self) -> bool {
        self.whole.is_some() || self.names.is_some()
    }

    fn matches(&self, whole: &str, name: &str) -> bool {
        self.whole.as_ref().is_some_and(|g| g.is_match(whole))
            || self.names.as_ref().is_some_and(|g| g.is_match(name))
    }
}

/// A read configuration.
#[derive(Debug, Clone, Default)]
pub(crate) struct Config {
    /// The file it was read from; `None` for the empty default.
    pub path: Option<PathBuf>,
    /// The folder that `paths` globs are relative to.
    pub root: PathBuf,
    pub select: Vec<String>,
    pub ignore: Vec<String>,
    /// Severity overrides; `None` is `"off"`.
    pub severity: Vec<(String, Option<Severity>)>,
    pub ignores: Vec<IgnoreEntry>,
    pub arch: Vec<String>,
    pub fail_level: Option<FailLevel>,
}

/// Finds the configuration: `explicit` if given, else `fencelint.toml` in the first input's
/// folder or a folder above it, else in the current folder or above. `Ok(None)` when there is
/// none.
pub(crate) fn discover(
    explicit: Option<&Path>,
    inputs: &[PathBuf],
) -> Result<Option<Config>, ConfigError> {
    if let Some(path) = explicit {
        return load(path).map(Some);
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    let mut starts = Vec::new();
    if let Some(first) = inputs.first() {
        let absolute = cwd.join(first);
        let dir = if absolute.is_dir() {
            absolute
        } else {
            absolute.parent().map(Path::to_path_buf).unwrap_or_default()
        };
        starts.push(dir);
    }
    starts.push(cwd);
    for start in starts {
        for dir in start.ancestors() {
            let candidate = dir.join(FILE_NAME);
            if candidate.is_file() {
                return load(&candidate).map(Some);
            }
        }
    }
    Ok(None)
}

/// Reads and checks one configuration file.
pub(crate) fn load(path: &Path) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|err| ConfigError {
        path: path.to_path_buf(),
        line_col: None,
        message: format!("cannot read the configuration: {err}"),
    })?;
    let absolute = std::env::current_dir().unwrap_or_default().join(path);
    let root = absolute.parent().map(Path::to_path_buf).unwrap_or_default();
    let mut config = parse(path, &text, root)?;
    config.path = Some(path.to_path_buf());
    Ok(config)
}

/// Parses a configuration text; `path` only names the file in errors.
pub(crate) fn parse(path: &Path, text: &str, root: PathBuf) -> Result<Config, ConfigError> {
    let error = |span: Option<Range<usize>>, message: String| ConfigError {
        path: path.to_path_buf(),
        line_col: span.map(|span| line_col(text, span.start)),
        message,
    };
    let raw: RawConfig = toml::from_str(text)
        .map_err(|err| error(err.span(), err.message().trim_end().replace('\n', "; ")))?;
    let mut config = Config { root, ..Config::default() };

    let selector = |name: &Spanned<String>, codes_too: bool| -> Result<String, ConfigError> {
        let value = name.get_ref();
        if is_selector(value) || (codes_too && value == codes::UNUSED_SUPPRESSION) {
            Ok(value.clone())
        } else {
            Err(error(Some(name.span()), unknown_rule(value)))
        }
    };
    for name in &raw.rules.select {
        config.select.push(selector(name, true)?);
    }
    for name in &raw.rules.ignore {
        config.ignore.push(selector(name, true)?);
    }
    for (name, level) in &raw.rules.severity.0 {
        let name = selector(name, true)?;
        let level = match level.get_ref().as_str() {
            "off" => None,
            other => Some(Severity::parse(other).ok_or_else(|| {
                error(
                    Some(level.span()),
                    format!(
                        "unknown severity `{other}` (expected `error`, `warning`, `note` or `off`)"
                    ),
                )
            })?),
        };
        config.severity.push((name, level));
    }
    for entry in &raw.ignore {
        config.ignores.push(ignore_entry(entry, &error)?);
    }
    for arch in &raw.arch {
        if !is_arch(arch.get_ref()) {
            return Err(error(
                Some(arch.span()),
                format!("`{}` is not an architecture like `sm_90` or `sm_100a`", arch.get_ref()),
            ));
        }
        config.arch.push(arch.get_ref().clone());
    }
    if let Some(level) = &raw.fail_level {
        config.fail_level = Some(match level.get_ref().as_str() {
            "note" => FailLevel::Note,
            "warning" => FailLevel::Warning,
            "error" => FailLevel::Error,
            "never" => FailLevel::Never,
            other => {
                return Err(error(
                    Some(level.span()),
                    format!(
                        "unknown fail level `{other}` (expected `note`, `warning`, `error` or `never`)"
                    ),
                ));
            }
        });
    }
    Ok(config)
}

fn ignore_entry(
    entry: &Spanned<RawIgnore>,
    error: &impl Fn(Option<Range<usize>>, String) -> ConfigError,
) -> Result<IgnoreEntry, ConfigError> {
    let raw = entry.get_ref();
    if raw.rules.is_empty()
        && raw.kernels.is_empty()
        && raw.paths.is_empty()
        && raw.sources.is_empty()
    {
        return Err(error(
            Some(entry.span()),
            "an `[[ignore]]` entry needs at least one of `rules`, `kernels`, `paths` or `sources`"
                .to_owned(),
        ));
    }
    let mut rules = Vec::new();
    for name in &raw.rules {
        let value = name.get_ref();
        if value == "all" {
            rules.clear();
            rules.push("all".to_owned());
        } else if let Some(category) = Category::parse(value) {
            rules.extend(
                fencelint_rules::all_rules()
                    .iter()
                    .filter(|r| r.meta().category == category)
                    .map(|r| r.meta().name.to_owned()),
            );
        } else if find_rule(value).is_some()
            || value == codes::UNUSED_SUPPRESSION
            || value == codes::ANALYSIS_INCOMPLETE
        {
            rules.push(value.clone());
        } else {
            return Err(error(Some(name.span()), unknown_rule(value)));
        }
    }
    if rules.iter().any(|r| r == "all") {
        rules.clear();
    }
    let build = |patterns: &[&Spanned<String>], literal_separator: bool| {
        if patterns.is_empty() {
            return Ok(None);
        }
        let mut set = GlobSetBuilder::new();
        for pattern in patterns {
            let glob = GlobBuilder::new(pattern.get_ref())
                .literal_separator(literal_separator)
                .build()
                .map_err(|err| error(Some(pattern.span()), format!("bad glob: {}", err.kind())))?;
            set.add(glob);
        }
        set.build().map(Some).map_err(|err| error(Some(patterns[0].span()), err.to_string()))
    };
    let kernels: Vec<_> = raw.kernels.iter().collect();
    let files = |patterns: &[Spanned<String>]| -> Result<FileGlobs, ConfigError> {
        let (whole, names): (Vec<_>, Vec<_>) =
            patterns.iter().partition(|p| p.get_ref().contains('/'));
        Ok(FileGlobs { whole: build(&whole, true)?, names: build(&names, true)? })
    };
    Ok(IgnoreEntry {
        rules,
        kernels: build(&kernels, false)?,
        paths: files(&raw.paths)?,
        sources: files(&raw.sources)?,
    })
}

/// A rule, a category or `all`.
fn is_selector(name: &str) -> bool {
    name == "all" || Category::parse(name).is_some() || find_rule(name).is_some()
}

fn unknown_rule(name: &str) -> String {
    format!("unknown rule or category `{name}` (see `fencelint rules` for the list)")
}

/// `sm_90`, `sm_100a`, `compute_90`: what `--arch` accepts.
fn is_arch(text: &str) -> bool {
    let Some(rest) = ["sm_", "compute_"].iter().find_map(|p| text.strip_prefix(p)) else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    digits > 0 && rest[digits..].chars().all(|c| c.is_ascii_lowercase())
}

/// 1-based line and column (in characters) of a byte offset.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = text.floor_char_boundary(offset.min(text.len()));
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, text[line_start..offset].chars().count() + 1)
}

impl Config {
    /// The rule settings: defaults, then the file's selection and severities, then the command
    /// line's `--select` (which replaces the file's selection) and `--ignore` (which removes
    /// more).
    pub(crate) fn settings(&self, cli: &RuleSelection) -> Result<Settings, SelectionError> {
        let file = RuleSelection { select: self.select.clone(), ignore: self.ignore.clone() };
        let mut settings = file.apply(Settings::default())?;
        // The more specific wins: `all`, then categories, then single rules.
        let mut severity: Vec<_> = self.severity.iter().collect();
        severity.sort_by_key(|(name, _)| match name.as_str() {
            "all" => 0,
            name if Category::parse(name).is_some() => 1,
            _ => 2,
        });
        for (name, level) in severity {
            settings.set_severity_of(name, *level)?;
        }
        cli.apply(settings)
    }

    /// Drops the diagnostics that an `[[ignore]]` entry matches; returns how many.
    pub(crate) fn filter(&self, db: &SourceDb, diagnostics: &mut Vec<Diagnostic>) -> usize {
        if self.ignores.is_empty() {
            return 0;
        }
        let cwd = std::env::current_dir().unwrap_or_default();
        let before = diagnostics.len();
        diagnostics.retain(|diagnostic| {
            if is_never_ignored(&diagnostic.rule) {
                return true;
            }
            let name = db.get(diagnostic.primary.file).map_or("", |f| f.name());
            let path = PathCandidates::new(name, &cwd, &self.root);
            let kernel = diagnostic.kernel.as_deref().map(KernelNames::new);
            let source = diagnostic.primary.source.as_ref().map(|s| SourceCandidates::new(&s.file));
            let finding = Finding {
                rule: &diagnostic.rule,
                kernel: kernel.as_ref(),
                path: &path,
                source: source.as_ref(),
            };
            !self.ignores.iter().any(|entry| entry.matches(&finding))
        });
        before - diagnostics.len()
    }
}

/// Input, parse and internal errors are never ignored: they decide exit code 2.
fn is_never_ignored(rule: &str) -> bool {
    matches!(rule, codes::INPUT_ERROR | codes::PARSE_ERROR | codes::INTERNAL_ERROR)
}

/// The spellings of a file that path globs are matched against.
struct PathCandidates {
    /// Relative to the configuration's folder (or as given when outside it).
    relative: String,
    file_name: String,
}

impl PathCandidates {
    fn new(name: &str, cwd: &Path, root: &Path) -> Self {
        // A text taken out of a binary is named `lib.so[sm_90:...]:kernel`; match the binary.
        let name = match name.find('[') {
            Some(i) if name.ends_with(']') || name[i..].contains("]:") => &name[..i],
            _ => name,
        };
        let absolute = normalize(&cwd.join(name));
        let root = normalize(root);
        let relative = absolute
            .strip_prefix(&root)
            .map_or_else(|_| name.to_owned(), |p| p.to_string_lossy().into_owned());
        let file_name =
            absolute.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        Self { relative: relative.replace('\\', "/"), file_name }
    }
}

/// Removes `.` and `..` components without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

/// The spellings of a finding's source file that `sources` globs are matched against.
struct SourceCandidates {
    /// As the line info writes it, with `/` separators.
    file: String,
    file_name: String,
}

impl SourceCandidates {
    fn new(file: &str) -> Self {
        let file = file.replace('\\', "/");
        let file_name = file.rsplit('/').next().unwrap_or_default().to_owned();
        Self { file, file_name }
    }
}

/// What an `[[ignore]]` entry is matched against.
struct Finding<'a> {
    rule: &'a str,
    kernel: Option<&'a KernelNames>,
    path: &'a PathCandidates,
    /// The source file of the finding's code, when the input carries line info.
    source: Option<&'a SourceCandidates>,
}

/// The spellings of a kernel that kernel globs are matched against: as written, demangled,
/// and demangled without its parameter list.
struct KernelNames {
    names: Vec<String>,
}

impl KernelNames {
    fn new(kernel: &str) -> Self {
        let mut names = vec![kernel.to_owned()];
        if kernel.starts_with("_Z")
            && let Some(readable) = cpp_demangle::Symbol::new(kernel.as_bytes())
                .ok()
                .and_then(|symbol| symbol.demangle().ok())
        {
            names.push(readable);
        }
        let without_params: Vec<String> = names
            .iter()
            .filter_map(|name| {
                let open = name.find('(')?;
                Some(name[..open].to_owned())
            })
            .collect();
        names.extend(without_params);
        Self { names }
    }
}

impl IgnoreEntry {
    fn matches(&self, finding: &Finding<'_>) -> bool {
        if !self.rules.is_empty() && !self.rules.iter().any(|r| r == finding.rule) {
            return false;
        }
        if let Some(globs) = &self.kernels {
            let Some(kernel) = finding.kernel else {
                return false;
            };
            if !kernel.names.iter().any(|name| globs.is_match(name)) {
                return false;
            }
        }
        if self.paths.is_set()
            && !self.paths.matches(&finding.path.relative, &finding.path.file_name)
        {
            return false;
        }
        if self.sources.is_set() {
            // A finding without line info never matches an entry with `sources`.
            let Some(source) = finding.source else {
                return false;
            };
            if !self.sources.matches(&source.file, &source.file_name) {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use globset::Glob;

    use super::*;

    fn parse_text(text: &str) -> Result<Config, ConfigError> {
        parse(Path::new("fencelint.toml"), text, PathBuf::from("/repo"))
    }

    #[test]
    fn reads_every_key() {
        let config = parse_text(
            r#"
arch = ["sm_90a", "sm_100"]
fail-level = "error"

[rules]
select = ["correctness", "costly-fence"]
ignore = ["acquire-in-poll-loop"]

[rules.severity]
spin-poll-without-acquire = "warning"
costly-fence = "off"
unused-suppression = "error"

[[ignore]]
rules = ["spin-poll-without-acquire"]
kernels = ["poll_*"]
paths = ["vendor/**", "*.sass"]
"#,
        )
        .unwrap();
        assert_eq!(config.arch, ["sm_90a", "sm_100"]);
        assert_eq!(config.fail_level, Some(FailLevel::Error));
        assert_eq!(config.select, ["correctness", "costly-fence"]);
        let mut severity = config.severity.clone();
        severity.sort();
        assert_eq!(
            severity,
            [
                ("costly-fence".to_owned(), None),
                ("spin-poll-without-acquire".to_owned(), Some(Severity::Warning)),
                ("unused-suppression".to_owned(), Some(Severity::Error)),
            ]
        );
        let entry = &config.ignores[0];
        let kernel = KernelNames::new("poll_relaxed");
        let inside =
            PathCandidates::new("/repo/vendor/a/b.ptx", Path::new("/"), Path::new("/repo"));
        let outside = PathCandidates::new("/repo/src/b.ptx", Path::new("/"), Path::new("/repo"));
        let sass = PathCandidates::new("/repo/src/b.sass", Path::new("/"), Path::new("/repo"));
        let finding = |rule, kernel, path| Finding { rule, kernel, path, source: None };
        let spin = "spin-poll-without-acquire";
        assert!(entry.matches(&finding(spin, Some(&kernel), &inside)));
        assert!(entry.matches(&finding(spin, Some(&kernel), &sass)));
        assert!(!entry.matches(&finding(spin, Some(&kernel), &outside)));
        assert!(!entry.matches(&finding("costly-fence", Some(&kernel), &inside)));
        assert!(!entry.matches(&finding(spin, None, &inside)));
    }

    #[test]
    fn source_globs_match_the_file_of_the_findings_code() {
        let config = parse_text(
            "[[ignore]]\nrules = [\"acquire-in-poll-loop\"]\n\
             sources = [\"**/cooperative_groups/**\", \"reference.h\"]\n",
        )
        .unwrap();
        let entry = &config.ignores[0];
        let path = PathCandidates::new("/repo/k.ptx", Path::new("/"), Path::new("/repo"));
        let matches = |file: Option<&str>| {
            let source = file.map(SourceCandidates::new);
            entry.matches(&Finding {
                rule: "acquire-in-poll-loop",
                kernel: None,
                path: &path,
                source: source.as_ref(),
            })
        };
        assert!(matches(Some("/usr/local/cuda/include/cooperative_groups/details/sync.h")));
        assert!(matches(Some("cuda/include/cooperative_groups/details/sync.h")));
        assert!(matches(Some("/opt/cccl/cuda/std/__atomic/api/reference.h")));
        assert!(!matches(Some("/repo/src/k.cu")));
        assert!(!matches(None), "no line info, no match");
    }

    #[test]
    fn the_more_specific_severity_wins() {
        let config = parse_text(
            "[rules.severity]\ncostly-fence = \"error\"\nperf = \"off\"\nall = \"note\"\n",
        )
        .unwrap();
        let settings = config.settings(&RuleSelection::default()).unwrap();
        let level = |name: &str| settings.enabled().find(|(r, _)| r.meta().name == name);
        assert_eq!(level("costly-fence").map(|(_, s)| s), Some(Severity::Error));
        assert!(level("acquire-in-poll-loop").is_none(), "perf is off");
        assert_eq!(level("spin-poll-without-acquire").map(|(_, s)| s), Some(Severity::Note));
    }

    #[test]
    fn errors_have_line_and_column() {
        let err = parse_text("[rules]\nselect = [\"all\"]\nbogus = 1\n").unwrap_err();
        assert_eq!(err.line_col, Some((3, 1)), "{err}");
        assert!(err.message.contains("bogus"), "{err}");
        let err =
            parse_text("[rules]\nignore = [\"costly-fence\", \"no-such-rule\"]\n").unwrap_err();
        assert_eq!(err.line_col, Some((2, 27)), "{err}");
        assert!(err.to_string().starts_with("fencelint.toml:2:27: unknown rule"), "{err}");
        let err = parse_text("[rules.severity]\nnope = \"warning\"\n").unwrap_err();
        assert_eq!(err.line_col, Some((2, 1)), "{err}");
        let err = parse_text("[rules.severity]\ncostly-fence = \"loud\"\n").unwrap_err();
        assert_eq!(err.line_col, Some((2, 16)), "{err}");
        let err = parse_text("[[ignore]]\nkernels = [\"a[\"]\n").unwrap_err();
        assert_eq!(err.line_col, Some((2, 12)), "{err}");
        let err = parse_text("arch = [\"hopper\"]\n").unwrap_err();
        assert_eq!(err.line_col, Some((1, 9)), "{err}");
        let err = parse_text("[[ignore]]\n").unwrap_err();
        assert!(err.message.contains("at least one"), "{err}");
    }

    #[test]
    fn kernel_globs_see_demangled_names() {
        // `void ns::poll<int>(unsigned int const*)`
        let names = KernelNames::new("_ZN2ns4pollIiEEvPKj");
        assert!(names.names.iter().any(|n| n == "void ns::poll<int>"), "{:?}", names.names);
        let set = GlobSetBuilder::new().add(Glob::new("*ns::poll*").unwrap()).build().unwrap();
        assert!(names.names.iter().any(|n| set.is_match(n)));
    }
}
