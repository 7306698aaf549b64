//! `spin-poll-without-acquire`: a spin loop polls a flag with a relaxed, volatile or weak load
//! and the thread then reads published data with no acquire on the way.

use std::cell::{OnceCell, RefCell};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use fencelint_cfg::{AddrKey, AddrRoot, FunctionAnalysis, Loop, Point};
use fencelint_ir::{
    AddrBase, AluOp, AsyncOp, Barrier, BulkDir, Dialect, FenceKind, Inst, InstId, InstKind,
    IntCompare, MemAccess, MultimemOp, Reg, Relation, Scope, Sem, Space, ValueOp,
};

use super::retry::retried_tests;
use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct SpinPollWithoutAcquire;

static META: RuleMeta = RuleMeta {
    name: "spin-poll-without-acquire",
    category: Category::Correctness,
    dialects: Dialects::BOTH,
    min_sm: Some(70),
    status: Status::Stable { since: "0.1.0" },
    summary: "a spin loop polls a flag without acquire and then reads the data it guards",
    doc: include_str!("../../../../rules/spin-poll-without-acquire.md"),
};

impl Rule for SpinPollWithoutAcquire {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        // One finding per unordered read: several polls (or several loops) often lead to it.
        let mut findings: BTreeMap<InstId, (Poll, usize, usize, Vec<InstId>)> = BTreeMap::new();
        let mut seen_polls = Vec::new();
        let sass = cx.module.dialect == Some(Dialect::Sass);
        let mut walks = Walks::new(analysis);
        // The loops' exits first, then the tests that a loop retries without leaving it: a poll
        // that decides an exit is reported for that exit.
        let loops: Vec<&Loop> =
            analysis.loops().iter().filter(|lp| may_poll(analysis, lp, sass)).collect();
        for retried in [false, true] {
            for &lp in &loops {
                let tests = if retried {
                    let may_poll =
                        |inst: &Inst| polled_access(inst).is_some_and(|m| may_be_poll(m, sass));
                    retried_tests(analysis, lp, may_poll, |_| true)
                } else {
                    Vec::new()
                };
                if retried && tests.is_empty() {
                    continue;
                }
                let edges: Vec<_> = if retried {
                    tests.iter().map(|t| (t.test, t.go)).collect()
                } else {
                    lp.exits.clone()
                };
                for poll in polls_of(analysis, lp, sass, &edges) {
                    if seen_polls.contains(&poll.load) {
                        continue;
                    }
                    // Only a read that every way of the retry polls again waits there.
                    if retried {
                        let from = analysis.cfg.block_of(poll.branch);
                        let test = tests.iter().find(|t| (t.test, t.go) == (from, poll.exit_to));
                        let test = test.expect("the poll's edge is a retried test");
                        if test.polls != [poll.load] {
                            continue;
                        }
                    }
                    // The relaxed and volatile reads met before the first published read: when
                    // the data is read that way, the read the finding names is only the next
                    // weak one.
                    let After { reads, strong_first } = confirmed(
                        analysis,
                        lp,
                        &poll,
                        unordered_reads(analysis, lp, &poll, &mut walks),
                    );
                    // A poll is reported for the first exit it decides that leads to a read
                    // (an enclosing loop's exit that it also decides may lead to none).
                    let Some(&first) = reads.first() else { continue };
                    seen_polls.push(poll.load);
                    let entry =
                        findings.entry(first).or_insert((poll, reads.len(), 0, strong_first));
                    entry.2 += 1;
                }
            }
        }
        for (read, (poll, n_reads, n_polls, strong)) in findings {
            report(cx, &poll, read, Counts { reads: n_reads, polls: n_polls }, &strong);
        }
    }
}

/// A load that decides a loop's exit and is not itself an acquire.
struct Poll {
    load: InstId,
    /// The conditional branch that leaves the loop.
    branch: InstId,
    /// The exit edge's target block.
    exit_to: fencelint_cfg::BlockId,
    /// The scope an acquire must cover.
    required: Scope,
    sem: Sem,
    /// The poll reads global (or generic) memory at system scope: its producer is taken to be
    /// outside the CTA's cluster (another GPU, the host, another CTA), which cannot write the
    /// CTA's own shared memory. See [`may_carry_published`].
    beyond_cluster: bool,
    /// The shared-memory read that hands the polled value to the exit ([`relayed_poll`]).
    relay: Option<InstId>,
}

/// Whether a loop has a read that may be a poll. The exits' slices stay inside the loop: a
/// loop without one has no poll, and its slices are not computed.
fn may_poll(analysis: &FunctionAnalysis<'_>, lp: &Loop, sass: bool) -> bool {
    let func = analysis.func;
    lp.memory_insts(analysis)
        .any(|id| polled_access(func.inst(id)).is_some_and(|mem| may_be_poll(mem, sass)))
}

/// The polled access of a load-like instruction.
fn polled_access(inst: &Inst) -> Option<&MemAccess> {
    match &inst.kind {
        InstKind::Load(mem) | InstKind::Atomic { mem, returns: true } => Some(mem),
        InstKind::Multimem { op: MultimemOp::LdReduce, mem } => Some(mem),
        _ => None,
    }
}

/// Whether `mem`, read by a loop's exit condition, can be the poll of a finding: shareable,
/// coherent and not an acquire. SASS prints shared-memory accesses without strength (`LDS` is
/// weak, relaxed or an acquire at CTA scope alike) and ptxas deletes weak global polls: a
/// weak-looking SASS poll carries no usable ordering fact.
fn may_be_poll(mem: &MemAccess, sass: bool) -> bool {
    let weak_in_sass = sass && mem.sem == Sem::Weak;
    mem.others_may_write() && !mem.sem.has_acquire() && !weak_in_sass
}

