//! End-to-end tests of the `fencelint` program: exit codes, formats, and bad inputs.

use std::fs;
use std::path::Path;
use std::process::Command;

mod common;

use common::{fencelint, repo, stderr, stdout};

const BAD: &str = "fixtures/ptx/spin-poll-without-acquire/relaxed_poll.ptx";
const GOOD: &str = "fixtures/ptx/spin-poll-without-acquire/clean_acquire_poll.ptx";

#[test]
fn findings_exit_1_and_clean_exit_0() {
    let bad = fencelint(&["check", "--format", "short", BAD]);
    assert_eq!(bad.status.code(), Some(1), "{}", stderr(&bad));
    assert!(stdout(&bad).contains("relaxed_poll.ptx:19:5: error[spin-poll-without-acquire]"));
    // The acquire poll is correct; only the perf rule `acquire-in-poll-loop` has a word on it.
    let good =
        fencelint(&["check", "--format", "short", "--select", "spin-poll-without-acquire", GOOD]);
    assert_eq!(good.status.code(), Some(0), "{}", stderr(&good));
    assert_eq!(stdout(&good), "");
}

#[test]
fn fail_level_error_ignores_warnings_and_never_ignores_all() {
    // GOOD has only a perf warning (`acquire-in-poll-loop`), BAD an error.
    let warning = fencelint(&["check", "--format", "short", GOOD]);
    assert_eq!(warning.status.code(), Some(1), "{}", stdout(&warning));
    assert!(stdout(&warning).contains("warning[acquire-in-poll-loop]"));
    let error_level = fencelint(&["check", "--fail-level", "error", GOOD]);
    assert_eq!(error_level.status.code(), Some(0));
    let bad_error_level = fencelint(&["check", "--fail-level", "error", BAD]);
    assert_eq!(bad_error_level.status.code(), Some(1));
    let never = fencelint(&["check", "--fail-level", "never", BAD]);
    assert_eq!(never.status.code(), Some(0));
}

/// `--sort severity` puts errors before warnings whatever the order of the files; by default
/// the findings follow the files.
#[test]
fn sort_severity_puts_the_worst_first() {
    let severities = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["check", "--format", "short"];
        all.extend_from_slice(args);
        // GOOD has only a warning, BAD errors; GOOD comes first.
        all.extend([GOOD, BAD]);
        let text = stdout(&fencelint(&all));
        text.lines()
            .map(|l| l.split(": ").nth(1).unwrap().split('[').next().unwrap().to_owned())
            .collect()
    };
    let by_place = severities(&[]);
    assert_eq!(by_place, severities(&["--sort", "location"]));
    assert_eq!(by_place.first().map(String::as_str), Some("warning"), "{by_place:?}");
    let worst_first = severities(&["--sort", "severity"]);
    let mut expected = by_place.clone();
    expected.sort_by_key(|s| s != "error");
    assert_eq!(worst_first, expected);
    assert_ne!(worst_first, by_place);
}

#[test]
fn json_document_has_version_and_required_fields() {
    let out = fencelint(&["check", "--format", "json", BAD]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("valid JSON");
    assert_eq!(doc["version"], 1);
    let d = &doc["diagnostics"][0];
    assert_eq!(d["rule"], "spin-poll-without-acquire");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["kernel"], "k");
    assert_eq!(d["dialect"], "ptx");
    assert_eq!(d["span"]["line"], 19);
    assert_eq!(d["span"]["column"], 5);
    assert!(d["span"]["start"].as_u64().unwrap() < d["span"]["end"].as_u64().unwrap());
    assert!(d["message"].as_str().unwrap().contains("ld.relaxed.gpu.global.u32"));
    assert_eq!(d["related"].as_array().unwrap().len(), 2);
}

#[test]
fn rich_output_shows_the_snippet_and_both_labels() {
    let out = fencelint(&["check", "--format", "rich", "--color", "never", BAD]);
    let text = stdout(&out);
    assert!(text.contains("error[spin-poll-without-acquire]"), "{text}");
    assert!(text.contains("the flag is polled here with a relaxed load"), "{text}");
    assert!(text.contains("this read is not ordered after the flag"), "{text}");
    assert!(text.contains("help: insert `fence.acq_rel.gpu;`"), "{text}");
}

#[test]
fn output_is_identical_whatever_the_thread_count() {
    let run = |threads: &str| {
        Command::new(env!("CARGO_BIN_EXE_fencelint"))
            .args(["check", "--format", "json", "fixtures/compiled", "fixtures/ptx"])
            .env("RAYON_NUM_THREADS", threads)
            .current_dir(repo())
            .output()
            .unwrap()
            .stdout
    };
    assert_eq!(run("1"), run("4"));
}

#[test]
fn rules_and_explain() {
    let rules = fencelint(&["rules"]);
    assert!(stdout(&rules).contains("spin-poll-without-acquire"));
    let explain = fencelint(&["explain", "spin-poll-without-acquire"]);
    assert!(stdout(&explain).starts_with("# spin-poll-without-acquire"));
    let unknown = fencelint(&["explain", "no-such-rule"]);
    assert_eq!(unknown.status.code(), Some(2));
    let bad_select = fencelint(&["check", "--select", "no-such-rule", BAD]);
    assert_eq!(bad_select.status.code(), Some(2));
    assert!(stderr(&bad_select).contains("unknown rule or category `no-such-rule`"));
}

/// `fencelint rules` is a table: every column starts where its header starts, whatever the
/// length of the category or level before it (`perf` and `correctness` alike).
#[test]
fn rules_table_columns_line_up() {
    let text = stdout(&fencelint(&["rules"]));
    let mut lines = text.lines();
    let header = lines.next().unwrap();
    let columns: Vec<usize> =
        ["category", "default", "dialects"].iter().map(|c| header.find(c).unwrap()).collect();
    let mut rows = 0;
    for line in lines {
        for &at in &columns {
            let before = &line[..at];
            assert!(before.ends_with(' ') && !line[at..].starts_with(' '), "`{line}`");
        }
        rows += 1;
    }
    assert!(rows >= 12, "{text}");
}

/// Each bad input gets an error naming the file and a location, exit code 2, and the good
/// input given alongside is still linted.
fn bad_input(name: &str, bytes: &[u8], expected: &str) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    fs::write(&path, bytes).unwrap();
    let path = path.to_str().unwrap();
    let bad = repo().join(BAD);
    let out = fencelint(&["check", "--format", "short", path, bad.to_str().unwrap()]);
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{name}: {text}{}", stderr(&out));
    let line =
        text.lines().find(|l| l.starts_with(path)).unwrap_or_else(|| panic!("{name}: {text}"));
    assert!(line.contains(expected), "{name}: `{line}` should contain `{expected}`");
    let location = &line[path.len()..];
    assert!(location.starts_with(':'), "{name}: no line:col in `{line}`");
    assert!(
        text.contains("error[spin-poll-without-acquire]"),
        "{name}: other input not linted\n{text}"
    );
}

#[test]
fn empty_file() {
    bad_input("empty.ptx", b"", "empty file");
}

