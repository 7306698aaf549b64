//! Linting compiled binaries: cubins, fat binaries, host objects, shared libraries and
//! executables that embed CUDA code.
//!
//! One `cuobjdump -xelf -xptx` run extracts the cubins and PTX files of the selected
//! architectures into a private temporary directory, where they get names of our own; every cubin is
//! disassembled by `nvdisasm -c -gi` (or `cuobjdump -sass`) on a thread pool, and the listing is
//! read as a stream, cut into functions and linted function by function, so that no whole
//! listing is ever held in memory or written to disk. Only functions with findings are kept.
//!
//! A cubin built with `-lineinfo` carries the PTX it was assembled from (section
//! `.nv_debug_ptx_txt`). Such a cubin is disassembled with `-gp` as well, so that every SASS
//! instruction names its PTX line, and each function is also checked by the pair rules
//! (`ptxas-reordered-across-wait`) against that PTX, with the ptxas version from the cubin's
//! `.note.nv.tkinfo` note.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use fencelint_diagnostics::Diagnostic;
use fencelint_linter::{InputKind, PairedPtx, Settings, Split, reorder};
use fencelint_sass::{Arch, FunctionSplitter, SassChunk};
use fencelint_source::{Excerpt, FileId, TextRange};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use super::elf::{CodeFunction, Elf};
use super::linking;
use super::names;
use super::snippets::{self, Snippet};
use super::tools::{self, INSTALL_HINT, Tools};

/// The id that diagnostics carry until their lines are cut out.
const PLACEHOLDER: FileId = FileId(u32::MAX);

/// The id of the cubin's own PTX ([`Companion`]) until it is registered.
pub(crate) const COMPANION: FileId = FileId(u32::MAX - 1);

/// The ELF machine number of CUDA cubins.
const EM_CUDA: u16 = 190;

/// The temporary directories of the binaries being linted, for the signal handler.
static TEMP_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Keeps a temporary directory on the list that an interruption removes, while it lives.
///
/// `TempDir` removes its directory when dropped, which a signal skips: a library audit stopped
/// with Ctrl-C, or by a CI job's timeout, left its extracted cubins behind (hundreds of
/// megabytes for a large library). SIGINT, SIGTERM and SIGHUP now remove every listed directory
/// and end the run with exit code 130. The handler is installed with the first binary.
struct RemovedOnSignal(PathBuf);

impl RemovedOnSignal {
    fn new(dir: &Path) -> Self {
        static INSTALLED: OnceLock<()> = OnceLock::new();
        INSTALLED.get_or_init(|| {
            // ctrlc runs the handler on a thread of its own, not inside the signal: it may
            // take the lock and touch the file system.
            let _ = ctrlc::set_handler(|| {
                let dirs = TEMP_DIRS.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
                for dir in dirs.iter() {
                    let _ = std::fs::remove_dir_all(dir);
                }
                std::process::exit(130);
            });
        });
        TEMP_DIRS.lock().unwrap_or_else(std::sync::PoisonError::into_inner).push(dir.to_owned());
        Self(dir.to_owned())
    }
}

impl Drop for RemovedOnSignal {
    fn drop(&mut self) {
        TEMP_DIRS
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .retain(|d| *d != self.0);
    }
}

/// Options of `fencelint check` that concern binaries.
#[derive(Clone, Debug)]
pub(crate) struct BinaryOptions {
    /// Architecture numbers to keep (`90` keeps `sm_90`, `sm_90a`); empty keeps all.
    pub archs: Vec<u32>,
    pub cuda_bin: Option<PathBuf>,
    pub timeout: Duration,
    pub progress: bool,
}

/// Whether the first bytes of a file are an ELF header, a CUDA fat-binary header or a static
/// library's (`ar` archive) signature.
pub(crate) fn is_binary_magic(head: &[u8]) -> bool {
    head.starts_with(b"\x7fELF")
        || head.starts_with(&[0x50, 0xed, 0x55, 0xba])
        || head.starts_with(AR_MAGIC)
}

/// The signature of an `ar` archive (a static library, `libfoo.a`).
pub(crate) const AR_MAGIC: &[u8] = b"!<arch>\n";

/// Reads an `--arch` value (`sm_90`, `sm_90a`, `compute_90`, `90`) into its number.
pub(crate) fn parse_arch(text: &str) -> Option<u32> {
    let rest = ["sm_", "compute_", "sm"].iter().find_map(|p| text.strip_prefix(p)).unwrap_or(text);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let suffix = &rest[digits.len()..];
    if digits.is_empty() || !(suffix.is_empty() || suffix.chars().all(|c| c.is_ascii_lowercase())) {
        return None;
    }
    digits.parse().ok()
}

/// A text with findings: its name, the lines its labels point at, and its diagnostics (label
/// `file` is the index of a snippet, see [`snippets::cut`], or [`COMPANION`] for labels in the
/// cubin's own PTX).
pub(crate) struct Finding {
    pub name: String,
    /// The cubin or PTX it came from, `lib.so[sm_90a:name.sm_90a.cubin]`: the file that
    /// `--statistics` counts.
    pub unit: String,
    pub snippets: Vec<Snippet>,
    pub diagnostics: Vec<Diagnostic>,
    /// The PTX that the diagnostics' [`COMPANION`] labels point into.
    pub companion: Option<Arc<CompanionText>>,
}

/// The text of the PTX that a `-lineinfo` cubin carries, kept with the findings that point into
/// it after the cubin's lowered PTX is dropped.
pub(crate) struct CompanionText {
    /// `lib.so[sm_90a:name.sm_90a.cubin]:.nv_debug_ptx_txt`.
    pub name: String,
    pub text: String,
}

/// The PTX that a `-lineinfo` cubin carries, prepared for the pair rules: held by the cubin
/// until its last part is linted (the lowered PTX of a large GEMM cubin is hundreds of
/// megabytes; every cubin's, held to the end, took the `_turbomind` extension of lmdeploy 0.18
/// to 1.5 GB).
pub(crate) struct Companion {
    source: Arc<CompanionText>,
    paired: PairedPtx,
    /// `ptxas 13.2.78`, from the cubin's notes.
    producer: Option<String>,
}

/// What linting one binary gave.
pub(crate) struct BinaryOutput {
    /// Texts with findings, in a deterministic order.
    pub findings: Vec<Finding>,
    /// Errors about the binary itself (the tool's stderr included).
    pub errors: Vec<String>,
    /// Functions linted (SASS functions and PTX entry points and functions).
    pub functions: usize,
    /// The binary held no CUDA code at all (a host-only library found in a directory).
    pub no_cuda: bool,
    /// The architectures of the cubins disassembled (`sm_90`), in the order first met.
    pub archs: Vec<String>,
    /// For each cubin whose functions call others by name without the call being followed,
    /// what was not followed and why, in the order of the cubins.
    pub unfollowed: Vec<UnfollowedCalls>,
    /// The calls that name no callee (`CALL.ABS.NOINC 0x0`, as cuobjdump prints a call when
    /// it disassembles in nvdisasm's place).
    pub unnamed_calls: fencelint_linter::UnnamedCalls,
    /// The cubins built as debug builds (`nvcc -G`: they carry `.debug_info`), by label, in the
    /// order of the cubins.
    pub debug_cubins: Vec<String>,
}

/// Calls by name of other functions that a cubin's functions make and that were not followed
/// (no copy of the callee's code was linted with the caller), summed over the cubin's parts.
/// A call of a function the driver provides (`vprintf`) or of an arithmetic helper is not
/// counted ([`linking::worth_following`]), nor one that the budget of linked text left out
/// (that caller says so itself).
pub(crate) struct UnfollowedCalls {
    /// The cubin (`lib.so[sm_80:lib.414.sm_80.cubin]`).
    pub cubin: String,
    /// The functions that make such calls.
    pub functions: usize,
    /// The functions they name.
    pub callees: BTreeSet<String>,
    /// Why they were not followed.
    pub reason: String,
}

/// One cubin or PTX file of a binary.
struct Unit {
    binary: usize,
    /// The name `cuobjdump` listed (or the file name of a bare cubin).
    name: String,
    /// The member of a static library (`init.cu.o` of `lib.a`) that holds the unit.
    member: Option<String>,
    arch: Option<String>,
    ptx: bool,
    /// Where the unit is on disk, once extracted.
    path: Option<PathBuf>,
    size: u64,
    /// For a part of a large cubin: the symbol indices of its functions (`nvdisasm -fun`).
    functions: Option<Vec<usize>>,
    /// The index of the unit before large cubins were split: the parts of one cubin share it.
    whole: usize,
}

#[derive(Default)]
struct UnitOutput {
    findings: Vec<Finding>,
    error: Option<String>,
    functions: usize,
    /// The architectures the listing names (`.target`, `code for`), which the name of a bare
    /// cubin need not.
    archs: Vec<Arch>,
    /// The calls by name that were not followed, and what the copies of functions that share
    /// a name do ([`UnfollowedCalls`]).
    unfollowed: Unfollowed,
    /// The calls that name no callee ([`BinaryOutput::unnamed_calls`]).
    unnamed_calls: fencelint_linter::UnnamedCalls,
}

/// What a cubin's parts did not follow, gathered until all are linted ([`UnfollowedCalls`]).
#[derive(Default)]
struct Unfollowed {
    /// For each function whose calls by name fell through, the names.
    functions: Vec<BTreeSet<String>>,
    /// For each name that several of the cubin's functions share ([`Linkable::shared`]): how
    /// many of its copies were linted alone and touch no memory other threads see, order none
    /// and call no function.
    idle_copies: BTreeMap<String, usize>,
}

impl Unfollowed {
    fn add(&mut self, other: Unfollowed) {
        self.functions.extend(other.functions);
        for (name, idle) in other.idle_copies {
            *self.idle_copies.entry(name).or_default() += idle;
        }
    }

    /// The functions that make calls worth saying, and the names those calls give: a call of a
    /// copy of a shared name is not, when every copy of that name was linted and none touches
    /// memory other threads see, orders it or calls another function (the compiler's division
    /// helpers): following it could not change what the caller shows.
    fn to_say(&self, linkable: &Linkable) -> (usize, BTreeSet<String>) {
        let idle = |callee: &String| {
            linkable.shared_name(callee).is_some_and(|name| {
                self.idle_copies
                    .get(name)
                    .is_some_and(|idle| Some(idle) == linkable.shared.get(name))
            })
        };
        let mut functions = 0;
        let mut callees = BTreeSet::new();
        for names in &self.functions {
            let mut any = false;
            for name in names.iter().filter(|name| !idle(name)) {
                any = true;
                callees.insert(name.clone());
            }
            functions += usize::from(any);
        }
        (functions, callees)
    }
}

