//! `fencelint check` on compiled binaries: cubins, fat binaries, host objects.
//!
//! The tests that disassemble need NVIDIA's `cuobjdump` and `nvdisasm`; CI points
//! `FENCELINT_CUDA_BIN` at them. Where no tool can be found, those tests say so on stderr and
//! check the "tools not found" error instead of passing silently. The timeout, crash, missing
//! tool and not-a-binary tests need no CUDA tool at all.

// Saying on stderr that a test could not run is the point of the message.
#![allow(clippy::print_stderr)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::process::Output;
use std::time::{Duration, Instant};

const CUBIN: &str = "fixtures/compiled/sm_90a/spin_poll.cubin";
const FATBIN: &str = "fixtures/compiled/multiarch/spin_poll.fatbin";
const OBJECT: &str = "fixtures/compiled/multiarch/spin_poll.o";
const DEVICE_DATA: &str = "fixtures/compiled/multiarch/device_data.o";
const ARCHIVE: &str = "fixtures/compiled/multiarch/kernels.a";
const APP: &str = "fixtures/compiled/multiarch/app";
const SHARED_LIBRARY: &str = "fixtures/compiled/multiarch/libapp.so";
const PTX: &str = "fixtures/ptx/spin-poll-without-acquire/relaxed_poll.ptx";
const INSTALL: &str = "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm";

mod common;

use common::{fencelint, repo, stderr, stdout};

/// Runs `check --format short` on `args`. Returns `None` (after checking the "not found"
/// error and saying that the test could not run) when no CUDA tool is installed.
fn check_with_tools(test: &str, args: &[&str]) -> Option<Output> {
    let mut all = vec!["check"];
    if !args.contains(&"--format") {
        // Findings located in the listing (not the `.cu` line) name the binary and the cubin.
        all.extend(["--format", "short", "--locations", "input"]);
    }
    all.extend_from_slice(args);
    let out = fencelint(&all);
    let listing = stdout(&out);
    if listing.contains(INSTALL) {
        eprintln!(
            "NOT RUN: `{test}` needs NVIDIA's cuobjdump and nvdisasm (set FENCELINT_CUDA_BIN \
             or `{INSTALL}`); checked the tools-not-found error instead"
        );
        assert_eq!(out.status.code(), Some(2), "{listing}");
        // Short output says `error[input-error]`, JSON `"rule": "input-error"`.
        let reported =
            listing.contains("error[input-error]") || listing.contains("\"rule\": \"input-error\"");
        assert!(reported, "{listing}");
        return None;
    }
    Some(out)
}

fn finding_lines<'a>(text: &'a str, rule: &str) -> Vec<&'a str> {
    text.lines().filter(|l| l.contains(&format!("[{rule}]"))).collect()
}

#[test]
fn a_bare_cubin_names_the_cubin_the_kernel_and_the_finding() {
    let Some(out) = check_with_tools("bare cubin", &[CUBIN]) else { return };
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    let prefix = format!("{CUBIN}[sm_90a:spin_poll.sm_90a.cubin]:poll_relaxed_fence_cta:");
    assert!(
        finding_lines(&text, "spin-poll-without-acquire").iter().any(|l| l.starts_with(&prefix)),
        "{text}"
    );
}

#[test]
fn json_output_carries_the_kernel_and_the_sass_address() {
    let Some(out) = check_with_tools("json", &["--format", "json", CUBIN]) else { return };
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let found = doc["diagnostics"].as_array().unwrap().iter().any(|d| {
        d["rule"] == "spin-poll-without-acquire"
            && d["kernel"] == "poll_relaxed_fence_cta"
            && d["sass_address"].is_u64()
            && d["file"].as_str().unwrap().contains("[sm_90a:spin_poll.sm_90a.cubin]")
    });
    assert!(found, "{doc:#}");
}

/// From `sm_100` on, the binary path asks nvdisasm for the encodings (`-hex`), whose scoreboard
/// bits show `tcgen05.wait::ld`: a tensor-memory load handed over before any instruction waits
/// on its scoreboard is reported from the cubin, as from its cuobjdump listing, and the kernel
/// that waits is not.
#[test]
fn an_unwaited_tensor_memory_load_is_found_in_an_sm_100_cubin() {
    let cubin = "fixtures/compiled/sm_100a/tcgen05.cubin";
    let args = ["--format", "json", "--select", "tcgen05-access-not-waited", cubin];
    let Some(out) = check_with_tools("tensor memory load", &args) else { return };
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let loads: Vec<&str> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["message"].as_str().unwrap().starts_with("`LDTM"))
        .map(|d| d["kernel"].as_str().unwrap())
        .collect();
    assert!(loads.contains(&"tmem_ld_then_arrive_without_wait"), "{doc:#}");
    assert!(!loads.contains(&"tmem_ld_wait_then_arrive"), "{doc:#}");
}

#[test]
fn a_fat_binary_lints_every_cubin_and_the_ptx() {
    let Some(out) = check_with_tools("fatbin", &[FATBIN]) else { return };
    let text = stdout(&out);
    let lines = finding_lines(&text, "spin-poll-without-acquire");
    for unit in ["[sm_90a:spin_poll.1.sm_90a.cubin]:", "[sm_100a:spin_poll.2.sm_100a.cubin]:"] {
        assert!(lines.iter().any(|l| l.contains(unit)), "{unit} missing:\n{text}");
    }
    assert!(lines.iter().any(|l| l.contains("[sm_100a:spin_poll.1.sm_100a.ptx]")), "{text}");
}

