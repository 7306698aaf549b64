//! Branch outcomes that a path has learned, and the later branches they decide.
//!
//! ```text
//!     setp.lt.s32 %p37, %r46, 1;
//!     setp.lt.s32 %p36, %r47, 1;
//!     and.pred %p38, %p37, %p36;
//!     @%p38 bra $L_nothing_to_do;     // not taken: not (p37 and p36)
//!     ...
//!     @%p37 bra $L_second_loop;       // taken: p37, so p36 is false
//! $L_second_loop:
//!     setp.lt.s32 %p410, %r47, 1;     // the value of p36 again
//!     @%p410 bra $L_epilogue;         // never taken on this path
//! ```
//!
//! A path that passes a conditional branch knows the value of its predicate on that path. Values
//! are named by value number ([`ValueNumber`]), so a predicate computed again the same way is the
//! same value, and `and.pred`, `or.pred` and `not.pred` pass what is known to their parts and
//! back. Only values that decide something later are kept: those that two places of the function
//! test (two branches, or a branch and a part of a combined predicate), and the combinations of
//! such values.
//!
//! An integer comparison is a test of its canonical comparison (`a >= b` is `a < b` read
//! inverted, [`FunctionAnalysis::comparison_value`]), so a path that passed one comparison knows
//! the opposite comparison of the same operands, alone or joined to another predicate.
//!
//! Values may differ between two executions of one instruction, so a path forgets everything it
//! learned when it goes back in text order (every cycle of the graph has such an edge).

use rustc_hash::{FxHashMap, FxHashSet};
use smallvec::SmallVec;

use fencelint_ir::{Comparison, InstId, IntCompare, JoinedTo, Reg, Relation, ValueOp};

use crate::{BlockId, FunctionAnalysis, ValueNumber};

/// Outcomes kept on one path at most; later ones are not learned.
const MAX_OUTCOMES: usize = 8;

/// Blocks of single predecessors above an edge whose branches [`FunctionAnalysis::outcomes_on_edge`]
/// learns.
const MAX_CHAIN: usize = 8;

/// How deep a combined predicate is taken apart.
const MAX_DEPTH: usize = 4;

/// Predicate values one path has learned, sorted by value number.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub struct Outcomes(SmallVec<[(ValueNumber, bool); 4]>);

impl Outcomes {
    pub fn get(&self, value: ValueNumber) -> Option<bool> {
        self.0.binary_search_by_key(&value, |&(v, _)| v).ok().map(|at| self.0[at].1)
    }

    /// Records `value = truth` whatever the value, for one case of a case split: a value that
    /// is not kept may still imply ones that are.
    fn insert_any(&mut self, value: ValueNumber, truth: bool) {
        if let Err(at) = self.0.binary_search_by_key(&value, |&(v, _)| v) {
            self.0.insert(at, (value, truth));
        }
    }

    /// Records `value = truth`; `false` when it was known already or there is no room.
    fn insert(&mut self, value: ValueNumber, truth: bool) -> bool {
        match self.0.binary_search_by_key(&value, |&(v, _)| v) {
            Ok(_) => false,
            Err(at) if self.0.len() < MAX_OUTCOMES => {
                self.0.insert(at, (value, truth));
                true
            }
            Err(_) => false,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Keeps the values for which `keep` holds.
    pub fn retain(&mut self, mut keep: impl FnMut(ValueNumber) -> bool) {
        self.0.retain(|&mut (value, _)| keep(value));
    }

    pub fn clear(&mut self) {
        self.0.clear();
    }
}

#[derive(Clone, Copy, Debug)]
enum Logic {
    And,
    Or,
    Not,
}

/// A part of a combined predicate: a value, read inverted when `negated` (the comparison inside
/// SASS `ISETP.NE.OR P4, PT, R38, RZ, !P2` is its canonical value,
/// [`FunctionAnalysis::comparison_value`]); `None` for a part with no value of its own.
type Part = Option<(ValueNumber, bool)>;

/// What one function's walks may learn: the values worth keeping and how combined predicates
/// are made of them.
#[derive(Default)]
pub(crate) struct OutcomeInfo {
    useful: FxHashSet<ValueNumber>,
    /// How many times a branch tests each value, alone or as a part (`useful` holds those
    /// tested twice, and the combinations of useful parts).
    tests: FxHashMap<ValueNumber, u32>,
    parts: FxHashMap<ValueNumber, (Logic, Part, Part)>,
}

/// A conditional branch that ends a block, with its two successors.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CondBranch {
    pub(crate) inst: InstId,
    pub(crate) guard: fencelint_ir::Guard,
    /// A second condition beside the guard (SASS `@P4 BRA P0, target`): the branch is taken
    /// when both hold, so the way not taken says only that one of them fails.
    pub(crate) condition: Option<fencelint_ir::Guard>,
    pub(crate) taken: BlockId,
    pub(crate) not_taken: BlockId,
}

impl FunctionAnalysis<'_> {
    /// The conditional branch that ends `block`: one target, a fall-through, a guard, and two
    /// different successors.
    pub(crate) fn cond_branch(&self, block: BlockId) -> Option<CondBranch> {
        let cfg = &self.cfg;
        if cfg.block(block).insts.is_empty() {
            return None;
        }
        let inst = cfg.block(block).last();
        let branch = self.func.inst(inst);
        let guard = branch.guard?;
        let control = &branch.control;
        let [target] = control.targets.as_slice() else { return None };
        if control.indirect || control.exits || !control.falls_through {
            return None;
        }
        let taken = cfg.block_of(*target);
        let not_taken = BlockId(block.0 + 1);
        let successors = cfg.successor_slice(block);
        if taken == not_taken || !successors.contains(&taken) || !successors.contains(&not_taken) {
            return None;
        }
        Some(CondBranch { inst, guard, condition: control.condition, taken, not_taken })
    }

