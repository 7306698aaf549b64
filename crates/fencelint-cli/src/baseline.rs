//! Baselines: a JSON file of accepted findings, so that only new findings fail a run.
//!
//! A finding is matched by its rule, its kernel and its fingerprint (a hash of the rule, the
//! kernel and a normalized window of instructions around the finding), never by line or
//! address, so recompiling with unrelated changes keeps old findings matched. Matching counts:
//! an entry with `count: 2` hides two findings with that identity, and a third one shows.

use std::collections::BTreeMap;
use std::path::Path;

use fencelint_diagnostics::Diagnostic;
use fencelint_source::SourceDb;
use serde::{Deserialize, Serialize};

/// The format version this program writes and reads.
pub(crate) const VERSION: u32 = 1;

/// The file as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct BaselineFile {
    pub version: u32,
    pub entries: Vec<Entry>,
}

/// Findings with one identity in one file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Entry {
    pub rule: String,
    pub kernel: Option<String>,
    pub fingerprint: String,
    /// Where the findings were when the baseline was written (for people; not matched).
    pub file: String,
    /// The first finding's message (for people; not matched).
    pub message: String,
    pub count: usize,
}

/// The identity a baseline matches by: rule, kernel, fingerprint.
type Key = (String, Option<String>, String);

/// How entries are grouped when written: file, kernel, rule, fingerprint.
type GroupKey = (String, Option<String>, String, String);

fn key_of(diagnostic: &Diagnostic) -> Option<Key> {
    let fingerprint = diagnostic.fingerprint.clone()?;
    Some((diagnostic.rule.clone(), diagnostic.kernel.clone(), fingerprint))
}

/// Builds a baseline from the findings of a run. Diagnostics without a fingerprint (input and
/// parse errors, unused suppressions) are left out.
pub(crate) fn build(db: &SourceDb, diagnostics: &[Diagnostic]) -> BaselineFile {
    // The first message of each group, and how many findings it has.
    let mut groups: BTreeMap<GroupKey, (String, usize)> = BTreeMap::new();
    for diagnostic in diagnostics {
        let Some((rule, kernel, fingerprint)) = key_of(diagnostic) else {
            continue;
        };
        let file = db.get(diagnostic.primary.file).map_or("", |f| f.name()).to_owned();
        groups
            .entry((file, kernel, rule, fingerprint))
            .or_insert_with(|| (diagnostic.message.clone(), 0))
            .1 += 1;
    }
    let entries = groups
        .into_iter()
        .map(|((file, kernel, rule, fingerprint), (message, count))| Entry {
            rule,
            kernel,
            fingerprint,
            file,
            message,
            count,
        })
        .collect();
    BaselineFile { version: VERSION, entries }
}

/// The baseline as JSON text, ending with a newline.
pub(crate) fn to_json(baseline: &BaselineFile) -> String {
    let mut text = serde_json::to_string_pretty(baseline).unwrap_or_default();
    text.push('\n');
    text
}

/// Reads a baseline; errors name the file, line and column.
pub(crate) fn read(path: &Path) -> Result<Baseline, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("{}: cannot read the baseline: {err}", path.display()))?;
    parse(&text).map_err(|err| format!("{}:{err}", path.display()))
}

/// Parses baseline text; an error reads `line:column: message`.
pub(crate) fn parse(text: &str) -> Result<Baseline, String> {
    let file: BaselineFile = serde_json::from_str(text).map_err(|err| {
        let message = err.to_string();
        // serde_json appends " at line L column C"; the location goes first instead.
        let message = message.rsplit_once(" at line ").map_or(message.as_str(), |(m, _)| m);
        format!("{}:{}: malformed baseline: {message}", err.line(), err.column())
    })?;
    if file.version != VERSION {
        let at = text.find("\"version\"").unwrap_or(0);
        let line = text[..at].matches('\n').count() + 1;
        let column = at - text[..at].rfind('\n').map_or(0, |i| i + 1) + 1;
        return Err(format!(
            "{line}:{column}: unsupported baseline version {} (this fencelint reads version {VERSION})",
            file.version
        ));
    }
    let mut counts = BTreeMap::new();
    for entry in file.entries {
        *counts.entry((entry.rule, entry.kernel, entry.fingerprint)).or_insert(0) += entry.count;
    }
    Ok(Baseline { counts })
}

