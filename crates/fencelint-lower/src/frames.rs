//! Where PTX's generic addresses point, and local variables of a stack frame read as
//! registers: what a release build's compiler works out, redone for debug builds.
//!
//! ```text
//!     mov.u64 %SPL, __local_depot7;         // the function's frame
//!     cvta.local.u64 %SP, %SPL;             // and its generic address
//!     ld.acquire.gpu.u32 %r5, [%rd3];
//!     st.u32 [%SP+8], %r5;                  // the loaded value kept in a local variable
//!     ld.u32 %r1, [%SP+8];                  // and read back
//!     setp.eq.s32 %p1, %r1, 0;
//! ```
//!
//! A debug build (`nvcc -G`) keeps every local variable in the stack frame, and so does any
//! build for a local array: values move through `st`/`ld` of the frame instead of registers,
//! and pointers to the frame are passed to called functions (`this` of a libcu++
//! `atomic_ref`). Such an access is no access of memory another thread can see, and reading a
//! slot gives what was last written to it: each slot of a frame becomes a register, its
//! stores copies into it and its loads copies out of it, so that the analyses follow a value
//! through a local variable as through a register (the poll above is the acquire load, not the
//! `ld.u32`).
//!
//! A frame is read so only when every use of an address in it is known: the address of a load
//! or store of the frame at a constant offset, a constant added to it, a comparison (a null
//! test), or the value stored in a slot of a frame that is read so too, whose one store it is
//! (`this` kept in a callee's own frame), in the function or in the inlined copy of a callee it
//! was passed to. A frame whose address is stored elsewhere, passed to a call that was not
//! inlined or computed with, or whose slots are read and written at different widths, overlap,
//! or take vector accesses, stays memory: local memory all the same, which the generic
//! accesses of the frame are given ([`infer_generic_spaces`], run first by [`read_frames`]), so
//! that no read of it is taken for a poll of memory that other threads write.

use std::collections::{BTreeMap, BTreeSet};

use fencelint_ir::{AddrBase, AluOp, Function, Inst, InstKind, Reg, Space, ValueOp};

use crate::constants::Definitions;

/// How many copies and constant adds an address is followed through to its frame.
const MAX_DEPTH: usize = 16;

/// How many times addresses read back from frame slots are followed further.
const MAX_ROUNDS: usize = 4;

/// A place in a frame: the frame (named by the instruction that takes its address, so that the
/// inlined copies of one callee have frames of their own) and a byte offset.
type Slot = (u32, i64);

/// One access of a frame: the instruction, the offset in the frame and the bytes it touches.
type Access = (usize, i64, u32);

/// Answers worked out once per register: `None` in `answers` until `done`.
struct Memo<T> {
    done: Vec<bool>,
    answers: Vec<Option<T>>,
}

impl<T: Copy> Memo<T> {
    fn new(len: usize) -> Self {
        Self { done: vec![false; len], answers: vec![None; len] }
    }

    fn done(&self, reg: Reg) -> bool {
        self.done.get(reg.0 as usize).copied().unwrap_or(false)
    }

    fn answer(&self, reg: Reg) -> Option<T> {
        self.answers.get(reg.0 as usize).copied().flatten()
    }

    fn set(&mut self, reg: Reg, answer: Option<T>) {
        let k = reg.0 as usize;
        if k < self.done.len() {
            self.done[k] = true;
            self.answers[k] = answer;
        }
    }
}

/// Gives generic accesses their space ([`infer_generic_spaces`]), then makes stack-frame slots
/// registers ([`promote_frames`]), where the function has such addresses at all; the second
/// changes no definition the first reads, so both read one [`Definitions`].
pub(crate) fn read_frames(func: &mut Function) {
    let windows = func.insts.iter().any(|inst| matches!(inst.alu, Some(AluOp::ToGeneric(_))));
    let frames = func.insts.iter().any(|inst| is_frame_base(inst.value.as_ref()));
    if !windows && !frames {
        return;
    }
    let defs = Definitions::of(func);
    if windows {
        infer_generic_spaces(func, &defs);
    }
    if frames {
        promote_frames(func, &defs);
    }
}

