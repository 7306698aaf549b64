//! The notes of spin-poll-without-acquire findings, and which loops it takes for polls, on
//! hand-written PTX and SASS (test inputs, not compiler output).

use std::fmt::Write as _;

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

/// The spin-poll findings of a hand-written cuobjdump listing of one `sm_90` kernel whose code is
/// `body` (`/*addr*/ OPCODE ... ;` lines).
fn sass_spin_polls(body: &str) -> usize {
    let text = format!(
        "\n\tcode for sm_90\n\t\tFunction : k\n\t.headerflags\t@\"EF_CUDA_SM90 \
         EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n{body}\t\t..........\n"
    );
    let kind = InputKind::Sass(fencelint_sass::SassFormat::CuobjdumpText);
    let lint = fencelint_linter::lint_text(FileId(0), &text, kind, &Settings::default());
    assert!(lint.diagnostics.iter().all(|d| d.rule != "parse-error"), "{:?}", lint.diagnostics);
    lint.diagnostics.iter().filter(|d| d.rule == "spin-poll-without-acquire").count()
}

/// Three words polled until no half holds the sentinel, as ptxas writes cuDNN's persistent RNN
/// kernels' test: the search stops at the first word that still holds it (`@P5 BRA` past the
/// rest, with `R27` set to 1 before), and the words are used after the loop. The exit is decided
/// by the half-precision tests alone: each value is its own flag. With a bound on the rounds
/// tested inside the loop, it is not.
#[test]
fn a_search_for_sentinels_is_its_own_flag() {
    let listing = |extra: &str| {
        format!(
            "        /*0000*/                   LDC.64 R28, c[0x0][0x210] ;\n\
             {extra}\
             \x20       /*0030*/                   LDG.E.STRONG.SYS R2, desc[UR18][R28.64] ;\n\
             \x20       /*0040*/                   LDG.E.STRONG.SYS R3, desc[UR18][R28.64+0x4] ;\n\
             \x20       /*0050*/                   LDG.E.STRONG.SYS R8, desc[UR18][R28.64+0x8] ;\n\
             \x20       /*0060*/                   HSET2.BF.EQ.AND R251, R2, -65504, -65504, PT ;\n\
             \x20       /*0070*/                   HSET2.BF.EQ.AND R27, R3, -65504, -65504, PT ;\n\
             \x20       /*0080*/                   ISETP.NE.AND P5, PT, R27, RZ, PT ;\n\
             \x20       /*0090*/                   MOV R27, 0x1 ;\n\
             \x20       /*00a0*/                   ISETP.NE.OR P5, PT, R251, RZ, P5 ;\n\
             \x20       /*00b0*/               @P5 BRA 0xf0 ;\n\
             \x20       /*00c0*/                   HSET2.BF.EQ.AND R251, R8, -65504, -65504, PT ;\n\
             \x20       /*00d0*/                   ISETP.NE.AND P6, PT, R251, RZ, PT ;\n\
             \x20       /*00e0*/                   SEL R27, RZ, 0x1, !P6 ;\n\
             \x20       /*00f0*/                   ISETP.NE.AND P5, PT, R27, RZ, PT ;\n\
             \x20       /*0100*/               @P5 BRA 0x30 ;\n\
             \x20       /*0110*/                   IADD3 R4, R2, R3, R8 ;\n\
             \x20       /*0120*/                   LDC.64 R30, c[0x0][0x218] ;\n\
             \x20       /*0130*/                   LDG.E R5, desc[UR18][R30.64] ;\n\
             \x20       /*0140*/                   IADD3 R4, R4, R5, RZ ;\n\
             \x20       /*0150*/                   STG.E desc[UR18][R30.64+0x4], R4 ;\n\
             \x20       /*0160*/                   EXIT ;\n"
        )
    };
    assert_eq!(sass_spin_polls(&listing("")), 0);
    // The same loop, but it also leaves after 256 rounds: `R9` counts them at its head.
    let counted = listing("").replace(
        "        /*0040*/",
        "        /*0034*/                   IADD3 R9, R9, 0x1, RZ ;\n\
         \x20       /*0038*/                   ISETP.GT.AND P0, PT, R9, 0x100, PT ;\n\
         \x20       /*003c*/               @P0 BRA 0x110 ;\n\
         \x20       /*0040*/",
    );
    assert!(sass_spin_polls(&counted) > 0);
}

