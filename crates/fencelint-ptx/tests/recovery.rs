//! Error recovery and hostile inputs: parsing never fails, never panics, stays linear.
//!
//! Every input in this file is hand-written or generated here; none is compiler output.

use std::time::{Duration, Instant};

use fencelint_ptx::{Module, ModuleItem, Parsed, Statement, parse, split_functions, stats};

const FIFTY_MB: usize = 50 * 1024 * 1024;

/// The size of the hostile inputs that hold millions of statements: 50 MB in optimized test
/// builds (`cargo test --release`), 8 MB in debug builds, where the same input takes minutes.
const MANY_STATEMENTS_BYTES: usize =
    if cfg!(debug_assertions) { 8 * 1024 * 1024 } else { FIFTY_MB };

/// Generous: debug builds are slow, and CI machines are small.
const TIME_LIMIT: Duration = Duration::from_mins(1);

fn timed(src: &str) -> Parsed<Module<'_>> {
    let start = Instant::now();
    let parsed = parse(src);
    let elapsed = start.elapsed();
    assert!(elapsed < TIME_LIMIT, "parsing {} bytes took {elapsed:?}", src.len());
    assert_ranges_on_char_boundaries(src, &parsed);
    parsed
}

/// Renderers slice the source by error ranges: they must be in bounds, on char boundaries.
fn assert_ranges_on_char_boundaries(src: &str, parsed: &Parsed<Module<'_>>) {
    for error in &parsed.errors {
        assert!(src.get(error.range.to_usize()).is_some(), "{error:?} in {} bytes", src.len());
    }
    for item in &parsed.value.items {
        assert!(src.get(item.range().to_usize()).is_some(), "{item:?}");
        if let ModuleItem::Function(function) = item {
            for statement in function.statements() {
                assert!(src.get(statement.range().to_usize()).is_some(), "{statement:?}");
            }
        }
    }
}

fn function_statements<'m, 'a>(module: &'m Module<'a>, name: &str) -> &'m [Statement<'a>] {
    module.function(name).unwrap_or_else(|| panic!("no function {name}")).statements()
}

fn instruction_count(module: &Module<'_>, name: &str) -> usize {
    module.function(name).map_or(0, |f| f.instructions().count())
}

#[test]
fn bad_statement_becomes_unknown_and_parsing_resumes() {
    // Hand-written.
    let src = ".entry k()\n{\nmov.u32 %r1, [%rd1+%r2];\nadd.s32 %r1, %r1, 1;\n}\n";
    let parsed = parse(src);
    assert_eq!(parsed.errors.len(), 1, "{:#?}", parsed.errors);
    let error = &parsed.errors[0];
    assert!(error.message.starts_with("expected "), "{}", error.message);
    assert!(!error.message.ends_with('.'));
    assert_eq!(&src[error.range.to_usize()], "%r2]");
    let statements = function_statements(&parsed.value, "k");
    let Statement::Unknown(unknown) = &statements[0] else { panic!("{:?}", statements[0]) };
    assert_eq!(unknown.text, "mov.u32 %r1, [%rd1+%r2];");
    assert!(matches!(&statements[1], Statement::Instruction(i) if i.opcode == "add.s32"));
}

#[test]
fn error_messages_say_what_was_expected() {
    // Hand-written.
    let cases = [
        ("ld.u32 %r1, [%rd1;", "`]`"),
        ("@!;", "predicate register"),
        ("@%p1 ;", "instruction opcode"),
        ("mov.u32 %r1 %r2;", "`,` or `;`"),
        ("ld..u32 %r1, [%rd1];", "modifier"),
        ("mov.f32 %f1, 0f3F80;", "8 hex digits"),
        ("123 abc;", "instruction, a label or a directive"),
    ];
    for (statement, expected) in cases {
        let src = format!(".entry k()\n{{\n{statement}\n}}\n");
        let parsed = parse(&src);
        assert_eq!(parsed.errors.len(), 1, "{statement}: {:#?}", parsed.errors);
        let message = &parsed.errors[0].message;
        assert!(message.contains(expected), "{statement}: {message}");
        assert_eq!(instruction_count(&parsed.value, "k"), 0);
    }
}