fn polls_of(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    sass: bool,
    edges: &[(fencelint_cfg::BlockId, fencelint_cfg::BlockId)],
) -> Vec<Poll> {
    let func = analysis.func;
    // The loop's instructions that can order the exits' reads (a few fences and barriers in
    // loops of hundreds of memory instructions): each read tests only these.
    let orderers: Vec<InstId> =
        lp.memory_insts(analysis).filter(|&id| may_acquire(&func.inst(id).kind)).collect();
    // The loop's stores that hand a polled value on through shared memory, found once and only
    // for a loop whose exit a shared-memory read decides.
    let relays = OnceCell::new();
    // Where each read's walk to the exits gets, found once for all the exits it decides.
    let reaches = RefCell::new(HashMap::new());
    // Each exit, with the reads that decide it and what each of them is.
    let exits: Vec<(InstId, fencelint_cfg::BlockId, Deciders<'_>)> = edges
        .iter()
        .filter_map(|&(from, to)| {
            let branch = analysis.cfg.block(from).last();
            func.inst(branch).guard?;
            let reads = analysis
                .deciding_reads(branch, Some(lp))
                .into_iter()
                .filter_map(|read| {
                    let mut mem = polled_access(func.inst(read))?;
                    // A shared-memory read that hands on what one thread polled stands for
                    // that poll.
                    let mut load = read;
                    let relay = relayed_poll(analysis, lp, &relays, read, mem);
                    if let Some(source) = relay {
                        load = source;
                        mem = polled_access(func.inst(source))?;
                    }
                    let decided =
                        decider(analysis, lp, &orderers, &reaches, load, mem, (branch, to), sass);
                    Some((load, mem, decided, relay.map(|_| read)))
                })
                .collect();
            Some((branch, to, reads))
        })
        .collect();
    // A loop with an exit that waits with an acquire poll is an acquire loop: its other exits
    // are usually abort or timeout checks, and are not reported (see Known problems). A relaxed
    // poll that decides the same exit as the acquire poll is.
    let acquire_exit =
        |reads: &Deciders<'_>| reads.iter().any(|&(_, _, d, _)| d == Decider::AcquirePoll);
    let acquire_loop = exits.iter().any(|(_, _, reads)| acquire_exit(reads));
    let mut polls = Vec::new();
    for (branch, to, reads) in exits {
        if acquire_loop && !acquire_exit(&reads) {
            continue;
        }
        // When a strong read decides the exit, it is the flag; a weak read beside it is a
        // bound or a setting read again every iteration (`while (relaxed_sys(sem) < bound)`,
        // with `bound` in shared memory), not a second flag.
        let strong_decides =
            reads.iter().any(|&(_, mem, d, _)| d != Decider::Other && mem.sem != Sem::Weak);
        for (load, mem, decider, relay) in reads {
            // A compare-and-swap retried with what it returned last is an update that waits
            // for no other thread (`Loop::feeds_itself`), not a poll.
            if decider != Decider::Poll
                || (strong_decides && mem.sem == Sem::Weak)
                || !lp.address_is_invariant(analysis, load)
                || read_in_step(analysis, lp, load, mem)
                || (mem.sem == Sem::Weak && !tested_alone(analysis, lp, load, branch))
                || lp.feeds_itself(analysis, load)
                || takes_a_ticket(analysis, load)
                || carries_its_data(analysis, lp, load, branch, to)
                || packs_status_and_value(analysis, load)
                || is_its_own_flag(analysis, lp, load, branch, to)
            {
                continue;
            }
            polls.push(Poll {
                load,
                branch,
                exit_to: to,
                required: required_scope(mem),
                sem: mem.sem,
                beyond_cluster: waits_beyond_cluster(mem),
                relay,
            });
        }
    }
    polls
}

/// The strong read of memory that other threads write whose value the shared-memory read
/// `read` hands on: the loop stores a value that such a read returned (directly, or through
/// copies) to the CTA's shared memory, at an address that may be the one `read` reads. One
/// thread polls a flag and broadcasts what it read to the CTA through shared memory and a
/// barrier (`if (threadIdx.x == 0) s = ld_relaxed(flag); __syncthreads(); } while (s == 0)`;
/// cuSOLVER's `getf4_domino_reg`); the exit is decided by the shared read, but the poll, and
/// the ordering it needs, is the global read. Without this, SASS (where `LDS` carries no
/// strength) never saw the broadcast, and PTX reported the shared read even when the thread
/// polled with an acquire or fenced after its relaxed read.
fn relayed_poll(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    relays: &OnceCell<Vec<(InstId, InstId)>>,
    read: InstId,
    mem: &MemAccess,
) -> Option<InstId> {
    if mem.space != Space::SharedCta || mem.sem.has_acquire() {
        return None;
    }
    let func = analysis.func;
    let relays = relays.get_or_init(|| relay_stores(analysis, lp));
    if relays.is_empty() {
        return None;
    }
    let key = analysis.address_key(read, func.inst(read).address.as_ref()?);
    let known = |k: &AddrKey| !matches!(k.root, AddrRoot::Unknown(_));
    relays.iter().find_map(|&(store, source)| {
        let store_key = analysis.address_key(store, func.inst(store).address.as_ref()?);
        let differ = known(&key) && known(&store_key) && !key.same_as(&store_key);
        (!differ).then_some(source)
    })
}

/// The stores of `lp` to the CTA's shared memory of a value that a strong read of other
/// threads' memory in the loop returned ([`polled_source`]), each with that read.
fn relay_stores(analysis: &FunctionAnalysis<'_>, lp: &Loop) -> Vec<(InstId, InstId)> {
    let func = analysis.func;
    lp.memory_insts(analysis)
        .filter_map(|store| {
            let inst = func.inst(store);
            let InstKind::Store(stored) = &inst.kind else { return None };
            if stored.space != Space::SharedCta {
                return None;
            }
            let guard = inst.guard.map(|g| g.reg);
            let source = inst
                .uses
                .iter()
                .filter(|&&reg| Some(reg) != guard && !address_regs(inst).any(|a| a == reg))
                .find_map(|&reg| polled_source(analysis, lp, store, reg))?;
            Some((store, source))
        })
        .collect()
}

/// The read inside `lp` that `reg` holds at `at`, through copies, when it is a strong read or
/// an acquire of memory that other threads write, outside the CTA's shared memory.
fn polled_source(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    mut at: InstId,
    mut reg: Reg,
) -> Option<InstId> {
    let func = analysis.func;
    for _ in 0..4 {
        let reach = analysis.reaching_defs(at, reg);
        let [def] = reach.defs[..] else { return None };
        if reach.from_entry || !lp.contains_inst(analysis, def) {
            return None;
        }
        let inst = func.inst(def);
        if let Some(ValueOp::Copy(src)) = inst.value {
            (at, reg) = (def, src);
            continue;
        }
        let mem = polled_access(inst)?;
        let strong = (mem.is_strong() && !mem.non_coherent) || mem.sem.has_acquire();
        return (strong && mem.others_may_write() && mem.space != Space::SharedCta).then_some(def);
    }
    None
}

/// Whether a weak read of the CTA's shared memory comes after a CTA barrier (`bar.sync`,
/// `bar.red`) on every path from the loop's header, in a loop that reads no other CTA's memory
/// with a strong load or atomic at a scope wider than the CTA: each iteration reads what the
/// CTA's own threads computed and wrote before that barrier, so the loop runs in step with the
/// CTA (an iterative solver that tests convergence on a shared-memory reduction, cuSOLVER's
/// batched Jacobi), not a spin on a flag that another thread may set at any time. A loop in which one thread polls global
/// memory and hands the value to the CTA through shared memory and a barrier (cuSOLVER's
/// `getf4_domino_reg`: `ld.volatile.global`, `st.shared`, `bar.sync`, `ld.shared`) is still a
/// poll: the shared read stands for the global one.
///
/// Behind a warp barrier (`bar.warp.sync`), which orders only the warp's lanes, the read is in
/// step only when it reads back what the loop itself stored there earlier in the same
/// iteration ([`reads_back_its_own_store`]): one lane stores the warp's sum, the warp meets,
/// every lane reads it (cuSOLVER's `batch_parallel_jacobi_algo3`). A flag that another warp
/// raises is still awaited.
fn read_in_step(analysis: &FunctionAnalysis<'_>, lp: &Loop, load: InstId, mem: &MemAccess) -> bool {
    if mem.sem != Sem::Weak || mem.space != Space::SharedCta {
        return false;
    }
    let func = analysis.func;
    // A strong access at CTA scope synchronizes with no other CTA (cuDSS's `main_loop_ker`
    // claims vertices with `atom.global.cta.exch` in such a loop).
    let reads_other_ctas = lp.memory_insts(analysis).any(|id| {
        polled_access(func.inst(id)).is_some_and(|other| {
            other.is_strong()
                && other.others_may_write()
                && other.space != Space::SharedCta
                && other.scope != Some(Scope::Cta)
        })
    });
    if reads_other_ctas {
        return false;
    }
    let behind = |barrier: fn(&InstKind) -> bool| {
        !analysis.reaches_avoiding_memory(
            Point::BlockStart(lp.header),
            load,
            |block| lp.contains(block),
            |id| barrier(&func.inst(id).kind),
        )
    };
    behind(is_cta_barrier)
        || (behind(is_warp_or_cta_barrier) && reads_back_its_own_store(analysis, lp, load))
}

fn is_cta_barrier(kind: &InstKind) -> bool {
    matches!(kind, InstKind::Barrier(Barrier::CtaSync { .. } | Barrier::CtaReduce))
}

fn is_warp_or_cta_barrier(kind: &InstKind) -> bool {
    is_cta_barrier(kind) || matches!(kind, InstKind::Barrier(Barrier::WarpSync))
}

/// Whether the loop stores to the shared-memory location that `load` reads, earlier in the same
/// iteration, with a warp or CTA barrier between the store and the read on every path: the read
/// returns what the loop's own lanes wrote in this iteration. A store that reaches the read only
/// round the back edge (a flag reset after it was seen) does not count.
fn reads_back_its_own_store(analysis: &FunctionAnalysis<'_>, lp: &Loop, load: InstId) -> bool {
    let func = analysis.func;
    let Some(address) = func.inst(load).address.as_ref() else { return false };
    let key = analysis.address_key(load, address);
    if matches!(key.root, AddrRoot::Unknown(_)) {
        return false;
    }
    // One iteration: the loop's blocks without its header, entered again only by a back edge.
    let body = |block| lp.contains(block) && block != lp.header;
    lp.memory_insts(analysis).any(|store| {
        let InstKind::Store(stored) = &func.inst(store).kind else { return false };
        stored.space == Space::SharedCta
            && analysis.cfg.block_of(store) != lp.header
            && analysis.inst_address_is(store, &key)
            && analysis.reaches_avoiding_memory(Point::After(store), load, body, |_| false)
            && !analysis.reaches_avoiding_memory(Point::After(store), load, body, |id| {
                is_warp_or_cta_barrier(&func.inst(id).kind)
            })
    })
}

/// Whether the exit that `branch` decides tests the value `load` read against values that are
/// the same in every iteration: on some chain of definitions inside the loop from the branch's
/// predicate back to the load, every instruction other than predicate logic (`and.pred`,
/// `or.pred`, `not.pred`, a vote, where a timeout or an abort test may join) takes its other
/// operands from loop-invariant registers. A spin loop compares what it read with a constant
/// or a bound; an iterative computation that reads a constant from memory in every iteration
/// mixes it with the iterate of the last one (cuSOLVER's secular-equation solver `laed4_par`
/// reads its poles with weak shared-memory loads inside a Newton iteration). Asked for weak
/// reads only: nothing else marks them as flags.
fn tested_alone(analysis: &FunctionAnalysis<'_>, lp: &Loop, load: InstId, branch: InstId) -> bool {
    let Some(guard) = analysis.func.inst(branch).guard else { return false };
    let mut memo = Vec::new();
    reaches_alone(analysis, lp, load, branch, guard.reg, &mut memo)
}

/// How many (instruction, register) pairs [`tested_alone`] visits.
const MAX_TEST_STEPS: usize = 128;

/// [`tested_alone`] for the value of `reg` as `at` reads it. `memo` holds the answers so far; a
/// pair still being answered (a cycle round the loop) counts as not from the load alone.
fn reaches_alone(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    load: InstId,
    at: InstId,
    reg: Reg,
    memo: &mut Vec<((InstId, Reg), bool)>,
) -> bool {
    if let Some(&(_, known)) = memo.iter().find(|(key, _)| *key == (at, reg)) {
        return known;
    }
    if memo.len() >= MAX_TEST_STEPS {
        return false;
    }
    let slot = memo.len();
    memo.push(((at, reg), false));
    let func = analysis.func;
    let defs: Vec<InstId> = analysis
        .reaching_defs(at, reg)
        .defs
        .into_iter()
        .filter(|&def| lp.contains_inst(analysis, def))
        .collect();
    let alone = defs.into_iter().any(|def| {
        if def == load {
            return true;
        }
        let inst = func.inst(def);
        if inst.kind.reads_memory() {
            return false;
        }
        let logic = is_pred_logic(inst);
        let mut from_load = false;
        let mut others_invariant = true;
        for &used in &inst.uses {
            if reaches_alone(analysis, lp, load, def, used, memo) {
                from_load = true;
            } else if logic {
                // A timeout or an abort test may join the poll's; a test of memory read at
                // an address that moves with the iteration is a search, not a wait.
                if reads_moving_memory(analysis, lp, def, used, &mut Vec::new()) {
                    others_invariant = false;
                }
            } else if !lp.is_invariant(analysis, def, used) {
                others_invariant = false;
            }
        }
        from_load && others_invariant
    });
    memo[slot].1 = alone;
    alone
}

/// Whether the value of `reg` as `at` reads it comes, inside the loop, from a read of memory
/// whose address changes from one iteration to the next: the exit of a search (`for (i = lo;
/// i < hi; ++i) if (x[i] == max) break;`, cuDNN's max-pooling backward kernels, whose test of
/// `x[i]` joins a NaN test of the weak read of `max`) rather than of a wait.
fn reads_moving_memory(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    at: InstId,
    reg: Reg,
    seen: &mut Vec<(InstId, Reg)>,
) -> bool {
    if seen.contains(&(at, reg)) || seen.len() >= MAX_TEST_STEPS {
        return false;
    }
    seen.push((at, reg));
    let func = analysis.func;
    analysis.reaching_defs(at, reg).defs.into_iter().any(|def| {
        if !lp.contains_inst(analysis, def) {
            return false;
        }
        let inst = func.inst(def);
        if inst.kind.reads_memory() {
            return !lp.address_is_invariant(analysis, def);
        }
        inst.uses.iter().any(|&used| reads_moving_memory(analysis, lp, def, used, seen))
    })
}

/// Whether `load` is an atomic that adds a nonzero constant and returns the old value: a ticket
/// taken from a counter (`t = atomicAdd(&next, 1)`; cuSOLVER's `*_domino_merge` kernels hand each
/// row block to the CTA that draws it, and stop once the ticket passes the end). Each iteration
/// moves the counter itself, so the loop waits for no other thread; `atomicAdd(p, 0)`, the poll
/// idiom, adds nothing. The front ends record the addend: an immediate (`ValueOp::FetchAdd`,
/// PTX), or a register (`ValueOp::FetchAddReg`: SASS `ATOMG.E.ADD.STRONG.GPU PT, R15, [R18],
/// R22`, PTX `atom.global.add.u32 %r1, [%rd1], %r2`) defined as a nonzero constant (`MOV R22,
/// 0x1`, `mov.u32 %r2, 1`) or as a count of active lanes, through copies and multiplies by one
/// (a 64-bit add widens the count: `UPOPC UR6, UR5; UIMAD.WIDE.U32 UR6, UR6, 0x1, URZ; MOV R8,
/// UR6`); an add of `RZ` has neither.
fn takes_a_ticket(analysis: &FunctionAnalysis<'_>, load: InstId) -> bool {
    let func = analysis.func;
    let inst = func.inst(load);
    if !matches!(inst.kind, InstKind::Atomic { returns: true, .. }) {
        return false;
    }
    let addend = match inst.value {
        Some(ValueOp::FetchAdd(amount)) => return amount != 0,
        Some(ValueOp::FetchAddReg(addend)) => addend,
        _ => return false,
    };
    nonzero_addend(analysis, load, addend, 0)
}

/// Whether every definition of `reg` that reaches `at` is a nonzero constant or a count of
/// active lanes, directly or through at most three copies (`MOV R8, UR6`) and multiplies by one
/// (`UIMAD.WIDE.U32 UR6, UR6, 0x1, URZ`, `ValueOp::TimesOne`).
fn nonzero_addend(analysis: &FunctionAnalysis<'_>, at: InstId, reg: Reg, depth: u8) -> bool {
    let func = analysis.func;
    let reach = analysis.reaching_defs(at, reg);
    !reach.from_entry
        && !reach.defs.is_empty()
        && reach.defs.iter().all(|&def| {
            let inst = func.inst(def);
            match inst.value {
                Some(ValueOp::Imm(amount)) => amount != 0,
                Some(ValueOp::Copy(src) | ValueOp::TimesOne(src)) if depth < 3 => {
                    nonzero_addend(analysis, def, src, depth + 1)
                }
                _ => counts_active_lanes(analysis, def),
            }
        })
}

/// Whether `id` counts the lanes of the warp that take part (`POPC R7, UR6` of `VOTEU.ANY UR6,
/// UPT, PT`): ptxas aggregates a warp's `atomicAdd(p, 1)` into one add of that count by one
/// lane, which is never zero.
fn counts_active_lanes(analysis: &FunctionAnalysis<'_>, id: InstId) -> bool {
    let func = analysis.func;
    let inst = func.inst(id);
    let Some(ValueOp::PopCount(mask)) = inst.value else { return false };
    let reach = analysis.reaching_defs(id, mask);
    !reach.defs.is_empty()
        && reach.defs.iter().all(|&def| func.inst(def).value == Some(ValueOp::ActiveLanes))
}

/// Whether the poll reads its data together with its flag: a vector load (the 8- and 16-byte
/// packets of low-latency protocols, `{data, flag}` or `{data, flag, data, flag}`, each written
/// by the producer with one store) some of whose registers decide the exit while another one,
/// still holding what the poll read, is used in code that only that exit leads to. Such a
/// protocol needs no acquire for its data, and what the thread reads afterwards is not
/// published by this flag (see Known problems).
fn carries_its_data(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    load: InstId,
    branch: InstId,
    exit_to: fencelint_cfg::BlockId,
) -> bool {
    let defs = &analysis.func.inst(load).defs;
    if defs.len() < 2 {
        return false;
    }
    let flags: Vec<Reg> = analysis
        .deciding_read_regs(branch, Some(lp))
        .into_iter()
        .filter(|&(read, _)| read == load)
        .map(|(_, reg)| reg)
        .collect();
    if flags.is_empty() {
        return false;
    }
    defs.iter()
        .filter(|reg| !flags.contains(reg))
        .any(|&reg| used_after(analysis, load, reg, exit_to))
}

/// Whether the poll's word packs a status with a value, as a decoupled look-back does (CUB's
/// onesweep radix sort keeps a tile's status in the top two bits of a 32-bit word and its count
/// in the rest, written with one store): code after the load takes a field out of a register
/// the poll read (`and` with a constant, SASS `LOP3.LUT Rd, Rs, 0x3fffffff, RZ, 0xc0, !PT`) and
/// tests bits outside that field (the sign, an unsigned bound above it, or another field). A
/// field may also be the bytes a permute picks (SASS `PRMT R4, R0, 0x9910, RZ`, the low half:
/// a scan over 16-bit values packs a status and a value so), the bits above a shift right by a
/// constant (`SHF.R.U32.HI R54, RZ, 0x8, R54`: the same over 8-bit values), or a part of the
/// word split by a PTX `mov.b32 {%rs1, %rs2}, %r2` that code reads. The uses are looked for
/// wherever the polled value reaches, not only where the load's block dominates: ptxas peels
/// the first poll out of a loop and takes the fields out where the two polls' values meet. The
/// thread reads its data with its flag, as with a packet ([`carries_its_data`]). A counter
/// polled and masked into an index, with no test of the bits the mask drops, is still a poll.
fn packs_status_and_value(analysis: &FunctionAnalysis<'_>, load: InstId) -> bool {
    let func = analysis.func;
    let block = analysis.cfg.block_of(load);
    let width = polled_access(func.inst(load)).and_then(|mem| mem.width).unwrap_or(32);
    func.inst(load).defs.iter().any(|&reg| {
        let mut fields = Vec::new();
        let mut tests = Vec::new();
        visit_uses_in(analysis, load, reg, block, Region::Reachable, |id| {
            let inst = func.inst(id);
            // A word split into equal parts (PTX `mov.b32 {%rs1, %rs2}, %r2`): each part that
            // code after the split reads is a field.
            if matches!(inst.value, Some(ValueOp::Copy(src)) if src == reg)
                && let parts @ 2.. = inst.defs.len()
                && width.is_multiple_of(parts as u32)
                && width <= 64
            {
                let bits = width / parts as u32;
                for (i, &part) in inst.defs.iter().enumerate() {
                    let used = visit_uses(analysis, id, part, analysis.cfg.block_of(id), |_| true);
                    if used {
                        let low = u64::MAX >> (64 - bits);
                        fields.push((low << (bits * i as u32)).cast_signed());
                    }
                }
            }
            match inst.value {
                Some(ValueOp::AndImm(src, mask)) if src == reg && mask != 0 => fields.push(mask),
                // The bits above a shift (`SHF.R.U32.HI R54, RZ, 0x8, R54`: all but the low byte).
                Some(ValueOp::ShrImm(src, amount))
                    if src == reg && amount > 0 && amount < i64::from(width.min(64)) =>
                {
                    let all = u64::MAX >> (64 - width.min(64));
                    fields.push((all & (all << amount)).cast_signed());
                }
                // Bytes picked out of the word (`PRMT R4, R0, 0x9910, RZ`: the low half).
                Some(ValueOp::BytePermute { src: Some(src), bytes })
                    if src == reg && bytes != 0 && bytes != 0xf =>
                {
                    fields.push(byte_mask(bytes));
                }
                Some(ValueOp::Compare(compare, src, bound)) if src == reg => {
                    tests.push((compare, bound));
                }
                _ => {}
            }
            false
        });
        fields.iter().any(|&field| {
            let another_field = fields.iter().any(|&other| other & field == 0);
            another_field
                || tests.iter().any(|&(compare, bound)| tests_outside(compare, bound, field))
        })
    })
}

/// The bits of the bytes whose bits `bytes` sets (bit `i` for byte `i`).
fn byte_mask(bytes: u8) -> i64 {
    (0..4).filter(|i| bytes & (1 << i) != 0).map(|i| 0xff_i64 << (8 * i)).sum()
}

/// Whether the poll reads a value that is its own flag: a value that starts as a sentinel, is
/// written once by its producer, and is polled until it is no longer the sentinel and then
/// used. The thread reads its data with its flag, as with a packet; what it reads next was not
/// published by it. Two sentinels are recognised:
///
/// - NaN: the exit is decided by a floating-point comparison (cuSPARSE's sync-free triangular
///   solves write each element of the solution once into a vector filled with NaN, and a row
///   waits for the elements it needs with `FSETP.GTU.AND P0, PT, |R0|, +INF, PT`);
/// - all bits set: the exit is taken only when the value differs from all ones of its width
///   ([`exits_past_sentinel`]; cuSPARSE's `reduce_by_key` look-back polls a tile's aggregate with
///   `ld.global.cg.b16` until it is not `-1`), and the value does not go into an address after
///   the exit ([`indexes_memory`]): an index read until it is valid points at data published
///   behind it.
///
/// Either way the value the poll read, or a copy of it, must be used after the exit other than
/// in a comparison: a value compared and then dropped, or tested again as a status, is still a
/// poll.
fn is_its_own_flag(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    load: InstId,
    branch: InstId,
    exit_to: fencelint_cfg::BlockId,
) -> bool {
    let func = analysis.func;
    if func.inst(branch).guard.is_none() {
        return false;
    }
    let float = float_tested(analysis, lp, load, branch);
    if !float && !exits_past_sentinel(analysis, lp, load, branch, exit_to) {
        return false;
    }
    let values = polled_values(analysis, load);
    if !float && indexes_memory(analysis, lp, &values, exit_to) {
        return false;
    }
    // The code after the exit, including code that a path skipping the loop reaches too
    // (ptxas peels the first poll out of the loop, so the value used after it may come from
    // either); each use must still see this load's definition, and the loop's own test, reached
    // again round an outer loop, is no use. Nor is a comparison: a value tested again after the
    // exit (`if (status == READY)`) is a status that guards other data, not data itself.
    values.iter().any(|&(def, reg)| {
        visit_uses_in(analysis, def, reg, exit_to, Region::Reachable, |id| {
            !lp.contains_inst(analysis, id) && !is_comparison(func.inst(id))
        })
    })
}

/// An instruction that only compares: a predicate or a mask from an integer or floating-point
/// test.
fn is_comparison(inst: &Inst) -> bool {
    inst.alu.is_some_and(AluOp::compares)
}

/// Whether the exit's guard, `reg` as `branch` reads it, is decided by floating-point tests of
/// what `load` read: every definition is a floating-point comparison (`setp.eq.f32`, SASS
/// `FSETP`, `HSETP2`) or a comparison that writes a mask (`set.eq.f16x2.f16x2`, SASS
/// `HSET2.BF.EQ.AND`), or combines such tests with bit or predicate logic (`or.b32`,
/// `LOP3.LUT P0, RZ, R8, R7, RZ, 0xfc, !PT`, `or.pred`, a vote) or tests such a mask against
/// zero (`setp.ne.s32 %p1, %r16, 0`), and at least one comparison reads a value made from the
/// load. A half-precision slot polled until neither half is a sentinel (cuDNN's persistent RNN
/// kernels wait for `-65504` to be overwritten in every half of three words at once) is such a
/// test.
///
/// ptxas also writes the test as a search that stops at the first word still holding the
/// sentinel: a constant set before each test (`IMAD.MOV.U32 R126, RZ, RZ, 0x1`) and kept when a
/// guarded branch skips the rest (`@P4 BRA`), or the tests in the branches themselves (`@P6 BRA
/// P5, 0x480`). A definition whose value is the same in every iteration (a constant, a bound
/// check of a loop-invariant register) then counts too, but only when every conditional branch
/// of the loop and the guard of every definition visited are decided by such tests or by
/// values the same in every iteration: which constant reaches the exit is then decided by the
/// tests alone ([`branches_float_tested`]).
fn float_tested(analysis: &FunctionAnalysis<'_>, lp: &Loop, load: InstId, branch: InstId) -> bool {
    let mut walk =
        FloatWalk { lp, load, steps: 0, from_load: false, fixed: false, guards: Vec::new() };
    // The guard, and a predicate the branch reads besides (`@P0 BRA P6, 0xc0` takes the
    // branch when both hold: a bound on the rounds joined to the tests).
    let uses = &analysis.func.inst(branch).uses;
    if uses.is_empty() || !uses.iter().all(|&reg| walk.tests(analysis, branch, reg)) {
        return false;
    }
    if walk.fixed && !branches_float_tested(analysis, &mut walk, branch) {
        return false;
    }
    walk.from_load
}

/// How many definitions [`float_tested`] visits.
const MAX_FLOAT_TEST_STEPS: usize = 256;

/// The most blocks a loop may have for [`branches_float_tested`] to read its branches.
const MAX_FLOAT_TEST_BLOCKS: usize = 256;

/// The state of [`float_tested`]'s walk back from the exit's guard.
struct FloatWalk<'l> {
    lp: &'l Loop,
    load: InstId,
    /// Definitions visited, against [`MAX_FLOAT_TEST_STEPS`].
    steps: usize,
    /// A comparison read a value made from `load`.
    from_load: bool,
    /// A definition with the same value in every iteration was taken.
    fixed: bool,
    /// The guards of the definitions visited, as each reads its own.
    guards: Vec<(InstId, Reg)>,
}

