//! `costly-fence`: fences that cost more than they buy. `fence.proxy.alias` in a kernel that
//! shows no access through a second virtual address, and two fences back to back where one
//! already does everything the other does.

use std::collections::BTreeSet;

use fencelint_cfg::{AddrRoot, BlockId, FunctionAnalysis, Point};
use fencelint_ir::{Dialect, Fence, FenceKind, Inst, InstId, InstKind, Scope, Sem, Space};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct CostlyFence;

static META: RuleMeta = RuleMeta {
    name: "costly-fence",
    category: Category::Perf,
    dialects: Dialects::BOTH,
    min_sm: Some(70),
    status: Status::Stable { since: "0.1.0" },
    summary: "fence.proxy.alias without aliasing, or a fence subsumed by the fence next to it",
    doc: include_str!("../../../../rules/costly-fence.md"),
};

impl Rule for CostlyFence {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let is_sass = cx.module.dialect == Some(Dialect::Sass);
        let mut alias_fences = Vec::new();
        // Only memory and ordering instructions can match (`FunctionAnalysis::memory_insts`).
        for &id in analysis.memory_insts() {
            let alias = if is_sass {
                sass_alias_fence(analysis, id)
            } else {
                ptx_alias_fence(analysis, id)
            };
            if let Some(alias) = alias {
                alias_fences.push(alias);
            }
        }
        for alias in alias_fences {
            if !shows_aliasing(analysis, alias.fence) {
                report_alias(cx, &alias);
            }
        }
        for (weak, strong) in subsumed_pairs(analysis, is_sass) {
            report_subsumed(cx, weak, strong);
        }
    }
}

/// A `fence.proxy.alias`, or in SASS its lowering.
struct AliasFence {
    fence: InstId,
    /// The SASS `CCTL.IVALL` that ends the sequence.
    invalidate: Option<InstId>,
}

fn ptx_alias_fence(analysis: &FunctionAnalysis<'_>, id: InstId) -> Option<AliasFence> {
    // `fence.proxy.alias.release` / `.acquire` lower to one `MEMBAR.ALL` or one `CCTL.IVALL`;
    // only the full, sequentially consistent form is the heavy one.
    let fence = analysis.func.inst(id).kind.fence()?;
    (fence.kind == FenceKind::ProxyAlias && fence.sem == Sem::Sc)
        .then_some(AliasFence { fence: id, invalidate: None })
}

/// ptxas lowers `fence.proxy.alias` to `MEMBAR.SC.GPU` and `MEMBAR.SC.SYS` on two branches
/// chosen at run time, separated by one branch and followed directly by `CCTL.IVALL`, with no
/// `ERRBAR` (which every `fence.sc` has).
fn sass_alias_fence(analysis: &FunctionAnalysis<'_>, id: InstId) -> Option<AliasFence> {
    let func = analysis.func;
    let at = |offset: u32| {
        (id.0 + offset < func.insts.len() as u32).then(|| func.inst(InstId(id.0 + offset)))
    };
    let first = sc_scope(at(0)?)?;
    if !at(1)?.is_branch() {
        return None;
    }
    let second = sc_scope(at(2)?)?;
    let pair_ok = matches!((first, second), (Scope::Gpu, Scope::Sys) | (Scope::Sys, Scope::Gpu));
    let ends = matches!(at(3)?.kind.fence(), Some(Fence { kind: FenceKind::L1Invalidate, .. }));
    (pair_ok && ends).then_some(AliasFence { fence: id, invalidate: Some(InstId(id.0 + 3)) })
}

fn sc_scope(inst: &Inst) -> Option<Scope> {
    match inst.kind.fence()? {
        Fence { kind: FenceKind::Plain, sem: Sem::Sc, scope } => *scope,
        _ => None,
    }
}

/// Whether the function accesses memory in a way that an alias fence could be for: a multimem
/// access (the multicast address aliases unicast memory), or a read after the fence through an
/// address that no write before the fence used (it may read, through another virtual address,
/// what was written), including any read whose address is unknown.
fn shows_aliasing(analysis: &FunctionAnalysis<'_>, fence: InstId) -> bool {
    let func = analysis.func;
    if func.insts.iter().any(|i| matches!(i.kind, InstKind::Multimem { .. })) {
        return true;
    }
    let before = blocks_reaching(analysis, analysis.cfg.block_of(fence));
    let writes_before: Vec<InstId> = func
        .ids()
        .filter(|&id| {
            let block = analysis.cfg.block_of(id);
            let precedes =
                before.contains(&block) || (block == analysis.cfg.block_of(fence) && id < fence);
            precedes && is_global_access(func.inst(id)) && func.inst(id).kind.writes_memory()
        })
        .collect();
    if writes_before.is_empty() {
        return false;
    }
    let reads_after = analysis.reachable_avoiding(
        Point::After(fence),
        |id| is_global_access(func.inst(id)) && func.inst(id).kind.reads_memory(),
        |_| false,
    );
    reads_after.iter().any(|&read| {
        let Some((read_key, read_object)) = location(analysis, read) else { return true };
        !writes_before.iter().any(|&write| {
            let Some((write_key, write_object)) = location(analysis, write) else { return false };
            let same_key = !matches!(read_key, AddrRoot::Unknown(_)) && read_key == write_key;
            same_key || (read_object.is_some() && read_object == write_object)
        })
    })
}

