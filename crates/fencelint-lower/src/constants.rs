//! Branches that constants decide, in PTX whose calls were inlined.
//!
//! ```text
//!     st.param.b32 [param1+0], 2;            // the caller passes memory_order_acquire
//!     call.uni (retval0), load, (param0, param1);
//! load:                                       // the copy of the callee's body
//!     ld.param.u32 %r1, [load_param_1];
//!     setp.eq.s32 %p1, %r1, 0;                // memory_order_relaxed?
//!     @%p1 bra $L_relaxed;                    // never taken from this call
//! ```
//!
//! A device function that takes a mode or a memory order and branches on it (a `__noinline__`
//! helper, libcu++'s `atomic_ref::load` in a debug build, which picks its instruction at run
//! time) is one body in PTX; each call passes a constant. Once the body is copied into the
//! caller with its `.param` accesses made copies of the caller's registers (see
//! `ptx::Inliner`), the constant reaches the comparison, and the branch goes one way only. The
//! other way is not an edge of the graph: code that only it reached stays in place but reads,
//! writes and orders nothing, so no rule sees a load that no execution of this caller runs.
//!
//! A register is a constant here when the function defines it once, with no guard, as a
//! constant or as a copy of (or a constant added to) such a register. PTX registers are
//! virtual: a value passed into a copied body, and one that a debug build moves between
//! registers, has a single definition.

use fencelint_ir::{Function, Inst, InstId, InstKind, Reg, ValueOp};

/// How many copies a constant is followed through.
const MAX_DEPTH: usize = 16;

/// Takes out the way of each conditional branch that the constants of `func` rule out, and
/// makes the code that only those ways reached inert. Returns how many branches were decided.
pub(crate) fn fold_constant_branches(func: &mut Function) -> usize {
    let defs = Definitions::of(func);
    let decided: Vec<(usize, bool)> = func
        .insts
        .iter()
        .enumerate()
        .filter_map(|(i, inst)| {
            let guard = inst.guard.filter(|_| {
                matches!(inst.kind, InstKind::Branch)
                    && !inst.control.targets.is_empty()
                    && !inst.control.indirect
                    && inst.control.condition.is_none()
            })?;
            let taken = defs.truth(func, guard.reg, 0)? != guard.negated;
            Some((i, taken))
        })
        .collect();
    if decided.is_empty() {
        return 0;
    }
    let before = reachable(func);
    for &(i, taken) in &decided {
        let inst = &mut func.insts[i];
        if taken {
            inst.guard = None;
            inst.control.falls_through = false;
        } else {
            inst.guard = None;
            inst.control.targets.clear();
            inst.control.falls_through = true;
        }
    }
    make_unreached_inert(func, before);
    decided.len()
}

/// Makes inert the instructions that `before` (what [`reachable`] gave before a fold) marks
/// reached and that control no longer reaches. They lead nowhere either: code that no path
/// enters is no predecessor of the code it used to fall or jump into (a block without
/// predecessors would read as a second entry to the analyses that walk backward).
fn make_unreached_inert(func: &mut Function, before: Option<Vec<bool>>) {
    let Some(before) = before else { return };
    let after = reachable(func).unwrap_or_else(|| vec![true; func.insts.len()]);
    for (i, inst) in func.insts.iter_mut().enumerate() {
        if before[i] && !after[i] {
            make_inert(inst);
            inst.control = fencelint_ir::Control::default();
        }
    }
}

/// An instruction whose guard (or a branch whose second condition) never holds: it writes
/// nothing, and control goes on to the next instruction (a branch never jumps, an exit or
/// return never leaves).
fn never_runs(inst: &mut Inst) {
    make_inert(inst);
    inst.control = fencelint_ir::Control { falls_through: true, ..Default::default() };
}

/// An instruction that never runs: it reads, writes and orders nothing. Its place, its text and
/// the way control leaves it stay.
fn make_inert(inst: &mut Inst) {
    inst.kind = InstKind::Other;
    inst.guard = None;
    inst.defs.clear();
    inst.uses.clear();
    inst.value = None;
    inst.alu = None;
    inst.pure_key = None;
    inst.address = None;
    inst.extra_addresses.clear();
}

