//! Hostile inputs: each row of the table in `docs/robustness.md` is one test here.
//!
//! Every test runs the `fencelint` program under a deadline (a hang fails the test instead of
//! stalling the suite) and reads the child's peak resident memory from `wait4`, so that time and
//! memory are both bounded. Each hostile input is given together with a known-bad fixture whose
//! finding must still be reported: one bad input never hides the others.
//!
//! Sizes: the large inputs (100 MB line, 5 million instructions, a million labels) are built at
//! full size in release builds; in debug builds (`cargo test` without `--release`) they are
//! smaller, as each test says, because the unoptimised pipeline is ten times slower.

// A test that could not run as written (running as root) says so on stderr.
#![allow(clippy::print_stderr)]

use std::fmt::Write as _;
use std::fs;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BAD: &str = "fixtures/ptx/spin-poll-without-acquire/relaxed_poll.ptx";
const FINDING: &str = "error[spin-poll-without-acquire]";
const CUBIN: &str = "fixtures/compiled/sm_90a/spin_poll.cubin";
const INSTALL: &str = "pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm";
const HEADER: &str = ".version 8.5\n.target sm_90a\n.address_size 64\n";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn bad_fixture() -> String {
    repo().join(BAD).to_str().unwrap().to_owned()
}

/// What one run of the program did.
struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    elapsed: Duration,
    /// Peak resident memory of the child, in MiB.
    peak_mib: u64,
}

impl Run {
    fn describe(&self) -> String {
        format!(
            "exit {:?} after {:.1?}, {} MiB\n--- stdout\n{}\n--- stderr\n{}",
            self.code,
            self.elapsed,
            self.peak_mib,
            truncate(&self.stdout),
            truncate(&self.stderr)
        )
    }

    /// The first output line that starts with `path`.
    fn line_of(&self, path: &str) -> &str {
        self.stdout
            .lines()
            .find(|l| l.starts_with(path))
            .unwrap_or_else(|| panic!("no line names `{path}`\n{}", self.describe()))
    }

    /// The checks every row shares: no panic, the deadline and memory cap held, and the
    /// known-bad fixture given alongside was still linted.
    fn assert_sane(&self, limit: Duration, max_mib: u64) {
        assert!(!self.stderr.contains("panicked"), "panic\n{}", self.describe());
        assert!(
            !self.stderr.contains("internal-error") && !self.stdout.contains("internal-error"),
            "internal error\n{}",
            self.describe()
        );
        assert!(self.elapsed < limit, "took too long\n{}", self.describe());
        assert!(self.peak_mib <= max_mib, "used too much memory\n{}", self.describe());
        assert!(self.stdout.contains(FINDING), "other input not linted\n{}", self.describe());
    }
}

fn truncate(text: &str) -> &str {
    let end = text.floor_char_boundary(text.len().min(4000));
    &text[..end]
}

/// Runs `fencelint check --format short ARGS` from the repository root, killing it after
/// `limit` (the test then fails with what it printed).
#[allow(clippy::zombie_processes)] // the child is waited for (or killed and waited for) below
fn check(args: &[&str], limit: Duration) -> Run {
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencelint"))
        .args(["check", "--format", "short"])
        .args(args)
        .current_dir(repo())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run fencelint");
    let pipe = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            let _ = r.read_to_end(&mut bytes);
            String::from_utf8_lossy(&bytes).into_owned()
        })
    };
    let out = pipe(Box::new(child.stdout.take().unwrap()));
    let err = pipe(Box::new(child.stderr.take().unwrap()));
    let pid = libc::pid_t::try_from(child.id()).unwrap();
    let started = Instant::now();
    let (code, peak_kib) = loop {
        let mut status = 0;
        // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
        #[allow(unsafe_code)]
        let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: `pid` is our own child, not yet reaped (`Child::wait` is never called), and
        // both out-pointers are valid for writes.
        #[allow(unsafe_code)]
        let reaped = unsafe { libc::wait4(pid, &raw mut status, libc::WNOHANG, &raw mut usage) };
        if reaped == pid {
            let code = libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status));
            break (code, u64::try_from(usage.ru_maxrss).unwrap_or(0));
        }
        assert!(reaped == 0, "wait4 failed: {}", std::io::Error::last_os_error());
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "fencelint {args:?} did not finish within {limit:?}; stdout so far:\n{}",
                truncate(&out.join().unwrap())
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let elapsed = started.elapsed();
    Run {
        code,
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        elapsed,
        peak_mib: peak_kib / 1024,
    }
}