#[test]
fn binary_garbage_with_a_ptx_name() {
    let garbage: Vec<u8> =
        (0..4096u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    bad_input("garbage.ptx", &garbage, "binary data");
}

#[test]
fn non_utf8_bytes_in_a_comment_are_reported_and_the_rest_is_linted() {
    let mut text = fs::read(repo().join(BAD)).unwrap();
    let at = text.windows(2).position(|w| w == b"//").unwrap() + 2;
    text.splice(at..at, [0xff, 0xfe]);
    bad_input("latin1.ptx", &text, "invalid UTF-8");
}

#[test]
fn truncated_ptx() {
    let text = fs::read_to_string(repo().join(BAD)).unwrap();
    let cut = text.find("setp.eq").unwrap() + 4;
    bad_input("truncated.ptx", &text.as_bytes()[..cut], "parse-error");
}

#[test]
fn unbalanced_braces() {
    let text = fs::read_to_string(repo().join(GOOD)).unwrap().replacen('{', "{ {", 2);
    bad_input("braces.ptx", text.as_bytes(), "parse-error");
}

#[test]
fn a_fifty_megabyte_single_line() {
    let mut text = b".version 8.5\n.target sm_90a\n.address_size 64\n".to_vec();
    let statement: &[u8] = b"ld.global.u32 %r1, [%rd1+4]; ] ";
    while text.len() < 50 << 20 {
        text.extend(statement);
    }
    let started = std::time::Instant::now();
    bad_input("long.ptx", &text, "parse-error");
    assert!(started.elapsed().as_secs() < 60, "took {:?}", started.elapsed());
}

#[test]
fn a_missing_file_is_reported_and_others_are_linted() {
    let out = fencelint(&["check", "--format", "short", "does/not/exist.ptx", BAD]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stdout(&out).contains("does/not/exist.ptx:1:1: error[input-error]: cannot read"));
    assert!(stdout(&out).contains("error[spin-poll-without-acquire]"));
}

/// A listing above the streaming threshold is linted function by function, through a memory
/// map (text) or as it is read (JSON, or any listing with `FENCELINT_NO_MAP`); the findings,
/// their lines, columns and byte offsets are those of the whole-file path either way.
#[test]
fn a_streamed_listing_reports_what_the_whole_file_path_reports() {
    for listing in [
        "fixtures/compiled/sm_90a/spin_poll.cuobjdump.sass",
        "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass",
        "fixtures/compiled/sm_100a/tcgen05.nvdisasm-gp.sass",
        "fixtures/compiled/sm_90a/tma.nvdisasm.sass",
        "fixtures/compiled/sm_120/spin_poll.nvdisasm.json",
        "fixtures/compiled/sm_100a/tcgen05.nvdisasm.json",
        "fixtures/compiled/sm_120/jump_table.nvdisasm.json",
        "fixtures/compiled/sm_120/noinline_poll.nvdisasm.json",
    ] {
        let args = ["check", "--format", "json", "--locations", "input", listing];
        let whole = common::command(&args).output().unwrap();
        let streamed = common::command(&args).env("FENCELINT_STREAM_MIN", "1").output().unwrap();
        let read = common::command(&args)
            .env("FENCELINT_STREAM_MIN", "1")
            .env("FENCELINT_NO_MAP", "1")
            .output()
            .unwrap();
        let json = |out: &std::process::Output| -> serde_json::Value {
            let mut doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
            doc.as_object_mut().unwrap().remove("elapsed_ms");
            doc
        };
        let (a, b) = (json(&whole), json(&streamed));
        let rules: Vec<&str> = a["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| d["rule"].as_str().unwrap())
            .collect();
        assert!(rules.iter().any(|r| !r.ends_with("-error")), "{listing}: {rules:?}");
        assert_eq!(a["diagnostics"], b["diagnostics"], "{listing}");
        assert_eq!(a["diagnostics"], json(&read)["diagnostics"], "{listing} read");
        assert_eq!(whole.status.code(), streamed.status.code());
        assert_eq!(whole.status.code(), read.status.code());
    }
}

/// A streamed listing of a `-rdc` cubin follows calls of other functions by name, as the
/// whole-file path does: the same findings at the same places (lines, columns, byte offsets),
/// with the same owners. A hazard wholly inside a called function that it shows alone is its
/// own finding either way, not the calling kernel's (as for a cubin's called functions,
/// docs/binaries.md). The text listings are mapped, the JSON listing read as a stream; with no
/// budget, each of the eight callers says its calls were not followed.
#[test]
fn a_streamed_listing_follows_calls_of_other_functions() {
    // (rule, message, the spans of the primary and the related labels)
    type Key = (String, String, Vec<serde_json::Value>);
    let findings = |out: &std::process::Output| -> Vec<(Key, String)> {
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut found: Vec<(Key, String)> = doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let related = d["related"].as_array().into_iter().flatten();
                let spans = std::iter::once(&d["span"]).chain(related.map(|r| &r["span"]));
                let text = |key: &str| d[key].as_str().unwrap_or_default().to_owned();
                ((text("rule"), text("message"), spans.cloned().collect()), text("kernel"))
            })
            .collect();
        found.sort_by(|a, b| a.0.0.cmp(&b.0.0).then(a.0.1.cmp(&b.0.1)).then(a.1.cmp(&b.1)));
        found
    };
    let listings = ["sm_80", "sm_90a", "sm_100a", "sm_120"]
        .map(|arch| format!("fixtures/compiled/{arch}/noinline_poll.rdc.nvdisasm.sass"));
    // nvdisasm JSON is streamed as it is read, keeping every function up to the budget.
    let json = "fixtures/compiled/sm_120/noinline_poll.rdc.nvdisasm.json".to_owned();
    for listing in listings.iter().chain([&json]) {
        let args = ["check", "--format", "json", "--select", "all", listing];
        let whole = findings(&common::command(&args).output().unwrap());
        let streamed =
            findings(&common::command(&args).env("FENCELINT_STREAM_MIN", "1").output().unwrap());
        let keys = |found: &[(Key, String)]| {
            let mut keys: Vec<String> =
                found.iter().map(|(key, _)| serde_json::to_string(key).unwrap()).collect();
            keys.sort();
            keys
        };
        assert_eq!(keys(&streamed), keys(&whole), "{listing}");
        // Five kernels' findings and one of a called function's copy that no kernel calls.
        assert_eq!(whole.len(), 6, "{listing}: {whole:?}");
        let owners = |found: &[(Key, String)]| {
            let mut owners: Vec<String> = found.iter().map(|(_, kernel)| kernel.clone()).collect();
            owners.sort();
            owners
        };
        assert_eq!(owners(&streamed), owners(&whole), "{listing}: {streamed:?}");
        // `call_wait_and_read_twice` reaches the hazard of `wait_relaxed_and_read`'s copy `$1`
        // through its calls: the copy owns it.
        let owns = |name: &str| whole.iter().filter(|(_, kernel)| kernel == name).count();
        assert_eq!(owns("call_wait_and_read_twice"), 0, "{listing}: {whole:?}");
        let copy = "wait_relaxed_and_read(unsigned int const*, float const*)$1";
        assert_eq!(owns(copy), 1, "{listing}: {whole:?}");
        let no_budget = common::command(&args)
            .env("FENCELINT_STREAM_MIN", "1")
            .env("FENCELINT_LINKED_BUDGET", "0")
            .output()
            .unwrap();
        let incomplete = findings(&no_budget)
            .into_iter()
            .filter(|((rule, _, _), _)| rule == "analysis-incomplete")
            .count();
        assert_eq!(incomplete, 8, "{listing}");
    }
}