/// Makes the slots of each frame of `func` whose every access is known registers (see the
/// module's comment). Returns how many loads and stores became copies.
fn promote_frames(func: &mut Function, defs: &Definitions) -> usize {
    let mut pointers = Pointers::resolve(func, defs, &BTreeMap::new());
    for _ in 0..MAX_ROUNDS {
        // Slots written once, with the register written: what a read of them gives.
        let mut stores: BTreeMap<Slot, Option<Reg>> = BTreeMap::new();
        for inst in &func.insts {
            if let (InstKind::Store(_), Some(slot)) = (&inst.kind, pointers.slot_of(inst)) {
                let data = stored_register(inst);
                stores
                    .entry(slot)
                    .and_modify(|one| *one = None)
                    .or_insert(data.filter(|_| inst.guard.is_none()));
            }
        }
        let through: BTreeMap<Slot, Reg> =
            stores.into_iter().filter_map(|(slot, data)| Some((slot, data?))).collect();
        let next = Pointers::resolve(func, defs, &through);
        if next.0 == pointers.0 {
            break;
        }
        pointers = next;
    }

    // Which frames stay memory, and which frames' addresses are kept in which frames.
    let mut escaped: BTreeSet<u32> = BTreeSet::new();
    let mut kept_in: Vec<(u32, u32)> = Vec::new();
    let mut accesses: BTreeMap<u32, Vec<Access>> = BTreeMap::new();
    for (i, inst) in func.insts.iter().enumerate() {
        let slot = pointers.slot_of(inst);
        let base = match (&inst.address, slot) {
            (Some(address), Some(_)) => match address.base {
                AddrBase::Reg(reg) => Some(reg),
                _ => None,
            },
            _ => None,
        };
        let data = stored_register(inst);
        let mut base_seen = false;
        for &reg in &inst.uses {
            let Some((frame, _)) = pointers.of(reg) else { continue };
            let derives = matches!(inst.value, Some(ValueOp::Copy(src) | ValueOp::AddImm(src, _)) if src == reg)
                && inst.defs.iter().all(|&d| pointers.of(d).is_some_and(|(f, _)| f == frame));
            let compared = matches!(inst.kind, InstKind::Compare);
            let addresses = base == Some(reg) && !std::mem::replace(&mut base_seen, true);
            let kept = match (slot, &inst.kind) {
                (Some((into, _)), InstKind::Store(_)) if data == Some(reg) && base != Some(reg) => {
                    kept_in.push((frame, into));
                    true
                }
                _ => false,
            };
            if !(derives || compared || addresses || kept) {
                escaped.insert(frame);
            }
        }
        if let (Some((frame, offset)), InstKind::Load(mem) | InstKind::Store(mem)) =
            (slot, &inst.kind)
        {
            match mem.width.filter(|&bits| bits % 8 == 0 && mem.vector == 1) {
                Some(bits) => accesses.entry(frame).or_default().push((i, offset, bits / 8)),
                None => {
                    escaped.insert(frame);
                }
            }
        } else if let Some((frame, _)) = slot {
            // An atomic or another access of the frame.
            escaped.insert(frame);
        }
    }
    for (frame, list) in &mut accesses {
        if !slots_are_disjoint(list) {
            escaped.insert(*frame);
        }
    }
    // A frame whose address is kept in a frame that stays memory stays memory too.
    loop {
        let before = escaped.len();
        for &(frame, into) in &kept_in {
            if escaped.contains(&into) {
                escaped.insert(frame);
            }
        }
        if escaped.len() == before {
            break;
        }
    }

    let mut promoted = 0;
    for (frame, list) in accesses {
        if escaped.contains(&frame) {
            continue;
        }
        for (i, offset, _) in list {
            let slot = func.intern_reg(&format!("%frame{frame}+{offset}"));
            promote(&mut func.insts[i], slot);
            promoted += 1;
        }
    }
    promoted
}

/// Gives each generic load, store and atomic whose address is computed from one state space's
/// window (`cvta.shared`, `cvta.global`, `cvta.local`, then copies and additions) that space,
/// as the compiler does in a release build (a debug build leaves such accesses generic:
/// `cvta.shared` of a `__shared__` array, then `ld.f32 [%rd15]`). An address added to an offset
/// stays in its window; one added to an address of another window is no known space. Returns
/// how many accesses were given a space.
fn infer_generic_spaces(func: &mut Function, defs: &Definitions) -> usize {
    let mut known = Memo::new(func.regs.len());
    let mut given = 0;
    for i in 0..func.insts.len() {
        let inst = &func.insts[i];
        // `multimem` addresses name a multicast object, not a window.
        let generic = inst.kind.mem().is_some_and(|mem| mem.space == Space::Generic)
            && !matches!(inst.kind, InstKind::Multimem { .. });
        let base = match inst.address.as_ref().map(|a| &a.base) {
            Some(&AddrBase::Reg(reg)) if generic => reg,
            _ => continue,
        };
        let Some(space) = window_of(func, defs, &mut known, base, 0) else { continue };
        if let Some(mem) = func.insts[i].kind.mem_mut() {
            mem.space = space;
            given += 1;
        }
    }
    given
}