/// `--statistics` counts the cubins and PTX of a binary as its files, and each kernel once
/// per cubin: the same numbers as the findings it summarises.
#[test]
fn statistics_count_the_cubins_of_a_binary() {
    let args = ["--format", "json", "--select", "spin-poll-without-acquire", FATBIN];
    let Some(findings) = check_with_tools("statistics", &args) else { return };
    let doc: serde_json::Value = serde_json::from_slice(&findings.stdout).expect("json");
    let diagnostics = doc["diagnostics"].as_array().unwrap();
    // `lib[arch:unit]:function` -> the unit, `lib[arch:unit]`.
    let unit = |d: &serde_json::Value| {
        let file = d["file"].as_str().unwrap();
        file[..=file.find(']').unwrap()].to_owned()
    };
    let mut units: Vec<String> = diagnostics.iter().map(unit).collect();
    units.sort();
    units.dedup();
    let mut functions: Vec<(String, &str)> =
        diagnostics.iter().map(|d| (unit(d), d["kernel"].as_str().unwrap())).collect();
    functions.sort_unstable();
    functions.dedup();
    assert!(units.len() >= 3, "two cubins and a PTX: {units:?}");
    assert!(functions.len() > units.len(), "{functions:?}");

    let stats = fencelint(&["check", "--statistics", "--format", "json", args[2], args[3], FATBIN]);
    assert_eq!(stats.status.code(), findings.status.code());
    let stats: serde_json::Value = serde_json::from_slice(&stats.stdout).expect("json");
    let expected = serde_json::json!([{
        "rule": "spin-poll-without-acquire",
        "severity": "error",
        "count": diagnostics.len(),
        "functions": functions.len(),
        "files": units.len(),
    }]);
    assert_eq!(stats["statistics"], expected);
}

/// A `-rdc` cubin's kernels call the functions that hold their waits by name (``CALL.ABS.NOINC
/// `(callee)``), and the calls are followed: a small cubin is linted whole, with the findings of
/// the same cubin's nvdisasm listing (checked against the kernel file's expectations by the
/// fixture tests); a larger one (here: `FENCELINT_LINKED_MAX=0`) holds its callable functions
/// and lints each function with the ones it calls, with the same findings and owners: a
/// finding wholly inside a called function is that function's own, on both paths.
/// Each label's excerpt line is the instruction at the label's address, in the caller's text or
/// in the callee's text that follows it.
#[test]
fn calls_between_the_functions_of_a_cubin_are_followed() {
    // (rule, function, message, addresses of the primary label and of the others)
    type Key = (String, String, String, Vec<u64>);
    let keys = |out: &Output| -> Vec<Key> {
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        let mut keys: Vec<Key> = doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let related = d["related"].as_array().into_iter().flatten();
                let addresses = std::iter::once(&d["sass_address"])
                    .chain(related.map(|r| &r["sass_address"]))
                    .filter_map(serde_json::Value::as_u64)
                    .collect();
                let text = |key: &str| d[key].as_str().unwrap_or_default().to_owned();
                (text("rule"), base_name(&text("kernel")), text("message"), addresses)
            })
            .collect();
        keys.sort();
        keys
    };
    for arch in ["sm_80", "sm_90a", "sm_100a", "sm_120"] {
        let cubin = format!("fixtures/compiled/{arch}/noinline_poll.rdc.cubin");
        let args = ["--format", "json", "--select", "all", "--locations", "input", &cubin];
        let Some(out) = check_with_tools("calls_between_the_functions_of_a_cubin", &args) else {
            return;
        };
        let listing = format!("fixtures/compiled/{arch}/noinline_poll.rdc.nvdisasm.sass");
        let expected =
            keys(&fencelint(&["check", "--format", "json", "--select", "all", &listing]));
        let found = keys(&out);
        assert_eq!(found, expected, "{arch}");
        let callers = found.iter().filter(|k| k.1.starts_with("call_")).count();
        assert!(callers >= 2, "{arch}: the kernels' own findings: {found:?}");
        // `call_wait_and_read_twice` calls `wait_relaxed_and_read`'s copy `$1`, which polls and
        // reads: the finding in the callee's code is the callee's, not the kernel's.
        let callee = |k: &Key| k.1 == "wait_relaxed_and_read" && k.0 == "spin-poll-without-acquire";
        assert!(found.iter().filter(|k| callee(k)).count() >= 2, "{arch}: {found:?}");
        assert!(!found.iter().any(|k| k.1 == "call_wait_and_read_twice"), "{arch}: {found:?}");
        assert_excerpts_show_the_addresses(arch, &cubin, &out, &[]);

        // Held callees (the path of a larger cubin) give the same findings, with the same owners.
        let held = common::command(&["check"].into_iter().chain(args).collect::<Vec<_>>())
            .env("FENCELINT_LINKED_MAX", "0")
            .output()
            .unwrap();
        assert_eq!(keys(&held), expected, "{arch}");
        assert_excerpts_show_the_addresses(arch, &cubin, &held, &[("FENCELINT_LINKED_MAX", "0")]);
    }
}

/// With no budget left for linting callers with their callees, a larger cubin's callers keep
/// what they show alone and each says that its calls were not followed.
#[test]
fn callers_past_the_budget_say_their_calls_were_not_followed() {
    let cubin = "fixtures/compiled/sm_90a/noinline_poll.rdc.cubin";
    let args = ["--select", "all", cubin];
    if check_with_tools("callers_past_the_budget", &args).is_none() {
        return;
    }
    let run = |budget: &str| {
        let mut all = vec!["check", "--format", "short", "--locations", "input"];
        all.extend(args);
        let out = common::command(&all)
            .env("FENCELINT_LINKED_MAX", "0")
            .env("FENCELINT_LINKED_BUDGET", budget)
            .output()
            .unwrap();
        stdout(&out)
    };
    let linked = run("1000000000");
    let spent = run("0");
    let left_out = |text: &str| finding_lines(text, "analysis-incomplete").len();
    assert_eq!(left_out(&linked), 0, "{linked}");
    // Each of the eight kernels calls held functions; no held function calls another here.
    assert_eq!(left_out(&spent), 8, "{spent}");
    let polls = |text: &str| finding_lines(text, "spin-poll-without-acquire").len();
    assert!(polls(&spent) < polls(&linked), "{spent}\n{linked}");
}

