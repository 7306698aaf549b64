//! Times each stage of linting a `cuobjdump -sass` listing on one thread: splitting, parsing
//! into a syntax tree (for comparison), parsing and lowering in one pass, the CFG and loops, the
//! whole lint, then each rule on its own, in nanoseconds per instruction (the best of `runs`):
//!
//! `cargo run --release -p fencelint-linter --example phases -- listing.sass [runs]`
//!
//! With `PHASES_RULE=<rule>` it lowers the listing once and runs only that rule `runs` times,
//! for a profiler. With `PHASES_TOP=<rule>` it runs that rule once on each function and prints
//! the 25 functions it took longest on, to tell a cost spread over every function from one
//! concentrated in a few. The machine's noise moves single timings by a quarter; for comparisons of
//! two builds, counting instructions (`valgrind --tool=callgrind`) is steadier
//! (`docs/performance.md`).

#![allow(clippy::print_stdout, clippy::cast_precision_loss)] // A report for people.

use std::hint::black_box;
use std::time::Instant;

use fencelint_cfg::FunctionAnalysis;
use fencelint_diagnostics::Severity;
use fencelint_ir::{Function, Module};
use fencelint_linter::{InputKind, Settings};
use fencelint_lower::Lowered;
use fencelint_lower::sass::lower_function_text;
use fencelint_rules::{FunctionCx, Rule};
use fencelint_sass::{SassFormat, TextChunk, parse_function_text, split_functions};
use fencelint_source::FileId;

/// The allocator of the `fencelint` binary, so that allocation costs as much as there.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn lower(chunk: &TextChunk<'_>) -> Lowered {
    lower_function_text(FileId(0), chunk.text(), SassFormat::CuobjdumpText, chunk.arch, 0)
}

/// Calls `f` with every function of `lowered` and its module.
fn each_function(lowered: &Lowered, mut f: impl FnMut(&Module, &Function)) {
    for module in &lowered.modules {
        for func in &module.functions {
            f(module, func);
        }
    }
}

/// Runs one rule on one function with a fresh analysis.
fn check(module: &Module, func: &Function, rule: &dyn Rule, severity: Severity) {
    let analysis = FunctionAnalysis::new(func);
    let mut cx = FunctionCx::new(module, &analysis, rule.meta(), severity);
    rule.check_function(&mut cx);
    black_box(cx.into_diagnostics());
}

/// Runs one rule over every function of `lowered`, each with a fresh analysis.
fn run_rule(lowered: &[Lowered], rule: &dyn Rule, severity: Severity) {
    for low in lowered {
        each_function(low, |module, func| check(module, func, rule, severity));
    }
}

/// Prints the 25 functions of `lowered` that `rule` takes longest on.
fn top_functions(lowered: &[Lowered], rule: &dyn Rule, severity: Severity) {
    let mut rows = Vec::new();
    let mut total = 0.0;
    for low in lowered {
        each_function(low, |module, func| {
            let time = seconds(|| check(module, func, rule, severity));
            total += time;
            rows.push((time, func.insts.len(), func.name.clone()));
        });
    }
    rows.sort_by(|a, b| b.0.total_cmp(&a.0));
    println!("{total:.3} s over {} functions; the longest:", rows.len());
    let mut sum = 0.0;
    for (time, insts, name) in rows.iter().take(25) {
        sum += time;
        let short: String = name.chars().take(70).collect();
        let per_inst = time * 1e9 / *insts as f64;
        let share = sum * 100.0 / total;
        println!(
            "{time:.4} s {per_inst:6.1} ns/inst {insts:7} insts, {share:3.0}% so far  {short}"
        );
    }
}

/// The seconds `f` takes.
fn seconds(f: impl FnOnce()) -> f64 {
    let start = Instant::now();
    f();
    start.elapsed().as_secs_f64()
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a SASS text listing");
    let runs: usize = args.next().map_or(3, |n| n.parse().expect("a number of runs"));
    let text = std::fs::read_to_string(&path).expect("a readable UTF-8 file");
    let settings = Settings::default();
    let chunks = split_functions(&text);
    let lowered: Vec<Lowered> = chunks.iter().map(lower).collect();
    let insts: usize = lowered
        .iter()
        .flat_map(|l| &l.modules)
        .flat_map(|m| &m.functions)
        .map(|f| f.insts.len())
        .sum();

    for (var, top) in [("PHASES_TOP", true), ("PHASES_RULE", false)] {
        let Ok(only) = std::env::var(var) else { continue };
        let (rule, severity) =
            settings.enabled().find(|(r, _)| r.meta().name == only).expect("a rule name");
        if top {
            top_functions(&lowered, rule, severity);
        } else {
            for _ in 0..runs {
                run_rule(&lowered, rule, severity);
            }
        }
        return;
    }

    let kind = InputKind::Sass(SassFormat::CuobjdumpText);
    let split = || drop(black_box(split_functions(&text)));
    let parse = || {
        for c in &chunks {
            drop(black_box(parse_function_text(c.text(), c.arch)));
        }
    };
    let parse_lower = || {
        for c in &chunks {
            drop(black_box(lower(c)));
        }
    };
    let analyses = || {
        for c in &chunks {
            each_function(&lower(c), |_, func| {
                black_box(FunctionAnalysis::new(func).loops().len());
            });
        }
    };
    let whole = || {
        for c in &chunks {
            let lint = fencelint_linter::lint_split_function;
            drop(black_box(lint(
                FileId(0),
                c.text(),
                kind,
                fencelint_linter::Split::Function(c.arch),
                &settings,
                None,
            )));
        }
    };
    let stages: [(&str, &dyn Fn()); 5] = [
        ("split", &split),
        // The syntax tree is no longer built on the lint path (SASS text is lowered as it is
        // parsed); it is timed for comparison with the one pass below.
        ("parse into a syntax tree", &parse),
        ("parse+lower (one pass)", &parse_lower),
        ("+cfg+loops", &analyses),
        ("whole lint", &whole),
    ];
    let per = |s: f64| s * 1e9 / insts as f64;
    println!("{insts} instructions, best of {runs} runs, one thread, ns per instruction:");
    for (name, stage) in stages {
        let best = (0..runs).map(|_| seconds(stage)).fold(f64::MAX, f64::min);
        println!("  {name:40} {:7.1}", per(best));
    }
    let cfg = seconds(|| {
        for low in &lowered {
            each_function(low, |_, func| drop(black_box(FunctionAnalysis::new(func))));
        }
    });
    println!("each rule on its own, with a fresh analysis ({:.1} of it the CFG):", per(cfg));
    for (rule, severity) in settings.enabled() {
        let time = seconds(|| run_rule(&lowered, rule, severity));
        println!("  {:40} {:7.1}", rule.meta().name, per(time));
    }
}
