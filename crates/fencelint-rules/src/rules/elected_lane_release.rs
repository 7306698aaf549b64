//! `elected-lane-release`: one elected lane's `mbarrier.arrive` is meant to publish writes that the
//! other lanes of its warp made before it, with no warp barrier ordering those writes before it.

use std::collections::{BTreeSet, VecDeque};

use fencelint_cfg::{AddrRoot, BlockId, FunctionAnalysis, Point};
use fencelint_ir::{
    AluOp, Barrier, FenceKind, InstId, InstKind, MbarrierOp, Reg, Relation, Scope, Space, ValueOp,
};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct ElectedLaneRelease;

static META: RuleMeta = RuleMeta {
    name: "elected-lane-release",
    category: Category::Suspicious,
    dialects: Dialects::PTX,
    min_sm: Some(80),
    status: Status::Stable { since: "0.1.0" },
    summary: "an elected lane's mbarrier.arrive does not release the other lanes' writes",
    doc: include_str!("../../../../rules/elected-lane-release.md"),
};

impl Rule for ElectedLaneRelease {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let func = analysis.func;
        // Only memory and ordering instructions can match (`FunctionAnalysis::memory_insts`).
        for &arrive in analysis.memory_insts() {
            if !matches!(func.inst(arrive).kind, InstKind::Mbarrier(MbarrierOp::Arrive { .. })) {
                continue;
            }
            let Some(election) = election_of(analysis, arrive) else { continue };
            let published = objects_read_after_waits(analysis, arrive);
            if published.is_empty() {
                continue;
            }
            let stores: Vec<InstId> = other_lanes_stores(analysis, arrive, &election)
                .into_iter()
                .filter(|&store| {
                    func.inst(store).address.as_ref().is_some_and(|a| {
                        analysis.address_object(store, a).is_some_and(|o| published.contains(&o))
                    })
                })
                .collect();
            let Some(&store) = stores.last() else { continue };
            report(cx, arrive, &election, store, stores.len());
        }
    }
}

/// The variables and parameters that threads read after waiting on the arrive's barrier: what
/// the arrive can be meant to publish.
fn objects_read_after_waits(analysis: &FunctionAnalysis<'_>, arrive: InstId) -> Vec<AddrRoot> {
    let func = analysis.func;
    let Some(address) = &func.inst(arrive).address else { return Vec::new() };
    let barrier = analysis.address_key(arrive, address);
    let is_load = |id: InstId| {
        matches!(&func.inst(id).kind, InstKind::Load(mem)
            if matches!(mem.space, Space::Global | Space::SharedCta | Space::SharedCluster | Space::Generic))
    };
    let mut objects = Vec::new();
    for &wait in analysis.memory_insts() {
        let inst = func.inst(wait);
        if !matches!(inst.kind, InstKind::Mbarrier(MbarrierOp::Wait { .. })) {
            continue;
        }
        let same = inst
            .address
            .as_ref()
            .is_some_and(|a| analysis.address_key(wait, a).same_object(&barrier));
        if !same {
            continue;
        }
        for load in analysis.reachable_avoiding(Point::After(wait), is_load, |_| false) {
            let Some(address) = &func.inst(load).address else { continue };
            if let Some(object) = analysis.address_object(load, address)
                && !objects.contains(&object)
            {
                objects.push(object);
            }
        }
    }
    objects
}

/// How the arrive is restricted to one lane.
struct Election {
    /// The `elect.sync`, or the comparison of `%laneid` / `%tid` with a constant.
    source: InstId,
    /// The arrive's own guard predicate, when the arrive is predicated.
    guard: Option<fencelint_ir::Guard>,
    /// The first block of the branch region that only the elected lane runs.
    region: Option<BlockId>,
}

