//! The notes of spin-poll-without-acquire findings, and which loops it takes for polls, on
//! hand-written PTX (test inputs, not compiler output).

use fencelint_linter::{InputKind, Settings};
use fencelint_source::FileId;

/// The notes of the spin-poll findings of one kernel whose body is `body`.
fn spin_poll_notes(body: &str) -> Vec<Vec<String>> {
    let text = format!(
        ".version 8.5\n.target sm_90\n.address_size 64\n\
         .visible .entry k(.param .u64 flag, .param .u64 data, .param .u64 info)\n{{\n\
         .reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<8>;\n\
         ld.param.u64 %rd1, [flag];\nld.param.u64 %rd2, [data];\nld.param.u64 %rd3, [info];\n\
         {body}\nret;\n}}\n"
    );
    let lint = fencelint_linter::lint_text(FileId(0), &text, InputKind::Ptx, &Settings::default());
    lint.diagnostics
        .iter()
        .filter(|d| d.rule == "spin-poll-without-acquire")
        .map(|d| d.notes.clone())
        .collect()
}

/// A consumer that reads the published data with volatile loads (which the rule takes for
/// other flags) and then a weak load of something else: the finding names the weak load, and a
/// note names the volatile reads that came first, which need the acquire too when they read
/// what the flag publishes (cuSOLVER's and cuBLAS's multi-CTA solvers).
#[test]
fn volatile_reads_before_the_named_read_get_a_note() {
    let poll = "$L: ld.volatile.global.u32 %r1, [%rd1];\nsetp.eq.s32 %p1, %r1, 0;\n@%p1 bra $L;\n";
    let both = spin_poll_notes(&format!(
        "{poll}ld.volatile.global.u32 %r2, [%rd2];\nld.volatile.global.u32 %r3, [%rd2+4];\n\
         ld.global.u32 %r4, [%rd3];\nadd.s32 %r5, %r2, %r4;\nst.global.u32 [%rd3], %r5;"
    ));
    assert_eq!(both.len(), 1, "{both:?}");
    assert!(
        both[0].iter().any(|n| n.starts_with(
            "2 relaxed or volatile reads (the first `ld.volatile.global.u32`) come first after the loop"
        )),
        "{both:?}"
    );
    let one = spin_poll_notes(&format!(
        "{poll}ld.volatile.global.u32 %r2, [%rd2];\nld.global.u32 %r4, [%rd3];\n\
         add.s32 %r5, %r2, %r4;\nst.global.u32 [%rd3], %r5;"
    ));
    assert!(
        one[0]
            .iter()
            .any(|n| n.starts_with("a relaxed or volatile read (`ld.volatile.global.u32`)")),
        "{one:?}"
    );
    // The weak read first: no such note.
    let weak_first = spin_poll_notes(&format!(
        "{poll}ld.global.u32 %r4, [%rd3];\nld.volatile.global.u32 %r2, [%rd2];\n\
         add.s32 %r5, %r2, %r4;\nst.global.u32 [%rd3], %r5;"
    ));
    assert_eq!(weak_first.len(), 1, "{weak_first:?}");
    assert!(
        !weak_first[0].iter().any(|n| n.contains("relaxed or volatile read")),
        "{weak_first:?}"
    );
}

/// A ticket drawn from a counter (`atomicAdd(&next, k)` with `k` nonzero, as an immediate or in a
/// register set to a constant) is not a poll; `atomicAdd(p, 0)` is, in either form.
#[test]
fn tickets_are_not_polls() {
    let loop_with = |addend: &str| {
        spin_poll_notes(&format!(
            "$L: atom.global.add.u32 %r1, [%rd1], {addend};\nsetp.lt.u32 %p1, %r1, 64;\n\
             @%p1 bra $L;\nld.global.u32 %r4, [%rd2];\nst.global.u32 [%rd3], %r4;"
        ))
        .len()
    };
    assert_eq!(loop_with("1"), 0);
    assert_eq!(loop_with("0"), 1);
    let in_register = |value: u32| {
        spin_poll_notes(&format!(
            "mov.u32 %r2, {value};\n$L: atom.global.add.u32 %r1, [%rd1], %r2;\n\
             setp.lt.u32 %p1, %r1, 64;\n@%p1 bra $L;\nld.global.u32 %r4, [%rd2];\n\
             st.global.u32 [%rd3], %r4;"
        ))
        .len()
    };
    assert_eq!(in_register(4), 0);
    assert_eq!(in_register(0), 1);
}