fn write(dir: &Path, name: &str, bytes: impl AsRef<[u8]>) -> String {
    let path = dir.join(name);
    fs::write(&path, bytes).unwrap();
    path.to_str().unwrap().to_owned()
}

/// The default deadline and memory cap for small inputs.
const SHORT: Duration = Duration::from_mins(1);
const SMALL_MIB: u64 = 512;

/// A bad input given alongside the known-bad fixture: exit code 2, an error on a line that
/// names the file (with `line:col`) and contains `expected`, and the fixture still linted.
fn bad_input(name: &str, bytes: &[u8], expected: &str) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), name, bytes);
    let run = check(&[&path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    assert_eq!(run.code, Some(2), "{}", run.describe());
    let line = run.line_of(&path);
    assert!(line[path.len()..].starts_with(':'), "no line:col in `{line}`");
    assert!(line.contains(expected), "`{line}` should contain `{expected}`");
    run
}

fn is_root() -> bool {
    // SAFETY: `geteuid` has no preconditions.
    #[allow(unsafe_code)]
    let uid = unsafe { libc::geteuid() };
    uid == 0
}

/// A kernel `k` whose body is `body`.
fn kernel(body: &str) -> String {
    format!(
        "{HEADER}.visible .entry k(.param .u64 p)\n{{\n\t.reg .pred %p<4>;\n\t.reg .b32 %r<8>;\n\t.reg .b64 %rd<4>;\n\tld.param.u64 %rd1, [p];\n\tsetp.eq.u32 %p1, %r1, 0;\n{body}\tret;\n}}\n"
    )
}

// ---------------------------------------------------------------------------------------------
// Files that cannot be read as text.

#[test]
fn empty_file() {
    bad_input("empty.ptx", b"", "empty file");
}

#[test]
fn binary_garbage_with_a_ptx_name() {
    // A fixed pseudo-random sequence (xorshift), NUL bytes included.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let garbage: Vec<u8> = (0..1 << 16)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 56) as u8
        })
        .collect();
    bad_input("garbage.ptx", &garbage, "binary data");
}

/// LLVM bitcode (`BC\xc0\xde`, NVSHMEM's `libnvshmem_device_sm_90.bc`): named as such, with the
/// way to PTX.
#[test]
fn llvm_bitcode() {
    let mut bytes = b"BC\xc0\xde\x35\x14\x00\x00".to_vec();
    bytes.extend_from_slice(&[0x05, 0, 0, 0, 0x62, 0x0c, 0x30, 0x24]);
    bad_input("device.bc", &bytes, "LLVM bitcode, which fencelint does not read");
}

#[test]
fn non_utf8_bytes_in_a_comment() {
    let mut text = fs::read(repo().join(BAD)).unwrap();
    let at = text.windows(2).position(|w| w == b"//").unwrap() + 2;
    text.splice(at..at, [0xff, 0xfe, 0xc0]);
    let run = bad_input("latin1 comment.ptx", &text, "invalid UTF-8");
    // The file itself is still linted: its own finding is there too.
    assert_eq!(run.stdout.matches(FINDING).count(), 2, "{}", run.describe());
}

/// Found by the `pipeline` fuzz target: format detection looks at the first 64 KiB, and a
/// character across that boundary made it panic.
#[test]
fn a_character_across_the_detection_window() {
    let mut text = String::from("// ");
    text.push_str(&"x".repeat(65_534 - text.len()));
    text.push_str("\u{20ac}\n");
    let run = bad_input("window.sass", text.as_bytes(), "not recognised");
    assert!(!run.stderr.contains("panicked"), "{}", run.describe());
}