impl FloatWalk<'_> {
    /// Whether `reg` at `at` is decided by floating-point tests, bit and predicate logic over
    /// them, and values the same in every iteration.
    fn tests(&mut self, analysis: &FunctionAnalysis<'_>, at: InstId, reg: Reg) -> bool {
        let func = analysis.func;
        let defs = defs_under_guard(analysis, at, reg);
        !defs.is_empty()
            && defs.iter().all(|&def| {
                self.steps += 1;
                if self.steps > MAX_FLOAT_TEST_STEPS {
                    return false;
                }
                let inst = func.inst(def);
                let guard = inst.guard.map(|g| g.reg);
                if let Some(guard) = guard {
                    self.guards.push((def, guard));
                }
                let operands =
                    || inst.uses.iter().copied().filter(move |&used| Some(used) != guard);
                // ptxas compares a float with a constant that is neither zero nor NaN by its
                // bits (`ISETP.EQ.U32.AND P5, PT, R34, -0x800001, PT` for `== -FLT_MAX`).
                // Chained through a predicate (`ISETP.EQ.U32.OR P1, PT, R198, -0x800001, P1`),
                // the test joined must be one of these too.
                if let Some((compare, src, bound, joined)) = compare_with_constant(inst)
                    && matches!(compare.relation, Relation::Eq | Relation::Ne)
                    && is_float_sentinel(bound, compare.bits)
                {
                    if made_from(analysis, def, src, self.load, 0) {
                        self.from_load = true;
                    }
                    return joined.is_none_or(|other| self.tests(analysis, def, other));
                }
                if compares_floats(inst) {
                    // The operands: a value compared, a bound, or the predicate of the tests
                    // before it that this one joins (`HSETP2.EQ.OR P1, PT, R196.H0_H0, -65504,
                    // -65504, P1`), which must be floating-point tests too.
                    // A load under a guard (`@!P3 LDG.E.U16.STRONG.SYS R201, ...`) reaches the
                    // comparison beside what the register held where it did not run.
                    return operands().all(|used| {
                        if made_from(analysis, def, used, self.load, 0) {
                            self.from_load = true;
                            return true;
                        }
                        // A predicate joined to the comparison (`HSETP2.NEU.AND P2, PT, R25.H0_H0,
                        // -65504, -65504, P3`) decides with it, whatever computed it.
                        if analysis.is_predicate(used) {
                            return self.lp.is_invariant(analysis, def, used)
                                || self.tests(analysis, def, used);
                        }
                        let joined = analysis
                            .reaching_defs(def, used)
                            .defs
                            .iter()
                            .any(|&d| compares_floats(func.inst(d)));
                        !joined || self.tests(analysis, def, used)
                    });
                }
                // A constant (`IMAD.MOV.U32 R126, RZ, RZ, 0x1`, `PLOP3.LUT P3, PT, PT, PT, PT,
                // 0x8, 0x0`), or a test or logic of registers that hold the same value in every
                // iteration (`ISETP.GE.AND P4, PT, R26, 0x8, PT`, `LOP3.LUT P3, RZ, R203, 0x20,
                // RZ, 0xc0, !PT`).
                if self.fixed_value(analysis, def, 0) {
                    self.fixed = true;
                    return true;
                }
                let logic = is_bit_logic(inst)
                    || is_pred_logic(inst)
                    || matches!(inst.value, Some(ValueOp::Copy(_)))
                    || matches!(
                        inst.value,
                        Some(
                            ValueOp::Compare(compare, _, 0)
                                | ValueOp::CompareJoined { compare, bound: 0, .. }
                        ) if matches!(compare.relation, Relation::Eq | Relation::Ne)
                    );
                logic
                    && operands().next().is_some()
                    && operands().all(|used| self.tests(analysis, def, used))
            })
    }

    /// How deep [`FloatWalk::fixed_value`] follows definitions inside the loop.
    const MAX_FIXED_DEPTH: u8 = 4;

    /// Whether `def` computes the same value in every iteration: ALU work (no memory, no special
    /// register such as the clock, no other lane's registers) over registers that are
    /// [invariant](Loop::is_invariant) or are themselves so computed inside the loop (ptxas
    /// recomputes a bound in the loop: `VIADD R139, R0, 0x200` then `ISETP.GE.AND P3, PT, R139,
    /// R138, PT`); a constant (`PLOP3.LUT P3, PT, PT, PT, PT, 0x8, 0x0`) is, and so is a vote of
    /// such predicates or of none (`VOTE.ANY R106, PT, PT`, the active lanes, which the `sm_75`
    /// loop foot compares with `VOTEU.ANY` before it branches back). A value carried round the
    /// loop (`R0 = R0 + 1`) is not: the chain ends at the depth limit.
    fn fixed_value(&self, analysis: &FunctionAnalysis<'_>, def: InstId, depth: u8) -> bool {
        let inst = analysis.func.inst(def);
        if depth > Self::MAX_FIXED_DEPTH
            || !matches!(inst.kind, InstKind::Other | InstKind::Compare | InstKind::Move)
            || inst.defs.is_empty()
            || inst.value == Some(ValueOp::Varying)
        {
            return false;
        }
        let guard = inst.guard.map(|g| g.reg);
        inst.uses.iter().filter(|&&used| Some(used) != guard).all(|&used| {
            if self.lp.is_invariant(analysis, def, used) {
                return true;
            }
            let reach = analysis.reaching_defs(def, used);
            !reach.defs.is_empty()
                && !reach.from_entry
                && reach.defs.iter().all(|&d| {
                    self.lp.contains_inst(analysis, d) && self.fixed_value(analysis, d, depth + 1)
                })
        })
    }
}

/// The definitions of `reg` that `at` reads. Where `at` is guarded and an earlier instruction of
/// its block wrote `reg` under the same guard, with the guard's register unchanged in between
/// (`@!P5 ISETP.NE.AND P6, PT, R251, RZ, PT` then `@!P5 SEL R251, RZ, 0x1, !P6`), only that one:
/// where `at` runs, it ran too, and what `reg` held before reaches nothing.
fn defs_under_guard(analysis: &FunctionAnalysis<'_>, at: InstId, reg: Reg) -> Vec<InstId> {
    let func = analysis.func;
    if let Some(guard) = func.inst(at).guard {
        let block = analysis.cfg.block(analysis.cfg.block_of(at));
        for before in block.ids().rev().skip_while(|&id| id != at).skip(1) {
            let inst = func.inst(before);
            if inst.defs.contains(&reg) {
                if inst.guard == Some(guard) {
                    return vec![before];
                }
                break;
            }
            if inst.defs.contains(&guard.reg) {
                break;
            }
        }
    }
    analysis.reaching_defs(at, reg).defs
}

/// Whether every conditional branch of the loop other than `exit`, and every guard that
/// [`FloatWalk::tests`] met, is decided by floating-point tests or by values the same in every
/// iteration: then which of the walk's fixed values reaches the exit is decided by the tests.
fn branches_float_tested(
    analysis: &FunctionAnalysis<'_>,
    walk: &mut FloatWalk<'_>,
    exit: InstId,
) -> bool {
    let func = analysis.func;
    let lp = walk.lp;
    if lp.blocks.len() > MAX_FLOAT_TEST_BLOCKS {
        return false;
    }
    let mut tests: Vec<(InstId, Reg)> = std::mem::take(&mut walk.guards);
    for &block in &lp.blocks {
        let last = analysis.cfg.block(block).last();
        let inst = func.inst(last);
        // The exit's own predicates are where the walk started.
        if last == exit || !inst.is_conditional_transfer() {
            continue;
        }
        // The guard and any register the branch reads (`@P6 BRA P5, 0x480`).
        tests.extend(inst.uses.iter().map(|&reg| (last, reg)));
    }
    // Each test has a step budget of its own; the guards it meets are tested in turn.
    let mut done: Vec<(InstId, Reg)> = Vec::new();
    while let Some((at, reg)) = tests.pop() {
        if done.contains(&(at, reg)) {
            continue;
        }
        done.push((at, reg));
        if done.len() > MAX_FLOAT_TEST_BLOCKS * 4 {
            return false;
        }
        walk.steps = 0;
        if !lp.is_invariant(analysis, at, reg) && !walk.tests(analysis, at, reg) {
            return false;
        }
        tests.append(&mut walk.guards);
    }
    true
}

/// Whether `reg` at `at` holds bits that `load` read: the load reaches it, directly (beside
/// what the register held where a guarded load did not run) or through copies, masks and byte
/// permutes (`PRMT R4, R0, 0x5410, R5` packs two 16-bit loads into one half2 operand).
fn made_from(
    analysis: &FunctionAnalysis<'_>,
    at: InstId,
    reg: Reg,
    load: InstId,
    depth: u8,
) -> bool {
    let func = analysis.func;
    let reach = analysis.reaching_defs(at, reg);
    reach.defs.contains(&load)
        || (depth < 4
            && reach.defs.iter().any(|&def| {
                let inst = func.inst(def);
                let carries = matches!(
                    inst.value,
                    Some(
                        ValueOp::Copy(_)
                            | ValueOp::AndImm(..)
                            | ValueOp::And(..)
                            | ValueOp::BytePermute { .. }
                    )
                );
                carries
                    && inst.uses.iter().any(|&used| made_from(analysis, def, used, load, depth + 1))
            }))
}

