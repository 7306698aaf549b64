//! `lint_ptx_by_function` (large PTX files, one function at a time) against the whole-module
//! path: the same diagnostics, functions and instructions, on every PTX file under
//! `fixtures/` and on hand-written module shapes.

use std::path::{Path, PathBuf};

use fencelint_linter::{
    InputKind, LintOutput, Settings, lint_lowered, lint_ptx_by_function, lint_text,
};
use fencelint_source::FileId;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn ptx_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            ptx_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "ptx") {
            out.push(path);
        }
    }
}

/// The whole path (the module lowered at once, as `lint_text` does below the size from which
/// it lints by function), and the function-by-function path.
fn both(text: &str) -> (LintOutput, LintOutput) {
    let settings = Settings::all();
    let whole = lint_lowered(fencelint_lower::lower(FileId(0), text, InputKind::Ptx, 0), &settings);
    let parts = lint_ptx_by_function(FileId(0), text, &settings);
    (whole, parts)
}

fn assert_same(name: &str, text: &str) -> usize {
    let (whole, parts) = both(text);
    assert_eq!(whole.diagnostics, parts.diagnostics, "{name}");
    assert_eq!(whole.functions, parts.functions, "{name}");
    assert_eq!(whole.instructions, parts.instructions, "{name}");
    whole.diagnostics.len()
}

#[test]
fn every_fixture_gives_the_same_output() {
    let mut files = Vec::new();
    ptx_files(&repo_root().join("fixtures"), &mut files);
    assert!(files.len() > 50, "{} PTX files", files.len());
    let mut diagnostics = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        // Suppression comments are read by the whole path only.
        if text.contains("fencelint:") {
            continue;
        }
        diagnostics += assert_same(&path.display().to_string(), &text);
    }
    assert!(diagnostics > 100, "{diagnostics} diagnostics");
}

const HEADER: &str = ".version 8.5\n.target sm_90a\n.address_size 64\n";

const POLL: &str = ".visible .entry k(.param .u64 f, .param .u64 d, .param .u64 o)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [f];
    ld.param.u64 %rd2, [d];
    ld.param.u64 %rd3, [o];
$L_spin:
    .loc 1 7 5
    ld.relaxed.gpu.global.u32 %r1, [%rd1];
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra $L_spin;
    ld.global.u32 %r2, [%rd2];
    st.global.u32 [%rd3], %r2;
    ret;
}
";

#[test]
fn module_shapes_give_the_same_output() {
    let declaration = ".extern .func (.param .b32 r) helper (.param .b32 a);\n";
    let bad_declaration = ".extern .func (.param .b32 r) broken (.param .b32 a\n";
    // The shapes with parse errors (a broken declaration or body, garbage, an unclosed body)
    // must send the text to the whole path: an outline or a function parse that missed its
    // errors would lint those texts by function and lose or reword them.
    let cases = [
        ("no function", HEADER.to_owned()),
        ("one kernel", format!("{HEADER}{POLL}")),
        ("file table at the end", format!("{HEADER}{POLL}.file 1 \"k.cu\"\n")),
        ("file table first", format!("{HEADER}.file 1 \"k.cu\"\n{POLL}")),
        ("a declaration between", format!("{HEADER}{declaration}{POLL}{declaration}")),
        ("a broken declaration", format!("{HEADER}{bad_declaration}{POLL}")),
        ("garbage between functions", format!("{HEADER}{POLL}this is not ptx;\n{POLL}")),
        ("a global between", format!("{HEADER}.global .align 4 .u32 flag;\n{POLL}")),
        ("a broken body", format!("{HEADER}{}", POLL.replace("setp.eq.s32", "setp.eq.s32 ??"))),
        ("an unclosed body", format!("{HEADER}{}", POLL.trim_end().trim_end_matches('}'))),
        ("no header", POLL.to_owned()),
    ];
    for (name, text) in cases {
        assert_same(name, &text);
    }
    // The kernel's finding is there, with its source line from the table at the end.
    let (_, parts) = both(&format!("{HEADER}{POLL}.file 1 \"k.cu\"\n"));
    let finding = parts.diagnostics.iter().find(|d| d.rule == "spin-poll-without-acquire");
    let source = finding.and_then(|d| d.primary.source.as_ref());
    assert!(source.is_some_and(|s| s.file == "k.cu"), "{:?}", parts.diagnostics);
}