/// A streamed listing whose functions call one another in a chain (each calls the next and the
/// first) would lint the listing once per function; a budget of text bounds that, and each
/// function left out says so. (Hand-written nvdisasm text: 100 functions of seven lines.)
#[test]
fn a_chain_of_calls_in_a_streamed_listing_is_bounded() {
    use std::fmt::Write as _;
    let dir = tempfile::tempdir().unwrap();
    let count = 100;
    let mut text = String::from("\t.target\tsm_90a\n\n");
    for i in 0..count {
        let next = if i + 1 < count {
            format!("        /*0030*/                   CALL.ABS.NOINC `(f{}) ;\n", i + 1)
        } else {
            "        /*0030*/                   NOP ;\n".to_owned()
        };
        write!(
            text,
            "//--------------------- .text.f{i} --------------------------\n\
             \t.section\t.text.f{i},\"ax\",@progbits\n.text.f{i}:\nf{i}:\n\
             \x20       /*0000*/                   LDG.E.STRONG.GPU R4, desc[UR4][R4.64] ;\n\
             \x20       /*0010*/                   ISETP.NE.AND P0, PT, R4, RZ, PT ;\n\
             \x20       /*0020*/              @P0 BRA `(.L_x_{i}) ;\n{next}\
             \x20       /*0040*/                   CALL.ABS.NOINC `(f0) ;\n.L_x_{i}:\n\
             \x20       /*0050*/                   LDG.E R6, desc[UR4][R8.64] ;\n\
             \x20       /*0060*/                   RET.ABS.NODEC R20 0x0 ;\n\n"
        )
        .unwrap();
    }
    let path = dir.path().join("chain.sass");
    fs::write(&path, &text).unwrap();
    let args = ["check", "--format", "short", path.to_str().unwrap()];
    let left_out = |budget: Option<&str>| -> Vec<String> {
        let mut command = common::command(&args);
        command.env("FENCELINT_STREAM_MIN", "1");
        if let Some(budget) = budget {
            command.env("FENCELINT_LINKED_BUDGET", budget);
        }
        let out = command.output().unwrap();
        assert_ne!(out.status.code(), Some(2), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .filter(|l| l.contains("warning[analysis-incomplete]"))
            .map(|l| l.split('`').nth(1).unwrap_or_default().to_owned())
            .collect()
    };
    // Each function's closure is the whole chain: 100 times the listing, within 64 MiB.
    assert_eq!(left_out(None), Vec::<String>::new());
    // With room for about 10 closures, the first functions in the file are linted with theirs.
    let budget = (10 * text.len()).to_string();
    let names = left_out(Some(&budget));
    assert!((80..=92).contains(&names.len()), "{} left out: {names:?}", names.len());
    let first: usize = names[0].trim_start_matches('f').parse().unwrap();
    let expected: Vec<String> = (first..count).map(|i| format!("f{i}")).collect();
    assert_eq!(names, expected);
}

/// nvdisasm writes its JSON on one line; the same document spread over many lines (as a JSON
/// formatter writes it) is streamed with the lines and columns the whole-file path gives.
#[test]
fn a_streamed_multiline_json_listing_keeps_its_lines_and_columns() {
    let dir = tempfile::tempdir().unwrap();
    let text = fs::read_to_string(repo().join("fixtures/compiled/sm_120/spin_poll.nvdisasm.json"))
        .unwrap();
    let value: serde_json::Value = serde_json::from_str(&text).unwrap();
    let path = dir.path().join("pretty.json");
    fs::write(&path, serde_json::to_string_pretty(&value).unwrap()).unwrap();
    let args = ["check", "--format", "short", path.to_str().unwrap()];
    let whole = common::command(&args).output().unwrap();
    let streamed = common::command(&args).env("FENCELINT_STREAM_MIN", "1").output().unwrap();
    let findings = |out: &std::process::Output| -> Vec<String> {
        stdout(out).lines().filter(|l| l.contains(": error[")).map(str::to_owned).collect()
    };
    let (a, b) = (findings(&whole), findings(&streamed));
    assert!(a.iter().any(|l| l.contains("spin-poll-without-acquire")), "{a:?}");
    assert!(a.iter().all(|l| !l.contains(":1:")), "the findings are below line 1: {a:?}");
    assert_eq!(a, b);
}

/// A listing behind a byte-order mark is linted like the same listing without one, read whole
/// or streamed, with the same positions (streamed, nvdisasm JSON used to give no function and
/// no error; read whole, a text listing got a parse error on its first line).
#[test]
fn a_listing_behind_a_byte_order_mark() {
    let dir = tempfile::tempdir().unwrap();
    for listing in [
        "fixtures/compiled/sm_120/spin_poll.nvdisasm.json",
        "fixtures/compiled/sm_90a/spin_poll.cuobjdump.sass",
    ] {
        let mut bytes = b"\xef\xbb\xbf".to_vec();
        bytes.extend(fs::read(repo().join(listing)).unwrap());
        let path = dir.path().join(Path::new(listing).file_name().unwrap());
        fs::write(&path, bytes).unwrap();
        let args = ["check", "--format", "short", path.to_str().unwrap()];
        let findings = |out: std::process::Output| -> Vec<String> {
            stdout(&out).lines().filter(|l| l.contains(": error[")).map(str::to_owned).collect()
        };
        let whole = findings(common::command(&args).output().unwrap());
        assert!(whole.iter().any(|l| l.contains("spin-poll-without-acquire")), "{whole:?}");
        assert!(whole.iter().all(|l| !l.contains("parse-error")), "{listing}: {whole:?}");
        for no_map in [false, true] {
            let mut command = common::command(&args);
            command.env("FENCELINT_STREAM_MIN", "1");
            if no_map {
                command.env("FENCELINT_NO_MAP", "1");
            }
            let streamed = findings(command.output().unwrap());
            assert_eq!(streamed, whole, "{listing}, FENCELINT_NO_MAP: {no_map}");
        }
    }
}

/// Bytes that are not UTF-8 in a streamed listing are reported like in a file read whole.
#[test]
fn a_streamed_listing_reports_invalid_utf8() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes =
        fs::read(repo().join("fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass")).unwrap();
    let at = bytes.windows(4).position(|w| w == b"LDG.").unwrap();
    bytes.insert(at + 2, 0xff);
    let path = dir.path().join("k.sass");
    fs::write(&path, bytes).unwrap();
    let out = common::command(&["check", "--format", "short", path.to_str().unwrap()])
        .env("FENCELINT_STREAM_MIN", "1")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(2), "{text}");
    assert!(text.contains("error[input-error]: invalid UTF-8"), "{text}");
}