/// The comparison with a constant that `inst` computes (`src <compare> bound`), with the
/// predicate it joins, if any.
fn compare_with_constant(inst: &Inst) -> Option<(IntCompare, Reg, i64, Option<Reg>)> {
    match inst.value {
        Some(ValueOp::Compare(compare, src, bound)) => Some((compare, src, bound, None)),
        Some(ValueOp::CompareJoined { compare, src, bound, other, .. }) => {
            Some((compare, src, bound, Some(other)))
        }
        _ => None,
    }
}

/// Whether `bound`, compared at `bits`, is the bit pattern of a float sentinel that ptxas
/// compares as an integer: the largest finite values and the infinities of `f32` (`0xff7fffff`,
/// `-FLT_MAX`, prints as `-0x800001`) and of `f16` (`0xfbff`, `-65504`), zero-extended from a
/// 16-bit load or not.
fn is_float_sentinel(bound: i64, bits: u8) -> bool {
    let bits = u32::from(bits.clamp(1, 64));
    let value = if bits >= 64 {
        bound.cast_unsigned()
    } else {
        bound.cast_unsigned() & ((1u64 << bits) - 1)
    };
    matches!(value, 0x7f7f_ffff | 0xff7f_ffff | 0x7f80_0000 | 0xff80_0000)
        || matches!(value, 0x7bff | 0xfbff | 0x7c00 | 0xfc00)
}

/// Predicate logic, where other tests (a timeout, an abort flag) may join a poll's: `and.pred`,
/// `or.pred`, `not.pred`, a warp vote.
fn is_pred_logic(inst: &Inst) -> bool {
    matches!(
        inst.value,
        Some(
            ValueOp::PredAnd(..) | ValueOp::PredOr(..) | ValueOp::PredNot(_) | ValueOp::Vote { .. }
        )
    )
}

/// Bitwise logic: PTX `and`, `or`, `xor`, `not` of integers, SASS `LOP3.LUT`, `PLOP3.LUT`;
/// and a value selected by a predicate (PTX `selp.u16 %rs4, 1, 0, %p`, SASS `SEL`), which
/// turns a test into a mask.
fn is_bit_logic(inst: &Inst) -> bool {
    matches!(inst.alu, Some(AluOp::BitLogic | AluOp::Select))
}

/// The registers that hold what the poll read, with the instruction that wrote each: the load's
/// own, and copies made in code after it (PTX moves the loaded bits into a float register,
/// `mov.b32 %f1, %r2`, or splits a 64-bit word into halves, `mov.b64 {%r1, %r2}, %rd1`).
fn polled_values(analysis: &FunctionAnalysis<'_>, load: InstId) -> Vec<(InstId, Reg)> {
    let func = analysis.func;
    let block = analysis.cfg.block_of(load);
    let mut values: Vec<(InstId, Reg)> = func.inst(load).defs.iter().map(|&r| (load, r)).collect();
    for &reg in &func.inst(load).defs {
        visit_uses(analysis, load, reg, block, |id| {
            let inst = func.inst(id);
            if is_copy_of(inst, reg) {
                values.extend(inst.defs.iter().map(|&def| (id, def)));
            }
            false
        });
    }
    values
}

/// Whether `inst` copies `reg`: a `Copy` (the PTX lowering gives one to a `mov` that splits a
/// register into parts too).
fn is_copy_of(inst: &Inst, reg: Reg) -> bool {
    matches!(inst.value, Some(ValueOp::Copy(src)) if src == reg)
}

/// Whether the loop exits to `exit_to` only when the value `load` read differs from a sentinel
/// with every bit set (`-1`, `0xffff` in 16 bits): what the branch's guard must be on that edge
/// is followed back through predicate logic and warp votes (`vote.sync.any.pred` false means
/// false in every lane) to comparisons, and each must be an (in)equality with all ones of a
/// value made from what the poll read that the edge says differs from it (a 64-bit value in
/// SASS: both halves, `ISETP.NE.U32.AND` then `ISETP.NE.AND.EX`).
fn exits_past_sentinel(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    load: InstId,
    branch: InstId,
    exit_to: fencelint_cfg::BlockId,
) -> bool {
    let func = analysis.func;
    let inst = func.inst(branch);
    let Some(guard) = inst.guard else { return false };
    let taken = inst.control.targets.iter().any(|&t| analysis.cfg.block_of(t) == exit_to);
    let falls = inst.control.falls_through
        && branch.index() + 1 < func.insts.len()
        && analysis.cfg.block_of(InstId(branch.0 + 1)) == exit_to;
    // Beside a second condition (`@P4 BRA P0, target`) the guard is known only where the
    // branch is taken.
    if taken == falls || (falls && inst.control.condition.is_some()) {
        return false;
    }
    // SASS compares a zero-extended 16-bit value with `0xffff` at 32 bits.
    let width = polled_access(func.inst(load)).and_then(|mem| mem.width);
    // What each predicate is on the exit edge, from the guard back.
    let mut work = vec![(branch, guard.reg, taken != guard.negated)];
    let mut compares = 0;
    let mut steps = 0;
    while let Some((at, reg, truth)) = work.pop() {
        steps += 1;
        let reach = analysis.reaching_defs(at, reg);
        let [def] = reach.defs[..] else { return false };
        let def_inst = func.inst(def);
        if steps > 16
            || reach.from_entry
            || def_inst.guard.is_some()
            || !lp.contains_inst(analysis, def)
        {
            return false;
        }
        match def_inst.value {
            Some(ValueOp::Compare(compare, src, bound)) => {
                let Some(differs) = differs_from_bound(compare.relation, truth) else {
                    return false;
                };
                if !differs
                    || !is_sentinel(bound, compare.bits, width)
                    || derived_from(analysis, def, src, load, &mut Vec::new()) != Some(true)
                {
                    return false;
                }
                compares += 1;
            }
            // A 64-bit value compared in two halves (SASS `.EX`): `ne` true or `eq` false says
            // the whole value differs when both halves are compared with all ones.
            Some(ValueOp::CompareHigh { compare, high, bound, low }) => {
                let Some(differs) = differs_from_bound(compare.relation, truth) else {
                    return false;
                };
                let [low_def] = analysis.reaching_defs(def, low).defs[..] else { return false };
                let low_half = match func.inst(low_def).value {
                    Some(ValueOp::Compare(c, reg, b)) if c.relation == compare.relation => {
                        is_sentinel(b, c.bits, None)
                            && derived_from(analysis, low_def, reg, load, &mut Vec::new())
                                == Some(true)
                    }
                    _ => false,
                };
                if !differs
                    || !low_half
                    || !is_sentinel(bound, compare.bits, None)
                    || derived_from(analysis, def, high, load, &mut Vec::new()) != Some(true)
                {
                    return false;
                }
                compares += 1;
            }
            Some(ValueOp::Copy(src)) => work.push((def, src, truth)),
            Some(ValueOp::PredNot(src)) => work.push((def, src, !truth)),
            Some(ValueOp::PredAnd(a, b)) if truth => work.extend([(def, a, true), (def, b, true)]),
            Some(ValueOp::PredOr(a, b)) if !truth => {
                work.extend([(def, a, false), (def, b, false)]);
            }
            // An `any` that is false was false in every lane, an `all` that is true was true.
            Some(ValueOp::Vote { all, src, negated }) if all == truth => {
                work.push((def, src, truth != negated));
            }
            _ => return false,
        }
    }
    compares > 0
}

/// Whether an (in)equality with `truth` as its outcome says the value differs from the bound;
/// `None` for other relations.
fn differs_from_bound(relation: Relation, truth: bool) -> Option<bool> {
    match relation {
        Relation::Eq => Some(!truth),
        Relation::Ne => Some(truth),
        _ => None,
    }
}

/// Whether `bound`, compared at `bits`, has every bit set: of the comparison's width (`-1`,
/// `0xffff` at 16 bits) or of the polled element's narrower `width` (`0xffff` at 32 bits
/// against a zero-extended 16-bit load).
fn is_sentinel(bound: i64, bits: u8, width: Option<u32>) -> bool {
    let ones = |bits: u32| if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let bits = u32::from(bits.clamp(1, 64));
    let value = bound.cast_unsigned() & ones(bits);
    value == ones(bits) || width.is_some_and(|w| w > 0 && w < bits && value == ones(w))
}

/// Whether `reg` at `at` holds what `load` read (`Some(true)`), only values that stand in for
/// it where the load did not run (`Some(false)`: a constant such as `mov.b32 %r1, 0f00000000`
/// or `HFMA2 R0, -RZ, RZ, 0, 0` before a guarded load, or what the register held on entry), or anything else (`None`).
/// Looks through copies, splits, masks, the `and` of two such values (both halves of a 64-bit word
/// compared with all ones at once) and SASS byte permutes (`PRMT R4, R0, 0x9910, RZ`
/// sign-extends a 16-bit value; `PRMT R0, RZ, 0x7610, R0` clears one). A definition met again
/// round a loop adds nothing.
fn derived_from(
    analysis: &FunctionAnalysis<'_>,
    at: InstId,
    reg: Reg,
    load: InstId,
    seen: &mut Vec<(InstId, Reg)>,
) -> Option<bool> {
    if seen.contains(&(at, reg)) {
        return Some(false);
    }
    if seen.len() >= 16 {
        return None;
    }
    seen.push((at, reg));
    let func = analysis.func;
    let reach = analysis.reaching_defs(at, reg);
    let mut any = false;
    for &def in &reach.defs {
        if def == load {
            any = true;
            continue;
        }
        let inst = func.inst(def);
        let from = match inst.value {
            Some(ValueOp::Imm(_)) => Some(false),
            Some(ValueOp::Copy(src)) => derived_from(analysis, def, src, load, seen),
            // A mask keeps the comparison honest: the bound must still be all ones of the
            // loaded width (`LOP3.LUT R22, R21, 0xffff, RZ, 0xc0, !PT` of a 16-bit load).
            Some(ValueOp::AndImm(src, _)) => derived_from(analysis, def, src, load, seen),
            Some(ValueOp::And(a, b)) => {
                let a = derived_from(analysis, def, a, load, seen)?;
                let b = derived_from(analysis, def, b, load, seen)?;
                Some(a || b)
            }
            // Constant bytes put into part of the register, the rest kept (`PRMT R0, RZ,
            // 0x7610, R0`: ptxas's `mov.b16 %rs1, 0` for a 16-bit value in the low half).
            Some(ValueOp::BytePermute { .. }) if inst.uses.as_slice() == inst.defs.as_slice() => {
                Some(false)
            }
            Some(ValueOp::BytePermute { .. }) if inst.uses.len() == 1 => {
                derived_from(analysis, def, inst.uses[0], load, seen)
            }
            // Among them a special register or another lane's value (`ValueOp::Varying`).
            Some(_) => None,
            // A value made of constants alone: a floating-point constant (`mov.b32 %r1,
            // 0f00000000`), SASS's zeroing idioms (`HFMA2 R0, -RZ, RZ, 0, 0`, `CS2R R24, SRZ`).
            None if inst.uses.is_empty() && !inst.kind.reads_memory() => Some(false),
            None => None,
        };
        any |= from?;
    }
    Some(any)
}

/// Whether a value the poll read goes, in code after the exit, into the address of a memory
/// access: then it is an index or a pointer to data published behind it, not data of its own.
/// Follows the values through every instruction that reads them (the definitions that reach each
/// use are checked); an address counts when the poll's value reaches it on every path (constants
/// aside). A search that gives up answers yes.
fn indexes_memory(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    values: &[(InstId, Reg)],
    exit_to: fencelint_cfg::BlockId,
) -> bool {
    let func = analysis.func;
    let mut sites: std::collections::BTreeSet<InstId> = values.iter().map(|&(d, _)| d).collect();
    let mut regs: std::collections::BTreeSet<Reg> = values.iter().map(|&(_, r)| r).collect();
    // Blocks after the exit, in breadth-first order; a second pass catches values carried round
    // loops after the exit.
    let mut order = vec![exit_to];
    let mut seen = std::collections::BTreeSet::from([exit_to]);
    let mut next = 0;
    while next < order.len() {
        let block = order[next];
        next += 1;
        for succ in analysis.cfg.successors(block) {
            if !lp.contains(succ) && seen.insert(succ) {
                order.push(succ);
            }
        }
    }
    let mut steps = 0;
    for _ in 0..2 {
        for &block in &order {
            for id in analysis.cfg.block(block).ids() {
                steps += 1;
                if steps > USE_SEARCH_LIMIT * 2 {
                    return true;
                }
                let inst = func.inst(id);
                let carried = |reg: &Reg| {
                    regs.contains(reg)
                        && analysis.reaching_defs(id, *reg).defs.iter().any(|d| sites.contains(d))
                };
                if !inst.uses.iter().any(carried) {
                    continue;
                }
                // An address register counts when what it holds comes from the poll on every
                // path: SASS guards many definitions (`@P0 LEA R15, ...`), and a guarded one
                // lets every earlier definition of the register reach past it.
                let only_carried = |reg: Reg| {
                    regs.contains(&reg) && {
                        let reach = analysis.reaching_defs(id, reg);
                        reach.defs.iter().any(|d| sites.contains(d))
                            && reach.defs.iter().all(|d| {
                                sites.contains(d)
                                    || matches!(func.inst(*d).value, Some(ValueOp::Imm(_)))
                            })
                    }
                };
                if address_regs(inst).any(only_carried) {
                    return true;
                }
                sites.insert(id);
                regs.extend(inst.defs.iter().copied());
            }
        }
    }
    false
}

/// The registers that make up the addresses of `inst`.
fn address_regs(inst: &Inst) -> impl Iterator<Item = Reg> + '_ {
    inst.address
        .iter()
        .chain(inst.extra_addresses.iter().map(|(_, address)| address))
        .flat_map(|address| address.base.regs())
        .copied()
}

/// A floating-point comparison, into a predicate (PTX `setp` of a float type, `testp`; SASS
/// `FSETP`, `DSETP`, `HSETP2`) or a mask (PTX `set` with a floating-point source type,
/// `set.eq.f16x2.f16x2`; SASS `FSET`, `HSET2`).
fn compares_floats(inst: &Inst) -> bool {
    inst.alu.is_some_and(AluOp::compares_floats)
}