/// How far back from a call its constant arguments are looked for, in instructions.
const CALL_WINDOW: usize = 64;

/// SASS: the constants a caller puts in registers just before a call, and the code of the
/// callee's copy (each call has its own, see [`Function::inlined_from`]) that they decide.
///
/// ```text
///     HFMA2.MMA R6, -RZ, RZ, 0, 1.1920928955078125e-07 ;   // R6 = 2
///     CALL.ABS.NOINC `(_Z15poll_with_orderPKji) ;
/// _Z15poll_with_orderPKji:                                 // this call's copy
///     ISETP.NE.AND P0, PT, R6, 0x2, PT ;                   // P0 = false
///     @P0 LDG.E.STRONG.GPU R4, desc[UR4][R8.64] ;          // never runs from this call
///     @!P0 LDG.E.STRONG.GPU R4, desc[UR4][R8.64] ;         // always runs
///     @!P0 CCTL.IVALL ;
/// ```
///
/// ptxas makes a separate function of a `__noinline__` device function in a `-rdc` build, and
/// a mode argument then chooses instructions by guard or by branch. The constants are those
/// that the call's block writes before it (the last write of the register, with no guard).
/// In the copy, which only that call enters, a register the copy never writes keeps its
/// constant everywhere; one it writes, up to the first write in the copy's first block. A
/// predicate compared from a known register in the same block is known up to its next write.
/// A guard so decided is dropped or makes its instruction inert, a branch becomes one that
/// always or never jumps, and code that only such branches reached is made inert. Returns how
/// many guards were decided.
pub(crate) fn fold_call_constants(func: &mut Function) -> usize {
    let Some(from) = func.inlined_from.map(|k| k as usize) else { return 0 };
    let n = func.insts.len();
    // How many branches and calls name each instruction.
    let mut named = vec![0u32; n];
    for inst in &func.insts {
        for target in &inst.control.targets {
            if let Some(count) = named.get_mut(target.index()) {
                *count += 1;
            }
        }
    }
    // The calls of the function's own code and the copies they enter, in the order of the
    // copies: each copy runs to the next one (copies of the callee's own calls are inside it).
    let mut calls: Vec<(usize, usize)> = (0..from.min(n))
        .filter_map(|i| {
            let inst = &func.insts[i];
            let &[entry] = inst.control.targets.as_slice() else { return None };
            let entry = entry.index();
            (matches!(inst.kind, InstKind::Call) && entry >= from && entry < n)
                .then_some((i, entry))
        })
        .collect();
    calls.sort_unstable_by_key(|&(_, entry)| entry);
    let copies: Vec<_> = calls
        .iter()
        .enumerate()
        .filter_map(|(k, &(call, entry))| {
            // Entered from this call alone.
            if named[entry] != 1 || func.insts[entry - 1].falls_to_next() {
                return None;
            }
            let at_call = constants_before(func, call, &named);
            let end = calls.get(k + 1).map_or(n, |&(_, next)| next);
            (!at_call.is_empty()).then_some((entry..end, at_call))
        })
        .collect();
    if copies.is_empty() {
        return 0;
    }
    let before = reachable(func);
    let mut folded = 0;
    for (range, at_call) in copies {
        folded += fold_copy(func, range, &named, at_call);
    }
    if folded > 0 {
        make_unreached_inert(func, before);
    }
    folded
}

/// The constants that the block of `call` writes before it, each as its last write of the
/// register, with no guard.
fn constants_before(func: &Function, call: usize, named: &[u32]) -> Vec<(Reg, i64)> {
    let mut constants = Vec::new();
    let mut seen: Vec<Reg> = Vec::new();
    for i in (call.saturating_sub(CALL_WINDOW)..call).rev() {
        let inst = &func.insts[i];
        if !inst.falls_to_next() || matches!(inst.kind, InstKind::Call) {
            break;
        }
        for &reg in &inst.defs {
            if seen.contains(&reg) {
                continue;
            }
            seen.push(reg);
            if let (None, &[_], Some(ValueOp::Imm(value))) =
                (inst.guard, inst.defs.as_slice(), &inst.value)
            {
                constants.push((reg, *value));
            }
        }
        if named[i] > 0 {
            break;
        }
    }
    constants
}