#[test]
fn non_utf8_bytes_in_an_identifier() {
    let text = fs::read_to_string(repo().join(BAD)).unwrap();
    let mut bytes = text.into_bytes();
    // Put an invalid byte inside the kernel's name and inside a register name.
    let name = bytes.windows(6).position(|w| w == b".entry").unwrap() + 7;
    bytes.insert(name + 1, 0xe9);
    let reg = bytes.windows(3).position(|w| w == b"%rd").unwrap() + 2;
    bytes.insert(reg, 0xff);
    bad_input("latin1 ident.ptx", &bytes, "invalid UTF-8");
}

#[test]
fn an_unterminated_block_comment() {
    let text = fs::read_to_string(repo().join(BAD)).unwrap();
    let at = text.find("ld.relaxed").unwrap();
    let text = format!("{}/* never closed\n{}", &text[..at], &text[at..]);
    bad_input("open comment.ptx", text.as_bytes(), "error[");
}

#[test]
fn an_unterminated_string() {
    let text =
        format!("{HEADER}.file 1 \"/src/never closed.cu\n.visible .entry k()\n{{\n\tret;\n}}\n");
    bad_input("open string.ptx", text.as_bytes(), "error[");
}

/// Compiled listings cut at the end of a line inside a function (a full disk, `head -n`, a
/// disassembler killed mid-write): every line left is well formed, so only the function's end
/// tells. Each listing is cut before the line of its first `EXIT`; whole, it has no such error.
#[test]
fn a_listing_cut_at_the_end_of_a_line() {
    let compiled = repo().join("fixtures/compiled/sm_90a");
    for (file, expected) in [
        ("noinline_poll.cuobjdump.sass", "no `..........` line closes its code"),
        ("noinline_poll.nvdisasm.sass", "can fall through"),
    ] {
        let text = fs::read_to_string(compiled.join(file)).unwrap();
        let whole = check(&[compiled.join(file).to_str().unwrap()], SHORT);
        assert_eq!(whole.code, Some(1), "{}", whole.describe());
        assert!(!whole.stdout.contains("truncated"), "{}", whole.describe());
        let first_exit = text.find("EXIT").unwrap();
        let cut = text[..first_exit].rfind('\n').unwrap() + 1;
        let run = bad_input(file, &text.as_bytes()[..cut], expected);
        assert!(run.stdout.contains("(the text looks truncated)"), "{}", run.describe());
    }
}

// ---------------------------------------------------------------------------------------------
// Large and deep inputs.

#[test]
fn a_hundred_megabyte_single_line() {
    // Release: 100 MB. Debug: 20 MB (the unoptimised parser is about ten times slower).
    let size = if cfg!(debug_assertions) { 20 << 20 } else { 100 << 20 };
    let mut text = format!("{HEADER}.visible .entry k(.param .u64 p) {{ ").into_bytes();
    let statement: &[u8] = b"ld.global.u32 %r1, [%rd1+4]; ";
    while text.len() < size {
        text.extend(statement);
    }
    text.extend(b"ret; }");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "long line.ptx", &text);
    drop(text);
    let limit = Duration::from_mins(4);
    let run = check(&[&path, &bad_fixture()], limit);
    // Text, source database and syntax tree of a 100 MB file; 4 GiB is the cap.
    run.assert_sane(limit, 4096);
    // Undeclared registers are reported, but the file is read and linted.
    assert!(matches!(run.code, Some(1 | 2)), "{}", run.describe());
    assert!(run.stderr.contains("2 files"), "{}", run.describe());
}

