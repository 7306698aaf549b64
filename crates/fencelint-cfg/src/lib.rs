//! The control-flow graph of one function and the analyses that rules share.
//!
//! [`FunctionAnalysis`] is built once per function: basic blocks and edges ([`Cfg`]), dominators,
//! natural loops with their exits ([`Loop`]), demand-driven reaching definitions, the loads that
//! decide a loop's exit branch, reachability that avoids a set of instructions, and symbolic
//! addresses. Every walk has a budget; a walk that hits it says so ([`Budget`]) instead of
//! hanging or silently passing.

mod address;
mod cfg;
mod dataflow;
mod loops;
mod object;
mod walk;

pub use address::{AddrKey, AddrRoot};
pub use cfg::{Block, BlockId, Cfg, EdgeKind};
pub use dataflow::{Point, Reach};
pub use loops::Loop;

use std::cell::{Cell, OnceCell};

use fencelint_ir::{Function, InstId};
use petgraph::algo::dominators::{self, Dominators};
use petgraph::graph::NodeIndex;

/// Work limits for one function's walks. Exceeding one marks the analysis incomplete.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Instructions visited by one forward or backward walk.
    pub walk_steps: usize,
    /// Steps through definitions in one backward slice.
    pub slice_steps: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self { walk_steps: 2_000_000, slice_steps: 4_096 }
    }
}

/// All analyses of one function, computed once and shared by the rules.
pub struct FunctionAnalysis<'f> {
    pub func: &'f Function,
    pub cfg: Cfg,
    pub budget: Budget,
    dominators: OnceCell<Dominators<NodeIndex>>,
    loops: OnceCell<Vec<Loop>>,
    incomplete: Cell<bool>,
}

impl<'f> FunctionAnalysis<'f> {
    pub fn new(func: &'f Function) -> Self {
        Self::with_budget(func, Budget::default())
    }

    pub fn with_budget(func: &'f Function, budget: Budget) -> Self {
        Self {
            func,
            cfg: Cfg::build(func),
            budget,
            dominators: OnceCell::new(),
            loops: OnceCell::new(),
            incomplete: Cell::new(false),
        }
    }

    pub fn dominators(&self) -> &Dominators<NodeIndex> {
        self.dominators.get_or_init(|| dominators::simple_fast(&self.cfg.graph, self.cfg.entry()))
    }

    /// Whether block `a` dominates block `b`.
    pub fn block_dominates(&self, a: BlockId, b: BlockId) -> bool {
        let doms = self.dominators();
        let target = self.cfg.node(a);
        let mut node = self.cfg.node(b);
        loop {
            if node == target {
                return true;
            }
            match doms.immediate_dominator(node) {
                Some(idom) if idom != node => node = idom,
                _ => return false,
            }
        }
    }

    /// Whether instruction `a` executes before `b` on every path to `b`.
    pub fn dominates(&self, a: InstId, b: InstId) -> bool {
        let (block_a, block_b) = (self.cfg.block_of(a), self.cfg.block_of(b));
        if block_a == block_b {
            return a <= b;
        }
        self.block_dominates(block_a, block_b)
    }

    /// Natural loops, outermost first within a header order; loops sharing a header are merged.
    pub fn loops(&self) -> &[Loop] {
        self.loops.get_or_init(|| loops::find_loops(self))
    }

    /// The innermost loop that contains `inst`.
    pub fn innermost_loop(&self, inst: InstId) -> Option<&Loop> {
        let block = self.cfg.block_of(inst);
        self.loops().iter().filter(|l| l.contains(block)).min_by_key(|l| l.blocks.len())
    }

    /// True when some walk of this function stopped at its budget.
    pub fn is_incomplete(&self) -> bool {
        self.incomplete.get()
    }

    pub(crate) fn mark_incomplete(&self) {
        self.incomplete.set(true);
    }
}