/// The state space whose window the generic address in `reg` points into, when its one
/// definition says so ([`infer_generic_spaces`]).
fn window_of(
    func: &Function,
    defs: &Definitions,
    known: &mut Memo<Space>,
    reg: Reg,
    depth: usize,
) -> Option<Space> {
    if known.done(reg) {
        return known.answer(reg);
    }
    if depth > MAX_DEPTH {
        return None;
    }
    let inst = defs.single(func, reg)?;
    let found = match (inst.alu, inst.value.as_ref()) {
        (Some(AluOp::ToGeneric(space)), _) => {
            matches!(space, Space::SharedCta | Space::Global | Space::Local).then_some(space)
        }
        (_, Some(&ValueOp::Copy(src) | &ValueOp::AddImm(src, _))) => {
            window_of(func, defs, known, src, depth + 1)
        }
        (Some(AluOp::Add), _) if inst.uses.len() == 2 => {
            let a = window_of(func, defs, known, inst.uses[0], depth + 1);
            let b = window_of(func, defs, known, inst.uses[1], depth + 1);
            match (a, b) {
                (Some(space), None) | (None, Some(space)) => Some(space),
                _ => None,
            }
        }
        _ => None,
    };
    known.set(reg, found);
    found
}

/// Whether a value is the address of a function's local frame (`mov.u64 %SPL, __local_depot7`).
fn is_frame_base(value: Option<&ValueOp>) -> bool {
    matches!(value, Some(ValueOp::SymbolAddr(name)) if name.starts_with("__local_depot"))
}

/// The register a store writes to memory, when it writes one register.
fn stored_register(inst: &Inst) -> Option<Reg> {
    let InstKind::Store(_) = inst.kind else { return None };
    let base = match inst.address.as_ref().map(|a| &a.base) {
        Some(&AddrBase::Reg(reg)) => Some(reg),
        _ => None,
    };
    let mut data = data_regs(inst, base);
    (data.len() == 1).then(|| data.remove(0))
}

/// The registers an access reads besides its address register and its guard.
fn data_regs(inst: &Inst, base: Option<Reg>) -> fencelint_ir::Regs {
    let mut data = inst.uses.clone();
    for reg in base.into_iter().chain(inst.guard.map(|g| g.reg)) {
        if let Some(at) = data.iter().position(|&r| r == reg) {
            data.remove(at);
        }
    }
    data
}

/// Makes a load or store of a slot a copy out of or into the slot's register.
fn promote(inst: &mut Inst, slot: Reg) {
    let base = match inst.address.as_ref().map(|a| &a.base) {
        Some(&AddrBase::Reg(reg)) => Some(reg),
        _ => None,
    };
    let data = data_regs(inst, base);
    // A slot is read and written whole.
    inst.address = None;
    if matches!(inst.kind, InstKind::Store(_)) {
        crate::ptx::into_copy(inst, smallvec::smallvec![slot], data);
    } else {
        let defs = inst.defs.clone();
        crate::ptx::into_copy(inst, defs, smallvec::smallvec![slot]);
    }
}

/// Whether the accesses of one frame (instruction, offset, bytes) touch slots that do not
/// overlap: each byte of the frame belongs to at most one slot, read and written whole.
fn slots_are_disjoint(list: &mut [Access]) -> bool {
    list.sort_unstable_by_key(|&(i, offset, bytes)| (offset, bytes, i));
    list.windows(2).all(|pair| {
        let (_, a, a_bytes) = pair[0];
        let (_, b, b_bytes) = pair[1];
        (a == b && a_bytes == b_bytes) || a.saturating_add(i64::from(a_bytes)) <= b
    })
}

/// The frame address each register holds, where it holds one.
struct Pointers(Vec<Option<Slot>>);

impl Pointers {
    fn of(&self, reg: Reg) -> Option<Slot> {
        self.0.get(reg.0 as usize).copied().flatten()
    }

    /// The slot that `inst` loads or stores (or accesses otherwise), when its address is in a
    /// frame.
    fn slot_of(&self, inst: &Inst) -> Option<Slot> {
        let address = inst.address.as_ref()?;
        let AddrBase::Reg(reg) = address.base else { return None };
        let (frame, offset) = self.of(reg)?;
        Some((frame, offset.wrapping_add(address.offset)))
    }