    /// Whether a walk that learns outcomes ([`FunctionAnalysis::walk_forward_learning`]) may
    /// find the branch that ends `block` decided: some other branch tests its predicate's value
    /// or a value it is made of.
    pub fn branch_learnable(&self, block: BlockId) -> bool {
        let Some(branch) = self.cond_branch(block) else { return false };
        let info = self.outcome_info();
        std::iter::once(branch.guard)
            .chain(branch.condition)
            .any(|guard| info.useful.contains(&self.value_number(branch.inst, guard.reg)))
    }

    /// Whether walks can learn anything in this function.
    pub(crate) fn learns_outcomes(&self) -> bool {
        !self.outcome_info().useful.is_empty()
    }

    /// The successor of `block` that `outcomes` decide, if they know its branch's predicate.
    pub(crate) fn decided_by_outcomes(
        &self,
        block: BlockId,
        outcomes: &Outcomes,
    ) -> Option<BlockId> {
        if outcomes.is_empty() {
            return None;
        }
        let branch = self.cond_branch(block)?;
        let info = self.outcome_info();
        let holds = |guard: fencelint_ir::Guard| {
            let value = self.value_number(branch.inst, guard.reg);
            known(info, outcomes, value).map(|v| v != guard.negated)
        };
        let guard = holds(branch.guard);
        let condition = branch.condition.map_or(Some(true), holds);
        match (guard, condition) {
            (Some(false), _) | (_, Some(false)) => Some(branch.not_taken),
            (Some(true), Some(true)) => Some(branch.taken),
            _ => None,
        }
    }

    /// Adds to `outcomes` what following the edge from `block` to `succ` teaches: the value of
    /// the predicate of the branch that ends `block`, and what follows from it.
    pub fn learn_edge(&self, block: BlockId, succ: BlockId, outcomes: &mut Outcomes) {
        self.learn_edge_with(block, succ, outcomes, false);
    }

    /// [`FunctionAnalysis::learn_edge`], and with `implied`, also what the predicate's value
    /// says about the tests that chose its inputs ([`crate::assume`]), for values some branch
    /// tests.
    fn learn_edge_with(
        &self,
        block: BlockId,
        succ: BlockId,
        outcomes: &mut Outcomes,
        implied: bool,
    ) {
        let Some(branch) = self.cond_branch(block) else { return };
        let info = self.outcome_info();
        let taken = succ == branch.taken;
        let implications = |guard: fencelint_ir::Guard, truth: bool| {
            if implied { self.implied_by(branch.inst, guard.reg, truth) } else { Vec::new() }
        };
        // With a second condition, the way not taken says only that one of the two fails: what
        // follows from each failing is learned.
        if let Some(condition) = branch.condition
            && !taken
        {
            let mut from_implications = Vec::new();
            let mut failing = |guard: fencelint_ir::Guard| {
                let mut case = outcomes.clone();
                let value = self.value_number(branch.inst, guard.reg);
                case.insert_any(value, guard.negated);
                for (other, truth) in implications(guard, guard.negated) {
                    case.insert_any(other, truth);
                    from_implications.push(other);
                }
                close(info, &mut case);
                case
            };
            let (first, second) = (failing(branch.guard), failing(condition));
            let keep = |value: &ValueNumber| {
                info.useful.contains(value)
                    || from_implications.contains(value) && info.tests.contains_key(value)
            };
            let mut learned = false;
            for &(value, truth) in &first.0 {
                if keep(&value) && second.get(value) == Some(truth) && outcomes.insert(value, truth)
                {
                    learned = true;
                }
            }
            if learned {
                close(info, outcomes);
            }
            return;
        }
        let mut learned = false;
        for guard in std::iter::once(branch.guard).chain(branch.condition) {
            let value = self.value_number(branch.inst, guard.reg);
            let truth = taken != guard.negated;
            if info.useful.contains(&value) && outcomes.insert(value, truth) {
                learned = true;
            }
            for (other, truth) in implications(guard, truth) {
                if info.tests.contains_key(&other) && outcomes.insert(other, truth) {
                    learned = true;
                }
            }
        }
        if learned {
            close(info, outcomes);
        }
    }

