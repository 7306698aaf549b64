//! `tensormap-modified-in-flight`: a tensor map in global memory is rewritten while TMA
//! operations issued earlier may still be reading it, or a rewritten map reaches a TMA operation
//! without the tensormap-proxy release and acquire fences.

use std::collections::{BTreeMap, BTreeSet};

use fencelint_cfg::{AddrKey, AddrRoot, AddrSum, BlockId, FunctionAnalysis};
use fencelint_ir::{
    AddrBase, Address, AddressRole, AsyncOp, Fence, FenceKind, InstId, InstKind, Reg, Space,
    TensormapOp, ValueOp,
};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct TensormapModifiedInFlight;

static META: RuleMeta = RuleMeta {
    name: "tensormap-modified-in-flight",
    category: Category::Correctness,
    dialects: Dialects::PTX,
    min_sm: Some(90),
    status: Status::Stable { since: "0.1.0" },
    summary: "a tensor map in global memory is modified while TMA operations may read it, or used without the tensormap proxy fences",
    doc: include_str!("../../../../rules/tensormap-modified-in-flight.md"),
};

/// The size of a tensor map object in bytes.
const TENSORMAP_BYTES: i64 = 128;

/// Bulk groups counted after a TMA operation; more than this is "many".
const MAX_GROUPS: u8 = 16;

impl Rule for TensormapModifiedInFlight {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let func = analysis.func;
        // Only memory and ordering instructions can match (`FunctionAnalysis::memory_insts`).
        let uses: Vec<MapUse> = analysis
            .memory_insts()
            .iter()
            .filter_map(|&id| tma_map(analysis, id))
            .filter(|map| !is_untracked_map(analysis, &map.key))
            .collect();
        if uses.is_empty() {
            return;
        }
        let writes: Vec<MapWrite> = func
            .ids()
            .filter_map(|id| map_write(analysis, id))
            .filter(|w| uses.iter().any(|map| w.hits(map)))
            .collect();
        if writes.is_empty() {
            return;
        }
        check_in_flight(cx, &uses, &writes);
        check_proxy_fences(cx, &uses, &writes);
    }
}

/// A TMA operation and the tensor map it reads.
struct MapUse {
    id: InstId,
    key: AddrKey,
    sum: Option<AddrSum>,
}

/// A generic-proxy write into global memory that may land in a tensor map.
struct MapWrite {
    id: InstId,
    key: AddrKey,
    sum: Option<AddrSum>,
    /// `tensormap.cp_fenceproxy`: the write carries its own tensormap release.
    releases: bool,
}

impl MapWrite {
    /// Whether the write starts inside the 128-byte map of `map`.
    fn hits(&self, map: &MapUse) -> bool {
        let in_map = |start: i64, at: i64| (start..start + TENSORMAP_BYTES).contains(&at);
        let same_key = !matches!(map.key.root, AddrRoot::Unknown(_))
            && self.key.root == map.key.root
            && self.key.mapped == map.key.mapped
            && in_map(map.key.offset, self.key.offset);
        let same_sum = match (&self.sum, &map.sum) {
            (Some(write), Some(map)) => {
                !write.terms.is_empty()
                    && write.terms == map.terms
                    && in_map(map.offset, write.offset)
            }
            _ => false,
        };
        same_key || same_sum
    }

    /// Whether two writes go to the same map.
    fn same_map(&self, other: &Self) -> bool {
        let same_key =
            !matches!(self.key.root, AddrRoot::Unknown(_)) && self.key.root == other.key.root;
        let same_terms = matches!((&self.sum, &other.sum), (Some(a), Some(b)) if !a.terms.is_empty() && a.terms == b.terms);
        same_key || same_terms
    }
}

/// The tensor map operand of a `cp.async.bulk.tensor` / `cp.reduce.async.bulk.tensor`.
fn tma_map(analysis: &FunctionAnalysis<'_>, id: InstId) -> Option<MapUse> {
    let inst = analysis.func.inst(id);
    if !matches!(inst.kind, InstKind::Async(AsyncOp::BulkTensor { .. })) {
        return None;
    }
    let recorded = inst.extra_address(AddressRole::Tensormap)?;
    // The map operand is recorded by name; a register name is resolved to the register.
    let address = match &recorded.base {
        AddrBase::Symbol(name) => match analysis.func.regs.iter().position(|r| **r == **name) {
            Some(index) => {
                Address { base: AddrBase::Reg(Reg(index as u32)), offset: recorded.offset }
            }
            None => recorded.clone(),
        },
        _ => recorded.clone(),
    };
    Some(MapUse {
        id,
        key: analysis.address_key(id, &address),
        sum: analysis.address_sum(id, &address),
    })
}

