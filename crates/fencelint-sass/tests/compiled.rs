//! Parses real compiler output (`tests/data/`, made by `tests/data/regenerate.sh` from the
//! `.cu` sources there) and checks the formats against each other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use fencelint_sass::{
    Arch, FunctionSplitter, MemPrefix, OperandKind, RegFile, SassFormat, SassFunction, SassInst,
    SassModule, detect, parse, split_functions,
};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn read(name: &str) -> String {
    let path = data_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|error| panic!("{}: {error}", path.display()))
}

fn data_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(data_dir())
        .expect("tests/data exists")
        .map(|entry| entry.expect("readable entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "sass" || ext == "json"))
        .collect();
    files.sort();
    files
}

fn is_json(path: &Path) -> bool {
    path.extension().is_some_and(|ext| ext == "json")
}

/// Parses `text` and fails on any parse error or malformed instruction.
fn parse_clean<'a>(name: &str, text: &'a str) -> SassModule<'a> {
    let parsed = parse(text);
    if let Some(error) = parsed.errors.first() {
        let snippet = text.get(error.range.to_usize()).unwrap_or("");
        panic!("{name}: {} at {}: `{snippet}`", error.message, error.range);
    }
    parsed.value
}

fn function<'m, 'a>(module: &'m SassModule<'a>, name: &str) -> &'m SassFunction<'a> {
    module
        .functions
        .iter()
        .find(|function| function.name == name)
        .unwrap_or_else(|| panic!("no function {name}"))
}

/// Structural checks that hold for every function of every listing.
fn check_invariants(name: &str, text: &str, module: &SassModule<'_>) {
    assert!(!module.functions.is_empty(), "{name}: no functions");
    for function in &module.functions {
        assert!(!function.instructions.is_empty(), "{name}: {} is empty", function.name);
        assert!(!function.name.is_empty(), "{name}: a function has no name");
        let range = function.range.to_usize();
        assert!(range.end <= text.len());
        let mut previous = None;
        for inst in &function.instructions {
            assert!(!inst.malformed, "{name}: malformed {}", inst.opcode);
            assert!(previous.is_none_or(|p| p < inst.address), "{name}: addresses out of order");
            previous = Some(inst.address);
            assert!(
                inst.range.start >= function.range.start && inst.range.end <= function.range.end
            );
            let inst_text = &text[inst.range.to_usize()];
            if module.format.is_text() {
                assert!(inst_text.ends_with(';'), "{name}: {inst_text}");
                assert!(inst_text.contains(inst.opcode));
            }
            for operand in &inst.operands {
                let operand_text = &text[operand.range.to_usize()];
                assert!(!operand_text.is_empty() && !operand_text.contains([',', ' ', ';']));
                assert!(
                    !matches!(operand.kind, OperandKind::Other(_)),
                    "{name}: unclassified operand `{operand_text}` in `{inst_text}`"
                );
            }
            if let Some(target) = inst.branch_target {
                let end = function.instructions.last().map_or(0, |last| last.address + 16);
                assert!(
                    function.index_of(target).is_some() || target == end,
                    "{name}: {} targets {target:#x}, not an instruction",
                    inst.opcode
                );
            }
            let is_relative_branch = matches!(inst.base(), "BRA" | "BSSY")
                && !inst
                    .operands
                    .iter()
                    .any(|op| matches!(op.kind, OperandKind::Reg(r) if r.reg.file == RegFile::R));
            if is_relative_branch {
                assert!(inst.branch_target.is_some(), "{name}: unresolved {inst_text}");
            }
        }
        for label in &function.labels {
            assert!(
                function.index_of(label.address).is_some() || label.address > previous.unwrap_or(0)
            );
        }
    }
}

#[test]
fn every_listing_parses_without_errors() {
    let files = data_files();
    assert!(files.len() >= 20, "expected the generated listings, found {}", files.len());
    for path in files {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let expected = if is_json(&path) {
            SassFormat::NvdisasmJson
        } else if name.contains("cuobjdump") {
            SassFormat::CuobjdumpText
        } else {
            SassFormat::NvdisasmText
        };
        assert_eq!(detect(&text), Some(expected), "{name}");
        let module = parse_clean(&name, &text);
        assert_eq!(module.format, expected);
        check_invariants(&name, &text, &module);
    }
}

