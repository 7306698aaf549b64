//! Real compiler output parses with zero errors.
//!
//! `tests/data/*.ptx` is nvcc 13.5 output of the `.cu` sources beside it (regenerate with
//! `tests/data/build.sh`); `fixtures/compiled/**/*.ptx` is the project's fixture set.

use std::path::{Path, PathBuf};

use fencelint_ptx::{
    Module, OperandKind, Statement, parse, parse_with_offset, split_functions, stats,
};

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn ptx_files_under(dir: &Path, found: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            ptx_files_under(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "ptx") {
            found.push(path);
        }
    }
}

fn read(path: &Path) -> String {
    String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()
}

/// Parses `text` with zero errors, checks that the per-function parse agrees, and returns it.
fn parse_clean<'a>(name: &str, text: &'a str) -> Module<'a> {
    let parsed = parse(text);
    assert!(
        parsed.errors.is_empty(),
        "{name}: {:#?}",
        &parsed.errors[..parsed.errors.len().min(5)]
    );
    let counts = stats(&parsed.value);
    assert_eq!(counts.unknown, 0, "{name}");
    assert!(counts.functions > 0, "{name}: no function");
    // The split-and-parse-each path gives the same functions.
    let spans = split_functions(text);
    let functions: Vec<_> = parsed.value.functions().collect();
    assert_eq!(spans.len(), functions.len(), "{name}");
    for (span, function) in spans.iter().zip(&functions) {
        assert_eq!((span.name, span.range), (function.name, function.range), "{name}");
        let part = parse_with_offset(&text[span.range.to_usize()], span.range.start);
        assert!(part.errors.is_empty(), "{name}: {}", span.name);
        assert_eq!(part.value.functions().next(), Some(*function), "{name}: {}", span.name);
    }
    parsed.value
}

fn data(name: &str) -> String {
    read(&data_dir().join(name))
}

fn all_instructions<'m, 'a>(module: &'m Module<'a>) -> Vec<&'m fencelint_ptx::Instruction<'a>> {
    module.functions().flat_map(fencelint_ptx::Function::instructions).collect()
}

#[test]
fn every_test_data_file_parses_cleanly() {
    let mut files = Vec::new();
    ptx_files_under(&data_dir(), &mut files);
    assert!(files.len() >= 5, "{files:?}");
    for path in files {
        let text = read(&path);
        let module = parse_clean(&path.display().to_string(), &text);
        assert!(module.version().is_some() && module.target().is_some());
        assert_eq!(module.address_size(), Some(64));
    }
}

#[test]
fn every_fixture_file_parses_cleanly() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let mut files = Vec::new();
    ptx_files_under(&root.join("compiled"), &mut files);
    ptx_files_under(&root.join("ptx"), &mut files);
    for path in files {
        let text = read(&path);
        let parsed = parse(&text);
        assert!(parsed.errors.is_empty(), "{}: {:#?}", path.display(), parsed.errors);
    }
}

#[test]
fn mbarrier_and_tma_inline_asm() {
    let text = data("mbarrier_tma.ptx");
    let module = parse_clean("mbarrier_tma.ptx", &text);
    let kernel = module.functions().find(|f| f.is_kernel()).unwrap();
    assert!(
        kernel.directive("explicitcluster").is_some()
            || kernel.directive("reqnctapercluster").is_some()
    );
    assert_eq!(
        kernel.directive("maxntid").unwrap().integer_args().collect::<Vec<_>>(),
        [128, 1, 1]
    );
    let instructions = all_instructions(&module);
    let wait = instructions
        .iter()
        .find(|i| i.starts_with(&["mbarrier", "try_wait", "parity"]) && i.has_modifier("relaxed"))
        .unwrap();
    assert!(wait.has_modifier("cluster") && wait.has_modifier("shared::cta"));
    let tma = instructions
        .iter()
        .find(|i| i.starts_with(&["cp", "async", "bulk", "tensor", "2d"]))
        .unwrap();
    assert!(tma.operands.iter().any(|o| matches!(o.kind, OperandKind::TensorAddress(_))));
    let elect = instructions.iter().find(|i| i.mnemonic() == "elect").unwrap();
    assert!(matches!(elect.operands[0].kind, OperandKind::Pipe { .. }));
    assert!(instructions.iter().any(|i| i.opcode == "fence.proxy.tensormap::generic.acquire.gpu"));
    assert!(instructions.iter().any(|i| i.starts_with(&["st", "async"])));
    // Inline asm is bracketed by markers, and `.loc` lines point into the `.cu` file.
    let statements = kernel.statements();
    assert!(statements.iter().any(|s| matches!(s, Statement::InlineAsmBegin(_))));
    let loc = statements
        .iter()
        .find_map(|s| match s {
            Statement::Loc(loc) => Some(loc),
            _ => None,
        })
        .unwrap();
    assert!(module.file_name(loc.file).unwrap().ends_with("mbarrier_tma.cu"));
}

