//! `mbarrier-phase-skip`: a thread arrives on the same mbarrier twice with no wait for the first
//! arrival's phase in between, so its later parity wait can be satisfied by the preceding phase.

use fencelint_cfg::{AddrKey, AddrRoot, FunctionAnalysis, Point};
use fencelint_ir::{Barrier, InstId, InstKind, MbarrierOp, Tcgen05Op};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct MbarrierPhaseSkip;

static META: RuleMeta = RuleMeta {
    name: "mbarrier-phase-skip",
    category: Category::Correctness,
    dialects: Dialects::PTX,
    min_sm: Some(80),
    status: Status::Stable { since: "0.1.0" },
    summary: "a thread arrives twice on an mbarrier without waiting for the first arrival's phase",
    doc: include_str!("../../../../rules/mbarrier-phase-skip.md"),
};

impl Rule for MbarrierPhaseSkip {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let ops = BarrierOps::collect(analysis);
        if ops.arrives.is_empty() || ops.waits.is_empty() {
            return;
        }
        let mut reported: Vec<InstId> = Vec::new();
        for first in &ops.arrives {
            let key = &first.key;
            if !stable_across(analysis, key, first.inst) {
                continue;
            }
            let handshakes = ops.handshake_barriers(analysis, key);
            let is_same = |id: InstId| ops.arrive_at(id).is_some_and(|a| a.key.same_object(key));
            let is_separator = |id: InstId| separates(analysis, &ops, &handshakes, key, id);
            let seconds =
                analysis.reachable_avoiding(Point::After(first.inst), is_same, is_separator);
            for second in seconds {
                if reported.contains(&second) || exclusive_guards(analysis, first.inst, second) {
                    continue;
                }
                if second != first.inst && !stable_across(analysis, key, second) {
                    continue;
                }
                let Some(wait) = later_wait(analysis, &ops, key, second) else { continue };
                let dealloc = later_dealloc(analysis, wait);
                reported.push(second);
                report(cx, first.inst, second, wait, dealloc);
            }
        }
    }
}

/// A local arrival (an `mbarrier.arrive*` or a `tcgen05.commit` that arrives) or a wait, with the
/// barrier it names.
struct BarrierOp {
    inst: InstId,
    key: AddrKey,
}

struct BarrierOps {
    arrives: Vec<BarrierOp>,
    waits: Vec<BarrierOp>,
}

impl BarrierOps {
    fn collect(analysis: &FunctionAnalysis<'_>) -> Self {
        let func = analysis.func;
        let mut arrives = Vec::new();
        let mut waits = Vec::new();
        // Only memory and ordering instructions can match (`FunctionAnalysis::memory_insts`).
        for &id in analysis.memory_insts() {
            let inst = func.inst(id);
            let is_arrive = match inst.kind {
                InstKind::Mbarrier(MbarrierOp::Arrive { .. }) => true,
                InstKind::Tcgen05(Tcgen05Op::Commit { multicast }) => !multicast,
                InstKind::Mbarrier(MbarrierOp::Wait { .. }) => false,
                _ => continue,
            };
            let Some(address) = inst.mbarrier() else { continue };
            let key = analysis.address_key(id, address);
            if matches!(key.root, AddrRoot::Unknown(_)) {
                continue;
            }
            if is_arrive {
                // A remote arrive (through `mapa`) counts in a peer CTA's barrier: this thread
                // never waits on it, and arrives on several peers are not a repetition.
                if !key.mapped {
                    arrives.push(BarrierOp { inst: id, key });
                }
            } else {
                waits.push(BarrierOp { inst: id, key });
            }
        }
        Self { arrives, waits }
    }

    fn arrive_at(&self, id: InstId) -> Option<&BarrierOp> {
        self.arrives.binary_search_by_key(&id, |a| a.inst).ok().map(|i| &self.arrives[i])
    }

    fn wait_at(&self, id: InstId) -> Option<&BarrierOp> {
        self.waits.binary_search_by_key(&id, |w| w.inst).ok().map(|i| &self.waits[i])
    }

    /// Barriers that threads arrive on after waiting for `key`: the "empty" barrier of a
    /// producer/consumer pair whose "full" barrier is `key`. Waiting on one of them tells the
    /// producer that the consumers have seen its previous phase of `key`.
    fn handshake_barriers(&self, analysis: &FunctionAnalysis<'_>, key: &AddrKey) -> Vec<AddrKey> {
        let mut out: Vec<AddrKey> = Vec::new();
        for wait in self.waits.iter().filter(|w| w.key.same_object(key)) {
            let is_other_arrive =
                |id: InstId| self.arrive_at(id).is_some_and(|a| !a.key.same_object(key));
            for id in
                analysis.reachable_avoiding(Point::After(wait.inst), is_other_arrive, |_| false)
            {
                let Some(arrive) = self.arrive_at(id) else { continue };
                if !out.iter().any(|k| k.same_object(&arrive.key)) {
                    out.push(arrive.key.clone());
                }
            }
        }
        out
    }
}

