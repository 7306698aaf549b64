//! Parses SASS listings and prints counts and throughput, for benchmarking the front end.
//!
//! Usage: `cargo run --release -p fencelint-sass --example sass-stats -- [--stream] [--errors]
//! FILE...`. `--stream` reads each file through `FunctionSplitter` (as from a pipe) and parses
//! the chunks one after another; the default reads the whole file and parses it at once.
//! `--errors` prints every parse error.

#![allow(clippy::print_stdout, clippy::print_stderr, clippy::cast_precision_loss)]

use std::fs::File;
use std::io::BufReader;
use std::process::ExitCode;
use std::time::Instant;

use fencelint_sass::{FunctionSplitter, ParseError, SassModule};

#[derive(Default)]
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
}

fn main() -> ExitCode {
    let mut stream = false;
    let mut show_errors = false;
    let mut files = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--stream" => stream = true,
            "--errors" => show_errors = true,
            _ => files.push(arg),
        }
    }
    if files.is_empty() {
        eprintln!("usage: sass-stats [--stream] [--errors] FILE...");
        return ExitCode::from(2);
    }
    let mut failed = false;
    let mut total_bytes = 0u64;
    let mut total_seconds = 0f64;
    for path in &files {
        let mut counts = Counts::default();
        let started = Instant::now();
        let bytes;
        if stream {
            let file = match File::open(path) {
                Ok(file) => file,
                Err(error) => {
                    eprintln!("{path}: {error}");
                    failed = true;
                    continue;
                }
            };
            bytes = file.metadata().map_or(0, |meta| meta.len());
            for chunk in FunctionSplitter::new(BufReader::with_capacity(1 << 20, file)) {
                let chunk = match chunk {
                    Ok(chunk) => chunk,
                    Err(error) => {
                        eprintln!("{path}: {error}");
                        failed = true;
                        break;
                    }
                };
                let parsed = chunk.parse();
                if show_errors {
                    for error in &parsed.errors {
                        let text = chunk.text.get(error.range.to_usize()).unwrap_or("");
                        println!(
                            "{path}:+{}: {} `{text}`",
                            chunk.offset + u64::from(error.range.start),
                            error.message
                        );
                    }
                }
                counts.add(&parsed.value, &parsed.errors);
            }
        } else {
            let text = match std::fs::read(path) {
                Ok(data) => String::from_utf8_lossy(&data).into_owned(),
                Err(error) => {
                    eprintln!("{path}: {error}");
                    failed = true;
                    continue;
                }
            };
            bytes = text.len() as u64;
            let parsed = fencelint_sass::parse(&text);
            if show_errors {
                for error in &parsed.errors {
                    let snippet = text.get(error.range.to_usize()).unwrap_or("");
                    println!("{path}:+{}: {} `{snippet}`", error.range.start, error.message);
                }
            }
            counts.add(&parsed.value, &parsed.errors);
        }
        let seconds = started.elapsed().as_secs_f64();
        total_bytes += bytes;
        total_seconds += seconds;
        let rate = bytes as f64 / seconds.max(1e-9) / 1e6;
        println!(
            "{path}: {} functions, {} instructions, {} labels, {} branch targets, {} malformed, {} parse errors, {:.1} MB in {:.3} s = {rate:.0} MB/s",
            counts.functions,
            counts.instructions,
            counts.labels,
            counts.targets,
            counts.malformed,
            counts.errors,
            bytes as f64 / 1e6,
            seconds,
        );
        failed |= counts.errors > 0;
    }
    if files.len() > 1 {
        let rate = total_bytes as f64 / total_seconds.max(1e-9) / 1e6;
        println!(
            "total: {:.1} MB in {total_seconds:.3} s = {rate:.0} MB/s",
            total_bytes as f64 / 1e6
        );
    }
    if failed { ExitCode::FAILURE } else { ExitCode::SUCCESS }
}