/// A mapped listing is linted while it is still being cut; bytes that are not UTF-8 near its
/// end, found after the first functions were linted, send the whole file down the streaming
/// path: every finding is reported once, as when the file is streamed from the start.
#[test]
fn invalid_utf8_past_the_first_piece_of_a_mapped_listing() {
    let dir = tempfile::tempdir().unwrap();
    let one = fs::read(repo().join("fixtures/compiled/sm_90a/spin_poll.cuobjdump.sass")).unwrap();
    // Past the 4 MiB piece that the cut checks at a time.
    let copies = (5 << 20) / one.len() + 1;
    let mut bytes = one.repeat(copies);
    let last = bytes.len() - one.len();
    // Inside the last copy's first function name: the byte changes no finding there.
    let header = b"Function : ";
    let at = last + bytes[last..].windows(header.len()).position(|w| w == header).unwrap();
    bytes.insert(at + header.len() + 2, 0xff);
    let path = dir.path().join("k.sass");
    fs::write(&path, &bytes).unwrap();
    let run = |no_map: bool| {
        let mut command = common::command(&["check", "--format", "short", path.to_str().unwrap()]);
        command.env("FENCELINT_STREAM_MIN", "1");
        if no_map {
            command.env("FENCELINT_NO_MAP", "1");
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
        stdout(&out)
    };
    let (mapped, streamed) = (run(false), run(true));
    assert!(mapped.contains("error[input-error]: invalid UTF-8"), "{mapped}");
    let polls = |text: &str| text.matches("error[spin-poll-without-acquire]").count();
    let in_one = polls(&run_one(&repo().join("fixtures/compiled/sm_90a/spin_poll.cuobjdump.sass")));
    assert!(in_one > 0);
    assert_eq!(polls(&mapped), in_one * copies, "{mapped}");
    assert_eq!(mapped, streamed);
}

/// The short output of `check` on one file.
fn run_one(path: &Path) -> String {
    stdout(&fencelint(&["check", "--format", "short", path.to_str().unwrap()]))
}

/// Runs `fencelint check --format json ARGS /dev/stdin` with `input` written to a pipe.
fn check_piped(args: &[&str], input: Vec<u8>) -> std::process::Output {
    check_piped_as("/dev/stdin", &[], args, input)
}

/// Runs `fencelint check --format json ARGS PATH`, `PATH` being `-` or `/dev/stdin`, with
/// `input` written to a pipe on standard input and `env` set.
fn check_piped_as(
    path: &str,
    env: &[(&str, &str)],
    args: &[&str],
    input: Vec<u8>,
) -> std::process::Output {
    use std::io::Write;
    let mut child = common::command(&["check", "--format", "json"])
        .args(args)
        .arg(path)
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run fencelint");
    let mut pipe = child.stdin.take().expect("stdin is piped");
    let writer = std::thread::spawn(move || {
        let _ = pipe.write_all(&input);
    });
    let output = child.wait_with_output().expect("wait for fencelint");
    writer.join().expect("writer thread");
    output
}

/// What `--format json` reported, as (rule, line, column) triples.
fn findings(output: &std::process::Output) -> Vec<(String, u64, u64)> {
    let doc: serde_json::Value = serde_json::from_str(&stdout(output)).expect("valid JSON");
    doc["diagnostics"]
        .as_array()
        .expect("diagnostics")
        .iter()
        .map(|d| {
            let rule = d["rule"].as_str().unwrap_or_default().to_owned();
            (
                rule,
                d["span"]["line"].as_u64().unwrap_or(0),
                d["span"]["column"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

/// A listing read from a pipe (under the streaming size) is linted whole: the check for a
/// binary's magic bytes once read the pipe's first eight bytes and the text was linted without
/// them.
#[test]
fn a_listing_from_a_pipe_is_read_whole() {
    for path in [
        "fixtures/compiled/sm_90a/spin_poll.cuobjdump.sass",
        "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass",
        "fixtures/compiled/sm_90a/spin_poll.ptx",
    ] {
        let by_path = fencelint(&["check", "--format", "json", path]);
        let text = fs::read(repo().join(path)).expect("fixture");
        let piped = check_piped(&[], text);
        assert_eq!(piped.status.code(), by_path.status.code(), "{path}: {}", stderr(&piped));
        let expected = findings(&by_path);
        assert!(!expected.is_empty(), "{path}: the fixture has findings");
        assert_eq!(findings(&piped), expected, "{path}");
    }
    // A binary cannot be disassembled from a pipe: exit 2, and the message says what to do.
    let cubin = fs::read(repo().join("fixtures/compiled/sm_90a/spin_poll.cubin")).expect("fixture");
    let piped = check_piped(&[], cubin);
    assert_eq!(piped.status.code(), Some(2), "{}", stdout(&piped));
    assert!(stdout(&piped).contains("binaries are disassembled from a file: pass its path"));
}

/// `-` names standard input: the same findings as the file, under the name `<stdin>` or the
/// one `--stdin-filename` gives; a binary piped in is an input error that says to pass its path.
#[test]
fn a_dash_reads_standard_input() {
    for path in [
        "fixtures/compiled/sm_90a/spin_poll.cuobjdump.sass",
        "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass",
        "fixtures/compiled/sm_90a/wgmma.nvdisasm.json",
        "fixtures/compiled/sm_90a/spin_poll.ptx",
    ] {
        let by_path = fencelint(&["check", "--format", "json", path]);
        let text = fs::read(repo().join(path)).expect("fixture");
        let piped = check_piped_as("-", &[], &[], text);
        assert_eq!(piped.status.code(), by_path.status.code(), "{path}: {}", stderr(&piped));
        let expected = findings(&by_path);
        assert!(!expected.is_empty(), "{path}: the fixture has findings");
        assert_eq!(findings(&piped), expected, "{path}");
        let doc: serde_json::Value = serde_json::from_slice(&piped.stdout).unwrap();
        assert_eq!(doc["diagnostics"][0]["file"], "<stdin>", "{path}");
        let text = fs::read(repo().join(path)).expect("fixture");
        let named = check_piped_as("-", &[], &["--stdin-filename", "build/k.sass"], text);
        let doc: serde_json::Value = serde_json::from_slice(&named.stdout).unwrap();
        assert_eq!(doc["diagnostics"][0]["file"], "build/k.sass", "{path}");
    }
    let cubin = fs::read(repo().join("fixtures/compiled/sm_90a/spin_poll.cubin")).expect("fixture");
    let piped = check_piped_as("-", &[], &[], cubin);
    assert_eq!(piped.status.code(), Some(2), "{}", stdout(&piped));
    assert!(stdout(&piped).contains("binaries are disassembled from a file: pass its path"));
    // Standard input and a file in one run: both are linted.
    let text = fs::read(repo().join(BAD)).expect("fixture");
    let both = check_piped_as("-", &[], &[GOOD], text);
    assert_eq!(both.status.code(), Some(1), "{}", stderr(&both));
    assert!(stderr(&both).contains("2 files"), "{}", stderr(&both));
}

/// A listing piped in from the streaming size on is linted as it is read, function by
/// function, and calls by name are followed as in a streamed file: the callable functions and
/// the callers are kept (up to the budget) and the callers linted again with their callees.
/// With no budget, every caller says its calls were not followed.
#[test]
fn a_long_listing_from_a_pipe_is_streamed_and_follows_calls() {
    let streamed = [("FENCELINT_STREAM_MIN", "1")];
    let no_budget = [("FENCELINT_STREAM_MIN", "1"), ("FENCELINT_LINKED_BUDGET", "0")];
    // Everything a finding says but the file's name.
    let comparable = |out: &std::process::Output| -> Vec<String> {
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut found: Vec<String> = doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let mut d = d.clone();
                d.as_object_mut().unwrap().remove("file");
                for related in d["related"].as_array_mut().into_iter().flatten() {
                    related.as_object_mut().unwrap().remove("file");
                }
                d.to_string()
            })
            .collect();
        found.sort();
        found
    };
    for arch in ["sm_80", "sm_90a", "sm_100a", "sm_120"] {
        let listing = format!("fixtures/compiled/{arch}/noinline_poll.rdc.nvdisasm.sass");
        let text = fs::read(repo().join(&listing)).expect("fixture");
        let args = ["--select", "all"];
        let file = |env: &[(&str, &str)]| {
            let mut command = common::command(&["check", "--format", "json", "--select", "all"]);
            command.arg(&listing).envs(env.iter().copied()).output().unwrap()
        };
        let expected = comparable(&file(&streamed));
        let piped = check_piped_as("-", &streamed, &args, text.clone());
        assert_eq!(comparable(&piped), expected, "{arch}: {}", stderr(&piped));
        // The streamed findings are those of the file read whole: a called function's own
        // hazard is its own; the callers' findings through their callees are there.
        assert_eq!(expected, comparable(&file(&[])), "{arch}");
        assert_eq!(expected.len(), 6, "{arch}");
        // With no budget, the file's callers say the budget was spent and the pipe's that their
        // text was not kept; else the same.
        let piped = comparable(&check_piped_as("-", &no_budget, &args, text));
        let expected = comparable(&file(&no_budget));
        let why = |found: &[String], reason: &str| {
            found.iter().filter(|d| d.contains("analysis-incomplete") && d.contains(reason)).count()
        };
        assert_eq!(why(&expected, "reached its budget (0 KiB of text)"), 8, "{arch}: {expected:?}");
        assert_eq!(why(&piped, "this function's text was not kept"), 8, "{arch}: {piped:?}");
        let reason = |found: Vec<String>| -> Vec<String> {
            let cut = |d: &String| d.split(" were not followed: ").next().unwrap().to_owned();
            found.iter().map(cut).collect()
        };
        assert_eq!(reason(piped), reason(expected), "{arch}");
    }
    // A cuobjdump listing names no callee: streamed from a pipe as from the file.
    let listing = "fixtures/compiled/sm_90a/spin_poll.cuobjdump.sass";
    let text = fs::read(repo().join(listing)).expect("fixture");
    let by_path =
        common::command(&["check", "--format", "json", listing]).envs(streamed).output().unwrap();
    let piped = check_piped_as("-", &streamed, &[], text);
    assert_eq!(comparable(&piped), comparable(&by_path));
    assert!(!comparable(&piped).is_empty());
}

/// A listing piped in keeps the functions that calls may need up to a budget, in file order.
/// Whatever the budget, each kernel either has its finding through the functions it calls or
/// says that its calls were not followed, also when what is missing is a callee's callee; and
/// the same input gives the same output. The warning says why: the budget of text linted again
/// was spent, or the text of the kernel or of a function it calls was not kept (it said the
/// budget was spent for all three). (Hand-written nvdisasm text: twelve kernels `k{i}`,
/// each calling `c{i}`, which calls `d{i}`, which waits on a flag with a relaxed load; the
/// kernel then reads data; every kernel also calls an arithmetic helper `h` first. The functions
/// are in the order `h`, then `c`, `k`, `d` for each kernel; `c` is the longest.)
#[test]
fn a_piped_listing_past_its_budget_says_which_calls_were_not_followed() {
    use std::fmt::Write as _;
    let function = |text: &mut String, name: &str, kernel: bool, body: &str| {
        let other = if kernel { "STO_CUDA_ENTRY STV_DEFAULT" } else { "STV_DEFAULT" };
        nvdisasm_header(text, name, other);
        writeln!(text, "{body}").unwrap();
    };
    let kernels = 12;
    let mut text = String::from("\t.target\tsm_90a\n\n");
    // An arithmetic helper every kernel calls too: never followed, never missed.
    let helper = "        /*0000*/                   IADD3 R4, R4, 0x1, RZ ;\n\
                  \x20       /*0010*/                   RET.ABS.NODEC R20 0x0 ;\n";
    function(&mut text, "h", false, helper);
    for i in 0..kernels {
        // Longer than the kernel after it: some budgets keep the kernel but not this.
        let mut pass = String::new();
        for at in 0..8 {
            writeln!(pass, "        /*{:04x}*/                   NOP ;", at * 16).unwrap();
        }
        let pass = format!(
            "{pass}        /*0080*/                   CALL.ABS.NOINC `(d{i}) ;\n\
             \x20       /*0090*/                   RET.ABS.NODEC R20 0x0 ;\n"
        );
        function(&mut text, &format!("c{i}"), false, &pass);
        let read = format!(
            "        /*0000*/                   CALL.ABS.NOINC `(h) ;\n\
             \x20       /*0010*/                   CALL.ABS.NOINC `(c{i}) ;\n\
             \x20       /*0020*/                   LDG.E R6, desc[UR4][R8.64] ;\n\
             \x20       /*0030*/                   EXIT ;\n"
        );
        function(&mut text, &format!("k{i}"), true, &read);
        let wait = format!(
            ".L_w_{i}:\n\
             \x20       /*0000*/                   LDG.E.STRONG.GPU R4, desc[UR4][R2.64] ;\n\
             \x20       /*0010*/                   ISETP.EQ.AND P0, PT, R4, RZ, PT ;\n\
             \x20       /*0020*/              @P0 BRA `(.L_w_{i}) ;\n\
             \x20       /*0030*/                   RET.ABS.NODEC R20 0x0 ;\n"
        );
        function(&mut text, &format!("d{i}"), false, &wait);
    }
    // Each kernel's outcome: "error" (its finding) or "warning" (calls not followed).
    let outcomes = |budget: usize| -> (Vec<(String, String, String)>, Vec<u8>) {
        let budget = budget.to_string();
        let env = [
            ("FENCELINT_STREAM_MIN", "1"),
            ("FENCELINT_LINKED_BUDGET", &budget),
            ("FENCELINT_PIPE_KEEP", &budget),
        ];
        let out = check_piped_as("-", &env, &[], text.clone().into_bytes());
        assert_ne!(out.status.code(), Some(2), "{}", stderr(&out));
        let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let mut found: Vec<(String, String, String)> = doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .map(|d| {
                let text = |key: &str| d[key].as_str().unwrap_or_default().to_owned();
                (text("kernel"), text("severity"), text("message"))
            })
            // The functions `c{i}` call too, and say so when they are left out.
            .filter(|(function, ..)| function.starts_with('k'))
            .collect();
        found.sort();
        (found, out.stdout)
    };
    let every_kernel: Vec<String> = {
        let mut names: Vec<String> = (0..kernels).map(|i| format!("k{i}")).collect();
        names.sort();
        names
    };
    let mut partial = 0;
    // How often each reason is given: the budget, the kernel's text, a callee's text.
    let reasons =
        ["reached its budget", "this function's text was not kept", "it calls was not kept"];
    let mut given = [0; 3];
    for budget in (0..=text.len()).step_by(97) {
        let (found, stdout) = outcomes(budget);
        let names: Vec<String> = found.iter().map(|(kernel, ..)| kernel.clone()).collect();
        assert_eq!(names, every_kernel, "budget {budget}: {found:?}");
        let errors = found.iter().filter(|(_, severity, _)| severity == "error").count();
        if errors > 0 && errors < kernels {
            partial += 1;
        }
        for (_, _, message) in found.iter().filter(|(_, severity, _)| severity == "warning") {
            let reason = reasons.iter().position(|reason| message.contains(reason));
            let reason = reason.unwrap_or_else(|| panic!("budget {budget}: {message}"));
            given[reason] += 1;
        }
        assert_eq!(outcomes(budget).1, stdout, "budget {budget}: the same input, the same output");
    }
    assert!(partial > 10, "budgets that keep some of the functions: {partial}");
    assert!(given.iter().all(|&n| n > 0), "{given:?}");
    // With room for the whole listing and for linting each caller with its callees, every
    // kernel has its finding.
    let (found, _) = outcomes(10 * text.len());
    assert!(found.iter().all(|(_, severity, _)| severity == "error"), "{found:?}");
}

/// Writes the lines nvdisasm prints before the code of function `name` (hand-written listings).
fn nvdisasm_header(text: &mut String, name: &str, other: &str) {
    use std::fmt::Write as _;
    write!(
        text,
        "//--------------------- .text.{name} --------------------------\n\
         \t.section\t.text.{name},\"ax\",@progbits\n\
         \x20       .other          {name},@\"{other}\"\n.text.{name}:\n{name}:\n"
    )
    .unwrap();
}

/// How many kernels the listings of [`waits_then_kernels`] have.
const KERNELS: usize = 12;

/// A hand-written `sm_90a` nvdisasm listing: a function `d` that waits on a flag with a relaxed
/// load, then [`KERNELS`] kernels `k{i}` that (after a wait of their own, with `own_wait`) call
/// it, then each function of `called_after`, and read data; then the functions of
/// `called_after`, each one instruction before its `RET`. Returns the listing and the length of
/// `d`'s part.
fn waits_then_kernels(called_after: &[(&str, &str)], own_wait: bool) -> (String, usize) {
    use std::fmt::Write as _;
    let mut text = String::from("\t.target\tsm_90a\n\n");
    nvdisasm_header(&mut text, "d", "STV_DEFAULT");
    text.push_str(
        ".L_w:\n\
         \x20       /*0000*/                   LDG.E.STRONG.GPU R4, desc[UR4][R2.64] ;\n\
         \x20       /*0010*/                   ISETP.EQ.AND P0, PT, R4, RZ, PT ;\n\
         \x20       /*0020*/              @P0 BRA `(.L_w) ;\n\
         \x20       /*0030*/                   RET.ABS.NODEC R20 0x0 ;\n\n",
    );
    let callee = text.len();
    for i in 0..KERNELS {
        nvdisasm_header(&mut text, &format!("k{i}"), "STO_CUDA_ENTRY STV_DEFAULT");
        let mut address = 0;
        if own_wait {
            write!(
                text,
                ".L_k{i}:\n\
                 \x20       /*0000*/                   LDG.E.STRONG.GPU R10, desc[UR4][R12.64] ;\n\
                 \x20       /*0010*/                   ISETP.EQ.AND P1, PT, R10, RZ, PT ;\n\
                 \x20       /*0020*/              @P1 BRA `(.L_k{i}) ;\n"
            )
            .unwrap();
            address = 0x30;
        }
        writeln!(text, "        /*{address:04x}*/                   CALL.ABS.NOINC `(d) ;")
            .unwrap();
        address += 0x10;
        for (name, _) in called_after {
            writeln!(
                text,
                "        /*{address:04x}*/                   CALL.ABS.NOINC `({name}) ;"
            )
            .unwrap();
            address += 0x10;
        }
        write!(
            text,
            "        /*{:04x}*/                   LDG.E R6, desc[UR4][R8.64] ;\n\
             \x20       /*{:04x}*/                   EXIT ;\n\n",
            address,
            address + 0x10
        )
        .unwrap();
    }
    for (name, code) in called_after {
        nvdisasm_header(&mut text, name, "STV_DEFAULT");
        write!(
            text,
            "        /*0000*/                   {code} ;\n\
             \x20       /*0010*/                   RET.ABS.NODEC R20 0x0 ;\n\n"
        )
        .unwrap();
    }
    (text, callee)
}

/// (kernel, rule) of each diagnostic of a `--format json` output, sorted.
fn kernel_rules(out: &std::process::Output) -> Vec<(String, String)> {
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut found: Vec<(String, String)> = doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            let text = |key: &str| d[key].as_str().unwrap_or_default().to_owned();
            (text("kernel"), text("rule"))
        })
        .collect();
    found.sort();
    found
}

/// Each kernel of [`waits_then_kernels`] with `rule`, sorted.
fn each_kernel(rule: &str) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> =
        (0..KERNELS).map(|i| (format!("k{i}"), rule.to_owned())).collect();
    all.sort();
    all
}

/// The findings of `text` read whole from a file.
fn file_kernel_rules(text: &str) -> Vec<(String, String)> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("listing.sass");
    fs::write(&path, text).unwrap();
    kernel_rules(&common::command(&["check", "--format", "json"]).arg(&path).output().unwrap())
}