/// Decides the guards of the copy `range` that `at_call`, the constants its call passes,
/// decide ([`fold_call_constants`]).
fn fold_copy(
    func: &mut Function,
    range: std::ops::Range<usize>,
    named: &[u32],
    at_call: Vec<(Reg, i64)>,
) -> usize {
    let mut written = vec![false; func.regs.len()];
    for inst in &func.insts[range.clone()] {
        // A call that was not linked may write any register.
        if matches!(inst.kind, InstKind::Call) && inst.control.targets.is_empty() {
            return 0;
        }
        for reg in &inst.defs {
            if let Some(w) = written.get_mut(reg.0 as usize) {
                *w = true;
            }
        }
    }
    let steady: Vec<(Reg, i64)> =
        at_call.iter().copied().filter(|(reg, _)| !written[reg.0 as usize]).collect();
    let mut known = Known { regs: at_call, preds: Vec::new() };
    let mut folded = 0;
    for i in range.clone() {
        let starts_block = named[i] > 0 || {
            let before = &func.insts[i - 1];
            !before.falls_to_next() || before.is_branch()
        };
        if i != range.start && starts_block {
            known = Known { regs: steady.clone(), preds: Vec::new() };
        }
        folded += known.step(&mut func.insts[i]);
    }
    folded
}

/// Registers and predicates of known value at one point of a block.
struct Known {
    regs: Vec<(Reg, i64)>,
    preds: Vec<(Reg, bool)>,
}

impl Known {
    fn reg(&self, reg: Reg) -> Option<i64> {
        self.regs.iter().find(|(r, _)| *r == reg).map(|&(_, v)| v)
    }

    fn pred(&self, reg: Reg) -> Option<bool> {
        self.preds.iter().find(|(r, _)| *r == reg).map(|&(_, v)| v)
    }

    /// Decides the guard of `inst` (and a branch's second condition) when a known predicate is
    /// its guard, then learns what it writes. Returns 1 when the guard was decided.
    fn step(&mut self, inst: &mut Inst) -> usize {
        let mut folded = 0;
        // A second condition that is known: the branch never jumps, or its guard alone decides.
        if let Some(condition) = inst.control.condition
            && let Some(truth) = self.pred(condition.reg)
        {
            folded = 1;
            if truth == condition.negated {
                never_runs(inst);
                return folded;
            }
            inst.control.condition = None;
        }
        if let Some(guard) = inst.guard
            && let Some(truth) = self.pred(guard.reg)
        {
            folded = 1;
            if truth == guard.negated {
                never_runs(inst);
                return folded;
            }
            // A branch's second condition becomes its guard.
            inst.guard = inst.control.condition.take();
            if inst.guard.is_none()
                && (inst.is_branch() || inst.control.exits || matches!(inst.kind, InstKind::Return))
            {
                inst.control.falls_through = false;
            }
        }
        let learned = match (inst.guard, inst.defs.as_slice(), &inst.value) {
            (None, &[def], Some(ValueOp::Imm(v))) => Some((def, Ok(*v))),
            (None, &[def], Some(ValueOp::Copy(src))) => self.reg(*src).map(|v| (def, Ok(v))),
            (None, &[def], Some(ValueOp::Compare(compare, src, bound))) => {
                self.reg(*src).map(|v| (def, Err(compare.holds(v, *bound))))
            }
            _ => None,
        };
        for def in &inst.defs {
            self.regs.retain(|(r, _)| r != def);
            self.preds.retain(|(r, _)| r != def);
        }
        match learned {
            Some((def, Ok(v))) => self.regs.push((def, v)),
            Some((def, Err(truth))) => self.preds.push((def, truth)),
            None => {}
        }
        folded
    }
}

/// The one definition of each register, where it has exactly one, with no guard and no other
/// register written.
pub(crate) struct Definitions(Vec<Def>);

#[derive(Clone, Copy, PartialEq, Eq)]
enum Def {
    None,
    One(u32),
    Many,
}

