//! `acquire-in-poll-loop`: an acquire load or acquire fence runs on every iteration of a spin
//! loop, paying an L1 invalidate per poll where a relaxed poll and one fence after the loop
//! order the same.

use std::collections::BTreeSet;

use fencelint_cfg::{FunctionAnalysis, Loop, Point};
use fencelint_ir::{Dialect, Fence, FenceKind, Function, Inst, InstId, InstKind, MemAccess, Scope};

use super::retry::retried_tests;
use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct AcquireInPollLoop;

static META: RuleMeta = RuleMeta {
    name: "acquire-in-poll-loop",
    category: Category::Perf,
    dialects: Dialects::BOTH,
    min_sm: Some(70),
    status: Status::Stable { since: "0.1.0" },
    summary: "an acquire inside a spin loop invalidates L1 on every poll; a relaxed poll and one fence after the loop order the same",
    doc: include_str!("../../../../rules/acquire-in-poll-loop.md"),
};

impl Rule for AcquireInPollLoop {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let mut reported: BTreeSet<InstId> = BTreeSet::new();
        for lp in analysis.loops() {
            let Some(only_loads) = may_report(analysis, lp) else { continue };
            // A loop that also accesses other memory is no spin loop: its slices are not asked.
            let spin = if only_loads { spin_loop(analysis, lp) } else { None };
            let spins = match spin {
                Some(spin) => vec![spin],
                None => retried_spins(analysis, lp),
            };
            for spin in &spins {
                check_spin(cx, lp, spin, &mut reported);
            }
        }
    }
}

/// Reports the acquires that run on every iteration of `spin`, a spin loop or the retry of a
/// test in `lp`.
fn check_spin(cx: &mut FunctionCx<'_>, lp: &Loop, spin: &Spin, reported: &mut BTreeSet<InstId>) {
    let analysis = cx.analysis;
    // Acquires are memory or ordering instructions.
    for id in lp.memory_insts(analysis) {
        // A retry runs only what comes before its test.
        if spin.retried && !analysis.dominates(id, spin.exit) {
            continue;
        }
        let Some(cost) = per_iteration_acquire(analysis.func.inst(id)) else { continue };
        let poll = if spin.polls.contains(&id) {
            Some(id)
        } else {
            spin.polls.iter().copied().find(|&poll| analysis.dominates(poll, id))
        };
        let Some(poll) = poll else { continue };
        // A guarded invalidate costs every iteration only when it runs whenever its
        // poll does: the acquire half of a poll under the same guard (`@P0 LDGMC ...;
        // @P0 CCTL.IVALL`, one of two polls chosen by a kernel argument). The
        // invalidate of an `.acquire.cluster` mbarrier wait is guarded by the wait's
        // success instead, and runs once, when the loop exits.
        let guard = analysis.func.inst(id).guard;
        if cost == Cost::Invalidate && guard.is_some() && guard != analysis.func.inst(poll).guard {
            continue;
        }
        if reported.contains(&id) || woken_by_other_polls(analysis, lp, poll) {
            continue;
        }
        reported.insert(id);
        report(cx, id, poll, spin, cost);
    }
}

