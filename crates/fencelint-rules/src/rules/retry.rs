//! Waits written as a `continue`: a test inside a loop whose one side goes round again and
//! polls again. Both poll rules take the way past such a test as a wait's way out.

use fencelint_cfg::{BlockId, FunctionAnalysis, Loop};
use fencelint_ir::{AddrBase, Barrier, Inst, InstId, InstKind, Reg, Space, ValueOp};

/// A conditional branch inside a loop whose one side goes back to the loop's header through
/// blocks with no memory or ordering instruction and polls again (the retry), and whose other
/// side goes on.
pub(crate) struct RetriedTest {
    /// The block the branch ends.
    pub test: BlockId,
    /// The first block of the way on.
    pub go: BlockId,
    /// The reads the retry polls again.
    pub polls: Vec<InstId>,
}

/// Waits written as a `continue`: `while (step < steps) { if (ld_relaxed(flag) <= step)
/// continue; read(data[step]); ++step; }` compiles to one loop whose poll's branch jumps over the
/// read to the one latch. The loop never leaves through the poll, but the way past the retry is
/// the wait's way out: what the thread reads from there on, it reads after the poll succeeded.
/// A retry may pass at most 16 blocks.
///
/// `may_poll` says which reads a retry may poll again; only the branches that `candidate`
/// accepts are tried.
pub(crate) fn retried_tests(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    may_poll: impl Fn(&Inst) -> bool,
    candidate: impl Fn(InstId) -> bool,
) -> Vec<RetriedTest> {
    let func = analysis.func;
    let cfg = &analysis.cfg;
    // Every retry passes the header before any memory instruction: when the header's first one
    // is not a read that may be a poll, no test of the loop is retried.
    if let Some(first) = first_work(analysis, lp.header)
        && !may_poll(func.inst(first))
    {
        return Vec::new();
    }
    // The walk's lists, reused: most blocks of a large loop are tested.
    let mut seen: Vec<(BlockId, bool)> = Vec::new();
    let mut stack: Vec<(BlockId, bool)> = Vec::new();
    // The blocks met before the header, for the test of counted latches.
    let mut way_back: Vec<BlockId> = Vec::new();
    // Whether a test decides on a value shuffled from another lane, by test block.
    let mut shuffled: Vec<(BlockId, bool)> = Vec::new();
    // The reads that `from` polls again: it goes back to the header through blocks with no
    // memory or ordering instruction, not passing `test`, and past the header the first memory
    // instruction on every path ([`first_work`]) is a read that may be a poll (the caller asks
    // for the test's own). A path that meets any other memory instruction first goes on to
    // other work, not back to the wait. `None` when `from` does not retry.
    let mut retry = |test: BlockId, from: BlockId| -> Option<Vec<InstId>> {
        // The usual answer, without a walk: the side starts with memory work.
        if !analysis.block_memory_insts(from).is_empty() {
            return None;
        }
        seen.clear();
        stack.clear();
        way_back.clear();
        seen.push((from, false));
        stack.push((from, false));
        let mut polls = Vec::new();
        while let Some((block, past)) = stack.pop() {
            let past = past || block == lp.header;
            let first = if past {
                first_work(analysis, block)
            } else {
                analysis.block_memory_insts(block).first().copied()
            };
            if let Some(first) = first {
                let polled = may_poll(func.inst(first));
                if !past || !polled {
                    return None;
                }
                if !polls.contains(&first) {
                    polls.push(first);
                }
                continue;
            }
            if block == test {
                // Back at the test without a read of its own: a lane that leaves the polling to
                // another lane of its warp and tests what that lane read, shuffled to it.
                let other_lane = past && {
                    let known = shuffled.iter().find(|&&(b, _)| b == test).map(|&(_, yes)| yes);
                    known.unwrap_or_else(|| {
                        let yes = tests_shuffled(analysis, test);
                        shuffled.push((test, yes));
                        yes
                    })
                };
                if !other_lane {
                    return None;
                }
                continue;
            }
            if !past {
                way_back.push(block);
            }
            for next in cfg.successors(block) {
                if !lp.contains(next) || seen.contains(&(next, past)) {
                    continue;
                }
                if seen.len() == 16 {
                    return None;
                }
                seen.push((next, past));
                stack.push((next, past));
            }
        }
        // A way back to the header through a counted loop's latch (`j += stride; if (j < n)
        // goto head;`) starts new work, not the same test tried again. Asked last, of a way
        // that polls again (the test costs more than the walk).
        if polls.is_empty() || way_back.iter().any(|&block| counts_steps(analysis, lp, block)) {
            return None;
        }
        Some(polls)
    };
    let mut found = Vec::new();
    for &block in &lp.blocks {
        let branch = cfg.block(block).last();
        if func.inst(branch).guard.is_none() || !candidate(branch) {
            continue;
        }
        let mut succs = cfg.successors(block);
        let (Some(a), Some(b), None) = (succs.next(), succs.next(), succs.next()) else {
            continue;
        };
        if a == lp.header || b == lp.header || !lp.contains(a) || !lp.contains(b) || a == b {
            continue;
        }
        let (go, polls) = match (retry(block, a), retry(block, b)) {
            (Some(polls), None) => (b, polls),
            (None, Some(polls)) => (a, polls),
            _ => continue,
        };
        found.push(RetriedTest { test: block, go, polls });
    }
    found
}

