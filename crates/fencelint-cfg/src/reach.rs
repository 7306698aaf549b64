//! Reaching definitions through SSA form, for [`FunctionAnalysis::reaching_defs`].
//!
//! A backward walk from a use visits every block until each path meets a definition; SASS
//! reuses registers, so the walks of one function cross the same blocks again and again. Here
//! a register's merge points are placed once (the iterated dominance frontier of the blocks
//! that define it, the entry among them), and the value at a block's start is found by climbing
//! the dominator tree to the nearest block that defines the register or merges it (climbs are
//! short; remembering them cost more than it saved). A query then visits only the merge points
//! of its register, not the blocks between them. The merge a read finds also names its value
//! ([`FunctionAnalysis::merge_reaching`], `ValueNumber::Merge`).
//!
//! The answer is the walk's, definition for definition: a guarded definition does not end a
//! path, an unguarded one does, and a path that reaches the entry with none sets
//! [`Reach::from_entry`]. Inside a loop, paths stay in the loop's blocks (the header merges only
//! the values of its latches). The form is built over the blocks the entry reaches, and the
//! walk too passes over blocks that the entry does not reach (a definition there reaches
//! nothing). A function whose entry block has predecessors is answered by the walk; so is a
//! use in an unreached block (`walks.rs` and this module's tests compare the two).

use std::cell::RefCell;

use fencelint_ir::{InstId, Reg};

use crate::{BlockId, FunctionAnalysis, Loop, Reach};

/// What reaches the start of a block, in one `u32`: the end of a block that defines the
/// register (its index), a merge at a block (its index with [`MERGE`] set), or the entry.
type Source = u32;
/// Set in a [`Source`] that is a merge (a phi) at the start of the block in its other bits.
const MERGE: u32 = 1 << 31;
/// The function's entry, with no definition on the way.
const ENTRY: Source = u32::MAX - 1;

/// One register's form: where its values merge, and what reaches each block's start.
struct RegForm {
    /// One bit per block: the iterated dominance frontier of the blocks that define the
    /// register and of the entry.
    merges: Box<[u64]>,
}

impl RegForm {
    fn merges_at(&self, block: BlockId) -> bool {
        self.merges[block.index() / 64] & (1 << (block.index() % 64)) != 0
    }
}

/// The function's dominance frontiers and the forms of the registers asked about so far.
pub(crate) struct Ssa {
    /// The dominance frontier of each block, `frontier[starts[b]..starts[b + 1]]`.
    starts: Vec<u32>,
    frontier: Vec<BlockId>,
    /// By register index.
    forms: RefCell<Vec<Option<RegForm>>>,
}

impl Ssa {
    /// `None` when the entry block has predecessors: a walk then never finds the path without
    /// a definition from the entry that the form would (the walk stops only at blocks without
    /// predecessors), or when the function has too many blocks for a block index and the
    /// [`MERGE`] bit in 32 bits.
    pub(crate) fn build(analysis: &FunctionAnalysis<'_>) -> Option<Self> {
        let cfg = &analysis.cfg;
        let n = cfg.blocks.len();
        if n == 0
            || n >= ENTRY as usize & !MERGE as usize
            || !cfg.predecessor_slice(BlockId(0)).is_empty()
        {
            return None;
        }
        let doms = analysis.dominators();
        let mut frontiers: Vec<Vec<BlockId>> = vec![Vec::new(); n];
        for block in cfg.block_ids().filter(|&b| doms.is_reachable(b)) {
            let preds = cfg.predecessor_slice(block);
            if preds.len() < 2 {
                continue;
            }
            let Some(idom) = doms.immediate_dominator(block) else { continue };
            for &pred in preds.iter().filter(|&&p| doms.is_reachable(p)) {
                let mut runner = pred;
                while runner != idom {
                    let row = &mut frontiers[runner.index()];
                    if row.last() != Some(&block) {
                        row.push(block);
                    }
                    let Some(up) = doms.immediate_dominator(runner) else { break };
                    runner = up;
                }
            }
        }
        let mut starts = Vec::with_capacity(n + 1);
        let mut frontier = Vec::new();
        for mut row in frontiers {
            starts.push(frontier.len() as u32);
            row.sort_unstable();
            row.dedup();
            frontier.extend(row);
        }
        starts.push(frontier.len() as u32);
        let forms =
            RefCell::new(std::iter::repeat_with(|| None).take(analysis.func.regs.len()).collect());
        Some(Self { starts, frontier, forms })
    }