/// What must agree between listings of the same cubin.
fn signature(inst: &SassInst<'_>) -> String {
    let operands: Vec<String> = inst
        .operands
        .iter()
        .map(|op| match op.kind {
            // A code target is a label in nvdisasm text, a number in cuobjdump and JSON (and a
            // bare symbol for JSON calls); `RET` names the function returned into.
            OperandKind::Label(_) => "target".to_owned(),
            OperandKind::Imm(_) if inst.branch_target.is_some() || inst.base() == "RET" => {
                "target".to_owned()
            }
            kind => format!("{kind:?}{}{}{}{}", op.neg, op.invert, op.abs, op.reuse),
        })
        .collect();
    let guard = inst.guard.map(|guard| guard.to_string()).unwrap_or_default();
    format!("{:#06x} {guard} {} {}", inst.address, inst.opcode, operands.join(" | "))
}

fn targets(function: &SassFunction<'_>) -> Vec<Option<u64>> {
    function.instructions.iter().map(|inst| inst.branch_target).collect()
}

#[test]
fn all_formats_of_one_cubin_agree() {
    for stem in ["sync_sm90", "cpasync_sm80", "tcgen05_sm100", "inline_sm120"] {
        let names = [
            format!("{stem}.cuobjdump.sass"),
            format!("{stem}.nvdisasm-g.sass"),
            format!("{stem}.nvdisasm-gp.sass"),
            format!("{stem}.nvdisasm-hex.sass"),
            format!("{stem}.nvdisasm.json"),
        ];
        let texts: Vec<String> = names.iter().map(|name| read(name)).collect();
        let modules: Vec<SassModule<'_>> =
            names.iter().zip(&texts).map(|(name, text)| parse_clean(name, text)).collect();
        let reference = &modules[0];
        for (name, module) in names.iter().zip(&modules).skip(1) {
            let by_name: BTreeMap<&str, &SassFunction<'_>> =
                module.functions.iter().map(|function| (function.name, function)).collect();
            assert_eq!(by_name.len(), reference.functions.len(), "{name}");
            for expected in &reference.functions {
                let actual = by_name[expected.name];
                assert_eq!(actual.arch, expected.arch, "{name}: {}", expected.name);
                let expected_sigs: Vec<String> =
                    expected.instructions.iter().map(signature).collect();
                let actual_sigs: Vec<String> = actual.instructions.iter().map(signature).collect();
                assert_eq!(actual_sigs, expected_sigs, "{name}: {}", expected.name);
                if module.format == SassFormat::NvdisasmJson {
                    // JSON names subroutines by symbol only, so calls to them stay unresolved.
                    for (inst, target) in actual.instructions.iter().zip(targets(expected)) {
                        if inst.base() != "CALL" {
                            assert_eq!(inst.branch_target, target, "{name}: {}", signature(inst));
                        }
                    }
                } else {
                    assert_eq!(targets(actual), targets(expected), "{name}: {}", expected.name);
                }
            }
        }
    }
}

#[test]
fn listing_without_c_skips_data_sections() {
    let full = read("inline_sm120.nvdisasm-full.sass");
    let code = read("inline_sm120.nvdisasm-g.sass");
    let full = parse_clean("full", &full);
    let code = parse_clean("code", &code);
    assert_eq!(full.functions.len(), code.functions.len());
    for (a, b) in full.functions.iter().zip(&code.functions) {
        assert_eq!(a.name, b.name);
        let a: Vec<String> = a.instructions.iter().map(signature).collect();
        let b: Vec<String> = b.instructions.iter().map(signature).collect();
        assert_eq!(a, b);
    }
}

