//! Loops that share a header (`FunctionAnalysis::loops`): the loop of all the header's back
//! edges, and the smaller loop of each back edge on its own, each with its own exits and its own
//! remembered slices.

use std::path::PathBuf;

use fencelint_cfg::{FunctionAnalysis, Loop};
use fencelint_ir::{Function, InstKind};
use fencelint_linter::{InputKind, detect};
use fencelint_source::FileId;

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

fn compiled(path: &str) -> String {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled");
    std::fs::read_to_string(root.join(path)).unwrap()
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
