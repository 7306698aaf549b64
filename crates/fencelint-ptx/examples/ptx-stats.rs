//! Parses PTX files and prints, per file and in total, what the parser found and how fast.
//!
//! Usage: `cargo run --release -p fencelint-ptx --example ptx-stats -- [--repeat N] [--errors N]
//! [--parallel] FILES...`
//!
//! With `--parallel`, each file is split with `split_functions` and its functions are parsed on
//! all cores (rayon); the MB/s column then measures that path.

// An example program reports on stdout and stderr.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::time::{Duration, Instant};

use fencelint_ptx::{Parsed, Stats, parse, parse_with_offset, split_functions, stats};
use fencelint_source::SourceFile;
use rayon::prelude::*;

struct Options {
    repeat: usize,
    shown_errors: usize,
    parallel: bool,
    files: Vec<String>,
}

fn options() -> Result<Options, String> {
    let mut options = Options { repeat: 1, shown_errors: 3, parallel: false, files: Vec::new() };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--repeat" | "--errors" => {
                let value = args.next().ok_or_else(|| format!("{arg} needs a number"))?;
                let value: usize =
                    value.parse().map_err(|_| format!("{arg}: not a number: {value}"))?;
                if arg == "--repeat" {
                    options.repeat = value.max(1);
                } else {
                    options.shown_errors = value;
                }
            }
            "--parallel" => options.parallel = true,
            _ => options.files.push(arg),
        }
    }
    if options.files.is_empty() {
        return Err("usage: ptx-stats [--repeat N] [--errors N] [--parallel] FILES...".to_owned());
    }
    Ok(options)
}

// Byte counts stay far below 2^52, so the conversion is exact.
#[allow(clippy::cast_precision_loss)]
fn mb_per_s(bytes: usize, time: Duration) -> f64 {
    bytes as f64 / 1e6 / time.as_secs_f64().max(1e-9)
}

/// Splits `text` into functions and parses them on all cores; returns the summed statistics
/// and the errors (those of the module scope are not looked at).
fn parse_parallel(text: &str) -> (Stats, Vec<fencelint_ptx::ParseError>) {
    split_functions(text)
        .par_iter()
        .map(|span| {
            let Parsed { value, errors } =
                parse_with_offset(&text[span.range.to_usize()], span.range.start);
            (stats(&value), errors)
        })
        .reduce(
            || (Stats::default(), Vec::new()),
            |(mut stats_a, mut errors_a), (stats_b, errors_b)| {
                stats_a += stats_b;
                errors_a.extend(errors_b);
                (stats_a, errors_a)
            },
        )
}

fn main() {
    let options = match options() {
        Ok(options) => options,
        Err(message) => {
            eprintln!("{message}");
            std::process::exit(2);
        }
    };
    let mut total = Stats::default();
    let mut total_bytes = 0;
    let mut total_errors = 0;
    let mut total_time = Duration::ZERO;
    let mut failed_files = 0;
    println!(
        "{:>9} {:>7} {:>9} {:>9} {:>7} {:>7} {:>8}  file",
        "bytes", "funcs", "stmts", "insts", "unknown", "errors", "MB/s"
    );
    for path in &options.files {
        let bytes = match std::fs::read(path) {
            Ok(bytes) => bytes,
            Err(err) => {
                eprintln!("{path}: {err}");
                failed_files += 1;
                continue;
            }
        };
        let text = String::from_utf8_lossy(&bytes);
        // The fastest of `repeat` runs.
        let mut best = Duration::MAX;
        let (file_stats, errors) = if options.parallel {
            let mut result = None;
            for _ in 0..options.repeat {
                let start = Instant::now();
                let run = parse_parallel(&text);
                best = best.min(start.elapsed());
                result = Some(run);
            }
            result.unwrap_or_default()
        } else {
            for _ in 1..options.repeat {
                let start = Instant::now();
                let parsed = parse(&text);
                best = best.min(start.elapsed());
                drop(parsed);
            }
            let start = Instant::now();
            let parsed = parse(&text);
            best = best.min(start.elapsed());
            (stats(&parsed.value), parsed.errors)
        };
        println!(
            "{:>9} {:>7} {:>9} {:>9} {:>7} {:>7} {:>8.1}  {path}",
            text.len(),
            file_stats.functions,
            file_stats.statements,
            file_stats.instructions,
            file_stats.unknown,
            errors.len(),
            mb_per_s(text.len(), best)
        );
        if !errors.is_empty() {
            let source = SourceFile::new(path.clone(), text.as_ref());
            for error in errors.iter().take(options.shown_errors) {
                let at = source.line_col(error.range.start);
                let line = source.line_range(source.line_index(error.range.start)).unwrap_or(0..0);
                let line_text: String = text[line].trim().chars().take(160).collect();
                println!("    {path}:{}:{}: {}", at.line, at.column, error.message);
                println!("        | {line_text}");
            }
        }
        total += file_stats;
        total_bytes += text.len();
        total_errors += errors.len();
        total_time += best;
    }
    println!(
        "{:>9} {:>7} {:>9} {:>9} {:>7} {:>7} {:>8.1}  total ({} files)",
        total_bytes,
        total.functions,
        total.statements,
        total.instructions,
        total.unknown,
        total_errors,
        mb_per_s(total_bytes, total_time),
        options.files.len()
    );
    if failed_files > 0 {
        std::process::exit(2);
    }
}
