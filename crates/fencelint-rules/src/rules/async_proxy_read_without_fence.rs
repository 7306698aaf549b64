//! `async-proxy-read-without-fence`: shared memory written through the generic proxy is read
//! next by the async proxy (a TMA or bulk store, `wgmma`, `tcgen05.mma`) with no
//! `fence.proxy.async` between the write and the asynchronous operation.

use std::collections::BTreeMap;

use fencelint_cfg::{AddrRoot, FunctionAnalysis};
use fencelint_ir::{
    AddrBase, AddressRole, AluOp, AsyncOp, Barrier, BulkDir, Dialect, Fence, FenceKind, Inst,
    InstId, InstKind, MbarrierOp, Reg, Space, Tcgen05Op, ValueOp, WgmmaOp,
};

use crate::{Category, Dialects, FunctionCx, Rule, RuleMeta, Status};

pub(crate) struct AsyncProxyReadWithoutFence;

static META: RuleMeta = RuleMeta {
    name: "async-proxy-read-without-fence",
    category: Category::Correctness,
    dialects: Dialects::BOTH,
    min_sm: Some(90),
    status: Status::Stable { since: "0.1.0" },
    summary: "shared memory written through the generic proxy is read by the async proxy without fence.proxy.async",
    doc: include_str!("../../../../rules/async-proxy-read-without-fence.md"),
};

impl Rule for AsyncProxyReadWithoutFence {
    fn meta(&self) -> &'static RuleMeta {
        &META
    }

    fn check_function(&self, cx: &mut FunctionCx<'_>) {
        let analysis = cx.analysis;
        let func = analysis.func;
        let readers: Vec<InstId> =
            func.ids().filter(|&id| async_read_of_shared(analysis, id)).collect();
        if readers.is_empty() {
            return;
        }
        // The first unfenced write that reaches each asynchronous reader.
        let mut findings: BTreeMap<InstId, InstId> = BTreeMap::new();
        let is_sass = cx.module.dialect == Some(Dialect::Sass);
        // The MMAs that take A from registers, and their first A register.
        let register_a: Vec<(InstId, Reg)> = readers
            .iter()
            .filter_map(|&id| match func.inst(id).kind {
                InstKind::Wgmma(WgmmaOp::Mma { register_a: Some(a) }) => Some((id, a)),
                _ => None,
            })
            .collect();
        for write in func.ids().filter(|&id| is_generic_shared_write(analysis, is_sass, id)) {
            let written = written_object(analysis, write);
            // Asked at most once per write, and only when an MMA of that kind is reached.
            let fragment = std::cell::OnceCell::new();
            let is_fragment = || {
                *fragment.get_or_init(|| stores_register_a_fragment(analysis, write, &register_a))
            };
            analysis.walk_forward(write, Publish::default(), |id, state| {
                let inst = func.inst(id);
                if is_proxy_async_fence(&inst.kind) {
                    // A fence in the writing thread before the publishing synchronization (or
                    // with none: the same thread issues the asynchronous operation) suffices.
                    return if state.synchronized {
                        Some(Publish { fenced_after_sync: true, ..state })
                    } else {
                        None
                    };
                }
                if is_synchronization(&inst.kind) {
                    return if state.fenced_after_sync {
                        None
                    } else {
                        Some(Publish { synchronized: true, ..state })
                    };
                }
                if readers.contains(&id)
                    && may_read(analysis, id, write, written.as_ref(), &is_fragment)
                {
                    findings.entry(id).or_insert(write);
                    return None;
                }
                Some(state)
            });
        }
        for (reader, write) in findings {
            report(cx, reader, write);
        }
    }
}

/// What a path from the write has passed so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
struct Publish {
    /// A barrier or mbarrier operation that can hand the write to another thread.
    synchronized: bool,
    /// A proxy fence after that synchronization; it counts once another one follows.
    fenced_after_sync: bool,
}

/// An asynchronous operation that reads shared memory through the async proxy.
fn async_read_of_shared(analysis: &FunctionAnalysis<'_>, id: InstId) -> bool {
    match &analysis.func.inst(id).kind {
        InstKind::Async(
            AsyncOp::BulkTensor { dir: BulkDir::SharedToGlobal, .. }
            | AsyncOp::Bulk { dir: BulkDir::SharedToGlobal | BulkDir::SharedToShared, .. },
        ) => true,
        // The shared-memory operands of an MMA are named by descriptors: which buffer they
        // read is not followed, so any shared-memory write may be an operand.
        InstKind::Tcgen05(Tcgen05Op::Mma | Tcgen05Op::Cp)
        | InstKind::Wgmma(WgmmaOp::Mma { .. }) => true,
        _ => false,
    }
}

