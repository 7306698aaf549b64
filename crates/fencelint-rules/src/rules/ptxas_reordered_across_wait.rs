//! `ptxas-reordered-across-wait`: a memory operation that ptxas scheduled across the ordering
//! point that the PTX put before (or after) it. The analysis lives in `fencelint-reorder`; this
//! is its entry in the registry, so that selection, configuration, `explain` and SARIF know it.

use fencelint_reorder::{Audit, AuditOptions, audit_modules};

use crate::{Category, Dialects, PairCx, Rule, RuleMeta, Status};

pub(crate) struct PtxasReorderedAcrossWait;

static META: RuleMeta = RuleMeta {
    name: fencelint_reorder::RULE,
    category: Category::Correctness,
    dialects: Dialects::PAIR,
    min_sm: None,
    status: Status::Stable { since: "0.1.0" },
    summary: "ptxas scheduled a memory operation across the wait, fence or barrier that orders it in PTX",
    doc: fencelint_reorder::DOC,
};

impl Rule for PtxasReorderedAcrossWait {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_pair(&self, cx: &mut PairCx<'_>) {
        let options = AuditOptions {
            producer: cx.producer.map(ToOwned::to_owned),
            severity: cx.severity,
            ..AuditOptions::default()
        };
        let mut audit = Audit::default();
        audit_modules(cx.ptx, cx.ptx_lines, cx.sass, &options, &mut audit);
        cx.extend(audit.diagnostics);
    }
}