/// Whether an instruction tells the thread that the phase of its earlier arrival has completed
/// (or may have): a wait on the barrier or on a handshake barrier, a CTA-wide barrier, or a
/// re-initialisation.
fn separates(
    analysis: &FunctionAnalysis<'_>,
    ops: &BarrierOps,
    handshakes: &[AddrKey],
    key: &AddrKey,
    id: InstId,
) -> bool {
    let inst = analysis.func.inst(id);
    match inst.kind {
        InstKind::Mbarrier(MbarrierOp::Wait { .. }) => ops.wait_at(id).is_some_and(|w| {
            w.key.same_object(key) || handshakes.iter().any(|k| k.same_object(&w.key))
        }),
        InstKind::Mbarrier(MbarrierOp::Init | MbarrierOp::Inval) => {
            inst.address.as_ref().is_some_and(|a| analysis.address_key(id, a).same_object(key))
        }
        InstKind::Barrier(Barrier::CtaSync { .. } | Barrier::CtaReduce | Barrier::ClusterWait) => {
            true
        }
        _ => false,
    }
}

/// Whether the barrier address names the same barrier every time `at` executes: a variable, a
/// parameter or a constant, or a value computed outside every loop that contains `at`.
fn stable_across(analysis: &FunctionAnalysis<'_>, key: &AddrKey, at: InstId) -> bool {
    match key.root {
        AddrRoot::Def(def) => !analysis
            .loops()
            .iter()
            .any(|l| l.contains_inst(analysis, def) && l.contains_inst(analysis, at)),
        AddrRoot::Unknown(_) => false,
        AddrRoot::Param(_) | AddrRoot::Symbol(_) | AddrRoot::Absolute(_) => true,
    }
}

/// Two instructions guarded by opposite senses of one predicate run in different threads.
fn exclusive_guards(analysis: &FunctionAnalysis<'_>, a: InstId, b: InstId) -> bool {
    let (Some(ga), Some(gb)) = (analysis.func.inst(a).guard, analysis.func.inst(b).guard) else {
        return false;
    };
    ga.reg == gb.reg && ga.negated != gb.negated
}

/// The first wait on the barrier after the second arrival.
fn later_wait(
    analysis: &FunctionAnalysis<'_>,
    ops: &BarrierOps,
    key: &AddrKey,
    second: InstId,
) -> Option<InstId> {
    let is_wait = |id: InstId| ops.wait_at(id).is_some_and(|w| w.key.same_object(key));
    analysis.reachable_avoiding(Point::After(second), is_wait, is_wait).first().copied()
}

fn later_dealloc(analysis: &FunctionAnalysis<'_>, wait: InstId) -> Option<InstId> {
    let func = analysis.func;
    let is_dealloc =
        |id: InstId| matches!(func.inst(id).kind, InstKind::Tcgen05(Tcgen05Op::Dealloc));
    analysis.reachable_avoiding(Point::After(wait), is_dealloc, |_| false).first().copied()
}

fn report(
    cx: &mut FunctionCx<'_>,
    first: InstId,
    second: InstId,
    wait: InstId,
    dealloc: Option<InstId>,
) {
    let second_inst = cx.inst(second);
    let wait_inst = cx.inst(wait);
    let mut message = if first == second {
        format!(
            "`{}` arrives on the barrier again in every iteration of a loop that never waits for the phase of the previous arrival, so the later `{}` can pass on the preceding phase",
            second_inst.opcode, wait_inst.opcode
        )
    } else {
        format!(
            "`{}` arrives on the barrier a second time without waiting for the phase of the first arrival, so the later `{}` can pass on the preceding phase",
            second_inst.opcode, wait_inst.opcode
        )
    };
    if let Some(dealloc) = dealloc {
        let dealloc = &cx.inst(dealloc).opcode;
        message = format!(
            "{message}; `{dealloc}` may then free tensor memory before the other warps' `tcgen05.ld`"
        );
    }
    let mut report = cx
        .report(second, message)
        .primary_label("this arrival can count towards the phase of the earlier one");
    if first != second {
        report = report.secondary(first, "the first arrival is here");
    }
    report = report
        .secondary(wait, "this wait can be satisfied by the phase before the one it means")
        .help("insert a wait for the phase of the first arrival (an `mbarrier.try_wait.parity` loop) before this arrive")
        .note("a parity wait tests the current or the immediately preceding phase; if the thread's second arrival lands while the first arrival's phase is still open, the wait names the phase before it and returns at once");
    if let Some(dealloc) = dealloc {
        report = report.secondary(dealloc, "tensor memory is freed here");
    }
    drop(report);
}
