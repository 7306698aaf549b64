//! `cp-async-not-waited`: the shared-memory destination of an Ampere `cp.async` is read before
//! a `cp.async.wait_group` / `wait_all` covers the copy's group, or another thread's copy is read
//! after the wait with no CTA barrier in between.

use std::collections::{BTreeMap, BTreeSet};

use fencelint_cfg::{AddrKey, AddrRoot, AddrSpan, FunctionAnalysis, ValueNumber};
use fencelint_ir::{
    AddrBase, Address, AluOp, AsyncOp, Barrier, InstId, InstKind, MbarrierOp, ValueOp,
};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct CpAsyncNotWaited;

static META: RuleMeta = RuleMeta {
    name: "cp-async-not-waited",
    category: Category::Correctness,
    dialects: Dialects::PTX,
    min_sm: Some(80),
    status: Status::Stable { since: "0.1.0" },
    summary: "the destination of a cp.async is read before a wait covers its group, or another thread's copy is read without a barrier",
    doc: include_str!("../../../../rules/cp-async-not-waited.md"),
};

/// The copy size is not recorded in the IR; 16 bytes (the largest `cp.async`) is assumed.
const COPY_BYTES: i64 = 16;

/// Groups counted after a copy; more than this is "many".
const MAX_GROUPS: u8 = 16;

impl Rule for CpAsyncNotWaited {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        // Only memory and ordering instructions can match (`FunctionAnalysis::memory_insts`).
        let copies: Vec<AsyncCopy> =
            analysis.memory_insts().iter().filter_map(|&id| copy_of(analysis, id)).collect();
        if copies.is_empty() {
            return;
        }
        let mut findings: BTreeMap<InstId, Finding> = BTreeMap::new();
        for copy in &copies {
            let Some(finding) = first_unordered_read(analysis, copy, &copies) else { continue };
            findings.entry(finding.read).or_insert(finding);
        }
        for finding in findings.into_values() {
            report(cx, &finding);
        }
    }
}

/// One `cp.async` and where it writes.
struct AsyncCopy {
    id: InstId,
    key: AddrKey,
    object: Option<AddrRoot>,
    /// The thread-dependent terms of the destination address (see [`thread_terms`]).
    thread_terms: Option<BTreeSet<ValueNumber>>,
    /// Where the copies of every thread may write, when their indices bound it.
    span: Option<AddrSpan>,
}

fn copy_of(analysis: &FunctionAnalysis<'_>, id: InstId) -> Option<AsyncCopy> {
    let inst = analysis.func.inst(id);
    if !matches!(inst.kind, InstKind::Async(AsyncOp::CpAsync)) {
        return None;
    }
    let address = inst.address.as_ref()?;
    Some(AsyncCopy {
        id,
        key: analysis.address_key(id, address),
        object: analysis.address_object(id, address),
        thread_terms: thread_terms(analysis, id, address),
        span: analysis.address_span(id, address),
    })
}

/// What a path from the copy has passed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Progress {
    /// `cp.async.commit_group`s since the copy.
    groups: u8,
    /// The wait that covers the copy's group, once passed.
    waited: Option<InstId>,
}

#[derive(Clone, Copy, Debug)]
enum Hazard {
    /// The thread reads its own destination before the wait; `groups` committed so far.
    NotWaited { groups: u8 },
    /// After the wait, a read of the same buffer at an address this thread did not copy.
    OtherThread { wait: InstId },
}

struct Finding {
    read: InstId,
    copy: InstId,
    hazard: Hazard,
}

/// The first read that the copy reaches unordered, on a path that the plain walk finds and the
/// walk that remembers branch outcomes confirms (`walk_forward_learning`: a path through two
/// contradicting tests of one predicate is not taken).
fn first_unordered_read(
    analysis: &FunctionAnalysis<'_>,
    copy: &AsyncCopy,
    copies: &[AsyncCopy],
) -> Option<Finding> {
    let found = unordered_reads(analysis, copy, copies, false)?;
    if found.is_empty() {
        return None;
    }
    // A confirming walk stopped at its budget leaves the plain walk's answer.
    let found = unordered_reads(analysis, copy, copies, true).unwrap_or(found);
    let (&read, &hazard) = found.iter().next()?;
    Some(Finding { read, copy: copy.id, hazard })
}

