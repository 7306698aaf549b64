//! Rule metadata: name, category, dialects, status and documentation.

use std::fmt;

use fencelint_diagnostics::Severity;
use fencelint_ir::Dialect;

/// Clippy's taxonomy; the category sets the default severity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Category {
    /// A definite ordering bug (error).
    Correctness,
    /// Probably a bug (warning).
    Suspicious,
    /// Correct but slower than needed (warning).
    Perf,
    /// Style (warning).
    Style,
    /// Strict checks, off by default.
    Pedantic,
    /// New or imprecise rules, off by default.
    Nursery,
}

impl Category {
    pub const ALL: [Self; 6] = [
        Self::Correctness,
        Self::Suspicious,
        Self::Perf,
        Self::Style,
        Self::Pedantic,
        Self::Nursery,
    ];

    /// The default severity, or `None` when the category is off by default.
    pub const fn default_severity(self) -> Option<Severity> {
        match self {
            Self::Correctness => Some(Severity::Error),
            Self::Suspicious | Self::Perf | Self::Style => Some(Severity::Warning),
            Self::Pedantic | Self::Nursery => None,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Correctness => "correctness",
            Self::Suspicious => "suspicious",
            Self::Perf => "perf",
            Self::Style => "style",
            Self::Pedantic => "pedantic",
            Self::Nursery => "nursery",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == text)
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `pad`, not `write_str`: width and alignment (`{:<12}`) apply, as for a `str`.
        f.pad(self.as_str())
    }
}

/// The dialects a rule checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dialects {
    pub ptx: bool,
    pub sass: bool,
    /// The rule reads a PTX module and the SASS that ptxas made of it together
    /// ([`Rule::check_pair`](crate::Rule::check_pair)) instead of one function at a time.
    pub pair: bool,
}

impl Dialects {
    pub const PTX: Self = Self { ptx: true, sass: false, pair: false };
    pub const SASS: Self = Self { ptx: false, sass: true, pair: false };
    pub const BOTH: Self = Self { ptx: true, sass: true, pair: false };
    pub const PAIR: Self = Self { ptx: true, sass: true, pair: true };

    pub const fn contains(self, dialect: Dialect) -> bool {
        match dialect {
            Dialect::Ptx => self.ptx,
            Dialect::Sass => self.sass,
        }
    }
}

impl fmt::Display for Dialects {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match (self.pair, self.ptx, self.sass) {
            (true, ..) => "ptx + sass (pair)",
            (false, true, true) => "ptx, sass",
            (false, true, false) => "ptx",
            (false, false, true) => "sass",
            (false, false, false) => "none",
        };
        f.pad(text)
    }
}

/// Ruff's rule status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    Stable { since: &'static str },
    Nursery { since: &'static str },
    Deprecated { since: &'static str },
}

/// Everything about a rule except its code.
#[derive(Debug)]
pub struct RuleMeta {
    /// Kebab-case, names the bad pattern, reads after "allow".
    pub name: &'static str,
    pub category: Category,
    pub dialects: Dialects,
    /// The lowest SM version where the rule applies (`Some(90)` for cluster features).
    pub min_sm: Option<u32>,
    pub status: Status,
    /// One line, for `fencelint rules` and SARIF short descriptions.
    pub summary: &'static str,
    /// The rule's `rules/<name>.md`.
    pub doc: &'static str,
}

impl RuleMeta {
    pub const fn since(&self) -> &'static str {
        match self.status {
            Status::Stable { since } | Status::Nursery { since } | Status::Deprecated { since } => {
                since
            }
        }
    }

    pub const fn default_severity(&self) -> Option<Severity> {
        self.category.default_severity()
    }
}
