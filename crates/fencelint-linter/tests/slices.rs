//! `FunctionAnalysis::deciding_read_regs` on compiled fixtures: which registers of a vector poll
//! decide its loop's exit. `spin-poll-without-acquire` takes a poll whose other registers are
//! used after the loop for a packet that carries its own data.
//!
//! And loops that share a header (`FunctionAnalysis::loops`): the loop of all the header's back
//! edges, and the smaller loop of each back edge on its own, each with its own exits and its own
//! remembered slices.

use std::path::PathBuf;

use fencelint_cfg::{FunctionAnalysis, Loop};
use fencelint_ir::{Function, InstKind};
use fencelint_linter::{InputKind, detect};
use fencelint_source::FileId;

fn compiled(path: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled");
    std::fs::read_to_string(root.join(path)).unwrap()
}

fn function(text: &str, name: &str) -> Function {
    let kind = detect(text).unwrap_or(InputKind::Ptx);
    let lowered = fencelint_lower::lower(FileId(0), text, kind, 0);
    lowered
        .modules
        .into_iter()
        .flat_map(|module| module.functions)
        .find(|func| func.name == name)
        .unwrap_or_else(|| panic!("no function {name}"))
}

/// For the one loop of `name`: the opcode of each read deciding its exit, with the names of the
/// registers through which it decides, in order.
fn deciding(path: &str, name: &str) -> Vec<(String, Vec<String>)> {
    let text = compiled(path);
    let func = function(&text, name);
    let analysis = FunctionAnalysis::new(&func);
    let [lp] = analysis.loops() else { panic!("{name}: not one loop") };
    let mut found: Vec<(String, Vec<String>)> = Vec::new();
    for &(from, _) in &lp.exits {
        let branch = analysis.cfg.block(from).last();
        for (read, reg) in analysis.deciding_read_regs(branch, Some(lp)) {
            let opcode = func.inst(read).opcode.to_string();
            let reg = func.reg_name(reg).to_string();
            match found.iter_mut().find(|(op, _)| *op == opcode) {
                Some((_, regs)) => regs.push(reg),
                None => found.push((opcode, vec![reg])),
            }
        }
    }
    found
}

#[test]
fn a_sixteen_byte_packet_decides_through_its_two_flag_registers() {
    // LDG.E.128.STRONG.SYS R4 writes R4..R7; the loop tests R5 and R7.
    for path in ["sm_90a/spin_poll.cuobjdump.sass", "sm_90a/spin_poll.nvdisasm.sass"] {
        let found = deciding(path, "packet16_poll_carries_its_data");
        assert_eq!(found, [("LDG.E.128.STRONG.SYS".to_string(), vec!["R5".into(), "R7".into()])]);
    }
    let ptx = deciding("sm_90a/spin_poll.ptx", "packet16_poll_carries_its_data");
    let [(opcode, regs)] = ptx.as_slice() else { panic!("{ptx:?}") };
    assert_eq!(opcode, "ld.volatile.global.v4.u32");
    assert_eq!(regs.len(), 2, "{ptx:?}");
}

#[test]
fn an_eight_byte_packet_decides_through_its_flag_register_alone() {
    for name in ["packet_poll_carries_its_data", "packet_poll_then_reads_elsewhere"] {
        let found = deciding("sm_90a/spin_poll.cuobjdump.sass", name);
        let [(opcode, regs)] = found.as_slice() else { panic!("{found:?}") };
        assert_eq!(opcode, "LDG.E.64.STRONG.SYS");
        assert_eq!(regs.len(), 1, "{found:?}");
        let found = deciding("sm_90a/spin_poll.ptx", name);
        let [(opcode, regs)] = found.as_slice() else { panic!("{found:?}") };
        assert_eq!(opcode, "ld.volatile.global.v2.u32");
        assert_eq!(regs.len(), 1, "{found:?}");
    }
}

#[test]
fn a_scalar_poll_decides_through_its_one_register() {
    let found = deciding("sm_90a/spin_poll.cuobjdump.sass", "poll_relaxed_no_acquire");
    let [(_, regs)] = found.as_slice() else { panic!("{found:?}") };
    assert_eq!(regs.len(), 1);
}