/// A piped listing whose callers come after the functions they call (as in the `sm_80` listing
/// of NCCL, whose helpers `__cuda_sm70_warpsync` and the like come first) links each caller
/// with its callees as soon as it is read, without keeping the caller's text for the end: with
/// room for the callee's text alone, every kernel has its finding (each said its calls were not
/// followed before), the findings are those of the file, and the same on every run.
#[test]
fn a_piped_listing_links_callers_whose_callees_came_first() {
    let (text, callee) = waits_then_kernels(&[], false);
    // Room for `d`'s text and a little more: no kernel can be kept to be linted again.
    let kept = (callee + 200).to_string();
    let env = [("FENCELINT_STREAM_MIN", "1"), ("FENCELINT_PIPE_KEEP", kept.as_str())];
    let piped = check_piped_as("-", &env, &[], text.clone().into_bytes());
    let expected = each_kernel("spin-poll-without-acquire");
    assert_eq!(kernel_rules(&piped), expected, "{}", String::from_utf8_lossy(&piped.stdout));
    let again = check_piped_as("-", &env, &[], text.clone().into_bytes());
    assert_eq!(again.stdout, piped.stdout, "the same input, the same output");
    // The file, read whole, gives the same findings.
    assert_eq!(file_kernel_rules(&text), expected);
}

