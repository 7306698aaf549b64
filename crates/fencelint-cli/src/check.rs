//! `fencelint check`: lint inputs, render the findings, choose the exit code.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::{Args, ValueEnum};
use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_linter::{LintOutput, PairedPtx, RuleSelection};
use fencelint_source::{FileId, SourceDb, TextRange};
use rayon::prelude::*;

use crate::inputs::{self, InputPath};
use crate::render;

// Binaries are a part of `check`; the modules live beside it.
#[path = "binary.rs"]
pub(crate) mod binary;
#[path = "elf.rs"]
mod elf;
#[path = "linking.rs"]
mod linking;
#[path = "names.rs"]
mod names;
#[path = "pairs.rs"]
pub(crate) mod pairs;
#[path = "readahead.rs"]
mod readahead;
#[path = "snippets.rs"]
mod snippets;
#[path = "stream.rs"]
mod stream;
#[path = "tools.rs"]
mod tools;
// Configuration and baselines decide what a run reports.
#[path = "baseline.rs"]
mod baseline;
#[path = "config.rs"]
mod config;

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum Format {
    /// Source snippets with labels (the default on a terminal).
    Rich,
    /// One line a finding: `file:line:col: severity[rule]: message`.
    Short,
    /// One JSON document (see docs/json-output.md).
    Json,
    /// JSON Lines: one diagnostic a line, each with `version` (see docs/json-output.md).
    Jsonl,
    /// SARIF 2.1.0, for GitHub code scanning and other SARIF viewers (see docs/ci.md).
    Sarif,
    /// GitHub Actions workflow commands, shown as annotations on the pull request.
    Github,
}

