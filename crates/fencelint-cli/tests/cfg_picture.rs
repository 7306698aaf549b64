//! `fencelint cfg`: control-flow pictures with the findings highlighted.
//!
//! The SVG test needs the Graphviz `dot` program. Where it is not on PATH the test says so on
//! stderr (written past the test harness's capture, so it shows in every run) and checks the
//! "install graphviz" error instead of passing silently.

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;

const PTX: &str = "fixtures/ptx/spin-poll-without-acquire/relaxed_poll.ptx";
const SASS: &str = "fixtures/compiled/sm_90a/fences.cuobjdump.sass";
const RULE: &str = "spin-poll-without-acquire";

mod common;

use common::{fencelint, repo, stderr, stdout};

/// The line of the DOT text that lists `needle` (block labels are one line each, so this is the
/// row's cell up to the next row).
fn row_of<'a>(dot: &'a str, needle: &str) -> &'a str {
    let at = dot.find(needle).unwrap_or_else(|| panic!("`{needle}` not in:\n{dot}"));
    let start = dot[..at].rfind("<TR>").expect("row start");
    let end = at + dot[at..].find("</TR>").expect("row end");
    &dot[start..end]
}

/// SVG text with numeric character references (`dot` writes `-` as `&#45;`) decoded.
fn decode_entities(svg: &str) -> String {
    let mut out = String::with_capacity(svg.len());
    let mut rest = svg;
    while let Some(at) = rest.find("&#") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 2..];
        let decoded = tail.find(';').and_then(|end| {
            let code = &tail[..end];
            let value = match code.strip_prefix('x') {
                Some(hex) => u32::from_str_radix(hex, 16).ok(),
                None => code.parse().ok(),
            };
            value.and_then(char::from_u32).map(|c| (c, end))
        });
        if let Some((c, end)) = decoded {
            out.push(c);
            rest = &tail[end + 1..];
        } else {
            out.push_str("&#");
            rest = tail;
        }
    }
    out.push_str(rest);
    out
}

fn dot_on_path() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|dir| dir.join("dot")).find(|p| p.is_file())
}

#[test]
fn dot_names_highlighted_instructions_and_rule() {
    let output = fencelint(&["cfg", PTX, "--kernel", "k", "--format", "dot"]);
    let dot = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(dot.starts_with("digraph "), "{dot}");
    assert!(dot.contains(RULE), "{dot}");

    // The primary label (the data read) in red, the secondary (the relaxed poll) in orange.
    let primary = row_of(&dot, "ld.global.u32 %r2");
    assert!(primary.contains("#f8b4b4") && primary.contains(RULE), "{primary}");
    let secondary = row_of(&dot, "ld.relaxed.gpu.global.u32");
    assert!(secondary.contains("#fdd8a8") && secondary.contains(RULE), "{secondary}");

    // The loop's back edge is dashed, edges carry their kind, the hazard path is marked.
    assert!(dot.lines().any(|l| l.contains("->") && l.contains("style=dashed")), "{dot}");
    assert!(dot.contains("label=\"branch\"") && dot.contains("label=\"fallthrough\""), "{dot}");
    assert!(dot.contains("(hazard path)"), "{dot}");
    assert!(dot.lines().any(|l| l.contains("->") && l.contains("penwidth=2.5")), "{dot}");
    assert!(dot.contains("(loop header)"), "{dot}");

    // Deterministic.
    let again = fencelint(&["cfg", PTX, "--kernel", "k", "--format", "dot"]);
    assert_eq!(stdout(&again), dot);
}

#[test]
fn long_blocks_are_elided_but_findings_kept() {
    let output = fencelint(&["cfg", PTX, "--kernel", "k", "--max-block-insts", "2"]);
    let dot = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(dot.contains("more instruction"), "{dot}");
    assert!(dot.contains("ld.relaxed.gpu.global.u32") && dot.contains("ld.global.u32"), "{dot}");
}

#[test]
fn sass_blocks_show_addresses() {
    let output = fencelint(&["cfg", SASS, "--kernel", "counter_poll_relaxed_fence_after"]);
    let dot = stdout(&output);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(dot.contains("/*0040*/ LDG.E.STRONG.GPU"), "{dot}");
    assert!(!dot.contains("0x0000"), "encodings are left out: {dot}");
}

#[test]
fn unknown_kernel_lists_the_kernels() {
    let output = fencelint(&["cfg", SASS, "--kernel", "no_such_kernel"]);
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("no kernel `no_such_kernel`"), "{err}");
    assert!(err.contains("counter_poll_relaxed_fence_after"), "{err}");
}

#[test]
fn output_file() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("k.dot");
    let output = fencelint(&["cfg", PTX, "--kernel", "k", "-o", out.to_str().expect("utf-8 path")]);
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(output.stdout.is_empty());
    let dot = std::fs::read_to_string(&out).expect("picture written");
    assert!(dot.contains("ld.relaxed.gpu.global.u32"));
}

#[test]
fn svg_without_dot_names_graphviz() {
    let empty = tempfile::tempdir().expect("tempdir");
    let output = Command::new(env!("CARGO_BIN_EXE_fencelint"))
        .args(["cfg", PTX, "--kernel", "k", "--format", "svg"])
        .current_dir(repo())
        .env("PATH", empty.path())
        .output()
        .expect("run fencelint");
    assert_eq!(output.status.code(), Some(2));
    let err = stderr(&output);
    assert!(err.contains("`dot`") && err.contains("graphviz"), "{err}");
}

#[test]
fn svg_names_highlighted_instructions() {
    if dot_on_path().is_none() {
        // Past the capture on purpose: a skipped picture test must be visible in CI logs.
        let _ = std::io::stderr().write_all(
            b"cfg_picture: the Graphviz `dot` program is not on PATH; the SVG picture was NOT \
              checked (install the `graphviz` package)\n",
        );
        return;
    }
    let output = fencelint(&["cfg", PTX, "--kernel", "k", "--format", "svg"]);
    let svg = decode_entities(&stdout(&output));
    assert_eq!(output.status.code(), Some(0), "stderr: {}", stderr(&output));
    assert!(svg.contains("<svg"), "{svg}");
    assert!(svg.contains("ld.relaxed.gpu.global.u32"), "{svg}");
    assert!(svg.contains("ld.global.u32"), "{svg}");
    assert!(svg.contains(RULE), "{svg}");
    assert!(svg.contains("#f8b4b4") && svg.contains("#fdd8a8"), "highlight fills: {svg}");
}
