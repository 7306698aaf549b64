//! Forward walks that carry a small state along each path (a count of committed groups, "a
//! fence has been seen"), for hazards whose blocker depends on what came before it on the path.

use std::collections::BTreeSet;

use rustc_hash::FxHashMap;

use fencelint_ir::InstId;

use crate::{BlockId, FunctionAnalysis, Loop, Outcomes};

/// A block to walk: where to start in it (after this instruction), the successor its entering
/// edge forces, the outcomes its path learned, and the state.
type Pending<S> = (BlockId, Option<InstId>, Option<BlockId>, Outcomes, S);

/// What a walk learns from the branches it passes.
enum Learning<'l> {
    Not,
    Outcomes,
    /// Outcomes, and at the header of this loop, entered from inside it, these.
    InLoop(&'l Loop, Outcomes),
}

/// The most sets of learned branch outcomes one walk enters a block with.
const MAX_OUTCOME_SETS: usize = 32;

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
        step: impl FnMut(InstId, S) -> Option<S>,
        follow: impl Fn(BlockId, BlockId) -> bool,
    ) {
        self.walk(
            (self.cfg.block_of(from), Some(from)),
            Outcomes::default(),
            init,
            step,
            follow,
            &Learning::Not,
        );
    }

    /// [`walk_forward`](Self::walk_forward) that also remembers the outcome of each branch it
    /// passes ([`Outcomes`]) and follows a later branch that those outcomes decide only the
    /// way it goes. It walks a block once per set of outcomes its paths bring (up to 32), so it
    /// costs more: rules run it to confirm what the plain walk found. Returns `false` when it
    /// stopped at the step budget, without marking the analysis incomplete: the caller keeps
    /// what the plain walk found.
    pub fn walk_forward_learning<S: Copy + Ord>(
        &self,
        from: InstId,
        init: S,
        step: impl FnMut(InstId, S) -> Option<S>,
    ) -> bool {
        let start = (self.cfg.block_of(from), Some(from));
        self.walk(start, Outcomes::default(), init, step, |_, _| true, &Learning::Outcomes)
    }

    /// [`walk_forward_learning`](Self::walk_forward_learning) from the top of `block`, on paths
    /// that have learned `outcomes` already ([`FunctionAnalysis::outcomes_on_edge`]).
    pub fn walk_learning_from<S: Copy + Ord>(
        &self,
        block: BlockId,
        outcomes: Outcomes,
        init: S,
        step: impl FnMut(InstId, S) -> Option<S>,
    ) -> bool {
        self.walk((block, None), outcomes, init, step, |_, _| true, &Learning::Outcomes)
    }

    /// [`walk_learning_from`](Self::walk_learning_from) inside or after `lp`, where `outcomes`
    /// hold at every entry of `lp`'s header: learned on its one way in, of values no instruction
    /// of the loop computes ([`FunctionAnalysis::value_invariant_in`]). A path that goes back
    /// to the header from inside the loop knows them again there, instead of nothing.
    pub fn walk_learning_in_loop<S: Copy + Ord>(
        &self,
        block: BlockId,
        outcomes: Outcomes,
        lp: &Loop,
        init: S,
        step: impl FnMut(InstId, S) -> Option<S>,
    ) -> bool {
        let learning = Learning::InLoop(lp, outcomes.clone());
        self.walk((block, None), outcomes, init, step, |_, _| true, &learning)
    }

    /// Walks from `start`: a block, and the instruction after which to begin in it (its top
    /// when `None`).
    fn walk<S: Copy + Ord>(
        &self,
        start: (BlockId, Option<InstId>),
        outcomes: Outcomes,
        init: S,
        mut step: impl FnMut(InstId, S) -> Option<S>,
        follow: impl Fn(BlockId, BlockId) -> bool,
        learning: &Learning<'_>,
    ) -> bool {
        let cfg = &self.cfg;
        // Outcomes given at the start are kept even where no branch tests a value twice.
        let learn =
            !matches!(learning, Learning::Not) && (self.learns_outcomes() || !outcomes.is_empty());
        // A block is walked once per state, per successor its entering edge forces
        // ([`FunctionAnalysis::forced_successor`]) and, when learning, per set of branch
        // outcomes its path learned ([`Outcomes`]; past `MAX_OUTCOME_SETS` sets at one block,
        // it is entered with none).
        let mut seen: BTreeSet<(BlockId, Option<BlockId>, Outcomes, S)> = BTreeSet::new();
        let mut outcome_sets: FxHashMap<BlockId, usize> = FxHashMap::default();
        let outcomes = if learn { outcomes } else { Outcomes::default() };
        let mut work: Vec<Pending<S>> = vec![(start.0, start.1, None, outcomes, init)];
        let mut steps = 0usize;
        while let Some((block, after, forced, outcomes, entry_state)) = work.pop() {
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
                if matches!(learning, Learning::Not) {
                    self.mark_incomplete();
                }
                return false;
            }
            let Some(exit_state) = state else { continue };
            let decided = forced.or_else(|| self.decided_by_outcomes(block, &outcomes));
            for succ in cfg.successors(block) {
                if decided.is_some_and(|only| only != succ) || !follow(block, succ) {
                    continue;
                }
                let next = self.forced_successor(block, succ);
                let mut learned = Outcomes::default();
                // Going back in text order may run an instruction again: forget, but for what
                // holds at every entry of a loop's header.
                if let Learning::InLoop(lp, held) = learning
                    && learn
                    && succ == lp.header
                    && lp.contains(block)
                {
                    learned = held.clone();
                } else if learn && succ.0 > block.0 {
                    learned = outcomes.clone();
                    self.learn_edge(block, succ, &mut learned);
                    if !learned.is_empty() {
                        let sets = outcome_sets.entry(succ).or_default();
                        if *sets >= MAX_OUTCOME_SETS {
                            learned.clear();
                        } else if !seen.contains(&(succ, next, learned.clone(), exit_state)) {
                            *sets += 1;
                        }
                    }
                }
                if seen.insert((succ, next, learned.clone(), exit_state)) {
                    work.push((succ, None, next, learned, exit_state));
                }
            }
        }
        true
    }
}