impl Definitions {
    pub(crate) fn of(func: &Function) -> Self {
        let mut defs = vec![Def::None; func.regs.len()];
        for (i, inst) in func.insts.iter().enumerate() {
            for reg in &inst.defs {
                let Some(slot) = defs.get_mut(reg.0 as usize) else { continue };
                *slot = match *slot {
                    Def::None if inst.guard.is_none() && inst.defs.len() == 1 => Def::One(i as u32),
                    _ => Def::Many,
                };
            }
        }
        Self(defs)
    }

    /// The instruction that defines `reg`, when it is the only one and has no guard.
    pub(crate) fn single<'f>(&self, func: &'f Function, reg: Reg) -> Option<&'f Inst> {
        self.single_at(reg).map(|at| func.inst(InstId(at as u32)))
    }

    /// Where [`Definitions::single`] is.
    pub(crate) fn single_at(&self, reg: Reg) -> Option<usize> {
        match self.0.get(reg.0 as usize)? {
            Def::One(at) => Some(*at as usize),
            _ => None,
        }
    }

    fn constant(&self, func: &Function, reg: Reg, depth: usize) -> Option<i64> {
        if depth > MAX_DEPTH {
            return None;
        }
        match *self.single(func, reg)?.value.as_ref()? {
            ValueOp::Imm(value) => Some(value),
            ValueOp::Copy(src) => self.constant(func, src, depth + 1),
            ValueOp::AddImm(src, add) => {
                self.constant(func, src, depth + 1).map(|v| v.wrapping_add(add))
            }
            _ => None,
        }
    }

    /// The value of the predicate `reg`, when constants decide it.
    fn truth(&self, func: &Function, reg: Reg, depth: usize) -> Option<bool> {
        if depth > MAX_DEPTH {
            return None;
        }
        let next = depth + 1;
        match *self.single(func, reg)?.value.as_ref()? {
            ValueOp::Compare(compare, src, bound) => {
                Some(compare.holds(self.constant(func, src, next)?, bound))
            }
            ValueOp::CompareRegs(compare, a, b) => {
                Some(compare.holds(self.constant(func, a, next)?, self.constant(func, b, next)?))
            }
            ValueOp::PredNot(p) => self.truth(func, p, next).map(|t| !t),
            ValueOp::PredAnd(a, b) => {
                match (self.truth(func, a, next), self.truth(func, b, next)) {
                    (Some(false), _) | (_, Some(false)) => Some(false),
                    (Some(true), Some(true)) => Some(true),
                    _ => None,
                }
            }
            ValueOp::PredOr(a, b) => match (self.truth(func, a, next), self.truth(func, b, next)) {
                (Some(true), _) | (_, Some(true)) => Some(true),
                (Some(false), Some(false)) => Some(false),
                _ => None,
            },
            _ => None,
        }
    }
}

/// Which instructions control can reach from the function's first; `None` when an indirect
/// branch with targets not all known is reached (anything could be).
fn reachable(func: &Function) -> Option<Vec<bool>> {
    let n = func.insts.len();
    let mut seen = vec![false; n];
    let mut work = Vec::new();
    if n > 0 {
        seen[0] = true;
        work.push(0usize);
    }
    while let Some(i) = work.pop() {
        let inst = &func.insts[i];
        if inst.control.indirect {
            return None;
        }
        let next = (inst.falls_to_next() && i + 1 < n).then_some(i + 1);
        for to in inst.control.targets.iter().map(|t| t.index()).chain(next) {
            if to < n && !seen[to] {
                seen[to] = true;
                work.push(to);
            }
        }
    }
    Some(seen)
}

#[cfg(test)]
mod tests {
    //! Hand-written PTX and nvdisasm text, tiny, in the shapes the compilers print.

    use fencelint_ir::{Function, InstKind, Sem};
    use fencelint_sass::SassFormat;
    use fencelint_source::FileId;

