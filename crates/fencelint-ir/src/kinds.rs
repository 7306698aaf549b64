//! What an instruction does, as far as memory ordering is concerned.

use crate::Reg;
use crate::mem::{MemAccess, Scope, Sem, Space};

/// The classified kind of an instruction. Everything that doesn't matter to ordering is
/// [`InstKind::Other`] or [`InstKind::Move`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum InstKind {
    Load(MemAccess),
    Store(MemAccess),
    /// `atom` (reads and writes) and `red` (`returns == false`: writes only, never an acquire).
    Atomic {
        mem: MemAccess,
        returns: bool,
    },
    Fence(Fence),
    Barrier(Barrier),
    Mbarrier(MbarrierOp),
    Async(AsyncOp),
    Tensormap(TensormapOp),
    Tcgen05(Tcgen05Op),
    /// `multimem.ld_reduce` (a load), `multimem.st`, `multimem.red`.
    Multimem {
        op: MultimemOp,
        mem: MemAccess,
    },
    Wgmma(WgmmaOp),
    /// `elect.sync`, SASS `ELECT`.
    Elect,
    /// A comparison producing a predicate (`setp`, `ISETP`), for exit-condition analysis.
    Compare,
    Branch,
    Exit,
    Call,
    Return,
    /// An ALU or move instruction.
    Move,
    /// Anything else, kept with its opcode.
    Other,
    /// A statement the front end could not parse.
    Unknown,
}

impl InstKind {
    /// Whether the instruction signals the mbarrier of every CTA of a mask (PTX
    /// `.multicast::cluster` on a bulk copy or a `tcgen05.commit`).
    pub fn multicast(&self) -> bool {
        matches!(
            self,
            Self::Async(
                AsyncOp::Bulk { multicast: true, .. } | AsyncOp::BulkTensor { multicast: true, .. }
            ) | Self::Tcgen05(Tcgen05Op::Commit { multicast: true })
        )
    }

    /// The memory access of a plain load, store, atomic or multimem op.
    pub fn mem(&self) -> Option<&MemAccess> {
        match self {
            Self::Load(mem) | Self::Store(mem) | Self::Atomic { mem, .. } => Some(mem),
            Self::Multimem { mem, .. } => Some(mem),
            _ => None,
        }
    }

    pub fn mem_mut(&mut self) -> Option<&mut MemAccess> {
        match self {
            Self::Load(mem) | Self::Store(mem) | Self::Atomic { mem, .. } => Some(mem),
            Self::Multimem { mem, .. } => Some(mem),
            _ => None,
        }
    }

    /// Whether the instruction accesses memory or orders accesses: everything but ALU work,
    /// comparisons, control flow, calls, `elect`, and what could not be read. Walks that look
    /// only for such instructions skip the others ([`InstKind::is_memory_or_order`] is the
    /// contract of `FunctionAnalysis::reachable_avoiding_memory`).
    pub fn is_memory_or_order(&self) -> bool {
        !matches!(
            self,
            Self::Elect
                | Self::Compare
                | Self::Branch
                | Self::Exit
                | Self::Call
                | Self::Return
                | Self::Move
                | Self::Other
                | Self::Unknown
        )
    }

    /// Whether the instruction reads memory that another thread may have written.
    pub fn reads_memory(&self) -> bool {
        matches!(
            self,
            Self::Load(_)
                | Self::Atomic { returns: true, .. }
                | Self::Multimem { op: MultimemOp::LdReduce, .. }
                | Self::Tcgen05(Tcgen05Op::Ld)
        )
    }

    pub fn writes_memory(&self) -> bool {
        matches!(
            self,
            Self::Store(_)
                | Self::Atomic { .. }
                | Self::Multimem { op: MultimemOp::St | MultimemOp::Red, .. }
                | Self::Tcgen05(Tcgen05Op::St)
                | Self::Async(AsyncOp::StAsync | AsyncOp::RedAsync)
        )
    }

    pub fn fence(&self) -> Option<&Fence> {
        match self {
            Self::Fence(fence) => Some(fence),
            _ => None,
        }
    }
}

/// A fence and what it orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fence {
    pub kind: FenceKind,
    /// `acq_rel` for plain `fence.<scope>`; `sc` for `membar`.
    pub sem: Sem,
    pub scope: Option<Scope>,
}

