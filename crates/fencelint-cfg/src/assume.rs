//! What a predicate's value says about the tests that chose its inputs.
//!
//! ```text
//!     IMAD.MOV.U32 R108, RZ, RZ, 0x1 ;             // the default: ready
//!     ISETP.LT.U32.AND P3, PT, R107, R105, !P0 ;    // need
//!     @P3 LDG.E R108, desc[UR12][R38.64] ;          // the flag, read only with need
//!     ...
//!     LOP3.LUT R108, R108, 0x1, RZ, 0xc0, !PT ;
//!     ISETP.EQ.U32.AND P1, PT, R108, 0x1, PT ;
//!     @P1 BRA skip ;                                // skips the poll when the flag says ready
//! ```
//!
//! Without need the load does not run, `R108` keeps the constant and `P1` holds: a path that
//! finds `P1` false had need. A predicate is evaluated under an assumption about another
//! predicate value: the definitions that the assumption stops (a guarded one that does not run,
//! one on a way that a branch on that value does not take) are left out, and the rest must be
//! constants. The assumptions tried are the values that stopped the evaluation without one.
//!
//! The assumed value read itself is its assumed truth, and a part that decides alone decides
//! whatever the others hold: ptxas also joins the flag's test to need (`ISETP.EQ.U32.AND P4,
//! PT, R108, RZ, !P3`, false without need whatever the default), or joins the tests in a
//! `PLOP3.LUT` table with need as one input.
//!
//! Only definitions that reach the read by ways forward in text order count (none that comes
//! around a loop), so every value involved belongs to the same pass through this code; the
//! walks that use the answer forget it when they go back in text order ([`crate::Outcomes`]).

use rustc_hash::FxHashMap;
use smallvec::SmallVec;

use fencelint_ir::{InstId, JoinedTo, Reg, ValueOp};

use crate::{BlockId, FunctionAnalysis, ValueNumber};

/// Predicate values tried as assumptions for one read.
const MAX_CANDIDATES: usize = 4;

/// Blocks one search for definitions passes.
const MAX_BLOCKS: usize = 32;

/// How deep a value is followed through the instructions that compute it.
const MAX_DEPTH: usize = 8;

/// How far back a way into a block is checked for a branch that the assumption rules out.
const MAX_WAY_DEPTH: usize = 4;

/// What holds with one predicate value assumed: `(value, truth, result)`, the read gives
/// `result` when the predicate value `value` is `truth`.
pub(crate) type Implication = (ValueNumber, bool, bool);

/// The [`Implication`]s of each predicate read, by instruction and register.
pub(crate) type Implications = FxHashMap<(InstId, Reg), SmallVec<[Implication; 2]>>;

/// One evaluation: the assumption it makes, and the values that stopped it, when it makes none.
struct Search<'a, 'f> {
    analysis: &'a FunctionAnalysis<'f>,
    assume: Option<(ValueNumber, bool)>,
    candidates: SmallVec<[ValueNumber; MAX_CANDIDATES]>,
}

impl FunctionAnalysis<'_> {
    /// What reading the predicate `reg` at `at` as `truth` says about other predicate values:
    /// `(value, t)` when `reg` would read the other way were `value` not `t`.
    pub(crate) fn implied_by(&self, at: InstId, reg: Reg, truth: bool) -> Vec<(ValueNumber, bool)> {
        self.implications(at, reg)
            .iter()
            .filter(|&&(_, _, result)| result != truth)
            .map(|&(value, assumed, _)| (value, !assumed))
            .collect()
    }

    /// The [`Implication`]s of the predicate `reg` read at `at` (remembered).
    fn implications(&self, at: InstId, reg: Reg) -> SmallVec<[Implication; 2]> {
        if let Some(known) = self.implications.borrow().get(&(at, reg)) {
            return known.clone();
        }
        let mut found = SmallVec::new();
        let mut plain = Search { analysis: self, assume: None, candidates: SmallVec::new() };
        // A value that no assumption is needed for says nothing about other tests.
        if plain.value(at, reg, 0).is_none() {
            for value in plain.candidates {
                for assumed in [false, true] {
                    let mut search = Search {
                        analysis: self,
                        assume: Some((value, assumed)),
                        candidates: SmallVec::new(),
                    };
                    if let Some(result) = search.value(at, reg, 0) {
                        found.push((value, assumed, result != 0));
                    }
                }
            }
        }
        self.implications.borrow_mut().insert((at, reg), found.clone());
        found
    }
}

