//! `FunctionAnalysis::deciding_read_regs` on compiled fixtures: which registers of a vector poll
//! decide its loop's exit. `spin-poll-without-acquire` takes a poll whose other registers are
//! used after the loop for a packet that carries its own data.

use std::path::PathBuf;

use fencelint_cfg::FunctionAnalysis;
use fencelint_ir::Function;
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
