//! End-to-end tests of the CI workflow: `fencelint.toml`, inline suppressions and baselines.

// Saying on stderr that a test could not run (no CUDA tools) is the point of the message.
#![allow(clippy::print_stderr)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The compiled fixture the baseline tests start from, and its recompiled variants.
const SPIN_POLL: &str = "fixtures/compiled/sm_90a/spin_poll.ptx";
const SPIN_POLL_EDITED: &str = "fixtures/workflow/spin_poll_edited.ptx";
const SPIN_POLL_NEW_HAZARD: &str = "fixtures/workflow/spin_poll_new_hazard.ptx";
/// A minimal PTX input with one `spin-poll-without-acquire` finding on line 19.
const RELAXED_POLL: &str = "fixtures/ptx/spin-poll-without-acquire/relaxed_poll.ptx";

fn run_in(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_fencelint"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run fencelint")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

/// A temporary folder holding `files` (name, repository path) and, if given, a configuration.
fn workspace(files: &[(&str, &str)], config: Option<&str>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temp dir");
    for (name, from) in files {
        let to = dir.path().join(name);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::copy(repo().join(from), to).expect("copy fixture");
    }
    if let Some(config) = config {
        fs::write(dir.path().join("fencelint.toml"), config).unwrap();
    }
    dir
}