impl Fence {
    /// Whether the fence, after a strong read, forms an acquire pattern at `scope` or wider.
    pub fn acquires_at(&self, scope: Scope) -> bool {
        let orders_generic =
            matches!(self.kind, FenceKind::Plain | FenceKind::ProxyAlias | FenceKind::L1Invalidate);
        orders_generic && self.sem.has_acquire() && self.scope.is_some_and(|s| s.covers(scope))
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FenceKind {
    /// `fence.{sc,acq_rel,acquire,release}.scope`, `membar`, SASS `MEMBAR`.
    Plain,
    /// `fence.acquire.sync_restrict::shared::cluster.cluster` and its release twin.
    SyncRestrictShared,
    /// `fence.mbarrier_init.release.cluster`.
    MbarrierInit,
    /// `fence.proxy.async{.space}`, SASS `FENCE.VIEW.ASYNC.*`.
    ProxyAsync(Option<Space>),
    /// `fence.proxy.async::generic.{acquire,release}.sync_restrict...`.
    ProxyAsyncRestricted,
    /// `fence.proxy.alias`.
    ProxyAlias,
    /// `fence.proxy.tensormap::generic.release`.
    ProxyTensormapRelease,
    /// `fence.proxy.tensormap::generic.acquire [addr], 128`.
    ProxyTensormapAcquire,
    /// `tcgen05.fence::before_thread_sync` / `after_thread_sync`.
    Tcgen05Before,
    Tcgen05After,
    /// SASS `CCTL.IVALL`: the L1 invalidate that implements the acquire half at gpu/sys scope.
    L1Invalidate,
    /// SASS `ERRBAR`, `CGAERRBAR`: part of a release sequence, orders nothing alone.
    ErrorBarrier,
}

/// Execution barriers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Barrier {
    /// `bar.sync`, `barrier.sync`, `__syncthreads`, SASS `BAR.SYNC`. `partial` when a thread
    /// count is written (`bar.sync 1, 128`, `BAR.SYNC.DEFER_BLOCKING 0x1, 0x80`): a named
    /// barrier, as warp-specialized kernels give each group of warps (it may still count every
    /// thread of the CTA).
    CtaSync { partial: bool },
    /// `bar.arrive`, SASS `BAR.ARV`.
    CtaArrive,
    /// `bar.red`.
    CtaReduce,
    /// `barrier.cluster.arrive{.release|.relaxed}`, SASS `UCGABAR_ARV`.
    ClusterArrive { release: bool },
    /// `barrier.cluster.wait`, SASS `UCGABAR_WAIT`.
    ClusterWait,
    /// `bar.warp.sync`, SASS `WARPSYNC`: orders only among the lanes of one warp.
    WarpSync,
}

/// mbarrier operations (`mbarrier.*`, SASS `SYNCS.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MbarrierOp {
    /// `mbarrier.init`, SASS `SYNCS.EXCH.64`, or on `sm_100` and later (address not uniform)
    /// `STS.64` stores ended by `SYNCS.CCTL.IVALL`, which is the `Init` and has no address.
    Init,
    /// `mbarrier.inval`, SASS `SYNCS.CCTL.IV`.
    Inval,
    Arrive {
        expect_tx: bool,
        drop: bool,
        sem: Sem,
        scope: Scope,
        remote: bool,
    },
    ExpectTx,
    CompleteTx,
    /// `test_wait` / `try_wait` (`try_wait == true`), with `.parity` or a state operand.
    Wait {
        try_wait: bool,
        parity: bool,
        sem: Sem,
        scope: Scope,
    },
    /// `cp.async.mbarrier.arrive`.
    CpAsyncArrive,
    PendingCount,
}

/// Asynchronous copies and their completion mechanisms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AsyncOp {
    /// Ampere `cp.async` (global to shared), SASS `LDGSTS`.
    CpAsync,
    /// `cp.async.commit_group`, SASS `LDGDEPBAR`.
    CpAsyncCommit,
    /// `cp.async.wait_group N`; `cp.async.wait_all` is `pending: Some(0)` with `all`, since it
    /// commits the copies not yet committed before it waits.
    CpAsyncWait {
        pending: Option<u32>,
        all: bool,
    },
    /// `cp.async.bulk` (non-tensor) and `cp.reduce.async.bulk`.
    Bulk {
        dir: BulkDir,
        reduce: bool,
        /// `.multicast::cluster`: the copy lands, and completes the mbarrier, in every CTA of
        /// its mask.
        multicast: bool,
    },
    /// `cp.async.bulk.tensor`, `cp.reduce.async.bulk.tensor`, SASS `UTMALDG`/`UTMASTG`.
    BulkTensor {
        dir: BulkDir,
        reduce: bool,
        /// `.multicast::cluster`, as for [`AsyncOp::Bulk`].
        multicast: bool,
    },
    /// `cp.async.bulk.prefetch{.tensor}`.
    BulkPrefetch,
    /// `cp.async.bulk.commit_group`, SASS `UTMACMDFLUSH`.
    BulkCommit,
    /// `cp.async.bulk.wait_group{.read} N`; SASS `DEPBAR.LE SB0, N` (with `read` unknown there).
    BulkWait {
        pending: Option<u32>,
        read_only: bool,
    },
    /// `st.async ... mbarrier::complete_tx` (a cluster-scope release through the mbarrier).
    StAsync,
    RedAsync,
}

/// Direction of a bulk copy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BulkDir {
    /// Global to shared memory (a load; completes on an mbarrier).
    GlobalToShared,
    /// Shared to global memory (a store; completes through bulk groups).
    SharedToGlobal,
    /// `shared::cta` to `shared::cluster`.
    SharedToShared,
    Unknown,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TensormapOp {
    Replace,
    CpFenceproxy,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tcgen05Op {
    Alloc,
    Dealloc,
    Relinquish,
    Ld,
    St,
    WaitLd,
    WaitSt,
    Mma,
    Cp,
    Shift,
    /// `tcgen05.commit ... mbarrier::arrive::one`: arrives on an mbarrier when prior async
    /// tcgen05 ops complete; with `.multicast::cluster`, on the mbarrier of every CTA of its
    /// mask.
    Commit {
        multicast: bool,
    },
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MultimemOp {
    LdReduce,
    St,
    Red,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WgmmaOp {
    Fence,
    /// `wgmma.mma_async` (`HGMMA`). `register_a` is the first register of the A fragment when
    /// the MMA takes A from registers (`{%r1, %r2, %r3, %r4}`, SASS `HGMMA R24, R28, gdesc[..]`);
    /// it then reads only B from shared memory.
    Mma {
        register_a: Option<Reg>,
    },
    Commit,
    Wait,
}