/// Whether every way round `lp` from the poll `poll` back to it reads the polled location
/// again first with a read that pays no invalidate ([`per_iteration_acquire`]) and runs
/// whenever the way does (not guarded): the loop spins on those other reads, and `poll` (with
/// the acquire that goes with it) runs only when one of them lets the loop go round; and some
/// of those reads spin in a loop of their own, inside `lp`, that does not hold `poll`. libcu++'s
/// primitives built on `atomic::wait` (a semaphore's `acquire`, a latch's `wait`) wait this
/// way: one acquire load or exchange, then relaxed reads of the same word until it changes
/// (`ld.relaxed.gpu` sixteen times in a row, then with a back-off), then the acquire again; a
/// test-and-test-and-set lock is the same shape. The acquire is paid once a change, not once a
/// poll, and is not reported. A wait whose every poll is an acquire
/// (`atomic::wait(old, memory_order_acquire)`, a device-scope barrier's wait) has a way round
/// with no other read of the location and still is.
fn woken_by_other_polls(analysis: &FunctionAnalysis<'_>, lp: &Loop, poll: InstId) -> bool {
    let func = analysis.func;
    let inst = func.inst(poll);
    let Some(address) = &inst.address else { return false };
    let flag = analysis.address_key(poll, address);
    let bytes =
        polled(inst).and_then(|m| m.width).map_or(1, |bits| i64::from(bits.div_ceil(8)).max(1));
    let cfg = &analysis.cfg;
    // A read that always runs where it is and pays no invalidate: not guarded, no acquire, and in
    // SASS no `CCTL.IVALL` after it in its block.
    let relaxed_reread = |id: InstId| {
        let inst = func.inst(id);
        let invalidated = || {
            let only = analysis.block_memory_insts(cfg.block_of(id));
            let after = only.partition_point(|other| other.0 <= id.0);
            only[after..].iter().any(|&other| {
                matches!(
                    func.inst(other).kind,
                    InstKind::Fence(Fence { kind: FenceKind::L1Invalidate, .. })
                )
            })
        };
        id != poll
            && inst.guard.is_none()
            && polled(inst).is_some()
            && per_iteration_acquire(inst).is_none()
            && analysis.inst_address_within(id, &flag, bytes)
            && !invalidated()
    };
    let home = cfg.block_of(poll);
    // The relaxed reads spin on their own: one of them is in a loop that does not hold the poll,
    // inside the loop of all the back edges to `lp`'s header (each back edge also makes a loop
    // of its own: libcu++'s first relaxed read goes straight back to the acquire). That is
    // libcu++'s back-off loop, or the inner loop of a test-and-test-and-set lock. A loop that
    // reads the flag again once each time round (an abort value told apart after the acquire)
    // pays the acquire on every iteration.
    let spins_relaxed = analysis.whole_loop(lp).memory_insts(analysis).any(|id| {
        relaxed_reread(id) && analysis.innermost_loop(id).is_some_and(|inner| !inner.contains(home))
    });
    if !spins_relaxed {
        return false;
    }
    // No way round the loop from the poll back to it that meets none of them. A walk past its
    // step budget finds none either (no report; the analysis says it is incomplete).
    !analysis.reaches_avoiding_memory(Point::After(poll), poll, |b| lp.contains(b), relaxed_reread)
}

/// What the loop's instructions alone decide, before any slice is computed: a report needs an
/// acquire inside the loop (`None` without one), and a spin loop (see [`spin_loop`]) touches
/// memory only through its polls, which are loads or atomics that return (the `bool`: whether
/// every access of the loop is such a read). Most loops have no acquire, and the slices of
/// their exits are never asked for.
fn may_report(analysis: &FunctionAnalysis<'_>, lp: &Loop) -> Option<bool> {
    let mut acquires = false;
    let mut only_loads = true;
    // Accesses and acquires are memory or ordering instructions.
    for id in lp.memory_insts(analysis) {
        let inst = analysis.func.inst(id);
        only_loads &= !accesses_memory(inst) || polled(inst).is_some();
        acquires |= per_iteration_acquire(inst).is_some();
    }
    acquires.then_some(only_loads)
}

/// A loop whose only memory accesses are loads of a fixed location that decide its exit, or the
/// retry of a test in a loop ([`retried_spins`]).
struct Spin {
    /// The loads that decide the exit.
    polls: BTreeSet<InstId>,
    /// The branch that leaves the loop when the poll succeeds, or the retried test's branch.
    exit: InstId,
    /// The widest scope of the polls: the scope to acquire at after the loop.
    scope: Scope,
    /// A retried test, not a loop: only what runs before `exit` runs on every retry.
    retried: bool,
}