#[test]
fn missing_semicolon_costs_one_statement() {
    // Hand-written.
    let src = ".entry k()\n{\nmov.u32 %r1, 2\n@%p1 bra L1;\nL1:\nadd.s32 %r1, %r1, 1\n.loc 1 2 3\nret\n}\n";
    let parsed = parse(src);
    assert_eq!(parsed.errors.len(), 3, "{:#?}", parsed.errors);
    assert!(parsed.errors.iter().all(|e| e.message.contains("expected `;`")));
    // All four instructions are still there.
    assert_eq!(instruction_count(&parsed.value, "k"), 4);
}

#[test]
fn missing_closing_brace_before_next_function() {
    // Hand-written.
    let src = ".entry a()\n{\nret;\n\n.entry b()\n{\nret;\n}\n";
    let parsed = parse(src);
    assert_eq!(parsed.errors.len(), 1);
    assert!(parsed.errors[0].message.contains("expected `}` closing the body of `a`"));
    assert_eq!(instruction_count(&parsed.value, "a"), 1);
    assert_eq!(instruction_count(&parsed.value, "b"), 1);
}

#[test]
fn stray_closing_braces_and_blocks_at_module_scope() {
    // Hand-written.
    let src =
        "}\n}\n{ garbage { nested } }\n.entry a()\n{\n{\nret;\n}\n}\n}\n.entry b()\n{\nret;\n}\n";
    let parsed = parse(src);
    assert_eq!(instruction_count(&parsed.value, "a"), 1);
    assert_eq!(instruction_count(&parsed.value, "b"), 1);
    // The first three stretches merge into one unknown item, the last `}` is another.
    let unknown = parsed.value.items.iter().filter(|i| matches!(i, ModuleItem::Unknown(_))).count();
    assert_eq!(unknown, 2);
    assert_eq!(parsed.errors.len(), 2);
}

#[test]
fn unbalanced_scope_inside_function() {
    // Hand-written: an extra `{` inside the body swallows the closing brace, and the next
    // function header ends the body.
    let src = ".entry a()\n{\n{\nret;\n}\n.entry b()\n{\nret;\n}\n";
    let parsed = parse(src);
    assert_eq!(parsed.errors.len(), 1);
    assert_eq!(instruction_count(&parsed.value, "a"), 1);
    assert_eq!(instruction_count(&parsed.value, "b"), 1);
}

#[test]
fn truncated_files() {
    // Hand-written.
    let full = ".version 9.4\n.target sm_90a\n.address_size 64\n.visible .entry k(\n.param .u64 p\n)\n.maxntid 128, 1, 1\n{\n.reg .b32 %r<3>;\nld.param.u64 %rd1, [p];\nst.global.u32 [%rd1+4], %r1;\nret;\n}\n";
    for cut in 0..=full.len() {
        let parsed = parse(&full[..cut]);
        let counts = stats(&parsed.value);
        assert!(counts.instructions <= 3);
        if cut == full.len() {
            assert!(parsed.errors.is_empty());
        }
    }
    let truncated = parse(&full[..full.len() - 3]);
    assert!(
        truncated
            .errors
            .iter()
            .any(|e| e.message.contains("expected `;`") || e.message.contains("`}`"))
    );
}

#[test]
fn unterminated_comment_and_string() {
    // Hand-written.
    let parsed = parse(".entry k()\n{\nret;\n/* never closed\nret;\n}\n");
    assert!(parsed.errors.iter().any(|e| e.message.contains("unterminated block comment")));
    assert_eq!(instruction_count(&parsed.value, "k"), 1);

    let parsed = parse(".file 1 \"no end\n.entry k()\n{\nret;\n}\n");
    assert_eq!(parsed.errors.len(), 1);
    assert_eq!(instruction_count(&parsed.value, "k"), 1);

    let parsed = parse(".entry k()\n{\n.pragma \"x;\nret;\n}\n");
    assert!(!parsed.errors.is_empty());
    assert_eq!(instruction_count(&parsed.value, "k"), 1);
}

#[test]
fn a_dot_without_a_directive_name_is_an_error() {
    // Hand-written.
    for src in [".;\n", ". global .u32 x;\n", ".5;\n", ".entry k()\n{\n.;\nret;\n}\n"] {
        let parsed = parse(src);
        assert_eq!(parsed.errors.len(), 1, "{src:?}: {:#?}", parsed.errors);
        assert!(
            parsed.errors[0].message.contains("directive name"),
            "{}",
            parsed.errors[0].message
        );
    }
}