/// The first memory or ordering instruction of `block` that a retry counts past the header:
/// reads of the kernel's parameters and constant banks (`ULDC`, `LDC`, `ld.param`) and of the
/// thread's own local memory before the poll (ptxas loads the flag's address again in each
/// round), and warp syncs (`WARPSYNC.COLLECTIVE` before a shuffle in a divergent warp's slow
/// path), are not work that leaves a wait. On the way back to the header every memory
/// instruction still ends the retry (it costs little: most ways back start with one).
fn first_work(analysis: &FunctionAnalysis<'_>, block: BlockId) -> Option<InstId> {
    let func = analysis.func;
    analysis.block_memory_insts(block).iter().copied().find(|&id| match &func.inst(id).kind {
        InstKind::Load(mem) => !matches!(mem.space, Space::Param | Space::Const | Space::Local),
        InstKind::Barrier(Barrier::WarpSync) => false,
        _ => true,
    })
}

/// Whether the branch that ends `block` tests a value that a shuffle brought from another lane
/// (`SHFL.IDX`, `shfl.sync`): through the comparison that sets its predicate and at most
/// four more copies or computations. A lock that one lane tries for its warp (`got = lane == 0
/// && atomicCAS(lock, 0, 1) == 0; got = __shfl_sync(~0u, got, 0); if (got != 1) continue;`)
/// polls in that lane only; the other lanes wait for its answer.
fn tests_shuffled(analysis: &FunctionAnalysis<'_>, block: BlockId) -> bool {
    let func = analysis.func;
    let branch = analysis.cfg.block(block).last();
    let Some(guard) = func.inst(branch).guard else { return false };
    let mut work = vec![(branch, guard.reg, 0)];
    let mut seen: Vec<InstId> = Vec::new();
    while let Some((at, reg, depth)) = work.pop() {
        for def in analysis.reaching_defs(at, reg).defs {
            if seen.contains(&def) {
                continue;
            }
            seen.push(def);
            let inst = func.inst(def);
            if matches!(inst.value, Some(ValueOp::Shuffle(_))) {
                return true;
            }
            if depth < 4 {
                work.extend(inst.uses.iter().map(|&used| (def, used, depth + 1)));
            }
        }
    }
    false
}

/// Whether `block` ends with a test that may leave `lp` and that compares a register the block
/// itself wrote before it, and writes a register that leads to an address the loop accesses:
/// the latch of a counted loop (`add.s64 %rd52, %rd52, %rd5; setp.lt.s64 %p7, %rd52, %rd27;
/// @%p7 bra $L_head`, with `%rd52` indexing the next step's reads; or a trip count beside the
/// step, `add.s64 %rd47, %rd47, %rd5; add.s64 %rd46, %rd46, 1; setp.ne.b64 %p6, %rd46, 0`),
/// which moves on to the next step.
/// A wait's way back through the loop's condition tests what it tested before (`setp.lt.s32
/// %p3, %r12, %r6` with neither register written on the way), and a spin count that ends the
/// wait (`add.s32 %r959, %r1744, 1; setp.lt.u32 %p359, %r959, 10000`) indexes no memory.
fn counts_steps(analysis: &FunctionAnalysis<'_>, lp: &Loop, block: BlockId) -> bool {
    let func = analysis.func;
    let cfg = &analysis.cfg;
    if !cfg.successors(block).any(|next| !lp.contains(next)) {
        return false;
    }
    let ids: Vec<InstId> = cfg.block(block).ids().collect();
    let Some((&branch, before)) = ids.split_last() else { return false };
    let Some(guard) = func.inst(branch).guard else { return false };
    let Some(at) = before.iter().rposition(|&id| func.inst(id).defs.contains(&guard.reg)) else {
        return false;
    };
    let counted = func
        .inst(before[at])
        .uses
        .iter()
        .any(|used| before[..at].iter().any(|&id| func.inst(id).defs.contains(used)));
    counted
        && before
            .iter()
            .flat_map(|&id| &func.inst(id).defs)
            .any(|&def| indexes_memory_in(analysis, lp, def))
}

/// Whether a value of `reg` reaches the address of a memory access of `lp`, directly or through
/// a chain of at most seven other instructions of the loop (by register name: a heuristic).
/// Each register is followed once, and at most [`MAX_INDEX_SITES`] reads of them are looked at.
fn indexes_memory_in(analysis: &FunctionAnalysis<'_>, lp: &Loop, reg: Reg) -> bool {
    let func = analysis.func;
    let mut seen = vec![reg];
    let mut regs = vec![reg];
    let mut sites = 0;
    for _ in 0..8 {
        let mut next = Vec::new();
        for &reg in &regs {
            for &id in analysis.use_sites(reg) {
                sites += 1;
                if sites > MAX_INDEX_SITES {
                    return false;
                }
                if !lp.contains_inst(analysis, id) {
                    continue;
                }
                let inst = func.inst(id);
                if inst.mem().is_some() {
                    let in_address = inst.address.as_ref().is_some_and(|a| match &a.base {
                        AddrBase::Reg(base) => *base == reg,
                        AddrBase::Complex(bases) => bases.contains(&reg),
                        AddrBase::Symbol(_) | AddrBase::Absolute => false,
                    });
                    if in_address {
                        return true;
                    }
                } else {
                    for &def in &inst.defs {
                        if !seen.contains(&def) {
                            seen.push(def);
                            next.push(def);
                        }
                    }
                }
            }
        }
        if next.is_empty() {
            return false;
        }
        regs = next;
    }
    false
}

/// How many register reads [`indexes_memory_in`] looks at before it gives up.
const MAX_INDEX_SITES: usize = 256;