    /// Follows each register's one definition to a frame's base: through copies, constant
    /// adds, and loads of a slot in `through` (written once, with that register).
    fn resolve(func: &Function, defs: &Definitions, through: &BTreeMap<Slot, Reg>) -> Self {
        let mut known = Memo::new(func.regs.len());
        let mut out = Vec::with_capacity(func.regs.len());
        for k in 0..func.regs.len() as u32 {
            out.push(Self::resolve_reg(func, defs, through, &mut known, Reg(k), 0));
        }
        Self(out)
    }

    fn resolve_reg(
        func: &Function,
        defs: &Definitions,
        through: &BTreeMap<Slot, Reg>,
        known: &mut Memo<Slot>,
        reg: Reg,
        depth: usize,
    ) -> Option<Slot> {
        if known.done(reg) {
            return known.answer(reg);
        }
        if depth > MAX_DEPTH {
            return None;
        }
        let at = defs.single_at(reg)?;
        let inst = func.inst(fencelint_ir::InstId(at as u32));
        let found = match (&inst.kind, inst.value.as_ref()) {
            (_, value) if is_frame_base(value) => Some((at as u32, 0)),
            (_, Some(&ValueOp::Copy(src))) => {
                Self::resolve_reg(func, defs, through, known, src, depth + 1)
            }
            (_, Some(&ValueOp::AddImm(src, add))) => {
                Self::resolve_reg(func, defs, through, known, src, depth + 1)
                    .map(|(frame, offset)| (frame, offset.wrapping_add(add)))
            }
            (InstKind::Load(_), _) => {
                let address = inst.address.as_ref()?;
                let AddrBase::Reg(base) = address.base else { return None };
                let (frame, offset) =
                    Self::resolve_reg(func, defs, through, known, base, depth + 1)?;
                let data = *through.get(&(frame, offset.wrapping_add(address.offset)))?;
                Self::resolve_reg(func, defs, through, known, data, depth + 1)
            }
            _ => None,
        };
        known.set(reg, found);
        found
    }
}

#[cfg(test)]
mod tests {
    //! Hand-written PTX, tiny, in the shapes `nvcc -G` prints.

    use fencelint_ir::{Function, InstKind, Space, ValueOp};
    use fencelint_source::FileId;