/// Ends a hand-written listing with a branch under `fence_guard` past an acquire fence to a
/// data read, and numbers its lines as cuobjdump does (16 bytes apart).
fn fenced_read(mut lines: Vec<String>, fence_guard: &str) -> String {
    let at = |index: usize| format!("{:#x}", index * 16);
    lines.push(format!("{fence_guard} BRA {} ;", at(lines.len() + 3)));
    lines.extend(
        [
            "MEMBAR.SC.GPU ;",
            "CCTL.IVALL ;",
            "LDG.E R5, desc[UR8][R40.64+0x100] ;",
            "STG.E desc[UR8][R40.64+0x200], R5 ;",
            "EXIT ;",
        ]
        .map(str::to_owned),
    );
    lines.push(format!("BRA {};", at(lines.len())));
    let mut body = String::new();
    for (index, line) in lines.iter().enumerate() {
        writeln!(body, "        /*{:04x}*/                   {line}", index * 16).unwrap();
    }
    body
}

/// A poll that runs only when a test before the loop holds, and a fence after the loop under the
/// same test, as ptxas lays out cuDSS's `fct_kernel` (hand-written listing): `P4 = x != 0 ||
/// !P2`, `P0 = y != 0 || !P2`, and `@P4 BRA P0` skips the poll when both hold, so every way
/// into the loop has `P2`, and `@!P2 BRA` after the exit never skips the fence on such a path.
/// With the fence under another test, a path polls and skips it; with a CTA barrier before the
/// fence, the other threads' reads after the barrier are not ordered whatever their tests say.
#[test]
fn a_poll_under_a_test_meets_the_fence_under_the_same_test() {
    let listing = |fence_guard: &str, barrier: bool| {
        let head = [
            "LDC.64 R40, c[0x0][0x210] ;",
            "LDC R38, c[0x0][0x218] ;",
            "LDC R39, c[0x0][0x21c] ;",
            "LDC R2, c[0x0][0x220] ;",
            "ISETP.NE.AND P2, PT, R2, RZ, PT ;",
            "ISETP.NE.AND P3, PT, R38, R39, PT ;",
            "ISETP.NE.OR P4, PT, R38, RZ, !P2 ;",
            "ISETP.NE.OR P0, PT, R39, RZ, !P2 ;",
        ];
        let at = |index: usize| format!("{:#x}", index * 16);
        // The poll's loop starts after the branch that skips it; the fence's test after the
        // loop and the barrier.
        let (poll, after) = (head.len() + 1, head.len() + 4 + usize::from(barrier));
        let mut lines: Vec<String> = head.iter().map(|l| (*l).to_owned()).collect();
        lines.push(format!("@P4 BRA P0, {} ;", at(after - usize::from(barrier))));
        lines.push("LDG.E.STRONG.GPU R55, desc[UR8][R40.64] ;".to_owned());
        lines.push("ISETP.NE.AND P0, PT, R55, 0x1, PT ;".to_owned());
        lines.push(format!("@P0 BRA {} ;", at(poll)));
        if barrier {
            lines.push("BAR.SYNC.DEFER_BLOCKING 0x0 ;".to_owned());
        }
        fenced_read(lines, fence_guard)
    };
    assert_eq!(sass_spin_polls(&listing("@!P2", false)), 0);
    assert_eq!(sass_spin_polls(&listing("@!P3", false)), 1);
    assert_eq!(sass_spin_polls(&listing("@!P2", true)), 1);
}

/// Appends a poll of two words to `lines`: the branch `skip` (`@!P4 BRA`) to just past it, the
/// loop's `body`, and its back edge under `latch` (`@P1`), addressed as cuobjdump numbers lines.
fn push_poll(lines: &mut Vec<String>, skip: &str, body: [&str; 4], latch: &str) {
    let at = |index: usize| format!("{:#x}", index * 16);
    let poll = lines.len() + 1;
    let after = poll + body.len() + 1;
    lines.push(format!("{skip} {} ;", at(after)));
    lines.extend(body.map(str::to_owned));
    lines.push(format!("{latch} BRA {} ;", at(poll)));
}