impl Search<'_, '_> {
    /// The value of `reg` where `at` reads it, when every definition that can reach it under the
    /// assumption is a constant or computed from constants, and all agree. Predicates read 0 or 1.
    fn value(&mut self, at: InstId, reg: Reg, depth: usize) -> Option<i64> {
        if depth > MAX_DEPTH {
            return None;
        }
        // The assumed value itself, read as a predicate (`!P0` joined to a comparison).
        if let Some((assumed, truth)) = self.assume
            && self.analysis.is_predicate(reg)
            && self.analysis.value_number(at, reg) == assumed
        {
            return Some(i64::from(truth));
        }
        let mut value = None;
        for def in self.defs(at, reg)? {
            let v = self.def_value(def, reg, depth + 1)?;
            if value.is_some_and(|known| known != v) {
                return None;
            }
            value = Some(v);
        }
        let predicate = self.analysis.is_predicate(reg);
        value.map(|v| if predicate { i64::from(v != 0) } else { v })
    }

    /// The value that `def` writes to `reg`.
    fn def_value(&mut self, def: InstId, reg: Reg, depth: usize) -> Option<i64> {
        let inst = self.analysis.func.inst(def);
        if inst.defs.as_slice() != [reg] {
            return None;
        }
        let truth = |v: i64| v != 0;
        if let Some(((compare, a, b), joined)) = inst.value.as_ref().and_then(ValueOp::comparison) {
            let mut compared = || {
                let a = self.value(def, a, depth)?;
                let b = match b {
                    Ok(b) => self.value(def, b, depth)?,
                    Err(bound) => bound,
                };
                Some(compare.holds(a, b))
            };
            let first = compared();
            let Some(JoinedTo { other, negated, or }) = joined else {
                return first.map(i64::from);
            };
            // The predicate joined to the comparison may decide alone: ptxas joins the test of a
            // value read only under a predicate to that predicate (`ISETP.EQ.AND P4, PT, R196,
            // RZ, !P0` after `@!P0 LDG.E R196`), and the comparison is then unknown.
            let second = self.value(def, other, depth).map(|v| (v != 0) != negated);
            return either(or, first, second).map(i64::from);
        }
        Some(match *inst.value.as_ref()? {
            ValueOp::Imm(value) => value,
            ValueOp::Copy(src) => self.value(def, src, depth)?,
            ValueOp::AddImm(src, k) => self.value(def, src, depth)?.checked_add(k)?,
            ValueOp::AndImm(src, mask) => self.value(def, src, depth)? & mask,
            // `.U32` and `.S32` shifts agree on a value whose sign bit is clear.
            ValueOp::ShrImm(src, k) => {
                let v = self.value(def, src, depth)?;
                if !(0..=i64::from(i32::MAX)).contains(&v) || !(0..32).contains(&k) {
                    return None;
                }
                v >> k
            }
            ValueOp::PredNot(src) => i64::from(!truth(self.value(def, src, depth)?)),
            ValueOp::PredAnd(a, b) | ValueOp::PredOr(a, b) => {
                let or = matches!(inst.value, Some(ValueOp::PredOr(..)));
                let first = truth(self.value(def, a, depth)?);
                if first == or {
                    i64::from(first)
                } else {
                    i64::from(truth(self.value(def, b, depth)?))
                }
            }
            ValueOp::PredTable { inputs, table } => {
                // The rows the known inputs allow; inputs the table ignores are not evaluated
                // (a constant folded in).
                let mut rows: u8 = 0xff;
                for (place, src) in inputs.into_iter().enumerate() {
                    let bit = 1 << (2 - place);
                    let matters = (0..8).any(|r| (table >> r ^ table >> (r ^ bit)) & 1 != 0);
                    if !matters {
                        continue;
                    }
                    // Rows whose bit `bit` is set.
                    let set = (0..8).filter(|r| r & bit != 0).fold(0u8, |m, r| m | 1 << r);
                    match self.value(def, src, depth).map(truth) {
                        Some(true) => rows &= set,
                        Some(false) => rows &= !set,
                        None => {}
                    }
                }
                // Decided when every allowed row gives one result.
                match (table & rows, !table & rows) {
                    (0, _) => 0,
                    (_, 0) => 1,
                    _ => return None,
                }
            }
            _ => return None,
        })
    }