    /// What every path along the edge from `from` to `to` has learned: the outcomes of the
    /// branches on the chain of single predecessors above `from` (up to 8 blocks, each entered
    /// forward in text order), and of the edge itself, with what each outcome says about the
    /// tests that chose its predicate's inputs (a value some branch tests, see
    /// [`crate::assume`]). Empty when the edge goes back.
    pub fn outcomes_on_edge(&self, from: BlockId, to: BlockId) -> Outcomes {
        let mut outcomes = Outcomes::default();
        if to.0 <= from.0 || self.outcome_info().tests.is_empty() {
            return outcomes;
        }
        let mut chain = vec![(from, to)];
        let mut at = from;
        while chain.len() < MAX_CHAIN {
            let &[pred] = self.cfg.predecessor_slice(at) else { break };
            if pred.0 >= at.0 {
                break;
            }
            chain.push((pred, at));
            at = pred;
        }
        for &(pred, block) in chain.iter().rev() {
            self.learn_edge_with(pred, block, &mut outcomes, true);
        }
        outcomes
    }

    fn outcome_info(&self) -> &OutcomeInfo {
        self.outcomes.get_or_init(|| {
            let mut count = FxHashMap::default();
            let mut info = OutcomeInfo::default();
            for block in self.cfg.block_ids() {
                if let Some(branch) = self.cond_branch(block) {
                    for guard in std::iter::once(branch.guard).chain(branch.condition) {
                        self.take_apart(branch.inst, guard.reg, 0, &mut count, &mut info);
                    }
                }
            }
            info.useful = count.iter().filter(|&(_, &n)| n >= 2).map(|(&v, _)| v).collect();
            info.tests = count;
            if info.useful.is_empty() {
                info.parts.clear();
                return info;
            }
            // A combination is useful when a part of it is.
            loop {
                let more: Vec<ValueNumber> = info
                    .parts
                    .iter()
                    .filter(|&(v, &(_, a, b))| {
                        !info.useful.contains(v)
                            && [a, b].iter().flatten().any(|(v, _)| info.useful.contains(v))
                    })
                    .map(|(&v, _)| v)
                    .collect();
                if more.is_empty() {
                    break;
                }
                info.useful.extend(more);
            }
            info
        })
    }

    /// Counts the value of `reg` read at `at`, and the parts of a combined predicate.
    fn take_apart(
        &self,
        at: InstId,
        reg: Reg,
        depth: usize,
        count: &mut FxHashMap<ValueNumber, u32>,
        info: &mut OutcomeInfo,
    ) {
        let value = self.value_number(at, reg);
        *count.entry(value).or_default() += 1;
        if depth >= MAX_DEPTH || info.parts.contains_key(&value) {
            return;
        }
        let reach = self.reaching_defs(at, reg);
        let [def] = reach.defs.as_slice() else { return };
        if reach.from_entry {
            return;
        }
        let inst = self.func.inst(*def);
        if inst.guard.is_some() || inst.defs.as_slice() != [reg] {
            return;
        }
        let part = |reg: Reg, negated: bool| Some((self.value_number(*def, reg), negated));
        // A comparison is a test of its canonical value (`a >= b` is `a < b` inverted), which
        // another comparison of the same operands may test the other way round.
        let compared = |comparison: Comparison, count: &mut FxHashMap<ValueNumber, u32>| {
            let (canonical, inverted) = self.comparison_value(*def, comparison);
            *count.entry(canonical).or_default() += 1;
            (canonical, inverted)
        };
        if let Some((comparison, joined)) = inst.value.as_ref().and_then(ValueOp::comparison) {
            let canonical = compared(comparison, count);
            match joined {
                // The predicate is its comparison's canonical value, read one way or the
                // other: `not (canonical read inverted)`.
                None => {
                    info.parts.insert(value, (Logic::Not, Some((canonical.0, !canonical.1)), None));
                    self.link_two_constants(*def, comparison, canonical.0, count, info);
                }
                // `(a <compare> b) or other`.
                Some(JoinedTo { other, negated, or }) => {
                    let logic = if or { Logic::Or } else { Logic::And };
                    info.parts.insert(value, (logic, Some(canonical), part(other, negated)));
                    self.take_apart(*def, other, depth + 1, count, info);
                }
            }
            return;
        }
        let (logic, a, b) = match inst.value {
            Some(ValueOp::PredAnd(a, b)) => (Logic::And, Some(a), Some(b)),
            Some(ValueOp::PredOr(a, b)) => (Logic::Or, Some(a), Some(b)),
            Some(ValueOp::PredNot(a)) => (Logic::Not, Some(a), None),
            _ => return,
        };
        info.parts
            .insert(value, (logic, a.and_then(|a| part(a, false)), b.and_then(|b| part(b, false))));
        for reg in [a, b].into_iter().flatten() {
            self.take_apart(*def, reg, depth + 1, count, info);
        }
    }
}