/// The listing of [`flags_read_under_a_test_skip_the_poll_the_fence_under_that_test_orders`]:
/// the test `need` (writing `P3`), the flags' default `ready_default`, the ready test against
/// `one`, then the lines `retest` after the loop, and the fence under `fence_guard`.
fn flags_under_need(
    need: &[&str],
    ready_default: &str,
    one: &str,
    retest: &[&str],
    fence_guard: &str,
) -> String {
    let mut lines: Vec<String> = [
        "LDC.64 R40, c[0x0][0x210] ;",
        "LDC.64 R38, c[0x0][0x218] ;",
        "LDC R2, c[0x0][0x220] ;",
        "LDC R3, c[0x0][0x224] ;",
        "ISETP.NE.AND P2, PT, R3, RZ, PT ;",
        "IMAD.MOV.U32 R110, RZ, RZ, 0x1 ;",
        "IMAD.MOV.U32 R109, RZ, RZ, 0x2 ;",
        &format!("IMAD.MOV.U32 R108, RZ, RZ, {ready_default} ;"),
    ]
    .map(str::to_owned)
    .to_vec();
    lines.extend(need.iter().map(|&line| line.to_owned()));
    lines.extend(
        [
            "@P3 LDG.E R108, desc[UR8][R40.64] ;",
            "@P3 LDG.E R109, desc[UR8][R38.64] ;",
            "SHF.R.U32.HI R109, RZ, 0x1, R109 ;",
            "LOP3.LUT R108, R108, 0x1, RZ, 0xc0, !PT ;",
            "LOP3.LUT R109, R109, 0x1, RZ, 0xc0, !PT ;",
            &format!("ISETP.EQ.U32.AND P1, PT, R108, {one}, PT ;"),
            "ISETP.NE.U32.AND P0, PT, R109, 0x1, PT ;",
        ]
        .map(str::to_owned),
    );
    let body = [
        "LDG.E.STRONG.GPU R37, desc[UR8][R40.64] ;",
        "LDG.E.STRONG.GPU R36, desc[UR8][R38.64] ;",
        "LOP3.LUT R37, R37, 0x2, RZ, 0xc0, !PT ;",
        "ISETP.NE.U32.OR P0, PT, R36, 0x1, P5 ;",
    ];
    push_poll(&mut lines, "@!P0 BRA P1,", body, "@P0");
    lines.extend(retest.iter().map(|&line| line.to_owned()));
    fenced_read(lines, fence_guard)
}

/// A poll skipped when two flags, read beforehand only under a test (`@P3 LDG.E`), say ready,
/// with constants that say ready where the test fails, and a fence after the loop under the
/// same test, as ptxas lays out cuDSS's `fct_kernel` (hand-written listing): without `P3` the
/// flags keep the constants and the skip is taken, so every way into the loop has `P3`, and
/// `@!P3 BRA` never skips the fence after it. With the fence under another test, or a constant
/// that lets the poll run without `P3`, a path polls and skips the fence. The same when the
/// ready test compares two registers (`R108` with `R110`, a constant).
#[test]
fn flags_read_under_a_test_skip_the_poll_the_fence_under_that_test_orders() {
    let need = ["ISETP.LT.U32.AND P3, PT, R2, R3, PT ;"];
    let listing_with = |ready_default: &str, fence_guard: &str, one: &str| {
        flags_under_need(&need, ready_default, one, &[], fence_guard)
    };
    let listing =
        |ready_default: &str, fence_guard: &str| listing_with(ready_default, fence_guard, "0x1");
    assert_eq!(sass_spin_polls(&listing("0x1", "@!P3")), 0);
    assert_eq!(sass_spin_polls(&listing("0x1", "@!P2")), 1);
    assert_eq!(sass_spin_polls(&listing("0x0", "@!P3")), 1);
    assert_eq!(sass_spin_polls(&listing_with("0x1", "@!P3", "R110")), 0);
    assert_eq!(sass_spin_polls(&listing_with("0x0", "@!P3", "R110")), 1);
}

