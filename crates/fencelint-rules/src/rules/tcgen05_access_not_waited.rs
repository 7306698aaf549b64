//! `tcgen05-access-not-waited`: a `tcgen05.ld` or `tcgen05.st` is followed by the arrive,
//! barrier or `tcgen05.dealloc` that hands its tensor-memory columns over, with no
//! `tcgen05.wait::ld` / `tcgen05.wait::st` in between on some path.

use fencelint_cfg::{FunctionAnalysis, Point};
use fencelint_diagnostics::Severity;
use fencelint_ir::{Barrier, Dialect, Inst, InstId, InstKind, MbarrierOp, Tcgen05Op};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct Tcgen05AccessNotWaited;

static META: RuleMeta = RuleMeta {
    name: "tcgen05-access-not-waited",
    category: Category::Correctness,
    dialects: Dialects::BOTH,
    min_sm: Some(100),
    status: Status::Stable { since: "0.1.0" },
    summary: "a tcgen05.ld/st hands its tensor memory over before tcgen05.wait::ld/st",
    doc: include_str!("../../../../rules/tcgen05-access-not-waited.md"),
};

impl Rule for Tcgen05AccessNotWaited {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let sass = cx.module.dialect == Some(Dialect::Sass);
        // Only memory and ordering instructions can match (`FunctionAnalysis::memory_insts`).
        for &access in analysis.memory_insts() {
            let Some(kind) = access_kind(analysis, access) else { continue };
            let Some(wait) = Wait::of(analysis, access, kind, sass) else { continue };
            let mut handovers = unwaited_handovers(analysis, access, wait);
            if wait.scoreboard.is_some() {
                handovers.retain(|&handover| !loaded_value_dead(analysis, access, handover));
            }
            let Some(&first) = handovers.first() else { continue };
            let later = handovers
                .iter()
                .map(|&handover| waited_before_another_arrive(analysis, handover, wait))
                .collect::<Option<Vec<_>>>()
                .and_then(|later| later.first().copied());
            report(cx, access, wait, first, handovers.len(), later);
        }
    }
}

/// Whether no register that the SASS load `access` writes is read after `handover` before it is
/// written again, when `handover` is an arrive or a barrier: the load is unwaited there by the
/// letter (ptxas makes the handover wait on a load whose value is dead when the PTX asks for
/// `tcgen05.wait::ld`, measured, so the PTX did not ask on that path), but what the columns'
/// next owner writes cannot spoil a value nobody reads (flashinfer's trtllm-gen attention
/// kernels load two chunks and branch past the use of one of them to the arrive). A
/// `tcgen05.dealloc` stays a handover whatever the registers hold: nothing documents what a
/// load of freed columns does besides filling dead registers.
fn loaded_value_dead(analysis: &FunctionAnalysis<'_>, access: InstId, handover: InstId) -> bool {
    let func = analysis.func;
    if matches!(func.inst(handover).kind, InstKind::Tcgen05(Tcgen05Op::Dealloc)) {
        return false;
    }
    func.inst(access).defs.iter().all(|&reg| {
        analysis
            .reachable_avoiding(
                Point::After(handover),
                |id| func.inst(id).uses.contains(&reg),
                |id| func.inst(id).defs.contains(&reg),
            )
            .is_empty()
    })
}

/// What completes an access: the PTX wait of its kind (`FENCE.VIEW.ASYNC.T` for a SASS store),
/// or, for a SASS `LDTM`, whose `tcgen05.wait::ld` leaves no instruction of its own, any
/// instruction that waits on the scoreboard the `LDTM` releases (ptxas's `NOP` for the wait,
/// the first reader of the loaded registers, `DEPBAR.LE SBn, 0x0`).
#[derive(Clone, Copy)]
struct Wait {
    kind: Access,
    scoreboard: Option<u8>,
}

impl Wait {
    /// `None` for a SASS `LDTM` whose scoreboards are unknown (a listing without encodings:
    /// plain `nvdisasm -c`, `nvdisasm -json`): such a load cannot be checked.
    fn of(
        analysis: &FunctionAnalysis<'_>,
        access: InstId,
        kind: Access,
        sass: bool,
    ) -> Option<Self> {
        if !(sass && kind == Access::Load) {
            return Some(Self { kind, scoreboard: None });
        }
        let scoreboard = analysis.func.inst(access).scoreboards?.write?;
        Some(Self { kind, scoreboard: Some(scoreboard) })
    }