#[test]
fn a_hundred_thousand_nested_braces() {
    let depth = 100_000;
    let body = format!("{}\tmov.u32 %r2, 1;\n{}", "{".repeat(depth), "}".repeat(depth));
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "braces.ptx", kernel(&body));
    let run = check(&[&path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    assert!(matches!(run.code, Some(1 | 2)), "{}", run.describe());
    // And unbalanced: only openings, never closed.
    let path = write(dir.path(), "open braces.ptx", kernel(&"{".repeat(depth)));
    let run = check(&[&path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    assert_eq!(run.code, Some(2), "{}", run.describe());
    assert!(run.line_of(&path).contains("error["), "{}", run.describe());
}

#[test]
fn a_million_labels() {
    // Release: 1,000,000 labels, each a block with a conditional branch to the next. Debug:
    // 200,000.
    let n = if cfg!(debug_assertions) { 200_000 } else { 1_000_000 };
    let mut body = String::with_capacity(n * 40);
    for i in 0..n {
        let _ = writeln!(body, "$L{i}:\n\t@%p1 bra $L{};", i + 1);
    }
    let _ = writeln!(body, "$L{n}:");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "labels.ptx", kernel(&body));
    let limit = Duration::from_mins(4);
    let run = check(&[&path, &bad_fixture()], limit);
    run.assert_sane(limit, 2048);
    assert_eq!(run.code, Some(1), "{}", run.describe());
}

#[test]
fn a_function_of_five_million_instructions() {
    // Release: 5,000,000 instructions. Debug: 500,000.
    let n = if cfg!(debug_assertions) { 500_000 } else { 5_000_000 };
    let mut body = String::with_capacity(n * 36);
    for i in 0..n {
        let _ = writeln!(body, "\tld.global.u32 %r2, [%rd1+{}];", (i % 1024) * 4);
    }
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "huge.ptx", kernel(&body));
    drop(body);
    let limit = Duration::from_mins(5);
    let run = check(&[&path, &bad_fixture()], limit);
    run.assert_sane(limit, 6144);
    assert!(matches!(run.code, Some(0 | 1)), "{}", run.describe());
    assert!(run.stderr.contains("2 files, 2 functions"), "{}", run.describe());
}

/// A cuobjdump listing of about `mib` MiB: the committed fixture `sm_90a/mbarrier` (19 kernels,
/// no finding) over and over, each copy's kernels renamed, so that every function is a new one.
fn long_listing(mib: usize) -> String {
    let fixture =
        fs::read_to_string(repo().join("fixtures/compiled/sm_90a/mbarrier.cuobjdump.sass"))
            .expect("the compiled fixture");
    let first = fixture.find("\t\tFunction : ").expect("a function in the fixture");
    let (header, functions) = fixture.split_at(first);
    let mut listing = String::with_capacity(mib << 20);
    listing.push_str(header);
    let mut copy = 0;
    while listing.len() < mib << 20 {
        listing
            .push_str(&functions.replace("\t\tFunction : ", &format!("\t\tFunction : c{copy}_")));
        copy += 1;
    }
    listing
}

#[test]
fn a_listing_eight_times_longer_takes_no_more_memory() {
    // A listing of 8 MiB or more on disk is mapped and linted a function at a time, and the
    // pages already read are given back (`stream::release_pages`): peak memory stays where it
    // is whatever the file's length (67 MiB for both in a debug build). With the pages kept,
    // the longer listing peaked at 102 MiB.
    let dir = tempfile::tempdir().unwrap();
    let small = write(dir.path(), "small.sass", long_listing(8));
    let large = write(dir.path(), "large.sass", long_listing(64));
    let limit = Duration::from_mins(5);
    let peak = |path: &str| {
        let run = check(&[path, &bad_fixture()], limit);
        run.assert_sane(limit, SMALL_MIB);
        assert_eq!(run.code, Some(1), "{}", run.describe());
        assert!(!run.stdout.contains("large.sass:") && !run.stdout.contains("small.sass:"));
        run.peak_mib
    };
    let (small_peak, large_peak) = (peak(&small), peak(&large));
    assert!(
        large_peak <= small_peak + 16,
        "peak {large_peak} MiB for 64 MiB of listing, {small_peak} MiB for 8 MiB"
    );
}

/// PTX with `depth` natural loops nested inside one another, each polling a flag; the
/// analyses' walks and loop finding must stay iterative and within their budgets.
fn loop_nest(depth: usize) -> String {
    let mut body = String::with_capacity(depth * 80);
    for i in 0..depth {
        let _ = writeln!(body, "$H{i}:");
    }
    body.push_str("\tld.relaxed.gpu.global.u32 %r1, [%rd1];\n\tld.global.u32 %r2, [%rd1+4];\n");
    for i in (0..depth).rev() {
        let _ = writeln!(body, "\tsetp.eq.u32 %p1, %r1, {i};\n\t@%p1 bra $H{i};");
    }
    kernel(&body)
}

#[test]
fn a_loop_nest_ten_thousand_deep() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "deep loops.ptx", loop_nest(10_000));
    let limit = Duration::from_mins(5);
    let run = check(&[&path, &bad_fixture()], limit);
    run.assert_sane(limit, 2048);
    assert!(matches!(run.code, Some(1)), "{}", run.describe());
}

