//! Demand-driven data flow: reaching definitions, backward slices, guarded reachability.

use std::collections::VecDeque;

use rustc_hash::FxHashSet;

use fencelint_ir::{Function, Inst, InstId, InstKind, Reg, Space, ValueOp};

use crate::{BlockId, FunctionAnalysis, Loop};

/// The most blocks a loop may have for a slice to follow the branches that choose between
/// constants.
const MAX_CHOICE_BLOCKS: usize = 256;

/// A program point: just before an instruction, or at the start of a block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Point {
    /// Just after this instruction.
    After(InstId),
    /// At the top of this block.
    BlockStart(BlockId),
}

/// The definitions of a register that reach a use.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reach {
    /// Defining instructions, sorted.
    pub defs: Vec<InstId>,
    /// Some path from the function entry reaches the use without a definition (a parameter, an
    /// uninitialised register, or a register the front end could not see defined).
    pub from_entry: bool,
}

/// The first block of a walk that starts after an instruction: where its first visit started
/// testing and where a blocker stopped it.
#[derive(Clone, Copy)]
struct Origin {
    block: BlockId,
    start: u32,
    blocked_at: Option<u32>,
}

impl FunctionAnalysis<'_> {
    /// The definitions of `reg` that reach the use in `at` (searching strictly before `at`).
    pub fn reaching_defs(&self, at: InstId, reg: Reg) -> Reach {
        self.reaching_defs_in(at, reg, None)
    }

    /// [`FunctionAnalysis::reaching_defs`] along paths that stay inside `inside` (a loop of
    /// [`FunctionAnalysis::loops`]) when given: the definitions it finds are those inside the
    /// loop that reach `at` within the loop's blocks. A definition inside the loop that reaches
    /// `at` only around an enclosing loop (out through an exit and back in through the header)
    /// is not found: that value comes from an earlier run of the loop, not from the iterations
    /// that decide its exits. The compiled fixtures have no such case (`walks.rs`).
    pub(crate) fn reaching_defs_in(&self, at: InstId, reg: Reg, inside: Option<&Loop>) -> Reach {
        // The walk starts here: `at`, or the top of its block when the block defines `reg`
        // nowhere before `at` (the same walk, shared by every such use in the block).
        let mut from = at;
        // Fast paths: most registers are defined once (nvcc's PTX is close to SSA form).
        match self.def_sites(reg) {
            [] => return Reach { defs: Vec::new(), from_entry: true },
            &[def]
                if self.func.inst(def).guard.is_none() && def != at && self.dominates(def, at) =>
            {
                return Reach { defs: vec![def], from_entry: false };
            }
            sites => {
                // The nearest definition in `at`'s own block, when unguarded, is the only one
                // that reaches (most uses read a register written a few instructions before).
                let start = self.cfg.block(self.cfg.block_of(at)).insts.start;
                let before = sites.partition_point(|id| id.0 < at.0);
                match before.checked_sub(1).map(|i| sites[i]) {
                    Some(def) if def.0 >= start => {
                        if self.func.inst(def).guard.is_none() {
                            return Reach { defs: vec![def], from_entry: false };
                        }
                    }
                    _ => from = InstId(start),
                }
            }
        }
        let Some(lp) = inside else {
            if let Some(reach) = self.reaches.borrow().get(&(from, reg)) {
                return reach.clone();
            }
            let reach = self
                .ssa_reaching_defs(from, reg, None)
                .unwrap_or_else(|| self.walk_reaching_defs(from, reg, None));
            self.reaches.borrow_mut().insert((from, reg), reach.clone());
            return reach;
        };
        let key = (from, reg, lp.id);
        if let Some(reach) = self.reaches_in_loop.borrow().get(&key) {
            return reach.clone();
        }
        let reach = self
            .ssa_reaching_defs(from, reg, Some(lp))
            .unwrap_or_else(|| self.walk_reaching_defs(from, reg, Some(lp)));
        self.reaches_in_loop.borrow_mut().insert(key, reach.clone());
        reach
    }

    pub(crate) fn walk_reaching_defs(&self, at: InstId, reg: Reg, inside: Option<&Loop>) -> Reach {
        let cfg = &self.cfg;
        let mut reach = Reach::default();
        // Sorted and deduplicated at the end: a walk finds few definitions.
        let mut defs = Vec::new();
        let mut seen = self.visited(&self.reach_marks);
        let mut steps = 0usize;

        // Scan backward from `at` within its block, then through predecessors. Only the
        // definitions of `reg` inside a block are looked at (found by binary search in the
        // sorted definition sites), so a block without one costs a step, not its length.
        let sites = self.def_sites(reg);
        let may_define = self.block_may_define_fn(reg);
        let doms = self.dominators();
        let mut work: Vec<(BlockId, Option<InstId>)> = Vec::with_capacity(16);
        work.push((cfg.block_of(at), Some(at)));
        while let Some((block, before)) = work.pop() {
            let range = &cfg.block(block).insts;
            let end = before.map_or(range.end, |b| b.0.clamp(range.start, range.end));
            let (from, to) = if may_define(block) {
                let from = sites.partition_point(|id| id.0 < range.start);
                (from, from + sites[from..].partition_point(|id| id.0 < end))
            } else {
                (0, 0)
            };
            steps += 1 + (to - from);
            let mut killed = false;
            for &id in sites[from..to].iter().rev() {
                defs.push(id);
                if self.func.inst(id).guard.is_none() {
                    killed = true;
                    break;
                }
            }
            if killed {
                continue;
            }
            if steps > self.budget.walk_steps {
                self.mark_incomplete();
                break;
            }
            let mut has_pred = false;
            for pred in cfg.predecessors(block) {
                has_pred = true;
                // A block that no path from the entry enters defines nothing that reaches.
                if !doms.is_reachable(pred) || inside.is_some_and(|lp| !lp.contains(pred)) {
                    continue;
                }
                if seen.insert(pred) {
                    work.push((pred, None));
                }
            }
            if !has_pred {
                reach.from_entry = true;
            }
        }
        defs.sort_unstable();
        defs.dedup();
        reach.defs = defs;
        reach
    }

    /// The instructions whose results flow into the guard of `branch`, following definitions
    /// backward through moves and comparisons, staying inside `within` when given. Returns the
    /// memory-reading instructions found (loads, atomics that return, multimem loads, mbarrier
    /// waits).
    ///
    /// `within` is one of [`FunctionAnalysis::loops`]: answers are remembered by branch and
    /// loop ([`Loop::id`]; loops can share a header).
    pub fn deciding_reads(&self, branch: InstId, within: Option<&Loop>) -> Vec<InstId> {
        let mut found: Vec<InstId> =
            self.deciding_read_regs(branch, within).into_iter().map(|(read, _)| read).collect();
        found.dedup();
        found
    }

    /// [`FunctionAnalysis::deciding_reads`] with the register of each read that the slice came
    /// through: for a vector load, which of its registers decide the branch. Sorted; remembered
    /// like [`FunctionAnalysis::deciding_reads`].
    pub fn deciding_read_regs(&self, branch: InstId, within: Option<&Loop>) -> Vec<(InstId, Reg)> {
        let key = (branch, within.map(|l| l.id));
        if let Some(found) = self.deciding.borrow().get(&key) {
            return found.clone();
        }
        let found = self.slice_deciding_read_regs(branch, within);
        self.deciding.borrow_mut().insert(key, found.clone());
        found
    }

    fn slice_deciding_read_regs(
        &self,
        branch: InstId,
        within: Option<&Loop>,
    ) -> Vec<(InstId, Reg)> {
        let mut found = Vec::new();
        let mut visited = FxHashSet::default();
        let mut queue: VecDeque<(InstId, Reg)> =
            self.branch_predicates(branch).into_iter().map(|reg| (branch, reg)).collect();
        let mut steps = 0usize;
        while let Some((at, reg)) = queue.pop_front() {
            if !visited.insert((at, reg)) {
                continue;
            }
            steps += 1;
            if steps > self.budget.slice_steps {
                self.mark_incomplete();
                break;
            }
            for def in self.reaching_defs_in(at, reg, within).defs {
                if within.is_some_and(|l| !l.contains_inst(self, def)) {
                    continue;
                }
                let inst = self.func.inst(def);
                if performed_flag(self.func, inst, reg) {
                    continue;
                }
                let is_read = inst.kind.reads_memory()
                    || matches!(
                        inst.kind,
                        InstKind::Mbarrier(fencelint_ir::MbarrierOp::Wait { .. })
                    );
                if is_read {
                    found.push((def, reg));
                    continue;
                }
                for &used in &inst.uses {
                    queue.push_back((def, used));
                }
                if let Some(lp) = within {
                    for choice in self.constant_choices(lp, def, at, reg) {
                        for &used in &self.func.inst(choice).uses {
                            queue.push_back((choice, used));
                        }
                    }
                }
            }
        }
        found.sort_unstable();
        found.dedup();
        found
    }

    /// The predicates that decide `branch`: its guard, and a predicate it reads besides
    /// (`@P0 BRA P6, 0xc0` is taken when both hold). Empty for an unguarded instruction.
    pub fn branch_predicates(&self, branch: InstId) -> Vec<Reg> {
        let inst = self.func.inst(branch);
        let Some(guard) = inst.guard else { return Vec::new() };
        let mut regs = vec![guard.reg];
        regs.extend(inst.uses.iter().filter(|&&used| used != guard.reg && self.is_predicate(used)));
        regs
    }

    /// The conditional branches of `lp` that choose whether the constant `def` is the value of
    /// `reg` where `at` reads it: a constant carries nothing of its own, so where several
    /// definitions of `reg` meet at `at` (or the constant is written under a guard), the
    /// branches on the paths of one iteration from the constant's block to `at` decide which
    /// arrives (`PLOP3.LUT P0, PT, PT, PT, PT, 0x80, 0x0` then `@!P2 BRA` past the rest of a
    /// search, where `P2` tests a load). Empty when `def` is no constant, when it alone reaches
    /// `at` (a comparison's bound held in a register), and for loops of more than
    /// [`MAX_CHOICE_BLOCKS`] blocks.
    pub fn constant_choices(&self, lp: &Loop, def: InstId, at: InstId, reg: Reg) -> Vec<InstId> {
        if !self.is_constant(def) {
            return Vec::new();
        }
        if self.func.inst(def).guard.is_none() {
            let reach = self.reaching_defs(at, reg);
            if reach.defs.len() < 2 && !reach.from_entry {
                return Vec::new();
            }
        }
        self.branches_between(lp, self.cfg.block_of(def), self.cfg.block_of(at))
    }

    /// Whether `def` writes a value that reads no register but its guard, and no memory: a
    /// constant (`MOV R27, 0x1`, `PLOP3.LUT P0, PT, PT, PT, PT, 0x80, 0x0`, `mov.u32 %r1, 1`).
    fn is_constant(&self, def: InstId) -> bool {
        let inst = self.func.inst(def);
        let guard = inst.guard.map(|g| g.reg);
        !inst.defs.is_empty()
            && !inst.kind.reads_memory()
            && !inst.kind.is_memory_or_order()
            && inst.uses.iter().all(|&used| Some(used) == guard)
    }

    /// Whether `reg` is a predicate register (`P0`, `UP1`, `%p3`).
    pub fn is_predicate(&self, reg: Reg) -> bool {
        let name = self.func.reg_name(reg);
        is_predicate_name(name) || name.starts_with("%p")
    }

    /// The conditional branches that end a block of `lp` on a path of one iteration from `from`
    /// to `to` (both blocks of `lp`; `from` included, and the paths do not pass the loop's
    /// header again): the branches that choose whether what `from` defines reaches `to`. Empty
    /// for loops of more than [`MAX_CHOICE_BLOCKS`] blocks.
    fn branches_between(&self, lp: &Loop, from: BlockId, to: BlockId) -> Vec<InstId> {
        if lp.blocks.len() > MAX_CHOICE_BLOCKS || !lp.contains(from) || !lp.contains(to) {
            return Vec::new();
        }
        // Blocks of the loop by their place in `lp.blocks` (sorted).
        let place = |b: BlockId| lp.blocks.binary_search(&b).ok();
        let header = place(lp.header);
        // Forward from `from`, inside one iteration (not into the header again).
        let mut ahead = vec![false; lp.blocks.len()];
        let mut work = vec![from];
        ahead[place(from).unwrap_or_default()] = true;
        while let Some(b) = work.pop() {
            if b == to {
                continue;
            }
            for next in self.cfg.successors(b) {
                if let Some(at) = place(next)
                    && Some(at) != header
                    && !ahead[at]
                {
                    ahead[at] = true;
                    work.push(next);
                }
            }
        }
        // Backward from `to` through the blocks ahead.
        let mut between = vec![false; lp.blocks.len()];
        let mut work = vec![to];
        if let Some(at) = place(to) {
            between[at] = ahead[at];
        }
        while let Some(b) = work.pop() {
            if b == from {
                continue;
            }
            for prev in self.cfg.predecessors(b) {
                if let Some(at) = place(prev)
                    && ahead[at]
                    && !between[at]
                {
                    between[at] = true;
                    work.push(prev);
                }
            }
        }
        lp.blocks
            .iter()
            .zip(between)
            .filter(|&(_, on_path)| on_path)
            .map(|(&b, _)| self.cfg.block(b).last())
            .filter(|&last| self.func.inst(last).is_conditional_transfer())
            .collect()
    }

    /// Instructions satisfying `is_target` that can execute after `from` on a path that meets no
    /// instruction satisfying `is_blocker`. A target that is also a blocker is reported and stops
    /// the path. Returns the targets in the order a breadth-first walk over blocks reaches them,
    /// so the first one is among the nearest.
    pub fn reachable_avoiding(
        &self,
        from: Point,
        is_target: impl Fn(InstId) -> bool,
        is_blocker: impl Fn(InstId) -> bool,
    ) -> Vec<InstId> {
        self.walk_avoiding(from, is_target, is_blocker, false)
    }

    /// [`FunctionAnalysis::reachable_avoiding`] for predicates that hold only for instructions
    /// whose kind [`is_memory_or_order`](fencelint_ir::InstKind::is_memory_or_order): the
    /// walk tests only those, and gives the same answer several times faster on SASS, where
    /// most instructions are ALU work.
    pub fn reachable_avoiding_memory(
        &self,
        from: Point,
        is_target: impl Fn(InstId) -> bool,
        is_blocker: impl Fn(InstId) -> bool,
    ) -> Vec<InstId> {
        self.walk_avoiding(from, is_target, is_blocker, true)
    }

    /// The walk behind both: with `memory_only`, the instructions of each block that are tested
    /// are its [`FunctionAnalysis::block_memory_insts`]; the step budget still counts every
    /// instruction passed.
    fn walk_avoiding(
        &self,
        from: Point,
        is_target: impl Fn(InstId) -> bool,
        is_blocker: impl Fn(InstId) -> bool,
        memory_only: bool,
    ) -> Vec<InstId> {
        let cfg = &self.cfg;
        let mut found = Vec::new();
        let mut seen = self.visited(&self.walk_marks);
        let mut steps = 0usize;
        // A walk that starts after an instruction can come back to the top of that block. The
        // second visit tests only what the first one skipped (up to and including the start
        // instruction), so no instruction is tested twice and the targets need no set.
        let mut origin: Option<Origin> = None;
        let mut work: VecDeque<(BlockId, Option<InstId>)> = match from {
            Point::After(inst) => VecDeque::from([(cfg.block_of(inst), Some(inst))]),
            Point::BlockStart(block) => {
                seen.insert(block);
                VecDeque::from([(block, None)])
            }
        };
        while let Some((block, after)) = work.pop_front() {
            let insts = &cfg.block(block).insts;
            let start = after.map_or(insts.start, |a| (a.0 + 1).max(insts.start)).min(insts.end);
            let revisit = origin.filter(|o| after.is_none() && o.block == block);
            let end = revisit.map_or(insts.end, |o| o.start);
            let mut blocked_at = None;
            let mut test = |id: InstId| {
                if is_target(id) {
                    found.push(id);
                }
                is_blocker(id)
            };
            if memory_only {
                let only = self.block_memory_insts(block);
                let first =
                    if start == insts.start { 0 } else { only.partition_point(|id| id.0 < start) };
                for &id in only[first..].iter().take_while(|id| id.0 < end) {
                    if test(id) {
                        blocked_at = Some(id.0);
                        break;
                    }
                }
            } else {
                for id in (start..end).map(InstId) {
                    if test(id) {
                        blocked_at = Some(id.0);
                        break;
                    }
                }
            }
            // The first visit's blocker, if any, still stops a path that comes back.
            let blocked_at = blocked_at.or(revisit.and_then(|o| o.blocked_at));
            // Every instruction passed counts, up to and including the blocker.
            steps += blocked_at.map_or(insts.end - start, |at| at - start + 1) as usize;
            if after.is_some() {
                origin = Some(Origin { block, start, blocked_at });
            }
            if steps > self.budget.walk_steps {
                self.mark_incomplete();
                break;
            }
            if blocked_at.is_some() {
                continue;
            }
            for succ in cfg.successors(block) {
                if seen.insert(succ) {
                    work.push_back((succ, None));
                }
            }
        }
        found
    }

    /// Whether `to` (the exit branch of a loop, or any other instruction) can execute after
    /// `from` on a path that stays in blocks satisfying `stay_in` and meets no instruction
    /// before `to` satisfying `is_blocker`, which must hold only for memory and ordering
    /// instructions (as for [`FunctionAnalysis::reachable_avoiding_memory`]). The same answer as
    /// `reachable_avoiding(from, |id| id == to, |id| !stay_in(block_of(id)) || is_blocker(id))`
    /// for non-empty blocks, with `stay_in` asked once a block instead of once an instruction
    /// and only the memory instructions tested. `from` must lie in a block that satisfies
    /// `stay_in`. A walk over the step budget answers `false` and marks the analysis
    /// incomplete, as that walk does.
    pub fn reaches_avoiding_memory(
        &self,
        from: Point,
        to: InstId,
        stay_in: impl Fn(BlockId) -> bool,
        is_blocker: impl Fn(InstId) -> bool,
    ) -> bool {
        let cfg = &self.cfg;
        let goal = cfg.block_of(to);
        let mut seen = self.visited(&self.walk_marks);
        let mut steps = 0usize;
        let mut work: VecDeque<(BlockId, Option<InstId>)> = match from {
            Point::After(inst) => VecDeque::from([(cfg.block_of(inst), Some(inst))]),
            Point::BlockStart(block) => {
                seen.insert(block);
                VecDeque::from([(block, None)])
            }
        };
        debug_assert!(work.iter().all(|&(block, _)| stay_in(block)), "`from` is outside `stay_in`");
        while let Some((block, after)) = work.pop_front() {
            let insts = &cfg.block(block).insts;
            let start = after.map_or(insts.start, |a| (a.0 + 1).max(insts.start)).min(insts.end);
            // A path that reaches the goal block stops at `to`, the block's last instruction.
            let end = if block == goal && to.0 >= start { to.0 } else { insts.end };
            let only = self.block_memory_insts(block);
            let first =
                if start == insts.start { 0 } else { only.partition_point(|id| id.0 < start) };
            let blocked_at = only[first..]
                .iter()
                .take_while(|id| id.0 < end)
                .find(|&&id| is_blocker(id))
                .map(|id| id.0);
            steps += blocked_at.map_or(end - start, |at| at - start + 1) as usize;
            if steps > self.budget.walk_steps {
                self.mark_incomplete();
                return false;
            }
            if blocked_at.is_some() {
                continue;
            }
            if block == goal && to.0 >= start {
                return true;
            }
            for succ in cfg.successors(block) {
                if stay_in(succ) && seen.insert(succ) {
                    work.push_back((succ, None));
                }
            }
        }
        false
    }

    /// One path of instructions from `from` to `to` that avoids blockers, for pictures and
    /// secondary labels. Returns block ids along the path.
    pub fn path_blocks(&self, from: BlockId, to: BlockId) -> Option<Vec<BlockId>> {
        let cfg = &self.cfg;
        let mut parent: Vec<Option<BlockId>> = vec![None; cfg.blocks.len()];
        let mut seen = vec![false; cfg.blocks.len()];
        let mut queue = VecDeque::from([from]);
        seen[from.index()] = true;
        while let Some(block) = queue.pop_front() {
            if block == to {
                let mut path = vec![to];
                let mut cur = to;
                while let Some(p) = parent[cur.index()] {
                    path.push(p);
                    cur = p;
                }
                path.reverse();
                return Some(path);
            }
            for succ in cfg.successors(block) {
                if !std::mem::replace(&mut seen[succ.index()], true) {
                    parent[succ.index()] = Some(block);
                    queue.push_back(succ);
                }
            }
        }
        None
    }
}

/// Whether `reg`, written by `inst`, is the predicate of a SASS atomic on a generic address
/// (`ATOM.E.CAS.64.STRONG.GPU P0, R8, [R16+0x68], R4, R6`): it says whether the address was
/// global and the atomic was performed there (if not, ptxas's emulation for shared or local
/// memory follows), not what memory held. The success flag of an emulation's own
/// compare-and-swap (`ATOMS.CAST.SPIN P0`, [`ValueOp::RetriedSwap`]) is not such a predicate.
fn performed_flag(func: &Function, inst: &Inst, reg: Reg) -> bool {
    let InstKind::Atomic { mem, .. } = &inst.kind else { return false };
    mem.space == Space::Generic
        && inst.value != Some(ValueOp::RetriedSwap)
        && is_predicate_name(func.reg_name(reg))
}

/// A SASS predicate register (`P0`, `UP1`); PTX atomics write no predicate.
fn is_predicate_name(name: &str) -> bool {
    let digits = name.strip_prefix("UP").or_else(|| name.strip_prefix('P'));
    digits.is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}