/// A write to shared memory through the generic proxy: `st.shared`, a shared atomic,
/// `stmatrix`, or a generic `st` whose address came from `cvta.shared`.
fn is_generic_shared_write(analysis: &FunctionAnalysis<'_>, is_sass: bool, id: InstId) -> bool {
    let inst = analysis.func.inst(id);
    let shared = match &inst.kind {
        InstKind::Store(mem) | InstKind::Atomic { mem, .. } => match mem.space {
            Space::SharedCta | Space::SharedCluster => true,
            Space::Generic => {
                inst.address.as_ref().is_some_and(|a| generic_from_shared(analysis, id, &a.base))
            }
            _ => false,
        },
        _ => false,
    };
    shared
        && !(is_sass
            && (is_allocator_bookkeeping(analysis, id) || is_uniform_address(analysis, inst)))
}

/// In SASS, a shared-memory write whose address has no per-thread part: a uniform register
/// plus a constant (`STS [UR8+0x400], R0`), or a constant alone. Every lane that executes it
/// writes the same bytes, so it is one thread's (or one warp's) bookkeeping: a ticket, a tile
/// index, a tensor map copied into shared memory, not a tile that threads fill together.
fn is_uniform_address(analysis: &FunctionAnalysis<'_>, inst: &Inst) -> bool {
    let Some(address) = inst.address.as_ref() else { return false };
    match &address.base {
        AddrBase::Reg(reg) => analysis.func.reg_name(*reg).starts_with("UR"),
        AddrBase::Absolute => true,
        AddrBase::Symbol(_) | AddrBase::Complex(_) => false,
    }
}

/// In SASS, `tcgen05.alloc`, `dealloc` and `relinquish_alloc_permit` expand into software
/// sequences that write shared memory (`ATOMS`, `STS`) after the allocating instruction (the
/// allocation itself is a retry loop). Those writes are the allocator's bookkeeping, not operands
/// of any MMA: a shared-memory write that such an instruction dominates, shortly after it and with
/// no barrier in between, is skipped.
fn is_allocator_bookkeeping(analysis: &FunctionAnalysis<'_>, id: InstId) -> bool {
    /// How far after the allocating instruction its bookkeeping writes were seen (up to 25
    /// instructions in ptxas 13.5 output, across the retry loop).
    const WINDOW: u32 = 32;
    let func = analysis.func;
    let start = id.0.saturating_sub(WINDOW);
    let Some(alloc) = (start..id.0).map(InstId).rev().find(|&i| {
        matches!(
            func.inst(i).kind,
            InstKind::Tcgen05(Tcgen05Op::Alloc | Tcgen05Op::Relinquish | Tcgen05Op::Dealloc)
        )
    }) else {
        return false;
    };
    let barrier_between =
        (alloc.0..id.0).map(InstId).any(|i| matches!(func.inst(i).kind, InstKind::Barrier(_)));
    let dominated = (start..id.0).map(InstId).any(|i| {
        matches!(
            func.inst(i).kind,
            InstKind::Tcgen05(Tcgen05Op::Alloc | Tcgen05Op::Relinquish | Tcgen05Op::Dealloc)
        ) && analysis.dominates(i, id)
    });
    dominated && !barrier_between
}

/// Whether a generic address register was converted from a shared-window address.
fn generic_from_shared(analysis: &FunctionAnalysis<'_>, at: InstId, base: &AddrBase) -> bool {
    let AddrBase::Reg(reg) = base else { return false };
    let (mut at, mut reg) = (at, *reg);
    for _ in 0..32 {
        let reach = analysis.reaching_defs(at, reg);
        let [def] = reach.defs.as_slice() else { return false };
        let inst = analysis.func.inst(*def);
        if matches!(inst.alu, Some(AluOp::ToGeneric(space)) if space.is_shared()) {
            return true;
        }
        match inst.value {
            Some(ValueOp::Copy(src) | ValueOp::AddImm(src, _)) => (at, reg) = (*def, src),
            _ => return false,
        }
    }
    false
}

/// The variable a write stores into, when known.
fn written_object(analysis: &FunctionAnalysis<'_>, write: InstId) -> Option<AddrRoot> {
    let address = analysis.func.inst(write).address.as_ref()?;
    analysis.address_object(write, address)
}