/// Waits written as a `continue` (`while (step < steps) { if (ld_acquire(flag) <= step)
/// continue; read(data[step]); ++step; }`): the loop also reads data, but each retry runs only
/// the way from the loop's head to the test and back, and an acquire there runs on every
/// retry. A test counts when its retry polls again only reads that decide the test, at fixed
/// addresses, and nothing before the test (on every way to it) accesses memory but those polls.
fn retried_spins(analysis: &FunctionAnalysis<'_>, lp: &Loop) -> Vec<Spin> {
    let func = analysis.func;
    let may_poll = |inst: &Inst| polled(inst).is_some_and(MemAccess::others_may_write);
    // Only a test that an acquire runs before can be reported: the others are not tried.
    let acquires: Vec<InstId> = lp
        .memory_insts(analysis)
        .filter(|&id| per_iteration_acquire(func.inst(id)).is_some())
        .collect();
    let after_acquire = |branch| acquires.iter().any(|&id| analysis.dominates(id, branch));
    let mut spins = Vec::new();
    for test in retried_tests(analysis, lp, may_poll, after_acquire) {
        let branch = analysis.cfg.block(test.test).last();
        // The polls are the retry's own reads or the test is none (below), so the memory work
        // before the branch is tested first, without the branch's slice.
        let only_polls = lp
            .memory_insts(analysis)
            .filter(|&id| analysis.dominates(id, branch))
            .all(|id| test.polls.contains(&id) || !accesses_memory(func.inst(id)));
        if !only_polls {
            continue;
        }
        let polls: BTreeSet<InstId> = analysis
            .deciding_reads(branch, Some(lp))
            .into_iter()
            .filter(|read| test.polls.contains(read) && lp.address_is_invariant(analysis, *read))
            .collect();
        if polls.len() == test.polls.len() {
            spins.push(Spin {
                scope: widest_scope(func, &polls),
                polls,
                exit: branch,
                retried: true,
            });
        }
    }
    spins
}

fn spin_loop(analysis: &FunctionAnalysis<'_>, lp: &Loop) -> Option<Spin> {
    let func = analysis.func;
    let mut polls: BTreeSet<InstId> = BTreeSet::new();
    let mut exit = None;
    for &(from, _) in &lp.exits {
        let branch = analysis.cfg.block(from).last();
        if func.inst(branch).guard.is_none() {
            continue;
        }
        for read in analysis.deciding_reads(branch, Some(lp)) {
            if polled(func.inst(read)).is_some() && lp.address_is_invariant(analysis, read) {
                polls.insert(read);
                exit.get_or_insert(branch);
            }
        }
    }
    if polls.is_empty() {
        return None;
    }
    // A search over several flags may also go round again straight from each test
    // (`@!P0 BRA` to the header, the loop left by the last test's fall-through, as ptxas and
    // nvcc write it for sm_100 and later): the reads that decide a back edge are polls too.
    for &latch in &lp.latches {
        let branch = analysis.cfg.block(latch).last();
        if !func.inst(branch).is_conditional_transfer() {
            continue;
        }
        for read in analysis.deciding_reads(branch, Some(lp)) {
            if polled(func.inst(read)).is_some() && lp.address_is_invariant(analysis, read) {
                polls.insert(read);
            }
        }
    }
    // Any other access in the loop (data read or written per iteration) may need the acquire
    // of that iteration.
    let only_polls =
        lp.memory_insts(analysis).all(|id| polls.contains(&id) || !accesses_memory(func.inst(id)));
    if !only_polls {
        return None;
    }
    Some(Spin { scope: widest_scope(func, &polls), polls, exit: exit?, retried: false })
}

/// The widest scope of `polls`: the scope to acquire at after the wait.
fn widest_scope(func: &Function, polls: &BTreeSet<InstId>) -> Scope {
    polls
        .iter()
        .filter_map(|&p| polled(func.inst(p)).and_then(MemAccess::effective_scope))
        .max()
        .unwrap_or(Scope::Gpu)
}

/// Whether `inst` reads or writes memory that a loop iteration may need ordered. Loads and
/// stores of memory that no other thread writes while the kernel runs need no acquire: ptxas
/// reloads a pointer parameter with `LDC` inside the loop, and spills to local memory.
fn accesses_memory(inst: &Inst) -> bool {
    if let InstKind::Load(mem) | InstKind::Store(mem) = &inst.kind
        && !mem.others_may_write()
    {
        return false;
    }
    inst.kind.reads_memory() || inst.kind.writes_memory()
}

/// The access of a load-like instruction that can serve as a poll.
fn polled(inst: &Inst) -> Option<&MemAccess> {
    match &inst.kind {
        InstKind::Load(mem) | InstKind::Atomic { mem, returns: true } => Some(mem),
        _ => None,
    }
}

