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

/// The bytes an address may point to: an object (or none, for an absolute address) and the
/// range of offsets from its start over every value the address's other terms can take.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AddrSpan {
    pub object: Option<AddrRoot>,
    /// The smallest offset.
    pub lo: i64,
    /// The largest offset; `None` when there is no bound (a loop counter that only grows).
    pub hi: Option<i64>,
}

impl AddrSpan {
    fn exact(object: Option<AddrRoot>, value: i64) -> Self {
        Self { object, lo: value, hi: Some(value) }
    }

    /// Whether `len` bytes at this address and `other_len` bytes at `other` may share a byte.
    /// Spans into different objects (or only one into an object) are taken to meet.
    pub fn may_meet(&self, len: i64, other: &Self, other_len: i64) -> bool {
        let below = |a: &Self, b: &Self, len: i64| a.hi.is_some_and(|hi| hi + len.max(1) <= b.lo);
        self.object != other.object || !(below(self, other, len) || below(other, self, other_len))
    }
}

/// The largest magnitude a bound of a span may reach: within it, no 32-bit arithmetic wraps.
const SPAN_LIMIT: i64 = i32::MAX as i64;

impl FunctionAnalysis<'_> {
    /// The span of the address operand of `at`: its object and offset range, seen through
    /// moves, constant adds and multiplies, sums, `or`s, masks and shifts, down to constants and
    /// the thread's own indices (`%tid.x` is at most 1023, `%laneid` at most 31, ...). A
    /// register that a loop only adds a non-negative constant to (`add.s32 %r5, %r5, 4`) is
    /// at least what it starts from, with no upper bound: index arithmetic is taken not to
    /// overflow (in C++ it cannot, for the signed `int` indices compilers emit it for). `None`
    /// when a term is anything else (a loaded or passed-in value) or a bound grows past what
    /// 32 bits hold. PTX: SASS reads its indices through `S2R`, which carries no value.
    pub fn address_span(&self, at: InstId, address: &Address) -> Option<AddrSpan> {
        let base = match &address.base {
            AddrBase::Symbol(name) => AddrSpan::exact(Some(AddrRoot::Symbol(name.clone())), 0),
            AddrBase::Absolute => AddrSpan::exact(None, 0),
            AddrBase::Reg(reg) => self.reg_span(at, *reg, &mut 0)?,
            AddrBase::Complex(_) => return None,
        };
        shifted(base, address.offset)
    }

    /// The span of `reg` as `at` reads it; `steps` counts the registers looked at, within
    /// [`MAX_STEPS`].
    fn reg_span(&self, at: InstId, reg: Reg, steps: &mut usize) -> Option<AddrSpan> {
        *steps += 1;
        if *steps > MAX_STEPS {
            return None;
        }
        let reach = self.reaching_defs(at, reg);
        if reach.defs.is_empty() {
            let hi = thread_index_bound(self.func.reg_name(reg)).filter(|_| reach.from_entry)?;
            return Some(AddrSpan { object: None, lo: 0, hi: Some(hi) });
        }
        if reach.from_entry {
            return None;
        }
        // The definitions that set the register, and whether a loop adds to it.
        let mut span: Option<AddrSpan> = None;
        let mut grows = false;
        for &def in &reach.defs {
            let inst = self.func.inst(def);
            if inst.guard.is_some() || inst.defs.as_slice() != [reg] {
                return None;
            }
            // An increment of the register from the values the use sees: a value only grows.
            if let Some(ValueOp::AddImm(src, k)) = inst.value
                && src == reg
                && k >= 0
            {
                let before = self.reaching_defs(def, reg);
                if before.from_entry || !before.defs.iter().all(|d| reach.defs.contains(d)) {
                    return None;
                }
                grows = true;
                continue;
            }
            let this = self.def_span(def, steps)?;
            span = Some(match span {
                None => this,
                Some(span) if span.object == this.object => AddrSpan {
                    object: span.object,
                    lo: span.lo.min(this.lo),
                    hi: span.hi.zip(this.hi).map(|(a, b)| a.max(b)),
                },
                Some(_) => return None,
            });
        }
        let span = span?;
        within_limit(if grows { AddrSpan { hi: None, ..span } } else { span })
    }

    /// The span of the value that `def` writes.
    fn def_span(&self, def: InstId, steps: &mut usize) -> Option<AddrSpan> {
        let inst = self.func.inst(def);
        let plain = |span: AddrSpan| (span.object.is_none() && span.lo >= 0).then_some(span);
        let span = match inst.value.as_ref()? {
            ValueOp::Copy(src) => self.reg_span(def, *src, steps)?,
            ValueOp::AddImm(src, k) => shifted(self.reg_span(def, *src, steps)?, *k)?,
            ValueOp::Imm(v) => AddrSpan::exact(None, *v),
            ValueOp::SymbolAddr(name) => AddrSpan::exact(Some(AddrRoot::Symbol(name.clone())), 0),
            ValueOp::Sum(a, b) => {
                let (a, b) = (self.reg_span(def, *a, steps)?, self.reg_span(def, *b, steps)?);
                if a.object.is_some() && b.object.is_some() {
                    return None;
                }
                AddrSpan {
                    object: a.object.or(b.object),
                    lo: a.lo + b.lo,
                    hi: a.hi.zip(b.hi).map(|(a, b)| a + b),
                }
            }
            // Of two values that are not negative, an `or` is at least the larger and at most
            // their sum.
            ValueOp::Or(a, b) => {
                let a = plain(self.reg_span(def, *a, steps)?)?;
                let b = plain(self.reg_span(def, *b, steps)?)?;
                AddrSpan {
                    object: None,
                    lo: a.lo.max(b.lo),
                    hi: a.hi.zip(b.hi).map(|(a, b)| a + b),
                }
            }
            ValueOp::MulImm(src, k) => {
                let src = plain(self.reg_span(def, *src, steps)?)?;
                let hi = match src.hi {
                    Some(hi) => Some(hi.checked_mul(*k)?),
                    None => None,
                };
                AddrSpan { object: None, lo: src.lo.checked_mul(*k)?, hi }
            }
            // Whatever is masked, the result lies between zero and the mask.
            ValueOp::AndImm(_, mask) if (0..=SPAN_LIMIT).contains(mask) => {
                AddrSpan { object: None, lo: 0, hi: Some(*mask) }
            }
            ValueOp::ShrImm(src, k) if (0..63).contains(k) => {
                let src = plain(self.reg_span(def, *src, steps)?)?;
                AddrSpan { object: None, lo: src.lo >> k, hi: src.hi.map(|hi| hi >> k) }
            }
            _ => return None,
        };
        within_limit(span)
    }
}

fn shifted(span: AddrSpan, by: i64) -> Option<AddrSpan> {
    let hi = match span.hi {
        Some(hi) => Some(hi.checked_add(by)?),
        None => None,
    };
    within_limit(AddrSpan { lo: span.lo.checked_add(by)?, hi, ..span })
}

fn within_limit(span: AddrSpan) -> Option<AddrSpan> {
    let hi_ok = span.hi.is_none_or(|hi| hi <= SPAN_LIMIT && span.lo <= hi);
    (span.lo >= -SPAN_LIMIT && span.lo <= SPAN_LIMIT && hi_ok).then_some(span)
}

/// The largest value of a thread's index register (`%tid.x`, `%tid.y` at most 1023, `%tid.z`
/// 63, `%laneid` 31, `%warpid` below 1024), `None` for any other register.
fn thread_index_bound(name: &str) -> Option<i64> {
    match name {
        "%tid.x" | "%tid.y" | "%warpid" => Some(1023),
        "%tid.z" => Some(63),
        "%laneid" => Some(31),
        _ => None,
    }
}