/// A cubin whose functions called by name are more code than is held (`FENCELINT_HELD_MAX`
/// set to nothing here) lints each kernel alone, and says once that their calls were not
/// followed, naming how many and why; a cubin whose calls are followed says nothing.
#[test]
fn calls_that_are_not_followed_are_said_once_per_cubin() {
    let cubin = "fixtures/compiled/sm_90a/noinline_poll.rdc.cubin";
    if check_with_tools("calls_that_are_not_followed", &["--select", "all", cubin]).is_none() {
        return;
    }
    let run = |env: &[(&str, &str)]| {
        let args = ["check", "--format", "short", "--locations", "input", "--select", "all", cubin];
        let out = common::command(&args).envs(env.iter().copied()).output().unwrap();
        stdout(&out)
    };
    let notes = |text: &str| finding_lines(text, "calls-not-followed").len();
    let whole = run(&[]);
    let held = run(&[("FENCELINT_LINKED_MAX", "0")]);
    let too_large = run(&[("FENCELINT_LINKED_MAX", "0"), ("FENCELINT_HELD_MAX", "0")]);
    assert_eq!(notes(&whole), 0, "{whole}");
    assert_eq!(notes(&held), 0, "{held}");
    assert_eq!(notes(&too_large), 1, "{too_large}");
    let note = finding_lines(&too_large, "calls-not-followed")[0];
    assert!(note.starts_with(&format!("{cubin}:1:1: note[calls-not-followed]")), "{note}");
    // The eight kernels call the five functions that are not kernels.
    assert!(note.contains("8 functions call 5 other functions by name"), "{note}");
    assert!(note.contains("are more than the 0 KiB held"), "{note}");
    let polls = |text: &str| finding_lines(text, "spin-poll-without-acquire").len();
    assert!(polls(&too_large) < polls(&held), "{too_large}\n{held}");
}

/// A cubin linked from three translation units (`fixtures/kernels/linked/`) has two copies of
/// each of the compiler's division helpers, which nvdisasm prints numbered. Linted in parts, the
/// wait that both kernels call is held and followed (no function was held before when two of
/// them shared a name, and the polls went unreported); the calls of the helpers' copies cannot
/// be matched to their copy, but every copy was linted and touches no memory, so they are not
/// said (a note named them before); linted whole, every call is matched and nothing is said.
/// With nothing held, the note names the wait alone. (Whether a copy matters is decided in
/// `binary.rs`'s unit tests: no compiler output here has a copy that does.)
#[test]
fn calls_of_functions_that_share_a_name_are_followed_or_said() {
    let cubin = "fixtures/compiled/multiarch/linked.sm_80.cubin";
    if check_with_tools("calls_of_functions_that_share_a_name", &["--select", "all", cubin])
        .is_none()
    {
        return;
    }
    let run = |env: &[(&str, &str)]| {
        let args = ["check", "--format", "short", "--locations", "input", "--select", "all", cubin];
        let out = common::command(&args).envs(env.iter().copied()).output().unwrap();
        stdout(&out)
    };
    let notes = |text: &str| -> Vec<String> {
        finding_lines(text, "calls-not-followed").into_iter().map(str::to_owned).collect()
    };
    let polls = |text: &str| finding_lines(text, "spin-poll-without-acquire").len();
    let whole = run(&[]);
    assert_eq!((polls(&whole), notes(&whole).len()), (2, 0), "{whole}");
    let parts = run(&[("FENCELINT_LINKED_MAX", "0")]);
    assert_eq!((polls(&parts), notes(&parts).len()), (2, 0), "{parts}");
    let unheld = run(&[("FENCELINT_LINKED_MAX", "0"), ("FENCELINT_HELD_MAX", "0")]);
    assert_eq!(polls(&unheld), 0, "{unheld}");
    let note = &notes(&unheld)[..];
    assert_eq!(note.len(), 1, "{unheld}");
    assert!(note[0].contains("2 functions call 1 other function by name"), "{}", note[0]);
    assert!(note[0].contains("`wait_for_flag(unsigned int const*)`"), "{}", note[0]);
    assert!(note[0].contains(": the cubin's functions called by name"), "{}", note[0]);
}

/// A small cubin is linted whole, its calls of its own functions followed; a call of a function
/// it does not hold (a relocatable cubin of one translation unit, `consumer_a.cu`, calls the wait
/// of another) gets the note, which said nothing before for a cubin linted whole.
#[test]
fn a_cubin_linted_whole_says_which_calls_leave_it() {
    let cubin = "fixtures/compiled/multiarch/consumer_a.rdc.sm_80.cubin";
    let args = ["--format", "short", "--locations", "input", "--select", "all", cubin];
    let Some(out) = check_with_tools("a_cubin_linted_whole_says", &args) else { return };
    let text = stdout(&out);
    let notes = finding_lines(&text, "calls-not-followed");
    assert_eq!(notes.len(), 1, "{text}");
    // The kernel calls its two helpers, which the cubin holds, and the wait, which it does not.
    assert!(notes[0].contains("1 function calls 1 other function by name"), "{}", notes[0]);
    assert!(notes[0].contains("`wait_for_flag(unsigned int const*)`"), "{}", notes[0]);
    assert!(notes[0].contains("the functions they name are not in this cubin"), "{}", notes[0]);
}

