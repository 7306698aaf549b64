//! `FunctionAnalysis::value_number` on hand-written PTX: a value computed again the same way gets
//! the number of the first computation; a different opcode, a different literal, a different
//! input, several reaching definitions with one between the reads, or a register that changes
//! on its own (`%clock`) give a different number; a register with several definitions read twice
//! with none between (a loop counter) gets the number of the merge at the loop's head.

use fencelint_cfg::{FunctionAnalysis, ValueNumber};
use fencelint_ir::Function;
use fencelint_linter::InputKind;
use fencelint_source::FileId;

/// Lowers one kernel whose body is `body` (registers `%p<4>`, `%r<40>`, `%rd<8>`).
fn kernel(body: &str) -> Function {
    let text = format!(
        ".version 8.5\n.target sm_80\n.address_size 64\n\
         .visible .entry k(.param .u64 p, .param .u32 n)\n{{\n\
         .reg .pred %p<4>;\n.reg .b32 %r<40>;\n.reg .b64 %rd<8>;\n\
         .shared .align 16 .b8 buf[4096];\n{body}\nret;\n}}\n"
    );
    let lowered = fencelint_lower::lower(FileId(0), &text, InputKind::Ptx, 0);
    assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
    lowered.modules.into_iter().next().unwrap().functions.into_iter().next().unwrap()
}

/// The value number of register `name` where the first `st.shared` that reads it reads it.
fn number_at_first_store(analysis: &FunctionAnalysis<'_>, name: &str) -> ValueNumber {
    let func = analysis.func;
    let reg = (0..func.regs.len() as u32)
        .map(fencelint_ir::Reg)
        .find(|&r| func.reg_name(r) == name)
        .unwrap_or_else(|| panic!("no register {name}"));
    let id = func
        .ids()
        .find(|&id| {
            let inst = func.inst(id);
            inst.opcode.starts_with("st.shared") && inst.uses.contains(&reg)
        })
        .unwrap_or_else(|| panic!("no st.shared reads {name}"));
    analysis.value_number(id, reg)
}

/// Whether `%r10` and `%r20` get the same number where the first `st.shared` that reads each
/// reads it.
fn same_value(body: &str) -> bool {
    let func = kernel(body);
    let analysis = FunctionAnalysis::new(&func);
    number_at_first_store(&analysis, "%r10") == number_at_first_store(&analysis, "%r20")
}

#[test]
fn recomputed_values_share_a_number() {
    let prefix = "mov.u32 %r1, %tid.x;\nmov.u32 %r2, buf;\n";
    let cases = [
        // The same shift of the same input, and the input read again from %tid.x.
        (
            "shl.b32 %r3, %r1, 4;\nadd.s32 %r10, %r2, %r3;\nmov.u32 %r5, %tid.x;\nshl.b32 %r6, %r5, 4;\nadd.s32 %r20, %r2, %r6;",
            true,
        ),
        // The same computation in another block that the first does not dominate.
        (
            "ld.param.u32 %r7, [n];\nsetp.eq.s32 %p1, %r7, 0;\n@%p1 bra $L_skip;\nshl.b32 %r3, %r1, 4;\nadd.s32 %r10, %r2, %r3;\nst.shared.u32 [%r10], %r7;\n$L_skip:\nshl.b32 %r6, %r1, 4;\nadd.s32 %r20, %r2, %r6;",
            true,
        ),
        // A different literal.
        (
            "shl.b32 %r3, %r1, 4;\nadd.s32 %r10, %r2, %r3;\nshl.b32 %r6, %r1, 3;\nadd.s32 %r20, %r2, %r6;",
            false,
        ),
        // A different opcode.
        (
            "shl.b32 %r3, %r1, 4;\nadd.s32 %r10, %r2, %r3;\nshr.u32 %r6, %r1, 4;\nadd.s32 %r20, %r2, %r6;",
            false,
        ),
        // Operands in another order (`sub` is not commutative; neither is anything here).
        ("sub.s32 %r10, %r2, %r1;\nsub.s32 %r20, %r1, %r2;", false),
        // The neighbour's slot.
        (
            "shl.b32 %r3, %r1, 4;\nadd.s32 %r10, %r2, %r3;\nxor.b32 %r5, %r1, 1;\nshl.b32 %r6, %r5, 4;\nadd.s32 %r20, %r2, %r6;",
            false,
        ),
        // A copy holds the value it copies (`mov`, `AluOp::Move`).
        ("shl.b32 %r10, %r1, 4;\nmov.b32 %r20, %r10;", true),
        // A conversion is a computation of its own: `cvt` cuts or extends the value.
        ("shl.b32 %r10, %r1, 4;\ncvt.u32.u16 %r20, %r10;", false),
        // A loaded value is not recomputed: two loads of the same address may differ.
        ("ld.shared.u32 %r10, [%r2];\nld.shared.u32 %r20, [%r2];", false),
        // The clock changes on its own.
        ("mov.u32 %r10, %clock;\nmov.u32 %r20, %clock;", false),
        // A guarded computation keeps the old value when its guard is false.
        (
            "setp.eq.s32 %p2, %r1, 0;\nmov.u32 %r10, 7;\nmov.u32 %r20, 7;\n@%p2 add.s32 %r20, %r20, 0;",
            false,
        ),
        // A loop counter (two definitions) read twice in one iteration, with no definition
        // between: the value merged at the loop's head, both times.
        (
            "mov.u32 %r10, 0;\n$L_top:\nst.shared.u32 [%r2+8], %r10;\nmov.b32 %r20, %r10;\nadd.s32 %r10, %r10, 1;\nsetp.lt.s32 %p1, %r10, 5;\n@%p1 bra $L_top;",
            true,
        ),
        // A definition on one way between the two reads: the second reads another merge.
        (
            "setp.eq.s32 %p2, %r1, 0;\nmov.u32 %r10, 0;\n$L_top:\nst.shared.u32 [%r2+8], %r10;\n@%p2 bra $L_skip;\nmov.u32 %r10, 7;\n$L_skip:\nmov.b32 %r20, %r10;\nadd.s32 %r10, %r10, 1;\nsetp.lt.s32 %p1, %r10, 5;\n@%p1 bra $L_top;",
            false,
        ),
        // A guarded definition between the two reads, in their block.
        (
            "setp.eq.s32 %p2, %r1, 0;\nmov.u32 %r10, 0;\n$L_top:\nst.shared.u32 [%r2+8], %r10;\n@%p2 mov.u32 %r10, 7;\nmov.b32 %r20, %r10;\nadd.s32 %r10, %r10, 1;\nsetp.lt.s32 %p1, %r10, 5;\n@%p1 bra $L_top;",
            false,
        ),
    ];
    for (body, expected) in cases {
        let body =
            format!("{prefix}{body}\nst.shared.u32 [%r2], %r10;\nst.shared.u32 [%r2+4], %r20;");
        assert_eq!(same_value(&body), expected, "{body}");
    }
}