impl UnitOutput {
    /// Records a function whose calls by name of `external` functions fell through: those worth
    /// following that are not held.
    fn calls_not_followed(&mut self, external: Vec<String>, held: Option<&Callees>) {
        let names: BTreeSet<String> = external
            .into_iter()
            .filter(|name| {
                linking::worth_following(name) && held.is_none_or(|c| !c.by_name.contains_key(name))
            })
            .collect();
        if !names.is_empty() {
            self.unfollowed.functions.push(names);
        }
    }

    /// Records what a copy of the shared name `name` does: whether it `matters` (touches memory
    /// other threads see, orders it or calls another function, as far as is known).
    fn copy_linted(&mut self, name: &str, matters: bool) {
        if !matters {
            *self.unfollowed.idle_copies.entry(name.to_owned()).or_default() += 1;
        }
    }

    fn saw(&mut self, chunk: &SassChunk) {
        if let Some(arch) = chunk.arch
            && !self.archs.contains(&arch)
        {
            self.archs.push(arch);
        }
    }
}

/// Lints binaries: lists and extracts every one, then disassembles and lints all their cubins
/// and PTX on one pool, largest first. Outputs come back in the order of `inputs`.
pub(crate) fn lint_binaries(
    inputs: &[(PathBuf, String)],
    options: &BinaryOptions,
    settings: &Settings,
) -> Vec<BinaryOutput> {
    let mut outputs: Vec<BinaryOutput> = inputs
        .iter()
        .map(|_| BinaryOutput {
            findings: Vec::new(),
            errors: Vec::new(),
            functions: 0,
            no_cuda: false,
            archs: Vec::new(),
            unfollowed: Vec::new(),
            unnamed_calls: fencelint_linter::UnnamedCalls::default(),
            debug_cubins: Vec::new(),
        })
        .collect();
    if inputs.is_empty() {
        return outputs;
    }
    let tools = Tools::discover(options.cuda_bin.as_deref());
    if tools.cuobjdump.is_none() && tools.nvdisasm.is_none() {
        let searched = match &options.cuda_bin {
            Some(dir) => format!("in `{}` (--cuda-bin)", dir.display()),
            None => "in --cuda-bin, FENCELINT_CUDA_BIN, PATH, CUDA_HOME, CUDA_PATH, /usr/local/cuda/bin or a pip wheel".to_owned(),
        };
        for output in &mut outputs {
            output.errors.push(format!(
                "cannot lint this binary: NVIDIA's `cuobjdump` and `nvdisasm` were not found {searched}; install them with `{INSTALL_HINT}` (or pass `--cuda-bin DIR`)"
            ));
        }
        return outputs;
    }
    let temp = match tempfile::Builder::new().prefix("fencelint-").tempdir() {
        Ok(temp) => temp,
        Err(err) => {
            for output in &mut outputs {
                output.errors.push(format!("cannot create a temporary directory: {err}"));
            }
            return outputs;
        }
    };
    let _removed_on_signal = RemovedOnSignal::new(temp.path());

    // Extract from every binary (one `cuobjdump` run each), several binaries at once.
    let prepared: Vec<Result<Vec<Unit>, Prepared>> = {
        use rayon::prelude::*;
        inputs
            .par_iter()
            .enumerate()
            .map(|(index, (path, _))| {
                let dir = temp.path().join(format!("b{index}"));
                prepare(index, path, &dir, &tools, options)
            })
            .collect()
    };
    let mut units: Vec<Unit> = Vec::new();
    for (index, prepared) in prepared.into_iter().enumerate() {
        match prepared {
            Ok(found) => units.extend(found),
            Err(Prepared::NoCuda(message)) => {
                outputs[index].no_cuda = true;
                outputs[index].errors.push(message);
            }
            Err(Prepared::Error(message)) => outputs[index].errors.push(message),
        }
    }

    let progress = Progress::new(if options.progress && !units.is_empty() {
        let bar =
            ProgressBar::with_draw_target(Some(units.len() as u64), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template(
            "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} cubins and PTX  {wide_msg}",
        ) {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        bar
    } else {
        ProgressBar::hidden()
    });

    for (whole, unit) in units.iter_mut().enumerate() {
        unit.whole = whole;
    }
    let cubins: Vec<OnceLock<Cubin>> = units.iter().map(|_| OnceLock::new()).collect();
    let parts_left: Vec<AtomicUsize> = units.iter().map(|_| AtomicUsize::new(0)).collect();
    let workers = workers();
    if tools.nvdisasm.is_some() {
        // Up to two parts a worker: nvdisasm's time is not proportional to code size, and
        // smaller parts even out the end of the run (NCCL sm_90 on 2 cores: 126.6 s with 2
        // parts, 121.6 s with 4; each part reloads the cubin, 1.7 s for NCCL's 108 MB one).
        units = split_large_cubins(units, workers, split_size());
    }

    for unit in &units {
        parts_left[unit.whole].fetch_add(1, Ordering::Relaxed);
    }
    // Largest first, so that the one huge cubin of a library does not start last.
    let mut order: Vec<usize> = (0..units.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(units[i].size));
    let results: Vec<Mutex<Option<UnitOutput>>> = units.iter().map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    let work = || {
        loop {
            let taken = next.fetch_add(1, Ordering::Relaxed);
            let Some(&i) = order.get(taken) else { break };
            let unit = &units[i];
            progress.unit(&unit_label(&inputs[unit.binary].1, unit));
            let cubin = cubins[unit.whole].get_or_init(|| {
                let companion = companion(unit, &inputs[unit.binary].1, &tools, settings);
                let (whole, callees, linkable) = linking(
                    unit,
                    tools.nvdisasm.as_deref(),
                    companion.is_some(),
                    options.timeout,
                    workers,
                );
                let held = whole || callees.is_some();
                let companion = Mutex::new(companion);
                let ptx_errors = Mutex::new(None);
                Cubin { companion, ptx_errors, whole, callees: Mutex::new(callees), held, linkable }
            });
            let output = lint_unit(
                unit,
                &inputs[unit.binary].1,
                &tools,
                options,
                settings,
                cubin,
                &progress,
            );
            *results[i].lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(output);
            // The held callees and the lowered PTX of a cubin go once its last part is linted;
            // the parse errors of that PTX are kept as a finding of their own.
            if parts_left[unit.whole].fetch_sub(1, Ordering::AcqRel) == 1 {
                cubin.callees.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
                let companion = cubin
                    .companion
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .take();
                if let Some(errors) =
                    companion.and_then(|c| ptx_errors(&c, unit_label(&inputs[unit.binary].1, unit)))
                {
                    *cubin.ptx_errors.lock().unwrap_or_else(std::sync::PoisonError::into_inner) =
                        Some(errors);
                }
            }
            progress.bar.inc(1);
        }
    };
    if let Ok(pool) = rayon::ThreadPoolBuilder::new().num_threads(workers).build() {
        pool.broadcast(|_| work());
    } else {
        work();
    }
    progress.bar.finish_and_clear();

    // For each cubin (by `Unit::whole`): its binary, its label and what its parts did not follow.
    let mut unfollowed: BTreeMap<usize, (usize, String, Unfollowed)> = BTreeMap::new();
    let mut debug_checked: BTreeSet<usize> = BTreeSet::new();
    for (unit, result) in units.iter().zip(results) {
        let result = result.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(result) = result else { continue };
        let output = &mut outputs[unit.binary];
        // The cubin's name says its architecture; where it does not (a bare cubin named by
        // its user), the listing does.
        let archs: Vec<String> = match unit.arch.as_ref().filter(|_| !unit.ptx) {
            Some(arch) => vec![arch.clone()],
            None => result.archs.iter().map(ToString::to_string).collect(),
        };
        for arch in archs {
            if !output.archs.contains(&arch) {
                output.archs.push(arch);
            }
        }
        output.functions += result.functions;
        output.findings.extend(result.findings);
        output.unnamed_calls.add(result.unnamed_calls);
        // Gathered over the cubin's parts, said once all are linted.
        let label =
            || (unit.binary, unit_label(&inputs[unit.binary].1, unit), Unfollowed::default());
        unfollowed.entry(unit.whole).or_insert_with(label).2.add(result.unfollowed);
        if let Some(error) = result.error {
            output.errors.push(error);
        }
        // Said once a cubin, whatever its parts.
        if !unit.ptx && debug_checked.insert(unit.whole) && is_debug_build(unit.path.as_deref()) {
            output.debug_cubins.push(unit_label(&inputs[unit.binary].1, unit));
        }
    }
    for (whole, (binary, cubin, calls)) in unfollowed {
        let Some(linked) = cubins[whole].get() else { continue };
        let (functions, callees) = calls.to_say(&linked.linkable);
        if functions > 0 {
            let reason = unfollowed_reason(linked.held, &linked.linkable, &callees);
            outputs[binary].unfollowed.push(UnfollowedCalls { cubin, functions, callees, reason });
        }
    }
    // Parse errors in a cubin's own PTX: the pair rules may have missed something there.
    for (whole, cubin) in cubins.into_iter().enumerate() {
        let Some(cubin) = cubin.into_inner() else { continue };
        let errors =
            cubin.ptx_errors.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(errors) = errors else { continue };
        let Some(unit) = units.iter().find(|u| u.whole == whole) else { continue };
        outputs[unit.binary].findings.push(errors);
    }
    drop(temp);
    outputs
}

enum Prepared {
    NoCuda(String),
    Error(String),
}

/// Lists the cubins and PTX of one binary, selects them by architecture and extracts them.
fn prepare(
    index: usize,
    path: &Path,
    dir: &Path,
    tools: &Tools,
    options: &BinaryOptions,
) -> Result<Vec<Unit>, Prepared> {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let bare_cubin = is_cubin(path);
    std::fs::create_dir_all(dir)
        .map_err(|err| Prepared::Error(format!("cannot create a temporary directory: {err}")))?;

    let Some(cuobjdump) = &tools.cuobjdump else {
        if bare_cubin {
            // A bare cubin needs only a disassembler.
            let name = file_name(path);
            return Ok(vec![Unit {
                binary: index,
                arch: arch_of_name(&name),
                name,
                member: None,
                ptx: false,
                path: Some(absolute),
                size: file_size(path),
                functions: None,
                whole: 0,
            }]);
        }
        return Err(Prepared::Error(format!(
            "cannot list the CUDA code of this binary: NVIDIA's `cuobjdump` was not found; install it with `{INSTALL_HINT}` (or pass `--cuda-bin DIR`)"
        )));
    };

    let list = |flag: &str| -> Result<Vec<String>, String> {
        let args = [OsString::from(flag), absolute.clone().into_os_string()];
        match tools::run_to_end(cuobjdump, &args, Some(dir), options.timeout) {
            Ok(out) => Ok(parse_listing(&String::from_utf8_lossy(&out))),
            Err(tools::ToolError::Failed { stderr, .. })
                if stderr.contains("does not contain device code") =>
            {
                Ok(Vec::new())
            }
            Err(err) => Err(err.describe(cuobjdump)),
        }
    };

    if bare_cubin {
        // A bare cubin that cuobjdump cannot list is still given to the disassembler, whose
        // message about a corrupt file is the clearer one.
        let name = list("-lelf")
            .ok()
            .and_then(|elf| elf.into_iter().next())
            .unwrap_or_else(|| file_name(path));
        let arch = arch_of_name(&name);
        if !selected(arch.as_deref(), &options.archs) {
            return Err(Prepared::NoCuda(format!(
                "the cubin is for {}, not for the architectures selected with --arch",
                arch.as_deref().unwrap_or("an unknown architecture")
            )));
        }
        return Ok(vec![Unit {
            binary: index,
            arch,
            name,
            member: None,
            ptx: false,
            path: Some(absolute),
            size: file_size(path),
            functions: None,
            whole: 0,
        }]);
    }

    let units = extract(cuobjdump, &absolute, dir, index, options)?;
    if !units.is_empty() {
        return Ok(units);
    }
    // Nothing selected was extracted: say what the binary holds (a rare path, so the two
    // listings are run only here).
    let (elf, ptx) = match (list("-lelf"), list("-lptx")) {
        (Ok(elf), Ok(ptx)) => (elf, ptx),
        (Err(err), _) | (_, Err(err)) => {
            return Err(Prepared::Error(format!(
                "cannot list the CUDA code of this binary: {err}"
            )));
        }
    };
    if elf.is_empty() && ptx.is_empty() {
        return Err(Prepared::NoCuda(
            "no CUDA code found: cuobjdump listed no cubin or PTX".to_owned(),
        ));
    }
    let mut present: Vec<String> = elf
        .iter()
        .chain(&ptx)
        .map(|name| arch_of_name(name).unwrap_or_else(|| "?".to_owned()))
        .collect();
    present.sort();
    present.dedup();
    Err(Prepared::NoCuda(format!(
        "no cubin or PTX for the architectures selected with --arch (the binary has: {})",
        present.join(", ")
    )))
}

/// Extracts the cubins and PTX of the selected architectures with one
/// `cuobjdump -xelf PATTERNS -xptx PATTERNS` run in a fresh directory, then moves each file to
/// a name of our own. The patterns are cuobjdump's partial names (`all`, or `.sm_90` for
/// `--arch sm_90`); what they match beyond the selection is deleted. Listing first
/// (`-lelf`, `-lptx`) and extracting by name took 4.9× as long on NCCL (11.8 s against 2.4 s for
/// its `sm_90` code), all of it before the first disassembler could start.
///
/// The files are taken from the directory, not from the tool's messages: only regular files
/// directly inside it, so that no name from the binary ever becomes a path of ours.
fn extract(
    cuobjdump: &Path,
    input: &Path,
    dir: &Path,
    index: usize,
    options: &BinaryOptions,
) -> Result<Vec<Unit>, Prepared> {
    let into = dir.join("x");
    std::fs::create_dir_all(&into)
        .map_err(|err| Prepared::Error(format!("cannot create a temporary directory: {err}")))?;
    let patterns = if options.archs.is_empty() {
        "all".to_owned()
    } else {
        let names: Vec<String> = options
            .archs
            .iter()
            .flat_map(|n| [format!(".sm_{n}"), format!(".compute_{n}")])
            .collect();
        names.join(",")
    };
    let run = |flags: &[&str]| {
        let mut args = Vec::new();
        for flag in flags {
            args.push(OsString::from(flag));
            args.push(OsString::from(&patterns));
        }
        args.push(input.as_os_str().to_owned());
        tools::run_to_end(cuobjdump, &args, Some(&into), options.timeout)
            .map(|out| String::from_utf8_lossy(&out).into_owned())
    };
    // Both kinds in one run; a cuobjdump that refuses the pair (only CUDA 13 was tried here)
    // gets one run per kind.
    let announced = run(&["-xelf", "-xptx"]).or_else(|err| match err {
        tools::ToolError::Failed { ref stderr, .. }
            if !stderr.contains("does not contain device code") =>
        {
            Ok(run(&["-xelf"])? + &run(&["-xptx"])?)
        }
        err => Err(err),
    });
    let announced = match announced {
        Ok(announced) => announced,
        Err(tools::ToolError::Failed { stderr, .. })
            if stderr.contains("does not contain device code") =>
        {
            return Err(Prepared::NoCuda(
                "no CUDA code found: cuobjdump listed no cubin or PTX".to_owned(),
            ));
        }
        Err(err) => {
            return Err(Prepared::Error(format!(
                "cannot extract the CUDA code of this binary: {}",
                err.describe(cuobjdump)
            )));
        }
    };
    let entries = std::fs::read_dir(&into)
        .map_err(|err| Prepared::Error(format!("cannot read a temporary directory: {err}")))?;
    let mut files: Vec<(bool, u64, String, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let is_file = entry.file_type().is_ok_and(|t| t.is_file());
        if !is_file {
            continue;
        }
        let name = entry.file_name().to_string_lossy().into_owned();
        files.push((is_ptx_name(&name), entry_number(&name), name, entry.path()));
    }
    // A file that cuobjdump said it extracted but that is not there is reported when its unit
    // is linted (it has no path), never dropped silently.
    let mut missing = Vec::new();
    // A static library's files are announced after the member that holds them
    // (`member /path/lib.a:init.cu.o:`).
    let mut members: HashMap<String, String> = HashMap::new();
    let mut member: Option<&str> = None;
    for line in announced.lines() {
        if let Some(rest) = line.strip_prefix("member ") {
            // The name goes into labels only; one with control characters is not shown.
            member = rest
                .strip_suffix(':')
                .and_then(|r| r.rsplit_once(':'))
                .map(|(_, m)| m)
                .filter(|m| !m.is_empty() && !m.chars().any(char::is_control));
            continue;
        }
        let Some((_, rest)) = line.strip_prefix("Extracting ").and_then(|l| l.split_once(": "))
        else {
            continue;
        };
        // `name.sm_90.ptx -arch=sm_90` for PTX: the ptxas options follow the name.
        let rest = rest.trim();
        let listed = files.iter().find(|(_, _, name, _)| {
            rest == name || rest.strip_prefix(name.as_str()).is_some_and(|r| r.starts_with(' '))
        });
        let name = listed.map_or_else(
            || {
                let name = rest.split(" -").next().unwrap_or(rest).to_owned();
                missing.push((is_ptx_name(&name), entry_number(&name), name.clone()));
                name
            },
            |(_, _, name, _)| name.clone(),
        );
        if let Some(member) = member {
            members.insert(name, member.to_owned());
        }
    }
    // cuobjdump's own order: cubins, then PTX, each by the number in its name.
    files.sort();
    missing.sort();
    let mut units: Vec<Unit> = missing
        .into_iter()
        .filter_map(|(ptx, _, name)| {
            let arch = arch_of_name(&name);
            selected(arch.as_deref(), &options.archs).then_some(Unit {
                binary: index,
                arch,
                member: members.get(&name).cloned(),
                name,
                ptx,
                size: 0,
                path: None,
                functions: None,
                whole: 0,
            })
        })
        .collect();
    for (i, (ptx, _, name, extracted)) in files.into_iter().enumerate() {
        let arch = arch_of_name(&name);
        if !selected(arch.as_deref(), &options.archs) {
            let _ = std::fs::remove_file(&extracted);
            continue;
        }
        let own = dir.join(format!(
            "{}{i}.{}",
            if ptx { "p" } else { "c" },
            if ptx { "ptx" } else { "cubin" }
        ));
        // A file that cannot be moved is reported when its unit is linted (it has no path).
        let path = std::fs::rename(&extracted, &own).is_ok().then_some(own);
        units.push(Unit {
            binary: index,
            arch,
            member: members.get(&name).cloned(),
            name,
            ptx,
            size: path.as_deref().map_or(0, file_size),
            path,
            functions: None,
            whole: 0,
        });
    }
    Ok(units)
}

/// Whether an extracted file is PTX (`name.sm_90.ptx`) rather than a cubin.
fn is_ptx_name(name: &str) -> bool {
    Path::new(name).extension().is_some_and(|ext| ext.eq_ignore_ascii_case("ptx"))
}

/// The number cuobjdump gives an embedded file (`libnccl.so.401.sm_90.cubin` → 401): the
/// numeric component just before the architecture; `u64::MAX` when there is none.
fn entry_number(name: &str) -> u64 {
    let parts: Vec<&str> = name.split('.').collect();
    parts
        .iter()
        .rposition(|part| part.starts_with("sm_") || part.starts_with("compute_"))
        .and_then(|at| at.checked_sub(1))
        .and_then(|at| parts[at].parse().ok())
        .unwrap_or(u64::MAX)
}

/// `ELF file    1: name.sm_90.cubin` / `PTX file    1: name.sm_90.ptx` lines into names.
fn parse_listing(text: &str) -> Vec<String> {
    text.lines()
        .filter(|line| line.starts_with("ELF file") || line.starts_with("PTX file"))
        .filter_map(|line| line.split_once(": ").map(|(_, name)| name.trim().to_owned()))
        .filter(|name| !name.is_empty())
        .collect()
}

/// The `sm_XX[a-z]` component of a listed name (`libnccl.so.3.sm_90.cubin` → `sm_90`).
fn arch_of_name(name: &str) -> Option<String> {
    name.split('.')
        .rev()
        .find(|part| {
            part.strip_prefix("sm_")
                .or_else(|| part.strip_prefix("compute_"))
                .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
        })
        .map(str::to_owned)
}

fn selected(arch: Option<&str>, archs: &[u32]) -> bool {
    archs.is_empty() || arch.and_then(parse_arch).is_some_and(|n| archs.contains(&n))
}

fn is_cubin(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 20];
    let Ok(mut file) = std::fs::File::open(path) else { return false };
    if file.read_exact(&mut head).is_err() || !head.starts_with(b"\x7fELF") {
        return false;
    }
    // e_machine at offset 18, in the file's byte order (EI_DATA: 1 little, 2 big).
    let machine = if head[5] == 2 {
        u16::from_be_bytes([head[18], head[19]])
    } else {
        u16::from_le_bytes([head[18], head[19]])
    };
    machine == EM_CUDA
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map_or_else(|| path.display().to_string(), |n| n.to_string_lossy().into_owned())
}

fn file_size(path: &Path) -> u64 {
    std::fs::metadata(path).map_or(0, |m| m.len())
}

/// `lib.so[sm_90a:name.sm_90a.cubin]`; `lib.a(member.o)[sm_90a:lib.3.sm_90a.cubin]` for a
/// static library's member.
fn unit_label(binary: &str, unit: &Unit) -> String {
    let binary = match &unit.member {
        Some(member) => format!("{binary}({member})"),
        None => binary.to_owned(),
    };
    match &unit.arch {
        Some(arch) => format!("{binary}[{arch}:{}]", unit.name),
        None => format!("{binary}[{}]", unit.name),
    }
}

/// The cubin's own PTX when it carries one and a pair rule is enabled (and `nvdisasm`, which
/// alone prints PTX line markers, is there).
fn companion(
    unit: &Unit,
    binary: &str,
    tools: &Tools,
    settings: &Settings,
) -> Option<Arc<Companion>> {
    if unit.ptx
        || tools.nvdisasm.is_none()
        || !settings.enabled().any(|(rule, _)| rule.meta().dialects.pair)
    {
        return None;
    }
    let mut elf = Elf::open(unit.path.as_deref()?)?;
    let bytes = elf.section(".nv_debug_ptx_txt")?;
    let text = reorder::ptx_from_debug_section(&bytes);
    drop(bytes);
    let producer = elf.section(".note.nv.tkinfo").and_then(|note| reorder::ptxas_version(&note));
    let paired = PairedPtx::new(COMPANION, &text);
    let name = format!("{}:.nv_debug_ptx_txt", unit_label(binary, unit));
    Some(Arc::new(Companion { source: Arc::new(CompanionText { name, text }), paired, producer }))
}

/// The parse errors of a cubin's own PTX, as a finding of their own (`unit` is the cubin's
/// label); `None` when there are none.
fn ptx_errors(companion: &Companion, unit: String) -> Option<Finding> {
    if companion.paired.diagnostics().is_empty() {
        return None;
    }
    let mut diagnostics = companion.paired.diagnostics().to_vec();
    let text = &companion.source.text;
    let snippets = snippets::cut(text, Excerpt::default(), COMPANION, &mut diagnostics);
    let name = companion.source.name.clone();
    Some(Finding { name, unit, snippets, diagnostics, companion: None })
}

/// The progress bar of a long audit, on a terminal: cubins and PTX done of the total (the bar),
/// and in its message the functions linted, the disassembly's throughput and the function being
/// linted now.
struct Progress {
    bar: ProgressBar,
    started: Instant,
    functions: AtomicU64,
    /// Bytes of disassembly linted.
    bytes: AtomicU64,
}

impl Progress {
    fn new(bar: ProgressBar) -> Self {
        Self {
            bar,
            started: Instant::now(),
            functions: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        }
    }

    /// A cubin or PTX file is started.
    fn unit(&self, label: &str) {
        if !self.bar.is_hidden() {
            self.bar.set_message(label.to_owned());
        }
    }

    /// `function` of the cubin `label`, `bytes` of disassembly, is about to be linted.
    fn function(&self, label: &str, function: &str, bytes: usize) {
        let done = self.functions.fetch_add(1, Ordering::Relaxed);
        let read = self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
        if self.bar.is_hidden() {
            return;
        }
        let readable = names::demangle(function);
        let name = readable.as_deref().unwrap_or(function);
        let message = progress_message(done, read, self.started.elapsed(), label, name);
        self.bar.set_message(message);
    }
}

/// `1,234 functions, 210 MB/s  lib.so[sm_90:lib.1.sm_90.cubin]: kernel(int*)`: how many
/// functions were linted, how fast the disassembly is read, and what is linted now.
fn progress_message(
    functions: u64,
    bytes: u64,
    elapsed: Duration,
    unit: &str,
    function: &str,
) -> String {
    let seconds = elapsed.as_secs_f64();
    #[allow(clippy::cast_precision_loss)]
    let rate = if seconds > 0.0 { bytes as f64 / seconds / 1e6 } else { 0.0 };
    let plural = if functions == 1 { "" } else { "s" };
    // One decimal below 10 MB/s: small cubins are read at a fraction of one.
    let digits = usize::from(rate < 10.0);
    format!("{} function{plural}, {rate:.digits$} MB/s  {unit}: {function}", thousands(functions))
}

/// `1234567` as `1,234,567`.
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

fn lint_unit(
    unit: &Unit,
    binary: &str,
    tools: &Tools,
    options: &BinaryOptions,
    settings: &Settings,
    cubin: &Cubin,
    progress: &Progress,
) -> UnitOutput {
    let callees = cubin.callees.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let companion =
        cubin.companion.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
    let (companion, callees) = (companion.as_ref(), callees.as_ref());
    let label = unit_label(binary, unit);
    let mut output = UnitOutput::default();
    let Some(path) = &unit.path else {
        output.error = Some(format!("`{}` could not be extracted from the binary", unit.name));
        return output;
    };
    if unit.ptx {
        match std::fs::read(path) {
            Ok(bytes) => {
                let text = String::from_utf8_lossy(&bytes).into_owned();
                let lint =
                    fencelint_linter::lint_text(PLACEHOLDER, &text, InputKind::Ptx, settings);
                output.functions += lint.functions;
                if !lint.diagnostics.is_empty() {
                    let name = label.clone();
                    output.findings.push(finding(name, &label, &text, lint.diagnostics, None));
                }
            }
            Err(err) => {
                output.error = Some(format!("cannot read the extracted `{}`: {err}", unit.name));
            }
        }
        return output;
    }

    // A small cubin whose functions call each other by name is linted whole, so that the calls
    // are followed (nvdisasm names the callee; cuobjdump prints `0x0`).
    let whole = cubin.whole;
    // In a larger one, the callable functions were disassembled before the rest (and are left
    // out of the stream); each part of a cubin lints those among its functions.
    let mine =
        |index: usize| unit.functions.as_ref().is_none_or(|own| own.binary_search(&index).is_ok());
    let streamed: Option<Vec<usize>> = match (callees, &unit.functions) {
        (Some(callees), Some(own)) => Some(
            own.iter().copied().filter(|i| callees.indices.binary_search(i).is_err()).collect(),
        ),
        (Some(callees), None) => Some(callees.others.clone()),
        (None, own) => own.clone(),
    };
    let (tool, args) = match (&tools.nvdisasm, &tools.cuobjdump) {
        (Some(nvdisasm), _) => {
            let encodings = wants_encodings(unit.arch.as_deref());
            (nvdisasm, nvdisasm_args(path, companion.is_some(), encodings, streamed.as_deref()))
        }
        (None, Some(cuobjdump)) => {
            (cuobjdump, vec![OsString::from("-sass"), path.clone().into_os_string()])
        }
        (None, None) => unreachable!("checked before any unit is made"),
    };
    // `held`: the chunk's index among the held functions, whose calls are already known.
    let lint_chunk = |chunk: &SassChunk, held: Option<usize>, output: &mut UnitOutput| {
        progress.function(&label, &chunk.function, chunk.text.len());
        output.saw(chunk);
        let closure = callees
            .map(|c| match held {
                Some(k) => {
                    c.closure(c.calls[k].iter().copied(), &chunk.function, settings, companion)
                }
                None => c.closure(c.called_by(&chunk.text), &chunk.function, settings, companion),
            })
            .unwrap_or_default();
        let mut not_followed = None;
        if let (Some(callees), false) = (callees, closure.is_empty()) {
            if callees.may_link(held, chunk) {
                let mut parts = vec![chunk];
                parts.extend(closure.iter().map(|&k| &callees.chunks[k]));
                // The function's own findings, less those in a callee's code that the callee
                // shows alone (it reports them itself).
                let shown = |k: usize, place: TextRange, diagnostic: &Diagnostic| {
                    callees.shows_alone(closure[k], place, diagnostic, settings, companion)
                };
                let (_, external) =
                    lint_linked(&parts, &label, settings, companion, output, Some(&shown));
                output.functions += 1;
                if let Some(name) = cubin.linkable.shared_name(&chunk.function) {
                    output.copy_linted(name, true);
                }
                // Calls of functions that are not held, from the function or its callees.
                output.calls_not_followed(external, Some(callees));
                return;
            }
            let budget = callees.budget;
            let why = linking::NotFollowed::Budget(budget);
            not_followed = Some(linking::calls_not_followed(&chunk.function, why, PLACEHOLDER));
        }
        // A held function that calls no other held one (or whose calls the budget leaves out)
        // was linted alone already if a caller asked ([`Callees::shows_alone`]).
        let (functions, mut diagnostics, external, matters) =
            if let (Some(callees), Some(k)) = (callees, held) {
                let lint = callees.alone(k, settings, companion);
                output.unnamed_calls.add(lint.unnamed_calls);
                let matters = linking::matters_to_callers(lint);
                (lint.functions, lint.diagnostics.clone(), lint.external_calls.clone(), matters)
            } else {
                let lint = lint_alone(chunk, settings, companion);
                output.unnamed_calls.add(lint.unnamed_calls);
                let matters = linking::matters_to_callers(&lint);
                (lint.functions, lint.diagnostics, lint.external_calls, matters)
            };
        // What a copy of a shared name does decides whether calls of it are worth saying.
        if let Some(name) = cubin.linkable.shared_name(&chunk.function) {
            output.copy_linted(name, matters);
        }
        // Calls of functions that are not held (a held one is followed where it matters).
        if not_followed.is_none() {
            output.calls_not_followed(external, callees.map(|c| &**c));
        }
        diagnostics.extend(not_followed);
        output.functions += functions;
        if !diagnostics.is_empty() {
            let uses_ptx = diagnostics.iter().any(|d| {
                d.primary.file == COMPANION || d.secondary.iter().any(|l| l.file == COMPANION)
            });
            output.findings.push(finding(
                format!("{label}:{}", chunk.function),
                &label,
                &chunk.text,
                diagnostics,
                companion.filter(|_| uses_ptx).map(|c| Arc::clone(&c.source)),
            ));
        }
    };
    if let Some(callees) = callees {
        for (k, (chunk, &index)) in callees.chunks.iter().zip(&callees.indices).enumerate() {
            if mine(index) {
                lint_chunk(chunk, Some(k), &mut output);
            }
        }
    }
    let mut n_chunks = 0usize;
    let mut all = Vec::new();
    let asked = !streamed.as_ref().is_some_and(Vec::is_empty);
    let result = if asked {
        let _slot = Slots::take();
        tools::run_streaming(tool, &args, path.parent(), options.timeout, |reader| {
            // Where the listing does not name the architecture, the cubin's name does.
            let mut splitter = FunctionSplitter::new(reader)
                .with_target_lines()
                .with_default_arch(unit.arch.as_deref().and_then(Arch::parse));
            while let Some(chunk) = splitter.next() {
                let chunk = chunk?;
                n_chunks += 1;
                output.saw(&chunk);
                if whole {
                    progress.function(&label, &chunk.function, chunk.text.len());
                    all.push(chunk);
                    continue;
                }
                lint_chunk(&chunk, None, &mut output);
                splitter.recycle(chunk.text);
            }
            Ok::<(), io::Error>(())
        })
    } else {
        Ok(())
    };
    if whole {
        let chunks: Vec<&SassChunk> = all.iter().collect();
        let (functions, external) =
            lint_linked(&chunks, &label, settings, companion, &mut output, None);
        output.functions += functions;
        // Calls of functions that the cubin does not hold, by each function that makes one.
        for chunk in &chunks {
            let calls: BTreeSet<&str> = linking::named_calls(&chunk.text).collect();
            let names = external.iter().filter(|name| calls.contains(name.as_str()));
            output.calls_not_followed(names.cloned().collect(), None);
        }
    }
    if let Err(err) = result {
        let described = err.describe(tool);
        let hint = if refuses_architecture(&described) {
            format!(
                " (this `nvdisasm` no longer reads {}: `--arch` selects the architectures to \
                 lint, and `--cuda-bin` can name an older toolkit's tools)",
                unit.arch.as_deref().unwrap_or("this architecture")
            )
        } else {
            String::new()
        };
        output.error = Some(format!("disassembling `{}` failed: {described}{hint}", unit.name));
    } else if asked
        && n_chunks == 0
        && Elf::open(path).and_then(|elf| elf.has_code()) != Some(false)
    {
        // The tool succeeded but printed nothing that reads as a function: never pass silently,
        // unless the cubin has no code section at all (device variables only), which the
        // listing rightly shows as no function.
        output.error = Some(format!(
            "no function could be read from the disassembly of `{}`: `{}` exited successfully \
             but printed no listing fencelint recognises",
            unit.name,
            tool.display()
        ));
    }
    output
}

/// Threads of the pool that lints a binary's units: one per CPU, at least two.
fn workers() -> usize {
    std::thread::available_parallelism().map_or(2, std::num::NonZero::get).max(2)
}

/// Disassembler processes may run at most [`workers`] at a time, whether they stream a unit
/// or print a cubin's callable functions ([`Callees::disassemble`], which starts one per
/// worker): otherwise two workers printing two cubins' callees would run four at once, on two
/// cores, each with up to 259 MB (nvdisasm on a part of NVSHMEM's device library).
struct Slots {
    free: Mutex<usize>,
    freed: std::sync::Condvar,
}

struct Slot(&'static Slots);

impl Slots {
    fn take() -> Slot {
        static SLOTS: OnceLock<Slots> = OnceLock::new();
        let slots = SLOTS.get_or_init(|| Slots {
            free: Mutex::new(workers()),
            freed: std::sync::Condvar::new(),
        });
        let mut free = slots.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        while *free == 0 {
            free = slots.freed.wait(free).unwrap_or_else(std::sync::PoisonError::into_inner);
        }
        *free -= 1;
        Slot(slots)
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        *self.0.free.lock().unwrap_or_else(std::sync::PoisonError::into_inner) += 1;
        self.0.freed.notify_one();
    }
}

/// What the parts of one cubin share: its PTX for the pair rules, and its callable functions.
struct Cubin {
    /// Dropped once the cubin's last part is linted.
    companion: Mutex<Option<Arc<Companion>>>,
    /// The parse errors of the companion's PTX, kept when it is dropped.
    ptx_errors: Mutex<Option<Finding>>,
    /// Its functions call each other by name and it is small: linted whole ([`linking()`]).
    whole: bool,
    /// Dropped once the cubin's last part is linted.
    callees: Mutex<Option<Arc<Callees>>>,
    /// Whether its callable functions were at hand: held (`callees`, before it was dropped),
    /// or in the cubin linted whole.
    held: bool,
    /// The functions that other functions call by name (see [`unfollowed_reason`]).
    linkable: Linkable,
}

/// A cubin's callable functions that some function calls by name (see [`linking()`]).
#[derive(Clone, Debug, Default)]
struct Linkable {
    /// The code size of those to hold (0 when there are none, or they were not read).
    code: u64,
    /// The names that several of them share, each with its number of copies: the compiler's
    /// helpers, one copy per section (NCCL's `sm_80` cubin has 63 `__cuda_sm20_div_s64`).
    /// nvdisasm prints all copies but one with a number of its own (`__cuda_sm20_div_s64__5`),
    /// in the calls too, which the cubin does not hold: a call cannot be matched to its copy,
    /// and none of them is held.
    shared: BTreeMap<String, usize>,
}

impl Linkable {
    /// Whether `callee`, as nvdisasm prints it, is a copy of a function whose name others
    /// share: the name itself, or the name and nvdisasm's number (`__cuda_sm20_div_s64__5`).
    fn is_shared(&self, callee: &str) -> bool {
        self.shared_name(callee).is_some()
    }

    /// The name that the copy `function` (as nvdisasm prints it) shares with others.
    fn shared_name<'a>(&self, function: &'a str) -> Option<&'a str> {
        if self.shared.contains_key(function) {
            return Some(function);
        }
        let (name, number) = function.rsplit_once("__")?;
        let numbered = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
        (numbered && self.shared.contains_key(name)).then_some(name)
    }
}

