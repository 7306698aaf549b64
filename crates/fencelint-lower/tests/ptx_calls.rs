//! Calls of `__noinline__` device functions in PTX (`fixtures/kernels/noinline_poll.cu`,
//! compiled): each call gets its own copy of the callee's body, placed after the caller's
//! instructions, with its registers apart from the caller's, its parameters read from the
//! registers the caller stored into them, and its `ret` going back after that call.

use fencelint_ir::{Function, InstId, InstKind, ValueOp};
use fencelint_lower::lower;
use fencelint_source::FileId;

fn function<'m>(functions: &'m [Function], name: &str) -> &'m Function {
    functions.iter().find(|f| f.name == name).unwrap_or_else(|| panic!("no function `{name}`"))
}

#[test]
fn each_call_runs_its_own_copy_of_the_callee() {
    let path =
        concat!(env!("CARGO_MANIFEST_DIR"), "/../../fixtures/compiled/sm_90a/noinline_poll.ptx");
    let text = std::fs::read_to_string(path).expect("compiled fixture");
    let kind = fencelint_lower::detect(&text).expect("PTX");
    let lowered = lower(FileId(0), &text, kind, 0);
    assert!(lowered.diagnostics.is_empty(), "{:#?}", lowered.diagnostics);
    let functions = &lowered.modules[0].functions;

    let f = function(functions, "call_wait_twice_second_unfenced");
    let own = f.inlined_from.expect("the calls are inlined") as usize;
    let calls: Vec<InstId> =
        f.ids().take(own).filter(|&id| f.inst(id).kind == InstKind::Call).collect();
    assert_eq!(calls.len(), 2);
    let entries: Vec<InstId> = calls.iter().map(|&c| f.inst(c).control.targets[0]).collect();
    assert!(entries[0].index() >= own && entries[1].index() > entries[0].index(), "{entries:?}");
    for (k, (&call, &entry)) in calls.iter().zip(&entries).enumerate() {
        assert!(!f.inst(call).control.falls_through);
        let end = entries.get(k + 1).map_or(f.insts.len(), |e| e.index());
        let copy: Vec<InstId> = (entry.index()..end).map(|i| InstId(i as u32)).collect();
        // The copy's `ret` is a jump back to the instruction after its own call.
        let rets: Vec<InstId> =
            copy.iter().copied().filter(|&i| f.inst(i).opcode == "ret").collect();
        assert_eq!(rets.len(), 1);
        assert_eq!(f.inst(rets[0]).kind, InstKind::Branch);
        assert_eq!(f.inst(rets[0]).control.targets, vec![InstId(call.0 + 1)]);
        // Its registers are its own.
        let poll = copy
            .iter()
            .copied()
            .find(|&i| f.inst(i).opcode.starts_with("ld.relaxed"))
            .expect("poll");
        let address = f.inst(poll).uses[0];
        assert!(
            f.reg_name(address).starts_with("%rd1@_Z12wait_relaxedPKj#"),
            "{}",
            f.reg_name(address)
        );
        // The parameter is read from what the caller stored into `param0` before the call.
        let read =
            copy.iter().copied().find(|&i| f.inst(i).defs.contains(&address)).expect("param read");
        let Some(ValueOp::Copy(passed)) = f.inst(read).value else { panic!("{:?}", f.inst(read)) };
        let store = (0..call.index())
            .rev()
            .map(|i| InstId(i as u32))
            .find(|&i| f.inst(i).defs.contains(&passed))
            .expect("the caller's store of the argument");
        assert_eq!(f.inst(store).kind, InstKind::Move);
        assert!(f.inst(store).opcode.starts_with("st.param"));
    }

    // The callee itself is still lowered as written.
    let callee = function(functions, "_Z12wait_relaxedPKj");
    assert_eq!(callee.inlined_from, None);
    assert!(callee.insts.iter().any(|i| i.opcode == "ret" && i.kind == InstKind::Return));
    // The caller as written calls it and goes on.
    let written = f.own_code();
    assert_eq!(written.insts.len(), own);
    assert!(
        written.insts.iter().filter(|i| i.kind == InstKind::Call).all(|i| i.control.falls_through)
    );
}
