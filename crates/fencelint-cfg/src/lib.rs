//! The control-flow graph of one function and the analyses that rules share.
//!
//! [`FunctionAnalysis`] is built once per function: basic blocks and edges ([`Cfg`]), dominators,
//! natural loops with their exits ([`Loop`]), demand-driven reaching definitions, the loads that
//! decide a loop's exit branch, reachability that avoids a set of instructions, and symbolic
//! addresses. Every walk has a budget; a walk that hits it says so ([`Budget`]) instead of
//! hanging or silently passing.

mod address;
mod assume;
mod cfg;
mod dataflow;
mod dominators;
mod edges;
mod loops;
mod object;
mod outcomes;
mod reach;
mod values;
mod walk;

pub use address::{AddrKey, AddrRoot};
pub use cfg::{Block, BlockId, Cfg, EdgeKind};
pub use dataflow::{Point, Reach};
pub use dominators::DomTree;
pub use loops::Loop;
pub use object::{AddrSpan, AddrSum};
pub use outcomes::Outcomes;
pub use values::ValueNumber;

use std::cell::{Cell, OnceCell, RefCell, RefMut};

use fencelint_ir::{Function, InstId, Reg};

use rustc_hash::FxHashMap;

/// Work limits for one function's walks. Exceeding one marks the analysis incomplete.
#[derive(Clone, Copy, Debug)]
pub struct Budget {
    /// Instructions visited by one forward or backward walk.
    pub walk_steps: usize,
    /// Steps through definitions in one backward slice. 4,096 stopped the exit slices of six
    /// large loops of NCCL's `sm_75` `COLLNET_DIRECT` kernels (up to 8,192 needed); a slice costs
    /// about a microsecond a step.
    pub slice_steps: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Self { walk_steps: 2_000_000, slice_steps: 16_384 }
    }
}

/// All analyses of one function, computed once and shared by the rules.
pub struct FunctionAnalysis<'f> {
    pub func: &'f Function,
    pub cfg: Cfg,
    pub budget: Budget,
    dominators: OnceCell<DomTree>,
    /// Pre- and post-order numbers of each block in the dominator tree (`u32::MAX` when the
    /// block is unreachable), for constant-time dominance queries.
    dom_order: OnceCell<(Vec<u32>, Vec<u32>)>,
    /// The instructions that define each register, in text order.
    def_sites: OnceCell<Vec<Vec<InstId>>>,
    /// The instructions that read each register, in text order.
    use_sites: OnceCell<Vec<Vec<InstId>>>,
    loops: OnceCell<Vec<Loop>>,
    /// The index in `loops` of each block's innermost loop (`u32::MAX`: none).
    innermost: OnceCell<Vec<u32>>,
    /// Canonical register values already computed ([`FunctionAnalysis::value_key`]): rules ask
    /// for the address of the same instruction once per poll, wait or fence they check.
    value_keys: RefCell<FxHashMap<(InstId, Reg), AddrKey>>,
    /// The key of each instruction's memory operand, for [`FunctionAnalysis::inst_address_is`]
    /// (`None` until asked).
    inst_keys: RefCell<Vec<Option<AddrKey>>>,
    /// Value numbers already computed ([`FunctionAnalysis::value_number`]), and the interned
    /// computations behind [`ValueNumber::Expr`].
    value_numbers: RefCell<FxHashMap<(InstId, Reg), ValueNumber>>,
    exprs: RefCell<FxHashMap<(u64, Vec<ValueNumber>), u32>>,
    /// The operands of each [`ValueNumber::Expr`], by its number.
    expr_operands: RefCell<Vec<Vec<ValueNumber>>>,
    /// Reaching definitions already computed ([`FunctionAnalysis::reaching_defs`]):
    /// the poll rules slice the same exit branches, and SASS registers are redefined often.
    reaches: RefCell<FxHashMap<(InstId, Reg), Reach>>,
    /// The same inside one loop (by [`Loop::id`]), for the slices of loop exits.
    reaches_in_loop: RefCell<FxHashMap<(InstId, Reg, u32), Reach>>,
    /// The SSA form that answers most reaching-definition queries ([`reach`]); `None` when
    /// the function's entry block has predecessors.
    ssa: OnceCell<Option<reach::Ssa>>,
    /// Visited-block marks reused by the walks, so that a short walk in a function of many
    /// blocks does not allocate and clear a mark per block (see [`Visited`]).
    reach_marks: RefCell<Marks>,
    walk_marks: RefCell<Marks>,
    /// The instructions whose kind [`fencelint_ir::InstKind::is_memory_or_order`], in text order.
    memory_insts: OnceCell<Vec<InstId>>,
    /// For each block, the part of `memory_insts` inside it (`start..end` indices), so that a
    /// walk finds a block's memory instructions without two binary searches per visit.
    block_memory: OnceCell<Vec<(u32, u32)>>,
    /// Which registers each block defines, one bit per register (see [`BlockDefs`]).
    block_defs: OnceCell<Option<BlockDefs>>,
    /// Slices already computed by [`FunctionAnalysis::deciding_read_regs`], by branch and the
    /// loop they stay in: both poll rules ask for the slices of the same loop exits.
    deciding: RefCell<FxHashMap<SliceKey, Vec<(InstId, Reg)>>>,
    /// For each block, the branch that ends it when an entering edge can decide it
    /// ([`FunctionAnalysis::forced_successor`]).
    deciders: OnceCell<Vec<Option<edges::Decider>>>,
    /// The predicate values walks learn from the branches they pass ([`Outcomes`]).
    outcomes: OnceCell<outcomes::OutcomeInfo>,
    /// What each predicate read says about other tests, by read ([`assume`]).
    implications: RefCell<assume::Implications>,
    incomplete: Cell<bool>,
    /// The instructions that may write local memory ([`FunctionAnalysis::local_writers`]).
    local_writers: OnceCell<Vec<InstId>>,
    /// How deep [`FunctionAnalysis::value_key`] is in reloads of local copies.
    forwarding: Cell<u32>,
    /// The store each local reload was followed to, by load (`None`: not followed).
    forwarded: RefCell<FxHashMap<InstId, Option<(InstId, Reg)>>>,
}