#[test]
fn cuobjdump_fields() {
    let text = read("sync_sm90.cuobjdump.sass");
    let module = parse_clean("sync_sm90", &text);
    let consume = function(&module, "_Z11tma_consume14CUtensorMap_stPfi");
    assert_eq!(consume.arch, Some(Arch { number: 90, suffix: Some('a') }));
    assert_eq!(consume.arch.unwrap().to_string(), "sm_90a");
    assert!(text[consume.range.to_usize()].trim_start().starts_with("Function : _Z11tma_consume"));
    assert!(text[consume.range.to_usize()].ends_with(".........."));
    let first = &consume.instructions[0];
    assert_eq!((first.address, first.opcode), (0, "LDC"));
    assert_eq!(&text[first.range.to_usize()], "/*0000*/                   LDC R1, c[0x0][0x28] ;");
    let words: Vec<u64> = first.encoding_words(&text).collect();
    assert_eq!(words, [0x0000_0a00_ff01_7b82, 0x000f_e200_0000_0800]);
    let wait = consume
        .instructions
        .iter()
        .find(|inst| inst.opcode == "SYNCS.PHASECHK.TRANS64.TRYWAIT")
        .expect("an mbarrier wait");
    assert_eq!(wait.base(), "SYNCS");
    assert_eq!(wait.modifiers().collect::<Vec<_>>(), ["PHASECHK", "TRANS64", "TRYWAIT"]);
    let barrier = wait.operands[1].mem().expect("a memory operand");
    assert_eq!(barrier.prefix, MemPrefix::None);
    assert_eq!(barrier.addr.base.unwrap().reg.file, RegFile::UR);
    // The wait is followed by a branch back to it, or to an outlined retry loop.
    let after = &consume.instructions[consume.index_of(wait.address).unwrap() + 1];
    assert_eq!(after.base(), "BRA");
    assert!(after.guard.is_some_and(|guard| guard.negated && guard.reg.file == RegFile::P));
    assert!(after.branch_target.is_some());
    assert!(consume.instructions.iter().any(|inst| inst.opcode == "UTMALDG.2D"));
    assert!(
        consume.instructions.iter().all(|inst| inst.src_line.is_none() && inst.ptx_line.is_none())
    );
}

#[test]
fn nvdisasm_labels_and_targets() {
    let text = read("sync_sm90.nvdisasm-gp.sass");
    let module = parse_clean("gp", &text);
    let consume = function(&module, "_Z11tma_consume14CUtensorMap_stPfi");
    for label in &consume.labels {
        assert!(text[label.range.to_usize()].ends_with(':'));
    }
    assert_eq!(consume.label_address("_Z11tma_consume14CUtensorMap_stPfi"), Some(0));
    let retry = consume.label_address(".L_x_13").expect(".L_x_13");
    assert_eq!(retry, 0x390);
    let back = consume.inst_at(0x3a0).expect("the retry branch");
    assert_eq!(back.opcode, "BRA");
    assert_eq!(back.branch_target, Some(0x390));
    assert_eq!(back.operands[0].label(), Some(".L_x_13"));
    // The function ends with a label after its last instruction: it names the end address.
    let last = consume.instructions.last().unwrap();
    let end_label = consume.labels.last().unwrap();
    assert_eq!(end_label.address, last.address + 16);
}

#[test]
fn ptx_line_markers_are_sticky() {
    let text = read("sync_sm90.nvdisasm-gp.sass");
    let module = parse_clean("gp", &text);
    let fences = function(&module, "_Z18atomics_and_fencesPjS_Py");
    // `//## File ".nv_debug_ptx_txt", line 293` precedes 0x10; 0x20 follows a label with no
    // marker of its own.
    assert_eq!(fences.inst_at(0x0).unwrap().ptx_line, Some(279));
    assert_eq!(fences.inst_at(0x10).unwrap().ptx_line, Some(293));
    assert_eq!(fences.inst_at(0x20).unwrap().ptx_line, Some(293));
    let consume = function(&module, "_Z11tma_consume14CUtensorMap_stPfi");
    assert_eq!(consume.inst_at(0x390).unwrap().ptx_line, Some(96));
    assert_eq!(consume.inst_at(0x3a0).unwrap().ptx_line, Some(100));
    for function in &module.functions {
        assert!(function.instructions.iter().all(|inst| inst.ptx_line.is_some()));
        assert!(function.instructions.iter().all(|inst| inst.src_line.is_none()));
    }
}

