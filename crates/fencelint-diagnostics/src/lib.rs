//! The diagnostic data model: what a rule or a parser reports, before anything is rendered.
//!
//! A [`Diagnostic`] is plain data. Rendering for people, CI systems and editors happens only in
//! the command-line crate.

use std::fmt;

use fencelint_source::{Dialect, FileId, SourceLocation, TextRange};
use serde::{Deserialize, Serialize};

/// How serious a finding is. Ordered from least to most severe.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Note,
    Warning,
    Error,
}

impl Severity {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Note => "note",
            Self::Warning => "warning",
            Self::Error => "error",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "note" | "info" => Some(Self::Note),
            "warning" | "warn" => Some(Self::Warning),
            "error" | "deny" => Some(Self::Error),
            _ => None,
        }
    }
}

impl fmt::Display for Severity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

/// A span in one input file with a short explanation.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Label {
    pub file: FileId,
    pub range: TextRange,
    pub message: String,
    /// The SASS byte address of the instruction under this label, when it is SASS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<u64>,
    /// The original source location of the instruction under this label, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceLocation>,
}

impl Label {
    pub fn new(file: FileId, range: TextRange, message: impl Into<String>) -> Self {
        Self { file, range, message: message.into(), address: None, source: None }
    }

    #[must_use]
    pub fn with_address(mut self, address: Option<u64>) -> Self {
        self.address = address;
        self
    }

    #[must_use]
    pub fn with_source(mut self, source: Option<SourceLocation>) -> Self {
        self.source = source;
        self
    }
}

/// Names of diagnostics that do not come from a rule.
pub mod codes {
    /// A statement or line that the front end could not parse.
    pub const PARSE_ERROR: &str = "parse-error";
    /// An input that could not be read or decoded at all.
    pub const INPUT_ERROR: &str = "input-error";
    /// An analysis stopped at its budget; results for the function are incomplete.
    pub const ANALYSIS_INCOMPLETE: &str = "analysis-incomplete";
    /// A rule panicked; the message names the rule and the kernel.
    pub const INTERNAL_ERROR: &str = "internal-error";
    /// An inline `// fencelint: allow(...)` suppression that suppressed nothing, names an unknown
    /// rule, or cannot be read.
    pub const UNUSED_SUPPRESSION: &str = "unused-suppression";
    /// A SASS listing for an architecture newer than any the semantics table was checked
    /// against: instructions new to it are read as unknown ones.
    pub const UNKNOWN_ARCHITECTURE: &str = "unknown-architecture";
    /// A SASS listing whose calls name no callee (cuobjdump's `CALL.ABS.NOINC 0x0`): the code
    /// they call was not checked in their callers' context.
    pub const CALLS_NOT_FOLLOWED: &str = "calls-not-followed";
    /// PTX of a debug build (`.target sm_90a, debug`, from `nvcc -G`): its findings differ from
    /// the release build's.
    pub const DEBUG_BUILD: &str = "debug-build";
}

/// One finding.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The kebab-case rule name, or one of [`codes`].
    pub rule: String,
    pub severity: Severity,
    /// Lowercase, no trailing period, names the instruction in backticks.
    pub message: String,
    pub primary: Label,
    #[serde(default)]
    pub secondary: Vec<Label>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// One imperative action.
    #[serde(default)]
    pub help: Option<String>,
    /// The `.entry`/`.func` or SASS function the finding is in.
    #[serde(default)]
    pub kernel: Option<String>,
    #[serde(default)]
    pub dialect: Option<Dialect>,
    /// A location-independent identity for baselines and SARIF `partialFingerprints`: a hash of
    /// the rule, the kernel and a normalized window of instructions around the finding (never
    /// line numbers or addresses).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fingerprint: Option<String>,
    /// A coarser identity for baselines: a hash of the rule, the kernel and the opcodes of the
    /// labelled instructions only, without the window around them. A recompile that schedules
    /// other instructions next to a finding changes its fingerprint and keeps its anchor; a
    /// baseline matches by anchor what its fingerprints left unmatched. Written to baseline
    /// files, not to the outputs.
    #[serde(skip)]
    pub anchor: Option<String>,
}

/// A stable 64-bit FNV-1a hash, printed as 16 hex digits. Stable across platforms and releases,
/// unlike `std`'s hasher.
pub fn stable_hash<'a>(parts: impl IntoIterator<Item = &'a str>) -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for part in parts {
        for byte in part.bytes().chain(std::iter::once(0x1f)) {
            hash ^= u64::from(byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    }
    format!("{hash:016x}")
}

impl Diagnostic {
    pub fn new(
        rule: impl Into<String>,
        severity: Severity,
        message: impl Into<String>,
        primary: Label,
    ) -> Self {
        Self {
            rule: rule.into(),
            severity,
            message: message.into(),
            primary,
            secondary: Vec::new(),
            notes: Vec::new(),
            help: None,
            kernel: None,
            dialect: None,
            fingerprint: None,
            anchor: None,
        }
    }

    #[must_use]
    pub fn with_secondary(mut self, label: Label) -> Self {
        self.secondary.push(label);
        self
    }

    #[must_use]
    pub fn with_note(mut self, note: impl Into<String>) -> Self {
        self.notes.push(note.into());
        self
    }

    #[must_use]
    pub fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(help.into());
        self
    }

    #[must_use]
    pub fn with_kernel(mut self, kernel: impl Into<String>) -> Self {
        self.kernel = Some(kernel.into());
        self
    }

    #[must_use]
    pub fn with_dialect(mut self, dialect: Dialect) -> Self {
        self.dialect = Some(dialect);
        self
    }

    /// The key that makes output deterministic: file, start, rule, then message.
    pub fn sort_key(&self) -> (FileId, u32, u32, &str, &str) {
        (
            self.primary.file,
            self.primary.range.start,
            self.primary.range.end,
            self.rule.as_str(),
            self.message.as_str(),
        )
    }
}

/// Sorts diagnostics into their one deterministic order.
pub fn sort(diagnostics: &mut [Diagnostic]) {
    diagnostics.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
}

/// Drops, from [sorted](sort) diagnostics, each one with the place, rule and message of the one
/// before it (the first is kept: the sort is stable). Code that several calls reach through a
/// copy of its own (a function that is not inlined, lowered once per call) gives the same
/// finding once per copy, at the same place.
pub fn dedup_sorted(diagnostics: &mut Vec<Diagnostic>) {
    diagnostics.dedup_by(|later, earlier| later.sort_key() == earlier.sort_key());
}