#[test]
fn tcgen05_inline_asm() {
    let text = data("tcgen05.ptx");
    let module = parse_clean("tcgen05.ptx", &text);
    let instructions = all_instructions(&module);
    for opcode in [
        "tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32",
        "tcgen05.wait::ld.sync.aligned",
        "tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64",
        "tcgen05.dealloc.cta_group::1.sync.aligned.b32",
    ] {
        assert!(instructions.iter().any(|i| i.opcode == opcode), "{opcode}");
    }
    let ld = instructions.iter().find(|i| i.starts_with(&["tcgen05", "ld"])).unwrap();
    let OperandKind::Vector(items) = &ld.operands[0].kind else { panic!("{ld:?}") };
    assert_eq!(items.len(), 2);
}

#[test]
fn calls_tables_and_declarations() {
    let text = data("calls_and_tables.ptx");
    let module = parse_clean("calls_and_tables.ptx", &text);
    let vprintf = module.function("vprintf").unwrap();
    assert!(vprintf.body.is_none() && vprintf.returns.len() == 1);
    let instructions = all_instructions(&module);
    let calls: Vec<_> = instructions.iter().filter(|i| i.mnemonic() == "call").collect();
    assert!(calls.iter().any(|c| c.target_names().any(|t| t == "vprintf")));
    assert!(calls.iter().any(|c| c.target_names().any(|t| t == "__assertfail")));
    // The indirect call names its prototype last.
    assert!(calls.iter().any(|c| {
        c.operands
            .last()
            .and_then(fencelint_ptx::Operand::as_name)
            .is_some_and(|n| n.starts_with("prototype"))
    }));
    let prototypes = module
        .functions()
        .flat_map(fencelint_ptx::Function::statements)
        .filter(|s| matches!(s, Statement::Directive(d) if d.name == "callprototype"))
        .count();
    assert!(prototypes >= 1);
    let brx = instructions.iter().find(|i| i.mnemonic() == "brx").unwrap();
    let table = brx.target_names().next().unwrap();
    let targets = module
        .functions()
        .flat_map(fencelint_ptx::Function::statements)
        .find_map(|s| match s {
            Statement::Directive(d) if d.label.as_ref().is_some_and(|l| l.name == table) => Some(d),
            _ => None,
        })
        .unwrap();
    assert_eq!(targets.args.len(), 3);
    let kernel = module.functions().find(|f| f.is_kernel()).unwrap();
    assert_eq!(kernel.directive("maxntid").unwrap().integer_args().next(), Some(256));
    assert_eq!(kernel.directive("minnctapersm").unwrap().integer_args().next(), Some(2));
    // Module-scope constants with initializers: nvcc writes the four floats as 16 bytes.
    let coefficients = module.variables().find(|v| v.space == "const").unwrap();
    assert_eq!(coefficients.names[0].dims, [Some(16)]);
    assert_eq!(coefficients.init.as_ref().unwrap().values.len(), 16);
}

#[test]
fn atomics_polls_and_debug_sections() {
    let text = data("atomics_poll.ptx");
    let module = parse_clean("atomics_poll.ptx", &text);
    let instructions = all_instructions(&module);
    assert!(instructions.iter().any(|i| i.mnemonic() == "ld" && i.has_modifier("acquire")));
    assert!(instructions.iter().any(|i| i.mnemonic() == "atom" && i.has_modifier("sys")));
    assert!(instructions.iter().any(|i| i.opcode.starts_with("bar.warp.sync")));

    let debug = data("atomics_poll_debug.ptx");
    let module = parse_clean("atomics_poll_debug.ptx", &debug);
    let sections =
        module.items.iter().filter(|i| matches!(i, fencelint_ptx::ModuleItem::Section(_))).count();
    assert!(sections >= 3);
}