impl FunctionAnalysis<'_> {
    /// For an (in)equality of a register with a constant `c`, where the register can hold only
    /// `c` and one other constant `d` ([`FunctionAnalysis::two_constants`]): `x == c` is
    /// `x != d`. Both canonical values (`canonical` is that of `x == c`) are recorded as each
    /// other's negation and counted as tested, so a walk that learns one knows the other: a
    /// lock flag broadcast from one lane, tested `!= 1` on the way into the critical section
    /// and `!= 0` at the loop's foot, takes the loop's exit only through the critical section.
    fn link_two_constants(
        &self,
        def: InstId,
        comparison: Comparison,
        canonical: ValueNumber,
        count: &mut FxHashMap<ValueNumber, u32>,
        info: &mut OutcomeInfo,
    ) {
        let (compare, reg, Err(constant)) = comparison else { return };
        if !matches!(compare.relation, Relation::Eq | Relation::Ne) {
            return;
        }
        let Some([a, b]) = self.two_constants(def, reg) else { return };
        let other = match constant {
            c if c == a => b,
            c if c == b => a,
            _ => return,
        };
        let equal = IntCompare { relation: Relation::Eq, ..compare };
        let (other_canonical, _) = self.comparison_value(def, (equal, reg, Err(other)));
        for value in [canonical, other_canonical] {
            *count.entry(value).or_default() += 1;
        }
        info.parts.entry(canonical).or_insert((Logic::Not, Some((other_canonical, false)), None));
        info.parts.entry(other_canonical).or_insert((Logic::Not, Some((canonical, false)), None));
    }
}

/// The value of `value` on a path that learned `outcomes`: learned, or the inverse of the
/// part of a `not` (a comparison's canonical value, learned from another comparison).
fn known(info: &OutcomeInfo, outcomes: &Outcomes, value: ValueNumber) -> Option<bool> {
    outcomes.get(value).or_else(|| match info.parts.get(&value) {
        Some(&(Logic::Not, Some((part, negated)), None)) => {
            outcomes.get(part).map(|t| t == negated)
        }
        _ => None,
    })
}

/// Derives what the known values imply through `and`, `or` and `not`, until nothing changes.
fn close(info: &OutcomeInfo, outcomes: &mut Outcomes) {
    let mut changed = true;
    while changed {
        changed = false;
        let known: SmallVec<[(ValueNumber, bool); 8]> = outcomes.0.iter().copied().collect();
        for (value, truth) in known {
            let Some(&(logic, a, b)) = info.parts.get(&value) else { continue };
            // A part's own value when the part reads `t`.
            let mut learn = |part: Part, t: bool, outcomes: &mut Outcomes| {
                if let Some((v, negated)) = part
                    && info.useful.contains(&v)
                    && outcomes.insert(v, t != negated)
                {
                    changed = true;
                }
            };
            let reads = |part: Part, outcomes: &Outcomes| {
                part.and_then(|(v, negated)| outcomes.get(v).map(|t| t != negated))
            };
            match (logic, truth) {
                (Logic::Not, t) => learn(a, !t, outcomes),
                (Logic::And, true) | (Logic::Or, false) => {
                    learn(a, truth, outcomes);
                    learn(b, truth, outcomes);
                }
                // `a and b` is false: with `a` true, `b` is false (and the other way round);
                // `a or b` is true: with `a` false, `b` is true.
                (Logic::And, false) | (Logic::Or, true) => {
                    let other = !truth;
                    if reads(a, outcomes) == Some(other) {
                        learn(b, truth, outcomes);
                    }
                    if reads(b, outcomes) == Some(other) {
                        learn(a, truth, outcomes);
                    }
                }
            }
        }
    }
}