/// Maps the rule does not follow: a map in the kernel's parameter space (`__grid_constant__`),
/// which the kernel cannot write, and a map whose address has no single known origin.
fn is_untracked_map(analysis: &FunctionAnalysis<'_>, map: &AddrKey) -> bool {
    match &map.root {
        AddrRoot::Symbol(name) => analysis.func.params.iter().any(|p| **p == **name),
        AddrRoot::Unknown(_) => true,
        _ => false,
    }
}

fn map_write(analysis: &FunctionAnalysis<'_>, id: InstId) -> Option<MapWrite> {
    let inst = analysis.func.inst(id);
    let releases = match &inst.kind {
        InstKind::Store(mem) if matches!(mem.space, Space::Global | Space::Generic) => false,
        InstKind::Tensormap(TensormapOp::Replace) => false,
        InstKind::Tensormap(TensormapOp::CpFenceproxy) => true,
        _ => return None,
    };
    let address = inst.address.as_ref()?;
    let key = analysis.address_key(id, address);
    let sum = analysis.address_sum(id, address);
    Some(MapWrite { id, key, sum, releases })
}

/// First form: a write into a map reachable after a TMA operation that uses it, with no bulk
/// commit and covering `cp.async.bulk.wait_group[.read]` on the way.
fn check_in_flight(cx: &mut FunctionCx<'_>, uses: &[MapUse], writes: &[MapWrite]) {
    let analysis = cx.analysis;
    let pinned = first_iteration_guards(analysis);
    let follow = |from: BlockId, to: BlockId| pinned.get(&from).is_none_or(|&only| only == to);
    let mut reported: BTreeSet<InstId> = BTreeSet::new();
    for map in uses {
        let tma = map.id;
        let mut hits: BTreeSet<InstId> = BTreeSet::new();
        let step = |id: InstId, groups: u8| match &analysis.func.inst(id).kind {
            InstKind::Async(AsyncOp::BulkCommit) => Some(groups.saturating_add(1).min(MAX_GROUPS)),
            InstKind::Async(AsyncOp::BulkWait { pending, .. }) => match pending {
                // `wait_group N` leaves the N newest groups pending: it covers the TMA
                // operation once more than N groups were committed after it.
                Some(n) if u32::from(groups) <= *n => Some(groups),
                _ => None,
            },
            _ => {
                if writes.iter().any(|w| w.id == id && w.hits(map)) {
                    hits.insert(id);
                }
                Some(groups)
            }
        };
        analysis.walk_forward_on(tma, 0u8, step, follow);
        let Some(&first) = hits.iter().next() else { continue };
        if !reported.insert(first) {
            continue;
        }
        report_in_flight(cx, first, tma, hits.len());
    }
}

fn report_in_flight(cx: &mut FunctionCx<'_>, write: InstId, tma: InstId, n_writes: usize) {
    let write_op = cx.inst(write).opcode.clone();
    let tma_op = cx.inst(tma).opcode.clone();
    let message = format!(
        "`{write_op}` modifies a tensor map that the earlier `{tma_op}` may still be reading"
    );
    let mut report = cx
        .report(write, message)
        .primary_label("the tensor map is rewritten here")
        .secondary(tma, "this TMA operation reads the tensor map asynchronously")
        .note(
            "the TMA unit reads the tensor map after the instruction is issued; only a bulk async-group wait says that read is done",
        )
        .help(
            "insert `cp.async.bulk.commit_group;` and `cp.async.bulk.wait_group.read 0;` before the modification",
        );
    if n_writes > 1 {
        report = report.note(format!(
            "{} more writes to the tensor map follow on the same path",
            n_writes - 1
        ));
    }
    drop(report);
}

/// Second form: a written map reaches a TMA operation without
/// `fence.proxy.tensormap::generic.release` after the write and
/// `fence.proxy.tensormap::generic.acquire [map], 128` before the use.
fn check_proxy_fences(cx: &mut FunctionCx<'_>, uses: &[MapUse], writes: &[MapWrite]) {
    let analysis = cx.analysis;
    let func = analysis.func;
    // The first unfenced write that reaches each use, and whether it was released.
    let mut findings: BTreeMap<InstId, (InstId, bool)> = BTreeMap::new();
    for write in writes {
        analysis.walk_forward(write.id, write.releases, |id, released| {
            let inst = func.inst(id);
            match &inst.kind {
                InstKind::Fence(Fence { kind: FenceKind::ProxyTensormapRelease, .. }) => {
                    return Some(true);
                }
                InstKind::Fence(Fence { kind: FenceKind::ProxyTensormapAcquire, .. }) => {
                    let acquires_this = inst.address.as_ref().is_none_or(|a| {
                        let key = analysis.address_key(id, a);
                        let sum = analysis.address_sum(id, a);
                        matches!(key.root, AddrRoot::Unknown(_))
                            || write.key.root == key.root
                            || matches!((&sum, &write.sum), (Some(a), Some(b)) if a.terms == b.terms)
                    });
                    return if acquires_this && released { None } else { Some(released) };
                }
                _ => {}
            }
            if writes.iter().any(|w| w.id == id && w.same_map(write)) {
                // A later write of the same map is checked from there.
                return None;
            }
            if let Some(map) = uses.iter().find(|u| u.id == id)
                && write.hits(map)
            {
                findings.entry(id).or_insert((write.id, released));
                return None;
            }
            Some(released)
        });
    }
    for (tma, (write, released)) in findings {
        report_unfenced(cx, tma, write, released);
    }
}