/// Accepted findings by identity, with how many of each.
#[derive(Debug, Clone, Default)]
pub(crate) struct Baseline {
    counts: BTreeMap<Key, usize>,
}

impl Baseline {
    /// The baseline that accepts exactly these findings.
    pub(crate) fn of(db: &SourceDb, diagnostics: &[Diagnostic]) -> Self {
        let mut counts = BTreeMap::new();
        for entry in build(db, diagnostics).entries {
            *counts.entry((entry.rule, entry.kernel, entry.fingerprint)).or_insert(0) +=
                entry.count;
        }
        Self { counts }
    }

    /// Drops the findings the baseline accepts, in the diagnostics' order, and returns how many.
    pub(crate) fn filter(&self, diagnostics: &mut Vec<Diagnostic>) -> usize {
        let mut left = self.counts.clone();
        let before = diagnostics.len();
        diagnostics.retain(|diagnostic| {
            let Some(key) = key_of(diagnostic) else {
                return true;
            };
            match left.get_mut(&key) {
                Some(count) if *count > 0 => {
                    *count -= 1;
                    false
                }
                _ => true,
            }
        });
        before - diagnostics.len()
    }
}

#[cfg(test)]
mod tests {
    use fencelint_diagnostics::{Label, Severity};
    use fencelint_source::{FileId, TextRange};

    use super::*;

    fn finding(db: &mut SourceDb, file: &str, kernel: &str, fingerprint: &str) -> Diagnostic {
        let id = db.add(file, "x\n");
        let mut diagnostic = Diagnostic::new(
            "spin-poll-without-acquire",
            Severity::Error,
            "poll",
            Label::new(id, TextRange::empty(0), ""),
        )
        .with_kernel(kernel);
        diagnostic.fingerprint = Some(fingerprint.to_owned());
        diagnostic
    }

    #[test]
    fn round_trips_and_counts() {
        let mut db = SourceDb::new();
        let diagnostics = vec![
            finding(&mut db, "b.ptx", "k", "00ff"),
            finding(&mut db, "b.ptx", "k", "00ff"),
            finding(&mut db, "a.ptx", "j", "1234"),
            Diagnostic::new(
                "parse-error",
                Severity::Error,
                "bad",
                Label::new(FileId(0), TextRange::empty(0), ""),
            ),
        ];
        let file = build(&db, &diagnostics);
        assert_eq!(file.entries.len(), 2);
        assert_eq!(file.entries[0].file, "a.ptx");
        assert_eq!(file.entries[1].count, 2);
        let baseline = parse(&to_json(&file)).unwrap();

        let mut again = diagnostics.clone();
        again.push(finding(&mut db, "moved.ptx", "k", "00ff"));
        assert_eq!(baseline.filter(&mut again), 3);
        assert_eq!(again.len(), 2, "the parse error and the third `k` finding stay");
        assert_eq!(again[1].kernel.as_deref(), Some("k"));
    }

    #[test]
    fn malformed_baselines_say_where() {
        let err =
            parse("{\n  \"version\": 1,\n  \"entries\": [ { \"rule\": 3 } ]\n}\n").unwrap_err();
        assert!(err.starts_with("3:"), "{err}");
        assert!(err.contains("malformed baseline"), "{err}");
        let err = parse("{\n  \"version\": 7,\n  \"entries\": []\n}\n").unwrap_err();
        assert!(err.starts_with("2:3: unsupported baseline version 7"), "{err}");
    }
}