fn election_of(analysis: &FunctionAnalysis<'_>, arrive: InstId) -> Option<Election> {
    let func = analysis.func;
    if let Some(guard) = func.inst(arrive).guard
        && let Some(source) = single_lane_source(analysis, arrive, guard.reg)
    {
        return Some(Election { source, guard: Some(guard), region: None });
    }
    // Walk up the dominator tree: the nearest conditional branch that leads only into the
    // arrive's region and whose predicate picks one lane.
    let cfg = &analysis.cfg;
    let doms = analysis.dominators();
    let target = cfg.block_of(arrive);
    let mut node = target;
    let mut steps = 0;
    while let Some(block) = doms.immediate_dominator(node) {
        if block == node || steps > 64 {
            break;
        }
        steps += 1;
        node = block;
        let last = cfg.block(block).last();
        let Some(guard) = func.inst(last).guard else { continue };
        if !func.inst(last).is_branch() {
            continue;
        }
        let Some(region) = cfg.successors(block).find(|&s| {
            cfg.predecessors(s).all(|p| p == block) && analysis.block_dominates(s, target)
        }) else {
            continue;
        };
        if let Some(source) = single_lane_source(analysis, last, guard.reg) {
            return Some(Election { source, guard: None, region: Some(region) });
        }
    }
    None
}

/// Follows the definitions of a predicate back to an `elect.sync`, or to `%laneid` / `%tid.*`
/// compared for equality with a constant (not divided down to a warp index on the way).
fn single_lane_source(analysis: &FunctionAnalysis<'_>, at: InstId, reg: Reg) -> Option<InstId> {
    let func = analysis.func;
    // (use site, register, the equality comparison seen on the way, divided by a warp size)
    let mut queue = VecDeque::from([(at, reg, None::<InstId>, false)]);
    let mut visited = BTreeSet::new();
    while let Some((at, reg, compare, divided)) = queue.pop_front() {
        if !visited.insert((at, reg)) || visited.len() > 256 {
            continue;
        }
        let reach = analysis.reaching_defs(at, reg);
        if reach.defs.is_empty() {
            let name = func.reg_name(reg);
            let lane = name.starts_with("%laneid") || (name.starts_with("%tid") && !divided);
            if lane && compare.is_some() {
                return compare;
            }
            if let Some(elect) = undeclared_elect(analysis, at) {
                return Some(elect);
            }
            continue;
        }
        for def in reach.defs {
            let inst = func.inst(def);
            match inst.kind {
                InstKind::Elect => return Some(def),
                InstKind::Compare => match inst.value {
                    Some(ValueOp::Compare(c, src, _)) if is_equality(c.relation) => {
                        queue.push_back((def, src, Some(def), divided));
                    }
                    // A comparison of two registers: only an elect result can make it
                    // single-lane.
                    Some(ValueOp::CompareRegs(c, a, b)) if is_equality(c.relation) => {
                        queue.push_back((def, a, None, divided));
                        queue.push_back((def, b, None, divided));
                    }
                    _ => {}
                },
                InstKind::Move => {
                    // A thread index shifted right is a warp index (`%tid.x >> 5`).
                    let divides = inst.alu == Some(AluOp::ShiftRight);
                    for &r in &inst.uses {
                        queue.push_back((def, r, compare, divided || divides));
                    }
                }
                _ => {}
            }
        }
    }
    None
}

fn is_equality(relation: Relation) -> bool {
    matches!(relation, Relation::Eq | Relation::Ne)
}

/// `elect.sync _|p, mask` whose predicate the front end did not record as a definition: an
/// `elect.sync` without recorded results a few instructions before `at` in the same block.
fn undeclared_elect(analysis: &FunctionAnalysis<'_>, at: InstId) -> Option<InstId> {
    let block = analysis.cfg.block(analysis.cfg.block_of(at));
    block.ids().rev().filter(|&id| id < at).take(4).find(|&id| {
        let inst = analysis.func.inst(id);
        matches!(inst.kind, InstKind::Elect) && inst.defs.is_empty()
    })
}