    /// A `.func` that loads with the strength its second argument picks (2: acquire), and a
    /// kernel that calls it with `order` and `ld.param`s its result.
    fn ptx(order: &str) -> String {
        format!(
            ".version 8.5\n.target sm_90\n.address_size 64\n\
             .func (.param .b32 ret) pick(.param .b64 pick_p, .param .b32 pick_o)\n{{\n\
             .reg .pred %p<2>;\n.reg .b32 %r<4>;\n.reg .b64 %rd<2>;\n\
             ld.param.u64 %rd1, [pick_p];\n\
             ld.param.u32 %r1, [pick_o];\n\
             setp.eq.s32 %p1, %r1, 2;\n\
             @%p1 bra ACQ;\n\
             ld.relaxed.gpu.global.u32 %r2, [%rd1];\n\
             bra.uni DONE;\n\
             ACQ: ld.acquire.gpu.global.u32 %r2, [%rd1];\n\
             DONE: st.param.b32 [ret], %r2;\n\
             ret;\n}}\n\
             .visible .entry k(.param .u64 k_p)\n{{\n\
             .reg .b32 %r<3>;\n.reg .b64 %rd<2>;\n\
             ld.param.u64 %rd1, [k_p];\n\
             {{\n.param .b64 param0;\nst.param.b64 [param0+0], %rd1;\n\
             .param .b32 param1;\n{order}\n\
             .param .b32 retval0;\n\
             call.uni (retval0), pick, (param0, param1);\n\
             ld.param.b32 %r1, [retval0+0];\n}}\n\
             ret;\n}}\n"
        )
    }