/// What makes an instruction an L1 invalidate on every iteration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cost {
    /// `ld.acquire` / `atom.acquire` above `.cta` scope.
    AcquireAccess,
    /// `fence.acq_rel` / `fence.acquire` / `fence.sc` above `.cta` scope.
    Fence,
    /// SASS `CCTL.IVALL`, unguarded or under its poll's guard.
    Invalidate,
}

fn per_iteration_acquire(inst: &Inst) -> Option<Cost> {
    match &inst.kind {
        // `.acquire.cta` lowers to no invalidate at all.
        InstKind::Load(mem) | InstKind::Atomic { mem, returns: true } => (mem.sem.has_acquire()
            && mem.scope.is_some_and(|s| s > Scope::Cta))
        .then_some(Cost::AcquireAccess),
        InstKind::Fence(Fence { kind: FenceKind::Plain, sem, scope }) => {
            (sem.has_acquire() && scope.is_some_and(|s| s > Scope::Cta)).then_some(Cost::Fence)
        }
        // Guarded ones are sorted out against the poll (see `check_function`).
        InstKind::Fence(Fence { kind: FenceKind::L1Invalidate, .. }) => Some(Cost::Invalidate),
        _ => None,
    }
}

fn report(cx: &mut FunctionCx<'_>, id: InstId, poll: InstId, spin: &Spin, cost: Cost) {
    let dialect = cx.module.dialect.unwrap_or(Dialect::Ptx);
    let opcode = cx.inst(id).opcode.clone();
    let scope = spin.scope.max(Scope::Cluster).as_str();
    // `fence.acquire` exists from sm_90 (PTX 8.6); older targets use `fence.acq_rel`.
    let fence = if cx.module.sm_version().is_some_and(|sm| sm < 90) {
        format!("fence.acq_rel.{scope}")
    } else {
        format!("fence.acquire.{scope}")
    };
    let (message, label) = match cost {
        Cost::AcquireAccess => (
            format!("`{opcode}` acquires on every iteration of a spin loop"),
            "each poll invalidates L1",
        ),
        Cost::Fence => (
            format!("`{opcode}` runs on every iteration of a spin loop"),
            "this fence invalidates L1 on each poll",
        ),
        Cost::Invalidate => (
            format!("`{opcode}` invalidates L1 on every iteration of a spin loop"),
            "the acquire half of the poll or of a fence in the loop",
        ),
    };
    let help = match (cost, dialect) {
        (Cost::Fence, _) => format!("move the fence after the loop (`{fence};` suffices there)"),
        (_, Dialect::Ptx) => {
            format!("poll with `ld.relaxed.{scope}` and insert `{fence};` after the loop")
        }
        (_, Dialect::Sass) => format!(
            "poll with `ld.relaxed.{scope}` and insert `{fence};` after the loop, so that ptxas emits one `CCTL.IVALL`"
        ),
    };
    let exit_label = if spin.retried {
        "the wait goes on past this test once the poll succeeds, and goes round again otherwise"
    } else {
        "the loop exits here once the poll succeeds"
    };
    let mut report = cx
        .report(id, message)
        .primary_label(label)
        .secondary(spin.exit, exit_label)
        .note("only the read that ends the loop needs to be acquired: a relaxed poll followed by one acquire fence after the loop orders the same reads")
        .help(help);
    if poll != id {
        report = report.secondary(poll, "the flag is polled here");
    }
    drop(report);
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelint_ir::{Sem, Space};

    #[test]
    fn cta_acquire_costs_nothing() {
        let mut inst = Inst::new(
            fencelint_ir::TextRange::default(),
            "ld.acquire.cta.shared.u32",
            InstKind::Load(MemAccess::new(Space::SharedCta, Sem::Acquire, Some(Scope::Cta))),
        );
        assert_eq!(per_iteration_acquire(&inst), None);
        inst.kind = InstKind::Load(MemAccess::new(Space::Global, Sem::Acquire, Some(Scope::Gpu)));
        assert_eq!(per_iteration_acquire(&inst), Some(Cost::AcquireAccess));
    }
}