/// The reads a walk from the copy finds unordered, by read; `None` when the confirming walk
/// (`learning`) stopped at its budget.
fn unordered_reads(
    analysis: &FunctionAnalysis<'_>,
    copy: &AsyncCopy,
    copies: &[AsyncCopy],
    learning: bool,
) -> Option<BTreeMap<InstId, Hazard>> {
    let func = analysis.func;
    let mut found: BTreeMap<InstId, Hazard> = BTreeMap::new();
    let start = Progress { groups: 0, waited: None };
    let step = |id: InstId, state: Progress| {
        let inst = func.inst(id);
        match &inst.kind {
            InstKind::Async(AsyncOp::CpAsyncCommit) => {
                Some(Progress { groups: state.groups.saturating_add(1).min(MAX_GROUPS), ..state })
            }
            InstKind::Async(AsyncOp::CpAsyncWait { pending, all }) => {
                // `wait_all` commits first; `wait_group N` covers the copy once more than N
                // groups were committed after it. An unknown N counts as covering.
                let covers = *all || pending.is_none_or(|n| u32::from(state.groups) > n);
                if covers && state.waited.is_none() {
                    Some(Progress { waited: Some(id), ..state })
                } else {
                    Some(state)
                }
            }
            // A copy tracked by an mbarrier completes through it; not followed.
            InstKind::Mbarrier(MbarrierOp::CpAsyncArrive) => None,
            InstKind::Barrier(Barrier::CtaSync { .. } | Barrier::CtaReduce)
                if state.waited.is_some() =>
            {
                None
            }
            InstKind::Load(mem) if mem.space.is_shareable() => {
                if let Some(hazard) = classify_read(analysis, id, copy, copies, state) {
                    found.entry(id).or_insert(hazard);
                }
                Some(state)
            }
            _ => Some(state),
        }
    };
    let complete = if learning {
        analysis.walk_forward_learning(copy.id, start, step)
    } else {
        analysis.walk_forward(copy.id, start, step);
        true
    };
    complete.then_some(found)
}

fn classify_read(
    analysis: &FunctionAnalysis<'_>,
    read: InstId,
    copy: &AsyncCopy,
    copies: &[AsyncCopy],
    state: Progress,
) -> Option<Hazard> {
    let inst = analysis.func.inst(read);
    let address = inst.address.as_ref()?;
    let key = analysis.address_key(read, address);
    let bytes = inst
        .mem()
        .map_or(4, |m| i64::from(m.width.unwrap_or(32) / 8).max(1) * i64::from(m.vector.max(1)));
    match state.waited {
        None => overlaps(&copy.key, COPY_BYTES, &key, bytes)
            .then_some(Hazard::NotWaited { groups: state.groups }),
        Some(wait) => {
            // Another thread's slot: the same buffer, at an address whose thread-dependent part
            // differs from that of every copy of this thread into the buffer (an address that
            // differs only in, say, the pipeline stage is the thread's own element).
            let object = analysis.address_object(read, address)?;
            if copy.object.as_ref() != Some(&object) {
                return None;
            }
            let read_terms = thread_terms(analysis, read, address)?;
            let own = copies.iter().filter(|c| c.object.as_ref() == Some(&object)).any(|c| {
                c.key.root == key.root || c.thread_terms.as_ref().is_none_or(|t| *t == read_terms)
            });
            // Bytes that the copy cannot reach in any thread, whatever its index (a header
            // word before the copies' region of one dynamic shared array).
            let apart = copy.span.as_ref().is_some_and(|span| {
                analysis
                    .address_span(read, address)
                    .is_some_and(|read_span| !span.may_meet(COPY_BYTES, &read_span, bytes))
            });
            (!own && !apart).then_some(Hazard::OtherThread { wait })
        }
    }
}

/// The terms of an address that depend on the thread's index: the address is split into the
/// operands of its additions (through moves, `cvt`, constant adds and register adds), and the
/// terms whose computation reads `%tid`, `%laneid` or `%warpid` are kept, named by their value
/// number ([`FunctionAnalysis::value_number`]): a term computed again the same way before the
/// read is the same term. `None` when a term has no single definition.
fn thread_terms(
    analysis: &FunctionAnalysis<'_>,
    at: InstId,
    address: &Address,
) -> Option<BTreeSet<ValueNumber>> {
    let AddrBase::Reg(reg) = &address.base else { return Some(BTreeSet::new()) };
    let mut terms = BTreeSet::new();
    let mut work = vec![(at, *reg)];
    let mut steps = 0usize;
    while let Some((at, reg)) = work.pop() {
        steps += 1;
        if steps > MAX_TERM_STEPS {
            return None;
        }
        if is_thread_index(analysis.func.reg_name(reg)) {
            // The index itself, used directly as an address term.
            terms.insert(analysis.value_number(at, reg));
            continue;
        }
        let reach = analysis.reaching_defs(at, reg);
        let [def] = reach.defs.as_slice() else { return None };
        if reach.from_entry {
            return None;
        }
        let inst = analysis.func.inst(*def);
        match &inst.value {
            Some(ValueOp::Copy(src) | ValueOp::AddImm(src, _)) => work.push((*def, *src)),
            Some(ValueOp::Param(_) | ValueOp::SymbolAddr(_) | ValueOp::Imm(_)) => {}
            Some(ValueOp::Mapa(_)) => return None,
            Some(ValueOp::Sum(a, b)) => work.extend([(*def, *a), (*def, *b)]),
            // A row of the thread's own elements: a multiply-add by a constant of a value that
            // no thread index decides (`mad.lo.s32 %r79, %r1424, 384, %r1200`, a loop's row
            // counter) adds a thread-independent offset to the addend.
            None if is_scaled_offset(analysis, *def)? => work.push((*def, inst.uses[1])),
            // No value op, or a predicate.
            _ => {
                if depends_on_thread_index(analysis, *def)? {
                    terms.insert(analysis.value_number(at, reg));
                }
            }
        }
    }
    Some(terms)
}

