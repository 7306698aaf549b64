//! Parses SASS listings and prints counts and throughput, for benchmarking the front end.
//!
//! Usage: `cargo run --release -p fencelint-sass --example sass-stats -- [MODE] [--errors]
//! FILE...` where MODE is one of
//! - `--whole` (default): read the file, then parse it in one call to `parse`;
//! - `--split`: read the file, cut it with `split_functions_parallel`, parse the chunks in
//!   parallel (rayon; `RAYON_NUM_THREADS` sets the threads);
//! - `--stream`: read the file through `FunctionSplitter` (as from a pipe) and parse the chunks
//!   one after another.
//!
//! `--errors` prints every parse error. Times exclude nothing: reading the file is included,
//! and for `--whole` and `--split` the parse alone is reported too.

#![allow(clippy::print_stdout, clippy::print_stderr, clippy::cast_precision_loss)]

use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;
use std::time::Instant;

use fencelint_sass::{FunctionSplitter, ParseError, Parsed, SassModule, TextChunk};
use rayon::prelude::*;

#[derive(Clone, Copy, Default)]
struct Counts {
    functions: usize,
    instructions: usize,
    malformed: usize,
    labels: usize,
    targets: usize,
    errors: usize,
}

impl Counts {
    fn add(&mut self, module: &SassModule<'_>, errors: &[ParseError]) {
        self.functions += module.functions.len();
        for function in &module.functions {
            self.instructions += function.instructions.len();
            self.labels += function.labels.len();
            for inst in &function.instructions {
                self.malformed += usize::from(inst.malformed);
                self.targets += usize::from(inst.branch_target.is_some());
            }
        }
        self.errors += errors.len();
    }

    fn merge(mut self, other: Self) -> Self {
        self.functions += other.functions;
        self.instructions += other.instructions;
        self.malformed += other.malformed;
        self.labels += other.labels;
        self.targets += other.targets;
        self.errors += other.errors;
        self
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Whole,
    Split,
    Stream,
}

fn print_errors(path: &str, text: &str, base: u64, parsed: &Parsed<SassModule<'_>>) {
    for error in &parsed.errors {
        let snippet = text.get(error.range.to_usize()).unwrap_or("");
        println!("{path}:+{}: {} `{snippet}`", base + u64::from(error.range.start), error.message);
    }
}

fn read(path: &str) -> std::io::Result<String> {
    let data = std::fs::read(path)?;
    Ok(String::from_utf8(data)
        .unwrap_or_else(|error| String::from_utf8_lossy(error.as_bytes()).into_owned()))
}

/// Parses one file; returns the counts, the byte count and the seconds spent parsing only.
fn run(path: &str, mode: Mode, show_errors: bool) -> std::io::Result<(Counts, u64, f64)> {
    let mut counts = Counts::default();
    match mode {
        Mode::Stream => {
            let file = File::open(path)?;
            let bytes = file.metadata().map_or(0, |meta| meta.len());
            let started = Instant::now();
            for chunk in FunctionSplitter::new(BufReader::with_capacity(1 << 20, file)) {
                let chunk = chunk?;
                let parsed = chunk.parse();
                if show_errors {
                    print_errors(path, &chunk.text, chunk.offset, &parsed);
                }
                counts.add(&parsed.value, &parsed.errors);
            }
            Ok((counts, bytes, started.elapsed().as_secs_f64()))
        }
        Mode::Whole => {
            let text = read(path)?;
            let started = Instant::now();
            let parsed = fencelint_sass::parse(&text);
            let seconds = started.elapsed().as_secs_f64();
            if show_errors {
                print_errors(path, &text, 0, &parsed);
            }
            counts.add(&parsed.value, &parsed.errors);
            Ok((counts, text.len() as u64, seconds))
        }
        Mode::Split => {
            let text = read(path)?;
            let started = Instant::now();
            let chunks = fencelint_sass::split_functions_parallel(&text);
            eprintln!(
                "{path}: split into {} chunks in {:.3} s",
                chunks.len(),
                started.elapsed().as_secs_f64()
            );
            let counts = chunks
                .par_iter()
                .map(|chunk: &TextChunk<'_>| {
                    let parsed = chunk.parse();
                    if show_errors {
                        print_errors(path, &text, 0, &parsed);
                    }
                    let mut counts = Counts::default();
                    counts.add(&parsed.value, &parsed.errors);
                    counts
                })
                .reduce(Counts::default, Counts::merge);
            Ok((counts, text.len() as u64, started.elapsed().as_secs_f64()))
        }
    }
}

fn main() -> ExitCode {
    let mut mode = Mode::Whole;
    let mut show_errors = false;
    let mut files = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--whole" => mode = Mode::Whole,
            "--split" => mode = Mode::Split,
            "--stream" => mode = Mode::Stream,
            "--errors" => show_errors = true,
            _ => files.push(arg),
        }
    }
    if files.is_empty() {
        eprintln!("usage: sass-stats [--whole|--split|--stream] [--errors] FILE...");
        return ExitCode::from(2);
    }
    let mut failed = false;
    for path in &files {
        let started = Instant::now();
        let (counts, bytes, parse_seconds) = match run(path, mode, show_errors) {
            Ok(result) => result,
            Err(error) => {
                eprintln!("{path}: {error}");
                failed = true;
                continue;
            }
        };
        let seconds = started.elapsed().as_secs_f64();
        let megabytes = bytes as f64 / 1e6;
        println!(
            "{path}: {} functions, {} instructions, {} labels, {} branch targets, {} malformed, \
             {} parse errors; {megabytes:.1} MB in {seconds:.3} s = {:.0} MB/s (parse alone \
             {parse_seconds:.3} s = {:.0} MB/s)",
            counts.functions,
            counts.instructions,
            counts.labels,
            counts.targets,
            counts.malformed,
            counts.errors,
            megabytes / seconds.max(1e-9),
            megabytes / parse_seconds.max(1e-9),
        );
        failed |= counts.errors > 0;
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