/// A piped caller that also calls a function read after it (the numbered copies of the
/// compiler's division helpers come after NCCL's `sm_80` kernels) is linked with what came
/// before as it is read. The link stands when the later function cannot change what the
/// caller shows (arithmetic alone): every kernel has its finding and says nothing of calls
/// not followed (each said its calls were not followed before). When the later function
/// fences, a caller that was kept is linted again with it (no finding, as from the file, where
/// the link with the earlier function alone has one when the kernel waits itself too), and one
/// that was not kept gives what it gives alone and says that its calls were not followed.
#[test]
fn a_piped_caller_of_a_function_read_later_is_linked_with_what_came_before() {
    let piped = |text: &str, kept: usize| {
        let kept = kept.to_string();
        let env = [("FENCELINT_STREAM_MIN", "1"), ("FENCELINT_PIPE_KEEP", kept.as_str())];
        let out = check_piped_as("-", &env, &[], text.as_bytes().to_vec());
        let again = check_piped_as("-", &env, &[], text.as_bytes().to_vec());
        assert_eq!(again.stdout, out.stdout, "the same input, the same output");
        kernel_rules(&out)
    };
    let (text, callee) = waits_then_kernels(&[("h", "IMAD.MOV.U32 R4, RZ, RZ, R5")], false);
    let expected = each_kernel("spin-poll-without-acquire");
    // Room for `d` alone, and room for everything.
    assert_eq!(piped(&text, callee + 200), expected, "{text}");
    assert_eq!(piped(&text, 10 * text.len()), expected);
    assert_eq!(file_kernel_rules(&text), expected);

    let fences = [("h", "MEMBAR.SC.GPU")];
    let (text, callee) = waits_then_kernels(&fences, false);
    assert_eq!(file_kernel_rules(&text), []);
    assert_eq!(piped(&text, 10 * text.len()), []);
    assert_eq!(piped(&text, callee + 200), each_kernel("analysis-incomplete"));

    let (text, callee) = waits_then_kernels(&fences, true);
    assert_eq!(file_kernel_rules(&text), []);
    assert_eq!(piped(&text, 10 * text.len()), []);
    let mut alone = each_kernel("analysis-incomplete");
    alone.extend(each_kernel("spin-poll-without-acquire"));
    alone.sort();
    assert_eq!(piped(&text, callee + 200), alone);
}