/// Lints one function cut out of a listing by itself (its calls of other functions fall
/// through), with the pair rules against the cubin's PTX when there is some.
pub(crate) fn lint_alone(
    chunk: &SassChunk,
    settings: &Settings,
    companion: Option<&Arc<Companion>>,
) -> fencelint_linter::LintOutput {
    let pair = companion.map(|c| (&c.paired, c.producer.as_deref()));
    let kind = InputKind::Sass(chunk.format);
    fencelint_linter::lint_split_function(
        PLACEHOLDER,
        &chunk.text,
        kind,
        Split::Function(chunk.arch),
        settings,
        pair,
    )
}

/// Whether the listing of a cubin for `arch` should print each instruction's encoding: only
/// where tensor memory exists (`sm_100` to `sm_11x`), whose `tcgen05.wait::ld` shows only in the
/// scoreboard bits of the encoding (`fencelint_ir::Scoreboards`); elsewhere nothing reads them
/// and the listing stays half the size.
fn wants_encodings(arch: Option<&str>) -> bool {
    arch.and_then(Arch::parse).is_some_and(|arch| (100..120).contains(&arch.number))
}

/// The arguments of `nvdisasm` for a cubin, or for some of its functions (symbol indices).
fn nvdisasm_args(
    path: &Path,
    ptx_lines: bool,
    encodings: bool,
    functions: Option<&[usize]>,
) -> Vec<OsString> {
    // `-gi` and `-gp` together print both markers: source lines with the call sites of inlined
    // code for every rule, PTX lines for the pair rules. (`-gi` prints what `-g` prints for a
    // cubin without line info, as fast; `-ndf` and `-novliw` print the same listing for NCCL's
    // cubins and save no measurable time: docs/performance.md.)
    let mut args = vec![OsString::from("-c"), OsString::from("-gi")];
    if ptx_lines {
        args.push(OsString::from("-gp"));
    }
    if encodings {
        args.push(OsString::from("-hex"));
    }
    if let Some(functions) = functions {
        let list: Vec<String> = functions.iter().map(ToString::to_string).collect();
        args.push(OsString::from("-fun"));
        args.push(OsString::from(list.join(",")));
    }
    args.push(path.as_os_str().to_owned());
    args
}