    fn frontier_of(&self, block: BlockId) -> &[BlockId] {
        &self.frontier[self.starts[block.index()] as usize..self.starts[block.index() + 1] as usize]
    }
}

impl FunctionAnalysis<'_> {
    /// The definitions of `reg` that reach the point just before `at`, as
    /// [`FunctionAnalysis::reaching_defs_in`]'s walk finds them; `None` where the form does not
    /// apply (see the module's documentation).
    pub(crate) fn ssa_reaching_defs(
        &self,
        at: InstId,
        reg: Reg,
        inside: Option<&Loop>,
    ) -> Option<Reach> {
        let ssa = self.ssa.get_or_init(|| Ssa::build(self)).as_ref()?;
        let block = self.cfg.block_of(at);
        let doms = self.dominators();
        if !doms.is_reachable(block) || reg.0 as usize >= ssa.forms.borrow().len() {
            return None;
        }
        if inside.is_some_and(|lp| !lp.contains(block)) {
            return None;
        }
        let mut forms = ssa.forms.borrow_mut();
        let form = forms[reg.0 as usize].get_or_insert_with(|| self.reg_form(ssa, reg));
        let may_define = self.block_may_define_fn(reg);
        let mut reach = Reach::default();
        let mut defs = Vec::new();
        let mut pending = Vec::new();
        if let Some(source) = self.scan_back(form, block, at.0, reg, &mut defs) {
            pending.push(source);
        }
        let mut merged = self.visited(&self.reach_marks);
        let mut steps = 0usize;
        while let Some(source) = pending.pop() {
            steps += 1;
            if steps > self.budget.walk_steps {
                self.mark_incomplete();
                break;
            }
            if source == ENTRY {
                reach.from_entry |= inside.is_none();
                continue;
            }
            let block = BlockId(source & !MERGE);
            // Paths that leave the loop a query stays in are dropped (at the loop's header,
            // that keeps only the values of its latches, above).
            if inside.is_some_and(|lp| !lp.contains(block)) {
                continue;
            }
            if source & MERGE == 0 {
                let end = self.cfg.block(block).insts.end;
                if let Some(source) = self.scan_back(form, block, end, reg, &mut defs) {
                    pending.push(source);
                }
                continue;
            }
            if !merged.insert(block) {
                continue;
            }
            for &pred in self.cfg.predecessor_slice(block) {
                if !doms.is_reachable(pred) || inside.is_some_and(|lp| !lp.contains(pred)) {
                    continue;
                }
                // A predecessor that does not define `reg` passes on what reaches its start.
                if may_define(pred) {
                    pending.push(pred.0);
                } else {
                    pending.push(self.at_start(form, pred, reg));
                }
            }
        }
        defs.sort_unstable();
        defs.dedup();
        reach.defs = defs;
        Some(reach)
    }

    /// The block at whose start the values of `reg` that reach `at` merge, when no definition
    /// of `reg` lies between that start and `at`: every read that finds the same merge reads
    /// the value the merge chose on that visit of the block (a phi of SSA form). `None` when
    /// the nearest definition above `at` is in its block or in a block that dominates it, when
    /// no definition reaches at all, or where the form does not apply.
    pub(crate) fn merge_reaching(&self, at: InstId, reg: Reg) -> Option<BlockId> {
        let ssa = self.ssa.get_or_init(|| Ssa::build(self)).as_ref()?;
        let block = self.cfg.block_of(at);
        if !self.dominators().is_reachable(block) || reg.0 as usize >= ssa.forms.borrow().len() {
            return None;
        }
        let sites = self.def_sites(reg);
        let start = self.cfg.block(block).insts.start;
        let first = sites.partition_point(|id| id.0 < start);
        if sites.get(first).is_some_and(|id| id.0 < at.0) {
            return None;
        }
        let mut forms = ssa.forms.borrow_mut();
        let form = forms[reg.0 as usize].get_or_insert_with(|| self.reg_form(ssa, reg));
        match self.at_start(form, block, reg) {
            ENTRY => None,
            source if source & MERGE != 0 => Some(BlockId(source & !MERGE)),
            _ => None,
        }
    }

    /// Pushes the definitions of `reg` in `block` before instruction index `end`, last first,
    /// to `defs`, up to an unguarded one; when there is none, what reaches the block's start.
    fn scan_back(
        &self,
        form: &mut RegForm,
        block: BlockId,
        end: u32,
        reg: Reg,
        defs: &mut Vec<InstId>,
    ) -> Option<Source> {
        let sites = self.def_sites(reg);
        let start = self.cfg.block(block).insts.start;
        let from = sites.partition_point(|id| id.0 < start);
        let to = from + sites[from..].partition_point(|id| id.0 < end);
        for &id in sites[from..to].iter().rev() {
            defs.push(id);
            // An unguarded definition ends the path.
            self.func.inst(id).guard?;
        }
        Some(self.at_start(form, block, reg))
    }

    /// What reaches the start of `block` (a reachable block): the entry, a merge of `reg` here,
    /// or the end of the nearest dominator that defines it.
    fn at_start(&self, form: &mut RegForm, block: BlockId, reg: Reg) -> Source {
        let doms = self.dominators();
        let may_define = self.block_may_define_fn(reg);
        // The start of a block that merges nothing gets the end of its immediate dominator,
        // which is its start when the dominator does not define `reg`.
        let mut at = block;
        loop {
            if form.merges_at(at) {
                return at.0 | MERGE;
            }
            let Some(up) = doms.immediate_dominator(at) else { return ENTRY };
            if may_define(up) && self.defines_in(up, reg) {
                return up.0;
            }
            at = up;
        }
    }

    /// Whether `block` holds a definition of `reg`.
    fn defines_in(&self, block: BlockId, reg: Reg) -> bool {
        let range = &self.cfg.block(block).insts;
        let sites = self.def_sites(reg);
        let first = sites.partition_point(|id| id.0 < range.start);
        sites.get(first).is_some_and(|id| id.0 < range.end)
    }

    /// The form of `reg`: its merge blocks, the iterated dominance frontier of the blocks that
    /// define it and of the entry.
    fn reg_form(&self, ssa: &Ssa, reg: Reg) -> RegForm {
        let n = self.cfg.blocks.len();
        let doms = self.dominators();
        let mut merges = vec![0u64; n.div_ceil(64)].into_boxed_slice();
        let mut queued = vec![0u64; n.div_ceil(64)];
        let set = |bits: &mut [u64], b: BlockId| {
            let (word, bit) = (b.index() / 64, 1u64 << (b.index() % 64));
            let new = bits[word] & bit == 0;
            bits[word] |= bit;
            new
        };
        let mut work = vec![BlockId(0)];
        set(&mut queued, BlockId(0));
        for &site in self.def_sites(reg) {
            let b = self.cfg.block_of(site);
            if doms.is_reachable(b) && set(&mut queued, b) {
                work.push(b);
            }
        }
        while let Some(b) = work.pop() {
            for &y in ssa.frontier_of(b) {
                if set(&mut merges, y) && set(&mut queued, y) {
                    work.push(y);
                }
            }
        }
        RegForm { merges }
    }
}

