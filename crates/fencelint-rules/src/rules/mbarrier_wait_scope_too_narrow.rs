//! `mbarrier-wait-scope-too-narrow`: an mbarrier wait acquires at `.cta` scope (or is relaxed
//! with no acquire fence after it) on a barrier that peer CTAs complete with a `.cluster`-scope
//! release, and shared memory is read after it.

use fencelint_cfg::{AddrKey, FunctionAnalysis, Point};
use fencelint_ir::{
    AsyncOp, BulkDir, FenceKind, InstId, InstKind, MbarrierOp, Scope, Sem, Space, Tcgen05Op,
};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct MbarrierWaitScopeTooNarrow;

static META: RuleMeta = RuleMeta {
    name: "mbarrier-wait-scope-too-narrow",
    category: Category::Correctness,
    dialects: Dialects::PTX,
    min_sm: Some(90),
    status: Status::Stable { since: "0.1.0" },
    summary: "an mbarrier wait acquires at .cta scope on a barrier that peer CTAs release at .cluster scope",
    doc: include_str!("../../../../rules/mbarrier-wait-scope-too-narrow.md"),
};

impl Rule for MbarrierWaitScopeTooNarrow {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let func = analysis.func;
        // Only memory and ordering instructions can match (`FunctionAnalysis::memory_insts`).
        let releases: Vec<RemoteRelease> =
            analysis.memory_insts().iter().filter_map(|&id| remote_release(analysis, id)).collect();
        if releases.is_empty() {
            return;
        }
        for &wait in analysis.memory_insts() {
            let inst = func.inst(wait);
            let InstKind::Mbarrier(MbarrierOp::Wait { sem, scope, .. }) = inst.kind else {
                continue;
            };
            if sem.has_acquire() && scope.covers(Scope::Cluster) {
                continue;
            }
            let Some(address) = &inst.address else { continue };
            let barrier = analysis.address_key(wait, address);
            let Some(release) = releases.iter().find(|r| r.barrier.same_object(&barrier)) else {
                continue;
            };
            let reads = unordered_reads(analysis, wait, &barrier);
            let Some(&first) = reads.first() else { continue };
            report(cx, wait, sem, scope, release, first);
        }
    }
}

/// An instruction by which a thread of a peer CTA completes (or helps complete) a phase of a
/// barrier in this CTA, with release semantics at `.cluster` scope.
struct RemoteRelease {
    inst: InstId,
    barrier: AddrKey,
    what: &'static str,
}

fn remote_release(analysis: &FunctionAnalysis<'_>, id: InstId) -> Option<RemoteRelease> {
    let inst = analysis.func.inst(id);
    let what = match inst.kind {
        InstKind::Async(AsyncOp::StAsync) => "a peer CTA's `st.async` completes the barrier here",
        InstKind::Async(AsyncOp::RedAsync) => "a peer CTA's `red.async` completes the barrier here",
        InstKind::Async(AsyncOp::Bulk { dir: BulkDir::SharedToShared, .. }) => {
            "a peer CTA's bulk copy completes the barrier here"
        }
        InstKind::Async(
            AsyncOp::Bulk { multicast: true, .. } | AsyncOp::BulkTensor { multicast: true, .. },
        ) => "a multicast copy completes this barrier in every CTA of its mask here",
        InstKind::Tcgen05(Tcgen05Op::Commit { multicast: true }) => {
            "a multicast commit arrives on this barrier in every CTA of its mask here"
        }
        InstKind::Mbarrier(MbarrierOp::Arrive { remote, scope, .. }) => {
            let key = analysis.address_key(id, inst.mbarrier()?);
            if !(key.mapped || (remote && scope.covers(Scope::Cluster))) {
                return None;
            }
            "a thread of a peer CTA arrives on the barrier here"
        }
        _ => return None,
    };
    let barrier = analysis.address_key(id, inst.mbarrier()?);
    Some(RemoteRelease { inst: id, barrier, what })
}

/// Shared-memory reads (and generic reads, which may be shared) after the wait with no
/// cluster-scope acquire on the way.
fn unordered_reads(
    analysis: &FunctionAnalysis<'_>,
    wait: InstId,
    barrier: &AddrKey,
) -> Vec<InstId> {
    let func = analysis.func;
    let is_read = |id: InstId| {
        matches!(
            &func.inst(id).kind,
            InstKind::Load(mem) | InstKind::Atomic { mem, returns: true }
                if matches!(mem.space, Space::SharedCta | Space::SharedCluster | Space::Generic)
        )
    };
    let is_acquire = |id: InstId| acquires_at_cluster(analysis, id, barrier);
    analysis.reachable_avoiding(Point::After(wait), is_read, is_acquire)
}

/// A fence that, after the wait observed the phase, forms an acquire pattern at `.cluster`
/// scope, or another wait on the same barrier that acquires at `.cluster` scope.
fn acquires_at_cluster(analysis: &FunctionAnalysis<'_>, id: InstId, barrier: &AddrKey) -> bool {
    let inst = analysis.func.inst(id);
    match &inst.kind {
        InstKind::Fence(fence) => {
            fence.acquires_at(Scope::Cluster)
                || (fence.kind == FenceKind::SyncRestrictShared
                    && fence.sem.has_acquire()
                    && fence.scope.is_some_and(|s| s.covers(Scope::Cluster)))
        }
        InstKind::Mbarrier(MbarrierOp::Wait { sem, scope, .. }) => {
            sem.has_acquire()
                && scope.covers(Scope::Cluster)
                && inst
                    .address
                    .as_ref()
                    .is_some_and(|a| analysis.address_key(id, a).same_object(barrier))
        }
        _ => false,
    }
}

fn report(
    cx: &mut FunctionCx<'_>,
    wait: InstId,
    sem: Sem,
    scope: Scope,
    release: &RemoteRelease,
    read: InstId,
) {
    let wait_inst = cx.inst(wait);
    let release_inst = cx.inst(release.inst);
    let how = if sem.has_acquire() {
        format!("acquires only at `.{scope}` scope")
    } else {
        format!("is `.relaxed.{scope}` with no acquire fence after it")
    };
    let message = format!(
        "`{}` {how}, but peer CTAs complete the barrier with `{}` at `.cluster` scope",
        wait_inst.opcode, release_inst.opcode
    );
    let help = if scope.covers(Scope::Cluster) {
        "insert `fence.acquire.sync_restrict::shared::cluster.cluster;` after the wait loop"
            .to_owned()
    } else {
        "wait with `.acquire.cluster`, or with `.relaxed.cluster` followed by `fence.acquire.sync_restrict::shared::cluster.cluster;`".to_owned()
    };
    drop(
        cx.report(wait, message)
            .primary_label("this wait does not synchronize with the peers' release")
            .secondary(release.inst, release.what)
            .secondary(read, "this read is not ordered after the peers' writes")
            .help(help)
            .note(
                "a release and an acquire synchronize only if each one's scope includes the \
                 other thread; `.cta` scope never includes a thread of another CTA",
            ),
    );
}