/// The size of the code sections of `functions`.
fn code_size<'a>(functions: impl IntoIterator<Item = &'a CodeFunction>) -> u64 {
    functions.into_iter().fold(0u64, |sum, f| sum.saturating_add(f.size))
}

/// Cubins with at most this much code whose functions call each other by name, not split into
/// parts, are linted whole ([`lint_linked`] over all their functions): the listing and the IR
/// of all its functions are held at once, about 4 and 20 times the code's size. Larger ones
/// hold only their callable functions' text ([`Callees`]). `FENCELINT_LINKED_MAX` (bytes)
/// moves the limit, for tests and measurements.
fn linked_max_code() -> u64 {
    static MAX: OnceLock<u64> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("FENCELINT_LINKED_MAX").ok().and_then(|v| v.parse().ok()).unwrap_or(2 << 20)
    })
}

/// The callable functions of a cubin (not kernels, each in a code section of its own: see
/// [`CodeFunction::callable`]) may take at most this much code together to be held (16 MiB;
/// `FENCELINT_HELD_MAX`, in bytes, moves it, for tests and measurements).
fn held_max_code() -> u64 {
    static MAX: OnceLock<u64> = OnceLock::new();
    *MAX.get_or_init(|| {
        std::env::var("FENCELINT_HELD_MAX").ok().and_then(|v| v.parse().ok()).unwrap_or(16 << 20)
    })
}