#[cfg(test)]
mod tests {
    use fencelint_ir::{Control, Function, Guard, Inst, InstKind, TextRange};

    use super::*;
    use crate::dominators::Lcg;

    /// A random function of `len` instructions over four registers: definitions (a quarter
    /// guarded), conditional and plain branches, exits, and instructions that define nothing.
    fn random_function(rng: &mut Lcg, len: u32) -> Function {
        let mut func = Function::default();
        for name in ["r0", "r1", "r2", "r3", "p0"] {
            func.intern_reg(name);
        }
        // Branches never go back to the first instruction: its block would have predecessors.
        let target = |rng: &mut Lcg| InstId(1 + rng.below(u64::from(len - 1)) as u32);
        for _ in 0..len {
            let mut inst = Inst::new(TextRange::default(), "OP", InstKind::Move);
            inst.control = Control { falls_through: true, ..Control::default() };
            match rng.below(10) {
                0..=4 => {
                    inst.defs.push(Reg(rng.below(4) as u32));
                    if rng.below(4) == 0 {
                        inst.guard = Some(Guard { reg: Reg(4), negated: false });
                    }
                }
                5 | 6 => {
                    inst.kind = InstKind::Branch;
                    inst.guard = Some(Guard { reg: Reg(4), negated: false });
                    inst.control.targets = fencelint_ir::thin_vec![target(rng)];
                }
                7 if rng.below(3) == 0 => {
                    inst.kind = InstKind::Branch;
                    inst.control.falls_through = false;
                    inst.control.targets = fencelint_ir::thin_vec![target(rng)];
                }
                8 if rng.below(4) == 0 => {
                    inst.kind = InstKind::Exit;
                    inst.control = Control { exits: true, ..Control::default() };
                }
                _ => {}
            }
            func.insts.push(inst);
        }
        func
    }

