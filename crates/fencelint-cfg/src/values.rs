//! Value numbers: "these two registers hold the same value", seen through recomputation.
//!
//! Compilers recompute an address instead of keeping it in a register (`shl.b32 %r2765, %r48, 4`
//! before a `cp.async`, `shl.b32 %r2769, %r48, 4` again before the load that reads the copy
//! back). Two uses get the same number when their values come from instructions with the same
//! [`fencelint_ir::Inst::pure_key`] applied to operands with the same numbers. ptxas does the
//! same in SASS (`IMAD.SHL.U32 R0, R162, 0x4, RZ; VIADD R0, R0, 0xffffffff` before a poll, the
//! same into `R2` and `R0` before the fence): the SASS lowering keys the rows of the semantics
//! table marked `pure`, and an unguarded copy (`MOV R146, R142`) is its source's value.

use std::hash::{Hash, Hasher};

use rustc_hash::FxHasher;

use fencelint_ir::{AluOp, Comparison, InstId, IntCompare, Reg, Relation, ValueOp};

use crate::{FunctionAnalysis, Loop};

/// The value a register holds where an instruction reads it. Equal numbers mean equal values
/// in one execution of the function, up to the re-execution of a definition in a loop (the
/// same approximation as [`crate::AddrRoot::Def`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ValueNumber {
    /// A special register that keeps its value for the whole run of a thread (`%tid.x`,
    /// `%ctaid.y`, `%laneid`, ...), read where no instruction of the function wrote it.
    Entry(Reg),
    /// A computation from numbered values (interned per function).
    Expr(u32),
    /// The result of this instruction, which is not pure (a load, an atomic, a guarded move).
    Def(InstId),
    /// The value of a register with several definitions as it is at the start of the block
    /// that begins with this instruction, where those definitions merge (a phi of SSA form):
    /// read again below with no definition between, it is the same value (a loop counter
    /// tested twice in one iteration).
    Merge(InstId, Reg),
    /// A value the analysis cannot name: several definitions reach the use and no merge names
    /// them (one of them is in the use's block or guarded in a block above), or a register that
    /// may change on its own (`%clock`, `%warpid`), or the chain is too deep. Equal only to
    /// itself.
    Opaque(InstId, Reg),
}

/// How deep a chain of computations is followed.
const MAX_DEPTH: usize = 48;

impl FunctionAnalysis<'_> {
    /// The value number of `reg` as read by instruction `at`.
    pub fn value_number(&self, at: InstId, reg: Reg) -> ValueNumber {
        self.value_number_at_depth(at, reg, 0)
    }

    fn value_number_at_depth(&self, at: InstId, reg: Reg, depth: usize) -> ValueNumber {
        if let Some(&known) = self.value_numbers.borrow().get(&(at, reg)) {
            return known;
        }
        if depth > MAX_DEPTH {
            // Not memoized: a shallower query may still name it.
            return ValueNumber::Opaque(at, reg);
        }
        let number = self.compute_value_number(at, reg, depth);
        self.value_numbers.borrow_mut().insert((at, reg), number);
        number
    }

    fn compute_value_number(&self, at: InstId, reg: Reg, depth: usize) -> ValueNumber {
        let reach = self.reaching_defs(at, reg);
        match (reach.defs.as_slice(), reach.from_entry) {
            ([], true) if is_stable_special(self.func.reg_name(reg)) => ValueNumber::Entry(reg),
            (&[def], false) => {
                let inst = self.func.inst(def);
                if inst.defs.as_slice() != [reg] {
                    return ValueNumber::Def(def);
                }
                let Some(key) = inst.pure_key else {
                    // An unguarded copy without a key holds its source's value: SASS `MOV`,
                    // `IMAD.MOV.U32 R146, RZ, RZ, R142`, `R2UR` (every PTX copy has a key).
                    if let Some(ValueOp::Copy(src)) = inst.value
                        && inst.guard.is_none()
                    {
                        return self.value_number_at_depth(def, src, depth + 1);
                    }
                    return self.value_op_number(def, reg, depth).unwrap_or(ValueNumber::Def(def));
                };
                if let Some(ValueOp::Copy(src)) = inst.value
                    && inst.alu == Some(AluOp::Move)
                {
                    return self.value_number_at_depth(def, src, depth + 1);
                }
                let operands: Vec<ValueNumber> = inst
                    .uses
                    .iter()
                    .map(|&used| self.value_number_at_depth(def, used, depth + 1))
                    .collect();
                self.intern(key.get(), operands)
            }
            _ => match self.merge_reaching(at, reg) {
                Some(block) => ValueNumber::Merge(InstId(self.cfg.block(block).insts.start), reg),
                None => ValueNumber::Opaque(at, reg),
            },
        }
    }
}