/// The listing above with the test made again after the loop, into another predicate, as
/// cuDSS's `fct_kernel` has it (at `sm_90`) where ptxas did not keep `P3` (`ISETP.LT.U32.AND
/// P0, PT, R95, R90, !P0` before the poll and again before the fence; elsewhere the counter
/// masked again into another register, `LOP3.LUT R36, R116, 0x3, RZ, 0xc0, !PT`): the same
/// comparison of the same values, joined the same way to the same predicate, is the same test,
/// and the fence under it orders. Operands swapped (`R3 < R2`, false whenever the poll runs),
/// the other predicate read the other way, another constant or another mask are other tests:
/// the poll runs and the fence does not.
#[test]
fn a_test_made_again_the_same_way_is_the_same_test() {
    let lt = |a: &str, b: &str, p: &str, joined: &str| {
        format!("ISETP.LT.U32.AND {p}, PT, {a}, {b}, {joined} ;")
    };
    let masked = |dest: &str, mask: &str, p: &str| {
        [
            format!("LOP3.LUT {dest}, R2, {mask}, RZ, 0xc0, !PT ;"),
            format!("ISETP.NE.AND {p}, PT, {dest}, 0x2, PT ;"),
        ]
    };
    let cases: [([String; 2], [String; 2], usize); 8] = [
        (
            [lt("R2", "R3", "P3", "PT"), String::new()],
            [lt("R2", "R3", "P4", "PT"), String::new()],
            0,
        ),
        (
            [lt("R2", "R3", "P3", "PT"), String::new()],
            [lt("R3", "R2", "P4", "PT"), String::new()],
            1,
        ),
        (
            [lt("R2", "R3", "P3", "!P2"), String::new()],
            [lt("R2", "R3", "P4", "!P2"), String::new()],
            0,
        ),
        (
            [lt("R2", "R3", "P3", "!P2"), String::new()],
            [lt("R2", "R3", "P4", "P2"), String::new()],
            1,
        ),
        (
            ["ISETP.NE.U32.AND P3, PT, R2, 0x4, !P2 ;".into(), String::new()],
            ["ISETP.NE.U32.AND P4, PT, R2, 0x4, !P2 ;".into(), String::new()],
            0,
        ),
        (
            ["ISETP.NE.U32.AND P3, PT, R2, 0x4, !P2 ;".into(), String::new()],
            ["ISETP.NE.U32.AND P4, PT, R2, 0x5, !P2 ;".into(), String::new()],
            1,
        ),
        (masked("R20", "0x3", "P3"), masked("R21", "0x3", "P4"), 0),
        (masked("R20", "0x3", "P3"), masked("R21", "0x7", "P4"), 1),
    ];
    for (need, retest, polls) in cases {
        let need: Vec<&str> = need.iter().map(String::as_str).filter(|l| !l.is_empty()).collect();
        let retest: Vec<&str> =
            retest.iter().map(String::as_str).filter(|l| !l.is_empty()).collect();
        let listing = flags_under_need(&need, "0x1", "0x1", &retest, "@!P4");
        assert_eq!(sass_spin_polls(&listing), polls, "{need:?} then {retest:?}");
    }
}