/// Whether `value <compare> bound` depends only on bits of `value` outside `field`: a sign test
/// (`> -1`, `>= 0`, `< 0`, `<= -1`) when `field` leaves the sign bit out, or an unsigned test
/// against a power of two (`>= 2^k`, `> 2^k - 1`, and their negations) above `field`.
fn tests_outside(compare: IntCompare, bound: i64, field: i64) -> bool {
    let bits = u32::from(compare.bits.clamp(1, 64));
    let width_mask = if bits == 64 { u64::MAX } else { (1u64 << bits) - 1 };
    let field = field.cast_unsigned() & width_mask;
    let bound = bound.cast_unsigned() & width_mask;
    let sign = 1u64 << (bits - 1);
    if compare.signed {
        let sign_test = match compare.relation {
            Relation::Gt | Relation::Le => bound == width_mask,
            Relation::Ge | Relation::Lt => bound == 0,
            Relation::Eq | Relation::Ne => false,
        };
        return sign_test && field & sign == 0;
    }
    // The power of two that the test compares against.
    let power = match compare.relation {
        Relation::Ge | Relation::Lt => bound,
        Relation::Gt | Relation::Le => bound.wrapping_add(1) & width_mask,
        Relation::Eq | Relation::Ne => return false,
    };
    power.is_power_of_two() && power > 1 && field < power
}

/// How many instructions [`visit_uses`] looks at before it gives up.
const USE_SEARCH_LIMIT: usize = 4096;

/// Whether some instruction from the top of `from` on, in code that runs only after `from` (the
/// blocks it dominates), reads `reg` while it still holds what `def` wrote (answers no when the
/// search gives up).
fn used_after(
    analysis: &FunctionAnalysis<'_>,
    def: InstId,
    reg: Reg,
    from: fencelint_cfg::BlockId,
) -> bool {
    visit_uses(analysis, def, reg, from, |_| true)
}

/// Calls `found` with each instruction from the top of `from` on, in code that runs only after
/// `from` (the blocks it dominates), that reads `reg` while it still holds what `def` wrote, until
/// `found` answers true (then true) or the search ends (false). When `def` is in `from`, the
/// search starts after it. Paths stop at an unguarded redefinition of `reg`. Code that other
/// paths reach too is not searched: in SASS a register is reused, and a value that reaches a
/// distant use only along paths that skip its redefinition is seldom the value used there.
fn visit_uses(
    analysis: &FunctionAnalysis<'_>,
    def: InstId,
    reg: Reg,
    from: fencelint_cfg::BlockId,
    found: impl FnMut(InstId) -> bool,
) -> bool {
    visit_uses_in(analysis, def, reg, from, Region::Dominated, found)
}

/// Which blocks after `from` a use search enters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Region {
    /// Only the blocks `from` dominates.
    Dominated,
    /// Every block reachable from `from`.
    Reachable,
}

/// [`visit_uses`] over the given region.
fn visit_uses_in(
    analysis: &FunctionAnalysis<'_>,
    def: InstId,
    reg: Reg,
    from: fencelint_cfg::BlockId,
    region: Region,
    found: impl FnMut(InstId) -> bool,
) -> bool {
    visit_uses_within(analysis, def, reg, from, region, USE_SEARCH_LIMIT, found)
}

/// [`visit_uses_in`], giving up (false) past `limit` instructions passed.
fn visit_uses_within(
    analysis: &FunctionAnalysis<'_>,
    def: InstId,
    reg: Reg,
    from: fencelint_cfg::BlockId,
    region: Region,
    limit: usize,
    mut found: impl FnMut(InstId) -> bool,
) -> bool {
    let func = analysis.func;
    // Only the instructions that read or write `reg` are looked at (found in the sorted sites
    // of each); the steps still count every instruction of a block up to where the search
    // stops in it, as a scan of the whole block would.
    let (uses, defs) = (analysis.use_sites(reg), analysis.def_sites(reg));
    let mut seen = std::collections::BTreeSet::from([from]);
    let mut queue = std::collections::VecDeque::from([from]);
    let mut steps = 0;
    while let Some(block) = queue.pop_front() {
        let range = &analysis.cfg.block(block).insts;
        let start = if block == from && analysis.cfg.block_of(def) == from {
            def.0 + 1
        } else {
            range.start
        };
        let end = range.end.max(start);
        let (uses, defs) = (sites_within(uses, start, end), sites_within(defs, start, end));
        let mut killed = false;
        // Each instruction that reads or writes `reg`, in order.
        for (at, is_use, is_def) in Sites::new(uses, defs) {
            // The steps up to and including `at`.
            let upto = steps + (at.0 - start) as usize + 1;
            if upto > limit {
                return false;
            }
            if is_use && analysis.reaching_defs(at, reg).defs.contains(&def) && found(at) {
                return true;
            }
            if is_def && func.inst(at).guard.is_none() {
                steps = upto;
                killed = true;
                break;
            }
        }
        if killed {
            continue;
        }
        steps += (end - start) as usize;
        if steps > limit {
            return false;
        }
        for succ in analysis.cfg.successors(block) {
            let inside = region == Region::Reachable || analysis.block_dominates(from, succ);
            if inside && seen.insert(succ) {
                queue.push_back(succ);
            }
        }
    }
    false
}

/// The instructions of two sorted site lists of one register (its uses, its definitions) in
/// order, each once: whether it reads the register and whether it writes it (an instruction
/// that names the register twice is in a list twice).
struct Sites<'s> {
    uses: &'s [InstId],
    defs: &'s [InstId],
}

impl<'s> Sites<'s> {
    fn new(uses: &'s [InstId], defs: &'s [InstId]) -> Self {
        Self { uses, defs }
    }
}

impl Iterator for Sites<'_> {
    type Item = (InstId, bool, bool);

    fn next(&mut self) -> Option<Self::Item> {
        let at = match (self.uses.first(), self.defs.first()) {
            (Some(&a), Some(&b)) => a.min(b),
            (a, b) => *a.or(b)?,
        };
        let is_use = self.uses.first() == Some(&at);
        let is_def = self.defs.first() == Some(&at);
        let past = |sites: &[InstId]| sites.iter().take_while(|&&id| id == at).count();
        self.uses = &self.uses[past(self.uses)..];
        self.defs = &self.defs[past(self.defs)..];
        Some((at, is_use, is_def))
    }
}

/// The part of `sites` (sorted) from instruction `start` to before `end`.
fn sites_within(sites: &[InstId], start: u32, end: u32) -> &[InstId] {
    let first = sites.partition_point(|id| id.0 < start);
    let len = sites[first..].partition_point(|id| id.0 < end);
    &sites[first..first + len]
}

/// The reads that decide one loop exit, their accesses, and what each is.
/// The reads that decide an exit: the read (the global poll for a read that relays one, see
/// [`relayed_poll`]), its access, what it is, and the shared-memory read that relays it.
type Deciders<'f> = Vec<(InstId, &'f MemAccess, Decider, Option<InstId>)>;

/// What a read that decides a loop exit is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Decider {
    /// An acquire load or atomic at a scope that covers its own, or a strong read with an
    /// acquire on every path from it to the exit branch (in SASS, the `CCTL.IVALL` after it).
    AcquirePoll,
    /// A read that may be a poll ([`may_be_poll`]) with no acquire before the branch.
    Poll,
    /// Neither: an acquire too narrow for its own scope, a weak read followed by a fence, a read
    /// that cannot be a poll.
    Other,
}

#[allow(clippy::too_many_arguments)] // The loop's facts, found once, and the read.
fn decider(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    orderers: &[InstId],
    reaches: &RefCell<HashMap<(InstId, Scope), Unacquired>>,
    load: InstId,
    mem: &MemAccess,
    exit: (InstId, fencelint_cfg::BlockId),
    sass: bool,
) -> Decider {
    let required = required_scope(mem);
    if mem.sem.has_acquire() {
        return if mem.scope.is_some_and(|s| s.covers(required)) {
            Decider::AcquirePoll
        } else {
            Decider::Other
        };
    }
    let strong = mem.is_strong() && !mem.non_coherent;
    let may_poll = may_be_poll(mem, sass);
    if !strong && !may_poll {
        return Decider::Other;
    }
    let acquired = acquired_before_branch(analysis, lp, orderers, reaches, load, exit, required);
    match (acquired, strong) {
        (true, true) => Decider::AcquirePoll,
        // A weak read followed by a fence is no acquire pattern, but the fence orders what
        // follows the loop: not a poll to report either.
        (true, false) => Decider::Other,
        (false, _) if may_poll => Decider::Poll,
        (false, _) => Decider::Other,
    }
}

/// Whether a poll of `mem` waits for a producer outside the CTA's cluster: a system-scope
/// (`.sys`, `.volatile`, `.mmio`; SASS `.STRONG.SYS`) access to global or generic memory. A
/// system-scope poll of *shared* memory is not one: only the CTA's cluster can write it.
/// Gpu scope is not enough: SASS prints cluster and gpu scope alike (`.STRONG.GPU`), and a
/// cluster peer can write this CTA's shared memory (`st.shared::cluster`, `st.async`).
fn waits_beyond_cluster(mem: &MemAccess) -> bool {
    matches!(mem.space, Space::Global | Space::Generic) && mem.effective_scope() == Some(Scope::Sys)
}

/// Whether the read `read` can see data published by the producer behind `poll`. The CTA's own
/// shared memory is written only by threads of its cluster (directly or through the async
/// proxy), so a poll that waits beyond the cluster guards none of it (see Known problems).
fn may_carry_published(poll: &Poll, read: &Inst) -> bool {
    !(poll.beyond_cluster
        && matches!(&read.kind, InstKind::Load(mem) if mem.space == Space::SharedCta))
}

/// The scope an acquire after this poll must cover. A volatile or weak poll carries no usable
/// scope; the producer is taken to be on the same GPU (see the rule's Known problems).
fn required_scope(mem: &MemAccess) -> Scope {
    match mem.effective_scope() {
        Some(scope) => scope.min(Scope::Gpu),
        None => Scope::Gpu,
    }
}

/// Whether every path from the poll to the exit branch, inside the loop, passes an acquire.
///
/// Usually the acquire sits between the poll and the branch in one straight run (a poll and its
/// `CCTL.IVALL`, then the test): dominance answers. Otherwise a walk does: in a rotated loop the
/// exit test comes first and the poll at the bottom (NCCL's `@P0 LDGMC...; @P0 CCTL.IVALL` at
/// the end of the loop, tested at the top of the next iteration), so the path from the poll to
/// the branch goes round the back edge; or acquires on both arms of a branch.
fn acquired_before_branch(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    orderers: &[InstId],
    reaches: &RefCell<HashMap<(InstId, Scope), Unacquired>>,
    load: InstId,
    (branch, exit_to): (InstId, fencelint_cfg::BlockId),
    required: Scope,
) -> bool {
    let dominated = orderers.iter().any(|&id| {
        id != load
            && analysis.dominates(load, id)
            && analysis.dominates(id, branch)
            && is_acquire(analysis, id, load, required)
    });
    if dominated {
        return true;
    }
    let mut reaches = reaches.borrow_mut();
    let unacquired = reaches
        .entry((load, required))
        .or_insert_with(|| Unacquired::walk(analysis, lp, load, required));
    if !unacquired.reaches(analysis, load, required, branch) {
        return true;
    }
    // A way reaches the branch with no acquire; it may not be a way out through this exit. A
    // lock taken by one lane and broadcast as 0 or 1 is tested twice, `!= 1` into the critical
    // section (which ends with a fence) and `!= 0` at the loop's foot: the way that skips the
    // fence comes back to the lock. Only a walk that learns the branches' outcomes sees it, so
    // it runs where it can learn something about this branch.
    analysis.branch_learnable(analysis.cfg.block_of(branch))
        && leaves_only_acquired(analysis, lp, load, required, exit_to)
}

/// Whether every way from the read `load` into the exit block `exit_to` that the branches'
/// outcomes allow (`FunctionAnalysis::walk_forward_learning`) meets an acquire first, staying
/// in the read's loop until it leaves. `false` when the walk stops at its budget.
fn leaves_only_acquired(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    load: InstId,
    required: Scope,
    exit_to: fencelint_cfg::BlockId,
) -> bool {
    let cfg = &analysis.cfg;
    let exit_start = InstId(cfg.block(exit_to).insts.start);
    let mut left = false;
    let complete = analysis.walk_forward_learning(load, (), |id, ()| {
        if id == exit_start {
            left = true;
            return None;
        }
        if !lp.contains(cfg.block_of(id)) || is_acquire(analysis, id, load, required) {
            return None;
        }
        Some(())
    });
    complete && !left
}

/// Where a read's loop goes after it with no acquire on the way (`is_acquire` for the read at
/// `required` scope), staying in the loop: the same answers as
/// `FunctionAnalysis::reaches_avoiding_memory(Point::After(load), to, …)` for every `to`, from
/// one walk. A read decides many exits of a loop (hundreds in a fuzzed listing, where a walk
/// per exit took 1.1 s for 63 KB). Unlike that walk it has no step budget: it visits each
/// block of the loop once.
struct Unacquired {
    /// The first acquire after the read in its own block, if any.
    blocked_after_load: Option<u32>,
    /// The loop's blocks entered at their start by the walk, sorted.
    entered: Vec<fencelint_cfg::BlockId>,
}

impl Unacquired {
    fn walk(analysis: &FunctionAnalysis<'_>, lp: &Loop, load: InstId, required: Scope) -> Self {
        let cfg = &analysis.cfg;
        let first_acquire = |block: fencelint_cfg::BlockId, from: u32| {
            let only = analysis.block_memory_insts(block);
            let first = only.partition_point(|id| id.0 < from);
            only[first..]
                .iter()
                .find(|&&id| is_acquire(analysis, id, load, required))
                .map(|id| id.0)
        };
        let start = cfg.block_of(load);
        let blocked_after_load = first_acquire(start, load.0 + 1);
        let mut entered: Vec<fencelint_cfg::BlockId> = Vec::new();
        let mut seen: HashSet<fencelint_cfg::BlockId> = HashSet::new();
        let mut work: VecDeque<fencelint_cfg::BlockId> = VecDeque::new();
        let enqueue_successors = |block, work: &mut VecDeque<_>, seen: &mut HashSet<_>| {
            for succ in cfg.successors(block) {
                if lp.contains(succ) && seen.insert(succ) {
                    work.push_back(succ);
                }
            }
        };
        if blocked_after_load.is_none() {
            enqueue_successors(start, &mut work, &mut seen);
        }
        while let Some(block) = work.pop_front() {
            entered.push(block);
            if first_acquire(block, cfg.block(block).insts.start).is_none() {
                enqueue_successors(block, &mut work, &mut seen);
            }
        }
        entered.sort_unstable();
        Self { blocked_after_load, entered }
    }