    fn kernel(text: &str) -> Function {
        let lowered = crate::ptx::lower_text(FileId(0), text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let module = lowered.modules.into_iter().next().unwrap();
        module.functions.into_iter().find(|f| f.name == "k").unwrap()
    }

    /// The semantics of the loads the kernel (with its copy of `pick`) can run.
    fn loads(func: &Function) -> Vec<Sem> {
        func.insts
            .iter()
            .filter_map(|inst| match &inst.kind {
                InstKind::Load(mem) if mem.space != fencelint_ir::Space::Param => Some(mem.sem),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_constant_argument_decides_the_callees_branch() {
        let acquire = kernel(&ptx("st.param.b32 [param1+0], 2;"));
        assert_eq!(loads(&acquire), [Sem::Acquire]);
        let relaxed = kernel(&ptx("st.param.b32 [param1+0], 0;"));
        assert_eq!(loads(&relaxed), [Sem::Relaxed]);
        // The branch that no longer jumps, and the one that always does.
        let branch = |func: &Function| {
            func.insts.iter().find(|i| i.is_branch() && i.guard.is_some()).cloned()
        };
        assert!(branch(&acquire).is_none());
        assert!(branch(&relaxed).is_none());
    }

    #[test]
    fn a_value_the_caller_computes_decides_nothing() {
        // A register argument, and a constant written under a guard: both loads stay.
        let register = kernel(&ptx("st.param.b32 [param1+0], %r2;"));
        assert_eq!(loads(&register), [Sem::Relaxed, Sem::Acquire]);
        let twice = ptx("st.param.b32 [param1+0], 2;").replace(
            "ld.param.u32 %r1, [pick_o];",
            "ld.param.u32 %r1, [pick_o];\nadd.s32 %r1, %r1, 0;",
        );
        assert_eq!(loads(&kernel(&twice)), [Sem::Relaxed, Sem::Acquire]);
        let guarded = ptx("st.param.b32 [param1+0], 2;").replace(
            "ld.param.u32 %r1, [pick_o];",
            "setp.ne.s64 %p1, %rd1, 0;\n@%p1 ld.param.u32 %r1, [pick_o];",
        );
        assert_eq!(loads(&kernel(&guarded)), [Sem::Relaxed, Sem::Acquire]);
    }

    /// A kernel that writes `R6` and calls a function that compares it, guards its two loads
    /// with the result, then writes `R6` itself (`extra`) and guards a third load.
    fn sass(value: &str, extra: &str) -> Function {
        let section = |name: &str, kernel: bool| {
            let global = if kernel { format!("\t.global {name}\n") } else { String::new() };
            format!(
                "\t.section\t.text.{name},\"ax\",@progbits\n{global}\t.type {name},@function\n\
                 {name}:\n.text.{name}:\n"
            )
        };
        let text = format!(
            "{}\
             /*0000*/ ISETP.NE.AND P0, PT, R6, 0x2, PT ;\n\
             /*0010*/ @P0 LDG.E.STRONG.GPU R4, desc[UR4][R8.64] ;\n\
             /*0020*/ @!P0 LDG.E.STRONG.GPU R4, desc[UR4][R8.64] ;\n\
             /*0030*/ @!P0 CCTL.IVALL ;\n\
             /*0040*/ {extra}\n\
             /*0050*/ @!P0 LDG.E.STRONG.SYS R5, desc[UR4][R8.64] ;\n\
             /*0060*/ RET.ABS.NODEC R20 0x0 ;\n\
             {}\
             /*0000*/ {value}\n\
             /*0010*/ CALL.ABS.NOINC `(f) ;\n\
             /*0020*/ EXIT ;\n",
            section("f", false),
            section("k", true),
        );
        let lowered = crate::sass::lower_text(FileId(0), &text, SassFormat::NvdisasmText, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let module = lowered.modules.into_iter().next().unwrap();
        module.functions.into_iter().find(|f| f.name == "k").unwrap()
    }

    /// The loads of the kernel's copy of `f`, with whether each keeps a guard.
    fn guarded_loads(func: &Function) -> Vec<(&str, bool)> {
        func.insts
            .iter()
            .filter(|inst| matches!(inst.kind, InstKind::Load(_) | InstKind::Fence(_)))
            .map(|inst| (inst.opcode.as_str(), inst.guard.is_some()))
            .collect()
    }

    #[test]
    fn constants_passed_in_registers_decide_guards_in_the_copy() {
        let acquire = sass("MOV R6, 0x2 ;", "NOP ;");
        assert_eq!(
            guarded_loads(&acquire),
            [("LDG.E.STRONG.GPU", false), ("CCTL.IVALL", false), ("LDG.E.STRONG.SYS", false)]
        );
        let relaxed = sass("MOV R6, RZ ;", "NOP ;");
        assert_eq!(guarded_loads(&relaxed), [("LDG.E.STRONG.GPU", false)]);
        // Not a constant: every guard stays.
        let unknown = sass("MOV R6, R7 ;", "NOP ;");
        assert_eq!(guarded_loads(&unknown).len(), 4);
        assert!(guarded_loads(&unknown).iter().all(|&(_, guarded)| guarded));
    }

    #[test]
    fn an_exit_that_never_runs_leaves_the_code_after_it() {
        let exit = sass("MOV R6, 0x2 ;", "@P0 EXIT ;");
        assert_eq!(
            guarded_loads(&exit),
            [("LDG.E.STRONG.GPU", false), ("CCTL.IVALL", false), ("LDG.E.STRONG.SYS", false)]
        );
    }

    /// `@!P0 BRA P1, target` with `!P0` known to hold jumps when `P1` does: it stays a
    /// conditional branch guarded by `P1`, and the load after it stays reachable (as a jump
    /// that always leaves, it made the load unreachable and inert). The load starts a block,
    /// where the fold keeps only the registers the copy never writes: its guard stays.
    #[test]
    fn a_decided_guard_leaves_a_branch_its_second_condition() {
        let branch = sass("MOV R6, 0x2 ;", "@!P0 BRA P1, 0x60 ;");
        assert_eq!(
            guarded_loads(&branch),
            [("LDG.E.STRONG.GPU", false), ("CCTL.IVALL", false), ("LDG.E.STRONG.SYS", true)]
        );
        let bra = branch.insts.iter().find(|inst| inst.opcode == "BRA").expect("the branch");
        assert!(bra.guard.is_some() && bra.control.condition.is_none(), "{bra:?}");
        assert!(bra.control.falls_through);
    }

    #[test]
    fn a_predicate_written_again_is_not_known_past_the_write() {
        let rewritten = sass("MOV R6, 0x2 ;", "ISETP.NE.AND P0, PT, R4, RZ, PT ;");
        assert_eq!(
            guarded_loads(&rewritten),
            [("LDG.E.STRONG.GPU", false), ("CCTL.IVALL", false), ("LDG.E.STRONG.SYS", true)]
        );
    }
}