/// Why the calls by name of a cubin's functions of `callees` (as nvdisasm prints them) were
/// not followed, when the functions to hold were `held` or not.
fn unfollowed_reason(held: bool, linkable: &Linkable, callees: &BTreeSet<String>) -> String {
    let shared = callees.iter().filter(|callee| linkable.is_shared(callee)).count();
    let shared_reason = "several functions share their name (the compiler's helpers, one copy \
                         per section), which nvdisasm prints with numbers the cubin does not \
                         hold, so a call cannot be matched to its copy";
    let other_reason = if held || linkable.code == 0 {
        "the functions they name are not in this cubin".to_owned()
    } else if linkable.code > held_max_code() {
        format!(
            "the cubin's functions called by name, {} of code, are more than the {} held to \
             follow calls",
            linking::size_text(linkable.code),
            linking::size_text(held_max_code())
        )
    } else {
        "the cubin's functions that are not kernels could not be disassembled apart".to_owned()
    };
    if shared == 0 {
        other_reason
    } else if shared == callees.len() {
        shared_reason.to_owned()
    } else {
        format!("for {shared} of them, {shared_reason}; for the others, {other_reason}")
    }
}

/// How a cubin's calls of its own functions by name are followed (nvdisasm names the callee;
/// cuobjdump prints `0x0`, and nothing is followed): not at all when it has no callable
/// function; by linting it whole when it is small and not split into parts (the first value);
/// else by holding its callable functions that some function calls by name ([`Callees`]).
/// The third value is their code size and whether some of them share a name.
fn linking(
    unit: &Unit,
    nvdisasm: Option<&Path>,
    ptx_lines: bool,
    timeout: Duration,
    workers: usize,
) -> (bool, Option<Arc<Callees>>, Linkable) {
    let none = || (false, None, Linkable::default());
    let Some(nvdisasm) = nvdisasm.filter(|_| !unit.ptx) else { return none() };
    let Some(mut elf) = unit.path.as_deref().and_then(Elf::open) else { return none() };
    let Some(functions) = elf.functions().filter(|f| f.iter().any(|f| f.callable)) else {
        return none();
    };
    if unit.functions.is_none() && code_size(&functions) <= linked_max_code() {
        // Linted whole: nvdisasm numbers the copies that share a name alike in their headers
        // and in the calls, so every call is matched.
        let code = code_size(functions.iter().filter(|f| f.callable));
        return (true, None, Linkable { code, shared: BTreeMap::new() });
    }
    // The functions each function's relocations name (its calls by name), read before anything
    // is disassembled. The callable functions that some function names are the ones to hold:
    // NCCL's sm_80 cubin has 42.7 MiB of functions that are not kernels, nearly all of them
    // `ncclDevFunc_*` functions called through a table, and 37 small helpers called by name.
    // Where the relocations cannot be read, every callable function is held, as before. A
    // function whose name another one of the cubin shares is not held ([`Linkable::shared`]):
    // NCCL's sm_80 cubin has 131 such copies of three arithmetic helpers, and five helpers
    // called by name that no other function shares a name with (`__cuda_sm70_warpsync`,
    // `__cuda_sm70_barrier_red_or_count`, ...), which are.
    let references = elf.references(&functions);
    let named: Option<HashSet<usize>> =
        references.as_ref().map(|all| all.iter().flatten().copied().collect());
    let mut count: HashMap<&str, usize> = HashMap::new();
    for function in &functions {
        *count.entry(function.name.as_str()).or_default() += 1;
    }
    let is_named =
        |f: &CodeFunction| f.callable && named.as_ref().is_none_or(|n| n.contains(&f.index));
    let shared: BTreeMap<String, usize> = functions
        .iter()
        .filter(|f| is_named(f) && count[f.name.as_str()] > 1)
        .map(|f| (f.name.clone(), count[f.name.as_str()]))
        .collect();
    let to_hold = |f: &CodeFunction| is_named(f) && !shared.contains_key(&f.name);
    let code = code_size(functions.iter().filter(|f| to_hold(f)));
    let references = references.unwrap_or_else(|| vec![Vec::new(); functions.len()]);
    let functions: Vec<Planned> = functions
        .into_iter()
        .zip(references)
        .map(|(function, references)| Planned { hold: to_hold(&function), function, references })
        .collect();
    let held = Callees::disassemble(unit, functions, nvdisasm, ptx_lines, timeout, workers);
    (false, held, Linkable { code, shared })
}