/// Whether the asynchronous reader may read what `write` wrote. TMA and bulk stores: unless the
/// written variable and the source variable are both known and differ. MMAs name their operands
/// by descriptors, which are not decoded: only writes shaped like operand tiles count, `stmatrix`
/// and vector stores of 64 bits or more (scalar stores are the scheduling and bookkeeping data
/// that kernels keep in shared memory next to the tiles).
fn may_read(
    analysis: &FunctionAnalysis<'_>,
    reader: InstId,
    write: InstId,
    written: Option<&AddrRoot>,
    stores_a_fragment: &dyn Fn() -> bool,
) -> bool {
    let inst = analysis.func.inst(reader);
    if matches!(inst.kind, InstKind::Tcgen05(_) | InstKind::Wgmma(_)) {
        // An MMA that takes A from registers reads only its B tile from shared memory. A
        // `stmatrix` of a register A fragment (the value some MMA of the function takes from
        // registers) shares that fragment with other warps, as FlashMLA shares its softmax
        // output: it is no B tile. An MMA that reads A from shared memory may read it.
        if matches!(inst.kind, InstKind::Wgmma(WgmmaOp::Mma { register_a: Some(_) }))
            && stores_a_fragment()
        {
            return false;
        }
        return is_tile_store(analysis.func.inst(write));
    }
    let Some(written) = written else { return true };
    let source = match &inst.kind {
        InstKind::Async(AsyncOp::BulkTensor { .. }) => inst.address.as_ref(),
        InstKind::Async(AsyncOp::Bulk { .. }) => inst.extra_address(AddressRole::Source),
        _ => None,
    };
    let Some(source) = source else { return true };
    analysis.address_object(reader, source).is_none_or(|read| read == *written)
}

/// Whether `write` is a `stmatrix` / `STSM` that stores a register A fragment of an MMA of the
/// function: one of its data registers (not its address) is the MMA's first A register, with
/// the same definitions reaching both, so the two read the same value.
fn stores_register_a_fragment(
    analysis: &FunctionAnalysis<'_>,
    write: InstId,
    register_a: &[(InstId, Reg)],
) -> bool {
    let func = analysis.func;
    let inst = func.inst(write);
    let InstKind::Store(mem) = &inst.kind else { return false };
    if !mem.matrix {
        return false;
    }
    let in_address = |reg: Reg| {
        inst.address.as_ref().is_some_and(|address| match &address.base {
            AddrBase::Reg(base) => *base == reg,
            AddrBase::Complex(regs) => regs.contains(&reg),
            AddrBase::Symbol(_) | AddrBase::Absolute => false,
        })
    };
    register_a.iter().any(|&(mma, a)| {
        inst.uses.contains(&a)
            && !in_address(a)
            && analysis.reaching_defs(write, a) == analysis.reaching_defs(mma, a)
    })
}

/// `stmatrix` / `STSM`, or a store of at least 64 bits (`st.shared.v2.b32`, `STS.64`,
/// `STS.128`).
fn is_tile_store(inst: &Inst) -> bool {
    let InstKind::Store(mem) = &inst.kind else { return false };
    mem.matrix || mem.width.unwrap_or(32) * u32::from(mem.vector.max(1)) >= 64
}

/// `fence.proxy.async` (all of it, or restricted to shared memory), SASS `FENCE.VIEW.ASYNC.S`,
/// and the restricted generic-to-async release fence.
fn is_proxy_async_fence(kind: &InstKind) -> bool {
    match kind {
        InstKind::Fence(Fence { kind: FenceKind::ProxyAsync(space), .. }) => {
            matches!(space, None | Some(Space::SharedCta | Space::SharedCluster))
        }
        InstKind::Fence(Fence { kind: FenceKind::ProxyAsyncRestricted, sem, .. }) => {
            sem.has_release()
        }
        _ => false,
    }
}

/// Synchronization that can hand the writes of one thread to the thread that issues the
/// asynchronous operation.
fn is_synchronization(kind: &InstKind) -> bool {
    matches!(
        kind,
        InstKind::Barrier(
            Barrier::CtaSync { .. }
                | Barrier::CtaArrive
                | Barrier::CtaReduce
                | Barrier::ClusterArrive { .. }
                | Barrier::ClusterWait
        ) | InstKind::Mbarrier(MbarrierOp::Arrive { .. } | MbarrierOp::Wait { .. })
    )
}

fn report(cx: &mut FunctionCx<'_>, reader: InstId, write: InstId) {
    let dialect = cx.module.dialect.unwrap_or(Dialect::Ptx);
    let reader_op = cx.inst(reader).opcode.clone();
    let write_op = cx.inst(write).opcode.clone();
    let fence = match dialect {
        Dialect::Ptx => "`fence.proxy.async.shared::cta`",
        Dialect::Sass => "`FENCE.VIEW.ASYNC.S`",
    };
    let message = format!(
        "`{reader_op}` reads shared memory through the async proxy after `{write_op}` wrote it through the generic proxy, with no {fence} in between"
    );
    let help = match dialect {
        Dialect::Ptx => {
            "insert `fence.proxy.async.shared::cta;` after the shared-memory writes, in the writing threads, before the barrier that publishes them"
        }
        Dialect::Sass => {
            "insert `fence.proxy.async.shared::cta;` (SASS `FENCE.VIEW.ASYNC.S`) after the shared-memory writes, before the barrier that publishes them"
        }
    };
    let report = cx
        .report(reader, message)
        .primary_label("the async proxy reads shared memory here")
        .secondary(write, "written here through the generic proxy")
        .note("generic-proxy writes become visible to the async proxy only through a proxy fence in the writing thread; a barrier alone does not cross proxies")
        .help(help);
    drop(report);
}