    /// The definitions of `reg` that can reach `at` under the assumption, by ways forward in
    /// text order only. `None` when one comes around a loop, none is found before the entry,
    /// the search is too long, or a guarded definition may or may not run.
    fn defs(&mut self, at: InstId, reg: Reg) -> Option<SmallVec<[InstId; 4]>> {
        let analysis = self.analysis;
        let cfg = &analysis.cfg;
        let sites = analysis.def_sites(reg);
        let mut found = SmallVec::new();
        let mut seen: SmallVec<[BlockId; 16]> = SmallVec::new();
        let mut work: SmallVec<[(BlockId, u32); 8]> = SmallVec::new();
        work.push((cfg.block_of(at), at.0));
        while let Some((block, end)) = work.pop() {
            let start = cfg.block(block).insts.start;
            let from = sites.partition_point(|id| id.0 < start);
            let to = from + sites[from..].partition_point(|id| id.0 < end);
            let mut killed = false;
            for &id in sites[from..to].iter().rev() {
                if self.runs(id)? {
                    found.push(id);
                    killed = true;
                    break;
                }
            }
            if killed {
                continue;
            }
            let preds = cfg.predecessor_slice(block);
            if preds.is_empty() || seen.len() >= MAX_BLOCKS {
                return None;
            }
            for &pred in preds {
                if pred.0 >= block.0 {
                    return None;
                }
                if !seen.contains(&pred) && self.way_possible(pred, block, 0) {
                    seen.push(pred);
                    work.push((pred, cfg.block(pred).insts.end));
                }
            }
        }
        (!found.is_empty()).then_some(found)
    }

    /// Whether `id` runs under the assumption: always when it has no guard; `None` when its
    /// guard is another value (which becomes a candidate assumption).
    fn runs(&mut self, id: InstId) -> Option<bool> {
        let Some(guard) = self.analysis.func.inst(id).guard else { return Some(true) };
        self.holds(id, guard.reg).map(|t| t != guard.negated)
    }

    /// The assumed truth of the predicate `reg` read at `at`; `None` when the assumption is about
    /// another value.
    fn holds(&mut self, at: InstId, reg: Reg) -> Option<bool> {
        let value = self.analysis.value_number(at, reg);
        match self.assume {
            Some((assumed, truth)) if assumed == value => Some(truth),
            Some(_) => None,
            None => {
                // A value computed later in text order reached `at` around a loop, and a
                // value with no name is equal only to itself: neither makes an assumption. Nor
                // does a merged register (no kernel at hand tests one as a need).
                let usable = match value {
                    ValueNumber::Def(def) => def < at,
                    ValueNumber::Merge(..) | ValueNumber::Opaque(..) => false,
                    ValueNumber::Entry(_) | ValueNumber::Expr(_) => true,
                };
                if usable
                    && !self.candidates.contains(&value)
                    && self.candidates.len() < MAX_CANDIDATES
                {
                    self.candidates.push(value);
                }
                None
            }
        }
    }

    /// Whether control can go from `pred` to `block` under the assumption: the branch that ends
    /// `pred` does not rule the edge out, and some way into `pred` is possible too (checked
    /// `MAX_WAY_DEPTH` blocks back; a way that goes back in text order counts as possible).
    fn way_possible(&mut self, pred: BlockId, block: BlockId, depth: usize) -> bool {
        let analysis = self.analysis;
        if let Some(branch) = analysis.cond_branch(pred) {
            // Only the guard decides the way taken alone; the way not taken needs both.
            let guard = if self.assume.is_some() {
                self.holds_quiet(branch.inst, branch.guard.reg)
            } else {
                // Without an assumption, only a candidate for one.
                self.holds(branch.inst, branch.guard.reg);
                None
            };
            if let Some(t) = guard {
                let holds = t != branch.guard.negated;
                let taken = block == branch.taken;
                if taken && !holds || !taken && holds && branch.condition.is_none() {
                    return false;
                }
            }
        }
        if depth >= MAX_WAY_DEPTH || self.assume.is_none() {
            return true;
        }
        let preds = analysis.cfg.predecessor_slice(pred);
        preds.is_empty()
            || preds
                .iter()
                .any(|&earlier| earlier.0 >= pred.0 || self.way_possible(earlier, pred, depth + 1))
    }

    /// [`Search::holds`] without recording a candidate: a branch on another value leaves both
    /// ways possible.
    fn holds_quiet(&self, at: InstId, reg: Reg) -> Option<bool> {
        let (assumed, truth) = self.assume?;
        (self.analysis.value_number(at, reg) == assumed).then_some(truth)
    }
}

/// `first || second` (`first && second` when `or` is false) where either may be unknown: known
/// when one part decides alone or both are known.
fn either(or: bool, first: Option<bool>, second: Option<bool>) -> Option<bool> {
    if first == Some(or) || second == Some(or) {
        return Some(or);
    }
    first.zip(second).map(|_| !or)
}