/// One of a cubin's functions, as [`Callees::disassemble`] takes it.
struct Planned {
    function: CodeFunction,
    /// Whether it is held: a callable function that some function's relocations name.
    hold: bool,
    /// The functions its relocations name (empty when they could not be read: it is then not
    /// planned to be linted with its callees, and says so if it calls one).
    references: Vec<usize>,
}

/// A cubin's callable functions, disassembled with nvdisasm before the rest of the cubin and
/// held as text, so that every function that calls one by name (nvdisasm prints
/// `` CALL.ABS.NOINC `(_Z12wait_relaxedPKj) ``; cuobjdump prints `0x0`) is linted together
/// with the functions it calls, and the call is followed into a copy of their code
/// (`fencelint_lower`'s linking of named calls).
struct Callees {
    /// The symbol index of each held function, in symbol order (the held functions are left
    /// out of the stream of the rest).
    indices: Vec<usize>,
    /// The symbol indices of the cubin's other functions.
    others: Vec<usize>,
    chunks: Vec<SassChunk>,
    /// Each held function by name.
    by_name: HashMap<String, usize>,
    /// For each held function, the held functions it calls.
    calls: Vec<Vec<usize>>,
    /// For each held function, what linting it alone (no call followed) gives: what a caller
    /// compares its findings with, and, for a function that calls no other held one, its own.
    alone: Vec<OnceLock<fencelint_linter::LintOutput>>,
    /// The text that callers may be linted with again ([`linking::budget`] of the held text).
    budget: usize,
    /// Whether each held function that calls others is linted with them: decided in order
    /// while the budget lasts, before any is linted.
    planned: Vec<bool>,
    /// The cubin's other functions that are linted with the held functions they call, by name:
    /// decided the same way after the held ones, from the calls their relocations name.
    others_planned: HashSet<String>,
}

impl Callees {
    /// `None` when the cubin has no callable function, when they are too large together, or
    /// when they could not be disassembled (the cubin is then streamed whole, its calls not
    /// followed, and the stream reports what went wrong).
    fn disassemble(
        unit: &Unit,
        functions: Vec<Planned>,
        nvdisasm: &Path,
        ptx_lines: bool,
        timeout: Duration,
        workers: usize,
    ) -> Option<Arc<Self>> {
        let path = unit.path.as_deref()?;
        let held_size = code_size(functions.iter().filter(|f| f.hold).map(|f| &f.function));
        if !functions.iter().any(|f| f.hold) || held_size > held_max_code() {
            return None;
        }
        let (callable, others): (Vec<Planned>, Vec<Planned>) =
            functions.into_iter().partition(|f| f.hold);
        let callable: Vec<CodeFunction> = callable.into_iter().map(|f| f.function).collect();
        // Each held function's symbol, by name (no two share one: see [`Linkable::shared`]).
        let symbol: HashMap<&str, usize> =
            callable.iter().map(|f| (f.name.as_str(), f.index)).collect();
        if symbol.len() != callable.len() {
            return None;
        }
        // In parts, as a large cubin is (nvdisasm's memory grows with what it prints: 612 MB
        // for the 13 MB of code of NVSHMEM's sm_90 device library at once), `workers` at a time.
        let parts: Vec<Vec<usize>> =
            balanced(callable.clone(), workers * 2).into_iter().map(|(_, part)| part).collect();
        let disassemble = |part: &[usize]| {
            let _slot = Slots::take();
            let encodings = wants_encodings(unit.arch.as_deref());
            let args = nvdisasm_args(path, ptx_lines, encodings, Some(part));
            let arch = unit.arch.as_deref().and_then(Arch::parse);
            tools::run_streaming(nvdisasm, &args, path.parent(), timeout, |reader| {
                FunctionSplitter::new(reader)
                    .with_target_lines()
                    .with_default_arch(arch)
                    .collect::<io::Result<Vec<_>>>()
            })
            .ok()
        };
        let next = AtomicUsize::new(0);
        let disassembled: Vec<Option<Vec<SassChunk>>> = std::thread::scope(|scope| {
            let threads: Vec<_> = (0..workers.min(parts.len()))
                .map(|_| {
                    scope.spawn(|| {
                        let mut out = Vec::new();
                        while let Some(part) = parts.get(next.fetch_add(1, Ordering::Relaxed)) {
                            out.push(disassemble(part));
                        }
                        out
                    })
                })
                .collect();
            // A thread that panicked leaves parts out: the count check below gives up.
            threads.into_iter().flat_map(|t| t.join().unwrap_or_default()).collect()
        });
        let chunks: Vec<SassChunk> =
            disassembled.into_iter().collect::<Option<Vec<_>>>()?.into_iter().flatten().collect();
        // Each held function's symbol; all or none.
        let mut chunks: Vec<(usize, SassChunk)> = chunks
            .into_iter()
            .map(|chunk| symbol.get(chunk.function.as_str()).map(|&index| (index, chunk)))
            .collect::<Option<_>>()?;
        if chunks.len() != callable.len() {
            return None;
        }
        // In symbol order: the threads finish their parts in any order, and the plan below
        // goes through the held functions in this order.
        chunks.sort_unstable_by_key(|(index, _)| *index);
        let (indices, chunks): (Vec<usize>, Vec<SassChunk>) = chunks.into_iter().unzip();
        let by_name: HashMap<String, usize> =
            chunks.iter().enumerate().map(|(k, chunk)| (chunk.function.clone(), k)).collect();
        let mut held = Self {
            indices,
            others: others.iter().map(|f| f.function.index).collect(),
            alone: chunks.iter().map(|_| OnceLock::new()).collect(),
            chunks,
            by_name,
            calls: Vec::new(),
            budget: 0,
            planned: Vec::new(),
            others_planned: HashSet::new(),
        };
        held.calls =
            held.chunks.iter().map(|chunk| held.called_by(&chunk.text).collect()).collect();
        // Each held caller with all it may call (before the callees that touch no shared
        // memory are left out, which takes linting them), in symbol order.
        let size = |k: usize| held.chunks[k].text.len();
        held.budget = linking::budget(held.chunks.iter().map(|c| c.text.len()).sum());
        let mut left = held.budget;
        held.planned = (0..held.chunks.len())
            .map(|k| {
                let calls = |k: usize| held.calls[k].as_slice();
                let closure = linking::closure(k, calls(k).iter().copied(), calls, size, |_| true);
                let cost = size(k) + closure.iter().map(|&c| size(c)).sum::<usize>();
                let fits = closure.is_empty() || cost <= left;
                if fits && !closure.is_empty() {
                    left -= cost;
                }
                fits
            })
            .collect();
        // Then the cubin's other functions that call held ones, in symbol order, each with
        // the callees its relocations name and what those call. Their own text is linted once
        // either way, so only the callees' counts: what linking them adds.
        let position: HashMap<usize, usize> =
            held.indices.iter().enumerate().map(|(k, &index)| (index, k)).collect();
        for other in &others {
            let direct = other.references.iter().filter_map(|index| position.get(index).copied());
            let calls = |k: usize| held.calls[k].as_slice();
            let closure = linking::closure(usize::MAX, direct, calls, size, |_| true);
            let cost: usize = closure.iter().map(|&c| size(c)).sum();
            if !closure.is_empty() && cost <= left {
                left -= cost;
                held.others_planned.insert(other.function.name.clone());
            }
        }
        Some(Arc::new(held))
    }

    /// Whether held function `k`, linted alone (no call followed), gives `diagnostic`'s rule and
    /// message at `place` in its text: a finding in its own code, which it reports itself,
    /// rather than one that only a caller's context makes.
    fn shows_alone(
        &self,
        k: usize,
        place: TextRange,
        diagnostic: &Diagnostic,
        settings: &Settings,
        companion: Option<&Arc<Companion>>,
    ) -> bool {
        linking::shows_alone(self.alone(k, settings, companion), PLACEHOLDER, place, diagnostic)
    }

    /// Whether a function may be linted with its callees, as planned before any function was
    /// linted: a held one (`held`) or another (by name). The plan does not depend on the order
    /// in which the workers reach the functions, nor on how the cubin is cut into parts.
    fn may_link(&self, held: Option<usize>, chunk: &SassChunk) -> bool {
        match held {
            Some(k) => self.planned[k],
            None => self.others_planned.contains(&chunk.function),
        }
    }

    /// Held function `k` linted alone, once.
    fn alone(
        &self,
        k: usize,
        settings: &Settings,
        companion: Option<&Arc<Companion>>,
    ) -> &fencelint_linter::LintOutput {
        self.alone[k].get_or_init(|| lint_alone(&self.chunks[k], settings, companion))
    }

    /// The held functions that a SASS text calls by name.
    fn called_by<'t>(&'t self, text: &'t str) -> impl Iterator<Item = usize> + 't {
        linking::named_calls(text).filter_map(|name| self.by_name.get(name).copied())
    }

