//! `mbarrier-init-not-fenced`: an `mbarrier.init` whose barrier the async proxy or peer CTAs use
//! with no `fence.mbarrier_init.release.cluster` after it, or that other threads use with no
//! barrier after the initialisation at all.

use fencelint_cfg::{AddrKey, AddrRoot, BlockId, FunctionAnalysis, Point};
use fencelint_ir::{
    AsyncOp, Barrier, FenceKind, Inst, InstId, InstKind, MbarrierOp, Scope, Space, Tcgen05Op,
    ValueOp,
};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct MbarrierInitNotFenced;

static META: RuleMeta = RuleMeta {
    name: "mbarrier-init-not-fenced",
    category: Category::Correctness,
    dialects: Dialects::PTX,
    min_sm: Some(80),
    status: Status::Stable { since: "0.1.0" },
    summary: "an mbarrier.init is not made visible before other threads, peer CTAs or the async proxy use the barrier",
    doc: include_str!("../../../../rules/mbarrier-init-not-fenced.md"),
};

impl Rule for MbarrierInitNotFenced {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let func = analysis.func;
        // Only memory and ordering instructions can match (`FunctionAnalysis::memory_insts`).
        for &init in analysis.memory_insts() {
            let inst = func.inst(init);
            if !matches!(inst.kind, InstKind::Mbarrier(MbarrierOp::Init)) {
                continue;
            }
            let Some(address) = &inst.address else { continue };
            let barrier = analysis.address_key(init, address);
            if matches!(barrier.root, AddrRoot::Unknown(_)) {
                continue;
            }
            let uses = Uses::collect(analysis, init, &barrier);
            if let Some(finding) = unfenced_use(analysis, init, &uses) {
                report(cx, init, &finding);
            } else if let Some(finding) = unpublished_use(analysis, init, &uses) {
                report(cx, init, &finding);
            }
        }
    }
}

/// Who uses a barrier besides the initialising thread's generic accesses.
struct Uses {
    /// The async proxy completes transactions or arrives on it (bulk copies, `tcgen05.commit`).
    asynchronous: Vec<InstId>,
    /// Threads of peer CTAs use it (`mapa` of it, remote arrives, `st.async`, multicast).
    peer: Vec<InstId>,
    /// Every other local use (arrive, wait, expect-tx, ...), asynchronous ones included.
    local: Vec<InstId>,
}

impl Uses {
    fn collect(analysis: &FunctionAnalysis<'_>, init_id: InstId, barrier: &AddrKey) -> Self {
        let func = analysis.func;
        let mut uses = Self { asynchronous: Vec::new(), peer: Vec::new(), local: Vec::new() };
        for id in func.ids() {
            if id == init_id {
                continue;
            }
            let inst = func.inst(id);
            if let Some(ValueOp::Mapa(src)) = &inst.value {
                if analysis.value_key(id, *src).same_object(barrier) {
                    uses.peer.push(id);
                }
                continue;
            }
            let Some(address) = inst.mbarrier() else { continue };
            let key = analysis.address_key(id, address);
            if !key.same_object(barrier) {
                continue;
            }
            let multicast = inst.kind.multicast();
            match inst.kind {
                InstKind::Mbarrier(MbarrierOp::Init) => {}
                InstKind::Async(AsyncOp::StAsync | AsyncOp::RedAsync) => uses.peer.push(id),
                _ if key.mapped || multicast => uses.peer.push(id),
                InstKind::Async(AsyncOp::Bulk { .. } | AsyncOp::BulkTensor { .. })
                | InstKind::Tcgen05(Tcgen05Op::Commit { .. }) => {
                    uses.asynchronous.push(id);
                    uses.local.push(id);
                }
                _ => uses.local.push(id),
            }
        }
        uses
    }
}

enum Kind {
    /// The async proxy uses the barrier and no init fence follows the init.
    AsyncProxy,
    /// Peer CTAs use the barrier and no init fence follows the init.
    Peer,
    /// Peer CTAs use the barrier and no cluster barrier follows the init.
    NoClusterBarrier,
    /// Other threads of the CTA use the barrier and no CTA barrier follows the init.
    NoCtaBarrier,
}

struct Finding {
    kind: Kind,
    other: InstId,
}

/// A fence that makes a prior `mbarrier.init` visible to the async proxy and to the cluster.
fn is_init_fence(inst: &Inst) -> bool {
    let InstKind::Fence(fence) = inst.kind else { return false };
    match fence.kind {
        FenceKind::MbarrierInit => true,
        FenceKind::ProxyAsync(space) => space != Some(Space::Global),
        FenceKind::Plain | FenceKind::ProxyAlias => {
            fence.sem.has_release() && fence.scope.is_some_and(|s| s.covers(Scope::Cluster))
        }
        _ => false,
    }
}

fn is_cluster_barrier(inst: &Inst) -> bool {
    matches!(inst.kind, InstKind::Barrier(Barrier::ClusterArrive { .. } | Barrier::ClusterWait))
}

fn is_thread_barrier(inst: &Inst) -> bool {
    matches!(
        inst.kind,
        InstKind::Barrier(
            Barrier::CtaSync { .. }
                | Barrier::CtaArrive
                | Barrier::CtaReduce
                | Barrier::ClusterArrive { .. }
                | Barrier::ClusterWait
        )
    )
}