const MAX_TERM_STEPS: usize = 512;

/// Whether `def` is a multiply-add of one register by a constant plus another register, the
/// first not decided by a thread index. The IR keeps no operand positions, so the addend is
/// told from the other multiplicand by pointing into a variable (`mad.lo.s32 %r, %row, 384,
/// %column` with `%column = smem + 8*tid`), which a factor does not. `None` when the slice is
/// too large to tell.
fn is_scaled_offset(analysis: &FunctionAnalysis<'_>, def: InstId) -> Option<bool> {
    let inst = analysis.func.inst(def);
    if inst.alu != Some(AluOp::MultiplyAdd)
        || inst.guard.is_some()
        || inst.uses.len() != 2
        || analysis.value_object(def, inst.uses[1]).is_none()
    {
        return Some(false);
    }
    let factor = inst.uses[0];
    if is_thread_index(analysis.func.reg_name(factor)) {
        return Some(false);
    }
    let reach = analysis.reaching_defs(def, factor);
    if reach.from_entry {
        return Some(false);
    }
    for &d in &reach.defs {
        if depends_on_thread_index(analysis, d)? {
            return Some(false);
        }
    }
    Some(true)
}

fn is_thread_index(name: &str) -> bool {
    name.starts_with("%tid") || name.starts_with("%laneid") || name.starts_with("%warpid")
}

/// Whether the value computed by `def` depends on the thread's index. `None` when the slice
/// grows too large to tell.
fn depends_on_thread_index(analysis: &FunctionAnalysis<'_>, def: InstId) -> Option<bool> {
    let mut seen: BTreeSet<InstId> = BTreeSet::new();
    let mut work = vec![def];
    while let Some(id) = work.pop() {
        if !seen.insert(id) {
            continue;
        }
        if seen.len() > MAX_TERM_STEPS {
            return None;
        }
        let inst = analysis.func.inst(id);
        for &used in &inst.uses {
            if is_thread_index(analysis.func.reg_name(used)) {
                return Some(true);
            }
            work.extend(analysis.reaching_defs(id, used).defs);
        }
    }
    Some(false)
}

/// Whether `[a, a + a_len)` and `[b, b + b_len)` certainly overlap.
fn overlaps(a: &AddrKey, a_len: i64, b: &AddrKey, b_len: i64) -> bool {
    !matches!(a.root, AddrRoot::Unknown(_))
        && a.root == b.root
        && a.mapped == b.mapped
        && a.offset < b.offset + b_len
        && b.offset < a.offset + a_len
}

fn report(cx: &mut FunctionCx<'_>, finding: &Finding) {
    let read_op = cx.inst(finding.read).opcode.clone();
    let copy_op = cx.inst(finding.copy).opcode.clone();
    match finding.hazard {
        Hazard::NotWaited { groups } => {
            let message = format!(
                "`{read_op}` reads the destination of `{copy_op}` before a `cp.async.wait_group` covers the copy's group"
            );
            let note = match groups {
                0 => "the copy's group is not committed before the read; `cp.async.wait_group` waits only for committed groups".to_owned(),
                1 => "1 group is committed after the copy on this path; only `cp.async.wait_group 0` covers it".to_owned(),
                n => format!("{n} groups are committed after the copy on this path; `cp.async.wait_group N` covers it only when N < {n}"),
            };
            let report = cx
                .report(finding.read, message)
                .primary_label("this read may run before the copy has written shared memory")
                .secondary(finding.copy, "the asynchronous copy is issued here")
                .note(note)
                .help("insert `cp.async.commit_group;` and a `cp.async.wait_group` that covers the copy before this read");
            drop(report);
        }
        Hazard::OtherThread { wait } => {
            let message = format!(
                "`{read_op}` reads shared memory that another thread copies with `{copy_op}`, with no `bar.sync` after the wait"
            );
            let report = cx
                .report(finding.read, message)
                .primary_label("this read is not ordered after the other thread's copy")
                .secondary(finding.copy, "this thread's copy into the same buffer")
                .secondary(wait, "this wait covers only the copies of the waiting thread")
                .note("`cp.async.wait_group` makes the copies visible to the issuing thread only")
                .help("insert `bar.sync 0;` (`__syncthreads()`) between the wait and this read");
            drop(report);
        }
    }
}
