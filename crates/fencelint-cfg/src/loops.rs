//! Natural loops and their exits.

use fencelint_ir::{AddrBase, Inst, InstId, InstKind, Reg, Space, ValueOp};

use crate::{BlockId, FunctionAnalysis};

/// A natural loop: a header, the blocks that can reach one of its back edges without passing the
/// header, and the edges that leave it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loop {
    pub header: BlockId,
    /// Sorted block ids.
    pub blocks: Vec<BlockId>,
    /// Sources of the loop's back edges to the header.
    pub latches: Vec<BlockId>,
    /// Edges `(inside, outside)` that leave the loop, sorted.
    pub exits: Vec<(BlockId, BlockId)>,
    /// The loop's index in [`FunctionAnalysis::loops`]: the key of answers remembered per loop
    /// (several loops can share a header).
    pub id: u32,
}

impl Loop {
    pub fn contains(&self, block: BlockId) -> bool {
        self.blocks.binary_search(&block).is_ok()
    }

    pub fn contains_inst(&self, analysis: &FunctionAnalysis<'_>, inst: InstId) -> bool {
        self.contains(analysis.cfg.block_of(inst))
    }

    /// All instructions of the loop, in text order.
    pub fn insts<'a>(
        &'a self,
        analysis: &'a FunctionAnalysis<'_>,
    ) -> impl Iterator<Item = InstId> + 'a {
        self.blocks.iter().flat_map(|&b| analysis.cfg.block(b).ids())
    }

    /// The loop's instructions whose kind
    /// [`is_memory_or_order`](fencelint_ir::InstKind::is_memory_or_order), in text order: what
    /// [`Loop::insts`] gives for a test that only such instructions pass, without visiting the
    /// ALU work that is most of a SASS loop.
    pub fn memory_insts<'a>(
        &'a self,
        analysis: &'a FunctionAnalysis<'_>,
    ) -> impl Iterator<Item = InstId> + 'a {
        self.blocks.iter().flat_map(|&b| analysis.block_memory_insts(b).iter().copied())
    }
}

impl Loop {
    /// Whether the memory operand of `inst` names the same location in every iteration: every
    /// register in its address is [invariant](Loop::is_invariant) in the loop. An instruction
    /// without a memory operand has no such location.
    pub fn address_is_invariant(&self, analysis: &FunctionAnalysis<'_>, inst: InstId) -> bool {
        self.address_is_invariant_within(analysis, inst, 0)
    }

    fn address_is_invariant_within(
        &self,
        analysis: &FunctionAnalysis<'_>,
        inst: InstId,
        depth: u8,
    ) -> bool {
        let Some(address) = &analysis.func.inst(inst).address else { return false };
        if depth > Self::MAX_INVARIANT_DEPTH {
            return false;
        }
        match &address.base {
            AddrBase::Reg(reg) => self.invariant_within(analysis, inst, *reg, depth),
            AddrBase::Complex(regs) => {
                regs.iter().all(|&reg| self.invariant_within(analysis, inst, reg, depth))
            }
            AddrBase::Symbol(_) | AddrBase::Absolute => true,
        }
    }

    /// Whether no instruction of the loop may write local memory: none of the function's
    /// [local writers](FunctionAnalysis::local_writers) (local, generic or unknown stores,
    /// calls, unparsed instructions) is in the loop.
    fn local_memory_unchanged(&self, analysis: &FunctionAnalysis<'_>) -> bool {
        analysis.local_writers().iter().all(|&id| !self.contains_inst(analysis, id))
    }

