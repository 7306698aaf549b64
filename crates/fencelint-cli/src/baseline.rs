//! Baselines: a JSON file of accepted findings, so that only new findings fail a run.
//!
//! A finding is matched by its rule, its kernel and its fingerprint (a hash of the rule, the
//! kernel and a normalized window of instructions around the finding), never by line or
//! address, so recompiling with unrelated changes keeps old findings matched. Matching counts:
//! an entry with `count: 2` hides two findings with that identity, and a third one shows.
//!
//! What the fingerprints leave unmatched is matched a second time by anchor (the rule, the
//! kernel and the opcodes of the labelled instructions, without the window), against the
//! entries the first pass left over: a recompile that schedules other instructions around a
//! finding changes its window, not what it is about.

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
    /// The findings' anchor (`Diagnostic::anchor`); absent in baselines written before it was,
    /// whose entries are then matched by fingerprint only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor: Option<String>,
    /// Where the findings were when the baseline was written (for people; not matched).
    pub file: String,
    /// The first finding's message (for people; not matched).
    pub message: String,
    pub count: usize,
}

/// The identity a baseline matches by first: rule, kernel, fingerprint.
type Key = (String, Option<String>, String);

/// The identity it matches by second: rule, kernel, anchor.
type AnchorKey = (String, Option<String>, String);

/// How entries are grouped when written: file, kernel, rule, fingerprint, anchor.
type GroupKey = (String, Option<String>, String, String, Option<String>);

fn key_of(diagnostic: &Diagnostic) -> Option<Key> {
    let fingerprint = diagnostic.fingerprint.clone()?;
    Some((diagnostic.rule.clone(), diagnostic.kernel.clone(), fingerprint))
}