/// The listing of [`tests_joined_to_the_need_choose_the_poll`]: `need` (`P0` is its inverse;
/// the lines `need` write it), two flags read under it over defaults that are not constants, the
/// lines `choose` that turn them into `P4`, a poll under `P4`, and the fence under `fence_guard`.
fn first_look_under_need(need: &[&str], choose: &[impl AsRef<str>], fence_guard: &str) -> String {
    let mut lines: Vec<String> = [
        "LDC.64 R40, c[0x0][0x210] ;",
        "LDC.64 R38, c[0x0][0x218] ;",
        "LDC R2, c[0x0][0x220] ;",
        "LDC R3, c[0x0][0x224] ;",
        "LDCU UR2, c[0x0][0x220] ;",
        "LDCU UR3, c[0x0][0x224] ;",
    ]
    .map(str::to_owned)
    .to_vec();
    lines.extend(need.iter().map(|&line| line.to_owned()));
    lines.extend(
        [
            "MOV R108, R2 ;",
            "MOV R109, R2 ;",
            "@!P0 LDG.E R108, desc[UR8][R40.64] ;",
            "@!P0 LDG.E R109, desc[UR8][R38.64] ;",
        ]
        .map(str::to_owned),
    );
    lines.extend(choose.iter().map(|line| line.as_ref().to_owned()));
    let body = [
        "LDG.E.STRONG.GPU R5, desc[UR8][R40.64] ;",
        "LDG.E.STRONG.GPU R4, desc[UR8][R38.64] ;",
        "ISETP.NE.U32.AND P1, PT, R5, 0x1, PT ;",
        "ISETP.NE.U32.OR P1, PT, R4, 0x1, P1 ;",
    ];
    push_poll(&mut lines, "@!P4 BRA", body, "@P1");
    fenced_read(lines, fence_guard)
}

/// A first look at two flags under a test, with the tests of what it read joined to that test
/// (`ISETP.EQ.U32.AND P4, PT, R108, RZ, !P0`) and to each other (`PLOP3.LUT`), choosing the
/// poll, and the fence after the poll under the test alone, as ptxas lays out cuDSS 1.0's
/// `fct_kernel` at `sm_100` (hand-written listing): the poll runs only with `need`, so the fence
/// runs after it, though the flags' defaults are not constants. The same with the test joined by
/// the table (`!P0 && (P4 || P5)`, one input deciding alone), and with the test in a uniform
/// predicate copied into a vector one (`PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x8`) and the
/// joins in uniform ones (`UPLOP3.LUT`). Without the join, or with the fence under another test,
/// a path polls and skips the fence.
#[test]
fn tests_joined_to_the_need_choose_the_poll() {
    let need = ["ISETP.NE.AND P2, PT, R3, RZ, PT ;", "ISETP.GE.U32.OR P0, PT, R2, R3, P2 ;"];
    // Each word's test, joined to `joined`, and the two joined by the table `table`.
    let tests = |joined: &str, table: &str| {
        [
            format!("ISETP.EQ.U32.AND P4, PT, R108, RZ, {joined} ;"),
            format!("ISETP.EQ.U32.AND P5, PT, R109, RZ, {joined} ;"),
            format!("PLOP3.LUT P4, PT, {table} ;"),
        ]
    };
    let joined = tests("!P0", "P5, P4, PT, 0xf8, 0x8f");
    assert_eq!(sass_spin_polls(&first_look_under_need(&need, &joined, "@P0")), 0);
    assert_eq!(sass_spin_polls(&first_look_under_need(&need, &joined, "@P2")), 1);
    let unjoined = tests("PT", "P5, P4, PT, 0xf8, 0x8f");
    assert_eq!(sass_spin_polls(&first_look_under_need(&need, &unjoined, "@P0")), 1);
    // `!P0 && (P4 || P5)`: with `P0`, false whatever the flags.
    let table = tests("PT", "P0, P4, P5, 0xe, 0x0");
    assert_eq!(sass_spin_polls(&first_look_under_need(&need, &table, "@P0")), 0);
    assert_eq!(sass_spin_polls(&first_look_under_need(&need, &table, "@P2")), 1);
    let uniform_need = [
        "UISETP.NE.AND UP2, UPT, UR3, URZ, UPT ;",
        "UISETP.GE.U32.OR UP0, UPT, UR2, UR3, UP2 ;",
        "PLOP3.LUT P0, PT, PT, PT, UP0, 0x80, 0x8 ;",
        "PLOP3.LUT P2, PT, PT, PT, UP2, 0x80, 0x8 ;",
    ];
    let uniform_joined = [
        "@!P0 R2UR UR8, R108 ;",
        "@!P0 R2UR UR7, R109 ;",
        "UISETP.EQ.U32.AND UP3, UPT, UR8, URZ, !UP0 ;",
        "UISETP.EQ.U32.AND UP4, UPT, UR7, URZ, !UP0 ;",
        "UPLOP3.LUT UP4, UPT, UP3, UP4, UPT, 0xf8, 0x8f ;",
        "PLOP3.LUT P4, PT, PT, PT, UP4, 0x80, 0x8 ;",
    ];
    let uniform = |fence_guard| first_look_under_need(&uniform_need, &uniform_joined, fence_guard);
    assert_eq!(sass_spin_polls(&uniform("@P0")), 0);
    assert_eq!(sass_spin_polls(&uniform("@P2")), 1);
}