#[test]
fn source_lines_and_inlining() {
    let text = read("inline_sm120.nvdisasm-gi.sass");
    let module = parse_clean("gi", &text);
    let kernel = function(&module, "_Z7inlinedPKfPfi");
    assert!(kernel.instructions.iter().all(|inst| inst.src_line.is_some()));
    let inlined: Vec<&SassInst<'_>> =
        kernel.instructions.iter().filter(|inst| inst.inlined_at.is_some()).collect();
    assert!(!inlined.is_empty());
    for inst in &inlined {
        let src = inst.src_line.unwrap();
        let sites = inst.inlined_at.as_deref().unwrap();
        assert_eq!(sites.len(), 1, "one level of inlining");
        let outer = sites[0];
        assert_eq!((src.file, src.line), ("inline_sm120.cu", 2));
        assert_eq!(outer.file, "inline_sm120.cu");
        assert!(outer.line == 9 || outer.line == 10);
    }
    let reduce = function(&module, "_Z13shared_reducePKiPi");
    let atomic = reduce.instructions.iter().find(|inst| inst.base() == "REDG").expect("REDG");
    assert_eq!(atomic.src_line.unwrap().file, "cuda/include/device_atomic_functions.hpp");
    assert_eq!(atomic.inlined_at.as_deref().and_then(<[_]>::last).unwrap().line, 22);
    // `-g` prints the innermost location only; it must agree with `-gi` instruction by
    // instruction.
    let plain_text = read("inline_sm120.nvdisasm-g.sass");
    let plain = parse_clean("g", &plain_text);
    for (with_g, with_gi) in plain.functions.iter().zip(&module.functions) {
        for (a, b) in with_g.instructions.iter().zip(&with_gi.instructions) {
            assert_eq!(a.src_line, b.src_line, "{:#x}", a.address);
            assert_eq!(a.inlined_at, None);
        }
    }
}

#[test]
fn subroutine_calls_resolve_in_text() {
    let text = read("inline_sm120.nvdisasm-g.sass");
    let module = parse_clean("g", &text);
    let kernel = function(&module, "_Z7inlinedPKfPfi");
    let call = kernel.instructions.iter().find(|inst| inst.base() == "CALL").expect("a call");
    let callee = call.operands[0].label().expect("a symbol");
    assert_eq!(callee, "$_Z7inlinedPKfPfi$_Z8outlinedf");
    assert_eq!(call.branch_target, kernel.label_address(callee));
    let ret = kernel.instructions.iter().find(|inst| inst.base() == "RET").expect("a return");
    assert_eq!(ret.branch_target, None);
    assert_eq!(ret.operands[1].label(), Some("_Z7inlinedPKfPfi"));
}

#[test]
fn json_addresses_and_metadata() {
    let text = read("tcgen05_sm100.nvdisasm.json");
    let module = parse_clean("json", &text);
    assert!(module.producer.is_some_and(|producer| producer.starts_with("nvdisasm")));
    for function in &module.functions {
        assert_eq!(function.arch, Some(Arch { number: 100, suffix: Some('a') }));
        for (index, inst) in function.instructions.iter().enumerate() {
            assert_eq!(inst.address, 16 * index as u64);
            assert!(text[inst.range.to_usize()].starts_with('{'));
        }
    }
    let tmem = function(&module, "_Z14tmem_roundtripPfi");
    let load = tmem.instructions.iter().find(|inst| inst.opcode == "LDTM").expect("LDTM");
    let source = load.operands[1].mem().expect("tmem operand");
    assert_eq!(source.prefix, MemPrefix::Tmem);
    assert_eq!(&text[load.operands[1].range.to_usize()], "tmem[UR7]");
}

#[test]
fn fat_binary_entries_carry_their_context() {
    let text = read("fatbin_multi.cuobjdump.sass");
    let module = parse_clean("fatbin", &text);
    assert_eq!(module.functions.len(), 6);
    let archs: Vec<String> = module.functions.iter().map(|f| f.arch.unwrap().to_string()).collect();
    assert_eq!(archs, ["sm_90a", "sm_90a", "sm_90a", "sm_80", "sm_80", "sm_80"]);
    // cuobjdump prints `identifier = x.cu` only for entries built with line info; this object
    // is built without it (see regenerate.sh), so no entry names its source.
    assert!(module.functions.iter().all(|f| f.binary.is_none()));
}