    /// A kernel that polls a flag with `poll`, keeps the value in its frame at `[%SP+8]` and
    /// reads it back with `reload`; `extra` is placed after the frame is set up.
    fn kernel(poll: &str, reload: &str, extra: &str) -> Function {
        let text = format!(
            ".version 8.5\n.target sm_90, debug\n.address_size 64\n\
             .extern .func sink(.param .b64 sink_p);\n\
             .visible .entry k(.param .u64 k_p)\n{{\n\
             .local .align 8 .b8 __local_depot0[16];\n\
             .reg .b64 %SP;\n.reg .b64 %SPL;\n.reg .pred %p<2>;\n.reg .b32 %r<4>;\n\
             .reg .b64 %rd<4>;\n\
             mov.u64 %SPL, __local_depot0;\n\
             cvta.local.u64 %SP, %SPL;\n\
             ld.param.u64 %rd1, [k_p];\n\
             {extra}\n\
             L: {poll} %r1, [%rd1];\n\
             st.u32 [%SP+8], %r1;\n\
             {reload} %r2, [%SP+8];\n\
             setp.eq.s32 %p1, %r2, 0;\n\
             @%p1 bra L;\n\
             ret;\n}}\n"
        );
        let lowered = crate::ptx::lower_text(FileId(0), &text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        lowered.modules.into_iter().next().unwrap().functions.remove(0)
    }

    fn find<'f>(func: &'f Function, opcode: &str) -> &'f fencelint_ir::Inst {
        func.insts.iter().find(|inst| inst.opcode.starts_with(opcode)).unwrap()
    }

    #[test]
    fn a_value_kept_in_the_frame_is_a_register() {
        let func = kernel("ld.relaxed.gpu.global.u32", "ld.u32", "");
        let store = find(&func, "st.u32");
        let reload = find(&func, "ld.u32");
        assert!(matches!(store.kind, InstKind::Move) && matches!(reload.kind, InstKind::Move));
        let slot = store.defs[0];
        assert_eq!(func.reg_name(slot), format!("%frame{}+8", 0));
        assert_eq!(reload.uses.as_slice(), [slot]);
        assert_eq!(reload.value, Some(ValueOp::Copy(slot)));
        assert_eq!(store.value, Some(ValueOp::Copy(func.insts[3].defs[0])));
    }

    #[test]
    fn a_frame_whose_address_leaves_stays_local_memory() {
        // Passed to a call that is not inlined, and indexed with a register.
        let passed = kernel(
            "ld.relaxed.gpu.global.u32",
            "ld.u32",
            "{ .param .b64 param0;\nst.param.b64 [param0+0], %SP;\ncall.uni sink, (param0); }",
        );
        let indexed = kernel(
            "ld.relaxed.gpu.global.u32",
            "ld.u32",
            "add.s64 %rd2, %SP, %rd1;\nst.u32 [%rd2], %r3;",
        );
        for func in [&passed, &indexed] {
            let InstKind::Load(mem) = &find(func, "ld.u32").kind else { panic!("a load") };
            assert_eq!(mem.space, Space::Local);
            assert!(matches!(find(func, "st.u32").kind, InstKind::Store(_)));
        }
    }

    #[test]
    fn a_frame_address_kept_in_a_slot_is_followed() {
        // `this` kept in the frame (`[%SP+0]`), read back, and the object it points to (at
        // `[%SP+8]`) written through it: the polled value is copied through two slots.
        let extra = "add.u64 %rd2, %SP, 8;\nst.u64 [%SP+0], %rd2;";
        let text = format!(
            ".version 8.5\n.target sm_90, debug\n.address_size 64\n\
             .visible .entry k(.param .u64 k_p)\n{{\n\
             .local .align 8 .b8 __local_depot0[16];\n\
             .reg .b64 %SP;\n.reg .b64 %SPL;\n.reg .pred %p<2>;\n.reg .b32 %r<4>;\n\
             .reg .b64 %rd<4>;\n\
             mov.u64 %SPL, __local_depot0;\n\
             cvta.local.u64 %SP, %SPL;\n\
             ld.param.u64 %rd1, [k_p];\n\
             {extra}\n\
             L: ld.relaxed.gpu.global.u32 %r1, [%rd1];\n\
             ld.u64 %rd3, [%SP+0];\n\
             st.u32 [%rd3], %r1;\n\
             ld.u32 %r2, [%SP+8];\n\
             setp.eq.s32 %p1, %r2, 0;\n\
             @%p1 bra L;\n\
             ret;\n}}\n"
        );
        let lowered = crate::ptx::lower_text(FileId(0), &text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let func = &lowered.modules[0].functions[0];
        let store = find(func, "st.u32");
        let reload = find(func, "ld.u32");
        assert!(matches!(store.kind, InstKind::Move), "{:?}", store.kind);
        assert_eq!(reload.uses.as_slice(), store.defs.as_slice());
        assert!(
            func.insts.iter().all(|inst| inst.kind.mem().is_none_or(|m| m.space != Space::Local))
        );
    }

    #[test]
    fn slots_read_at_another_width_stay_memory() {
        let func = kernel("ld.relaxed.gpu.global.u32", "ld.u16", "");
        let InstKind::Load(mem) = &find(&func, "ld.u16").kind else { panic!("a load") };
        assert_eq!(mem.space, Space::Local);
    }

    #[test]
    fn a_generic_address_from_the_shared_window_is_shared() {
        let text = ".version 8.5\n.target sm_90, debug\n.address_size 64\n\
             .visible .entry k()\n{\n\
             .shared .align 4 .b8 table[1024];\n\
             .reg .b32 %r<4>;\n.reg .b64 %rd<6>;\n.reg .f32 %f<2>;\n\
             mov.u32 %r1, table;\n\
             { .reg .b64 %tmp;\ncvt.u64.u32 %tmp, %r1;\ncvta.shared.u64 %rd1, %tmp; }\n\
             mov.u32 %r2, %tid.x;\n\
             mul.wide.u32 %rd2, %r2, 4;\n\
             add.s64 %rd3, %rd1, %rd2;\n\
             ld.f32 %f1, [%rd3];\n\
             add.s64 %rd4, %rd3, %rd3;\n\
             ld.f32 %f1, [%rd4];\n\
             ret;\n}\n";
        let lowered = crate::ptx::lower_text(FileId(0), text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let func = &lowered.modules[0].functions[0];
        let spaces: Vec<Space> =
            func.insts.iter().filter_map(|i| i.mem().map(|m| m.space)).collect();
        // An address plus an index stays in the window; the sum of two addresses does not.
        assert_eq!(spaces, [Space::SharedCta, Space::Generic]);
    }
}
