//! Spin waits in a debug build (`nvcc -G`): `fixtures/kernels/debug/debug_build.cu`, compiled
//! here with the installed nvcc into a temporary directory (a debug build records the directory
//! it was compiled in, so its output is not committed), then linted as PTX, as a
//! `cuobjdump -sass` listing and as a cubin. Needs nvcc and cuobjdump (CI points
//! `FENCELINT_CUDA_BIN` at them); without them the test says so on stderr and checks nothing.

// Saying on stderr that a test could not run is the point of the message.
#![allow(clippy::print_stderr)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::{fencelint, repo, stdout};

const SOURCE: &str = "fixtures/kernels/debug/debug_build.cu";

/// The directory holding nvcc and cuobjdump, when there is one.
fn cuda_bin() -> Option<PathBuf> {
    let dir = std::env::var_os("FENCELINT_CUDA_BIN").map(PathBuf::from)?;
    ["nvcc", "cuobjdump"].iter().all(|tool| dir.join(tool).is_file()).then_some(dir)
}

fn run(bin: &Path, tool: &str, args: &[&str], cwd: &Path) -> Vec<u8> {
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = Command::new(bin.join(tool))
        .args(args)
        .current_dir(cwd)
        .env("PATH", path)
        .output()
        .unwrap_or_else(|e| panic!("run {tool}: {e}"));
    assert!(out.status.success(), "{tool} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

/// The (kernel, rule) pairs of `fencelint check --select all --format json FILE`.
fn findings(file: &Path, bin: &Path) -> BTreeSet<(String, String)> {
    let file = file.to_str().expect("utf-8 path");
    let bin = bin.to_str().expect("utf-8 path");
    let out = fencelint(&["check", "--select", "all", "--format", "json", "--cuda-bin", bin, file]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{file}: {e}: {}", stdout(&out)));
    doc["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            let text = |key: &str| d[key].as_str().unwrap_or("?").to_owned();
            (text("kernel"), text("rule"))
        })
        .collect()
}

#[test]
fn debug_builds_poll_like_release_builds() {
    let Some(bin) = cuda_bin() else {
        eprintln!(
            "NOT RUN: debug_builds_poll_like_release_builds needs nvcc and cuobjdump in \
             FENCELINT_CUDA_BIN"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("temporary directory");
    let source = repo().join(SOURCE);
    let source = source.to_str().expect("utf-8 path");
    run(&bin, "nvcc", &["-G", "-arch=sm_90a", "-ptx", source, "-o", "debug_build.ptx"], dir.path());
    run(
        &bin,
        "nvcc",
        &["-G", "-arch=sm_90a", "-cubin", "debug_build.ptx", "-o", "debug_build.cubin"],
        dir.path(),
    );
    let listing = run(&bin, "cuobjdump", &["-sass", "debug_build.cubin"], dir.path());
    // What the debug build is about: registers copied onto themselves.
    let text = String::from_utf8_lossy(&listing);
    let self_copies = text
        .lines()
        .filter_map(|line| line.split_once("MOV R").map(|(_, rest)| rest))
        .filter(|rest| {
            let (dst, src) = rest.split_once(", R").unwrap_or(("", "x"));
            let digits = src.find(|c: char| !c.is_ascii_digit()).unwrap_or(src.len());
            !dst.is_empty() && dst == &src[..digits] && src[digits..].trim_start().starts_with(';')
        })
        .count();
    assert!(self_copies > 10, "{self_copies} self-copies in\n{text}");
    std::fs::write(dir.path().join("debug_build.sass"), &listing).expect("write listing");

    let expected: BTreeSet<(String, String)> = [
        ("debug_poll_relaxed", "spin-poll-without-acquire"),
        ("debug_poll_acquire", "acquire-in-poll-loop"),
    ]
    .iter()
    .map(|&(kernel, rule)| (kernel.to_owned(), rule.to_owned()))
    .collect();
    for name in ["debug_build.ptx", "debug_build.sass", "debug_build.cubin"] {
        let got = findings(&dir.path().join(name), &bin);
        // A cubin is linted with its embedded PTX, if any: the same kernels and rules. The
        // debug build calls libcu++'s functions, and cuobjdump's listing names no callee.
        let mut expected = expected.clone();
        if name == "debug_build.sass" {
            expected.insert(("?".to_owned(), "calls-not-followed".to_owned()));
        }
        // The PTX says it is a debug build (`.target sm_90a, debug`), and so does the cubin
        // (`.debug_info`); a listing does not.
        if name != "debug_build.sass" {
            expected.insert(("?".to_owned(), "debug-build".to_owned()));
        }
        assert_eq!(got, expected, "{name}");
    }
}