    /// The held functions `direct` and those they call, nearest first
    /// ([`linking::closure`]), without the function `name` itself. A function that calls no
    /// other held one and neither touches memory other threads see nor orders it
    /// (`__cuda_sm20_rem_u64`; found by linting it alone, which it needs anyway) is not
    /// followed: it cannot change what its callers show.
    fn closure(
        &self,
        direct: impl Iterator<Item = usize>,
        name: &str,
        settings: &Settings,
        companion: Option<&Arc<Companion>>,
    ) -> Vec<usize> {
        // Names are unique among a cubin's functions.
        let caller = self.by_name.get(name).copied().unwrap_or(usize::MAX);
        let follows = |k: usize| {
            !self.calls[k].is_empty() || self.alone(k, settings, companion).shares_memory
        };
        let size = |k: usize| self.chunks[k].text.len();
        linking::closure(caller, direct, |k| self.calls[k].as_slice(), size, follows)
    }
}

/// Whether held callee `k` of a caller shows a finding at a place of its text by itself
/// ([`lint_linked`]).
type ShownAlone<'a> = dyn Fn(usize, TextRange, &Diagnostic) -> bool + 'a;

/// Lints functions of a cubin together, so that a call of another function is followed into a
/// copy of its code ([`linking::lint_together`]), and cuts each function's findings out as the
/// function-by-function path does: from the function's text, followed by the text of each
/// function that its findings' labels point into (a callee whose code was copied into it).
/// Every function's findings are kept, or with `caller`, only the first function is checked
/// ([`fencelint_linter::Split::Caller`]) and keeps its findings less those in the code of callee
/// `k` (its index among the others) that `caller(k, place, finding)` says the callee shows
/// itself.
fn lint_linked(
    chunks: &[&SassChunk],
    label: &str,
    settings: &Settings,
    companion: Option<&Arc<Companion>>,
    output: &mut UnitOutput,
    caller: Option<&ShownAlone<'_>>,
) -> (usize, Vec<String>) {
    let Some(first) = chunks.first() else { return (0, Vec::new()) };
    let texts: Vec<&str> = chunks.iter().map(|chunk| chunk.text.as_str()).collect();
    let names: Vec<&str> = chunks.iter().map(|chunk| chunk.function.as_str()).collect();
    let kind = InputKind::Sass(first.format);
    let pair = companion.map(|c| (&c.paired, c.producer.as_deref()));
    let lint = |text: &str| match caller {
        Some(_) => fencelint_linter::lint_split_function(
            PLACEHOLDER,
            text,
            kind,
            Split::Caller(first.arch),
            settings,
            pair,
        ),
        None => fencelint_linter::lint_listing(PLACEHOLDER, text, kind, settings, pair),
    };
    let keep = |own: usize, at: usize, place: TextRange, diagnostic: &Diagnostic| match caller {
        Some(shown) => own == 0 && (at == 0 || !shown(at - 1, place, diagnostic)),
        None => true,
    };
    let mut together =
        linking::lint_together(&texts, &names, linking::Joined::Lines, PLACEHOLDER, lint, keep);
    for (own, mut diagnostics) in std::mem::take(&mut together.groups) {
        // The functions the labels point into, the finding's own first, and where each one's
        // text starts in the excerpt.
        let mut parts: Vec<(usize, u32)> = vec![(own, 0)];
        let mut excerpt = String::new();
        for diagnostic in &diagnostics {
            let labels = std::iter::once(&diagnostic.primary).chain(&diagnostic.secondary);
            for label in labels.filter(|label| label.file == PLACEHOLDER) {
                let part = together.part_at(label.range.start);
                if !parts.iter().any(|&(p, _)| p == part) {
                    parts.push((part, 0));
                }
            }
        }
        for (part, at) in &mut parts {
            *at = excerpt.len() as u32;
            excerpt.push_str(texts[*part]);
            if !excerpt.ends_with('\n') {
                excerpt.push('\n');
            }
        }
        for diagnostic in &mut diagnostics {
            let labels = std::iter::once(&mut diagnostic.primary).chain(&mut diagnostic.secondary);
            for label in labels.filter(|label| label.file == PLACEHOLDER) {
                let part = together.part_at(label.range.start);
                let at = parts.iter().find(|&&(p, _)| p == part).map_or(0, |&(_, at)| at);
                let range = together.relative(part, label.range);
                label.range = TextRange::new(range.start + at, range.end + at);
            }
        }
        let uses_ptx = diagnostics.iter().any(|d| {
            d.primary.file == COMPANION || d.secondary.iter().any(|l| l.file == COMPANION)
        });
        output.findings.push(finding(
            format!("{label}:{}", names[own]),
            label,
            &excerpt,
            diagnostics,
            companion.filter(|_| uses_ptx).map(|c| Arc::clone(&c.source)),
        ));
    }
    (together.functions, together.external_calls)
}

/// Whether a disassembler's failure says that it does not handle the cubin's architecture
/// (nvdisasm 13: `CUDA architecture "SM70" is deprecated. Please use CUDA toolkit 13.0 or
/// earlier`), as opposed to a damaged cubin or a crash.
fn refuses_architecture(described: &str) -> bool {
    described.contains("CUDA architecture")
        && (described.contains("is deprecated") || described.contains("not supported"))
}

fn finding(
    name: String,
    unit: &str,
    text: &str,
    mut diagnostics: Vec<Diagnostic>,
    companion: Option<Arc<CompanionText>>,
) -> Finding {
    let snippets = snippets::cut(text, Excerpt::default(), PLACEHOLDER, &mut diagnostics);
    Finding { name, unit: unit.to_owned(), snippets, diagnostics, companion }
}

/// Cubins at least this large are disassembled in parts, one `nvdisasm -fun` process each.
/// `FENCELINT_SPLIT_MIN` (bytes) moves the limit, for tests and measurements.
fn split_size() -> u64 {
    std::env::var("FENCELINT_SPLIT_MIN").ok().and_then(|v| v.parse().ok()).unwrap_or(4 << 20)
}

/// Groups functions into at most `parts` parts of about the same code size (longest processing
/// time first: the heaviest function goes to the lightest part): (size, sorted symbol indices).
fn balanced(mut functions: Vec<CodeFunction>, parts: usize) -> Vec<(u64, Vec<usize>)> {
    functions.sort_by_key(|f| (std::cmp::Reverse(f.size), f.index));
    let mut groups: Vec<(u64, Vec<usize>)> =
        vec![(0, Vec::new()); parts.max(1).min(functions.len())];
    for CodeFunction { index, size, .. } in functions {
        let Some(lightest) = groups.iter_mut().min_by_key(|(total, _)| *total) else { break };
        lightest.0 += size.max(1);
        lightest.1.push(index);
    }
    for (_, indices) in &mut groups {
        indices.sort_unstable();
    }
    groups
}

/// The time, in bytes of cubin, that `workers` take to disassemble cubins of `sizes` whole,
/// each going to the worker with the least to do, largest first (as the workers take them).
fn makespan(sizes: &[u64], workers: usize) -> u64 {
    let mut sizes = sizes.to_vec();
    sizes.sort_unstable_by(|a, b| b.cmp(a));
    let mut loads = vec![0u64; workers.max(1)];
    for size in sizes {
        if let Some(least) = loads.iter_mut().min() {
            *least += size;
        }
    }
    loads.into_iter().max().unwrap_or(0)
}

/// How many parts a cubin of `size` bytes is disassembled in, of at most `parts`, when the
/// cubins to disassemble come to `total` bytes: one for each `total / (2 * parts)` bytes it
/// holds, rounded up.
fn parts_for(size: u64, total: u64, parts: usize) -> usize {
    let share = total / (2 * parts as u64).max(1);
    if share == 0 {
        return parts;
    }
    usize::try_from(size.div_ceil(share)).unwrap_or(usize::MAX).clamp(1, parts)
}

/// How many parts each cubin of `sizes` (bytes; 0 for what is not disassembled) is
/// disassembled in by `workers` ([`split_large_cubins`]).
fn plan_parts(sizes: &[u64], workers: usize, min_size: u64) -> Vec<usize> {
    let total: u64 = sizes.iter().sum();
    let even = total.div_ceil(workers.max(1) as u64);
    let balanced_whole = makespan(sizes, workers) <= even + even / 4;
    let parts = |&size: &u64| {
        if balanced_whole || size < min_size || size == 0 {
            1
        } else {
            parts_for(size, total, workers * 2)
        }
    };
    sizes.iter().map(parts).collect()
}

/// Splits cubins of `min_size` bytes or more into parts of about equal code size, so that one
/// huge cubin (NCCL has a 108 MB one) is disassembled by several of the `workers` at once:
/// two parts a worker at most ([`parts_for`]). Each part reloads the whole cubin, so nothing is
/// split where the cubins whole already keep the workers about equally busy (within a quarter
/// of an even share, [`makespan`]): fbgemm-gpu 1.9.0's `fbgemm_gpu_tbe_training_forward.so`
/// (40 `sm_90a` cubins of 4 to 42 MB, 412 MB) took 156 s with each cut into 4 parts and 125 s
/// whole, against 225 s for `cuobjdump -sass` (`docs/performance.md`); NCCL's 108 MB `sm_90`
/// cubin of 124 MB is still cut into 4. Each code section goes to exactly one part
/// ([`Elf::functions`]).
fn split_large_cubins(units: Vec<Unit>, workers: usize, min_size: u64) -> Vec<Unit> {
    let disassembled = |u: &Unit| u.path.is_some() && !u.ptx;
    let sizes: Vec<u64> = units.iter().map(|u| if disassembled(u) { u.size } else { 0 }).collect();
    let plan = plan_parts(&sizes, workers, min_size);
    let mut out = Vec::with_capacity(units.len());
    for (unit, parts) in units.into_iter().zip(plan) {
        let functions = match &unit.path {
            Some(path) if disassembled(&unit) && parts > 1 => {
                Elf::open(path).and_then(|mut elf| elf.functions())
            }
            _ => None,
        };
        let Some(functions) = functions.filter(|f| f.len() > 1) else {
            out.push(unit);
            continue;
        };
        for (total, indices) in balanced(functions, parts) {
            out.push(Unit {
                binary: unit.binary,
                name: unit.name.clone(),
                member: unit.member.clone(),
                arch: unit.arch.clone(),
                ptx: false,
                path: unit.path.clone(),
                size: total,
                functions: Some(indices),
                whole: unit.whole,
            });
        }
    }
    out
}