/// Offsets from `buf`, the least and the greatest (`None`: no bound above).
type Bounds = (i64, Option<i64>);

/// The span of the address of the first `st.shared` of `body`, or `None` when there is no span
/// into `buf`.
fn store_span(body: &str) -> Option<Bounds> {
    let func = kernel(body);
    let analysis = FunctionAnalysis::new(&func);
    let id = func.ids().find(|&id| func.inst(id).opcode.starts_with("st.shared")).unwrap();
    let span = analysis.address_span(id, func.inst(id).address.as_ref().unwrap())?;
    assert_eq!(span.object, Some(fencelint_cfg::AddrRoot::Symbol("buf".into())));
    Some((span.lo, span.hi))
}

#[test]
fn address_spans_bound_thread_indices() {
    let prefix = "mov.u32 %r1, %tid.x;\nmov.u32 %r2, buf;\n";
    let cases: [(&str, Option<Bounds>); 10] = [
        // `buf + 256 + 8 * tid.x` (a shift), a store 8 bytes further on.
        (
            "shl.b32 %r3, %r1, 3;\nadd.s32 %r4, %r2, %r3;\nst.shared.u32 [%r4+264], %r1;",
            Some((264, Some(264 + 8 * 1023))),
        ),
        // A multiply, a mask and a shift right of the lane.
        (
            "mov.u32 %r5, %laneid;\nmul.lo.s32 %r3, %r5, 48;\nadd.s32 %r4, %r2, %r3;\nst.shared.u32 [%r4], %r1;",
            Some((0, Some(48 * 31))),
        ),
        (
            "and.b32 %r3, %r1, 15;\nshr.u32 %r6, %r1, 4;\nadd.s32 %r7, %r3, %r6;\nadd.s32 %r4, %r2, %r7;\nst.shared.u32 [%r4], %r1;",
            Some((0, Some(15 + 63))),
        ),
        // An `or` of two non-negative values: at least the larger, at most the sum.
        (
            "shl.b32 %r3, %r1, 7;\nor.b32 %r6, %r3, 8;\nmov.u32 %r8, 8;\nor.b32 %r6, %r3, %r8;\nadd.s32 %r4, %r2, %r6;\nst.shared.u32 [%r4], %r1;",
            Some((8, Some(128 * 1023 + 8))),
        ),
        // A counter that a loop only adds to: at least where it starts, no bound above.
        (
            "shl.b32 %r3, %r1, 3;\n$L_top:\nadd.s32 %r4, %r2, %r3;\nst.shared.u32 [%r4+64], %r1;\nadd.s32 %r3, %r3, 512;\nsetp.lt.s32 %p1, %r3, 4096;\n@%p1 bra $L_top;",
            Some((64, None)),
        ),
        // A counter that a loop subtracts from has no bound below.
        (
            "shl.b32 %r3, %r1, 3;\n$L_top:\nadd.s32 %r4, %r2, %r3;\nst.shared.u32 [%r4+64], %r1;\nadd.s32 %r3, %r3, -8;\nsetp.gt.s32 %p1, %r3, 0;\n@%p1 bra $L_top;",
            None,
        ),
        // A counter set lower before the loop adds to it: the value the use sees is no longer
        // at least where it started.
        (
            "shl.b32 %r3, %r1, 3;\n$L_top:\nadd.s32 %r4, %r2, %r3;\nst.shared.u32 [%r4+64], %r1;\nmov.u32 %r3, -4000;\nadd.s32 %r3, %r3, 8;\nsetp.lt.s32 %p1, %r3, 4096;\n@%p1 bra $L_top;",
            None,
        ),
        // A loaded index, a parameter, a block index: no span.
        ("ld.shared.u32 %r3, [buf];\nadd.s32 %r4, %r2, %r3;\nst.shared.u32 [%r4], %r1;", None),
        ("ld.param.u32 %r3, [n];\nadd.s32 %r4, %r2, %r3;\nst.shared.u32 [%r4], %r1;", None),
        ("mov.u32 %r3, %ctaid.x;\nadd.s32 %r4, %r2, %r3;\nst.shared.u32 [%r4], %r1;", None),
    ];
    for (body, expected) in cases {
        assert_eq!(store_span(&format!("{prefix}{body}")), expected, "{body}");
    }
}
