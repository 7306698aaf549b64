//! The rule engine: the [`Rule`] trait, rule metadata, categories and the registry.
//!
//! Rules see only the IR ([`fencelint_ir`]) and the shared analyses ([`fencelint_cfg`]); they
//! report through [`FunctionCx`], which turns instruction ids into labelled diagnostics.

mod context;
mod meta;
pub mod registry;
mod rules;

pub use context::{FunctionCx, Report};
pub use meta::{Category, Dialects, RuleMeta, Status};
pub use registry::{all_rules, find_rule};

/// One hazard check. Implementations live one per file in `src/rules/`.
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

    fn check_function(&self, cx: &mut FunctionCx<'_>);
}