#[test]
fn a_pathological_function_reports_analysis_incomplete() {
    // A poll loop whose exit condition is computed from the polled value through more moves
    // than the backward-slice budget (`Budget::slice_steps`, 16,384) allows.
    let mut body = String::from("$POLL:\n\tld.relaxed.gpu.global.u32 %r1, [%rd1];\n");
    for _ in 0..20_000 {
        body.push_str("\tmov.u32 %r1, %r1;\n");
    }
    // Each move is its own definition, so the slice is 20,000 steps long.
    let body = body.replace("mov.u32 %r1, %r1;", "add.u32 %r1, %r1, 0;");
    let body = format!("{body}\tsetp.eq.u32 %p2, %r1, 0;\n\t@%p2 bra $POLL;\n");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "slice.ptx", kernel(&body));
    let run = check(&[&path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    let line = run.line_of(&path);
    assert!(line.contains("warning[analysis-incomplete]"), "{}", run.describe());
    assert!(line.contains("`k` stopped at its budget"), "{line}");
}

#[test]
fn a_header_with_thousands_of_back_edges_stays_bounded() {
    // 20,000 tests in a row, each branching back to one header: the loop of the i-th back edge
    // holds i blocks, 200 million in all, if every one were built (2.4 GB and a minute).
    let mut body = String::from("$H:\n\tld.relaxed.gpu.global.u32 %r1, [%rd1];\n");
    for i in 0..20_000 {
        writeln!(body, "\tsetp.eq.u32 %p2, %r1, {i};\n\t@%p2 bra $H;").unwrap();
    }
    body.push_str("\tld.global.u32 %r2, [%rd1+4];\n");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "latches.ptx", kernel(&body));
    let run = check(&[&path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    let incomplete = run
        .stdout
        .lines()
        .any(|l| l.starts_with(&path) && l.contains("warning[analysis-incomplete]"));
    assert!(incomplete, "{}", run.describe());
}

#[test]
fn calls_by_the_thousand_stay_bounded() {
    // A device function of 2,000 instructions that calls itself, another pair that call each
    // other, and a kernel that calls the first 60,000 times: inlined one copy per call, that is
    // 120 million instructions, and the text is over 1 MiB, so each callee would be parsed again
    // for each call. Inlining stops at its budget and at recursion.
    let mut text = String::from(HEADER);
    text.push_str(".func f(.param .b64 f_p)\n{\n\t.reg .b32 %r<4>;\n\t.reg .b64 %rd<4>;\n");
    text.push_str("\tld.param.u64 %rd1, [f_p];\n");
    for _ in 0..2_000 {
        text.push_str("\tld.relaxed.gpu.global.u32 %r1, [%rd1];\n");
    }
    text.push_str("\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd1;\n");
    text.push_str("\tcall.uni f, (param0);\n\t}\n\tret;\n}\n");
    text.push_str(".func g()\n{\n\tcall.uni h, ();\n\tret;\n}\n");
    text.push_str(".func h()\n{\n\tcall.uni g, ();\n\tret;\n}\n");
    let mut body = String::new();
    for _ in 0..60_000 {
        body.push_str("\t{\n\t.param .b64 param0;\n\tst.param.b64 [param0], %rd1;\n");
        body.push_str("\tcall.uni f, (param0);\n\t}\n");
    }
    body.push_str("\tcall.uni g, ();\n");
    text.push_str(&kernel(&body));
    assert!(text.len() > 2 << 20);
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "calls.ptx", &text);
    let run = check(&[&path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
}

#[test]
fn calls_of_thousands_of_subroutines_stay_bounded() {
    // 10,000 `CALL.REL` into 10,000 places of one long run of code with no `RET`: each walk for
    // the target's subroutine would go to the end of the run, 50 million steps in all.
    let n = 10_000u64;
    let mut text = String::from("\n\tcode for sm_90a\n\t.target\tsm_90a\n\n\t\tFunction : k\n");
    text.push_str(
        "\t.headerflags\t@\"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n",
    );
    for i in 0..n {
        writeln!(
            text,
            "        /*{:04x}*/                   CALL.REL.NOINC {:#x} ;",
            i * 16,
            (n + 1 + i) * 16
        )
        .unwrap();
    }
    writeln!(text, "        /*{:04x}*/                   EXIT ;", n * 16).unwrap();
    for i in (n + 1)..=(2 * n) {
        writeln!(
            text,
            "        /*{:04x}*/                   LDG.E.STRONG.GPU R0, desc[UR4][R4.64] ;",
            i * 16
        )
        .unwrap();
    }
    writeln!(text, "        /*{:04x}*/                   EXIT ;", (2 * n + 1) * 16).unwrap();
    text.push_str("\t\t..........\n");
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "calls.sass", &text);
    let run = check(&[&path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
}

// ---------------------------------------------------------------------------------------------
// Paths.

#[test]
fn an_unreadable_file() {
    let dir = tempfile::tempdir().unwrap();
    let good = fs::read(repo().join(BAD)).unwrap();
    if is_root() {
        // Root reads a file whatever its mode, so `chmod 000` proves nothing here; a path
        // through a regular file (ENOTDIR) cannot be read by anyone.
        eprintln!("running as root: `chmod 000` is readable, testing a path through a file");
        let file = write(dir.path(), "file.ptx", &good);
        let path = format!("{file}/inner.ptx");
        let run = check(&[&path, &bad_fixture()], SHORT);
        run.assert_sane(SHORT, SMALL_MIB);
        assert_eq!(run.code, Some(2), "{}", run.describe());
        assert!(run.line_of(&path).contains("error[input-error]: cannot read"));
    } else {
        let path = write(dir.path(), "locked.ptx", &good);
        fs::set_permissions(&path, fs::Permissions::from_mode(0o000)).unwrap();
        let run = check(&[&path, &bad_fixture()], SHORT);
        run.assert_sane(SHORT, SMALL_MIB);
        assert_eq!(run.code, Some(2), "{}", run.describe());
        assert!(run.line_of(&path).contains("error[input-error]: cannot read"));
    }
}

#[test]
fn a_fifo_in_a_searched_directory_is_not_opened() {
    // Opening a FIFO nobody writes to blocks for ever; a directory search must not do it.
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("pipe.ptx");
    let status = Command::new("mkfifo").arg(&fifo).status().expect("mkfifo");
    assert!(status.success());
    let dir_arg = dir.path().to_str().unwrap();
    let run = check(&[dir_arg, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    assert_eq!(run.code, Some(2), "{}", run.describe());
    let line = run.line_of(fifo.to_str().unwrap());
    assert!(line.contains("not a regular file"), "{line}");
}

#[test]
fn a_directory_with_a_symlink_loop() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("tree");
    fs::create_dir_all(root.join("sub")).unwrap();
    std::os::unix::fs::symlink(&root, root.join("sub/back")).unwrap();
    std::os::unix::fs::symlink("self.ptx", root.join("self.ptx")).unwrap();
    fs::copy(repo().join(BAD), root.join("sub/poll.ptx")).unwrap();
    let run = check(&[root.to_str().unwrap()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    // The file in the tree is linted once, not once per trip around the loop.
    assert_eq!(run.stdout.matches(FINDING).count(), 1, "{}", run.describe());
    // The self-referencing link is reported by name.
    let link = root.join("self.ptx");
    let link_line = run.line_of(link.to_str().unwrap());
    assert!(link_line.contains("error[input-error]"), "{link_line}");
    assert_eq!(run.code, Some(2), "{}", run.describe());
}

#[test]
fn a_path_with_spaces_and_non_ascii_characters() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("a folder with spaces/çà et là ✓");
    fs::create_dir_all(&sub).unwrap();
    let path = sub.join("poll kernel ü.ptx");
    fs::copy(repo().join(BAD), &path).unwrap();
    let path = path.to_str().unwrap();
    let run = check(&[path], SHORT);
    assert_eq!(run.code, Some(1), "{}", run.describe());
    assert!(run.line_of(path).contains(FINDING), "{}", run.describe());
    // And found by a directory search too.
    let run = check(&[dir.path().to_str().unwrap()], SHORT);
    assert!(run.line_of(path).contains(FINDING), "{}", run.describe());
}

// ---------------------------------------------------------------------------------------------
// Binaries and the disassembler.

/// Whether the real tools were found; when not, the run must say how to install them.
fn tools_found(run: &Run) -> bool {
    if run.stdout.contains(INSTALL) {
        eprintln!("NOT RUN with real tools: NVIDIA's cuobjdump/nvdisasm not found");
        assert_eq!(run.code, Some(2), "{}", run.describe());
        return false;
    }
    true
}

#[test]
fn a_shared_library_without_cuda_code() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("libhost.so");
    // Any host ELF will do: this test program.
    fs::copy(std::env::current_exe().unwrap(), &path).unwrap();
    let path = path.to_str().unwrap();
    let run = check(&[path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    if !tools_found(&run) {
        return;
    }
    assert_eq!(run.code, Some(2), "{}", run.describe());
    assert!(run.line_of(path).contains("no CUDA code found"), "{}", run.describe());
}

#[test]
fn a_corrupt_cubin() {
    let dir = tempfile::tempdir().unwrap();
    let mut bytes = fs::read(repo().join(CUBIN)).unwrap();
    // Keep the ELF header, scramble the rest.
    for (i, b) in bytes.iter_mut().enumerate().skip(64) {
        *b ^= (i as u8).wrapping_mul(151) | 1;
    }
    let path = write(dir.path(), "corrupt.cubin", &bytes);
    let run = check(&[&path, &bad_fixture()], SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    if !tools_found(&run) {
        return;
    }
    assert_eq!(run.code, Some(2), "{}", run.describe());
    assert!(run.line_of(&path).contains("error[input-error]"), "{}", run.describe());
}

/// A folder whose `nvdisasm` (and `cuobjdump`) is the shell script `script`.
fn fake_tools(script: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for tool in ["nvdisasm", "cuobjdump"] {
        let path = dir.path().join(tool);
        fs::write(&path, format!("#!/bin/sh\n{script}\n")).unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).unwrap();
    }
    dir
}

/// Lints the committed cubin with the fake tools of `tools`; the cubin's line must hold each
/// of `expected`.
fn with_tools(tools: &Path, extra: &[&str], expected: &[&str]) -> Run {
    let cubin = repo().join(CUBIN);
    let cubin = cubin.to_str().unwrap();
    let mut args = vec!["--cuda-bin", tools.to_str().unwrap()];
    args.extend_from_slice(extra);
    let bad = bad_fixture();
    args.extend([cubin, bad.as_str()]);
    let run = check(&args, SHORT);
    run.assert_sane(SHORT, SMALL_MIB);
    assert_eq!(run.code, Some(2), "{}", run.describe());
    let line = run.line_of(cubin);
    for want in expected {
        assert!(line.contains(want), "`{line}` should contain `{want}`");
    }
    run
}

#[test]
fn the_disassembler_missing() {
    let empty = tempfile::tempdir().unwrap();
    with_tools(empty.path(), &[], &["error[input-error]", "were not found", INSTALL]);
}

#[test]
fn the_disassembler_crashing() {
    let tools = fake_tools("echo 'simulated fault' >&2\nkill -SEGV $$");
    with_tools(tools.path(), &[], &["error[input-error]", "nvdisasm"]);
}

#[test]
fn the_disassembler_hanging() {
    let tools = fake_tools("sleep 100");
    let run = with_tools(tools.path(), &["--tool-timeout", "1"], &["killed"]);
    assert!(run.elapsed < Duration::from_secs(30), "{}", run.describe());
}

/// Interrupted while the tools run (Ctrl-C, a CI job's timeout): the temporary directory of
/// extracted cubins goes with the run, and the exit code says it was interrupted.
#[test]
fn an_interrupted_run_leaves_no_temporary_files() {
    let tools = fake_tools("sleep 20");
    let tmp = tempfile::tempdir().unwrap();
    let cubin = repo().join(CUBIN);
    let mut child = Command::new(env!("CARGO_BIN_EXE_fencelint"))
        .args(["check", "--cuda-bin", tools.path().to_str().unwrap(), cubin.to_str().unwrap()])
        .env("TMPDIR", tmp.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while fs::read_dir(tmp.path()).unwrap().next().is_none() {
        assert!(Instant::now() < deadline, "no temporary directory appeared");
        std::thread::sleep(Duration::from_millis(20));
    }
    // The fake cuobjdump is running (or about to): stop the run there.
    std::thread::sleep(Duration::from_millis(300));
    // SAFETY: `kill` has no memory-safety preconditions; the pid is our own child's.
    #[allow(unsafe_code)]
    let sent = unsafe { libc::kill(i32::try_from(child.id()).unwrap(), libc::SIGTERM) };
    assert_eq!(sent, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{status:?}");
    let left: Vec<_> = fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().path()).collect();
    assert!(left.is_empty(), "left behind: {left:?}");
}

/// A bare cubin (its file name says no architecture) whose listing is for an architecture newer
/// than any the semantics table was checked against, as a newer toolkit's nvdisasm prints it
/// (here a fake one prints the committed listing of the same cubin renamed to `sm_190a`): the
/// run says so once, as a listing file does, and the findings are still reported.
#[test]
fn a_bare_cubin_for_a_newer_architecture_says_so() {
    let listing = repo().join("fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass");
    let listing = listing.to_str().unwrap();
    let cubin = repo().join(CUBIN);
    let cubin = cubin.to_str().unwrap();
    let run_with = |script: &str| {
        let tools = fake_tools(script);
        let run = check(&["--cuda-bin", tools.path().to_str().unwrap(), cubin], SHORT);
        run.assert_sane(SHORT, SMALL_MIB);
        assert_eq!(run.code, Some(1), "{}", run.describe());
        run
    };
    let notes =
        |run: &Run| run.stdout.lines().filter(|l| l.contains("note[unknown-architecture]")).count();
    let newer = run_with(&format!("sed 's/sm_90a/sm_190a/g' '{listing}'"));
    assert_eq!(notes(&newer), 1, "{}", newer.describe());
    let note = newer.line_of(cubin);
    assert!(note.contains(":1:1: note[unknown-architecture]: `sm_190a`"), "{note}");
    let known = run_with(&format!("cat '{listing}'"));
    assert_eq!(notes(&known), 0, "{}", known.describe());
    let findings = |run: &Run| run.stdout.lines().filter(|l| l.contains("error[")).count();
    assert!(findings(&known) > 0);
    assert_eq!(findings(&newer), findings(&known));
}

/// A disassembler that no longer reads the cubin's architecture (nvdisasm 13 and `sm_70`, as
/// in the multi-architecture libraries of the `bitsandbytes` wheel): the error says so and
/// names the way out.
#[test]
fn the_disassembler_refusing_an_old_architecture() {
    let tools = fake_tools(
        "echo 'nvdisasm fatal   : CUDA architecture \"SM70\" is deprecated. Please use CUDA toolkit 13.0 or earlier' >&2\nexit 1",
    );
    with_tools(
        tools.path(),
        &[],
        &["error[input-error]", "is deprecated", "no longer reads", "`--arch`", "`--cuda-bin`"],
    );
}

/// A cubin with code whose disassembly is empty (it used to pass silently): the listing is
/// missing, not the code.
#[test]
fn the_disassembler_printing_nothing() {
    let tools = fake_tools("exit 0");
    with_tools(tools.path(), &[], &["error[input-error]", "no function could be read"]);
}

#[test]
fn the_disassembler_printing_garbage() {
    // Lines that look like nothing nvdisasm prints, and bytes that are not UTF-8.
    let tools = fake_tools(
        "i=0; while [ $i -lt 2000 ]; do echo \"@@ ?? $i {{ ]] /*\"; printf '\\377\\376\\n'; i=$((i+1)); done",
    );
    with_tools(tools.path(), &[], &["error["]);
}