fn report_unfenced(cx: &mut FunctionCx<'_>, tma: InstId, write: InstId, released: bool) {
    let write_op = cx.inst(write).opcode.clone();
    let tma_op = cx.inst(tma).opcode.clone();
    let missing = if released {
        "with no `fence.proxy.tensormap::generic.acquire` of the map before the use"
    } else {
        "with no `fence.proxy.tensormap::generic.release` after the modification"
    };
    let message = format!("`{tma_op}` uses a tensor map that `{write_op}` modified, {missing}");
    let help = if released {
        "insert `fence.proxy.tensormap::generic.acquire.gpu [map], 128;` before this TMA operation"
    } else {
        "insert `fence.proxy.tensormap::generic.release.gpu;` after the modification and `fence.proxy.tensormap::generic.acquire.gpu [map], 128;` before this TMA operation"
    };
    let report = cx
        .report(tma, message)
        .primary_label("the TMA unit reads the map through the tensormap proxy")
        .secondary(write, "the tensor map is modified here through the generic proxy")
        .note("the TMA unit may use a stale copy of the tensor map unless the generic-proxy write is released to the tensormap proxy and acquired by the user")
        .help(help);
    drop(report);
}

/// Branches that skip a block holding a bulk-group commit or wait, on a condition computed only
/// from loop counters (`if (g > 0) { commit; wait_group.read 0; }`): the skipping side runs on
/// the first iteration, before any TMA operation of the loop is in flight, so walks that start at
/// a TMA operation follow only the side with the wait. Maps each such block to the successor to
/// follow.
fn first_iteration_guards(analysis: &FunctionAnalysis<'_>) -> BTreeMap<BlockId, BlockId> {
    let func = analysis.func;
    let cfg = &analysis.cfg;
    let has_wait = |block: BlockId| {
        cfg.block(block).ids().any(|id| {
            matches!(
                func.inst(id).kind,
                InstKind::Async(AsyncOp::BulkCommit | AsyncOp::BulkWait { .. })
            )
        })
    };
    let mut pinned = BTreeMap::new();
    for block in cfg.block_ids() {
        if cfg.block(block).insts.is_empty() {
            continue;
        }
        let branch = cfg.block(block).last();
        let Some(guard) = func.inst(branch).guard else { continue };
        if !func.inst(branch).is_branch() || !decided_by_counters(analysis, branch, guard.reg) {
            continue;
        }
        // A triangle: one side holds the wait and falls into the other side.
        let succs: Vec<BlockId> = cfg.successors(block).collect();
        let [a, b] = succs[..] else { continue };
        let falls_into = |x: BlockId, y: BlockId| cfg.successors(x).eq(std::iter::once(y));
        if has_wait(a) && falls_into(a, b) {
            pinned.insert(block, a);
        } else if has_wait(b) && falls_into(b, a) {
            pinned.insert(block, b);
        }
    }
    pinned
}

/// Whether the predicate `pred` read by `at` is a comparison of loop counters with constants:
/// registers whose every definition is a constant, a copy of a constant, or the register plus a
/// constant.
fn decided_by_counters(analysis: &FunctionAnalysis<'_>, at: InstId, pred: Reg) -> bool {
    let func = analysis.func;
    let reach = analysis.reaching_defs(at, pred);
    let [compare] = reach.defs.as_slice() else { return false };
    let compare = *compare;
    let inst = func.inst(compare);
    if reach.from_entry || !matches!(inst.kind, InstKind::Compare) {
        return false;
    }
    let guard = inst.guard.map(|g| g.reg);
    let operands: Vec<Reg> = inst.uses.iter().copied().filter(|&r| Some(r) != guard).collect();
    !operands.is_empty() && operands.iter().all(|&reg| is_counter(analysis, reg))
}

fn is_counter(analysis: &FunctionAnalysis<'_>, reg: Reg) -> bool {
    let func = analysis.func;
    let sites = analysis.def_sites(reg);
    !sites.is_empty()
        && sites.iter().all(|&def| match &func.inst(def).value {
            Some(ValueOp::Imm(_)) => true,
            Some(ValueOp::AddImm(src, _)) => *src == reg,
            Some(ValueOp::Copy(src)) => {
                let src_sites = analysis.def_sites(*src);
                !src_sites.is_empty()
                    && src_sites
                        .iter()
                        .all(|&d| matches!(func.inst(d).value, Some(ValueOp::Imm(_))))
            }
            _ => false,
        })
}