/// Whether an instruction executed by every lane orders their earlier writes before the elected
/// lane's later arrive.
fn orders_lanes(analysis: &FunctionAnalysis<'_>, id: InstId) -> bool {
    match &analysis.func.inst(id).kind {
        InstKind::Barrier(
            Barrier::WarpSync | Barrier::CtaSync { .. } | Barrier::CtaReduce | Barrier::ClusterWait,
        ) => true,
        InstKind::Fence(fence) => {
            matches!(fence.kind, FenceKind::Plain | FenceKind::ProxyAlias)
                && fence.scope.is_some_and(|s| s.covers(Scope::Cta))
        }
        _ => false,
    }
}

fn in_elected_region(analysis: &FunctionAnalysis<'_>, election: &Election, id: InstId) -> bool {
    if let Some(region) = election.region {
        return analysis.block_dominates(region, analysis.cfg.block_of(id));
    }
    election.guard.is_some() && analysis.func.inst(id).guard == election.guard
}

/// Stores to shared or global memory that the other lanes execute before the arrive in the same
/// loop iteration, with no warp barrier (or CTA barrier, or fence run by every lane) on the way.
/// Text order.
fn other_lanes_stores(
    analysis: &FunctionAnalysis<'_>,
    arrive: InstId,
    election: &Election,
) -> Vec<InstId> {
    let func = analysis.func;
    let cfg = &analysis.cfg;
    let is_store = |id: InstId| {
        matches!(&func.inst(id).kind, InstKind::Store(mem)
            if matches!(mem.space, Space::Global | Space::SharedCta | Space::SharedCluster | Space::Generic))
    };
    let mut found = BTreeSet::new();
    let mut seen = vec![false; cfg.blocks.len()];
    let mut work = vec![(cfg.block_of(arrive), Some(arrive))];
    let mut steps = 0usize;
    while let Some((block, before)) = work.pop() {
        let mut blocked = false;
        for id in cfg.block(block).ids().rev() {
            if before.is_some_and(|b| id >= b) {
                continue;
            }
            steps += 1;
            let elected = in_elected_region(analysis, election, id);
            if !elected && orders_lanes(analysis, id) {
                blocked = true;
                break;
            }
            if !elected && is_store(id) {
                found.insert(id);
            }
        }
        if blocked || steps > analysis.budget.walk_steps {
            continue;
        }
        for pred in cfg.predecessors(block) {
            // Stay in the arrive's own iteration: a store reached only through a back edge was
            // made for an earlier arrival.
            if analysis.block_dominates(block, pred) {
                continue;
            }
            if !std::mem::replace(&mut seen[pred.index()], true) {
                work.push((pred, None));
            }
        }
    }
    found.into_iter().collect()
}

fn report(
    cx: &mut FunctionCx<'_>,
    arrive: InstId,
    election: &Election,
    store: InstId,
    n_stores: usize,
) {
    let arrive_op = &cx.inst(arrive).opcode;
    let store_op = &cx.inst(store).opcode;
    let source = cx.inst(election.source);
    let elected_by =
        if matches!(source.kind, InstKind::Elect) { "the `elect.sync` lane" } else { "one lane" };
    let message = format!(
        "`{arrive_op}` by {elected_by} releases only that lane's writes, not the other lanes' `{store_op}` before it"
    );
    let mut report = cx
        .report(arrive, message)
        .primary_label("only the elected lane arrives")
        .secondary(store, "the other lanes of the warp write here")
        .secondary(election.source, "one lane is chosen here")
        .help("insert `bar.warp.sync 0xffffffff;` between the stores and the elected arrive")
        .note("`elect.sync` and a lane comparison order no memory: a release orders only the releasing thread's prior writes and what it has observed");
    if n_stores > 1 {
        report = report.note(format!(
            "{} more stores of the other lanes are not ordered before the arrive",
            n_stores - 1
        ));
    }
    drop(report);
}