/// With cuobjdump and no nvdisasm, a cubin is disassembled by cuobjdump, which prints a call of
/// another function as `CALL.ABS.NOINC 0x0`: the binary says so, as a cuobjdump listing does,
/// and names the way out (it said nothing before).
#[test]
fn calls_that_cuobjdump_prints_without_a_callee_are_said() {
    let cubin = "fixtures/compiled/sm_90a/noinline_poll.rdc.cubin";
    let dirs = std::env::var_os("FENCELINT_CUDA_BIN")
        .into_iter()
        .chain(std::env::var_os("PATH"))
        .flat_map(|paths| std::env::split_paths(&paths).collect::<Vec<_>>());
    let Some(cuobjdump) = dirs.map(|dir| dir.join("cuobjdump")).find(|path| path.is_file()) else {
        eprintln!("NOT RUN: `calls_that_cuobjdump_prints_without_a_callee` needs cuobjdump");
        return;
    };
    let only = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(&cuobjdump, only.path().join("cuobjdump")).unwrap();
    let args = ["check", "--format", "short", "--select", "all", "--cuda-bin"];
    let out = common::command(
        &args.into_iter().chain([only.path().to_str().unwrap(), cubin]).collect::<Vec<_>>(),
    )
    .output()
    .unwrap();
    let text = stdout(&out);
    let notes = finding_lines(&text, "calls-not-followed");
    assert_eq!(notes.len(), 1, "{text}");
    // The eight kernels make eleven calls (the relocations of the cubin say so too).
    assert!(notes[0].contains("11 calls in 8 functions name no callee"), "{}", notes[0]);
    assert!(notes[0].starts_with(&format!("{cubin}:1:1: note[calls-not-followed]")), "{text}");
    let rich = common::command(
        &["check", "--format", "rich", "--color", "never", "--select", "all", "--cuda-bin"]
            .into_iter()
            .chain([only.path().to_str().unwrap(), cubin])
            .collect::<Vec<_>>(),
    )
    .output()
    .unwrap();
    assert!(stdout(&rich).contains("pip install nvidia-cuda-nvdisasm"), "{}", stdout(&rich));
}

/// When the budget covers some of a larger cubin's callers and not others, which ones are linted
/// with their callees is planned from the cubin's relocations before any function is linted:
/// the output is the same whether the cubin is disassembled in one process or in parts that the
/// workers reach in any order (it depended on that order before: three runs in parts gave two
/// different outputs at one budget).
#[test]
fn the_budget_goes_to_the_same_callers_however_the_cubin_is_cut() {
    let cubin = "fixtures/compiled/sm_90a/noinline_poll.rdc.cubin";
    if check_with_tools("the_budget_goes_to_the_same_callers", &["--select", "all", cubin])
        .is_none()
    {
        return;
    }
    let run = |budget: usize, split: bool| {
        let args = ["check", "--format", "short", "--locations", "input", "--select", "all", cubin];
        let mut command = common::command(&args);
        command.env("FENCELINT_LINKED_MAX", "0").env("FENCELINT_LINKED_BUDGET", budget.to_string());
        // Every cubin is cut into parts (two per worker), or none is.
        command.env("FENCELINT_SPLIT_MIN", if split { "0" } else { "1000000000" });
        let mut lines: Vec<String> =
            stdout(&command.output().unwrap()).lines().map(str::to_owned).collect();
        lines.sort();
        lines
    };
    let mut left_out_counts = Vec::new();
    for budget in [0, 2_000, 4_000, 8_000, 12_000, 1_000_000] {
        let whole = run(budget, false);
        for _ in 0..3 {
            assert_eq!(run(budget, true), whole, "budget {budget}");
        }
        left_out_counts.push(finding_lines(&whole.join("\n"), "analysis-incomplete").len());
    }
    // The eight kernels that call held functions: all left out, then fewer as the budget grows.
    assert_eq!(left_out_counts.first(), Some(&8), "{left_out_counts:?}");
    assert_eq!(left_out_counts.last(), Some(&0), "{left_out_counts:?}");
    assert!(left_out_counts.windows(2).all(|w| w[1] <= w[0]), "{left_out_counts:?}");
    assert!(left_out_counts.iter().any(|&n| n > 0 && n < 8), "{left_out_counts:?}");
}

/// Checks that the line each label of `out`'s findings shows in the rich output of the same
/// run is the instruction at the label's SASS address.
fn assert_excerpts_show_the_addresses(arch: &str, cubin: &str, out: &Output, env: &[(&str, &str)]) {
    let args = ["check", "--format", "rich", "--color", "never", "--select", "all"];
    let rich = common::command(
        &args.into_iter().chain(["--locations", "input", cubin]).collect::<Vec<_>>(),
    )
    .envs(env.iter().copied())
    .output()
    .unwrap();
    let mut shown = std::collections::HashMap::new();
    let mut file = String::new();
    for line in stdout(&rich).lines() {
        if let Some((_, at)) = line.split_once("┌─ ") {
            let mut parts = at.rsplitn(3, ':');
            parts.nth(2).unwrap_or_default().clone_into(&mut file);
        } else if let Some((number, text)) = line.split_once(" │ ")
            && let Ok(number) = number.trim().parse::<u64>()
        {
            shown.insert((file.clone(), number), text.to_owned());
        }
    }
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for d in doc["diagnostics"].as_array().unwrap() {
        let related = d["related"].as_array().into_iter().flatten();
        for label in std::iter::once(d).chain(related) {
            let Some(address) = label["sass_address"].as_u64() else { continue };
            let key = (
                label["file"].as_str().unwrap().to_owned(),
                label["span"]["line"].as_u64().unwrap(),
            );
            let text = shown.get(&key).unwrap_or_else(|| panic!("{arch}: {key:?} not shown"));
            assert!(text.contains(&format!("/*{address:04x}*/")), "{arch}: {key:?}: {text}");
        }
    }
}