    fn completes(self, inst: &Inst) -> bool {
        match self.scoreboard {
            Some(sb) => inst.scoreboards.is_some_and(|s| s.waits_for(sb)),
            None => matches!(inst.kind, InstKind::Tcgen05(op) if self.kind.completes(op)),
        }
    }

    /// Whether `kind` hands the columns over, for this access. For a SASS `LDTM` a named
    /// barrier (a thread count written, `BAR.SYNC.DEFER_BLOCKING 0x4, 0x80`) does not: the
    /// epilogue warps of CUTLASS's sub-tiled epilogues and of flashinfer's trtllm-gen kernels
    /// meet at a barrier of their own between a load and the first use of its registers (which
    /// waits for it), and the warp that reuses the columns learns of it through an mbarrier
    /// (rules/tcgen05-access-not-waited.md, Known problems). A barrier of the whole CTA
    /// (`BAR.SYNC.DEFER_BLOCKING 0x0`) still does, and PTX and SASS stores keep every barrier.
    fn hands_over(self, kind: &InstKind) -> bool {
        let named = matches!(kind, InstKind::Barrier(Barrier::CtaSync { partial: true }));
        is_handover(kind) && !(self.scoreboard.is_some() && named)
    }
}

/// Which half of tensor-memory access an instruction is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Access {
    Load,
    Store,
}

impl Access {
    const fn wait(self) -> &'static str {
        match self {
            Self::Load => "tcgen05.wait::ld.sync.aligned",
            Self::Store => "tcgen05.wait::st.sync.aligned",
        }
    }

    const fn completes(self, op: Tcgen05Op) -> bool {
        matches!((self, op), (Self::Load, Tcgen05Op::WaitLd) | (Self::Store, Tcgen05Op::WaitSt))
    }
}

fn access_kind(analysis: &FunctionAnalysis<'_>, id: InstId) -> Option<Access> {
    match analysis.func.inst(id).kind {
        InstKind::Tcgen05(Tcgen05Op::Ld) => Some(Access::Load),
        InstKind::Tcgen05(Tcgen05Op::St) => Some(Access::Store),
        _ => None,
    }
}

/// Instructions that let another thread (or the allocator) reuse the columns: an mbarrier
/// arrive, a CTA or cluster barrier arrival, `tcgen05.dealloc`.
fn is_handover(kind: &InstKind) -> bool {
    matches!(
        kind,
        InstKind::Mbarrier(MbarrierOp::Arrive { .. })
            | InstKind::Barrier(
                Barrier::CtaSync { .. }
                    | Barrier::CtaArrive
                    | Barrier::CtaReduce
                    | Barrier::ClusterArrive { .. }
            )
            | InstKind::Tcgen05(Tcgen05Op::Dealloc)
    )
}

fn unwaited_handovers(analysis: &FunctionAnalysis<'_>, access: InstId, wait: Wait) -> Vec<InstId> {
    let func = analysis.func;
    // A handover that itself waits on the `LDTM`'s scoreboard issues after the load completed.
    analysis.reachable_avoiding(
        Point::After(access),
        |id| wait.hands_over(&func.inst(id).kind) && !wait.completes(func.inst(id)),
        |id| wait.completes(func.inst(id)),
    )
}