    /// Whether `inst`, an instruction of the loop, reads through an operand other than its
    /// address a value computed from its own result of an earlier iteration: a
    /// read-modify-write retried until it lands (`old = atom.cas [a], expected, f(expected);
    /// expected = old`, SASS `ATOMG.E.CAS PT, R7, [R2], R6, R7 ; ... ; MOV R6, R7`). Such a
    /// loop waits for no other thread. Followed through the loop's own definitions that do not
    /// read memory, at most [`Self::MAX_FEEDBACK_STEPS`] of them.
    pub fn feeds_itself(&self, analysis: &FunctionAnalysis<'_>, inst: InstId) -> bool {
        let func = analysis.func;
        let this = func.inst(inst);
        let guard = this.guard.map(|g| g.reg);
        let addressing = address_regs(this);
        let mut work: Vec<(InstId, Reg)> = this
            .uses
            .iter()
            .filter(|&&reg| !addressing.contains(&reg) && Some(reg) != guard)
            .map(|&reg| (inst, reg))
            .collect();
        let mut seen = Vec::new();
        while let Some((at, reg)) = work.pop() {
            if seen.contains(&(at, reg)) {
                continue;
            }
            if seen.len() >= Self::MAX_FEEDBACK_STEPS {
                return false;
            }
            seen.push((at, reg));
            for def in analysis.reaching_defs_in(at, reg, Some(self)).defs {
                if def == inst {
                    return true;
                }
                let defining = func.inst(def);
                if !self.contains_inst(analysis, def) {
                    continue;
                }
                if !defining.kind.reads_memory() {
                    work.extend(defining.uses.iter().map(|&used| (def, used)));
                } else if let InstKind::Load(mem) = &defining.kind
                    && mem.space == Space::Local
                {
                    work.extend(self.spilled_values(analysis, def));
                }
            }
        }
        false
    }

    /// The values that the loop's stores to the thread's local memory leave at the address
    /// that `load` (a local load of the loop) reads: a value spilled and loaded back (`STL.64
    /// [R1+0x8], R2; ...; LDL.64 R8, [R1+0x8]`, the expected value of a compare-and-swap loop
    /// that ptxas keeps on the stack). Each as the store and the register it stores.
    fn spilled_values(&self, analysis: &FunctionAnalysis<'_>, load: InstId) -> Vec<(InstId, Reg)> {
        let func = analysis.func;
        let Some(address) = &func.inst(load).address else { return Vec::new() };
        let key = analysis.address_key(load, address);
        let mut values = Vec::new();
        for &store in analysis.local_writers() {
            let inst = func.inst(store);
            let (InstKind::Store(mem), Some(at)) = (&inst.kind, &inst.address) else { continue };
            if mem.space != Space::Local
                || !self.contains_inst(analysis, store)
                || !analysis.address_key(store, at).same_as(&key)
            {
                continue;
            }
            let addressing = at.base.regs();
            let stored = inst.uses.iter().filter(|reg| !addressing.contains(reg));
            values.extend(stored.map(|&reg| (store, reg)));
        }
        values
    }

    /// How many register uses [`Self::feeds_itself`] follows.
    pub const MAX_FEEDBACK_STEPS: usize = 64;

    /// Whether `reg`, as read by `at`, has the same value in every iteration: each of its
    /// reaching definitions is outside the loop, or is a constant, a parameter or a symbol's
    /// address, or copies or offsets an invariant register, or computes its value from
    /// invariant registers alone (an instruction with an [`Inst::pure_key`]; either
    /// dialect: an arithmetic, logic or compare instruction, [`Inst::alu`], whose every use,
    /// its guard included, is invariant). ptxas
    /// re-materialises an address inside the loop when the register that held it is reused
    /// (`MOV R0, UR4` at the top of a loop whose `ATOMS.CAS R0, [R0], ...` overwrites `R0`;
    /// `LDC.64 R4, c[0x0][0x2b8]` before each `LD [R4]`), and nvcc does in PTX (`ld.param`,
    /// `cvta.to.global`, `cvt.u64.u32`, `and.b64` and `add.s64` before each poll of cuSOLVER's
    /// bulge-chasing kernels). A load of local memory at an invariant address is invariant when
    /// nothing in the loop may write local memory (no local or generic store, no call): only
    /// the thread itself writes it, and libcu++'s `atomic_ref::wait` reloads the address it
    /// polls from a volatile local copy on every try (`ld.volatile.local.u64 %rd31, [%rd1]`,
    /// SASS `LDL.64 R2, [R1]`); so does ptxas when registers run short, spilling a flag's base
    /// and index and reloading both on every try (`LDL.64 R6, [R1+0x28]; LDL R3, [R1+0x30];
    /// IMAD.WIDE R8, R3, 0x4, R6; LD.E.STRONG.SYS R6, [R8.64]`). A clock or timer register is
    /// never invariant.
    ///
    /// [`Inst::pure_key`]: fencelint_ir::Inst::pure_key
    /// [`Inst::alu`]: fencelint_ir::Inst::alu
    pub fn is_invariant(&self, analysis: &FunctionAnalysis<'_>, at: InstId, reg: Reg) -> bool {
        self.invariant_within(analysis, at, reg, 0)
    }