/// The C++ name of a function, mangled (`_Z21wait_relaxed_and_readPKjPKf`, in a listing) or
/// demangled (`wait_relaxed_and_read(unsigned int const*, float const*)`, in a binary's
/// findings): `wait_relaxed_and_read`.
fn base_name(name: &str) -> String {
    if let Some(rest) = name.strip_prefix("_Z") {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if let Ok(len) = rest[..digits].parse::<usize>() {
            return rest[digits..].chars().take(len).collect();
        }
    }
    name.split('(').next().unwrap_or(name).to_owned()
}

/// Runs `check --format json EXTRA FATBIN` on a pseudo-terminal (util-linux `script`), stdout
/// to a file, and returns what the terminal showed, without escape sequences; `None` (saying
/// so) where `script` is missing.
fn on_a_terminal(extra: &str) -> Option<String> {
    let dir = tempfile::tempdir().unwrap();
    let (log, out) = (dir.path().join("terminal.log"), dir.path().join("out.json"));
    let command = format!(
        "stty cols 250 rows 40; '{}' check --format json {extra} '{}' > '{}'",
        env!("CARGO_BIN_EXE_fencelint"),
        repo().join(FATBIN).display(),
        out.display()
    );
    let ran = std::process::Command::new("script")
        .args(["-qec", &command])
        .arg(&log)
        .current_dir(repo())
        .output();
    if ran.is_err() {
        eprintln!("NOT RUN: the progress test needs `script` (util-linux) for a pseudo-terminal");
        return None;
    }
    let text = String::from_utf8_lossy(&fs::read(&log).unwrap()).into_owned();
    // Drop the escape sequences (`ESC [ ... letter`) and take each redraw as a line.
    let mut plain = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\x1b' => {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            '\r' => plain.push('\n'),
            _ => plain.push(c),
        }
    }
    Some(plain)
}

/// A binary's audit on a terminal shows its progress: cubins and PTX done of the total, the
/// functions linted, the disassembly's throughput and the function being linted. With
/// `--quiet`, or when stderr is not a terminal, it shows none.
#[test]
fn progress_shows_on_a_terminal_only() {
    let Some(plain) = check_with_tools("progress", &["--format", "json", FATBIN]) else { return };
    assert!(!stderr(&plain).contains("cubins and PTX"), "{}", stderr(&plain));
    let Some(shown) = on_a_terminal("") else { return };
    // `2/3 cubins and PTX  50 functions, 0.4 MB/s  …spin_poll.fatbin[sm_90a:spin_poll.1.sm_90a.cubin]: poll_…`
    let full = shown.lines().any(|l| {
        let Some((_, message)) = l.split_once("/3 cubins and PTX  ") else { return false };
        let Some((count, rest)) = message.split_once(" function") else { return false };
        let Some((_, rest)) = rest.split_once(", ") else { return false };
        let Some((rate, rest)) = rest.split_once(" MB/s  ") else { return false };
        let Some((_, function)) = rest.split_once(".cubin]: ") else { return false };
        count.replace(',', "").parse::<u64>().is_ok()
            && rate.parse::<f64>().is_ok()
            && rest.contains("spin_poll.fatbin[sm_")
            && function.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
    });
    assert!(full, "{shown}");
    let Some(quiet) = on_a_terminal("--quiet") else { return };
    assert!(!quiet.contains("cubins and PTX"), "{quiet}");
}

#[test]
fn arch_selects_only_the_matching_cubins() {
    let Some(out) = check_with_tools("--arch", &["--arch", "sm_100", FATBIN]) else { return };
    let text = stdout(&out);
    let lines = finding_lines(&text, "spin-poll-without-acquire");
    assert!(!lines.is_empty(), "{text}");
    assert!(lines.iter().all(|l| l.contains("sm_100a")), "{text}");
    assert!(!text.contains("sm_90a"), "{text}");
}

/// cuobjdump extracts by partial name (`.sm_100` for `--arch sm_100`), and a binary whose own
/// name holds that text matches it in every entry: the extra cubins are dropped, not linted.
#[test]
fn arch_selects_by_architecture_not_by_the_binary_name() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kernels.sm_100.fatbin");
    fs::copy(repo().join(FATBIN), &path).unwrap();
    let path = path.to_str().unwrap();
    let Some(out) = check_with_tools("--arch by name", &["--arch", "sm_100", path]) else {
        return;
    };
    let text = stdout(&out);
    let lines = finding_lines(&text, "spin-poll-without-acquire");
    assert!(lines.iter().any(|l| l.contains("[sm_100a:kernels.sm_100.2.sm_100a.cubin]")), "{text}");
    assert!(lines.iter().any(|l| l.contains("[sm_100a:kernels.sm_100.1.sm_100a.ptx]")), "{text}");
    assert!(!text.contains("sm_90a"), "{text}");
}

#[test]
fn a_host_object_is_linted_through_its_fat_binary() {
    let Some(out) = check_with_tools("host object", &[OBJECT]) else { return };
    let text = stdout(&out);
    assert!(
        finding_lines(&text, "spin-poll-without-acquire")
            .iter()
            .any(|l| l.contains("[sm_80:spin_poll.1.sm_80.cubin]:poll_relaxed_fence_cta:")),
        "{text}"
    );
}