/// One bit per block and register: set when the block defines the register. Walks for reaching
/// definitions pass most blocks without a definition of the register they follow; the bit
/// answers that without a binary search in the register's definition sites.
pub(crate) struct BlockDefs {
    words_per_block: usize,
    bits: Vec<u64>,
}

impl BlockDefs {
    /// The most bits kept (8 MiB); a function needing more answers with binary searches.
    const MAX_BITS: usize = 64 << 20;

    fn build(func: &Function, cfg: &Cfg) -> Option<Self> {
        let words_per_block = func.regs.len().div_ceil(64).max(1);
        let total = words_per_block.checked_mul(cfg.blocks.len())?;
        if total.saturating_mul(64) > Self::MAX_BITS {
            return None;
        }
        let mut bits = vec![0u64; total];
        for (index, block) in cfg.blocks.iter().enumerate() {
            let row = &mut bits[index * words_per_block..(index + 1) * words_per_block];
            for id in block.ids() {
                for reg in &func.inst(id).defs {
                    if let Some(word) = row.get_mut(reg.0 as usize / 64) {
                        *word |= 1 << (reg.0 % 64);
                    }
                }
            }
        }
        Some(Self { words_per_block, bits })
    }

    fn defines(&self, block: BlockId, reg: Reg) -> bool {
        let word = reg.0 as usize / 64;
        word >= self.words_per_block
            || self.bits[block.index() * self.words_per_block + word] & (1 << (reg.0 % 64)) != 0
    }
}

/// A branch and the loop a slice stays in ([`Loop::id`]).
type SliceKey = (InstId, Option<u32>);

/// Block marks that are cleared in constant time: a block is marked when its stamp equals the
/// current generation.
#[derive(Default)]
pub(crate) struct Marks {
    stamps: Vec<u32>,
    generation: u32,
}

/// The blocks one walk has visited.
pub(crate) enum Visited<'a> {
    Shared(RefMut<'a, Marks>),
    /// When the shared marks are in use by an enclosing walk.
    Own(Vec<bool>),
}