/// An async-proxy or peer use (or the cluster barrier that publishes the barrier to peers)
/// reachable from the init with no init fence on the way.
fn unfenced_use(analysis: &FunctionAnalysis<'_>, init: InstId, uses: &Uses) -> Option<Finding> {
    if uses.asynchronous.is_empty() && uses.peer.is_empty() {
        return None;
    }
    let func = analysis.func;
    let has_peers = !uses.peer.is_empty();
    let is_target = |id: InstId| {
        uses.asynchronous.contains(&id)
            || uses.peer.contains(&id)
            || (has_peers
                && matches!(func.inst(id).kind, InstKind::Barrier(Barrier::ClusterArrive { .. })))
    };
    let found = analysis
        .reachable_avoiding(Point::After(init), is_target, |id| is_init_fence(func.inst(id)));
    if found.is_empty() {
        if !has_peers {
            return None;
        }
        let published = analysis.reachable_avoiding(
            Point::After(init),
            |id| is_cluster_barrier(func.inst(id)),
            |_| false,
        );
        return published.is_empty().then(|| Finding {
            kind: Kind::NoClusterBarrier,
            other: preferred_peer_use(analysis, uses, &uses.peer),
        });
    }
    if let Some(&other) = found.iter().find(|id| uses.asynchronous.contains(id)) {
        return Some(Finding { kind: Kind::AsyncProxy, other });
    }
    Some(Finding { kind: Kind::Peer, other: preferred_peer_use(analysis, uses, &found) })
}

/// The peer use to point at: one among `found` that accesses the barrier rather than only
/// computing its address with `mapa`, else any.
fn preferred_peer_use(analysis: &FunctionAnalysis<'_>, uses: &Uses, found: &[InstId]) -> InstId {
    let peer = |id: &&InstId| uses.peer.contains(id);
    let accesses = |id: &&InstId| !matches!(analysis.func.inst(**id).kind, InstKind::Move);
    found
        .iter()
        .filter(peer)
        .find(accesses)
        .or_else(|| uses.peer.iter().find(accesses))
        .or_else(|| found.iter().find(peer))
        .copied()
        .unwrap_or(uses.peer[0])
}

/// A use by another thread of the CTA that some thread can reach without passing a barrier that
/// the initialising thread passes after the init.
fn unpublished_use(analysis: &FunctionAnalysis<'_>, init: InstId, uses: &Uses) -> Option<Finding> {
    let func = analysis.func;
    let after_init = analysis.reachable_avoiding(
        Point::After(init),
        |id| is_thread_barrier(func.inst(id)),
        |_| false,
    );
    let other_thread: Vec<InstId> =
        uses.local.iter().copied().filter(|&u| !same_thread(analysis, init, u)).collect();
    if other_thread.is_empty() {
        return None;
    }
    let found = analysis.reachable_avoiding(
        Point::BlockStart(BlockId(0)),
        |id| other_thread.contains(&id),
        |id| after_init.contains(&id),
    );
    let &other = found.first()?;
    Some(Finding { kind: Kind::NoCtaBarrier, other })
}

/// Whether the use runs only in threads that also ran the init: the init is not predicated and
/// dominates the use, or both carry the same guard.
fn same_thread(analysis: &FunctionAnalysis<'_>, init: InstId, used: InstId) -> bool {
    let init_guard = analysis.func.inst(init).guard;
    match init_guard {
        Some(guard) => {
            analysis.func.inst(used).guard == Some(guard) && analysis.dominates(init, used)
        }
        None => analysis.dominates(init, used),
    }
}

fn report(cx: &mut FunctionCx<'_>, init: InstId, finding: &Finding) {
    let init_op = &cx.inst(init).opcode;
    let other_op = &cx.inst(finding.other).opcode;
    let (message, label, help) = match finding.kind {
        Kind::AsyncProxy => (
            format!(
                "`{init_op}` is not fenced before the async proxy uses the barrier through `{other_op}`"
            ),
            "the async proxy uses the barrier here".to_owned(),
            "insert `fence.mbarrier_init.release.cluster;` after the `mbarrier.init`".to_owned(),
        ),
        Kind::Peer => (
            format!("`{init_op}` is not fenced before peer CTAs use the barrier through `{other_op}`"),
            "a peer CTA uses the barrier here".to_owned(),
            "insert `fence.mbarrier_init.release.cluster;` after the `mbarrier.init`".to_owned(),
        ),
        Kind::NoClusterBarrier => (
            format!("`{init_op}` is used by peer CTAs through `{other_op}`, but no cluster barrier follows the initialisation"),
            "a peer CTA uses the barrier here".to_owned(),
            "insert `barrier.cluster.arrive.relaxed.aligned;` and `barrier.cluster.wait.aligned;` after the init fence".to_owned(),
        ),
        Kind::NoCtaBarrier => (
            format!("`{init_op}` is not followed by a CTA barrier before other threads use the barrier through `{other_op}`"),
            "another thread can use the barrier here before it is initialised".to_owned(),
            "insert `bar.sync 0;` between the `mbarrier.init` (and its fence) and the first use by other threads".to_owned(),
        ),
    };
    drop(
        cx.report(init, message)
            .primary_label("the barrier is initialised here")
            .secondary(finding.other, label)
            .help(help)
            .note("`mbarrier.init` is a generic-proxy write: other threads need a barrier after it, and the async proxy and peer CTAs also need `fence.mbarrier_init.release.cluster` (or `fence.proxy.async`) before that barrier"),
    );
}