    /// Whether `to` runs after the read with no acquire on the way.
    fn reaches(
        &self,
        analysis: &FunctionAnalysis<'_>,
        load: InstId,
        required: Scope,
        to: InstId,
    ) -> bool {
        let cfg = &analysis.cfg;
        let goal = cfg.block_of(to);
        let clear_before = |from: u32| {
            let only = analysis.block_memory_insts(goal);
            let first = only.partition_point(|id| id.0 < from);
            !only[first..]
                .iter()
                .take_while(|id| id.0 < to.0)
                .any(|&id| is_acquire(analysis, id, load, required))
        };
        // Straight on from the read, in its own block.
        if goal == cfg.block_of(load) && to.0 > load.0 {
            return self.blocked_after_load.is_none_or(|at| at >= to.0);
        }
        // Or into the goal's block from its start.
        self.entered.binary_search(&goal).is_ok() && clear_before(cfg.block(goal).insts.start)
    }
}

/// Whether an instruction of this kind can be an acquire for some poll ([`is_acquire`]).
fn may_acquire(kind: &InstKind) -> bool {
    match kind {
        InstKind::Fence(_)
        | InstKind::Barrier(Barrier::CtaSync { .. } | Barrier::CtaReduce | Barrier::ClusterWait) => {
            true
        }
        InstKind::Load(mem) | InstKind::Atomic { mem, returns: true } => mem.sem.has_acquire(),
        _ => false,
    }
}

/// Whether `inst` orders later reads after the polled flag read at `required` scope. Holds only
/// for the kinds [`may_acquire`] accepts.
fn is_acquire(analysis: &FunctionAnalysis<'_>, id: InstId, poll: InstId, required: Scope) -> bool {
    let kind = &analysis.func.inst(id).kind;
    let acquire = is_acquire_of_kind(analysis, kind, id, poll, required);
    debug_assert!(!acquire || may_acquire(kind), "may_acquire must accept every acquire");
    acquire
}

fn is_acquire_of_kind(
    analysis: &FunctionAnalysis<'_>,
    kind: &InstKind,
    id: InstId,
    poll: InstId,
    required: Scope,
) -> bool {
    match kind {
        InstKind::Fence(fence) => {
            fence.acquires_at(required)
                || (fence.kind == FenceKind::Plain
                    && fence.sem.has_acquire()
                    && fence.scope.is_some_and(|s| s.covers(required)))
        }
        InstKind::Barrier(Barrier::CtaSync { .. } | Barrier::CtaReduce) => required == Scope::Cta,
        InstKind::Barrier(Barrier::ClusterWait) => required <= Scope::Cluster,
        InstKind::Load(mem) | InstKind::Atomic { mem, returns: true } => {
            mem.sem.has_acquire()
                && mem.scope.is_some_and(|s| s.covers(required))
                && same_address(analysis, id, poll)
        }
        _ => false,
    }
}

fn same_address(analysis: &FunctionAnalysis<'_>, id: InstId, poll: InstId) -> bool {
    let func = analysis.func;
    let (Some(a), Some(b)) = (&func.inst(id).address, &func.inst(poll).address) else {
        return false;
    };
    analysis.address_key(id, a).same_as(&analysis.address_key(poll, b))
}

/// Whether `inst` may read published data: a weak, coherent load of shareable memory, a
/// multimem load, or an asynchronous copy from global memory (`cp.async`, SASS `LDGSTS`; a bulk
/// or tensor copy to shared memory, SASS `UBLKCP.S.G`, `UTMALDG`). Strong reads are other
/// synchronization variables, and `.nc` loads may only read data that no thread writes during
/// the kernel.
fn reads_published(inst: &Inst) -> bool {
    match &inst.kind {
        InstKind::Load(mem) => mem.others_may_write() && !mem.is_strong(),
        InstKind::Multimem { op: MultimemOp::LdReduce, .. } => true,
        InstKind::Async(op) => copies_from_global(*op),
        _ => false,
    }
}

/// How many blocks [`emulated_atomic_read`] climbs to find the space query.
const EMULATION_DEPTH: usize = 8;

/// How many instructions after its read [`emulated_atomic_read`] looks for the swap.
const EMULATION_SPAN: usize = 16;

/// Whether the load `id` is the read half of an atomic that ptxas emulates. An atomic the
/// hardware lacks for its type or space is a loop: read the old value, compute, and try a
/// compare-and-swap (`LDS`, then `ATOMS.CAST.SPIN` of the same address; `LD.E`, then
/// `ATOM.E.CAST.SPIN`). An `atom` on a generic address becomes `ATOM.E... P, RZ, [A]`, which
/// reports whether it was performed (global); if not, `QSPC.E.S P, RZ, [A]` asks whether `A`
/// is the CTA's shared memory (the loop on `LDS`), from `sm_90` on `QSPC.E.D` whether it is a
/// cluster peer's (the loop on `LD.E`), and the rest is a read-modify-write of thread-local
/// memory: `LD.E` and `ST.E` of `A`, in a block entered only by the taken branch of `@!P BRA`
/// on the `QSPC.E.S` of `A`, or reached from that branch through blocks with one predecessor
/// each (at most [`EMULATION_DEPTH`]). Either read is part of the atomic the
/// program asked for (the PTX shows one `atom`), not a read of data another thread published.
fn emulated_atomic_read(analysis: &FunctionAnalysis<'_>, id: InstId) -> bool {
    let func = analysis.func;
    let inst = func.inst(id);
    let (InstKind::Load(mem), Some(address)) = (&inst.kind, &inst.address) else { return false };
    let AddrBase::Reg(reg) = address.base else { return false };
    if !matches!(mem.space, Space::Generic | Space::SharedCta) || mem.is_strong() {
        return false;
    }
    // The address as written, between instructions that do not redefine its register (the
    // emulation's blocks are straight runs; its address may have several definitions before).
    let same_address = |other: InstId| {
        func.inst(other)
            .address
            .as_ref()
            .is_some_and(|a| a.base == address.base && a.offset == address.offset)
    };
    let defines = |other: InstId| func.inst(other).defs.contains(&reg);
    let cfg = &analysis.cfg;
    // The swap of the same address, on the way that falls through the emulation's branches in
    // text order (an `atomicMax` leaves before the swap when memory already holds more: `LDS.64
    // R4, [R3+0x70]; ISETP...; @P1 BRA done; ATOMS.CAST.SPIN.64 P1, [R3+0x70], R4, R6`).
    for later in (id.0 + 1..).take(EMULATION_SPAN).map(InstId) {
        let Some(later_inst) = func.insts.get(later.0 as usize) else { break };
        if same_address(later) && later_inst.value == Some(ValueOp::RetriedSwap) {
            return true;
        }
        if defines(later) || !later_inst.control.falls_through {
            break;
        }
    }
    let mut block = cfg.block_of(id);
    let mut written_back = false;
    for later in cfg.block(block).ids().filter(|&later| later > id) {
        if same_address(later)
            && matches!(&func.inst(later).kind, InstKind::Store(m) if m.space == Space::Generic)
        {
            written_back = true;
        }
        if defines(later) {
            break;
        }
    }
    if !written_back || mem.space != Space::Generic {
        return false;
    }
    if cfg.block(block).ids().filter(|&earlier| earlier < id).any(defines) {
        return false;
    }
    // Up through blocks with one predecessor each (so entered only from it), none redefining
    // the address, to the taken branch of `@!P BRA` on a `QSPC.E.S` of it.
    for _ in 0..EMULATION_DEPTH {
        let mut preds = cfg.predecessors(block);
        let (Some(pred), None) = (preds.next(), preds.next()) else { return false };
        let first = cfg.block(block).first();
        let branch = cfg.block(pred).last();
        let taken = branch.0 + 1 != first.0 && func.inst(branch).control.targets.contains(&first);
        if taken && let Some(guard) = func.inst(branch).guard.filter(|g| g.negated) {
            let query = cfg
                .block(pred)
                .ids()
                .rev()
                .filter(|&earlier| earlier < branch)
                .find(|&earlier| func.inst(earlier).defs.contains(&guard.reg));
            if let Some(query) = query
                && func.inst(query).value == Some(ValueOp::InSpace(Space::SharedCta))
                && same_address(query)
                && !cfg.block(pred).ids().filter(|&after| after > query).any(defines)
            {
                return true;
            }
        }
        if cfg.block(pred).ids().any(defines) {
            return false;
        }
        block = pred;
    }
    false
}

/// Whether an asynchronous operation copies from global memory into shared memory.
fn copies_from_global(op: AsyncOp) -> bool {
    match op {
        AsyncOp::CpAsync => true,
        AsyncOp::Bulk { dir, .. } | AsyncOp::BulkTensor { dir, .. } => {
            dir == BulkDir::GlobalToShared
        }
        _ => false,
    }
}

/// The walks after loop exits, shared between polls where they are the same walk.
///
/// A walk's blockers ([`is_acquire`]) depend on the poll only through acquire loads of the
/// polled address. In a function with no acquire load or atomic (every SASS function: the
/// semantics table makes no load an acquire, SASS shows one as the `CCTL.IVALL` after it), the
/// walk from an exit block at a required scope reaches the same published reads, in the same
/// order, for every poll: it is walked once and each poll filters the reads (its own flag, the
/// loop's part before its branch, shared memory after a poll beyond the cluster). Reads are
/// targets, never blockers, so filtering after the walk gives what filtering during it would.
struct Walks {
    shared: bool,
    /// For each instruction, whether it is the read half of an atomic that ptxas emulates
    /// ([`emulated_atomic_read`]), found when first asked (0: not asked, 1: no, 2: yes): every
    /// walk and every sort asks about each published read it meets. Empty where the function
    /// has no such atomic (a `.CAST.SPIN`, which every emulation has, for shared memory at
    /// least), so no read is tested.
    emulated: Vec<std::cell::Cell<u8>>,
    /// Which reads only find the flag of a later wait ([`locates_next_poll`]).
    locating: Locating,
    reads: BTreeMap<(fencelint_cfg::BlockId, Scope), Vec<InstId>>,
}

impl Walks {
    fn new(analysis: &FunctionAnalysis<'_>) -> Self {
        let func = analysis.func;
        let (mut acquire_access, mut emulation) = (false, false);
        for &id in analysis.memory_insts() {
            let inst = func.inst(id);
            match &inst.kind {
                InstKind::Load(mem) => acquire_access |= mem.sem.has_acquire(),
                InstKind::Atomic { mem, returns } => {
                    acquire_access |= *returns && mem.sem.has_acquire();
                    emulation |= inst.value == Some(ValueOp::RetriedSwap);
                }
                _ => {}
            }
        }
        let emulated =
            if emulation { vec![std::cell::Cell::new(0); func.insts.len()] } else { Vec::new() };
        Self {
            shared: !acquire_access,
            emulated,
            locating: Locating::default(),
            reads: BTreeMap::new(),
        }
    }
}

/// The answers of [`locates_next_poll`], found when first asked, made at the first question.
#[derive(Default)]
struct Locating {
    /// For each instruction, 0 (not asked), 1 (no) or 2 (yes).
    answers: OnceCell<Vec<std::cell::Cell<u8>>>,
    /// For each loop (by id), the loops nested in it that hold a relaxed or volatile read.
    waits_in: RefCell<HashMap<u32, Vec<u32>>>,
}

/// Whether the published read `id` only finds the flag of a later wait ([`locates_next_poll`]).
/// A read in no loop, or in one that holds no loop with a relaxed or volatile read outside the
/// read's own, does not: most reads end there, without a search.
fn locates_next_poll_cached(
    analysis: &FunctionAnalysis<'_>,
    locating: &Locating,
    id: InstId,
) -> bool {
    let answers =
        locating.answers.get_or_init(|| vec![std::cell::Cell::new(0); analysis.func.insts.len()]);
    let Some(known) = answers.get(id.0 as usize) else { return false };
    if known.get() == 0 {
        let Some(outer) = analysis.innermost_loop(id) else {
            known.set(1);
            return false;
        };
        let mut waits_in = locating.waits_in.borrow_mut();
        let waits = waits_in.entry(outer.id).or_insert_with(|| {
            let func = analysis.func;
            let loops = analysis.loops();
            loops
                .iter()
                .filter(|lp| {
                    lp.id != outer.id
                        && outer.contains(lp.header)
                        && lp.memory_insts(analysis).any(|m| reads_strongly(func.inst(m)))
                })
                .map(|lp| lp.id)
                .collect()
        });
        let loops = analysis.loops();
        let waits = waits.iter().any(|&lp| !loops[lp as usize].contains_inst(analysis, id));
        drop(waits_in);
        known.set(1 + u8::from(waits && locates_next_poll(analysis, id)));
    }
    known.get() == 2
}

/// Whether `id` is the read half of an atomic that ptxas emulates ([`emulated_atomic_read`]),
/// in a function that has one; `emulated` keeps the answers.
fn emulated_read_cached(
    analysis: &FunctionAnalysis<'_>,
    emulated: &[std::cell::Cell<u8>],
    id: InstId,
) -> bool {
    let Some(known) = emulated.get(id.0 as usize) else { return false };
    if known.get() == 0 {
        known.set(1 + u8::from(emulated_atomic_read(analysis, id)));
    }
    known.get() == 2
}

/// Whether `inst` is a relaxed or volatile read of shareable memory (no acquire): the rule takes
/// it for another synchronization variable, not for published data ([`reads_published`]), and
/// names it in a note of the finding.
fn reads_strongly(inst: &Inst) -> bool {
    match &inst.kind {
        InstKind::Load(mem) => mem.others_may_write() && mem.is_strong() && !mem.sem.has_acquire(),
        _ => false,
    }
}

/// What follows a poll's loop with no acquire on the way, in the order of the walk.
#[derive(Debug, Default, PartialEq, Eq)]
struct After {
    /// Reads of published memory ([`reads_published`]).
    reads: Vec<InstId>,
    /// Relaxed or volatile reads ([`reads_strongly`]) met before the first of `reads`.
    strong_first: Vec<InstId>,
}