/// A whole application and the same code as a shared library
/// (`fixtures/kernels/objects/app.cu`, linked by the host compiler): each is linted through the
/// fat binary it embeds, its SASS and its PTX, and the kernel that fences after its poll is
/// clean at both levels.
#[test]
fn executables_and_shared_libraries_are_linted_through_their_fat_binaries() {
    for (binary, stem) in [(APP, "app"), (SHARED_LIBRARY, "libapp")] {
        let Some(out) = check_with_tools("executable and shared library", &[binary]) else {
            return;
        };
        let text = stdout(&out);
        assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
        let findings = finding_lines(&text, "spin-poll-without-acquire");
        let cubin = format!("{binary}[sm_90a:{stem}.1.sm_90a.cubin]:app_consume_relaxed:");
        let ptx = format!("{binary}[sm_90a:{stem}.1.sm_90a.ptx]:");
        assert!(findings.iter().any(|l| l.starts_with(&cubin)), "{text}");
        assert!(findings.iter().any(|l| l.starts_with(&ptx)), "{text}");
        // One finding at each level: the relaxed kernel's; the fenced kernel has none.
        assert_eq!(findings.len(), 2, "{text}");
        assert!(!text.contains("app_consume_fenced"), "{text}");
        assert!(stderr(&out).contains("4 functions: 2 errors, 0 warnings"), "{}", stderr(&out));
    }
}

#[test]
fn a_directory_of_binaries_is_linted() {
    let dir = tempfile::tempdir().unwrap();
    fs::copy(repo().join(CUBIN), dir.path().join("kernels.cubin")).unwrap();
    fs::write(dir.path().join("notes.txt"), "not an input\n").unwrap();
    let path = dir.path().to_str().unwrap();
    let Some(out) = check_with_tools("directory", &[path]) else { return };
    let text = stdout(&out);
    assert!(text.contains("kernels.cubin[sm_90a:"), "{text}");
    assert!(!text.contains("notes.txt"), "{text}");
}

#[test]
fn a_corrupt_cubin_is_an_input_error_and_other_inputs_are_linted() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = fs::read(repo().join(CUBIN)).unwrap();
    let path = dir.path().join("truncated.cubin");
    fs::write(&path, &bytes[..2000]).unwrap();
    let path = path.to_str().unwrap();
    let Some(out) = check_with_tools("corrupt cubin", &[path, PTX]) else { return };
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    let line = text.lines().find(|l| l.starts_with(path)).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("error[input-error]") && line.contains("nvdisasm"), "{line}");
    assert!(text.contains(&format!("{PTX}:")), "the PTX input was not linted:\n{text}");
}

/// Device variables and no code (`fixtures/kernels/objects/device_data.cu`): the cubins have
/// no code section and their listings no function. That is no input error, and a binary
/// with code beside it is still linted.
#[test]
fn cubins_without_code_are_linted_without_an_error() {
    let Some(out) = check_with_tools("device data", &[DEVICE_DATA, OBJECT]) else { return };
    let text = stdout(&out);
    assert!(!text.contains(DEVICE_DATA), "{text}");
    assert!(text.contains("[sm_80:spin_poll.1.sm_80.cubin]:poll_relaxed_fence_cta:"), "{text}");
    assert_eq!(out.status.code(), Some(1), "{text}");
    let Some(alone) = check_with_tools("device data alone", &[DEVICE_DATA]) else { return };
    assert_eq!(alone.status.code(), Some(0), "{}{}", stdout(&alone), stderr(&alone));
    assert!(stderr(&alone).contains("1 file, 0 functions: 0 errors"), "{}", stderr(&alone));
}

/// A static library (`ar` archive of `spin_poll.o` and `device_data.o`): each cubin and PTX
/// is named with the member that holds it, and the member without code is no error.
#[test]
fn a_static_library_is_linted_member_by_member() {
    let Some(out) = check_with_tools("static library", &[ARCHIVE]) else { return };
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}{}", stderr(&out));
    let cubin =
        format!("{ARCHIVE}(spin_poll.o)[sm_80:kernels.1.sm_80.cubin]:poll_relaxed_fence_cta:");
    let ptx = format!("{ARCHIVE}(spin_poll.o)[sm_120:kernels.1.sm_120.ptx]:");
    let findings = finding_lines(&text, "spin-poll-without-acquire");
    assert!(findings.iter().any(|l| l.starts_with(&cubin)), "{text}");
    assert!(findings.iter().any(|l| l.starts_with(&ptx)), "{text}");
    assert!(!text.contains("device_data.o") && !text.contains("input-error"), "{text}");
    // The same findings as the object alone, under the archive's labels.
    let Some(alone) = check_with_tools("the object alone", &[OBJECT]) else { return };
    let count = |t: &str| finding_lines(t, "spin-poll-without-acquire").len();
    assert_eq!(count(&text), count(&stdout(&alone)), "{text}");
}

#[test]
fn a_host_library_without_cuda_code_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libhost.so");
    // Any host ELF will do: the test program itself.
    fs::copy(std::env::current_exe().unwrap(), &path).unwrap();
    let path = path.to_str().unwrap();
    let Some(out) = check_with_tools("host library", &[path]) else { return };
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("no CUDA code found: cuobjdump listed no cubin or PTX"), "{text}");
}

/// An `ar` archive of one text member, written by hand: a static library with no CUDA code.
fn host_only_archive() -> Vec<u8> {
    let data = b"not device code\n";
    let mut bytes = b"!<arch>\n".to_vec();
    let header =
        format!("{:<16}{:<12}{:<6}{:<6}{:<8}{:<10}`\n", "notes.txt/", 0, 0, 0, 644, data.len());
    bytes.extend_from_slice(header.as_bytes());
    bytes.extend_from_slice(data);
    bytes
}