/// A small deterministic generator (xorshift64*), so that the listings below are the same on
/// every run.
struct Xorshift(u64);

impl Xorshift {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_f491_4f6c_dd1d);
        usize::try_from(x >> 33).unwrap() % n
    }
}

/// A hand-written `sm_90a` nvdisasm listing of functions in a random order: helpers `h{i}` that
/// wait on a flag, fence or compute (some calling another helper first), and kernels `k{i}`
/// that wait themselves or not, call some helpers and read data.
fn random_call_graph(seed: u64) -> String {
    use std::fmt::Write as _;
    let mut rng = Xorshift(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let helpers = 1 + rng.below(5);
    let kernels = 1 + rng.below(8);
    let bodies = [
        "LDG.E.STRONG.GPU R4, desc[UR4][R2.64] ;\nISETP.EQ.AND P0, PT, R4, RZ, PT ;\n@P0 BRA `(.L_{name}) ;",
        "MEMBAR.SC.GPU ;",
        "IMAD.MOV.U32 R4, RZ, RZ, R5 ;",
    ];
    // (name, kernel, own code, calls)
    let mut functions: Vec<(String, bool, &str, Vec<String>)> = Vec::new();
    for i in 0..helpers {
        let body = bodies[rng.below(bodies.len())];
        let other = rng.below(helpers);
        let calls =
            if rng.below(10) < 3 && other != i { vec![format!("h{other}")] } else { vec![] };
        functions.push((format!("h{i}"), false, body, calls));
    }
    for i in 0..kernels {
        let own = if rng.below(2) == 0 { bodies[0] } else { "" };
        let mut calls: Vec<String> = Vec::new();
        for _ in 0..=rng.below(3) {
            let callee = format!("h{}", rng.below(helpers));
            if !calls.contains(&callee) {
                calls.push(callee);
            }
        }
        functions.push((format!("k{i}"), true, own, calls));
    }
    for i in (1..functions.len()).rev() {
        functions.swap(i, rng.below(i + 1));
    }
    let mut text = String::from("\t.target\tsm_90a\n\n");
    for (name, kernel, own, calls) in &functions {
        let other = if *kernel { "STO_CUDA_ENTRY STV_DEFAULT" } else { "STV_DEFAULT" };
        nvdisasm_header(&mut text, name, other);
        let mut lines: Vec<String> = Vec::new();
        let own = own.replace("{name}", name);
        let (wait, rest) = if *kernel { (own.as_str(), "") } else { ("", own.as_str()) };
        if !wait.is_empty() {
            writeln!(text, ".L_{name}:").unwrap();
            lines.extend(wait.lines().map(str::to_owned));
        }
        lines.extend(calls.iter().map(|callee| format!("CALL.ABS.NOINC `({callee}) ;")));
        if !rest.is_empty() {
            if rest.contains(".L_") {
                lines.push(format!("LABEL .L_{name}"));
            }
            lines.extend(rest.lines().map(str::to_owned));
        }
        if *kernel {
            lines.extend(["LDG.E R6, desc[UR4][R8.64] ;".to_owned(), "EXIT ;".to_owned()]);
        } else {
            lines.push("RET.ABS.NODEC R20 0x0 ;".to_owned());
        }
        let mut address = 0;
        for line in lines {
            if let Some(label) = line.strip_prefix("LABEL ") {
                writeln!(text, "{label}:").unwrap();
                continue;
            }
            writeln!(text, "        /*{address:04x}*/                   {line}").unwrap();
            address += 0x10;
        }
        text.push('\n');
    }
    text
}

/// Random call graphs (callers before and after their callees, helpers that wait, fence or
/// only compute, chains of calls): a listing read whole, mapped and piped with room to keep
/// it all gives the same findings; piped with little room, each kernel either has the findings
/// of the whole listing, or says that its calls were not followed and has those of linting it
/// alone (as the whole listing gives with no budget to follow calls).
#[test]
fn piped_mapped_and_whole_listings_agree_on_random_call_graphs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("listing.sass");
    let file = |env: &[(&str, &str)]| {
        let out = common::command(&["check", "--format", "json"])
            .arg(&path)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        kernel_rules(&out)
    };
    let mut reported = 0;
    for seed in 0..40 {
        let text = random_call_graph(seed);
        fs::write(&path, &text).unwrap();
        let whole = file(&[]);
        let alone = file(&[("FENCELINT_STREAM_MIN", "1"), ("FENCELINT_LINKED_BUDGET", "0")]);
        assert_eq!(file(&[("FENCELINT_STREAM_MIN", "1")]), whole, "seed {seed}:\n{text}");
        for keep in [10 * text.len(), 200, 600, 1500] {
            let keep_text = keep.to_string();
            let env = [("FENCELINT_STREAM_MIN", "1"), ("FENCELINT_PIPE_KEEP", keep_text.as_str())];
            let piped = kernel_rules(&check_piped_as("-", &env, &[], text.clone().into_bytes()));
            if keep > text.len() {
                assert_eq!(piped, whole, "seed {seed}:\n{text}");
                continue;
            }
            let warned = |kernel: &str| {
                piped.iter().any(|(k, rule)| k == kernel && rule == "analysis-incomplete")
            };
            let of = |found: &[(String, String)], kernel: &str| -> Vec<(String, String)> {
                found.iter().filter(|(k, _)| k == kernel).cloned().collect()
            };
            // The findings of rules, without the warnings about calls.
            let rules = |found: Vec<(String, String)>| -> Vec<(String, String)> {
                found.into_iter().filter(|(_, rule)| rule != "analysis-incomplete").collect()
            };
            for (kernel, _) in whole.iter().chain(&piped) {
                let expected = if warned(kernel) { of(&alone, kernel) } else { of(&whole, kernel) };
                let (found, expected) = (rules(of(&piped, kernel)), rules(expected));
                assert_eq!(found, expected, "seed {seed} keep {keep}:\n{text}");
                if !warned(kernel) {
                    assert_eq!(of(&piped, kernel), of(&whole, kernel), "seed {seed} keep {keep}");
                }
            }
        }
        reported += whole.len();
    }
    assert!(reported > 40, "the listings have findings: {reported}");
}

