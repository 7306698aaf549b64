//! Which rules run, at which severity.

use std::fmt;

use fencelint_diagnostics::{Severity, codes};
use fencelint_rules::{Category, Rule, all_rules, find_rule};

/// The resolved rule set of a run.
#[derive(Clone)]
pub struct Settings {
    rules: Vec<(&'static dyn Rule, Severity)>,
    /// The severity of `unused-suppression` diagnostics; `None` turns them off.
    unused_suppression: Option<Severity>,
}

impl Default for Settings {
    /// Every rule whose category is on by default, at its default severity.
    fn default() -> Self {
        let rules = all_rules()
            .iter()
            .filter_map(|&rule| rule.meta().default_severity().map(|s| (rule, s)))
            .collect();
        Self { rules, unused_suppression: Some(Severity::Warning) }
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.rules.iter().map(|(r, s)| (r.meta().name, s))).finish()
    }
}

impl Settings {
    /// Every registered rule, including off-by-default ones, at its default severity (or
    /// warning).
    pub fn all() -> Self {
        let rules = all_rules()
            .iter()
            .map(|&rule| (rule, rule.meta().default_severity().unwrap_or(Severity::Warning)))
            .collect();
        Self { rules, unused_suppression: Some(Severity::Warning) }
    }

    /// Exactly the named rules.
    pub fn only(names: &[&str]) -> Result<Self, SelectionError> {
        let mut rules = Vec::new();
        for name in names {
            let rule =
                find_rule(name).ok_or_else(|| SelectionError::UnknownRule((*name).into()))?;
            rules.push((rule, rule.meta().default_severity().unwrap_or(Severity::Warning)));
        }
        Ok(Self { rules, unused_suppression: Some(Severity::Warning) })
    }

    pub fn enabled(&self) -> impl Iterator<Item = (&'static dyn Rule, Severity)> + '_ {
        self.rules.iter().copied()
    }

    pub fn is_enabled(&self, name: &str) -> bool {
        self.rules.iter().any(|(r, _)| r.meta().name == name)
    }

    /// The severity of `unused-suppression` diagnostics, or `None` when they are off.
    pub fn unused_suppression(&self) -> Option<Severity> {
        self.unused_suppression
    }

    /// Sets the severity of `unused-suppression` diagnostics; `None` turns them off.
    pub fn set_unused_suppression(&mut self, severity: Option<Severity>) {
        self.unused_suppression = severity;
    }

    /// Sets the severity of every enabled rule that `selector` (a rule, a category or `all`)
    /// names; `None` turns them off. A rule named on its own is enabled when it was off; a
    /// category or `all` changes only the rules that are already enabled.
    pub fn set_severity_of(
        &mut self,
        selector: &str,
        severity: Option<Severity>,
    ) -> Result<(), SelectionError> {
        if selector == codes::UNUSED_SUPPRESSION {
            self.unused_suppression = severity;
            return Ok(());
        }
        if let Some(rule) = find_rule(selector) {
            self.set_severity(rule, severity);
            return Ok(());
        }
        let names: Vec<_> = matching(selector)?.iter().map(|r| r.meta().name).collect();
        match severity {
            Some(severity) => {
                for (rule, level) in &mut self.rules {
                    if names.contains(&rule.meta().name) {
                        *level = severity;
                    }
                }
            }
            None => self.rules.retain(|(r, _)| !names.contains(&r.meta().name)),
        }
        Ok(())
    }

    /// Sets the severity of one rule, enabling it when off.
    pub fn set_severity(&mut self, rule: &'static dyn Rule, severity: Option<Severity>) {
        self.rules.retain(|(r, _)| r.meta().name != rule.meta().name);
        if let Some(severity) = severity {
            self.rules.push((rule, severity));
            self.rules.sort_by_key(|(r, _)| r.meta().name);
        }
    }
}

/// `--select`/`--ignore` style selection: rule names, category names, or `all`.
///
/// `unused-suppression` may be named too: ignoring it turns the unused-suppression report off;
/// selecting it changes nothing (it is on unless ignored).
#[derive(Clone, Debug, Default)]
pub struct RuleSelection {
    pub select: Vec<String>,
    pub ignore: Vec<String>,
}

/// An unknown rule or category in a selection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SelectionError {
    UnknownRule(String),
}

impl fmt::Display for SelectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownRule(name) => {
                write!(f, "unknown rule or category `{name}` (see `fencelint rules` for the list)")
            }
        }
    }
}

impl std::error::Error for SelectionError {}

fn matching(selector: &str) -> Result<Vec<&'static dyn Rule>, SelectionError> {
    if selector == "all" {
        return Ok(all_rules().to_vec());
    }
    if let Some(category) = Category::parse(selector) {
        return Ok(all_rules().iter().copied().filter(|r| r.meta().category == category).collect());
    }
    find_rule(selector).map(|r| vec![r]).ok_or_else(|| SelectionError::UnknownRule(selector.into()))
}

impl RuleSelection {
    /// Applies the selection on top of `base`.
    pub fn apply(&self, mut base: Settings) -> Result<Settings, SelectionError> {
        if !self.select.is_empty() {
            let mut chosen: Vec<&'static dyn Rule> = Vec::new();
            for selector in &self.select {
                if selector == codes::UNUSED_SUPPRESSION {
                    continue;
                }
                chosen.extend(matching(selector)?);
            }
            base.rules = chosen
                .into_iter()
                .map(|rule| {
                    let severity = base
                        .rules
                        .iter()
                        .find(|(r, _)| r.meta().name == rule.meta().name)
                        .map(|(_, s)| *s)
                        .or(rule.meta().default_severity())
                        .unwrap_or(Severity::Warning);
                    (rule, severity)
                })
                .collect();
            base.rules.sort_by_key(|(r, _)| r.meta().name);
            base.rules.dedup_by_key(|(r, _)| r.meta().name);
        }
        for selector in &self.ignore {
            if selector == codes::UNUSED_SUPPRESSION {
                base.unused_suppression = None;
                continue;
            }
            let names: Vec<_> = matching(selector)?.iter().map(|r| r.meta().name).collect();
            base.rules.retain(|(r, _)| !names.contains(&r.meta().name));
        }
        Ok(base)
    }
}