/// The address root and object of an access.
fn location(analysis: &FunctionAnalysis<'_>, id: InstId) -> Option<(AddrRoot, Option<AddrRoot>)> {
    let address = analysis.func.inst(id).address.as_ref()?;
    Some((analysis.address_key(id, address).root, analysis.address_object(id, address)))
}

fn is_global_access(inst: &Inst) -> bool {
    inst.mem().is_some_and(|m| matches!(m.space, Space::Global | Space::Generic | Space::Unknown))
}

/// Blocks from which `target` can be reached (including `target` when it is in a loop).
fn blocks_reaching(analysis: &FunctionAnalysis<'_>, target: BlockId) -> BTreeSet<BlockId> {
    let mut seen = BTreeSet::new();
    let mut work: Vec<BlockId> = analysis.cfg.predecessors(target).collect();
    while let Some(block) = work.pop() {
        if seen.insert(block) {
            work.extend(analysis.cfg.predecessors(block));
        }
    }
    seen
}

/// Pairs `(redundant, stronger)` of plain fences with nothing between them but register moves,
/// comparisons and (in SASS) the `ERRBAR` / `CCTL.IVALL` of the fence sequences.
fn subsumed_pairs(analysis: &FunctionAnalysis<'_>, is_sass: bool) -> Vec<(InstId, InstId)> {
    let func = analysis.func;
    let mut pairs = Vec::new();
    for block in analysis.cfg.block_ids() {
        let mut previous: Option<InstId> = None;
        for id in analysis.cfg.block(block).ids() {
            let inst = func.inst(id);
            match plain_fence(inst) {
                Some(_) => {
                    if let Some(prev) = previous
                        && func.inst(prev).guard == inst.guard
                        && let Some(pair) = subsumption(analysis, prev, id, is_sass)
                    {
                        pairs.push(pair);
                    }
                    previous = Some(id);
                }
                None if is_neutral(inst) => {}
                None => previous = None,
            }
        }
    }
    pairs
}

fn plain_fence(inst: &Inst) -> Option<&Fence> {
    inst.kind.fence().filter(|f| f.kind == FenceKind::Plain && f.scope.is_some())
}

/// Instructions that neither access memory nor order anything.
fn is_neutral(inst: &Inst) -> bool {
    matches!(
        inst.kind,
        InstKind::Move
            | InstKind::Compare
            | InstKind::Fence(Fence {
                kind: FenceKind::ErrorBarrier | FenceKind::L1Invalidate,
                ..
            })
    )
}

fn subsumption(
    analysis: &FunctionAnalysis<'_>,
    first: InstId,
    second: InstId,
    is_sass: bool,
) -> Option<(InstId, InstId)> {
    let func = analysis.func;
    let (a, b) = (plain_fence(func.inst(first))?, plain_fence(func.inst(second))?);
    if is_sass && !standalone_sass_pair(analysis, first, second) {
        return None;
    }
    if a == b {
        // The same fence twice: the second one repeats the first.
        Some((second, first))
    } else if covers(*b, *a) {
        Some((first, second))
    } else if covers(*a, *b) {
        Some((second, first))
    } else {
        None
    }
}

/// Whether fence `strong` orders everything that fence `weak` orders.
fn covers(strong: Fence, weak: Fence) -> bool {
    let sem_covers = match strong.sem {
        Sem::Sc => true,
        Sem::AcqRel => matches!(weak.sem, Sem::AcqRel | Sem::Acquire | Sem::Release),
        sem => weak.sem == sem,
    };
    let scope_covers = match (strong.scope, weak.scope) {
        (Some(s), Some(w)) => s.covers(w),
        _ => false,
    };
    sem_covers && scope_covers
}