impl FunctionAnalysis<'_> {
    /// The number of the computation `key` applied to `operands`, the same for the same pair.
    fn intern(&self, key: u64, operands: Vec<ValueNumber>) -> ValueNumber {
        let mut exprs = self.exprs.borrow_mut();
        let next = u32::try_from(exprs.len()).unwrap_or(u32::MAX);
        let number = *exprs.entry((key, operands.clone())).or_insert_with(|| {
            self.expr_operands.borrow_mut().push(operands);
            next
        });
        ValueNumber::Expr(number)
    }

    /// The number of a comparison into a predicate or a bitwise `and` that carries no
    /// [`fencelint_ir::Inst::pure_key`] (SASS `ISETP`, `LOP3.LUT Rd, Ra, 0x3, RZ, 0xc0, !PT`: the
    /// SASS lowering keys no such form), from what its [`ValueOp`] says it computes: the same operation
    /// on the same values (for a comparison, joined the same way to the same predicate) is one
    /// value. ptxas makes a test
    /// again where it did not keep the predicate or the masked value: cuDSS's `fct_kernel` tests
    /// `ISETP.LT.U32.AND P0, PT, R95, R90, !P0` before the poll and again before the fence, and
    /// masks the panel counter (`R116 & 3`) once into `R78` and again into `R36`. The lowering
    /// gives these forms only for instructions it reads whole (one destination, plain
    /// operands), so the form is the computation (with a predicate destination, `LOP3.LUT P0, RZ,
    /// R37, 0x2, ...`, whether the `and` is non-zero: numbered apart). `None` for other
    /// instructions.
    fn value_op_number(&self, def: InstId, reg: Reg, depth: usize) -> Option<ValueNumber> {
        let op = self.func.inst(def).value.as_ref()?;
        // A table that gives one of its inputs unchanged is a copy: ptxas moves a uniform
        // predicate into a vector one so (`PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x8`).
        if let ValueOp::PredTable { inputs, table } = *op {
            let place = [0xf0, 0xcc, 0xaa].iter().position(|&copy| copy == table)?;
            return Some(self.value_number_at_depth(def, inputs[place], depth + 1));
        }
        let (kind, compare, constant, joined, regs): (u8, IntCompare, i64, (bool, bool), [_; 3]) =
            if let Some(((compare, a, b), joined)) = op.comparison() {
                // 0 with a constant, 1 of two registers; 2 and 3 the same joined.
                let kind = u8::from(b.is_ok()) + 2 * u8::from(joined.is_some());
                let flags = joined.map_or((false, false), |j| (j.negated, j.or));
                let other = joined.map(|j| j.other);
                (kind, compare, b.err().unwrap_or(0), flags, [Some(a), b.ok(), other])
            } else {
                match *op {
                    ValueOp::CompareHigh { compare, high, bound, low } => {
                        (4, compare, bound, (false, false), [Some(high), Some(low), None])
                    }
                    // A predicate destination holds whether the `and` is non-zero: another
                    // value.
                    ValueOp::AndImm(src, mask) => {
                        let kind = if self.is_predicate(reg) { 6 } else { 5 };
                        (kind, NO_COMPARE, mask, (false, false), [Some(src), None, None])
                    }
                    ValueOp::And(a, b) => {
                        let kind = if self.is_predicate(reg) { 8 } else { 7 };
                        (kind, NO_COMPARE, 0, (false, false), [Some(a), Some(b), None])
                    }
                    _ => return None,
                }
            };
        let mut hasher = FxHasher::default();
        let fields = (compare.relation as u8, compare.signed, compare.bits);
        ("sass value", kind, fields, constant, joined).hash(&mut hasher);
        let operands: Vec<ValueNumber> = regs
            .into_iter()
            .flatten()
            .map(|reg| self.value_number_at_depth(def, reg, depth + 1))
            .collect();
        Some(self.intern(hasher.finish(), operands))
    }
}