#[test]
fn bad_function_header_skips_its_body() {
    // Hand-written.
    let src = ".entry (x)\n{\nret;\n}\n.entry ok()\n{\nret;\n}\n";
    let parsed = parse(src);
    assert_eq!(parsed.errors.len(), 1);
    assert!(
        parsed.errors[0].message.contains("in a function header"),
        "{}",
        parsed.errors[0].message
    );
    assert_eq!(instruction_count(&parsed.value, "ok"), 1);
}

#[test]
fn empty_input() {
    let parsed = parse("");
    assert!(parsed.value.items.is_empty() && parsed.errors.is_empty());
    assert!(split_functions("").is_empty());
}

/// A small deterministic generator, so failures reproduce.
fn pseudo_random_bytes(len: usize, mut seed: u64) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(len);
    for _ in 0..len {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        bytes.push((seed >> 56) as u8);
    }
    bytes
}

#[test]
fn garbage_bytes() {
    // Generated: random bytes, and random bytes drawn from PTX punctuation.
    for seed in 0..64 {
        let bytes = pseudo_random_bytes(4096, seed);
        let text = String::from_utf8_lossy(&bytes);
        let parsed = timed(&text);
        assert!(parsed.errors.len() <= text.len() + 1);
        let _ = split_functions(&text);

        let alphabet = b".{}[]();:@!%_$\"/*\n +-,0xfr1 entry func reg";
        let punct: Vec<u8> = bytes.iter().map(|b| alphabet[*b as usize % alphabet.len()]).collect();
        let text = String::from_utf8_lossy(&punct);
        let _ = timed(&text);
        let _ = split_functions(&text);
        let wrapped = format!(".entry k()\n{{\n{text}\n}}\n");
        let _ = timed(&wrapped);
    }
}

#[test]
fn mutated_real_looking_module() {
    // Generated from a hand-written module: every single-byte deletion must parse without
    // panicking.
    let src = ".version 9.4\n.target sm_90a\n.global .u32 g[2] = {1, 2};\n.visible .entry k(.param .u64 p)\n{\n.reg .pred %p<2>;\n{ // callseq\n.param .b32 param0;\ncall.uni (retval0), f, (param0);\n}\n@!%p1 bra $L1;\n$L1:\nld.global.v2.u32 {%r1, %r2}, [%rd1+-8];\ncp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%rd9, {%r1, %r2}], [%r3];\n.loc 1 2 3, function_name $L__s+1, inlined_at 1 2 3\nret;\n}\n";
    for cut in 0..src.len() {
        let mutated = format!("{}{}", &src[..cut], &src[cut + 1..]);
        let parsed = parse(&mutated);
        assert_ranges_on_char_boundaries(&mutated, &parsed);
        // A multi-byte character at every position.
        for insert in ["é", "€", "\u{FFFD}", "\u{1F600}"] {
            let mutated = format!("{}{insert}{}", &src[..cut], &src[cut..]);
            let parsed = parse(&mutated);
            assert_ranges_on_char_boundaries(&mutated, &parsed);
            let _ = split_functions(&mutated);
        }
    }
}

#[test]
fn fifty_megabyte_single_line_without_delimiters() {
    // Generated.
    let text = "a".repeat(FIFTY_MB);
    let parsed = timed(&text);
    assert_eq!(parsed.errors.len(), 1);
    // In a body, the line reads as an opcode without operands and without its `;`.
    let wrapped = format!(".entry k()\n{{\n{text}\n}}\n");
    let parsed = timed(&wrapped);
    assert_eq!(parsed.errors.len(), 1);
    assert!(parsed.errors[0].message.contains("expected `;`"));
    let wrapped = format!(".entry k()\n{{\n?{text}\n}}\n");
    let parsed = timed(&wrapped);
    assert_eq!(parsed.errors.len(), 1);
    assert_eq!(stats(&parsed.value).unknown, 1);
}

