//! The parsers must not panic, must keep every span inside the input, and must stay linear on
//! hostile input: mutated compiler output and pathological hand-made shapes.

use std::path::Path;
use std::time::{Duration, Instant};

use fencelint_sass::{
    FunctionSplitter, Parsed, SassModule, parse, parse_json, parse_text, split_functions,
    split_functions_parallel,
};

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Checks that every range of the result lies inside `text` on character boundaries.
fn check_spans(text: &str, parsed: &Parsed<SassModule<'_>>) {
    let inside = |range: fencelint_source::TextRange| {
        assert!(range.start <= range.end, "{range}");
        assert!(text.get(range.to_usize()).is_some(), "{range} outside {} bytes", text.len());
    };
    for error in &parsed.errors {
        inside(error.range);
    }
    for function in &parsed.value.functions {
        inside(function.range);
        for label in &function.labels {
            inside(label.range);
        }
        for inst in &function.instructions {
            inside(inst.range);
            if let Some(encoding) = inst.encoding {
                inside(encoding);
            }
            for operand in &inst.operands {
                inside(operand.range);
            }
        }
    }
}

fn exercise(text: &str) {
    check_spans(text, &parse(text));
    check_spans(text, &parse_text(text));
    check_spans(text, &parse_json(text));
    for chunk in FunctionSplitter::new(text.as_bytes()) {
        let chunk = chunk.expect("reading from memory");
        check_spans(&chunk.text, &chunk.parse());
    }
    assert_eq!(split_functions_parallel(text), split_functions(text));
    // Bytes known to be UTF-8 cut like the text, except JSON, which that path leaves alone.
    let from_bytes = fencelint_sass::split_bytes_parallel_with(text.as_bytes(), |_| {});
    if fencelint_sass::detect(text) == Some(fencelint_sass::SassFormat::NvdisasmJson) {
        assert_eq!(from_bytes, None);
    } else {
        assert_eq!(from_bytes, Some(split_functions(text)));
    }
    let streamed: Vec<_> =
        FunctionSplitter::new(text.as_bytes()).map(|chunk| chunk.expect("in memory")).collect();
    let in_memory = split_functions(text);
    for chunk in &in_memory {
        assert!(text.get(chunk.range.to_usize()).is_some());
        check_spans(text, &chunk.parse());
    }
    // Both splitters cut text listings into the same chunks (lines longer than the streaming
    // splitter's cap outside functions are the one documented difference; malformed JSON may
    // be cut differently).
    let is_json = fencelint_sass::detect(text) == Some(fencelint_sass::SassFormat::NvdisasmJson);
    if !is_json && !text.lines().any(|line| line.len() > 60_000) {
        let a: Vec<(&str, u64)> =
            streamed.iter().map(|c| (c.function.as_str(), c.offset)).collect();
        let b: Vec<(&str, u64)> =
            in_memory.iter().map(|c| (c.function, u64::from(c.range.start))).collect();
        assert_eq!(a, b, "splitters disagree on {text:?}");
        for (a, b) in streamed.iter().zip(&in_memory) {
            assert_eq!(a.text, b.text());
            assert_eq!((a.arch, a.binary.as_deref()), (b.arch, b.binary));
        }
    }
}

const PIECES: &[&str] = &[
    "[",
    "]",
    "{",
    "}",
    "(",
    ")",
    "`(",
    ";",
    ",",
    "/*",
    "*/",
    "//",
    "//## File \"",
    "\n",
    "\r\n",
    "@",
    "@!",
    "!",
    "-",
    "|",
    ".reuse",
    "0x",
    "desc[",
    "c[",
    "\"",
    "\\",
    ":",
    " ",
    "\t",
    "é",
    "\u{1F600}",
    "\u{0}",
    "..........",
    "Function : ",
    "Fatbin elf code:\n",
    ".section .text.x\n",
    "//--------------------- .text.y ---\n",
    "{\"opcode\":",
    "\"operands\":\"",
    "inlined at ",
    ", line ",
    "/*0000*/ ",
    "/* 0x",
    "[R0+UR4+",
    "+-0x",
    "RZ.",
    "SR_",
    "INF",
    "1e",
    "9999999999999999999999",
];

fn mutate(rng: &mut Rng, text: &str) -> String {
    let mut out = text.to_owned();
    for _ in 0..=rng.below(8) {
        let mut at = rng.below(out.len() + 1);
        while !out.is_char_boundary(at) {
            at -= 1;
        }
        match rng.below(4) {
            0 => out.insert_str(at, PIECES[rng.below(PIECES.len())]),
            1 => {
                let mut end = (at + rng.below(64)).min(out.len());
                while !out.is_char_boundary(end) {
                    end -= 1;
                }
                out.replace_range(at..end, "");
            }
            2 => {
                let mut end = (at + rng.below(200)).min(out.len());
                while !out.is_char_boundary(end) {
                    end -= 1;
                }
                let copy = out[at..end].to_owned();
                out.insert_str(at, &copy);
            }
            _ => out.truncate(at),
        }
    }
    out
}

#[test]
fn mutated_compiler_output_never_panics() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data");
    let mut texts = Vec::new();
    for name in [
        "sync_sm90.cuobjdump.sass",
        "tcgen05_sm100.nvdisasm-gp.sass",
        "inline_sm120.nvdisasm-gi.sass",
        "cpasync_sm80.nvdisasm.json",
        "fatbin_multi.cuobjdump.sass",
    ] {
        let text = std::fs::read_to_string(dir.join(name)).unwrap();
        // Windows of the file keep each parse small.
        for start in (0..text.len()).step_by(3000) {
            let mut begin = start;
            while !text.is_char_boundary(begin) {
                begin -= 1;
            }
            let end = (begin + 6000).min(text.len());
            texts.push(text[begin..end].to_owned());
        }
        texts.push(text);
    }
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    for round in 0..600 {
        let base = &texts[round % texts.len()];
        exercise(&mutate(&mut rng, base));
    }
}

#[test]
fn random_bytes_never_panic() {
    let mut rng = Rng(0xfeed_beef_0000_0002);
    for _ in 0..300 {
        let len = rng.below(400);
        let text: String = (0..len).map(|_| PIECES[rng.below(PIECES.len())]).collect();
        exercise(&text);
    }
}

/// Parses `text` and fails when it takes far longer than a linear parser would.
fn assert_fast(what: &str, text: &str) {
    let started = Instant::now();
    exercise(text);
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(20), "{what}: {elapsed:?} for {} bytes", text.len());
}

#[test]
fn pathological_shapes_stay_linear() {
    let n = 200_000;
    assert_fast("open brackets", &format!("/*0000*/ NOP {};\n", "[".repeat(n)));
    assert_fast("many operands", &format!("/*0000*/ NOP {};\n", "R0, ".repeat(n)));
    assert_fast("many labels", &".L_x_1:\n".repeat(n));
    assert_fast("many targets", &"/*0000*/ BRA `(.L_x_1) ;\n".repeat(n / 4));
    assert_fast("deep json", &format!("[{{}},[{{\"sass-instructions\":[{}", "[".repeat(n)));
    assert_fast(
        "deep json closed",
        &format!("[{{}},[{{\"sass-instructions\":[{}{}]}}]]", "[".repeat(n), "]".repeat(n)),
    );
    assert_fast("long string", &format!("[{{\"Producer\":\"{}", "x".repeat(n)));
    assert_fast("long line", &"x".repeat(n * 10));
    assert_fast("markers", &"//## File \"a\", line 1 inlined at \"b\", line 2\n".repeat(n / 4));
}