impl FunctionAnalysis<'_> {
    /// The value number of the integer comparison `compare` that `def` makes of `a` and `b`
    /// (a register or a constant), and whether the comparison is that value read inverted.
    /// Comparisons with the same operands and opposite relations (`>=`, `<`) get one number,
    /// read one way and the other: a path that learned `a < b` false knows `a >= b`, as ptxas
    /// often tests one and later the other. Integer comparisons only (for floats, `!(a < b)` is
    /// not `a >= b`: a NaN makes both false).
    pub(crate) fn comparison_value(
        &self,
        def: InstId,
        comparison: Comparison,
    ) -> (ValueNumber, bool) {
        let (compare, a, b) = comparison;
        let (relation, inverted) = match compare.relation {
            Relation::Eq => (Relation::Eq, false),
            Relation::Ne => (Relation::Eq, true),
            Relation::Lt => (Relation::Lt, false),
            Relation::Ge => (Relation::Lt, true),
            Relation::Le => (Relation::Le, false),
            Relation::Gt => (Relation::Le, true),
        };
        let mut hasher = FxHasher::default();
        ("compare", relation as u8, compare.signed, compare.bits).hash(&mut hasher);
        let mut operands = vec![self.value_number(def, a)];
        match b {
            Ok(b) => operands.push(self.value_number(def, b)),
            Err(constant) => constant.hash(&mut hasher),
        }
        (self.intern(hasher.finish(), operands), inverted)
    }

    /// Whether `value` is the same in every iteration of `lp`: no instruction of the loop
    /// computes it (an instruction's result, a read with several definitions, or, for a
    /// computation, each of its operands).
    pub fn value_invariant_in(&self, value: ValueNumber, lp: &Loop) -> bool {
        self.value_invariant_within(value, lp, 0)
    }

    fn value_invariant_within(&self, value: ValueNumber, lp: &Loop, depth: usize) -> bool {
        match value {
            ValueNumber::Entry(_) => true,
            ValueNumber::Def(at) | ValueNumber::Merge(at, _) | ValueNumber::Opaque(at, _) => {
                !lp.contains_inst(self, at)
            }
            ValueNumber::Expr(number) => {
                let operands = self.expr_operands.borrow().get(number as usize).cloned();
                depth < MAX_DEPTH
                    && operands.is_some_and(|operands| {
                        operands.into_iter().all(|v| self.value_invariant_within(v, lp, depth + 1))
                    })
            }
        }
    }
}

/// The relation hashed for a [`ValueOp`] that compares nothing.
const NO_COMPARE: IntCompare = IntCompare { relation: Relation::Eq, signed: false, bits: 0 };

/// PTX special registers that keep their value while a thread runs, and the SASS constant-bank
/// slots that comparisons read (`c[0x0][0x180]`: kernel code cannot write constant banks).
/// `%clock`, `%globaltimer`, `%warpid`, `%smid` and the performance counters are not among them.
fn is_stable_special(name: &str) -> bool {
    const STABLE: &[&str] = &[
        "%tid",
        "%ntid",
        "%ctaid",
        "%nctaid",
        "%laneid",
        "%lanemask",
        "%cluster",
        "%nclusterid",
        "%is_explicit_cluster",
        "%gridid",
        "%dynamic_smem_size",
        "%total_smem_size",
        "%aggr_smem_size",
        "%reserved_smem",
        "%envreg",
    ];
    name.starts_with("c[") || STABLE.iter().any(|prefix| name.starts_with(prefix))
}

/// How deep [`FunctionAnalysis::two_constants`] follows copies and shuffles.
const MAX_CONSTANT_DEPTH: usize = 6;

impl FunctionAnalysis<'_> {
    /// The two constants that `reg`, read at `at`, can hold, when every definition that reaches
    /// it gives one of them: a constant, a choice of two constants (`SEL R19, RZ, 0x1, P1`), a
    /// copy, or another lane's value of such a register (`SHFL.IDX`), followed back a few
    /// steps. One lane takes a lock and broadcasts whether it did
    /// (`SEL R19, RZ, 0x1, P1; SHFL.IDX PT, R15, R19, RZ, 0x1f`), and the warp tests the flag
    /// twice (`R15 != 1`, then `R15 != 0`): with the values 0 and 1 only, the first test
    /// decides the second. `None` for one constant or more than two.
    pub(crate) fn two_constants(&self, at: InstId, reg: Reg) -> Option<[i64; 2]> {
        let mut found = Vec::new();
        self.constants_into(at, reg, 0, &mut found)?;
        found.sort_unstable();
        found.dedup();
        match found.as_slice() {
            &[a, b] => Some([a, b]),
            _ => None,
        }
    }

    /// Adds the constants `reg` can hold at `at` to `found`; `None` when a definition gives
    /// something else, or there are more than two.
    fn constants_into(
        &self,
        at: InstId,
        reg: Reg,
        depth: usize,
        found: &mut Vec<i64>,
    ) -> Option<()> {
        if depth > MAX_CONSTANT_DEPTH {
            return None;
        }
        let reach = self.reaching_defs(at, reg);
        if reach.from_entry || reach.defs.is_empty() {
            return None;
        }
        for &def in &reach.defs {
            let inst = self.func.inst(def);
            // The value is the one destination's (a shuffle may also write a predicate).
            let only = inst.defs.as_slice() == [reg];
            match *inst.value.as_ref()? {
                ValueOp::Imm(value) if only => found.push(value),
                ValueOp::Either(a, b) if only => found.extend([a, b]),
                ValueOp::Copy(src) if only => self.constants_into(def, src, depth + 1, found)?,
                ValueOp::Shuffle(src)
                    if inst.defs.contains(&reg)
                        && inst.defs.iter().all(|&d| d == reg || self.is_predicate(d)) =>
                {
                    self.constants_into(def, src, depth + 1, found)?;
                }
                _ => return None,
            }
            found.sort_unstable();
            found.dedup();
            if found.len() > 2 {
                return None;
            }
        }
        Some(())
    }
}