/// `lint_text` takes the function-by-function path for PTX of 1 MiB or more: the output is the
/// whole path's. A suppression comment keeps such a text on the whole path, where it is read.
#[test]
fn lint_text_of_a_large_module() {
    let mut text = HEADER.to_owned();
    let mut n = 0;
    while text.len() < (1 << 20) + 4096 {
        text.push_str(&POLL.replacen(".entry k(", &format!(".entry k{n}("), 1));
        n += 1;
    }
    let settings = Settings::all();
    let (whole, _) = both(&text);
    let linted = lint_text(FileId(0), &text, InputKind::Ptx, &settings);
    assert_eq!(linted.diagnostics, whole.diagnostics);
    assert_eq!(linted.functions, n);
    assert!(linted.diagnostics.len() >= n, "{} diagnostics", linted.diagnostics.len());

    // Allow the finding of the first kernel only.
    let marked = text.replacen(
        "    ld.global.u32 %r2, [%rd2];",
        "    ld.global.u32 %r2, [%rd2]; // fencelint: allow(spin-poll-without-acquire)",
        1,
    );
    let linted = lint_text(FileId(0), &marked, InputKind::Ptx, &settings);
    assert_eq!(linted.suppressed, 1);
    assert_eq!(linted.diagnostics.len(), whole.diagnostics.len() - 1);
}

/// A `.func` that polls and then reads, called by two kernels: each kernel's copy of the
/// callee's code gives the callee's finding at the same place, and linted alone the callee
/// gives it too. The callee owns it, once, on both paths, whichever kernel comes first; a
/// kernel's own read after the call stays the kernel's.
#[test]
fn a_hazard_in_a_called_function_is_the_callee_s() {
    let callee = ".visible .func wait_and_read(.param .b64 f, .param .b64 d)
{
    .reg .pred %p<2>;
    .reg .b32 %r<4>;
    .reg .b64 %rd<3>;
    ld.param.b64 %rd1, [f];
    ld.param.b64 %rd2, [d];
$L_spin:
    ld.relaxed.gpu.global.u32 %r1, [%rd1];
    setp.eq.s32 %p1, %r1, 0;
    @%p1 bra $L_spin;
    ld.global.u32 %r2, [%rd2];
    ret;
}
";
    // `POLL` with a call of the callee before its own wait; `own_read` is false: no read after.
    let call = "    {
    .param .b64 a0;
    st.param.b64 [a0], %rd1;
    .param .b64 a1;
    st.param.b64 [a1], %rd2;
    call.uni wait_and_read, (a0, a1);
    }
";
    let read = "    ld.global.u32 %r2, [%rd2];\n    st.global.u32 [%rd3], %r2;\n";
    let kernel = |name: &str, own_read: bool| {
        let kernel = POLL.replacen(".entry k(", &format!(".entry {name}("), 1).replacen(
            "$L_spin:",
            &format!("{call}$L_spin:"),
            1,
        );
        if own_read { kernel } else { kernel.replacen(read, "", 1) }
    };
    for order in [[0, 1], [1, 0]] {
        let kernels = [kernel("first", true), kernel("second", false)];
        let text = format!("{HEADER}{callee}{}{}", kernels[order[0]], kernels[order[1]]);
        let (whole, parts) = both(&text);
        assert_eq!(whole.diagnostics, parts.diagnostics);
        let polls: Vec<(&str, u32)> = whole
            .diagnostics
            .iter()
            .filter(|d| d.rule == "spin-poll-without-acquire")
            .map(|d| (d.kernel.as_deref().unwrap_or_default(), d.primary.range.start))
            .collect();
        let callee_read = u32::try_from(text.find("ld.global.u32 %r2").unwrap()).unwrap();
        assert!(polls.contains(&("wait_and_read", callee_read)), "{polls:?}");
        assert!(!polls.iter().any(|&(k, at)| k != "wait_and_read" && at == callee_read));
        assert!(polls.iter().any(|&(k, at)| k == "first" && at > callee_read), "{polls:?}");
    }
}