#[test]
fn a_static_library_without_cuda_code_is_reported_when_named_and_skipped_in_a_folder() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libhost.a");
    fs::write(&path, host_only_archive()).unwrap();
    let named = path.to_str().unwrap();
    let Some(out) = check_with_tools("host-only static library", &[named]) else { return };
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("no CUDA code found: cuobjdump listed no cubin or PTX"), "{text}");
    let folder = dir.path().to_str().unwrap();
    let Some(out) = check_with_tools("folder with a host-only static library", &[folder]) else {
        return;
    };
    assert_eq!(out.status.code(), Some(0), "{}{}", stdout(&out), stderr(&out));
    assert!(stdout(&out).is_empty(), "{}", stdout(&out));
}

/// A folder holding a fake `nvdisasm` script.
fn fake_tool(script: &str) -> tempfile::TempDir {
    fake_named("nvdisasm", script)
}

/// A folder holding a fake tool `name` that runs `script`.
fn fake_named(name: &str, script: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    dir
}

/// `check --format short --cuda-bin DIR INPUT...`.
fn check_with_fake(dir: &tempfile::TempDir, inputs: &[&str]) -> Output {
    let mut args = vec!["check", "--format", "short", "--cuda-bin", dir.path().to_str().unwrap()];
    args.extend_from_slice(inputs);
    fencelint(&args)
}

#[test]
fn a_tool_that_hangs_is_killed_at_the_timeout() {
    let dir = fake_tool("sleep 60");
    let bin = dir.path().to_str().unwrap();
    let started = Instant::now();
    let out = fencelint(&[
        "check",
        "--format",
        "short",
        "--cuda-bin",
        bin,
        "--tool-timeout",
        "1",
        CUBIN,
        PTX,
    ]);
    let text = stdout(&out);
    assert!(started.elapsed() < Duration::from_secs(30), "took {:?}", started.elapsed());
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("`nvdisasm` did not finish within 1s and was killed"), "{text}");
    assert!(text.contains("error[spin-poll-without-acquire]"), "other input not linted:\n{text}");
}

#[test]
fn a_tool_that_fails_reports_its_stderr() {
    let dir = fake_tool("echo 'nvdisasm fatal : simulated crash' >&2\nexit 3");
    let out = check_with_fake(&dir, &[CUBIN]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("exited with status 3: nvdisasm fatal : simulated crash"), "{text}");
}

/// A fake `cuobjdump` running `script`, where `PTX_FIXTURE` is the quoted path of the PTX
/// fixture.
fn fake_cuobjdump(script: &str) -> tempfile::TempDir {
    let ptx = format!("'{}'", repo().join(PTX).display());
    fake_named("cuobjdump", &script.replace("PTX_FIXTURE", &ptx))
}

/// The fake cuobjdumps below extract the PTX fixture as `k.1.sm_90.ptx`: its finding is there.
fn assert_fake_ptx_linted(text: &str) {
    let lines = finding_lines(text, "spin-poll-without-acquire");
    assert!(
        lines.iter().any(|l| l.contains("[sm_90:k.1.sm_90.ptx]")),
        "the extracted PTX was not linted:\n{text}"
    );
}

/// A cuobjdump that announces a cubin it does not write: the cubin is an error that names it,
/// and the PTX it did write is still linted.
#[test]
fn an_announced_file_that_was_not_extracted_is_reported() {
    let dir = fake_cuobjdump(
        "echo 'Extracting ELF file    1: k.1.sm_90.cubin'\n\
         echo 'Extracting PTX file and ptxas options    1: k.1.sm_90.ptx -arch=sm_90 '\n\
         cp PTX_FIXTURE k.1.sm_90.ptx",
    );
    let out = check_with_fake(&dir, &[FATBIN]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("`k.1.sm_90.cubin` could not be extracted from the binary"), "{text}");
    assert_fake_ptx_linted(&text);
}

/// A cuobjdump that refuses `-xelf` and `-xptx` in one run is asked once per kind.
#[test]
fn a_cuobjdump_that_refuses_both_kinds_at_once_is_asked_twice() {
    let dir = fake_cuobjdump(
        "case \"$*\" in\n\
         *-xelf*-xptx*) echo 'cuobjdump fatal : unexpected option' >&2; exit 1;;\n\
         *-xptx*) echo 'Extracting PTX file and ptxas options    1: k.1.sm_90.ptx -arch=sm_90'\n\
         cp PTX_FIXTURE k.1.sm_90.ptx;;\n\
         esac",
    );
    let out = check_with_fake(&dir, &[FATBIN]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert_fake_ptx_linted(&text);
}

#[test]
fn missing_tools_name_the_file_and_the_pip_command() {
    let empty = tempfile::tempdir().unwrap();
    let out = fencelint(&[
        "check",
        "--format",
        "short",
        "--cuda-bin",
        empty.path().to_str().unwrap(),
        FATBIN,
        PTX,
    ]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    let line = text.lines().find(|l| l.starts_with(FATBIN)).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("error[input-error]") && line.contains(INSTALL), "{line}");
    assert!(text.contains("error[spin-poll-without-acquire]"), "other input not linted:\n{text}");
}

#[test]
fn a_text_file_named_so_is_not_a_binary() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libfake.so");
    fs::write(&path, "this is not a library\n").unwrap();
    let path = path.to_str().unwrap();
    let out = fencelint(&["check", "--format", "short", path, PTX]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    let line = text.lines().find(|l| l.starts_with(path)).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("error[input-error]") && line.contains("not recognised"), "{line}");
    assert!(text.contains("error[spin-poll-without-acquire]"), "{text}");
}

#[test]
fn a_bad_arch_is_refused() {
    let out = fencelint(&["check", "--arch", "hopper", CUBIN]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("`--arch hopper` is not an architecture"), "{}", stderr(&out));
}