/// The loads of a loop, by opcode.
fn loads(analysis: &FunctionAnalysis<'_>, lp: &Loop) -> Vec<String> {
    lp.insts(analysis)
        .filter(|&id| matches!(analysis.func.inst(id).kind, InstKind::Load(_)))
        .map(|id| analysis.func.inst(id).opcode.to_string())
        .collect()
}

#[test]
fn a_wait_inside_each_step_is_a_loop_of_its_own() {
    // `for (step...) { while (ld_relaxed(flag) <= step) {} read(data[step]); }`: nvcc and ptxas
    // give both loops one header block.
    for (path, poll, data) in [
        ("sm_90a/stepped_poll.ptx", "ld.relaxed.gpu.global.u32", "ld.global.f32"),
        ("sm_90a/stepped_poll.cuobjdump.sass", "LDG.E.STRONG.GPU", "LDG.E"),
        ("sm_90a/stepped_poll.nvdisasm.sass", "LDG.E.STRONG.GPU", "LDG.E"),
    ] {
        let func = function(&compiled(path), "wait_each_step_relaxed");
        let analysis = FunctionAnalysis::new(&func);
        let [step, wait] = analysis.loops() else {
            panic!("{path}: {:?}", analysis.loops());
        };
        assert_eq!(step.header, wait.header, "{path}");
        assert_eq!((step.id, wait.id), (0, 1), "{path}");
        assert_eq!(step.latches.len(), 2, "{path}");
        assert_eq!(wait.latches.len(), 1, "{path}");
        assert!(wait.blocks.iter().all(|&b| step.contains(b)), "{path}");
        assert_eq!(loads(&analysis, wait), [poll], "{path}");
        let mut step_loads = loads(&analysis, step);
        step_loads.sort();
        let mut expected = vec![poll.to_string(), data.to_string()];
        expected.sort();
        assert_eq!(step_loads, expected, "{path}");
        // The wait leaves through the poll's branch, into the step's body.
        let [(from, to)] = wait.exits[..] else { panic!("{path}: {:?}", wait.exits) };
        assert!(step.contains(to), "{path}");
        let branch = analysis.cfg.block(from).last();
        let polled: Vec<String> = analysis
            .deciding_reads(branch, Some(wait))
            .into_iter()
            .map(|id| func.inst(id).opcode.to_string())
            .collect();
        assert_eq!(polled, [poll], "{path}");
        // The wait is the innermost loop of the poll.
        let poll_id = wait.insts(&analysis).find(|&id| func.inst(id).opcode == poll).unwrap();
        assert_eq!(analysis.innermost_loop(poll_id).map(|l| l.id), Some(1), "{path}");
    }
}

/// Hand-written PTX (not compiler output): one branch leaves both loops of a header, and what
/// decides it differs between them. The poll's loop is the header block and the block after it;
/// the step's loop adds the block that loads the next bound round the second back edge.
const SHARED_EXIT: &str = r"
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 flag, .param .u64 bounds)
{
    .reg .pred %p<3>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [bounds];
    mov.u32 %r2, 0;
$L_head:
    ld.relaxed.gpu.global.u32 %r1, [%rd1];
    setp.eq.u32 %p1, %r1, %r2;
    @%p1 bra $L_done;
    setp.lt.u32 %p2, %r1, 5;
    @%p2 bra $L_head;
    ld.global.u32 %r2, [%rd2];
    bra.uni $L_head;
$L_done:
    ret;
}
";

