//! What any line-by-line reader of a SASS listing costs before it parses anything: the floor
//! under fencelint's time on a listing already in memory, set against counting its lines.
//!
//! `cargo run --release -p fencelint-sass --example scan-floor -- listing.sass [runs]`
//!
//! The file is read into memory first (not timed), then cut at line ends into 64 pieces that
//! rayon scans in parallel (`RAYON_NUM_THREADS` sets the threads), as fencelint uses every
//! core. Each pass is timed `runs` times (default 5), in turn, and the medians are printed
//! with their ratio to the first pass:
//! - `newlines`: count the line ends (memchr), what `wc -l` does once the file is read;
//! - `lines`: find each line's first non-blank byte (with the parser's own `skip_blanks`) and
//!   its end, and tell instruction lines (`/*0030*/`) from the others, as the splitter and the
//!   parser each do;
//! - `opcodes`: `lines`, and read and hash the opcode of every instruction line (after its
//!   guard, `@!P0`, when it has one);
//! - `operands`: `opcodes`, and cut the operands at their commas and read the register number
//!   of every operand that names one (`R12`, `UR4`, `P0`, `[R2.64+0x10]`, the guard), the
//!   least a reader needs for the definitions and uses that the analyses follow.
//!
//! fencelint does `lines` twice (splitter, then parser), reads every operand, lowers every
//! instruction into the IR, builds each function's CFG and runs every rule on it.

#![allow(clippy::print_stdout, clippy::cast_precision_loss)] // A report for people.

use std::time::Instant;

use fencelint_sass::skip_blanks;
use rayon::prelude::*;

/// `bytes` cut into `n` pieces at line ends.
fn pieces(bytes: &[u8], n: usize) -> Vec<&[u8]> {
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for i in 1..=n {
        let mut end = bytes.len() * i / n;
        if i < n {
            end = memchr::memchr(b'\n', &bytes[end..]).map_or(bytes.len(), |at| end + at + 1);
        }
        let end = end.max(start);
        out.push(&bytes[start..end]);
        start = end;
    }
    out
}

/// How much of each instruction line a pass reads.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Depth {
    Lines,
    Opcodes,
    Operands,
}

/// The register numbers named in the operand text `text` (up to the `;`), summed: each
/// operand is cut at its comma, its blanks and decorations (`-`, `!`, `|`, `[`) are skipped, and
/// a register name (`R`, `UR`, `P`, `UP` and digits) is read.
fn operand_registers(text: &[u8]) -> u64 {
    let end = memchr::memchr(b';', text).unwrap_or(text.len());
    let mut acc = 0u64;
    for operand in text[..end].split(|&b| b == b',') {
        let mut at = skip_blanks(operand, 0);
        while operand.get(at).is_some_and(|b| matches!(b, b'-' | b'!' | b'|' | b'[' | b'~')) {
            at += 1;
        }
        let rest = &operand[at.min(operand.len())..];
        let ([b'U', b'R' | b'P', digits @ ..] | [b'R' | b'P', digits @ ..]) = rest else {
            continue;
        };
        let number = digits
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .fold(0u64, |n, &b| n * 10 + u64::from(b - b'0'));
        acc = acc.wrapping_add(number + 1);
    }
    acc
}

/// One pass over a piece; returns a value that depends on every line, so none is skipped.
fn scan(piece: &[u8], depth: Depth) -> u64 {
    let mut acc = 0u64;
    let mut at = 0;
    while at < piece.len() {
        let first = skip_blanks(piece, at);
        let end = memchr::memchr(b'\n', &piece[first..]).map_or(piece.len(), |n| first + n);
        let line = &piece[first..end];
        if line.starts_with(b"/*") && line.get(2).is_some_and(u8::is_ascii_hexdigit) {
            if depth >= Depth::Opcodes {
                let close = memchr::memchr(b'/', &line[2..]).map_or(line.len(), |n| n + 3);
                let mut opcode_start = skip_blanks(line, close);
                // A guard (`@!P0`) comes before the opcode: its register is read too.
                if line.get(opcode_start) == Some(&b'@') {
                    let guard_end = memchr::memchr(b' ', &line[opcode_start..])
                        .map_or(line.len(), |n| opcode_start + n);
                    if depth == Depth::Operands {
                        let guard = &line[opcode_start + 1..guard_end];
                        acc = acc.wrapping_add(operand_registers(guard));
                    }
                    opcode_start = skip_blanks(line, guard_end);
                }
                let mut hash = 0xcbf2_9ce4_8422_2325_u64;
                let opcode_len = line[opcode_start..]
                    .iter()
                    .take_while(|&&b| b != b' ' && b != b';')
                    .inspect(|&&byte| hash = (hash ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3))
                    .count();
                acc = acc.wrapping_add(hash);
                if depth == Depth::Operands {
                    acc = acc.wrapping_add(operand_registers(&line[opcode_start + opcode_len..]));
                }
            } else {
                acc += 1;
            }
        }
        at = end + 1;
    }
    acc
}

/// A named pass over one piece.
type Pass<'a> = (&'a str, &'a (dyn Fn(&[u8]) -> u64 + Sync));

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let mut args = std::env::args().skip(1);
    let path = args.next().expect("a SASS text listing");
    let runs: usize = args.next().map_or(5, |n| n.parse().expect("a number of runs"));
    let bytes = std::fs::read(&path).expect("a readable file");
    let pieces = pieces(&bytes, 64);
    let passes: [Pass<'_>; 4] = [
        ("newlines", &|p| memchr::memchr_iter(b'\n', p).count() as u64),
        ("lines", &|p| scan(p, Depth::Lines)),
        ("opcodes", &|p| scan(p, Depth::Opcodes)),
        ("operands", &|p| scan(p, Depth::Operands)),
    ];
    let mut times = vec![Vec::new(); passes.len()];
    for _ in 0..runs.max(1) {
        for (i, (_, pass)) in passes.iter().enumerate() {
            let start = Instant::now();
            let sum: u64 = pieces.par_iter().map(|p| pass(p)).sum();
            times[i].push(start.elapsed().as_secs_f64());
            std::hint::black_box(sum);
        }
    }
    let threads = rayon::current_num_threads();
    println!("{} MB, {threads} threads, median of {runs} runs", bytes.len() / 1_000_000);
    let base = median(times[0].clone());
    for ((name, _), times) in passes.iter().zip(times) {
        let t = median(times);
        println!("  {name:<10} {t:>7.3} s  {:>5.2}x", t / base);
    }
}
