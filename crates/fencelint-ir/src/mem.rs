//! Memory-semantics vocabulary: state space, semantics, scope.

use std::fmt;

/// The state space an access touches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Space {
    Global,
    /// `.shared` / `.shared::cta`, SASS `LDS`/`STS`.
    SharedCta,
    /// `.shared::cluster`: possibly another CTA's shared memory.
    SharedCluster,
    Local,
    Param,
    Const,
    /// Generic addressing: may be global or shared at run time.
    Generic,
    /// Tensor memory (tcgen05).
    Tensor,
    Unknown,
}

impl Space {
    pub const fn is_shared(self) -> bool {
        matches!(self, Self::SharedCta | Self::SharedCluster)
    }

    /// Memory that other threads can write and so can carry published data.
    pub const fn is_shareable(self) -> bool {
        matches!(
            self,
            Self::Global | Self::SharedCta | Self::SharedCluster | Self::Generic | Self::Unknown
        )
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Global => "global",
            Self::SharedCta => "shared::cta",
            Self::SharedCluster => "shared::cluster",
            Self::Local => "local",
            Self::Param => "param",
            Self::Const => "const",
            Self::Generic => "generic",
            Self::Tensor => "tmem",
            Self::Unknown => "unknown",
        }
    }
}

/// Memory-model semantics of an access or fence, after defaults are applied.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Sem {
    Weak,
    Relaxed,
    /// `.volatile`: relaxed at system scope, not reordered among volatiles.
    Volatile,
    /// `.mmio`: relaxed at system scope, exactly once.
    Mmio,
    Acquire,
    Release,
    AcqRel,
    Sc,
}

impl Sem {
    /// Strong = not weak (PTX ISA, memory consistency model, "strong operations").
    pub const fn is_strong(self) -> bool {
        !matches!(self, Self::Weak)
    }

    pub const fn has_acquire(self) -> bool {
        matches!(self, Self::Acquire | Self::AcqRel | Self::Sc)
    }

    pub const fn has_release(self) -> bool {
        matches!(self, Self::Release | Self::AcqRel | Self::Sc)
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Weak => "weak",
            Self::Relaxed => "relaxed",
            Self::Volatile => "volatile",
            Self::Mmio => "mmio",
            Self::Acquire => "acquire",
            Self::Release => "release",
            Self::AcqRel => "acq_rel",
            Self::Sc => "sc",
        }
    }
}

/// The set of threads an operation synchronizes with, narrowest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    Cta,
    Cluster,
    Gpu,
    Sys,
}

impl Scope {
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Cta => "cta",
            Self::Cluster => "cluster",
            Self::Gpu => "gpu",
            Self::Sys => "sys",
        }
    }

    /// Whether this scope includes every thread that `other` includes.
    pub fn covers(self, other: Self) -> bool {
        self >= other
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The classified memory access of a load, store, atomic or reduction.
///
/// Every such access goes through the generic proxy (PTX `ld`, `st`, `atom`, `red`,
/// `multimem` and their SASS forms), so the access carries no proxy of its own: the operations
/// of the other proxies are instruction kinds ([`crate::InstKind::Async`] for bulk copies,
/// `st.async` and TMA, [`crate::InstKind::Tensormap`] for tensormap accesses,
/// [`crate::InstKind::Tcgen05`] for tensor memory), and the fences between proxies are
/// [`crate::FenceKind`]s.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemAccess {
    pub space: Space,
    pub sem: Sem,
    /// `None` for weak accesses; defaults applied (`atom` without scope is `.gpu`).
    pub scope: Option<Scope>,
    /// Bits per element (32 for `.u32`, 128 for `LDG.E.128`), when known.
    pub width: Option<u32>,
    /// Vector length (1 for scalars, 4 for `.v4`).
    pub vector: u8,
    /// The access bypasses the coherent path (`ld.global.nc`, `LDG.E.CONSTANT`).
    pub non_coherent: bool,
    /// The access moves whole 8x8 matrices, one row address per lane (`ldmatrix`/`stmatrix`,
    /// SASS `LDSM`/`STSM`): the shape of MMA operand tiles.
    pub matrix: bool,
}

impl MemAccess {
    pub const fn new(space: Space, sem: Sem, scope: Option<Scope>) -> Self {
        Self { space, sem, scope, width: None, vector: 1, non_coherent: false, matrix: false }
    }

    pub const fn is_strong(&self) -> bool {
        self.sem.is_strong()
    }

    /// Whether another thread may write what this access touches while the kernel runs:
    /// [shareable](Space::is_shareable) memory through the coherent path. Kernel parameters, the
    /// constant bank and local memory are not shareable, and a `.nc` load may only read memory
    /// that nothing writes during the kernel: such an access races with nothing.
    pub const fn others_may_write(&self) -> bool {
        self.space.is_shareable() && !self.non_coherent
    }

    /// The scope the access is strong at: `.volatile` and `.mmio` count as `.sys`.
    pub fn effective_scope(&self) -> Option<Scope> {
        match self.sem {
            Sem::Weak => None,
            Sem::Volatile | Sem::Mmio => Some(self.scope.unwrap_or(Scope::Sys)),
            _ => self.scope,
        }
    }
}