/// The order the findings are printed in.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum SortOrder {
    /// By input file (in the order the files were read), then place in the file.
    Location,
    /// Worst first: errors, then warnings, then notes; by file and place within each.
    Severity,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum ColorChoice {
    Auto,
    Always,
    Never,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum FailLevel {
    Note,
    Warning,
    Error,
    /// Findings never fail the run (input errors still do).
    Never,
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// Files or directories to lint.
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Where `short`, `github` and `sarif` point a finding: the original `.cu`/`.py` line (from
    /// `.loc` or `nvdisasm -g` line info) when known, or always the PTX/SASS input.
    #[arg(long, value_enum, default_value = "source")]
    pub locations: render::Locations,
    #[arg(long, value_enum, default_value = "auto")]
    pub color: ColorChoice,
    /// Enable only these rules or categories (comma-separated; `all` for every rule).
    #[arg(long, value_delimiter = ',')]
    pub select: Vec<String>,
    /// Disable these rules or categories (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// The lowest severity that makes the exit code 1 [default: warning].
    #[arg(long, value_enum)]
    pub fail_level: Option<FailLevel>,
    /// Read this configuration instead of finding `fencelint.toml` (see docs/configuration.md).
    #[arg(long, value_name = "FILE", conflicts_with = "no_config")]
    pub config: Option<PathBuf>,
    /// Read no `fencelint.toml`.
    #[arg(long)]
    pub no_config: bool,
    /// Hide the findings recorded in this baseline file.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Write the findings of this run to a baseline file (and hide them in this run).
    #[arg(long, value_name = "FILE")]
    pub write_baseline: Option<PathBuf>,
    /// No summary line and no progress bar on stderr.
    #[arg(long, short)]
    pub quiet: bool,
    /// The order of the findings.
    #[arg(long, value_enum, default_value = "location")]
    pub sort: SortOrder,
    /// Print the number of findings of each rule (with the functions and files they are in),
    /// worst first, instead of the findings; with `--format json` or `jsonl`, as JSON.
    #[arg(long)]
    pub statistics: bool,
    /// Lint only these architectures of binaries (`sm_90` also selects `sm_90a`); repeatable.
    #[arg(long = "arch", value_name = "SM")]
    pub arch: Vec<String>,
    /// The folder holding NVIDIA's `cuobjdump` and `nvdisasm` (see docs/binaries.md).
    #[arg(long, value_name = "DIR")]
    pub cuda_bin: Option<PathBuf>,
    /// Seconds one run of a CUDA tool may take before it is killed.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    pub tool_timeout: u64,
    /// The name findings in standard input (`-`) are reported under [default: `<stdin>`].
    #[arg(long, value_name = "NAME")]
    pub stdin_filename: Option<String>,
}

pub(crate) fn run(args: &CheckArgs) -> ExitCode {
    let started = Instant::now();
    let stdin_name = args.stdin_filename.as_deref();
    if args.statistics && matches!(args.format, Some(Format::Sarif | Format::Github)) {
        eprintln!(
            "error: `--statistics` prints counts, not findings: use it with `--format rich`, \
             `short`, `json` or `jsonl`"
        );
        return ExitCode::from(2);
    }
    let config = if args.no_config {
        Ok(None)
    } else {
        config::discover(args.config.as_deref(), &args.paths)
    };
    let config = match config {
        Ok(config) => config.unwrap_or_default(),
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let cli_selection = RuleSelection { select: args.select.clone(), ignore: args.ignore.clone() };
    let settings = match config.settings(&cli_selection) {
        Ok(settings) => settings,
        Err(err) => {
            eprintln!("error: {err}");
            return ExitCode::from(2);
        }
    };
    let baseline = match &args.baseline {
        Some(path) if args.write_baseline.is_none() => match baseline::read(path) {
            Ok(baseline) => Some(baseline.with_kernels_named(names::readable_kernel)),
            Err(err) => {
                eprintln!("error: {err}");
                return ExitCode::from(2);
            }
        },
        _ => None,
    };

    let mut archs = Vec::new();
    for arch in if args.arch.is_empty() { &config.arch } else { &args.arch } {
        let Some(number) = binary::parse_arch(arch) else {
            eprintln!("error: `--arch {arch}` is not an architecture like `sm_90` or `sm_100a`");
            return ExitCode::from(2);
        };
        archs.push(number);
    }

    let (paths, problems) = inputs::collect(&args.paths);
    let mut n_files = 0usize;
    let (binaries, paths): (Vec<InputPath>, Vec<InputPath>) =
        paths.into_iter().partition(|input| inputs::is_binary(&input.path));
    let mut db = SourceDb::new();
    let mut diagnostics = Vec::new();
    for problem in &problems {
        let file = db.add(problem.path.display().to_string(), String::new());
        diagnostics.push(input_error(file, 0, &problem.message));
    }

    // Standard input and pipes are read up to the streaming size: longer listings are linted as
    // they are read, anything else is read whole here.
    let (piped, paths): (Vec<InputPath>, Vec<InputPath>) =
        paths.into_iter().partition(|input| inputs::is_piped(&input.path));
    let mut piped_whole = Vec::new();
    let mut piped_listings = Vec::new();
    for input in piped {
        match inputs::read_piped(&input, stream::thresholds().0) {
            inputs::Piped::Whole(read) => piped_whole.push((input, read)),
            inputs::Piped::Listing(reader) => piped_listings.push((input, reader)),
        }
    }
    // Listings too large to hold are linted as they are read, function by function.
    let (streamed, paths): (Vec<InputPath>, Vec<InputPath>) =
        paths.into_iter().partition(|input| stream::should_stream(&input.path));
    let workers = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let mut n_streamed_functions = 0usize;
    for input in &streamed {
        n_files += 1;
        let name = display_path(input, stdin_name);
        let output = match std::fs::File::open(&input.path) {
            // A text listing in a regular file is read through a memory map; anything else
            // (JSON, a pipe, invalid UTF-8) is streamed from the reader.
            Ok(file) => match stream::lint_mapped(&file, &settings, workers) {
                Some(output) => output,
                None => readahead::with_readahead(file, |reader| {
                    stream::lint_listing(
                        std::io::BufReader::with_capacity(1 << 20, reader),
                        &settings,
                        workers,
                    )
                }),
            },
            Err(err) => stream::StreamOutput {
                findings: Vec::new(),
                functions: 0,
                error: Some((0, format!("cannot read file: {err}"))),
                archs: Vec::new(),
                unnamed_calls: fencelint_linter::UnnamedCalls::default(),
            },
        };
        n_streamed_functions += output.functions;
        add_streamed(&mut db, &mut diagnostics, &name, output);
    }
    for (input, reader) in piped_listings {
        n_files += 1;
        let output = stream::lint_listing(reader, &settings, workers);
        n_streamed_functions += output.functions;
        add_streamed(&mut db, &mut diagnostics, &display_path(&input, stdin_name), output);
    }

    let read: Vec<_> = paths.par_iter().map(inputs::read).collect();
    let mut jobs = Vec::new();
    for (input, read) in paths.into_iter().zip(read).chain(piped_whole) {
        if read.kind.is_none() && read.fatal.is_none() {
            continue; // a `.json` found in a directory that is not disassembly
        }
        n_files += 1;
        let file = db.add(display_path(&input, stdin_name), read.text);
        if let Some((at, message)) = read.fatal {
            diagnostics.push(input_error(file, at, &message));
            continue;
        }
        if let Some((at, message)) = read.warning {
            diagnostics.push(input_error(file, at, &message));
        }
        if let Some(kind) = read.kind {
            jobs.push(pairs::Job { file, kind, path: input.path.clone() });
        }
    }

    let options = binary::BinaryOptions {
        archs,
        cuda_bin: args.cuda_bin.clone(),
        timeout: std::time::Duration::from_secs(args.tool_timeout.max(1)),
        progress: !args.quiet && std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    let named: Vec<_> =
        binaries.iter().map(|b| (b.path.clone(), display_path(b, stdin_name))).collect();
    let mut n_kernels = n_streamed_functions;
    // The cubin or PTX of a binary that each of its texts with findings came from; any other
    // file is its own unit (`--statistics` counts units).
    let mut units: std::collections::HashMap<FileId, String> = std::collections::HashMap::new();
    for (input, output) in binaries.iter().zip(binary::lint_binaries(&named, &options, &settings)) {
        if output.no_cuda && !input.explicit {
            continue; // a host-only library found in a directory
        }
        n_files += 1;
        n_kernels += output.functions;
        let file = db.add(display_path(input, stdin_name), String::new());
        for error in &output.errors {
            diagnostics.push(input_error(file, 0, error));
        }
        diagnostics.extend(newer_archs(file, &newer_than_checked(&output.archs)));
        diagnostics.extend(output.unfollowed.iter().map(|u| unfollowed_calls(file, u)));
        diagnostics.extend(output.debug_cubins.iter().map(|cubin| debug_cubin(file, cubin)));
        diagnostics.extend(unnamed_calls(
            file,
            output.unnamed_calls,
            "install nvdisasm (`pip install nvidia-cuda-nvdisasm`), which names each callee",
        ));
        // A cubin's own PTX is registered once, however many of its functions point into it.
        let mut companions: Vec<(std::sync::Arc<binary::CompanionText>, FileId)> = Vec::new();
        for finding in output.findings {
            let ids: Vec<FileId> = finding
                .snippets
                .into_iter()
                .map(|snippet| db.add_excerpt(finding.name.clone(), snippet.text, snippet.base))
                .collect();
            let companion = finding.companion.map(|companion| {
                if let Some((_, file)) =
                    companions.iter().find(|(known, _)| std::sync::Arc::ptr_eq(known, &companion))
                {
                    return *file;
                }
                let file = db.add(companion.name.clone(), companion.text.clone());
                companions.push((companion, file));
                file
            });
            for &id in ids.iter().chain(&companion) {
                units.insert(id, finding.unit.clone());
            }
            let remap = |file: FileId| match companion {
                Some(ptx) if file == binary::COMPANION => ptx,
                _ => ids[file.0 as usize],
            };
            for mut diagnostic in finding.diagnostics {
                diagnostic.primary.file = remap(diagnostic.primary.file);
                for label in &mut diagnostic.secondary {
                    label.file = remap(label.file);
                }
                diagnostics.push(diagnostic);
            }
        }
    }

    // A `-gp` listing given with its PTX is also checked by the pair rules.
    let partners = if settings.enabled().any(|(rule, _)| rule.meta().dialects.pair) {
        pairs::partners(&db, &jobs)
    } else {
        vec![None; jobs.len()]
    };
    let mut paired: Vec<Option<PairedPtx>> = jobs.iter().map(|_| None).collect();
    for &ptx in partners.iter().flatten() {
        if paired[ptx].is_none() {
            let file = jobs[ptx].file;
            paired[ptx] = Some(PairedPtx::new(file, db.file(file).text()));
        }
    }
    let outputs: Vec<LintOutput> = jobs
        .par_iter()
        .zip(&partners)
        .map(|(job, partner)| {
            let text = db.file(job.file).text();
            match partner.and_then(|ptx| paired[ptx].as_ref()) {
                Some(ptx) => fencelint_linter::lint_sass_paired(
                    job.file,
                    text,
                    job.kind,
                    ptx,
                    &settings,
                    pairs::producer_beside(&job.path).as_deref(),
                ),
                None => fencelint_linter::lint_text(job.file, text, job.kind, &settings),
            }
        })
        .collect();
    let mut n_suppressed = 0usize;
    for (job, output) in jobs.iter().zip(outputs) {
        n_kernels += output.functions;
        n_suppressed += output.suppressed;
        diagnostics.extend(output.diagnostics);
        diagnostics.extend(newer_archs(job.file, &newer_than_checked(&output.sass_archs)));
        diagnostics.extend(unnamed_calls(job.file, output.unnamed_calls, LINT_THE_CUBIN));
    }
    fencelint_diagnostics::sort(&mut diagnostics);
    let n_ignored = config.filter(&db, &mut diagnostics);
    names::demangle_kernels(&mut diagnostics);
    let baseline = match &args.write_baseline {
        Some(path) => {
            let written = baseline::build(&db, &diagnostics);
            if let Err(err) = std::fs::write(path, baseline::to_json(&written)) {
                eprintln!("error: cannot write the baseline `{}`: {err}", path.display());
                return ExitCode::from(2);
            }
            Some(baseline::Baseline::of(&db, &diagnostics))
        }
        None => baseline,
    };
    let n_baselined = baseline.as_ref().map(|b| b.filter(&mut diagnostics));
    if args.sort == SortOrder::Severity {
        // Stable: the order by place stays within each severity.
        diagnostics.sort_by_key(|d| std::cmp::Reverse(d.severity));
    }

    let format = args.format.unwrap_or(if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        Format::Rich
    } else {
        Format::Short
    });
    let color = match args.color {
        ColorChoice::Always => true,
        ColorChoice::Never => false,
        ColorChoice::Auto => {
            std::io::IsTerminal::is_terminal(&std::io::stdout())
                && std::env::var_os("NO_COLOR").is_none()
        }
    };
    let render_options = render::Options {
        color,
        locations: args.locations,
        base_dir: std::env::current_dir().ok(),
    };
    let rendered = if args.statistics {
        let unit_of = |file: FileId| units.get(&file).map_or(db.file(file).name(), String::as_str);
        render::statistics(format, &diagnostics, unit_of).unwrap_or_default()
    } else {
        render::render(format, &db, &diagnostics, &render_options)
    };
    let mut stdout = std::io::stdout().lock();
    if let Err(err) = stdout.write_all(rendered.as_bytes()).and_then(|()| stdout.flush()) {
        if err.kind() == std::io::ErrorKind::BrokenPipe {
            return ExitCode::SUCCESS;
        }
        eprintln!("error: cannot write output: {err}");
        return ExitCode::from(2);
    }

    let errored = diagnostics.iter().any(is_input_failure);
    let count = |s: Severity| diagnostics.iter().filter(|d| d.severity == s).count();
    if !args.quiet {
        eprintln!(
            "fencelint: {n_files} file{}, {n_kernels} function{}: {} error{}, {} warning{}, {} note{} in {:.2}s",
            plural(n_files),
            plural(n_kernels),
            count(Severity::Error),
            plural(count(Severity::Error)),
            count(Severity::Warning),
            plural(count(Severity::Warning)),
            count(Severity::Note),
            plural(count(Severity::Note)),
            started.elapsed().as_secs_f64()
        );
        if n_suppressed > 0 || n_ignored > 0 || n_baselined.is_some() {
            let mut hidden = Vec::new();
            if n_suppressed > 0 {
                hidden.push(format!("{n_suppressed} suppressed inline"));
            }
            if n_ignored > 0 {
                hidden.push(format!("{n_ignored} ignored by the configuration"));
            }
            if let Some(n) = n_baselined {
                hidden.push(format!("{n} hidden by the baseline"));
            }
            eprintln!("fencelint: {}", hidden.join(", "));
        }
    }
    if errored {
        return ExitCode::from(2);
    }
    let threshold = match args.fail_level.or(config.fail_level).unwrap_or(FailLevel::Warning) {
        FailLevel::Note => Some(Severity::Note),
        FailLevel::Warning => Some(Severity::Warning),
        FailLevel::Error => Some(Severity::Error),
        FailLevel::Never => None,
    };
    let failed = threshold.is_some_and(|t| diagnostics.iter().any(|d| d.severity >= t));
    if failed { ExitCode::from(1) } else { ExitCode::SUCCESS }
}

/// Input, parse and internal errors make the exit code 2.
fn is_input_failure(diagnostic: &Diagnostic) -> bool {
    matches!(
        diagnostic.rule.as_str(),
        codes::INPUT_ERROR | codes::PARSE_ERROR | codes::INTERNAL_ERROR
    )
}

fn input_error(file: FileId, at: u32, message: &str) -> Diagnostic {
    Diagnostic::new(
        codes::INPUT_ERROR,
        Severity::Error,
        message.to_owned(),
        Label::new(file, TextRange::empty(at), ""),
    )
}

/// The name an input's findings are reported under: its path, or for standard input (`-`)
/// `stdin_name` (`<stdin>` if none was given).
fn display_path(input: &InputPath, stdin_name: Option<&str>) -> String {
    if inputs::is_stdin(&input.path) {
        return stdin_name.unwrap_or("<stdin>").to_owned();
    }
    input.path.display().to_string()
}

/// Adds what a streamed listing gave: its read error and its findings, each with the lines of
/// the listing it points at.
fn add_streamed(
    db: &mut SourceDb,
    diagnostics: &mut Vec<Diagnostic>,
    name: &str,
    output: stream::StreamOutput,
) {
    if let Some((offset, message)) = output.error {
        let base = fencelint_source::Excerpt { line: 0, column: 0, offset };
        let file = db.add_excerpt(name.to_owned(), String::new(), base);
        diagnostics.push(input_error(file, 0, &message));
    }
    let archs: Vec<String> = output.archs.iter().map(ToString::to_string).collect();
    let newer = newer_than_checked(&archs);
    if !newer.is_empty() || output.unnamed_calls.calls > 0 {
        let file =
            db.add_excerpt(name.to_owned(), String::new(), fencelint_source::Excerpt::default());
        diagnostics.extend(newer_archs(file, &newer));
        diagnostics.extend(unnamed_calls(file, output.unnamed_calls, LINT_THE_CUBIN));
    }
    for found in output.findings {
        let ids: Vec<FileId> = found
            .snippets
            .into_iter()
            .map(|snippet| db.add_excerpt(name.to_owned(), snippet.text, snippet.base))
            .collect();
        for mut diagnostic in found.diagnostics {
            diagnostic.primary.file = ids[diagnostic.primary.file.0 as usize];
            for label in &mut diagnostic.secondary {
                label.file = ids[label.file.0 as usize];
            }
            diagnostics.push(diagnostic);
        }
    }
}

/// Those of `archs` (`sm_90a`) newer than any whose SASS has been checked.
fn newer_than_checked(archs: &[String]) -> Vec<String> {
    let newer = |arch: &&String| {
        fencelint_sass::Arch::parse(arch).is_some_and(fencelint_sass::Arch::is_newer_than_checked)
    };
    archs.iter().filter(newer).cloned().collect()
}

/// A note at the start of `file` for each architecture of `archs` (all newer than any whose
/// SASS has been checked): the semantics table may not know its instructions.
fn newer_archs(file: FileId, archs: &[String]) -> impl Iterator<Item = Diagnostic> + '_ {
    archs.iter().map(move |arch| {
        let label = Label::new(file, TextRange::empty(0), "");
        Diagnostic::new(
            codes::UNKNOWN_ARCHITECTURE,
            Severity::Note,
            format!(
                "`{arch}` is newer than any architecture whose SASS fencelint has been checked \
                 against (up to sm_{}): an instruction new to it is kept as an unknown one, and \
                 a hazard it takes part in may go unreported",
                fencelint_sass::NEWEST_CHECKED_ARCH
            ),
            label,
        )
    })
}

/// A note at the start of a binary's `file` for a cubin built as a debug build.
fn debug_cubin(file: FileId, cubin: &str) -> Diagnostic {
    Diagnostic::new(
        codes::DEBUG_BUILD,
        Severity::Note,
        format!(
            "`{cubin}` is a debug build (`nvcc -G`: it carries `.debug_info`): it keeps variables \
             in memory and calls library functions that a release build inlines, so a hazard may \
             go unreported and a correct wait may be reported; lint the release build"
        ),
        Label::new(file, TextRange::empty(0), ""),
    )
}

/// A note at the start of a binary's `file` for a cubin whose functions call others by name
/// with no copy of the callee's code linted in the caller's context.
fn unfollowed_calls(file: FileId, unfollowed: &binary::UnfollowedCalls) -> Diagnostic {
    let binary::UnfollowedCalls { cubin, functions, callees, reason } = unfollowed;
    // The example named is one of the program's own functions where there is one, not a
    // compiler helper (`__cuda_sm3x_div_rn_noftz_f32_slowpath`).
    let first = callees
        .iter()
        .find(|name| !name.starts_with("__cuda_"))
        .or_else(|| callees.iter().next())
        .map_or("", String::as_str);
    let named = names::demangle(first).unwrap_or_else(|| first.to_owned());
    Diagnostic::new(
        codes::CALLS_NOT_FOLLOWED,
        Severity::Note,
        format!(
            "in `{cubin}`, {functions} function{} call{} {} other function{} by name (such as \
             `{named}`) without the call being followed: {reason}; a hazard across such a call \
             may go unreported",
            plural(*functions),
            if *functions == 1 { "s" } else { "" },
            callees.len(),
            plural(callees.len()),
        ),
        Label::new(file, TextRange::empty(0), ""),
    )
}

/// The way out of calls that name no callee in a listing.
const LINT_THE_CUBIN: &str =
    "lint the cubin itself, or its `nvdisasm` listing, which names each callee";

/// A note at the start of `file` when its SASS has calls that name no callee; `help` says how
/// to have them followed.
fn unnamed_calls(
    file: FileId,
    unnamed: fencelint_linter::UnnamedCalls,
    help: &str,
) -> Option<Diagnostic> {
    let fencelint_linter::UnnamedCalls { calls, functions } = unnamed;
    (calls > 0).then(|| {
        Diagnostic::new(
            codes::CALLS_NOT_FOLLOWED,
            Severity::Note,
            format!(
                "{calls} call{} in {functions} function{} name{} no callee (`CALL.ABS.NOINC \
                 0x0`: cuobjdump prints a call that the linker resolves without its target), so \
                 the code {} call{} was not checked in the caller's context, and a hazard across \
                 such a call may go unreported",
                plural(calls),
                plural(functions),
                if calls == 1 { "s" } else { "" },
                if calls == 1 { "it" } else { "they" },
                if calls == 1 { "s" } else { "" },
            ),
            Label::new(file, TextRange::empty(0), ""),
        )
        .with_help(help)
    })
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