/// The listing of [`a_test_made_again_the_same_way_is_the_same_test`] with the bound of the
/// test computed again into other registers, as cuDSS 1.0's `fct_kernel` does at `sm_90` and
/// `sm_100a` (`IMAD.SHL.U32 R0, R162, 0x4, RZ; VIADD R0, R0, 0xffffffff` before the poll and
/// `IMAD.SHL.U32 R2, R162, 0x4, RZ; VIADD R0, R2, 0xffffffff` before the fence, or the counter
/// copied, `MOV R146, R142`): SASS arithmetic of `pure` rows with the same operands is one value,
/// and a copy is its source's value. Another shift, another offset, or a copy of another
/// register is another test: the poll runs and the fence does not.
#[test]
fn a_test_computed_again_in_other_registers_is_the_same_test() {
    let bound = |dest: &str, shift: &str, offset: &str| {
        vec![
            format!("IMAD.SHL.U32 R30, R3, {shift}, RZ ;"),
            format!("VIADD {dest}, R30, {offset} ;"),
        ]
    };
    let test = |p: &str, a: &str, b: &str| format!("ISETP.LT.U32.AND {p}, PT, {a}, {b}, PT ;");
    let with = |mut lines: Vec<String>, line: String| {
        lines.push(line);
        lines
    };
    let need = with(bound("R20", "0x4", "0xffffffff"), test("P3", "R2", "R20"));
    let cases = [
        (need.clone(), with(bound("R21", "0x4", "0xffffffff"), test("P4", "R2", "R21")), 0),
        (need.clone(), with(bound("R21", "0x8", "0xffffffff"), test("P4", "R2", "R21")), 1),
        (need.clone(), with(bound("R21", "0x4", "0xfffffffe"), test("P4", "R2", "R21")), 1),
        (
            vec![test("P3", "R2", "R3")],
            vec!["MOV R24, R2 ;".to_owned(), test("P4", "R24", "R3")],
            0,
        ),
        (
            vec![test("P3", "R2", "R3")],
            vec!["IADD3 R24, PT, PT, R2, RZ, RZ ;".to_owned(), test("P4", "R24", "R3")],
            0,
        ),
        (
            vec![test("P3", "R2", "R3")],
            vec!["MOV R24, R38 ;".to_owned(), test("P4", "R24", "R3")],
            1,
        ),
    ];
    for (need, retest, polls) in cases {
        let need: Vec<&str> = need.iter().map(String::as_str).collect();
        let retest: Vec<&str> = retest.iter().map(String::as_str).collect();
        let listing = flags_under_need(&need, "0x1", "0x1", &retest, "@!P4");
        assert_eq!(sass_spin_polls(&listing), polls, "{need:?} then {retest:?}");
    }
}