    #[test]
    fn the_ssa_form_answers_like_the_walk() {
        let mut rng = Lcg(7);
        let (mut compared, mut in_loops) = (0usize, 0usize);
        for round in 0..400 {
            let func = random_function(&mut rng, 8 + round % 40);
            let analysis = FunctionAnalysis::new(&func);
            for at in func.ids() {
                for reg in (0..4).map(Reg) {
                    if let Some(reach) = analysis.ssa_reaching_defs(at, reg, None) {
                        let walked = analysis.walk_reaching_defs(at, reg, None);
                        assert_eq!(reach, walked, "round {round}, {at:?}, {reg:?}");
                        compared += 1;
                    }
                    for lp in analysis.loops() {
                        if let Some(reach) = analysis.ssa_reaching_defs(at, reg, Some(lp)) {
                            let walked = analysis.walk_reaching_defs(at, reg, Some(lp));
                            assert_eq!(
                                reach, walked,
                                "round {round}, {at:?}, {reg:?}, loop {}",
                                lp.id
                            );
                            in_loops += 1;
                        }
                    }
                }
            }
        }
        // Most functions and uses are answered by the form, not handed back to the walk.
        assert!(compared > 10_000 && in_loops > 15_000, "{compared} {in_loops}");
    }

    /// A merge that a read finds names one value: the read's block is the merge's or one it
    /// dominates, and every way back from the read meets the merge's start before any
    /// definition of the register (the merge's block has none, nor any block between) in a block
    /// that the entry reaches.
    #[test]
    fn a_merge_a_read_finds_has_no_definition_below_it() {
        let mut rng = Lcg(11);
        let mut named = 0usize;
        for round in 0..400 {
            let func = random_function(&mut rng, 8 + round % 40);
            let analysis = FunctionAnalysis::new(&func);
            let cfg = &analysis.cfg;
            for at in func.ids() {
                for reg in (0..4).map(Reg) {
                    let Some(merge) = analysis.merge_reaching(at, reg) else { continue };
                    named += 1;
                    let sites = analysis.def_sites(reg);
                    let defines =
                        |from: u32, to: u32| sites.iter().any(|id| (from..to).contains(&id.0));
                    let block = cfg.block_of(at);
                    let context = format!("round {round}, {at:?}, {reg:?}, merge {merge:?}");
                    assert!(analysis.block_dominates(merge, block), "{context}");
                    assert!(!defines(cfg.block(block).insts.start, at.0), "{context}");
                    if block == merge {
                        continue;
                    }
                    // The read's own block, met again around a loop, counts whole.
                    let mut seen = Vec::new();
                    let reachable = |b: &BlockId| analysis.dominators().is_reachable(*b);
                    let mut work: Vec<BlockId> =
                        cfg.predecessors(block).filter(reachable).collect();
                    while let Some(b) = work.pop() {
                        if seen.contains(&b) {
                            continue;
                        }
                        seen.push(b);
                        let range = &cfg.block(b).insts;
                        assert!(!defines(range.start, range.end), "{context}, {b:?} defines");
                        if b != merge {
                            work.extend(cfg.predecessors(b).filter(reachable));
                        }
                    }
                }
            }
        }
        assert!(named > 1_000, "{named}");
    }
}