fn anchor_key_of(diagnostic: &Diagnostic) -> Option<AnchorKey> {
    let anchor = diagnostic.anchor.clone()?;
    Some((diagnostic.rule.clone(), diagnostic.kernel.clone(), anchor))
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
            .entry((file, kernel, rule, fingerprint, diagnostic.anchor.clone()))
            .or_insert_with(|| (diagnostic.message.clone(), 0))
            .1 += 1;
    }
    let entries = groups
        .into_iter()
        .map(|((file, kernel, rule, fingerprint, anchor), (message, count))| Entry {
            rule,
            kernel,
            fingerprint,
            anchor,
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
    Ok(Baseline::from_entries(file.entries))
}

/// Accepted findings by identity, with how many of each.
#[derive(Debug, Clone, Default)]
pub(crate) struct Baseline {
    /// By fingerprint identity: how many findings each anchor of it accepts (an identity has
    /// one anchor unless entries disagree).
    counts: BTreeMap<Key, BTreeMap<Option<String>, usize>>,
}

impl Baseline {
    fn from_entries(entries: Vec<Entry>) -> Self {
        let mut counts: BTreeMap<Key, BTreeMap<Option<String>, usize>> = BTreeMap::new();
        for entry in entries {
            *counts
                .entry((entry.rule, entry.kernel, entry.fingerprint))
                .or_default()
                .entry(entry.anchor)
                .or_insert(0) += entry.count;
        }
        Self { counts }
    }

    /// The baseline with each kernel named as `readable` names it (`None`: as it is). Findings
    /// name C++ kernels demangled; a baseline written from listings and PTX before they did
    /// names them as written, and still matches once its names are demangled too.
    pub(crate) fn with_kernels_named(self, readable: impl Fn(&str) -> Option<String>) -> Self {
        let mut counts: BTreeMap<Key, BTreeMap<Option<String>, usize>> = BTreeMap::new();
        for ((rule, kernel, fingerprint), anchors) in self.counts {
            let kernel = kernel.map(|k| readable(&k).unwrap_or(k));
            let merged = counts.entry((rule, kernel, fingerprint)).or_default();
            for (anchor, count) in anchors {
                *merged.entry(anchor).or_insert(0) += count;
            }
        }
        Self { counts }
    }

    /// The baseline that accepts exactly these findings.
    pub(crate) fn of(db: &SourceDb, diagnostics: &[Diagnostic]) -> Self {
        Self::from_entries(build(db, diagnostics).entries)
    }

    /// Drops the findings the baseline accepts, in the diagnostics' order, and returns how many.
    /// First by fingerprint; then what is left of both sides by anchor.
    pub(crate) fn filter(&self, diagnostics: &mut Vec<Diagnostic>) -> usize {
        let mut left = self.counts.clone();
        let mut accepted = vec![false; diagnostics.len()];
        for (diagnostic, accepted) in diagnostics.iter().zip(&mut accepted) {
            let Some(anchors) = key_of(diagnostic).and_then(|key| left.get_mut(&key)) else {
                continue;
            };
            // The finding's own anchor first, then any other of the identity.
            let own = anchors.get(&diagnostic.anchor).is_some_and(|&n| n > 0);
            let slot = if own {
                anchors.get_mut(&diagnostic.anchor)
            } else {
                anchors.values_mut().find(|n| **n > 0)
            };
            if let Some(count) = slot {
                *count -= 1;
                *accepted = true;
            }
        }
        // The second pass: entries with findings left over, by anchor.
        let mut by_anchor: BTreeMap<AnchorKey, usize> = BTreeMap::new();
        for ((rule, kernel, _), anchors) in left {
            for (anchor, count) in anchors {
                if let Some(anchor) = anchor.filter(|_| count > 0) {
                    *by_anchor.entry((rule.clone(), kernel.clone(), anchor)).or_insert(0) += count;
                }
            }
        }
        for (diagnostic, accepted) in diagnostics.iter().zip(&mut accepted) {
            if *accepted {
                continue;
            }
            if let Some(count) = anchor_key_of(diagnostic)
                .and_then(|key| by_anchor.get_mut(&key))
                .filter(|n| **n > 0)
            {
                *count -= 1;
                *accepted = true;
            }
        }
        let before = diagnostics.len();
        let mut accepted = accepted.into_iter();
        diagnostics.retain(|_| !accepted.next().unwrap_or(false));
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

    fn anchored(db: &mut SourceDb, kernel: &str, fingerprint: &str, anchor: &str) -> Diagnostic {
        let mut diagnostic = finding(db, "a.sass", kernel, fingerprint);
        diagnostic.anchor = Some(anchor.to_owned());
        diagnostic
    }

    /// A finding whose window changed keeps its anchor: it takes what the fingerprints left of
    /// an entry with that anchor, and no more; fingerprints are matched first, whatever the
    /// order of the findings.
    #[test]
    fn anchors_match_what_fingerprints_leave() {
        let mut db = SourceDb::new();
        let accepted = vec![
            anchored(&mut db, "k", "f1", "a"),
            anchored(&mut db, "k", "f1", "a"),
            anchored(&mut db, "k", "f2", "b"),
        ];
        let file = build(&db, &accepted);
        assert!(to_json(&file).contains("\"anchor\": \"a\""));
        let baseline = parse(&to_json(&file)).unwrap();

        // Recompiled: one `f1` finding moved (`f3`), a new one has the same anchor (`f4`).
        let mut run = vec![
            anchored(&mut db, "k", "f3", "a"),
            anchored(&mut db, "k", "f1", "a"),
            anchored(&mut db, "k", "f4", "a"),
            anchored(&mut db, "k", "f2", "b"),
            anchored(&mut db, "j", "f5", "a"),
        ];
        assert_eq!(baseline.filter(&mut run), 3);
        let left: Vec<_> = run.iter().map(|d| d.fingerprint.as_deref().unwrap()).collect();
        assert_eq!(left, ["f4", "f5"], "one of the two `a` findings of `k` is new");

        // Fingerprints first: `f3` comes before the two `f1` findings and still shows.
        let mut run = vec![
            anchored(&mut db, "k", "f3", "a"),
            anchored(&mut db, "k", "f1", "a"),
            anchored(&mut db, "k", "f1", "a"),
        ];
        assert_eq!(baseline.filter(&mut run), 2);
        assert_eq!(run[0].fingerprint.as_deref(), Some("f3"));

        // A baseline written without anchors matches by fingerprint only.
        let old =
            to_json(&file).replace("\"anchor\": \"a\",", "").replace("\"anchor\": \"b\",", "");
        assert!(!old.contains("anchor"));
        let mut run = vec![anchored(&mut db, "k", "f3", "a"), anchored(&mut db, "k", "f1", "a")];
        assert_eq!(parse(&old).unwrap().filter(&mut run), 1);
        assert_eq!(run[0].fingerprint.as_deref(), Some("f3"));
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