/// A `-lineinfo` cubin's own PTX is lowered for the pair rules and dropped once the cubin is
/// linted; a parse error in it is still reported, once, naming the PTX of that cubin, and the
/// cubin's findings are reported as well.
#[test]
fn a_parse_error_in_a_cubins_own_ptx_is_reported() {
    let original = fs::read(repo().join("fixtures/compiled/sm_90a/spin_poll.cubin")).unwrap();
    // One byte of the embedded PTX changed, the length kept: a `;` ends no statement.
    let needle = b"ld.param.u64";
    let at = original.windows(needle.len()).position(|w| w == needle).expect("PTX in the cubin");
    let end = at + original[at..].iter().position(|&b| b == b';').unwrap();
    let mut broken = original.clone();
    broken[end] = b'#';
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("broken_ptx.sm_90a.cubin");
    fs::write(&path, broken).unwrap();
    let Some(out) = check_with_tools("own PTX", &[path.to_str().unwrap()]) else { return };
    let text = stdout(&out);
    let errors: Vec<&str> = text.lines().filter(|l| l.contains("[parse-error]")).collect();
    assert_eq!(errors.len(), 1, "{text}");
    let (cubin, error) = errors[0].split_once("]:.nv_debug_ptx_txt:").expect("the cubin's PTX");
    assert!(cubin.contains("[sm_90a:broken_ptx."), "{text}");
    assert!(error.contains("found `#`"), "{text}");
    assert!(!finding_lines(&text, "spin-poll-without-acquire").is_empty(), "{text}");
    assert_eq!(out.status.code(), Some(2), "{text}");
}

#[test]
fn a_lineinfo_cubin_alone_is_audited_for_reordering() {
    let hoisted = "fixtures/reorder/reorder_tensormap.ptxas-13.2.78.cubin";
    let Some(out) = check_with_tools("reorder", &["--format", "json", hoisted]) else { return };
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
    let found: Vec<_> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["rule"] == "ptxas-reordered-across-wait")
        .collect();
    assert_eq!(found.len(), 4, "{doc:#}");
    for d in &found {
        assert!(
            d["message"].as_str().unwrap().starts_with("ptxas 13.2.78 moved the store"),
            "{d:#}"
        );
        // The PTX labels point into the PTX that the cubin carries.
        let text = d.to_string();
        assert!(text.contains(".nv_debug_ptx_txt"), "{d:#}");
    }
    assert_eq!(out.status.code(), Some(1));

    let kept = "fixtures/reorder/reorder_tensormap.ptxas-13.5.37.cubin";
    let Some(out) = check_with_tools("reorder", &[kept]) else { return };
    assert!(finding_lines(&stdout(&out), "ptxas-reordered-across-wait").is_empty());
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    let Some(out) =
        check_with_tools("reorder", &["--ignore", "ptxas-reordered-across-wait", hoisted])
    else {
        return;
    };
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn the_compiled_fixture_corpus_has_no_reorder_finding() {
    let args = ["--select", "ptxas-reordered-across-wait", "fixtures/compiled"];
    let Some(out) = check_with_tools("corpus", &args) else { return };
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

/// `grid.sync()` polls inside CUDA's cooperative-groups headers, inlined three deep into
/// `grid_sync.cu` (and once more through the project's `grid_sync.cuh`). With the call sites
/// in the line info (PTX `.loc ..., inlined_at`, `nvdisasm -gi`, and a cubin, which fencelint
/// disassembles with `-gi`), the short output points at the innermost call site in the
/// project and the JSON source lists every call site out to the kernel's line; `-g` alone
/// names only the header line.
#[test]
fn inlined_code_is_reported_at_the_projects_call_site() {
    const STEM: &str = "fixtures/compiled/sm_90a/grid_sync";
    // The `grid.sync()` lines: the kernel's own, and the project header's helper.
    let expected = ["fixtures/kernels/grid_sync.cu:25:", "fixtures/kernels/grid_sync.cuh:8:"];
    let sources = |args: &[&str]| -> Option<Vec<String>> {
        let mut all = vec!["--select", "acquire-in-poll-loop"];
        all.extend_from_slice(args);
        let out = check_with_tools("inlined call sites", &all)?;
        Some(
            finding_lines(&stdout(&out), "acquire-in-poll-loop")
                .iter()
                .map(|l| (*l).to_owned())
                .collect(),
        )
    };
    for input in ["ptx", "nvdisasm-gi.sass", "cubin"] {
        let path = format!("{STEM}.{input}");
        let Some(lines) = sources(&["--format", "short", &path]) else { return };
        assert_eq!(lines.len(), 2, "{input}: {lines:?}");
        for place in expected {
            assert!(lines.iter().any(|l| l.starts_with(place)), "{input}: {place} in {lines:?}");
        }
        let Some(out) = check_with_tools("inlined call sites", &["--format", "json", &path]) else {
            return;
        };
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("json");
        for d in doc["diagnostics"].as_array().unwrap() {
            let source = &d["source"];
            assert!(
                source["file"].as_str().unwrap().ends_with("cooperative_groups/details/sync.h")
            );
            let sites = source["inlined_at"].as_array().expect("call sites");
            assert!(sites.len() >= 3, "{input}: {source:#}");
            assert_eq!(
                sites.last().unwrap()["file"],
                "fixtures/kernels/grid_sync.cu",
                "{source:#}"
            );
            assert!(sites.iter().all(|site| site.get("inlined_at").is_none()));
        }
    }
    // `nvdisasm -g` prints the innermost line only: the header's.
    let Some(lines) = sources(&["--format", "short", &format!("{STEM}.nvdisasm.sass")]) else {
        return;
    };
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines.iter().all(|l| l.starts_with("cuda/include/cooperative_groups/details/sync.h:")));
}
