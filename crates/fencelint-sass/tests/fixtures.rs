//! Parses every SASS listing of the project's compiled fixture set (`fixtures/compiled/`, made
//! by `scripts/build-fixtures.sh`) and requires a clean parse.

use std::path::{Path, PathBuf};

use fencelint_sass::{FunctionSplitter, OperandKind, SassFormat, detect, parse, split_functions};

fn listings(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries {
        let path = entry.expect("readable entry").path();
        if path.is_dir() {
            listings(&path, out);
        } else if path.extension().is_some_and(|ext| ext == "sass" || ext == "json") {
            out.push(path);
        }
    }
}

fn fixture_listings() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled");
    let mut files = Vec::new();
    listings(&root, &mut files);
    files.sort();
    assert!(!files.is_empty(), "no listings under {}", root.display());
    files
}

#[test]
fn every_fixture_listing_parses_cleanly() {
    for path in fixture_listings() {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let format = detect(&text).unwrap_or_else(|| panic!("{name}: format not recognised"));
        let is_json = path.extension().is_some_and(|ext| ext == "json");
        assert_eq!(format == SassFormat::NvdisasmJson, is_json, "{name}");
        let parsed = parse(&text);
        if let Some(error) = parsed.errors.first() {
            let snippet = text.get(error.range.to_usize()).unwrap_or("");
            panic!("{name}: {} at {}: `{snippet}`", error.message, error.range);
        }
        let module = parsed.value;
        assert!(!module.functions.is_empty(), "{name}: no functions");
        for function in &module.functions {
            assert!(function.arch.is_some(), "{name}: {} has no architecture", function.name);
            assert!(!function.instructions.is_empty(), "{name}: {} is empty", function.name);
            for inst in &function.instructions {
                assert!(!inst.malformed, "{name}: malformed {}", inst.opcode);
                for operand in &inst.operands {
                    assert!(
                        !matches!(operand.kind, OperandKind::Other(_)),
                        "{name}: unclassified operand `{}` in `{}`",
                        &text[operand.range.to_usize()],
                        &text[inst.range.to_usize()]
                    );
                }
                let relative_branch = matches!(inst.base(), "BRA" | "BSSY")
                    && inst
                        .operands
                        .last()
                        .is_some_and(|op| !matches!(op.kind, OperandKind::Reg(_)));
                if relative_branch {
                    let target = inst.branch_target.unwrap_or_else(|| {
                        panic!("{name}: unresolved `{}`", &text[inst.range.to_usize()])
                    });
                    let end = function.instructions.last().map_or(0, |last| last.address + 16);
                    assert!(function.index_of(target).is_some() || target == end, "{name}");
                }
            }
        }
        let chunks: Vec<_> =
            FunctionSplitter::new(text.as_bytes()).map(|chunk| chunk.expect("in memory")).collect();
        assert_eq!(chunks.len(), module.functions.len(), "{name}");
        for (chunk, function) in chunks.iter().zip(&module.functions) {
            let parsed = chunk.parse();
            assert!(parsed.errors.is_empty(), "{name}: {:?}", parsed.errors);
            let streamed = &parsed.value.functions[0];
            assert_eq!((streamed.name, streamed.arch), (function.name, function.arch), "{name}");
            assert_eq!(streamed.instructions.len(), function.instructions.len(), "{name}");
        }
        let in_memory = split_functions(&text);
        assert_eq!(in_memory.len(), module.functions.len(), "{name}");
        for (chunk, function) in in_memory.iter().zip(&module.functions) {
            let parsed = chunk.parse();
            assert!(parsed.errors.is_empty(), "{name}: {:?}", parsed.errors);
            let actual = &parsed.value.functions[0];
            assert_eq!((actual.range, actual.arch), (function.range, function.arch), "{name}");
            assert!(actual.instructions == function.instructions, "{name}: {}", function.name);
        }
    }
}