/// Whether the cubin at `path` is a debug build (`nvcc -G`): it carries DWARF `.debug_info`,
/// which `-lineinfo` (line tables only) does not write.
fn is_debug_build(path: Option<&Path>) -> bool {
    path.and_then(Elf::open).is_some_and(|elf| elf.sections.iter().any(|s| s.name == ".debug_info"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A cubin with two copies of `__cuda_sm20_div_s64` (nvdisasm numbers the second) and
    /// three of `helper`; `f` calls a copy of each, `g` the wait.
    fn calls_of_copies() -> (Linkable, UnitOutput) {
        let shared = [("__cuda_sm20_div_s64".to_owned(), 2), ("helper".to_owned(), 3)];
        let linkable = Linkable { code: 0, shared: shared.into_iter().collect() };
        let mut output = UnitOutput::default();
        let f = ["__cuda_sm20_div_s64__1", "helper__2"].map(str::to_owned);
        output.calls_not_followed(f.to_vec(), None);
        output.calls_not_followed(vec!["wait".to_owned()], None);
        (linkable, output)
    }

    /// A cubin is cut only when the cubins whole would keep one worker busy well after the
    /// others, and then in parts by its size beside the whole (sizes in MB, two workers).
    #[test]
    fn only_a_cubin_large_beside_the_others_is_cut() {
        const MB: u64 = 1 << 20;
        let cut = |sizes: &[u64], min_size: u64| -> Vec<usize> {
            plan_parts(&sizes.iter().map(|s| s * MB).collect::<Vec<_>>(), 2, min_size)
        };
        // NCCL's sm_90: one 108 MB cubin of 124 MB (and 57 small ones).
        let mut nccl = vec![108];
        nccl.extend([1; 16]);
        assert_eq!(cut(&nccl, 4 * MB)[..2], [4, 1]);
        // 40 cubins of 4 to 43 MB, as fbgemm-gpu's forward kernels (4 to 42 MB).
        let forward: Vec<u64> = (0..40).map(|i| 4 + i).collect();
        assert!(cut(&forward, 4 * MB).iter().all(|&p| p == 1));
        // Alone: cut in four. Two alike: each worker takes one. Three alike: cut.
        assert_eq!(cut(&[40], 0), [4]);
        assert_eq!(cut(&[40, 40], 0), [1, 1]);
        assert_eq!(cut(&[40, 40, 40], 0), [3, 3, 3]);
        // Below the least size, or nothing to disassemble (PTX): whole.
        assert_eq!(cut(&[40, 2, 0], 4 * MB), [4, 1, 1]);
        assert_eq!(parts_for(0, 0, 4), 4);
        assert_eq!(makespan(&[5, 4, 3, 3], 2), 8);
    }

    #[test]
    fn calls_of_copies_that_touch_nothing_are_not_said() {
        let names = |callees: BTreeSet<String>| callees.into_iter().collect::<Vec<_>>();
        // Every copy of both names linted, none touching shared memory: only `g` is said.
        let (linkable, mut output) = calls_of_copies();
        for copy in ["__cuda_sm20_div_s64", "__cuda_sm20_div_s64__1"] {
            output.copy_linted(linkable.shared_name(copy).unwrap(), false);
        }
        for copy in ["helper", "helper__1", "helper__2"] {
            output.copy_linted(linkable.shared_name(copy).unwrap(), false);
        }
        let (functions, callees) = output.unfollowed.to_say(&linkable);
        assert_eq!((functions, names(callees)), (1, vec!["wait".to_owned()]));

        // One copy of `helper` matters: `f`'s call of it is said.
        let (linkable, mut output) = calls_of_copies();
        output.copy_linted("__cuda_sm20_div_s64", false);
        output.copy_linted("__cuda_sm20_div_s64", false);
        output.copy_linted("helper", false);
        output.copy_linted("helper", true);
        output.copy_linted("helper", false);
        let (functions, callees) = output.unfollowed.to_say(&linkable);
        assert_eq!(names(callees), ["helper__2", "wait"]);
        assert_eq!(functions, 2);

        // A copy of `helper` was never linted (its part failed): said, as not known.
        let (linkable, mut output) = calls_of_copies();
        output.copy_linted("__cuda_sm20_div_s64", false);
        output.copy_linted("__cuda_sm20_div_s64", false);
        output.copy_linted("helper", false);
        output.copy_linted("helper", false);
        let (_, callees) = output.unfollowed.to_say(&linkable);
        assert_eq!(names(callees), ["helper__2", "wait"]);

        // Gathered over two parts, as a cubin linted in parts is.
        let (linkable, mut first) = calls_of_copies();
        let (_, mut second) = calls_of_copies();
        first.copy_linted("__cuda_sm20_div_s64", false);
        first.copy_linted("helper", false);
        second.copy_linted("__cuda_sm20_div_s64", false);
        second.copy_linted("helper", false);
        second.copy_linted("helper", false);
        first.unfollowed.add(second.unfollowed);
        let (functions, callees) = first.unfollowed.to_say(&linkable);
        assert_eq!((functions, names(callees)), (2, vec!["wait".to_owned()]));
    }

    #[test]
    fn entry_numbers_come_from_before_the_architecture() {
        assert_eq!(entry_number("libnccl.so.401.sm_90.cubin"), 401);
        assert_eq!(entry_number("spin_poll.1.sm_100a.ptx"), 1);
        assert_eq!(entry_number("kernels.sm_100.2.sm_100a.cubin"), 2);
        assert_eq!(entry_number("a.7.compute_90.ptx"), 7);
        assert_eq!(entry_number("no_number.sm_90.cubin"), u64::MAX);
        assert_eq!(entry_number("sm_90.cubin"), u64::MAX);
        assert_eq!(entry_number("plain"), u64::MAX);
    }

    /// The findings of a unit as comparable lines, sorted.
    fn finding_lines(output: &UnitOutput) -> Vec<String> {
        let mut lines: Vec<String> = output
            .findings
            .iter()
            .flat_map(|f| f.diagnostics.iter())
            .map(|d| format!("{} {:?} {}", d.rule, d.kernel, d.message))
            .collect();
        lines.sort();
        lines
    }

    #[test]
    fn a_cubin_in_parts_is_linted_once() {
        // The kernels of tcgen05.cubin hold subroutines of their own; a part that named one of
        // them disassembled (and linted) its kernel a second time. The functions of the `-rdc`
        // cubin call each other by name: its callable functions are disassembled first, and
        // each part lints those among its own.
        let tools = Tools::discover(None);
        let Some(nvdisasm) = tools.nvdisasm.clone() else {
            #[allow(clippy::print_stderr)]
            {
                eprintln!("NOT RUN: `a_cubin_in_parts_is_linted_once` needs nvdisasm");
            }
            return;
        };
        for (name, arch, callable) in [
            ("sm_100a/tcgen05.cubin", "sm_100a", false),
            ("sm_90a/noinline_poll.rdc.cubin", "sm_90a", true),
        ] {
            let path =
                Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled").join(name);
            let size = std::fs::metadata(&path).unwrap().len();
            let unit = || Unit {
                binary: 0,
                name: name.into(),
                member: None,
                arch: Some(arch.into()),
                ptx: false,
                path: Some(path.clone()),
                size,
                functions: None,
                whole: 0,
            };
            let options = BinaryOptions {
                archs: Vec::new(),
                cuda_bin: None,
                timeout: Duration::from_mins(2),
                progress: false,
            };
            let settings = Settings::default();
            let parts = split_large_cubins(vec![unit()], 2, 0);
            assert_eq!(parts.len(), 4);
            // As the first part to ask finds them (the whole cubin, small, would be linted
            // whole instead: tests/binary.rs).
            let (whole, callees, linkable) =
                linking(&parts[0], Some(&nvdisasm), false, options.timeout, 2);
            assert!(!whole);
            assert_eq!(callees.is_some(), callable, "{name}");
            // The held functions are in symbol order, however the threads that disassembled
            // them in parts finished: their plan goes through them in this order.
            if let Some(callees) = &callees {
                assert!(callees.indices.windows(2).all(|w| w[0] < w[1]), "{name}");
                // Only the functions that some function calls by name are held (the listing of
                // the same cubin names them in its `CALL`s); the cubin has three more that are
                // not kernels.
                let listing =
                    std::fs::read_to_string(path.with_file_name("noinline_poll.rdc.nvdisasm.sass"))
                        .unwrap();
                let mut called: Vec<&str> = linking::named_calls(&listing).collect();
                called.sort_unstable();
                called.dedup();
                let mut held: Vec<&str> =
                    callees.chunks.iter().map(|c| c.function.as_str()).collect();
                held.sort_unstable();
                assert_eq!(held, called, "{name}");
            }
            let held = whole || callees.is_some();
            let cubin = Cubin {
                companion: Mutex::new(None),
                ptx_errors: Mutex::new(None),
                whole,
                callees: Mutex::new(callees),
                held,
                linkable,
            };
            let progress = Progress::new(ProgressBar::hidden());
            let lint = |unit: &Unit, progress: &Progress| {
                let output = lint_unit(unit, name, &tools, &options, &settings, &cubin, progress);
                assert!(output.error.is_none(), "{name}: {:?}", output.error);
                output
            };
            let whole = lint(&unit(), &progress);
            // The progress counts each function and its listing once.
            let counted = progress.functions.load(Ordering::Relaxed);
            assert_eq!(counted, whole.functions as u64);
            assert!(progress.bytes.load(Ordering::Relaxed) > 100 * counted);
            let mut functions = 0;
            let mut lines = Vec::new();
            let progress = Progress::new(ProgressBar::hidden());
            for part in &parts {
                let output = lint(part, &progress);
                functions += output.functions;
                lines.extend(finding_lines(&output));
            }
            lines.sort();
            assert!(!lines.is_empty());
            assert_eq!(functions, whole.functions, "{name}");
            assert_eq!(progress.functions.load(Ordering::Relaxed), counted);
            assert_eq!(lines, finding_lines(&whole), "{name}");
        }
    }

    #[test]
    fn progress_message_counts_rate_and_names_the_function() {
        let message = progress_message(
            1_234_567,
            420_000_000,
            Duration::from_secs(2),
            "lib.so[sm_90:lib.1.sm_90.cubin]",
            "kernel(int*)",
        );
        assert_eq!(
            message,
            "1,234,567 functions, 210 MB/s  lib.so[sm_90:lib.1.sm_90.cubin]: kernel(int*)"
        );
        let slow = progress_message(1, 300_000, Duration::from_secs(1), "a.cubin", "k");
        assert_eq!(slow, "1 function, 0.3 MB/s  a.cubin: k");
        let start = progress_message(0, 0, Duration::ZERO, "a.cubin", "k");
        assert_eq!(start, "0 functions, 0.0 MB/s  a.cubin: k");
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1000), "1,000");
    }

    #[test]
    fn sizes_read_in_kib_or_tenths_of_mib() {
        assert_eq!(linking::size_text(0), "0 KiB");
        assert_eq!(linking::size_text(3_000), "3 KiB");
        assert_eq!(linking::size_text(1 << 20), "1.0 MiB");
        assert_eq!(linking::size_text((42 << 20) + (3 << 20) / 10 + 1), "42.3 MiB");
        assert_eq!(linking::size_text(16 << 20), "16.0 MiB");
    }

    #[test]
    fn architectures_come_from_the_last_component() {
        assert_eq!(arch_of_name("kernels.sm_100.1.sm_90a.cubin").as_deref(), Some("sm_90a"));
        assert!(selected(Some("sm_90a"), &[90]));
        assert!(!selected(Some("sm_90a"), &[100]));
        assert!(selected(None, &[]));
    }
}