fn split_all(text: &str) -> Vec<fencelint_sass::SassChunk> {
    FunctionSplitter::new(text.as_bytes())
        .map(|chunk| chunk.expect("reading from memory"))
        .collect()
}

#[test]
fn streamed_chunks_parse_like_the_whole_text() {
    for path in data_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let whole = parse_clean(&name, &text);
        let chunks = split_all(&text);
        assert_eq!(chunks.len(), whole.functions.len(), "{name}");
        for (chunk, expected) in chunks.iter().zip(&whole.functions) {
            assert_eq!(chunk.function, expected.name, "{name}");
            assert_eq!(chunk.arch, expected.arch, "{name}");
            assert_eq!(chunk.binary.as_deref(), expected.binary, "{name}");
            assert_eq!(
                chunk.format,
                if is_json(&path) { SassFormat::NvdisasmJson } else { whole.format }
            );
            let start = chunk.offset as usize;
            assert_eq!(&text[start..start + chunk.text.len()], chunk.text, "{name}");
            if whole.format.is_text() {
                assert_eq!(text[..start].matches('\n').count() as u64, chunk.line, "{name}");
            }
            let parsed = chunk.parse();
            assert!(parsed.errors.is_empty(), "{name}: {:?}", parsed.errors);
            assert_eq!(parsed.value.functions.len(), 1, "{name}");
            let actual = &parsed.value.functions[0];
            assert_eq!(actual.name, expected.name);
            assert_eq!(actual.arch, expected.arch);
            assert_eq!(actual.binary, expected.binary);
            let offset = chunk.offset as u32;
            assert_eq!(actual.range.shifted(offset), expected.range, "{name}: {}", expected.name);
            assert_eq!(actual.instructions.len(), expected.instructions.len());
            for (a, e) in actual.instructions.iter().zip(&expected.instructions) {
                assert_eq!(a.range.shifted(offset), e.range);
                assert_eq!(signature(a), signature(e));
                assert_eq!(
                    (a.branch_target, a.ptx_line, a.src_line),
                    (e.branch_target, e.ptx_line, e.src_line)
                );
                assert_eq!(a.encoding.map(|r| r.shifted(offset)), e.encoding);
            }
            assert_eq!(actual.labels.len(), expected.labels.len());
            if whole.format.is_text() {
                // The one-function parse sizes its tables up front; the result is the same,
                // and the architecture given fills in where the text names none.
                assert_eq!(
                    fencelint_sass::parse_function_text(&chunk.text, None),
                    fencelint_sass::parse_text(&chunk.text),
                    "{name}: {}",
                    expected.name
                );
                let with_arch = fencelint_sass::parse_function_text(&chunk.text, chunk.arch);
                assert_eq!(with_arch.value.functions[0].arch, expected.arch, "{name}");
            }
        }
    }
}

#[test]
fn in_memory_chunks_parse_like_the_whole_text() {
    for path in data_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let whole = parse_clean(&name, &text);
        let streamed = split_all(&text);
        let chunks = split_functions(&text);
        assert_eq!(chunks.len(), whole.functions.len(), "{name}");
        for ((chunk, stream), expected) in chunks.iter().zip(&streamed).zip(&whole.functions) {
            assert_eq!(chunk.function, stream.function, "{name}");
            assert_eq!((chunk.arch, chunk.binary), (stream.arch, stream.binary.as_deref()));
            assert_eq!(u64::from(chunk.range.start), stream.offset, "{name}");
            assert_eq!(chunk.text(), stream.text, "{name}");
            let parsed = chunk.parse();
            assert!(parsed.errors.is_empty(), "{name}: {:?}", parsed.errors);
            assert_eq!(parsed.value.functions.len(), 1);
            // Ranges are relative to the whole text: the function is exactly the same.
            let actual = &parsed.value.functions[0];
            assert_eq!(
                (actual.name, actual.arch, actual.binary, actual.range),
                (expected.name, expected.arch, expected.binary, expected.range),
                "{name}"
            );
            assert_eq!(actual.labels, expected.labels, "{name}");
            assert_eq!(actual.instructions.len(), expected.instructions.len(), "{name}");
            for (a, e) in actual.instructions.iter().zip(&expected.instructions) {
                assert_eq!(a, e, "{name}");
            }
        }
    }
}