impl Visited<'_> {
    /// Marks `block`; `true` when it was not marked yet.
    pub(crate) fn insert(&mut self, block: BlockId) -> bool {
        match self {
            Self::Shared(marks) => {
                let generation = marks.generation;
                let stamp = &mut marks.stamps[block.index()];
                let new = *stamp != generation;
                *stamp = generation;
                new
            }
            Self::Own(seen) => !std::mem::replace(&mut seen[block.index()], true),
        }
    }
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
            dom_order: OnceCell::new(),
            def_sites: OnceCell::new(),
            use_sites: OnceCell::new(),
            loops: OnceCell::new(),
            innermost: OnceCell::new(),
            value_keys: RefCell::new(FxHashMap::default()),
            inst_keys: RefCell::new(Vec::new()),
            value_numbers: RefCell::new(FxHashMap::default()),
            exprs: RefCell::new(FxHashMap::default()),
            expr_operands: RefCell::new(Vec::new()),
            reaches: RefCell::new(FxHashMap::default()),
            reaches_in_loop: RefCell::new(FxHashMap::default()),
            ssa: OnceCell::new(),
            reach_marks: RefCell::new(Marks::default()),
            walk_marks: RefCell::new(Marks::default()),
            memory_insts: OnceCell::new(),
            block_memory: OnceCell::new(),
            block_defs: OnceCell::new(),
            deciding: RefCell::new(FxHashMap::default()),
            deciders: OnceCell::new(),
            outcomes: OnceCell::new(),
            implications: RefCell::new(FxHashMap::default()),
            incomplete: Cell::new(false),
            local_writers: OnceCell::new(),
            forwarding: Cell::new(0),
            forwarded: RefCell::new(FxHashMap::default()),
        }
    }

    /// The instructions whose kind [`fencelint_ir::InstKind::is_memory_or_order`], in text order.
    pub fn memory_insts(&self) -> &[InstId] {
        self.memory_insts.get_or_init(|| {
            self.func.ids().filter(|&id| self.func.inst(id).kind.is_memory_or_order()).collect()
        })
    }

    /// The memory and ordering instructions of `block`: a slice of [`Self::memory_insts`].
    pub fn block_memory_insts(&self, block: BlockId) -> &[InstId] {
        let all = self.memory_insts();
        let spans = self.block_memory.get_or_init(|| {
            self.cfg
                .blocks
                .iter()
                .map(|b| {
                    let first = all.partition_point(|id| id.0 < b.insts.start);
                    let last = first + all[first..].partition_point(|id| id.0 < b.insts.end);
                    (first as u32, last as u32)
                })
                .collect()
        });
        let (first, last) = spans[block.index()];
        &all[first as usize..last as usize]
    }

    /// Fresh visited-block marks for one walk, from `marks` when no enclosing walk holds them.
    pub(crate) fn visited<'a>(&self, marks: &'a RefCell<Marks>) -> Visited<'a> {
        let n = self.cfg.blocks.len();
        let Ok(mut shared) = marks.try_borrow_mut() else { return Visited::Own(vec![false; n]) };
        if shared.stamps.len() != n {
            shared.stamps = vec![0; n];
            shared.generation = 0;
        }
        shared.generation = shared.generation.wrapping_add(1);
        if shared.generation == 0 {
            shared.stamps.fill(0);
            shared.generation = 1;
        }
        Visited::Shared(shared)
    }

    pub fn dominators(&self) -> &DomTree {
        self.dominators.get_or_init(|| DomTree::build(&self.cfg))
    }

    /// Whether block `a` dominates block `b` (constant time after the first query).
    pub fn block_dominates(&self, a: BlockId, b: BlockId) -> bool {
        let (pre, post) = self.dom_order.get_or_init(|| self.number_dominator_tree());
        let (a, b) = (a.index(), b.index());
        pre[a] != u32::MAX && pre[b] != u32::MAX && pre[a] <= pre[b] && post[b] <= post[a]
    }

    fn number_dominator_tree(&self) -> (Vec<u32>, Vec<u32>) {
        let n = self.cfg.blocks.len();
        let doms = self.dominators();
        // The children of block `b` are `children[starts[b]..starts[b + 1]]`, in block order.
        let mut starts = vec![0u32; n + 1];
        for block in self.cfg.block_ids() {
            if let Some(idom) = doms.immediate_dominator(block) {
                starts[idom.index() + 1] += 1;
            }
        }
        for i in 0..n {
            starts[i + 1] += starts[i];
        }
        let mut children = vec![0usize; starts[n] as usize];
        let mut fill = starts.clone();
        for block in self.cfg.block_ids() {
            if let Some(idom) = doms.immediate_dominator(block) {
                children[fill[idom.index()] as usize] = block.index();
                fill[idom.index()] += 1;
            }
        }
        let children_of = |node: usize| &children[starts[node] as usize..starts[node + 1] as usize];
        let (mut pre, mut post) = (vec![u32::MAX; n], vec![u32::MAX; n]);
        let (mut next_pre, mut next_post) = (0u32, 0u32);
        // Iterative DFS: a dominator tree can be as deep as the function is long.
        let mut stack = vec![(0usize, 0usize)];
        pre[0] = next_pre;
        next_pre += 1;
        while let Some(&mut (node, ref mut child)) = stack.last_mut() {
            if let Some(&next) = children_of(node).get(*child) {
                *child += 1;
                pre[next] = next_pre;
                next_pre += 1;
                stack.push((next, 0));
            } else {
                post[node] = next_post;
                next_post += 1;
                stack.pop();
            }
        }
        (pre, post)
    }

    /// The instructions that define `reg`, in text order.
    pub fn def_sites(&self, reg: fencelint_ir::Reg) -> &[InstId] {
        let sites = self.def_sites.get_or_init(|| self.sites(|inst| &inst.defs));
        sites.get(reg.0 as usize).map_or(&[], Vec::as_slice)
    }

    /// The instructions that read `reg` (`Inst::uses`), in text order.
    pub fn use_sites(&self, reg: fencelint_ir::Reg) -> &[InstId] {
        let sites = self.use_sites.get_or_init(|| self.sites(|inst| &inst.uses));
        sites.get(reg.0 as usize).map_or(&[], Vec::as_slice)
    }

    /// For each register, the instructions whose `regs` name it, in text order (an instruction
    /// that names it twice is there twice).
    fn sites(&self, regs: impl Fn(&fencelint_ir::Inst) -> &fencelint_ir::Regs) -> Vec<Vec<InstId>> {
        let mut sites: Vec<Vec<InstId>> = vec![Vec::new(); self.func.regs.len()];
        for id in self.func.ids() {
            for reg in regs(self.func.inst(id)) {
                if let Some(list) = sites.get_mut(reg.0 as usize) {
                    list.push(id);
                }
            }
        }
        sites
    }

    /// Whether a block may define `reg` (false only when it certainly does not), as a test
    /// that a walk asks for each block it passes.
    pub(crate) fn block_may_define_fn(&self, reg: Reg) -> impl Fn(BlockId) -> bool + '_ {
        let defs = self.block_defs.get_or_init(|| BlockDefs::build(self.func, &self.cfg)).as_ref();
        move |block| defs.is_none_or(|defs| defs.defines(block, reg))
    }

    /// Whether instruction `a` executes before `b` on every path to `b`.
    pub fn dominates(&self, a: InstId, b: InstId) -> bool {
        let (block_a, block_b) = (self.cfg.block_of(a), self.cfg.block_of(b));
        if block_a == block_b {
            return a <= b;
        }
        self.block_dominates(block_a, block_b)
    }

    /// Natural loops by header; of those sharing a header, the loop of all its back edges first,
    /// then the smaller loops of single back edges, outermost first (see `loops::find_loops`).
    pub fn loops(&self) -> &[Loop] {
        self.loops.get_or_init(|| loops::find_loops(self))
    }

    /// The loop of all the back edges to `lp`'s header: `lp` itself when it is that loop (or
    /// the header has one back edge), else the loop it lies in whose single back edges make
    /// loops of their own, such as `lp` (see [`Self::loops`]).
    pub fn whole_loop<'s>(&'s self, lp: &'s Loop) -> &'s Loop {
        let loops = self.loops();
        let first = loops.partition_point(|l| l.header < lp.header);
        loops.get(first).filter(|l| l.header == lp.header).unwrap_or(lp)
    }

    /// The innermost loop that contains `inst`.
    pub fn innermost_loop(&self, inst: InstId) -> Option<&Loop> {
        let innermost = self.innermost.get_or_init(|| {
            // Two loops that share a block are nested, the inner one smaller: the smallest
            // loop holding a block, assigned last, is its innermost one (of equal sizes, the
            // first in `loops`).
            let loops = self.loops();
            let mut by_size: Vec<usize> = (0..loops.len()).collect();
            by_size.sort_by_key(|&i| std::cmp::Reverse((loops[i].blocks.len(), i)));
            let mut innermost = vec![u32::MAX; self.cfg.blocks.len()];
            for i in by_size {
                for block in &loops[i].blocks {
                    innermost[block.index()] = i as u32;
                }
            }
            innermost
        });
        let at = innermost[self.cfg.block_of(inst).index()];
        self.loops().get(at as usize)
    }

    /// True when some walk of this function stopped at its budget.
    pub fn is_incomplete(&self) -> bool {
        self.incomplete.get()
    }

    pub(crate) fn mark_incomplete(&self) {
        self.incomplete.set(true);
    }
}