/// `(rule, kernel, severity)` of every diagnostic in `--format json` output.
fn findings(output: &Output) -> Vec<(String, String, String)> {
    let doc: serde_json::Value = serde_json::from_str(&stdout(output))
        .unwrap_or_else(|err| panic!("bad JSON ({err}): {}", stdout(output)));
    doc["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            (
                d["rule"].as_str().unwrap_or("").to_owned(),
                d["kernel"].as_str().unwrap_or("").to_owned(),
                d["severity"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect()
}

fn rules_of(findings: &[(String, String, String)]) -> Vec<&str> {
    let mut rules: Vec<&str> = findings.iter().map(|f| f.0.as_str()).collect();
    rules.dedup();
    rules
}

fn count(findings: &[(String, String, String)], rule: &str) -> usize {
    findings.iter().filter(|f| f.0 == rule).count()
}

// ---------------------------------------------------------------------------
// fencelint.toml

#[test]
fn config_select_and_ignore() {
    let all = run_in(&repo(), &["check", "--no-config", "--format", "json", SPIN_POLL]);
    let all = findings(&all);
    assert_eq!(count(&all, "spin-poll-without-acquire"), 25, "{all:?}");
    assert_eq!(count(&all, "acquire-in-poll-loop"), 7, "{all:?}");

    let dir = workspace(&[("spin_poll.ptx", SPIN_POLL)], Some("[rules]\nselect = [\"perf\"]\n"));
    let out = run_in(dir.path(), &["check", "--format", "json", "spin_poll.ptx"]);
    assert_eq!(rules_of(&findings(&out)), ["acquire-in-poll-loop"], "{}", stderr(&out));

    let dir = workspace(
        &[("spin_poll.ptx", SPIN_POLL)],
        Some("[rules]\nignore = [\"spin-poll-without-acquire\"]\n"),
    );
    let out = run_in(dir.path(), &["check", "--format", "json", "spin_poll.ptx"]);
    assert_eq!(rules_of(&findings(&out)), ["acquire-in-poll-loop"]);
}

#[test]
fn config_severity_and_fail_level() {
    let config =
        "fail-level = \"error\"\n\n[rules.severity]\nspin-poll-without-acquire = \"warning\"\n";
    let dir = workspace(&[("spin_poll.ptx", SPIN_POLL)], Some(config));
    let out = run_in(dir.path(), &["check", "--format", "json", "spin_poll.ptx"]);
    let found = findings(&out);
    assert!(found.iter().all(|f| f.2 == "warning"), "{found:?}");
    assert_eq!(out.status.code(), Some(0), "warnings stay below `fail-level = \"error\"`");

    // The command line overrides the file.
    let out = run_in(dir.path(), &["check", "--fail-level", "warning", "spin_poll.ptx"]);
    assert_eq!(out.status.code(), Some(1));

    let config =
        "[rules.severity]\nspin-poll-without-acquire = \"off\"\nacquire-in-poll-loop = \"error\"\n";
    let dir = workspace(&[("spin_poll.ptx", SPIN_POLL)], Some(config));
    let out = run_in(dir.path(), &["check", "--format", "json", "spin_poll.ptx"]);
    let found = findings(&out);
    assert_eq!(rules_of(&found), ["acquire-in-poll-loop"]);
    assert!(found.iter().all(|f| f.2 == "error"), "{found:?}");
}

#[test]
fn command_line_select_replaces_the_file_selection() {
    let dir = workspace(
        &[("spin_poll.ptx", SPIN_POLL)],
        Some("[rules]\nselect = [\"acquire-in-poll-loop\"]\n"),
    );
    let out = run_in(
        dir.path(),
        &["check", "--format", "json", "--select", "spin-poll-without-acquire", "spin_poll.ptx"],
    );
    assert_eq!(rules_of(&findings(&out)), ["spin-poll-without-acquire"]);
    let out = run_in(
        dir.path(),
        &["check", "--format", "json", "--ignore", "acquire-in-poll-loop", "spin_poll.ptx"],
    );
    assert!(findings(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn config_ignore_by_kernel_glob() {
    let config = "[[ignore]]\nrules = [\"spin-poll-without-acquire\"]\nkernels = [\"poll_volatile_*\", \"poll_atom*\"]\n";
    let dir = workspace(&[("spin_poll.ptx", SPIN_POLL)], Some(config));
    let out = run_in(dir.path(), &["check", "--format", "json", "spin_poll.ptx"]);
    let found = findings(&out);
    assert_eq!(count(&found, "spin-poll-without-acquire"), 21, "{found:?}");
    assert!(
        found
            .iter()
            .filter(|f| f.0 == "spin-poll-without-acquire")
            .all(|f| !f.1.starts_with("poll_volatile") && !f.1.starts_with("poll_atom")),
        "{found:?}"
    );
    assert!(stderr(&out).contains("4 ignored by the configuration"), "{}", stderr(&out));
}

#[test]
fn config_ignore_by_path_glob() {
    let files = [("vendor/nccl/a.ptx", RELAXED_POLL), ("src/b.ptx", RELAXED_POLL)];
    let dir = workspace(&files, Some("[[ignore]]\npaths = [\"vendor/**\"]\n"));
    let out = run_in(dir.path(), &["check", "--format", "short", "src", "vendor"]);
    let text = stdout(&out);
    assert!(text.contains("src/b.ptx:19:5"), "{text}");
    assert!(!text.contains("vendor"), "{text}");

    // A pattern without `/` matches file names anywhere; paths are relative to the
    // configuration's folder whatever the current folder is.
    let dir = workspace(&files, Some("[[ignore]]\npaths = [\"b.ptx\"]\n"));
    let out = run_in(&dir.path().join("src"), &["check", "--format", "short", ".", "../vendor"]);
    let text = stdout(&out);
    assert!(text.contains("a.ptx:19:5"), "{text}");
    assert!(!text.contains("b.ptx"), "{text}");
}

#[test]
fn config_is_found_upwards_from_the_first_input_or_given_explicitly() {
    let dir = workspace(
        &[("deep/er/k.ptx", RELAXED_POLL)],
        Some("[rules]\nignore = [\"correctness\"]\n"),
    );
    let out = run_in(dir.path(), &["check", "deep/er/k.ptx"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = run_in(&dir.path().join("deep"), &["check", "er"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    let out = run_in(dir.path(), &["check", "--no-config", "deep/er/k.ptx"]);
    assert_eq!(out.status.code(), Some(1));

    fs::write(dir.path().join("other.toml"), "[rules]\nselect = [\"correctness\"]\n").unwrap();
    let out = run_in(dir.path(), &["check", "--config", "other.toml", "deep/er/k.ptx"]);
    assert_eq!(out.status.code(), Some(1), "`--config` replaces the discovered file");
}

#[test]
fn config_arch_selects_the_cubins_of_binaries() {
    const FATBIN: &str = "fixtures/compiled/multiarch/spin_poll.fatbin";
    let dir = workspace(&[], Some("arch = [\"sm_100\"]\n"));
    let config = dir.path().join("fencelint.toml");
    let config = config.to_str().unwrap();
    // Run in the checkout, where the CUDA tools of `.cuda-venv` are found.
    let out = run_in(
        &repo(),
        &["check", "--config", config, "--format", "short", "--locations", "input", FATBIN],
    );
    let text = stdout(&out);
    if text.contains("pip install nvidia-cuda-cuobjdump") {
        eprintln!(
            "NOT RUN: `config_arch_selects_the_cubins_of_binaries` needs cuobjdump and nvdisasm"
        );
        assert_eq!(out.status.code(), Some(2), "{text}");
        return;
    }
    assert!(text.contains("[spin-poll-without-acquire]"), "{text}");
    assert!(text.contains("sm_100a"), "{text}");
    assert!(!text.contains("sm_90a"), "{text}");

    // `--arch` on the command line replaces the file's list.
    let out = run_in(
        &repo(),
        &[
            "check",
            "--config",
            config,
            "--format",
            "short",
            "--locations",
            "input",
            "--arch",
            "sm_90",
            FATBIN,
        ],
    );
    let text = stdout(&out);
    assert!(text.contains("sm_90a"), "{text}");
    assert!(!text.contains("sm_100a"), "{text}");
}

#[test]
fn unknown_config_key_is_an_error_with_its_line() {
    let dir = workspace(
        &[("k.ptx", RELAXED_POLL)],
        Some(
            "[rules]\nselect = [\"all\"]\n\n[[ignore]]\nrules = [\"costly-fence\"]\nkernel = [\"x\"]\n",
        ),
    );
    let out = run_in(dir.path(), &["check", "k.ptx"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("fencelint.toml:6:1: unknown field `kernel`"), "{err}");
    assert_eq!(stdout(&out), "", "nothing is linted with a broken configuration");
}

#[test]
fn unknown_rule_in_config_is_an_error_with_line_and_column() {
    let dir = workspace(
        &[("k.ptx", RELAXED_POLL)],
        Some("# rules\n[rules]\nignore = [\"costly-fence\", \"spin-poll-without-aquire\"]\n"),
    );
    let out = run_in(dir.path(), &["check", "k.ptx"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("fencelint.toml:3:27: unknown rule or category `spin-poll-without-aquire`"),
        "{err}"
    );

    let dir =
        workspace(&[("k.ptx", RELAXED_POLL)], Some("[rules.severity]\nno-such-rule = \"error\"\n"));
    let err = stderr(&run_in(dir.path(), &["check", "k.ptx"]));
    assert!(err.contains("fencelint.toml:2:1: unknown rule or category `no-such-rule`"), "{err}");

    let dir = workspace(&[("k.ptx", RELAXED_POLL)], Some("arch = [\"sm_90\", \"hopper\"]\n"));
    let out = run_in(dir.path(), &["check", "k.ptx"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("fencelint.toml:1:18: `hopper` is not an architecture"));
}

// ---------------------------------------------------------------------------
// Inline suppressions

/// `relaxed_poll.ptx` with its expectation comment replaced by `edit`.
fn relaxed_poll_with(dir: &Path, edit: impl Fn(&str) -> String) {
    let text = fs::read_to_string(repo().join(RELAXED_POLL)).unwrap();
    let text = text.replace(
        " // expect: [spin-poll-without-acquire] \"with the relaxed load `ld.relaxed.gpu.global.u32`\"",
        "",
    );
    fs::write(dir.join("k.ptx"), edit(&text)).unwrap();
}

const DATA_READ: &str = "    ld.global.u32 %r2, [%rd2];";

#[test]
fn suppression_on_the_line_and_the_line_above() {
    let dir = workspace(&[], None);
    relaxed_poll_with(dir.path(), |text| {
        text.replace(
            DATA_READ,
            &format!("{DATA_READ} // fencelint: allow(spin-poll-without-acquire)"),
        )
    });
    let out = run_in(dir.path(), &["check", "--format", "short", "k.ptx"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out), "");
    assert!(stderr(&out).contains("1 suppressed inline"), "{}", stderr(&out));

    relaxed_poll_with(dir.path(), |text| {
        text.replace(
            DATA_READ,
            &format!("    // fencelint: allow(costly-fence, spin-poll-without-acquire) -- reviewed\n{DATA_READ}"),
        )
    });
    let out = run_in(
        dir.path(),
        &["check", "--format", "short", "--select", "costly-fence,correctness", "k.ptx"],
    );
    assert_eq!(
        stdout(&out),
        "k.ptx:19:25: warning[unused-suppression]: unused suppression: no `costly-fence` finding on the next line\n"
    );
    assert_eq!(out.status.code(), Some(1), "unused suppressions are warnings");
}

#[test]
fn suppression_for_a_whole_function() {
    let dir = workspace(&[], None);
    // Inside the body, far from the finding.
    relaxed_poll_with(dir.path(), |text| {
        text.replace(
            "    .reg .pred %p<4>;",
            "    // fencelint: allow-function(spin-poll-without-acquire)\n    .reg .pred %p<4>;",
        )
    });
    let out = run_in(dir.path(), &["check", "--format", "short", "k.ptx"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    // On the line before the header.
    relaxed_poll_with(dir.path(), |text| {
        text.replace(
            ".visible .entry k(",
            "// fencelint: allow-function(spin-poll-without-acquire)\n.visible .entry k(",
        )
    });
    let out = run_in(dir.path(), &["check", "--format", "short", "k.ptx"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    // For the whole file, in its first lines.
    relaxed_poll_with(dir.path(), |text| {
        format!("// fencelint: allow-file(spin-poll-without-acquire)\n{text}")
    });
    let out = run_in(dir.path(), &["check", "--format", "short", "k.ptx"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
}

#[test]
fn unused_and_unknown_suppressions_are_reported() {
    let dir = workspace(&[], None);
    relaxed_poll_with(dir.path(), |text| {
        text.replace(
            "    st.global.u32",
            "    // fencelint: allow(spin-poll-without-acquire, spin-pol-without-acquire)\n    st.global.u32",
        )
    });
    let out = run_in(dir.path(), &["check", "--format", "short", "k.ptx"]);
    let text = stdout(&out);
    assert!(text.contains("k.ptx:19:5: error[spin-poll-without-acquire]"), "{text}");
    assert!(
        text.contains("k.ptx:20:25: warning[unused-suppression]: unused suppression: no `spin-poll-without-acquire` finding on the next line"),
        "{text}"
    );
    assert!(
        text.contains("k.ptx:20:52: warning[unused-suppression]: unknown rule `spin-pol-without-acquire` in suppression"),
        "{text}"
    );
    let out = run_in(dir.path(), &["check", "--format", "rich", "--color", "never", "k.ptx"]);
    assert!(stdout(&out).contains("help: replace it with `spin-poll-without-acquire`"));

    // The report can be turned off like a rule.
    let out = run_in(
        dir.path(),
        &["check", "--format", "short", "--ignore", "unused-suppression", "k.ptx"],
    );
    assert!(!stdout(&out).contains("unused-suppression"), "{}", stdout(&out));

    // A suppression for a rule that is not enabled in this run is not reported.
    let out =
        run_in(dir.path(), &["check", "--format", "short", "--select", "costly-fence", "k.ptx"]);
    assert_eq!(
        stdout(&out),
        "k.ptx:20:52: warning[unused-suppression]: unknown rule `spin-pol-without-acquire` in suppression\n"
    );
}

#[test]
fn suppressions_work_in_sass_text() {
    const SASS: &str = "fixtures/sass/spin-poll-without-acquire/atomic_poll_uniform_branch.sass";
    const EXPECT: &str = "   // expect: [spin-poll-without-acquire] \"relaxed atomic\"";
    let text = fs::read_to_string(repo().join(SASS)).unwrap();
    assert!(text.contains(EXPECT));
    let dir = workspace(&[], None);

    let line = text.replace(EXPECT, " // fencelint: allow(spin-poll-without-acquire)");
    fs::write(dir.path().join("k.sass"), line).unwrap();
    let out = run_in(dir.path(), &["check", "--format", "short", "k.sass"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(stderr(&out).contains("1 suppressed inline"), "{}", stderr(&out));

    let function = text.replace(EXPECT, "").replace(
        "\t\tFunction : atomic_poll",
        "\t\t// fencelint: allow-function(spin-poll-without-acquire)\n\t\tFunction : atomic_poll",
    );
    fs::write(dir.path().join("k.sass"), function).unwrap();
    let out = run_in(dir.path(), &["check", "--format", "short", "k.sass"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));

    let without = text.replace(EXPECT, "");
    fs::write(dir.path().join("k.sass"), without).unwrap();
    let out = run_in(dir.path(), &["check", "--format", "short", "k.sass"]);
    assert_eq!(out.status.code(), Some(1), "the finding is there without the comment");
}

// ---------------------------------------------------------------------------
// Baselines

/// Writes a baseline for the compiled `spin_poll.ptx`, then replaces the file with `recompiled`
/// and checks it against the baseline.
fn check_recompiled(recompiled: &str) -> (Output, tempfile::TempDir) {
    let dir = workspace(&[("build/spin_poll.ptx", SPIN_POLL)], None);
    let write = run_in(
        dir.path(),
        &["check", "--format", "short", "--write-baseline", "baseline.json", "build"],
    );
    assert_eq!(write.status.code(), Some(0), "{}", stderr(&write));
    assert_eq!(stdout(&write), "", "written findings are hidden in the writing run");
    assert!(stderr(&write).contains("32 hidden by the baseline"), "{}", stderr(&write));

    fs::copy(repo().join(recompiled), dir.path().join("build/spin_poll.ptx")).unwrap();
    let out =
        run_in(dir.path(), &["check", "--format", "json", "--baseline", "baseline.json", "build"]);
    (out, dir)
}

#[test]
fn baseline_file_is_sorted_versioned_json() {
    let dir = workspace(&[("spin_poll.ptx", SPIN_POLL)], None);
    let out = run_in(dir.path(), &["check", "--write-baseline", "b.json", "spin_poll.ptx"]);
    assert_eq!(out.status.code(), Some(0));
    let text = fs::read_to_string(dir.path().join("b.json")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["version"], 1);
    let entries = doc["entries"].as_array().unwrap();
    assert_eq!(entries.len(), 32);
    for entry in entries {
        for key in ["rule", "kernel", "fingerprint", "anchor", "file", "message"] {
            assert!(entry[key].is_string(), "{key} in {entry}");
        }
        assert_eq!(entry["count"], 1);
        assert_eq!(entry["file"], "spin_poll.ptx");
    }
    // The anchor hashes fewer opcodes than the fingerprint's window, so it is not a copy of it.
    assert!(entries.iter().all(|e| e["anchor"] != e["fingerprint"]), "{text}");
    let keys: Vec<_> = entries
        .iter()
        .map(|e| (e["kernel"].as_str().unwrap(), e["rule"].as_str().unwrap()))
        .collect();
    let mut sorted = keys.clone();
    sorted.sort_unstable();
    assert_eq!(keys, sorted);
    // Writing twice gives the same bytes.
    run_in(dir.path(), &["check", "--write-baseline", "c.json", "spin_poll.ptx"]);
    assert_eq!(text, fs::read_to_string(dir.path().join("c.json")).unwrap());
}

#[test]
fn baseline_still_matches_after_an_unrelated_recompile() {
    let original = fs::read_to_string(repo().join(SPIN_POLL)).unwrap();
    let edited = fs::read_to_string(repo().join(SPIN_POLL_EDITED)).unwrap();
    assert!(edited.contains(".entry scale_copy"), "the edited build adds a kernel");
    assert_ne!(original.matches(".loc").count(), 0);

    let (out, _dir) = check_recompiled(SPIN_POLL_EDITED);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(findings(&out).is_empty(), "{}", stdout(&out));
    assert!(stderr(&out).contains("12 hidden by the baseline"), "{}", stderr(&out));
}

#[test]
fn baseline_shows_a_new_hazard() {
    let (out, _dir) = check_recompiled(SPIN_POLL_NEW_HAZARD);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let found = findings(&out);
    assert_eq!(
        found,
        [(
            "spin-poll-without-acquire".to_owned(),
            "poll_relaxed_second_flag".to_owned(),
            "error".to_owned()
        )]
    );
    assert!(stderr(&out).contains("12 hidden by the baseline"), "{}", stderr(&out));
}

#[test]
fn baseline_counts_findings_of_one_identity() {
    // Two copies of one kernel's finding in a baseline written for one copy: one shows.
    let dir = workspace(&[("a/k.ptx", RELAXED_POLL)], None);
    run_in(dir.path(), &["check", "--write-baseline", "b.json", "a"]);
    fs::copy(repo().join(RELAXED_POLL), dir.path().join("a/k2.ptx")).unwrap();
    let out = run_in(dir.path(), &["check", "--format", "short", "--baseline", "b.json", "a"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out).lines().count(), 1, "{}", stdout(&out));
    assert!(stderr(&out).contains("1 hidden by the baseline"), "{}", stderr(&out));
}

#[test]
fn malformed_baseline_is_an_error_with_line_and_column() {
    let dir = workspace(&[("k.ptx", RELAXED_POLL)], None);
    fs::write(
        dir.path().join("b.json"),
        "{\n  \"version\": 1,\n  \"entries\": [ {\"rule\": 1} ]\n}\n",
    )
    .unwrap();
    let out = run_in(dir.path(), &["check", "--baseline", "b.json", "k.ptx"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(err.contains("b.json:3:"), "{err}");
    assert!(err.contains("malformed baseline"), "{err}");
    assert_eq!(stdout(&out), "");

    let out = run_in(dir.path(), &["check", "--baseline", "missing.json", "k.ptx"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("missing.json: cannot read the baseline"), "{}", stderr(&out));
}

/// `sources` globs drop the findings whose code lies in the files they name, even inlined into
/// a kernel elsewhere: `grid.sync()`'s acquire poll in CUDA's cooperative-groups header.
#[test]
fn config_sources_drop_findings_by_the_file_of_their_code() {
    const GRID_SYNC: &str = "fixtures/compiled/sm_90a/grid_sync.ptx";
    let check = |config: &str| {
        let dir = workspace(&[], Some(config));
        let config = dir.path().join("fencelint.toml");
        let args = ["check", "--config", config.to_str().unwrap(), "--format", "short", GRID_SYNC];
        run_in(&repo(), &args)
    };
    let all = check("[[ignore]]\nsources = [\"nothing.h\"]\n");
    assert_eq!(stdout(&all).lines().count(), 2, "{}", stdout(&all));
    let dropped = check("[[ignore]]\nsources = [\"**/cooperative_groups/**\"]\n");
    assert_eq!(dropped.status.code(), Some(0), "{}", stdout(&dropped));
    assert_eq!(stdout(&dropped), "");
    assert!(stderr(&dropped).contains("2 ignored by the configuration"), "{}", stderr(&dropped));
    // The kernel's own file is where the findings are shown, not where their code is.
    let kept = check("[[ignore]]\nsources = [\"fixtures/kernels/**\"]\n");
    assert_eq!(stdout(&kept).lines().count(), 2, "{}", stdout(&kept));
}

/// A C++ function of a listing (nvdisasm names it `_Z21wait_relaxed_and_readPKjPKf`) is named
/// demangled in the findings, as a binary's are, in the `kernel` field and in a message that
/// quotes it; `[[ignore]]` still matches the name as written, and a baseline written when
/// findings named it as written still hides them. (The compiled listing, with one caller
/// renamed as C++ would name it, so that the note on its calls quotes a mangled name.)
#[test]
fn cpp_kernels_of_a_listing_are_named_demangled() {
    const LISTING: &str = "fixtures/compiled/sm_120/noinline_poll.rdc.nvdisasm.sass";
    const MANGLED: &str = "_Z21wait_relaxed_and_readPKjPKf";
    const READABLE: &str = "wait_relaxed_and_read(unsigned int const*, float const*)";
    let dir = tempfile::tempdir().unwrap();
    let listing = fs::read_to_string(repo().join(LISTING)).unwrap();
    let caller = "call_wait_and_read_twice";
    assert!(listing.contains(caller));
    let listing = listing.replace(caller, &format!("_Z{}{caller}v", caller.len()));
    fs::write(dir.path().join("k.sass"), listing).unwrap();
    let check = |args: &[&str], env: &[(&str, &str)]| {
        Command::new(env!("CARGO_BIN_EXE_fencelint"))
            .arg("check")
            .args(args)
            .arg("k.sass")
            .envs(env.iter().copied())
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let json = ["--format", "json"];
    let found = findings(&check(&json, &[]));
    let kernels: Vec<&str> = found.iter().map(|(_, kernel, _)| kernel.as_str()).collect();
    assert!(kernels.contains(&READABLE), "{kernels:?}");
    assert!(kernels.iter().all(|k| !k.starts_with("_Z")), "{kernels:?}");
    // The note on the renamed caller's calls (streamed, with no budget to follow them).
    let streamed = [("FENCELINT_STREAM_MIN", "1"), ("FENCELINT_LINKED_BUDGET", "0")];
    let text = stdout(&check(&json, &streamed));
    assert!(text.contains(&format!("the calls of `{caller}()` to other")), "{text}");
    assert!(!text.contains("_Z"), "{text}");

    // `[[ignore]]` by the name as written.
    let config = format!("[[ignore]]\nkernels = [\"{MANGLED}*\"]\n");
    fs::write(dir.path().join("fencelint.toml"), config).unwrap();
    let found = findings(&check(&json, &[]));
    assert!(found.iter().all(|(_, kernel, _)| !kernel.starts_with("wait_relaxed")), "{found:?}");
    fs::remove_file(dir.path().join("fencelint.toml")).unwrap();

    // A baseline of this run, then the same with the kernels named as written.
    let out = check(&["--write-baseline", "b.json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let written = fs::read_to_string(dir.path().join("b.json")).unwrap();
    assert!(written.contains(READABLE) && !written.contains(MANGLED), "{written}");
    let old = written.replace(READABLE, MANGLED);
    fs::write(dir.path().join("old.json"), old).unwrap();
    let out = check(&["--format", "json", "--baseline", "old.json"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert!(findings(&out).is_empty(), "{}", stdout(&out));
}