/// The splitter reads whole runs of code lines out of the reader's buffer at once and reads
/// text and JSON chunks into recycled buffers: the chunks must not depend on where the buffer
/// ends, nor on what buffer they were read into.
#[test]
fn chunks_do_not_depend_on_buffer_boundaries_or_recycling() {
    for path in data_files() {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let bytes = std::fs::read(&path).unwrap();
        let expected: Vec<_> = FunctionSplitter::new(bytes.as_slice())
            .with_target_lines()
            .map(|chunk| chunk.expect("reading from memory"))
            .collect();
        assert!(!expected.is_empty(), "{name}");
        for capacity in [1, 2, 3, 7, 64, 4096] {
            let reader = std::io::BufReader::with_capacity(capacity, bytes.as_slice());
            let mut splitter = FunctionSplitter::new(reader).with_target_lines();
            let mut actual = Vec::new();
            while let Some(chunk) = splitter.next() {
                let chunk = chunk.expect("reading from memory");
                // Hand back a copy, as the linter hands back each text once linted: the next
                // chunk is read into a buffer that already held a function.
                splitter.recycle(chunk.text.clone());
                actual.push(chunk);
            }
            assert_eq!(actual, expected, "{name} with a {capacity}-byte buffer");
        }
    }
}

/// A cubin of three translation units linked together (`fixtures/kernels/linked/`) has two
/// copies of each of the compiler's division helpers. nvdisasm names a copy's section and its
/// symbol apart (`.section .text.__cuda_sm20_div_s64__1` holds
/// `.type __cuda_sm20_div_s64__2,@function`), and the calls name the symbol: each function
/// takes the name its `.type` gives, in the parse and in both splitters, so that every call by
/// name finds its callee (named after the section, the copies' calls fell through).
#[test]
fn functions_take_the_name_of_their_symbol() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/compiled/multiarch/linked.sm_80.nvdisasm-c.sass");
    let text = std::fs::read_to_string(&path).unwrap();
    let module = parse_clean("linked.sm_80.nvdisasm-c.sass", &text);
    let names: Vec<&str> = module.functions.iter().map(|f| f.name).collect();
    let typed: Vec<&str> = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix(".type"))
        .filter_map(|rest| rest.trim().strip_suffix(",@function"))
        .collect();
    assert_eq!(names, typed);
    // The second copy of each helper is named apart from its section.
    let sections: Vec<&str> = text
        .lines()
        .filter_map(|line| line.trim().strip_prefix(".section"))
        .filter_map(|rest| rest.trim().split(',').next()?.strip_prefix(".text."))
        .collect();
    assert_eq!(sections.len(), names.len());
    let apart: Vec<(&str, &str)> =
        sections.into_iter().zip(names.iter().copied()).filter(|(s, n)| s != n).collect();
    assert_eq!(apart.len(), 2, "{apart:?}");
    assert!(apart.iter().any(|(_, n)| n.starts_with("__cuda_sm20_div_s64__")), "{apart:?}");
    let streamed: Vec<String> = split_all(&text).into_iter().map(|c| c.function).collect();
    assert_eq!(streamed, names);
    let in_memory: Vec<&str> = split_functions(&text).iter().map(|c| c.function).collect();
    assert_eq!(in_memory, names);
    let mut calls = 0;
    for function in &module.functions {
        for inst in function.instructions.iter().filter(|inst| inst.opcode.starts_with("CALL")) {
            let target = inst.operands.iter().find_map(fencelint_sass::Operand::label);
            let target = target.expect("a named callee");
            assert!(names.contains(&target), "{}: calls {target}", function.name);
            calls += 1;
        }
    }
    // Each kernel calls the wait and one copy of each helper.
    assert_eq!(calls, 6);
}
