//! The `fencelint` command-line program: reads inputs, runs the linter, renders diagnostics and
//! sets the exit code. The only crate that does IO.

#![allow(clippy::print_stdout, clippy::print_stderr, clippy::exit)]

mod audit;
mod cfg_cmd;
mod check;
mod inputs;
mod render;

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// mimalloc instead of the system allocator: linting allocates and frees many small IR nodes per
/// function on several threads, and glibc's allocator returned and re-faulted pages often enough
/// to take a tenth of the time on large listings (scripts/bench-sass.py).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in the `mi_option_t` enum of mimalloc's `mimalloc.h` (the same
/// position in its v2 and v3).
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

/// Keeps freed memory instead of giving it back to the kernel after a delay (mimalloc's
/// `purge_delay`): each function of a listing frees megabytes that the next one allocates again,
/// and the kernel zeroes returned pages again on every fault (on NCCL's 1.6 GB listing: 0.8 to
/// 3.4 s of system time with the default delay, 0.25 to 1.3 s without purging). Resident memory
/// stays at its peak, which streaming bounds (`docs/performance.md`).
#[allow(unsafe_code)]
fn keep_freed_memory() {
    // SAFETY: `mi_option_set` only stores an option value; any value is valid for this option
    // (-1 means never purge), and no other thread runs yet.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
}

#[derive(Parser, Debug)]
#[command(
    name = "fencelint",
    version,
    about = "A static memory-ordering linter for NVIDIA GPU kernels"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Lint PTX and SASS files (directories are searched recursively).
    Check(check::CheckArgs),
    /// Report memory operations that ptxas moved across a wait, fence or barrier (PTX + SASS).
    AuditReorder(audit::AuditArgs),
    /// Draw a kernel's control-flow graph with its findings (Graphviz DOT or SVG).
    Cfg(cfg_cmd::CfgArgs),
    /// List the rules: name, category, default level, dialects.
    Rules,
    /// Print the documentation of a rule.
    Explain {
        /// The rule name, for example `spin-poll-without-acquire`.
        name: String,
    },
}

fn main() -> ExitCode {
    keep_freed_memory();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let code = if err.use_stderr() { 2 } else { 0 };
            let _ = err.print();
            return ExitCode::from(code);
        }
    };
    match cli.command {
        Command::Check(args) => check::run(&args),
        Command::AuditReorder(args) => audit::run(&args),
        Command::Cfg(args) => cfg_cmd::run(&args),
        Command::Rules => {
            print_rules();
            ExitCode::SUCCESS
        }
        Command::Explain { name } => {
            if let Some(rule) = fencelint_rules::find_rule(&name) {
                let _ = std::io::stdout().write_all(rule.meta().doc.as_bytes());
                ExitCode::SUCCESS
            } else {
                eprintln!("error: unknown rule `{name}` (see `fencelint rules`)");
                ExitCode::from(2)
            }
        }
    }
}

fn print_rules() {
    let mut out = String::new();
    let _ = writeln!(out, "{:<34} {:<12} {:<8} dialects", "name", "category", "default");
    for rule in fencelint_rules::all_rules() {
        let meta = rule.meta();
        let level = meta.default_severity().map_or("off", |s| s.as_str());
        let _ =
            writeln!(out, "{:<34} {:<12} {:<8} {}", meta.name, meta.category, level, meta.dialects);
    }
    let _ = std::io::stdout().write_all(out.as_bytes());
}