/// A listing for an architecture newer than any whose SASS has been checked is linted, with a
/// note at its first line: read whole, streamed from a file, piped and as nvdisasm JSON. The
/// same listing for its own architecture has no such note. (Compiled fixtures with their
/// architecture renamed.)
#[test]
fn a_listing_for_a_newer_architecture_says_so() {
    let dir = tempfile::tempdir().unwrap();
    for path in [
        "fixtures/compiled/sm_90a/spin_poll.cuobjdump.sass",
        "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass",
        "fixtures/compiled/sm_90a/wgmma.nvdisasm.json",
    ] {
        let own = fencelint(&["check", "--format", "json", path]);
        assert!(!stdout(&own).contains("unknown-architecture"), "{path}");
        let text = fs::read_to_string(repo().join(path)).expect("fixture");
        let renamed = text
            .replace("sm_90a", "sm_190a")
            .replace("SM90", "SM190")
            .replace(r#""major":9,"minor":0"#, r#""major":19,"minor":0"#);
        let newer = dir.path().join(path.rsplit('/').next().unwrap());
        fs::write(&newer, &renamed).unwrap();
        let newer = newer.to_str().unwrap();
        let expected: Vec<_> =
            findings(&own).into_iter().chain([("unknown-architecture".to_owned(), 1, 1)]).collect();
        // The renaming lengthens nvdisasm JSON's one line: columns move there.
        let json = std::path::Path::new(path).extension().is_some_and(|e| e == "json");
        let sorted = |found: Vec<(String, u64, u64)>| {
            let mut found: Vec<_> =
                found.into_iter().map(|(r, l, c)| (r, l, if json { 0 } else { c })).collect();
            found.sort();
            found
        };
        let whole = common::command(&["check", "--format", "json", newer]).output().unwrap();
        let streamed = common::command(&["check", "--format", "json", newer])
            .env("FENCELINT_STREAM_MIN", "1")
            .output()
            .unwrap();
        let piped = check_piped_as("-", &[("FENCELINT_STREAM_MIN", "1")], &[], renamed.into());
        for (how, run) in [("whole", &whole), ("streamed", &streamed), ("piped", &piped)] {
            assert_eq!(run.status.code(), own.status.code(), "{path} {how}: {}", stderr(run));
            assert_eq!(sorted(findings(run)), sorted(expected.clone()), "{path} {how}");
            let doc: serde_json::Value = serde_json::from_slice(&run.stdout).unwrap();
            let note = doc["diagnostics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|d| d["rule"] == "unknown-architecture")
                .unwrap();
            assert_eq!(note["severity"], "note", "{path} {how}");
            let message = note["message"].as_str().unwrap();
            assert!(message.starts_with("`sm_190a` is newer than any architecture"), "{message}");
        }
    }
}

/// A cuobjdump listing of a `-rdc` build prints each call by name as `CALL.ABS.NOINC 0x0`,
/// which names no callee: the calls fall through, and one note at the listing's first line
/// counts them and the functions that make them, read whole, streamed from the file and
/// piped. The nvdisasm listing of the same cubin names its callees, and a listing whose calls
/// all go into the function's own code has no call to count: neither has the note.
#[test]
fn a_cuobjdump_listing_says_its_calls_name_no_callee() {
    let note = |run: &std::process::Output| -> Vec<(String, String, String)> {
        let doc: serde_json::Value = serde_json::from_slice(&run.stdout).expect("json");
        doc["diagnostics"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|d| d["rule"] == "calls-not-followed")
            .map(|d| {
                let text = |key: &str| d[key].as_str().unwrap_or_default().to_owned();
                (text("severity"), text("message"), d["span"]["line"].to_string())
            })
            .collect()
    };
    for arch in ["sm_80", "sm_90a", "sm_100a", "sm_120"] {
        let path = format!("fixtures/compiled/{arch}/noinline_poll.rdc.cuobjdump.sass");
        let text = fs::read_to_string(repo().join(&path)).expect("fixture");
        let calls = text.matches("CALL.ABS.NOINC 0x0 ;").count();
        let callers = text
            .split("Function : ")
            .skip(1)
            .filter(|function| function.contains("CALL.ABS.NOINC 0x0 ;"))
            .count();
        assert!(calls > callers && callers > 1, "{path}: {calls} calls in {callers} functions");
        let expected = format!("{calls} calls in {callers} functions name no callee");
        let args = ["check", "--format", "json", "--select", "all", path.as_str()];
        let whole = common::command(&args).output().unwrap();
        let streamed = common::command(&args).env("FENCELINT_STREAM_MIN", "1").output().unwrap();
        let piped = check_piped_as(
            "-",
            &[("FENCELINT_STREAM_MIN", "1")],
            &["--select", "all"],
            text.into(),
        );
        for (how, run) in [("whole", &whole), ("streamed", &streamed), ("piped", &piped)] {
            let found = note(run);
            assert_eq!(found.len(), 1, "{path} {how}: {}", stdout(run));
            let (severity, message, line) = &found[0];
            assert_eq!((severity.as_str(), line.as_str()), ("note", "1"), "{path} {how}");
            assert!(message.starts_with(&expected), "{path} {how}: {message}");
            assert_eq!(run.status.code(), whole.status.code(), "{path} {how}");
        }
        for other in [
            format!("fixtures/compiled/{arch}/noinline_poll.rdc.nvdisasm.sass"),
            format!("fixtures/compiled/{arch}/noinline_poll.cuobjdump.sass"),
        ] {
            let run = fencelint(&["check", "--format", "json", &other]);
            assert!(note(&run).is_empty(), "{other}");
        }
    }
}