/// How many uses and definitions [`locates_next_poll`] looks at, both ways together (cuDSS's
/// two index reads of a list take about twenty at `sm_100`).
const LOCATOR_SEARCH_LIMIT: usize = 48;

/// Whether the published read `read` only finds the flag of a later wait: a thread that waits
/// for a list of producers one after the other (`for (i = tid; i < n; i += step) { k =
/// flag_of[deps[i]]; while (ld_volatile(&flags[k]) != 1) {} }`, cuDSS's `bwd_solve_only_ker`)
/// reads the list's next entries after each wait, before the one fence after the list. Such a
/// read is in a loop; its value goes, through arithmetic and further such reads, into nothing
/// but the addresses of relaxed or volatile reads in loops nested in that loop, not holding it
/// (the next wait's poll; uses past that loop are not followed); and its address is made in the
/// turn from values no read of an earlier turn gave ([`address_made_in_turn`]): the list's
/// counter, the kernel's parameters, constant memory, an index read earlier in the same turn.
/// A list walked through its nodes (`node = node->next` after waiting on `node->ready`) reads
/// what the producer of the node published, and its next pointer's address comes from the read
/// of the turn before: that read stays a finding. A search that gives up answers no.
fn locates_next_poll(analysis: &FunctionAnalysis<'_>, read: InstId) -> bool {
    let func = analysis.func;
    let Some(outer) = analysis.innermost_loop(read) else { return false };
    let mut budget = LOCATOR_SEARCH_LIMIT;
    // The reads whose values go into the next poll's address: `read` and the index reads it
    // leads to (`flag_of[deps[i]]` reads twice).
    let mut reads = vec![read];
    let mut values: Vec<(InstId, Reg)> = func.inst(read).defs.iter().map(|&r| (read, r)).collect();
    let mut seen = vec![read];
    let mut polled = false;
    while let Some((def, reg)) = values.pop() {
        if budget == 0 {
            return false;
        }
        // Whether the use `at` keeps the value an address; more values to follow go to `values`.
        let mut address_only = |at: InstId| {
            if seen.contains(&at) {
                return true;
            }
            if budget == 0 {
                return false;
            }
            budget -= 1;
            seen.push(at);
            let inst = func.inst(at);
            // A value that decides whether an instruction runs is tested, not an address.
            if inst.guard.is_some_and(|guard| guard.reg == reg) {
                return false;
            }
            match &inst.kind {
                // A load reads its registers only to make its address.
                InstKind::Load(_) if reads_strongly(inst) => {
                    let wait = analysis.innermost_loop(at).is_some_and(|lp| {
                        !lp.contains_inst(analysis, read) && outer.contains(lp.header)
                    });
                    polled |= wait;
                    wait
                }
                InstKind::Load(_) if reads_published(inst) => {
                    reads.push(at);
                    values.extend(inst.defs.iter().map(|&r| (at, r)));
                    true
                }
                // Arithmetic (SASS keeps most of it as `Other`: `IADD`, `SHF`, `SEL`).
                InstKind::Move | InstKind::Other if !inst.defs.is_empty() => {
                    values.extend(inst.defs.iter().map(|&r| (at, r)));
                    true
                }
                _ => false,
            }
        };
        // Uses past the loop are not followed: where the registers of a large kernel are reused
        // under guards, the definitions that reach a read far from the loop are mostly ways that
        // never run.
        if !uses_in_loop(analysis, def, reg, outer, &mut address_only) {
            return false;
        }
    }
    polled && reads.iter().all(|&id| address_made_in_turn(analysis, outer, id, &mut budget))
}

/// How many instructions [`uses_in_loop`] passes before it gives up.
const LOOP_USE_WALK_LIMIT: usize = 64;

/// Calls `visit` with each instruction of `lp` that reads `reg` while it still holds what `def`
/// wrote, found by a walk from `def` through the loop's blocks, round its back edges to the top
/// of `def`'s block too, that stops at each unguarded definition of `reg` (a use under the guard
/// of a definition just before it reads that one, [`defs_under_guard`]). Only the instructions
/// that read or write `reg` are looked at. True when every use was visited and `visit` answered
/// true for each; false when `visit` answered false (the walk stops there) or the walk passed
/// more than [`LOOP_USE_WALK_LIMIT`] instructions.
fn uses_in_loop(
    analysis: &FunctionAnalysis<'_>,
    def: InstId,
    reg: Reg,
    lp: &Loop,
    visit: &mut impl FnMut(InstId) -> bool,
) -> bool {
    let func = analysis.func;
    let cfg = &analysis.cfg;
    let (uses, defs) = (analysis.use_sites(reg), analysis.def_sites(reg));
    let home = cfg.block_of(def);
    // Few blocks fit in the walk's limit: a list is quicker than a set.
    let mut seen = vec![home];
    let mut home_again = false;
    let mut queue = VecDeque::from([(home, def.0 + 1, cfg.block(home).insts.end)]);
    let mut steps = 0;
    while let Some((block, start, end)) = queue.pop_front() {
        let (uses, defs) = (sites_within(uses, start, end), sites_within(defs, start, end));
        let mut killed_at = None;
        for (at, is_use, is_def) in Sites::new(uses, defs) {
            if is_use && defs_under_guard(analysis, at, reg).contains(&def) && !visit(at) {
                return false;
            }
            if is_def && func.inst(at).guard.is_none() {
                killed_at = Some(at.0);
                break;
            }
        }
        steps += (killed_at.map_or(end, |at| at + 1) - start) as usize;
        if steps > LOOP_USE_WALK_LIMIT {
            return false;
        }
        if killed_at.is_some() {
            continue;
        }
        for succ in cfg.successors(block) {
            if !lp.contains(succ) {
                continue;
            }
            if succ == home {
                // The top of the definition's block, up to and including the definition.
                if !home_again {
                    home_again = true;
                    queue.push_back((home, cfg.block(home).insts.start, def.0 + 1));
                }
            } else if !seen.contains(&succ) {
                seen.push(succ);
                let insts = &cfg.block(succ).insts;
                queue.push_back((succ, insts.start, insts.end));
            }
        }
    }
    true
}

/// Whether the address of `read`, in the loop `outer`, is made from values set before the loop,
/// values the loop computes without reading memory (a counter stepped each turn: arithmetic,
/// comparisons, and the instructions the front end keeps as `Other`, none of which reads
/// memory), constant memory, and reads made before `read` in the same turn whose addresses are
/// such values in turn: nothing that a read of an earlier turn gave. A definition that does not
/// come before its use on every way through the turn (one met round the back edge, or on one
/// way of a branch) is taken to come from an earlier turn. Spends `budget` on each definition
/// looked at.
fn address_made_in_turn(
    analysis: &FunctionAnalysis<'_>,
    outer: &Loop,
    read: InstId,
    budget: &mut usize,
) -> bool {
    let func = analysis.func;
    // Each register read at an instruction, and whether its value came round the back edge.
    let mut work: Vec<(InstId, Reg, bool)> =
        address_regs(func.inst(read)).map(|r| (read, r, false)).collect();
    let mut seen: Vec<(InstId, bool)> = Vec::new();
    while let Some((at, reg, earlier_turn)) = work.pop() {
        for def in defs_under_guard(analysis, at, reg) {
            if !outer.contains_inst(analysis, def) {
                continue;
            }
            let earlier_turn = earlier_turn || def == at || !analysis.dominates(def, at);
            if seen.contains(&(def, earlier_turn)) {
                continue;
            }
            if *budget == 0 {
                return false;
            }
            *budget -= 1;
            seen.push((def, earlier_turn));
            let inst = func.inst(def);
            match &inst.kind {
                // A guard only says whether the definition runs; where it does not, the
                // register's other definitions reach and are looked at in their turn.
                InstKind::Move | InstKind::Other | InstKind::Compare => {
                    let guard = inst.guard.map(|guard| guard.reg);
                    let operands = inst.uses.iter().filter(|&&r| Some(r) != guard);
                    work.extend(operands.map(|&r| (def, r, earlier_turn)));
                }
                // Constant memory, parameters, read-only data. Not local memory: a spill slot
                // may hold a pointer read in an earlier turn.
                InstKind::Load(mem) if !mem.others_may_write() && mem.space != Space::Local => {}
                InstKind::Load(_)
                    if !earlier_turn && inst.guard.is_none() && reads_published(inst) =>
                {
                    work.extend(address_regs(inst).map(|r| (def, r, false)));
                }
                _ => return false,
            }
        }
    }
    true
}

/// The reads reachable after the loop exit with no acquire on the way. Reads of both kinds are
/// targets of one walk, never blockers, so the published reads are those a walk for them alone
/// finds. The walk stops collecting relaxed and volatile reads at the first published read it
/// meets, before the poll's own filter (its flag, the loop's part before its branch, shared
/// memory after a poll beyond the cluster): where the filter drops that read, the note may
/// name fewer of them than precede the read the finding names.
fn unordered_reads(
    analysis: &FunctionAnalysis<'_>,
    lp: &Loop,
    poll: &Poll,
    walks: &mut Walks,
) -> After {
    let func = analysis.func;
    let flag = func.inst(poll.load).address.as_ref().map(|a| analysis.address_key(poll.load, a));
    // A read of any byte of the flag is a read of the flag.
    let flag_bytes = func
        .inst(poll.load)
        .mem()
        .and_then(|m| m.width)
        .map_or(1, |bits| i64::from(bits.div_ceil(8)).max(1));
    let is_target = |id: InstId| {
        if id <= poll.branch && lp.contains_inst(analysis, id) {
            return false;
        }
        let same_flag =
            flag.as_ref().is_some_and(|flag| analysis.inst_address_within(id, flag, flag_bytes));
        !same_flag && may_carry_published(poll, func.inst(id))
    };
    let (emulated, locating) = (&walks.emulated, &walks.locating);
    // A published read the rule names: not the read half of an emulated atomic, not a read that
    // only finds the next flag to wait on.
    let published = |id: InstId| {
        reads_published(func.inst(id))
            && !emulated_read_cached(analysis, emulated, id)
            && !locates_next_poll_cached(analysis, locating, id)
    };
    let walk = || {
        let is_blocker = |id: InstId| is_acquire(analysis, id, poll.load, poll.required);
        // Relaxed and volatile reads are collected until the walk meets a published read (the
        // note needs only those before the first one; in NCCL's kernels thousands follow).
        let published_met = std::cell::Cell::new(false);
        // Targets are loads and blockers fences, barriers and acquire loads: memory instructions.
        analysis.reachable_avoiding_memory(
            Point::BlockStart(poll.exit_to),
            |id| {
                if published(id) {
                    published_met.set(true);
                    true
                } else {
                    !published_met.get() && reads_strongly(func.inst(id))
                }
            },
            is_blocker,
        )
    };
    let sort = |found: &[InstId]| {
        let mut after = After::default();
        for &id in found {
            if published(id) {
                if is_target(id) {
                    after.reads.push(id);
                }
            } else if after.reads.is_empty() && is_target(id) {
                after.strong_first.push(id);
            }
        }
        after
    };
    if walks.shared {
        sort(walks.reads.entry((poll.exit_to, poll.required)).or_insert_with(walk))
    } else {
        sort(&walk())
    }
}

/// `after` less the reads that no path from the exit reaches once it knows what every way into
/// the loop has learned ([`FunctionAnalysis::outcomes_on_edge`]): a poll that runs only when a
/// branch before the loop went one way, and a fence after the loop under the same test
/// (`if (need) poll; ... if (need) fence;`, which ptxas may lay out as two branches on
/// predicates that join the test with others). Values the way in learned stay true to the exit:
/// a register the loop writes again has another value number there. `after` as it is when the
/// loop has several ways in, the way in or the exit goes back in text order, nothing was learned,
/// the walk stops at its budget, or it meets a barrier or an mbarrier operation before an
/// acquire (the other threads' reads after it need the poller's acquire before it, whatever
/// their own tests say: cuDSS's `factorize_v1_ker` polls in one thread, meets the others at
/// `bar.sync`, and only then fences under the test that chose the poller).
fn confirmed(analysis: &FunctionAnalysis<'_>, lp: &Loop, poll: &Poll, mut after: After) -> After {
    if after.reads.is_empty() && after.strong_first.is_empty() {
        return after;
    }
    let cfg = &analysis.cfg;
    if poll.exit_to <= cfg.block_of(poll.branch) {
        return after;
    }
    let way_in = |l: &Loop| {
        let mut entries = cfg.predecessors(l.header).filter(|&p| !l.contains(p));
        match (entries.next(), entries.next()) {
            (Some(way_in), None) => Some(way_in),
            _ => None,
        }
    };
    // A poll of two tests (`while (!(poll(a) && poll(b)))`) is two back edges to one header:
    // the loop of the first test is entered again from the second. Then the loop of all the
    // header's back edges has the one way in, and what it learned holds at each turn for the
    // values the loop does not compute.
    let (way_in, around) = if let Some(way_in) = way_in(lp) {
        (way_in, None)
    } else {
        let whole = analysis.whole_loop(lp);
        if whole.id == lp.id {
            return after;
        }
        let Some(way_in) = way_in(whole) else { return after };
        (way_in, Some(whole))
    };
    let mut outcomes = analysis.outcomes_on_edge(way_in, lp.header);
    // And what the exit itself says: a loop left when a flag broadcast as 0 or 1 is not 0,
    // followed by a test of the flag against 1 that skips the fenced critical section, never
    // skips it (`FunctionAnalysis::two_constants`). Around a loop of two tests, only what holds
    // at each turn is kept, this too.
    analysis.learn_edge(cfg.block_of(poll.branch), poll.exit_to, &mut outcomes);
    if let Some(whole) = around {
        outcomes.retain(|value| analysis.value_invariant_in(value, whole));
    }
    if outcomes.is_empty() {
        return after;
    }
    let targets: HashSet<InstId> = after.reads.iter().chain(&after.strong_first).copied().collect();
    let mut reached = HashSet::new();
    // Past a barrier the reads are also other threads', whose tests may go the other way: a
    // poller that fences only after the barrier leaves them unordered.
    let mut handed_over = false;
    let step = |id: InstId, (): ()| {
        if is_acquire(analysis, id, poll.load, poll.required) {
            return None;
        }
        if matches!(analysis.func.inst(id).kind, InstKind::Barrier(_) | InstKind::Mbarrier(_)) {
            handed_over = true;
            return None;
        }
        if targets.contains(&id) {
            reached.insert(id);
        }
        Some(())
    };
    let complete = match around {
        None => analysis.walk_learning_from(poll.exit_to, outcomes, (), step),
        Some(whole) => analysis.walk_learning_in_loop(poll.exit_to, outcomes, whole, (), step),
    };
    if complete && !handed_over {
        after.reads.retain(|id| reached.contains(id));
        after.strong_first.retain(|id| reached.contains(id));
    }
    after
}