/// A hand-written listing of a list of flags waited for one after the other, in the shape of
/// cuDSS's `bwd_solve_only_ker`: each turn reads `deps[i]`, polls `flags[deps[i]]`, and the one
/// fence comes after the list. `edit` changes the turn's lines (`None` leaves them). Lines are
/// numbered as cuobjdump does; `@head`, `@poll` and `@after` stand for those lines' addresses.
fn dependency_list(edit: impl Fn(&str) -> Option<Vec<String>>) -> String {
    let turn = [
        "head: LDC.64 R6, c[0x0][0x210] ;",
        "IMAD.WIDE R6, R12, 0x4, R6 ;",
        "read: LDG.E R9, desc[UR4][R6.64] ;",
        "LDC.64 R10, c[0x0][0x220] ;",
        "IMAD.WIDE R10, R9, 0x4, R10 ;",
        "IADD3 R12, R12, 0x80, RZ ;",
        "ISETP.GE.AND P1, PT, R12, R0, PT ;",
        "poll: LDG.E.STRONG.SYS R2, desc[UR4][R10.64] ;",
        "ISETP.NE.AND P2, PT, R2, 0x1, PT ;",
        "@P2 BRA @poll ;",
        "@!P1 BRA @head ;",
    ];
    let mut lines: Vec<String> = [
        "S2R R14, SR_TID.X ;",
        "LDC R0, c[0x0][0x218] ;",
        "ISETP.GE.AND P0, PT, R14, R0, PT ;",
        "@P0 BRA @after ;",
        "MOV R12, R14 ;",
    ]
    .map(str::to_owned)
    .into();
    for line in turn {
        lines.extend(edit(line).unwrap_or_else(|| vec![line.to_owned()]));
    }
    lines.extend(
        [
            "after: MEMBAR.SC.GPU ;",
            "CCTL.IVALL ;",
            "LDC.64 R40, c[0x0][0x228] ;",
            "LDG.E R5, desc[UR4][R40.64] ;",
            "STG.E desc[UR4][R40.64+0x4], R5 ;",
            "EXIT ;",
        ]
        .map(str::to_owned),
    );
    let label = |name: &str| {
        let at = lines.iter().position(|l| l.starts_with(&format!("{name}: "))).unwrap();
        format!("{:#x}", at * 16)
    };
    let (head, poll, after) = (label("head"), label("poll"), label("after"));
    let mut body = String::new();
    for (index, line) in lines.iter().enumerate() {
        let line = line.split_once(": ").map_or(line.as_str(), |(_, rest)| rest);
        let line = line.replace("@head", &head).replace("@poll", &poll).replace("@after", &after);
        writeln!(body, "        /*{:04x}*/                   {line}", index * 16).unwrap();
    }
    writeln!(
        body,
        "        /*{:04x}*/                   BRA {:#x};",
        lines.len() * 16,
        lines.len() * 16
    )
    .unwrap();
    body
}

/// The list's next entry is read after each wait's exit and before the fence: a read whose
/// value only finds the next flag to poll is not the data the waits publish. It is data again
/// when its value is also tested or decides whether an instruction runs, when its address comes from a spill slot (which may hold
/// what an earlier turn read), or from what the turn before read (a list walked through its
/// nodes: the entry's address is made from the entry after the wait).
#[test]
fn reads_that_only_find_the_next_flag_are_not_data() {
    let keep = |_: &str| None;
    assert_eq!(sass_spin_polls(&dependency_list(keep)), 0);
    let tested = |line: &str| {
        line.starts_with("read:")
            .then(|| vec![line.to_owned(), "ISETP.NE.AND P3, PT, R9, RZ, PT ;".to_owned()])
    };
    assert_eq!(sass_spin_polls(&dependency_list(tested)), 1);
    // A bit of the entry decides whether an instruction runs.
    let guarding = |line: &str| {
        line.starts_with("read:").then(|| {
            vec![
                line.to_owned(),
                "LOP3.LUT P3, RZ, R9, 0x1, RZ, 0xc0, !PT ;".to_owned(),
                "@P3 MOV R20, 0x1 ;".to_owned(),
            ]
        })
    };
    assert_eq!(sass_spin_polls(&dependency_list(guarding)), 1);
    let spilled = |line: &str| {
        line.starts_with("head:").then(|| vec!["head: LDL.64 R6, [R1+0x10] ;".to_owned()])
    };
    assert_eq!(sass_spin_polls(&dependency_list(spilled)), 1);
    // `R6` is made from the entry read in the turn before, after its wait.
    let chased = |line: &str| match line {
        "head: LDC.64 R6, c[0x0][0x210] ;" => Some(vec!["head: NOP ;".to_owned()]),
        "IMAD.WIDE R6, R12, 0x4, R6 ;" => Some(vec!["NOP ;".to_owned()]),
        "@!P1 BRA @head ;" => {
            Some(vec!["IMAD.WIDE R6, R9, 0x4, R16 ;".to_owned(), line.to_owned()])
        }
        _ => None,
    };
    assert_eq!(sass_spin_polls(&dependency_list(chased)), 1);
}