    /// How deep [`Self::is_invariant`] follows definitions inside the loop: a chain round the
    /// loop (`R1 = R0 + 4; R0 = R1`) ends there, as not invariant.
    const MAX_INVARIANT_DEPTH: u8 = 4;

    fn invariant_within(
        &self,
        analysis: &FunctionAnalysis<'_>,
        at: InstId,
        reg: Reg,
        depth: u8,
    ) -> bool {
        if is_time(analysis.func.reg_name(reg)) {
            return false;
        }
        let deeper = |def: InstId, src: Reg| {
            depth < Self::MAX_INVARIANT_DEPTH
                && self.invariant_within(analysis, def, src, depth + 1)
        };
        analysis.reaching_defs(at, reg).defs.iter().all(|&def| {
            if !self.contains_inst(analysis, def) {
                return true;
            }
            if def == at {
                return false;
            }
            let inst = analysis.func.inst(def);
            match inst.value {
                Some(ValueOp::Copy(src) | ValueOp::AddImm(src, _)) if src != reg => {
                    deeper(def, src)
                }
                Some(ValueOp::Param(_) | ValueOp::SymbolAddr(_) | ValueOp::Imm(_)) => true,
                _ if matches!(&inst.kind, InstKind::Load(mem) if mem.space == Space::Local) => {
                    self.address_is_invariant_within(analysis, def, depth + 1)
                        && self.local_memory_unchanged(analysis)
                }
                // A register that the instruction reads and writes is invariant when what it
                // reads is (`LDL.64 R8, [R1+0x90]; IMAD.WIDE R8, R3, 0x4, R8`): the use is
                // followed like any other. A definition that reaches its own use is a value
                // carried round the loop, answered at once above rather than at the depth
                // limit.
                _ if inst.pure_key.is_some() || inst.alu.is_some() => {
                    inst.uses.iter().all(|&src| deeper(def, src))
                }
                _ => false,
            }
        })
    }
}

/// The registers that `inst`'s address is computed from.
fn address_regs(inst: &Inst) -> &[Reg] {
    inst.address.as_ref().map_or(&[], |a| a.base.regs())
}

/// Whether a register name is one of the clock and timer registers, which change on their own
/// (PTX `%clock`, `%clock_hi`, `%clock64`, `%globaltimer`, `%globaltimer_lo`, `%globaltimer_hi`
/// and the performance counters `%pm0` to `%pm7` and `%pm0_64` to `%pm7_64`; SASS
/// `SR_CLOCKLO`, `SR_CLOCKHI`, `SR_GLOBALTIMERLO`, `SR_GLOBALTIMERHI`).
fn is_time(name: &str) -> bool {
    if let Some(sass) = name.strip_prefix("SR_") {
        return sass.starts_with("CLOCK") || sass.starts_with("GLOBALTIMER");
    }
    let Some(ptx) = name.strip_prefix('%') else { return false };
    if let Some(counter) = ptx.strip_prefix("pm") {
        let counter = counter.strip_suffix("_64").unwrap_or(counter);
        return counter.len() == 1 && counter.as_bytes()[0].is_ascii_digit();
    }
    matches!(
        ptx,
        "clock" | "clock_hi" | "clock64" | "globaltimer" | "globaltimer_lo" | "globaltimer_hi"
    )
}

