//! Forward walks that carry a small state along each path (a count of committed groups, "a
//! fence has been seen"), for hazards whose blocker depends on what came before it on the path.

use std::collections::BTreeSet;

use fencelint_ir::InstId;

use crate::{BlockId, FunctionAnalysis};

impl FunctionAnalysis<'_> {
    /// Walks every path that starts just after `from`, carrying a state that starts as `init`.
    ///
    /// `step` sees each instruction with the state that reaches it and returns the state after
    /// it, or `None` to end the path there. Each (block, state at the block's top) pair is walked
    /// once, so the walk terminates when the state type is finite; keep it small (a few bits or
    /// a capped counter). The start block is walked again from its top when a path loops back
    /// to it. A branch that the edge into its block decides
    /// ([`forced_successor`](Self::forced_successor)) is followed only the way it goes.
    pub fn walk_forward<S: Copy + Ord>(
        &self,
        from: InstId,
        init: S,
        step: impl FnMut(InstId, S) -> Option<S>,
    ) {
        self.walk_forward_on(from, init, step, |_, _| true);
    }

    /// [`walk_forward`](Self::walk_forward) that follows the edge from one block to another only
    /// when `follow(from, to)` allows it (to leave out edges a rule knows to be infeasible).
    pub fn walk_forward_on<S: Copy + Ord>(
        &self,
        from: InstId,
        init: S,
        mut step: impl FnMut(InstId, S) -> Option<S>,
        follow: impl Fn(BlockId, BlockId) -> bool,
    ) {
        let cfg = &self.cfg;
        // A block is walked once per state and per successor its entering edge forces
        // ([`FunctionAnalysis::forced_successor`]).
        let mut seen: BTreeSet<(BlockId, Option<BlockId>, S)> = BTreeSet::new();
        let mut work: Vec<(BlockId, Option<InstId>, Option<BlockId>, S)> =
            vec![(cfg.block_of(from), Some(from), None, init)];
        let mut steps = 0usize;
        while let Some((block, after, forced, entry_state)) = work.pop() {
            let mut state = Some(entry_state);
            for id in cfg.block(block).ids() {
                if after.is_some_and(|a| id <= a) {
                    continue;
                }
                steps += 1;
                let Some(current) = state else { break };
                state = step(id, current);
            }
            if steps > self.budget.walk_steps {
                self.mark_incomplete();
                return;
            }
            let Some(exit_state) = state else { continue };
            for succ in cfg.successors(block) {
                if forced.is_some_and(|only| only != succ) || !follow(block, succ) {
                    continue;
                }
                let next = self.forced_successor(block, succ);
                if seen.insert((succ, next, exit_state)) {
                    work.push((succ, None, next, exit_state));
                }
            }
        }
    }
}
