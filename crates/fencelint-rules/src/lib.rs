//! The rule engine: the [`Rule`] trait, rule metadata, categories and the registry.
//!
//! Rules see only the IR ([`fencelint_ir`]) and the shared analyses ([`fencelint_cfg`]); they
//! report through [`FunctionCx`], which turns instruction ids into labelled diagnostics. Rules
//! whose dialects are [`Dialects::PAIR`] read a PTX module and the SASS made of it together,
//! through [`PairCx`].

mod context;
mod meta;
pub mod registry;
mod rules;

pub use context::{FunctionCx, PairCx, Report};
pub use meta::{Category, Dialects, RuleMeta, Status};
pub use registry::{all_rules, find_rule};

/// One hazard check. Implementations live one per file in `src/rules/`.
///
/// A rule implements one of the two checks (oxc's `run`/`run_once` split): `check_function`
/// for the rules that judge one function of one dialect, `check_pair` for the rules whose
/// dialects are [`Dialects::PAIR`]. The linter calls only the one that the metadata names.
pub trait Rule: Send + Sync {
    fn meta(&self) -> &'static RuleMeta;

    /// A cheap gate, checked once per module (oxc's `should_run`).
    fn should_run(&self, module: &fencelint_ir::Module) -> bool {
        let meta = self.meta();
        let dialect_ok = module.dialect.is_none_or(|d| meta.dialects.contains(d));
        let target_ok = match (meta.min_sm, module.sm_version()) {
            (Some(min), Some(sm)) => sm >= min,
            _ => true,
        };
        dialect_ok && target_ok
    }

    /// Checks one function.
    fn check_function(&self, _cx: &mut FunctionCx<'_>) {}

    /// Checks a PTX module against the SASS of the same kernels (pair rules only).
    fn check_pair(&self, _cx: &mut PairCx<'_>) {}
}