/// How many unordered reads follow a poll's loop, and how many polls lead to the reported one.
#[derive(Clone, Copy)]
struct Counts {
    reads: usize,
    polls: usize,
}

fn report(cx: &mut FunctionCx<'_>, poll: &Poll, read: InstId, counts: Counts, strong: &[InstId]) {
    let dialect = cx.module.dialect.unwrap_or(Dialect::Ptx);
    let poll_inst = cx.inst(poll.load);
    let read_inst = cx.inst(read);
    let strong_opcode = strong.first().map(|&first| cx.inst(first).opcode.clone());
    let strength = match poll.sem {
        Sem::Weak => "weak",
        Sem::Volatile => "volatile",
        Sem::Mmio => "mmio",
        _ => "relaxed",
    };
    let kind = if matches!(poll_inst.kind, InstKind::Atomic { .. }) {
        format!("{strength} atomic")
    } else {
        format!("{strength} load")
    };
    let scope = poll.required.as_str();
    let message = format!(
        "`{}` reads memory after a spin loop that polls with the {kind} `{}`, with no acquire in between",
        read_inst.opcode, poll_inst.opcode
    );
    let help = match dialect {
        // A fence after the loop comes after the barrier: it would not order the other threads.
        _ if poll.relay.is_some() => format!(
            "poll with `ld.acquire.{scope}`, or insert `fence.acq_rel.{scope};` right after the polling thread's read, before the barrier that hands the value on"
        ),
        Dialect::Ptx => format!(
            "insert `fence.acq_rel.{scope};` after the loop, or poll with `ld.acquire.{scope}`"
        ),
        Dialect::Sass => format!(
            "poll with `ld.acquire.{scope}` (ptxas then emits `CCTL.IVALL` after the load) or insert `fence.acq_rel.{scope};` after the loop"
        ),
    };
    let mut report = cx
        .report(read, message)
        .primary_label("this read is not ordered after the flag")
        .secondary(poll.load, format!("the flag is polled here with a {kind}"))
        .secondary(poll.branch, "the loop exits here")
        .help(help);
    if let Some(relay) = poll.relay {
        report = report
            .secondary(relay, "the exit tests the polled value here, handed on through shared memory")
            .note(
                "one thread polls and passes what it read to the others through shared memory: a barrier orders the threads after that thread's read, but only an acquire by the polling thread orders them after the flag's producer",
            );
    }
    report = match counts.polls {
        0 | 1 => report,
        2 => report.note("1 other unordered poll leads to this read"),
        n => report.note(format!("{} other unordered polls lead to this read", n - 1)),
    };
    report = match counts.reads {
        0 | 1 => report,
        2 => report.note("1 more read after the loop is unordered"),
        n => report.note(format!("{} more reads after the loop are unordered", n - 1)),
    };
    if let Some(opcode) = strong_opcode {
        report = report.note(if strong.len() == 1 {
            format!(
                "a relaxed or volatile read (`{opcode}`) comes first after the loop; it is taken for another flag and not reported, but if it reads data that this flag publishes, it needs the acquire too"
            )
        } else {
            format!(
                "{} relaxed or volatile reads (the first `{opcode}`) come first after the loop; they are taken for other flags and not reported, but any that reads data this flag publishes needs the acquire too",
                strong.len()
            )
        });
    }
    if matches!(read_inst.kind, InstKind::Async(AsyncOp::Bulk { .. } | AsyncOp::BulkTensor { .. }))
    {
        report = report.note(
            "a bulk or tensor copy reads through the async proxy: after the acquire, `fence.proxy.async.global` orders it too",
        );
    }
    if poll.required == Scope::Cta {
        report = report.note("a `bar.warp.sync` orders only the lanes of one warp");
    } else {
        report = report.note(format!(
            "`bar.warp.sync` and `bar.sync` do not order writes of other CTAs; an acquire at `.{scope}` scope does"
        ));
    }
    drop(report);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Which comparisons look only at bits outside a field.
    #[test]
    fn tests_outside_a_field() {
        let signed = |relation| IntCompare { relation, signed: true, bits: 32 };
        let unsigned = |relation| IntCompare { relation, signed: false, bits: 32 };
        let count = 0x3fff_ffff;
        // Sign tests: `> -1`, `>= 0`, `< 0`, `<= -1`.
        assert!(tests_outside(signed(Relation::Gt), -1, count));
        assert!(tests_outside(signed(Relation::Ge), 0, count));
        assert!(tests_outside(signed(Relation::Lt), 0, count));
        assert!(tests_outside(signed(Relation::Le), -1, count));
        // The field holds the sign bit, or the test looks at more than the sign.
        assert!(!tests_outside(signed(Relation::Ge), 0, -1));
        assert!(!tests_outside(signed(Relation::Gt), 0, count));
        assert!(!tests_outside(signed(Relation::Ne), 0, count));
        // Unsigned bounds at a power of two above the field.
        assert!(tests_outside(unsigned(Relation::Ge), 0x4000_0000, count));
        assert!(tests_outside(unsigned(Relation::Gt), 0x3fff_ffff, count));
        assert!(tests_outside(unsigned(Relation::Lt), 0x100, 0xff));
        assert!(!tests_outside(unsigned(Relation::Ge), 0x100, 0x1ff));
        assert!(!tests_outside(unsigned(Relation::Ge), 0x300, 0xff));
        assert!(!tests_outside(unsigned(Relation::Eq), 0x4000_0000, count));
        assert!(!tests_outside(unsigned(Relation::Ge), 1, 0));
    }

    /// Which bounds are a sentinel with every bit set.
    #[test]
    fn all_ones_sentinels() {
        assert!(is_sentinel(-1, 32, Some(32)));
        assert!(is_sentinel(-1, 16, Some(16)));
        assert!(is_sentinel(0xffff, 16, None));
        assert!(is_sentinel(-1, 64, Some(64)));
        // A zero-extended 16-bit value compared at 32 bits.
        assert!(is_sentinel(0xffff, 32, Some(16)));
        assert!(!is_sentinel(0xffff, 32, Some(32)));
        assert!(!is_sentinel(0xffff, 32, None));
        assert!(!is_sentinel(0, 32, Some(32)));
        assert!(!is_sentinel(0xfffe, 32, Some(16)));
        assert!(!is_sentinel(0xff, 32, Some(16)));
        // A 128-bit vector's width says nothing about one 32-bit comparison.
        assert!(!is_sentinel(0xffff, 32, Some(128)));
    }

    /// Calls `check` with every function of every compiled fixture (PTX, SASS text and JSON),
    /// its file and whether it is SASS.
    fn each_compiled_function(
        mut check: impl FnMut(&std::path::Path, &fencelint_ir::Function, bool),
    ) {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled");
        let mut folders: Vec<_> =
            std::fs::read_dir(&root).unwrap().map(|e| e.unwrap().path()).collect();
        folders.sort();
        for folder in folders.into_iter().filter(|p| p.is_dir()) {
            let mut files: Vec<_> =
                std::fs::read_dir(&folder).unwrap().map(|e| e.unwrap().path()).collect();
            files.sort();
            for path in files {
                let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
                if !matches!(ext, "ptx" | "sass" | "json") {
                    continue;
                }
                let text = std::fs::read_to_string(&path).unwrap();
                let kind =
                    fencelint_lower::detect(&text).unwrap_or(fencelint_lower::InputKind::Ptx);
                let lowered = fencelint_lower::lower(fencelint_source::FileId(0), &text, kind, 0);
                for module in &lowered.modules {
                    let sass = module.dialect == Some(Dialect::Sass);
                    for func in &module.functions {
                        check(&path, func, sass);
                    }
                }
            }
        }
    }

    /// Where polls share walks (a function with no acquire load or atomic), each poll gets the
    /// reads that a walk of its own gives, on every function of every compiled fixture, whether
    /// its walk was made for it or for an earlier poll that exits to the same block.
    #[test]
    fn a_shared_walk_gives_each_poll_the_reads_of_its_own_walk() {
        let (mut polls, mut reused) = (0usize, 0usize);
        each_compiled_function(|path, func, sass| {
            let analysis = FunctionAnalysis::new(func);
            let mut shared = Walks::new(&analysis);
            if !shared.shared {
                return;
            }
            for lp in analysis.loops() {
                for poll in polls_of(&analysis, lp, sass, &lp.exits) {
                    let walked = shared.reads.len();
                    let together = unordered_reads(&analysis, lp, &poll, &mut shared);
                    reused += usize::from(shared.reads.len() == walked);
                    let mut alone = Walks {
                        shared: false,
                        emulated: shared.emulated.clone(),
                        locating: Locating::default(),
                        reads: BTreeMap::new(),
                    };
                    let own = unordered_reads(&analysis, lp, &poll, &mut alone);
                    assert_eq!(together, own, "{} {}", path.display(), func.name);
                    polls += 1;
                }
            }
        });
        assert!(polls > 100 && reused > 10, "{polls} polls, {reused} walks reused");
    }

    /// The use search, which looks only at the instructions that read or write the register,
    /// stops where a scan of every instruction of each block it passes stops: the same answer
    /// and the same uses offered, in the same order, for every definition of every register in
    /// every compiled fixture, both regions, and limits small enough to be reached.
    #[test]
    fn the_indexed_use_search_stops_where_a_scan_does() {
        /// The search as a scan of every instruction (before `FunctionAnalysis::use_sites`).
        fn scan(
            analysis: &FunctionAnalysis<'_>,
            (def, reg, from, region, limit): (InstId, Reg, fencelint_cfg::BlockId, Region, usize),
            mut found: impl FnMut(InstId) -> bool,
        ) -> bool {
            let func = analysis.func;
            let mut seen = std::collections::BTreeSet::from([from]);
            let mut queue = std::collections::VecDeque::from([from]);
            let mut steps = 0;
            while let Some(block) = queue.pop_front() {
                let mut killed = false;
                let after_def = block == from && analysis.cfg.block_of(def) == from;
                for id in analysis.cfg.block(block).ids().filter(|&id| !after_def || id > def) {
                    steps += 1;
                    if steps > limit {
                        return false;
                    }
                    let inst = func.inst(id);
                    if inst.uses.contains(&reg)
                        && analysis.reaching_defs(id, reg).defs.contains(&def)
                        && found(id)
                    {
                        return true;
                    }
                    if inst.guard.is_none() && inst.defs.contains(&reg) {
                        killed = true;
                        break;
                    }
                }
                if killed {
                    continue;
                }
                for succ in analysis.cfg.successors(block) {
                    let inside =
                        region == Region::Reachable || analysis.block_dominates(from, succ);
                    if inside && seen.insert(succ) {
                        queue.push_back(succ);
                    }
                }
            }
            false
        }
        let (mut asked, mut answered, mut limited) = (0usize, 0usize, 0usize);
        each_compiled_function(|path, func, _| {
            let analysis = FunctionAnalysis::new(func);
            for def in func.ids() {
                let from = analysis.cfg.block_of(def);
                for &reg in &func.inst(def).defs {
                    for region in [Region::Dominated, Region::Reachable] {
                        let mut unlimited = None;
                        for limit in [USE_SEARCH_LIMIT, 20, 5, 2, 1] {
                            // Take the second use offered, or none.
                            for take in [2, usize::MAX] {
                                let search = |indexed: bool| {
                                    let mut offered = Vec::new();
                                    let found = |id: InstId| {
                                        offered.push(id);
                                        offered.len() == take
                                    };
                                    let question = (def, reg, from, region, limit);
                                    let result = if indexed {
                                        visit_uses_within(
                                            &analysis, def, reg, from, region, limit, found,
                                        )
                                    } else {
                                        scan(&analysis, question, found)
                                    };
                                    (result, offered)
                                };
                                let (indexed, scanned) = (search(true), search(false));
                                let at =
                                    format!("{} {} {def:?} {limit}", path.display(), func.name);
                                assert_eq!(indexed, scanned, "{at}");
                                asked += 1;
                                answered += usize::from(indexed.0);
                                // The limit changed the answer.
                                if take == 2 {
                                    let full = *unlimited.get_or_insert(indexed.0);
                                    limited += usize::from(indexed.0 != full);
                                }
                            }
                        }
                    }
                }
            }
        });
        assert!(
            asked > 100_000 && answered > 1_000 && limited > 100,
            "{asked} {answered} {limited}"
        );
    }

    /// One walk per read (`Unacquired`) answers as a walk per read and exit did
    /// (`reaches_avoiding_memory`), for every memory read of every loop and every branch of the
    /// loop, at every scope, in every compiled fixture.
    #[test]
    fn one_walk_per_read_answers_as_one_walk_per_exit() {
        let mut asked = 0usize;
        each_compiled_function(|path, func, _| {
            let analysis = FunctionAnalysis::new(func);
            for lp in analysis.loops() {
                let branches: Vec<InstId> = lp
                    .blocks
                    .iter()
                    .map(|&b| analysis.cfg.block(b).last())
                    .filter(|&id| func.inst(id).guard.is_some())
                    .collect();
                let reads =
                    lp.memory_insts(&analysis).filter(|&id| func.inst(id).kind.reads_memory());
                for load in reads {
                    for required in [Scope::Cta, Scope::Gpu, Scope::Sys] {
                        let one = Unacquired::walk(&analysis, lp, load, required);
                        for &branch in &branches {
                            let walked = analysis.reaches_avoiding_memory(
                                Point::After(load),
                                branch,
                                |block| lp.contains(block),
                                |id| is_acquire(&analysis, id, load, required),
                            );
                            let answered = one.reaches(&analysis, load, required, branch);
                            let at =
                                format!("{} {} {load:?} {branch:?}", path.display(), func.name);
                            assert_eq!(answered, walked, "{at}");
                            asked += 1;
                        }
                    }
                }
            }
        });
        assert!(asked > 10_000, "{asked} questions");
    }
}
