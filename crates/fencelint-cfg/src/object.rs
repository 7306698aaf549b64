//! The object an address points into: the variable or parameter it was computed from, seen
//! through index arithmetic (`add` of a base and an index), which [`AddrKey`](crate::AddrKey)
//! does not follow. Two addresses with the same object and different keys are most likely
//! different elements of one array ("another thread's slot").

use std::collections::BTreeSet;

use fencelint_ir::{AddrBase, Address, AluOp, Inst, InstId, InstKind, Reg, ValueOp};

use crate::{AddrRoot, FunctionAnalysis};

const MAX_STEPS: usize = 256;

impl FunctionAnalysis<'_> {
    /// The variable or parameter that the address operand of `at` points into, when exactly one
    /// can be found. `None` when the base is unknown, several bases are combined, or the address
    /// is an absolute constant.
    pub fn address_object(&self, at: InstId, address: &Address) -> Option<AddrRoot> {
        match &address.base {
            AddrBase::Symbol(name) => Some(AddrRoot::Symbol(name.clone())),
            AddrBase::Reg(reg) => self.value_object(at, *reg),
            AddrBase::Absolute | AddrBase::Complex(_) => None,
        }
    }

    /// The variable or parameter that the value of `reg`, as read by `at`, points into.
    pub fn value_object(&self, at: InstId, reg: Reg) -> Option<AddrRoot> {
        let mut visited = BTreeSet::new();
        let mut steps = 0usize;
        self.object_of(at, reg, &mut visited, &mut steps)
    }

    fn object_of(
        &self,
        at: InstId,
        reg: Reg,
        visited: &mut BTreeSet<(InstId, Reg)>,
        steps: &mut usize,
    ) -> Option<AddrRoot> {
        if !visited.insert((at, reg)) {
            return None;
        }
        *steps += 1;
        if *steps > MAX_STEPS {
            return None;
        }
        let reach = self.reaching_defs(at, reg);
        let [def] = reach.defs.as_slice() else { return None };
        if reach.from_entry {
            return None;
        }
        let inst = self.func.inst(*def);
        match &inst.value {
            Some(ValueOp::Copy(src) | ValueOp::AddImm(src, _) | ValueOp::Mapa(src)) => {
                self.object_of(*def, *src, visited, steps)
            }
            Some(ValueOp::Param(name)) => Some(AddrRoot::Param(name.clone())),
            Some(ValueOp::SymbolAddr(name)) => Some(AddrRoot::Symbol(name.clone())),
            Some(ValueOp::Imm(_)) => None,
            Some(ValueOp::Sum(..)) | None if is_address_arithmetic(inst) => {
                // A base plus an index: exactly one operand may lead to an object. In a
                // multiply-add only the addend (the last register operand) can be the base.
                let guard = inst.guard.map(|g| g.reg);
                let operands: Vec<Reg> =
                    inst.uses.iter().copied().filter(|&r| Some(r) != guard).collect();
                let candidates = if inst.alu == Some(AluOp::MultiplyAdd) {
                    operands.last().map_or(&[][..], std::slice::from_ref)
                } else {
                    &operands[..]
                };
                let mut found: Option<AddrRoot> = None;
                for &used in candidates {
                    if let Some(object) = self.object_of(*def, used, visited, steps) {
                        if found.as_ref().is_some_and(|f| *f != object) {
                            return None;
                        }
                        found = Some(object);
                    }
                }
                found
            }
            // Every other value names no address: a mask, a test, a count, a value from other
            // lanes.
            Some(_) | None => None,
        }
    }
}

/// An instruction that can add an index to a base address: PTX `add`, `sub`, `mad`, SASS
/// `IADD3`, `IMAD`, `LEA`, `VIADD` and their uniform forms.
fn is_address_arithmetic(inst: &Inst) -> bool {
    matches!(inst.kind, InstKind::Move) && matches!(inst.alu, Some(AluOp::Add | AluOp::MultiplyAdd))
}

/// An address as a sum: the roots of its terms (sorted) plus a constant offset. Two addresses with
/// equal terms differ only by the difference of their offsets, even when they were computed by
/// different instructions (`p + i*16` once for TMA and once, through `cvta.to.global`, for a
/// store).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrSum {
    pub terms: Vec<AddrRoot>,
    pub offset: i64,
}

impl FunctionAnalysis<'_> {
    /// The address operand of `at` as a sum of terms, seen through moves, `cvta`, constant adds
    /// and additions of two registers. `None` when a term has no single definition or the
    /// address went through `mapa`.
    pub fn address_sum(&self, at: InstId, address: &Address) -> Option<AddrSum> {
        let mut sum = AddrSum { terms: Vec::new(), offset: address.offset };
        match &address.base {
            AddrBase::Symbol(name) => sum.terms.push(AddrRoot::Symbol(name.clone())),
            AddrBase::Absolute => {}
            AddrBase::Complex(_) => return None,
            AddrBase::Reg(reg) => {
                let mut work = vec![(at, *reg)];
                let mut steps = 0usize;
                while let Some((at, reg)) = work.pop() {
                    steps += 1;
                    if steps > MAX_STEPS {
                        return None;
                    }
                    let reach = self.reaching_defs(at, reg);
                    let [def] = reach.defs.as_slice() else { return None };
                    if reach.from_entry {
                        return None;
                    }
                    let inst = self.func.inst(*def);
                    match &inst.value {
                        Some(ValueOp::Copy(src)) => work.push((*def, *src)),
                        Some(ValueOp::AddImm(src, k)) => {
                            sum.offset = sum.offset.wrapping_add(*k);
                            work.push((*def, *src));
                        }
                        Some(ValueOp::Imm(v)) => sum.offset = sum.offset.wrapping_add(*v),
                        Some(ValueOp::Param(name)) => sum.terms.push(AddrRoot::Param(name.clone())),
                        Some(ValueOp::SymbolAddr(name)) => {
                            sum.terms.push(AddrRoot::Symbol(name.clone()));
                        }
                        Some(ValueOp::Mapa(_)) => return None,
                        Some(ValueOp::Sum(a, b)) if inst.guard.is_none() => {
                            work.extend([(*def, *a), (*def, *b)]);
                        }
                        // Any other value is a term of its own.
                        Some(_) | None => sum.terms.push(AddrRoot::Def(*def)),
                    }
                }
            }
        }
        sum.terms.sort();
        Some(sum)
    }
}
