//! The notes of spin-poll-without-acquire findings, on hand-written PTX (test inputs, not
//! compiler output).

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