/// In SASS, two adjacent `MEMBAR`s are one PTX fence each only when ptxas did not emit them
/// together: `MEMBAR.ALL.CTA` directly before a wider `MEMBAR` (`.ALL` or `.SC`) is ptxas's own
/// prefix of a release or sequentially consistent fence after mbarrier operations, a `MEMBAR` followed by `FENCE.VIEW.ASYNC` belongs to a
/// proxy fence, and a `MEMBAR.ALL` without `CCTL.IVALL` that leads into a memory access is that
/// access's release. When `nvdisasm -gp` gives PTX lines, the two must come from different ones.
fn standalone_sass_pair(analysis: &FunctionAnalysis<'_>, first: InstId, second: InstId) -> bool {
    let func = analysis.func;
    let (a, b) = (func.inst(first), func.inst(second));
    if let (Some(la), Some(lb)) = (a.ptx_line, b.ptx_line)
        && la == lb
    {
        return false;
    }
    let a_fence = plain_fence(a);
    let b_fence = plain_fence(b);
    let cta_prefix = second.0 == first.0 + 1
        && a_fence.is_some_and(|f| f.sem == Sem::AcqRel && f.scope == Some(Scope::Cta))
        && b_fence.is_some_and(|f| f.scope.is_some_and(|s| s > Scope::Cta));
    if cta_prefix {
        return false;
    }
    // What follows the second MEMBAR's sequence.
    let mut has_invalidate = false;
    let mut next = None;
    for id in (second.0 + 1..func.insts.len() as u32).map(InstId) {
        let inst = func.inst(id);
        match inst.kind.fence().map(|f| f.kind) {
            Some(FenceKind::ErrorBarrier) => {}
            Some(FenceKind::L1Invalidate) => has_invalidate = true,
            _ => {
                next = Some(inst);
                break;
            }
        }
    }
    let Some(next) = next else { return true };
    if matches!(next.kind.fence().map(|f| f.kind), Some(FenceKind::ProxyAsync(_))) {
        return false;
    }
    let is_release_access = next.kind.writes_memory()
        || matches!(next.kind, InstKind::Mbarrier(_) | InstKind::Barrier(_) | InstKind::Async(_));
    b_fence.is_some_and(|f| f.sem == Sem::Sc) || has_invalidate || !is_release_access
}

fn report_alias(cx: &mut FunctionCx<'_>, alias: &AliasFence) {
    let opcode = cx.inst(alias.fence).opcode.clone();
    let (message, label) = match alias.invalidate {
        None => (
            format!(
                "`{opcode}` is the most expensive fence, and this kernel shows no access through a second virtual address for it to order"
            ),
            "lowers to `MEMBAR.SC` at gpu or sys scope plus an L1 invalidate",
        ),
        Some(_) => (
            format!(
                "`{opcode}` starts the lowering of `fence.proxy.alias` (`MEMBAR.SC.GPU` or `MEMBAR.SC.SYS` chosen at run time, then `CCTL.IVALL`), and this kernel shows no access through a second virtual address for it to order"
            ),
            "the lowering of `fence.proxy.alias` starts here",
        ),
    };
    let mut report = cx
        .report(alias.fence, message)
        .primary_label(label)
        .note("an alias fence is needed only when one physical location is accessed through two virtual addresses; every read after it uses an address that a write before it also used")
        .help("remove the `fence.proxy.alias`, or use `fence.acq_rel` at the scope the accesses need");
    if let Some(invalidate) = alias.invalidate {
        report = report.secondary(invalidate, "the L1 invalidate of the alias fence");
    }
    drop(report);
}

fn report_subsumed(cx: &mut FunctionCx<'_>, weak: InstId, strong: InstId) {
    let weak_op = cx.inst(weak).opcode.clone();
    let strong_op = cx.inst(strong).opcode.clone();
    let same = cx.inst(weak).kind == cx.inst(strong).kind;
    let place = if weak < strong { "right after it" } else { "right before it" };
    let message = if same {
        format!("`{weak_op}` repeats the `{strong_op}` {place}, with no memory access in between")
    } else {
        format!(
            "`{weak_op}` is subsumed by the `{strong_op}` {place}, with no memory access in between"
        )
    };
    let (help, other_label) = if same {
        ("remove the repeated fence", "the same fence")
    } else {
        ("remove the weaker fence", "this fence is at least as strong and as wide")
    };
    let report = cx
        .report(weak, message)
        .primary_label("this fence orders nothing that the other one does not")
        .secondary(strong, other_label)
        .note("each fence above `.cta` scope drains outstanding memory operations (`MEMBAR`) and may invalidate L1 (`CCTL.IVALL`); the second one adds only its cost")
        .help(help);
    drop(report);
}