#[test]
fn slices_are_remembered_per_loop_not_per_header() {
    for wait_first in [false, true] {
        let func = function(SHARED_EXIT, "k");
        let analysis = FunctionAnalysis::new(&func);
        let [step, wait] = analysis.loops() else { panic!("{:?}", analysis.loops()) };
        assert_eq!(step.header, wait.header);
        assert_eq!((wait.blocks.len(), step.blocks.len()), (2, 3));
        // `@%p1 bra $L_done` ends the header block and leaves both loops.
        let branch = analysis.cfg.block(wait.header).last();
        assert!(step.exits.iter().any(|&(from, _)| from == wait.header));
        assert!(wait.exits.iter().any(|&(from, _)| from == wait.header));
        let opcodes = |lp: &Loop| -> Vec<String> {
            let mut found: Vec<String> = analysis
                .deciding_reads(branch, Some(lp))
                .into_iter()
                .map(|id| func.inst(id).opcode.to_string())
                .collect();
            found.sort();
            found
        };
        let (in_wait, in_step) = if wait_first {
            let w = opcodes(wait);
            (w, opcodes(step))
        } else {
            let s = opcodes(step);
            (opcodes(wait), s)
        };
        // Round the step's back edge, the bound loaded after the wait decides the exit too.
        assert_eq!(
            in_step,
            ["ld.global.u32", "ld.relaxed.gpu.global.u32"],
            "wait first: {wait_first}"
        );
        assert_eq!(in_wait, ["ld.relaxed.gpu.global.u32"], "wait first: {wait_first}");
    }
}

/// Of the loops that share a header, each answers the loop of all its back edges as its whole
/// loop; a loop with a header of its own is its own whole loop.
#[test]
fn loops_sharing_a_header_name_the_loop_of_all_their_back_edges() {
    // `SHARED_EXIT` behind a wait of its own: a loop with one back edge, then a header with two.
    let first_wait = "$L_first:
    ld.relaxed.gpu.global.u32 %r1, [%rd1];
    setp.eq.u32 %p0, %r1, 0;
    @%p0 bra $L_first;
$L_head:";
    let text = SHARED_EXIT.replacen("$L_head:", first_wait, 1);
    let func = function(&text, "k");
    let analysis = FunctionAnalysis::new(&func);
    let [first, step, wait] = analysis.loops() else { panic!("{:?}", analysis.loops()) };
    assert_ne!(first.header, step.header);
    assert_eq!(step.header, wait.header);
    assert!(wait.blocks.len() < step.blocks.len());
    assert_eq!(analysis.whole_loop(first).id, first.id);
    assert_eq!(analysis.whole_loop(step).id, step.id);
    assert_eq!(analysis.whole_loop(wait).id, step.id);
}

/// The predicate of an atomic on a generic address (`ATOM.E.ADD.F32.FTZ.RN.STRONG.GPU P0, RZ,
/// [R2.64], R7`) says whether the address was global and the atomic performed there; the
/// branch on it (`@P0 BRA`) skips ptxas's emulation for shared or local memory. It does not
/// depend on what memory held, so the atomic is no read that decides the branch (taken as one,
/// a poll loop's compare-and-swap made the emulation's own `LD.E.64` of the same address a
/// "read after the loop": 87 reports in NVSHMEM's host library, docs/audit.md).
#[test]
fn the_performed_predicate_of_a_generic_atomic_decides_no_branch() {
    for arch in ["sm_80", "sm_90a", "sm_100a", "sm_120"] {
        for form in ["nvdisasm", "cuobjdump"] {
            let path = format!("{arch}/emulated_atomic_poll.{form}.sass");
            let text = compiled(&path);
            let kind = detect(&text).unwrap();
            let lowered = fencelint_lower::lower(FileId(0), &text, kind, 0);
            let mut branches = 0;
            for func in lowered.modules.iter().flat_map(|m| &m.functions) {
                let analysis = FunctionAnalysis::new(func);
                for (index, inst) in func.insts.iter().enumerate() {
                    let branch = fencelint_ir::InstId(index as u32);
                    let Some(guard) = inst.guard.filter(|_| !inst.control.targets.is_empty())
                    else {
                        continue;
                    };
                    let atomics: Vec<_> = analysis
                        .reaching_defs(branch, guard.reg)
                        .defs
                        .into_iter()
                        .filter(|&def| matches!(func.inst(def).kind, InstKind::Atomic { .. }))
                        .collect();
                    if atomics.is_empty() {
                        continue;
                    }
                    branches += 1;
                    let reads = analysis.deciding_reads(branch, None);
                    assert!(
                        atomics.iter().all(|atomic| !reads.contains(atomic)),
                        "{path}: {}: {:?}",
                        func.name,
                        inst.opcode
                    );
                }
            }
            assert!(branches > 0, "{path}: no branch on an atomic's predicate");
        }
    }
}