#[test]
fn fifty_megabyte_single_line_of_instructions() {
    // Generated: one line holding about 2.6 million instructions (in release builds).
    let line = "add.s32 %r1, %r2, 1; ".repeat(MANY_STATEMENTS_BYTES / 21);
    let src = format!(".entry k()\n{{\n{line}\n}}\n");
    let parsed = timed(&src);
    assert!(parsed.errors.is_empty());
    assert_eq!(stats(&parsed.value).instructions, MANY_STATEMENTS_BYTES / 21);
}

#[test]
fn fifty_megabyte_single_line_of_garbage_statements() {
    // Generated: unparsable statements merge into one unknown node and one error.
    let line = "?x; ".repeat(MANY_STATEMENTS_BYTES / 4);
    let src = format!(".entry k()\n{{\n{line}\n}}\n");
    let parsed = timed(&src);
    assert_eq!(parsed.errors.len(), 1);
    assert_eq!(stats(&parsed.value).unknown, 1);
}

#[test]
fn fifty_megabyte_comment_and_initializer() {
    // Generated.
    let comment = format!("/*{}", "x".repeat(FIFTY_MB));
    let parsed = timed(&comment);
    assert_eq!(parsed.errors.len(), 1);
    let values = "1,".repeat(MANY_STATEMENTS_BYTES / 16);
    let src = format!(".global .b8 big[{}] = {{{values}0}};\n", MANY_STATEMENTS_BYTES / 16 + 1);
    let parsed = timed(&src);
    assert!(parsed.errors.is_empty());
}

#[test]
fn hundred_thousand_nested_braces() {
    // Generated.
    let depth = 100_000;
    let balanced = format!(".entry k()\n{{\n{}ret;{}\n}}\n", "{".repeat(depth), "}".repeat(depth));
    let parsed = timed(&balanced);
    // Deep nesting is reported once, and everything is still parsed.
    assert_eq!(parsed.errors.len(), 1);
    assert_eq!(stats(&parsed.value).instructions, 1);
    assert_eq!(stats(&parsed.value).statements, 2 * depth + 1);

    let unbalanced = format!(".entry k()\n{{\n{}ret;\n", "{".repeat(depth));
    let parsed = timed(&unbalanced);
    assert!(parsed.errors.iter().any(|e| e.message.contains("expected `}`")));

    let module_scope = "{".repeat(depth) + &"}".repeat(depth / 2);
    let parsed = timed(&module_scope);
    assert_eq!(parsed.errors.len(), 1);

    let operand = format!(
        ".entry k()\n{{\nmov.u32 %r1, {}%r2{};\n}}\n",
        "{".repeat(depth),
        "}".repeat(depth)
    );
    let parsed = timed(&operand);
    assert_eq!(parsed.errors.len(), 1);

    let initializer = format!(".global .u32 x = {}1{};\n", "{".repeat(depth), "}".repeat(depth));
    let parsed = timed(&initializer);
    assert_eq!(parsed.errors.len(), 1);

    let parens =
        format!(".entry k()\n{{\nmov.u32 %r1, {}1{};\n}}\n", "(".repeat(depth), ")".repeat(depth));
    let _ = timed(&parens);
    let _ = split_functions(&balanced);
}

#[test]
fn many_errors_are_capped() {
    // Generated: alternating good and bad statements cannot merge, so the cap applies.
    let body = "ret; ?x; ".repeat(20_000);
    let src = format!(".entry k()\n{{\n{body}\n}}\n");
    let parsed = timed(&src);
    assert_eq!(parsed.errors.len(), 10_001);
    assert!(parsed.errors.last().unwrap().message.contains("not reported"));
    assert_eq!(stats(&parsed.value).unknown, 20_000);
}

#[test]
fn non_ascii_text_keeps_char_boundaries() {
    // Hand-written.
    for src in [
        "é.entry k()\n{\nret;\n}\n",
        ".entry k()\n{\nmov.u32 %r1, é;\nlabelé: ret;\n€\n}\n",
        ".file 1 \"héllo.cu\"\n.entry k()\n{\n// ünïcode\nret;\n}\n",
        "\u{FFFD}\u{FFFD}{\u{FFFD}}\u{FFFD};",
    ] {
        let parsed = parse(src);
        for error in &parsed.errors {
            assert!(
                src.get(error.range.to_usize()).is_some() || error.range.end as usize <= src.len()
            );
        }
    }
}