/// For an mbarrier arrive or CTA barrier `handover` that an access reaches unwaited: the wait
/// and the arrive after it when every path from `handover` waits for the access before the
/// thread exits, and the first handover after that wait is an arrive on another mbarrier (any
/// mbarrier, after a CTA barrier). The thread then hands the columns over at that later
/// arrive, and `handover` most likely releases something else: a shared-memory stage, the
/// shape of every finding on the flashinfer-cubin sample, or a named barrier among the
/// epilogue's threads that guards a staging buffer, the shape of CUTLASS's sub-tiled TMEM
/// epilogues (docs/audit.md). A `tcgen05.dealloc`, a cluster barrier, or a barrier or arrive on
/// the same mbarrier after the wait does not count.
fn waited_before_another_arrive(
    analysis: &FunctionAnalysis<'_>,
    handover: InstId,
    wait: Wait,
) -> Option<(InstId, InstId)> {
    let func = analysis.func;
    let arrive_address = |id: InstId| match func.inst(id).kind {
        InstKind::Mbarrier(MbarrierOp::Arrive { .. }) => func.inst(id).address.as_ref(),
        _ => None,
    };
    // The mbarrier the handover arrives on; none for a CTA barrier.
    let first_address = match func.inst(handover).kind {
        InstKind::Barrier(Barrier::CtaSync { .. } | Barrier::CtaArrive | Barrier::CtaReduce) => {
            None
        }
        _ => Some(arrive_address(handover)?),
    };
    let policy = wait;
    let waits = |id: InstId| policy.completes(func.inst(id));
    let after = Point::After(handover);
    // Every path waits: no exit is reachable on a path without the wait.
    let ends = |id: InstId| func.inst(id).control.exits;
    if !analysis.reachable_avoiding(after, ends, waits).is_empty() {
        return None;
    }
    let &wait = analysis.reachable_avoiding(after, waits, |_| false).first()?;
    let &next = analysis
        .reachable_avoiding(
            Point::After(wait),
            |id| policy.hands_over(&func.inst(id).kind),
            |_| false,
        )
        .first()?;
    (Some(arrive_address(next)?) != first_address).then_some((wait, next))
}

fn report(
    cx: &mut FunctionCx<'_>,
    access: InstId,
    wait: Wait,
    handover: InstId,
    n: usize,
    later: Option<(InstId, InstId)>,
) {
    let sass = cx.module.dialect == Some(Dialect::Sass);
    let access_inst = cx.inst(access);
    let handover_inst = cx.inst(handover);
    let what = match handover_inst.kind {
        InstKind::Tcgen05(Tcgen05Op::Dealloc) => "frees its tensor memory",
        InstKind::Mbarrier(_) => "hands its tensor memory to another thread",
        _ => "lets other threads reuse its tensor memory",
    };
    let kind = wait.kind;
    let shown = match (sass, wait.scoreboard) {
        (false, _) => format!("`{}`", kind.wait()),
        (true, None) => format!("`{}` (`FENCE.VIEW.ASYNC.T`)", kind.wait()),
        (true, Some(sb)) => {
            format!("`{}` (no instruction waits on its scoreboard `SB{sb}`)", kind.wait())
        }
    };
    let message = format!(
        "`{}` is not waited for with {shown} before `{}` {what}",
        access_inst.opcode, handover_inst.opcode,
    );
    let handover_label = match handover_inst.kind {
        InstKind::Tcgen05(Tcgen05Op::Dealloc) => "the columns are freed here",
        _ => "the columns are handed over here",
    };
    let help = if later.is_some() {
        let this = match handover_inst.kind {
            InstKind::Mbarrier(_) => "arrive",
            _ => "barrier",
        };
        format!("if this {this} hands the columns over, insert `{};` before it", kind.wait())
    } else if sass && wait.scoreboard.is_some() {
        format!(
            "insert `{};` after the `tcgen05.ld` in the PTX (ptxas then makes an instruction \
             before the handover wait on the `LDTM`'s scoreboard)",
            kind.wait()
        )
    } else if sass {
        format!(
            "insert `{};` after the `tcgen05.st` in the PTX (ptxas emits `FENCE.VIEW.ASYNC.T`)",
            kind.wait()
        )
    } else {
        format!("insert `{};` after this access", kind.wait())
    };
    let mut report = cx
        .report(access, message)
        .primary_label("this access completes asynchronously")
        .secondary(handover, handover_label)
        .help(help)
        .note(
            "`tcgen05.ld` and `tcgen05.st` complete only at `tcgen05.wait::ld` / \
             `tcgen05.wait::st`; `tcgen05.fence::before_thread_sync` does not wait for them",
        );
    if n > 1 {
        report = report
            .note(format!("{} more handovers after this access are not waited for either", n - 1));
    }
    if let Some((wait, next)) = later {
        report = report
            .at_most(Severity::Note)
            .secondary(wait, "waited for later, on every path")
            .secondary(next, "and then handed over on another mbarrier")
            .note(
                "the access is waited for later, before an arrive on another mbarrier: that \
                 arrive most likely hands the columns over and this handover releases \
                 something else, which SASS and PTX cannot tell apart (reported as a note)",
            );
    }
    drop(report);
}