/// The natural loops of a function: for each loop header, the loop of all its back edges; and,
/// where a header has several back edges, also the loop of each back edge whose own natural
/// loop is smaller (with every other back edge it holds).
///
/// A header with several back edges is often two source loops with no block between their
/// headers: `for (...) { while (poll(flag) <= i) {} read(data); }` compiles to one header
/// block that the poll's branch and the outer loop's latch both return to. Merged, the poll's
/// exit edge leads into the loop and is not an exit; the poll's own loop keeps it one.
pub(crate) fn find_loops(analysis: &FunctionAnalysis<'_>) -> Vec<Loop> {
    let cfg = &analysis.cfg;
    let doms = analysis.dominators();
    let reachable: Vec<bool> = cfg.block_ids().map(|b| doms.is_reachable(b)).collect();
    // Back edges by header, latches in the order of `Cfg::edges` (by source block).
    let mut by_header: Vec<(BlockId, Vec<BlockId>)> = Vec::new();
    let mut slot = vec![u32::MAX; cfg.blocks.len()];
    for from in cfg.block_ids().filter(|b| reachable[b.index()]) {
        for &to in cfg.successor_slice(from) {
            if !analysis.block_dominates(to, from) {
                continue;
            }
            match slot[to.index()] {
                u32::MAX => {
                    slot[to.index()] = by_header.len() as u32;
                    by_header.push((to, vec![from]));
                }
                at => by_header[at as usize].1.push(from),
            }
        }
    }
    by_header.sort_by_key(|(h, _)| *h);

    let mut loops = Vec::with_capacity(by_header.len());
    // Membership marks of the loop being built, cleared through its block list afterwards: the
    // outer loops of a large kernel hold most of its blocks, and a tree set of them cost a
    // tenth of the spin-poll rule.
    let mut in_body = vec![false; cfg.blocks.len()];
    let mut body = |header: BlockId, latches: &[BlockId], loops: &mut Vec<Loop>| {
        in_body[header.index()] = true;
        let mut blocks = vec![header];
        let mut stack: Vec<BlockId> = latches.to_vec();
        while let Some(block) = stack.pop() {
            if !std::mem::replace(&mut in_body[block.index()], true) {
                blocks.push(block);
                stack.extend(cfg.predecessors(block).filter(|p| reachable[p.index()]));
            }
        }
        blocks.sort_unstable();
        let mut exits = Vec::new();
        for &block in &blocks {
            for succ in cfg.successors(block) {
                if !in_body[succ.index()] {
                    exits.push((block, succ));
                }
            }
        }
        for &block in &blocks {
            in_body[block.index()] = false;
        }
        exits.sort();
        exits.dedup();
        let id = loops.len() as u32;
        loops.push(Loop { id, header, blocks, latches: latches.to_vec(), exits });
    };
    // The smaller loops may together hold this many blocks, counted as they are built (each at
    // most its header's whole loop): a header with thousands of back edges in a row would
    // otherwise give loops of quadratic total size. Past it the function's other headers get
    // their whole loops only, and the analysis says it is incomplete.
    let mut budget = 4 * cfg.blocks.len() + 4096;
    for (header, latches) in by_header {
        let whole = loops.len();
        body(header, &latches, &mut loops);
        if latches.len() < 2 || budget == 0 {
            continue;
        }
        // The loop of each back edge, with the other back edges it holds; the same block set
        // once, outermost first.
        let mut inner: Vec<Loop> = Vec::new();
        for &latch in &latches {
            if budget < loops[whole].blocks.len() {
                budget = 0;
                analysis.mark_incomplete();
                break;
            }
            body(header, &[latch], &mut inner);
            let last = inner.len() - 1;
            let one = &inner[last];
            budget -= one.blocks.len();
            if one.blocks.len() == loops[whole].blocks.len()
                || inner[..last].iter().any(|l| l.blocks == one.blocks)
            {
                inner.pop();
                continue;
            }
            // Another latch inside this loop reaches the header too: its back edge is this
            // loop's as well (and its own loop lies inside this one).
            let held =
                latches.iter().copied().filter(|l| one.blocks.binary_search(l).is_ok()).collect();
            inner[last].latches = held;
        }
        inner.sort_by_key(|l| std::cmp::Reverse(l.blocks.len()));
        for mut lp in inner {
            lp.id = loops.len() as u32;
            loops.push(lp);
        }
    }
    loops
}
