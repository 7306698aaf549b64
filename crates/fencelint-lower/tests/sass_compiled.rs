//! Lowering every SASS listing of `fixtures/compiled/` (real ptxas output) gives a well-formed
//! IR: the facts the rules rely on are present in every format.

use std::path::{Path, PathBuf};

use fencelint_ir::{InstKind, Module};
use fencelint_lower::{InputKind, detect, lower};
use fencelint_sass::SassFormat;
use fencelint_source::FileId;

fn compiled_listings() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else { return };
        let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "sass" || e == "json") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled"), &mut out);
    assert!(!out.is_empty());
    out
}

fn check(path: &Path, format: SassFormat, modules: &[Module]) -> Vec<String> {
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
    let mut problems = Vec::new();
    let mut functions = 0;
    for module in modules {
        if module.target.as_deref().is_none_or(|t| !t.starts_with("sm_")) {
            problems.push(format!("module without an sm_ target: {:?}", module.target));
        }
        let own_code: std::collections::HashMap<(u32, u32), Option<u32>> = module
            .functions
            .iter()
            .flat_map(|f| &f.insts[..f.inlined_from.map_or(f.insts.len(), |k| k as usize)])
            .map(|i| ((i.range.start, i.range.end), i.sass_address))
            .collect();
        for func in &module.functions {
            functions += 1;
            // Every function of our fixtures is an `extern "C" __global__` kernel, except the
            // `__noinline__` device functions of a `-rdc` build (`<stem>.rdc.*`), whose names
            // are mangled C++ names. nvdisasm JSON marks no kernel: there a function is taken
            // for one unless another calls it, and a copy that nothing calls stays one (the
            // fixture tests check that findings in called code are the caller's there too).
            // cuobjdump marks none either, nor names a callee: every function is taken for one.
            // The translation units linked into `linked.*` have device functions too, and the
            // compiler's helpers (`__cuda_sm20_div_s64`) are never kernels.
            let separate = name.contains(".rdc.") || name.starts_with("linked.");
            let device =
                (separate && func.name.starts_with("_Z")) || func.name.starts_with("__cuda_");
            let unmarked = matches!(format, SassFormat::NvdisasmJson | SassFormat::CuobjdumpText);
            if func.is_kernel == device && !(device && unmarked) {
                let what = if func.is_kernel { "marked a kernel" } else { "not marked a kernel" };
                problems.push(format!("`{}` is {what}", func.name));
            }
            if func.insts.is_empty() {
                problems.push(format!("`{}` has no instructions", func.name));
            }
            // The function's own code is in address order; copies of its subroutines, and of
            // the functions of the module it calls by name, follow it (one per call,
            // `Function::inlined_from`), each in address order: each copied instruction is one
            // of the own code of the function or of another function of the module, with its
            // place in the text and its address.
            let own = func.inlined_from.map_or(func.insts.len(), |k| k as usize);
            for inst in &func.insts[own..] {
                // An `EXIT` of no width ends a copy whose code would fall into the next one.
                let seal = inst.range.start == inst.range.end && inst.kind == InstKind::Exit;
                if !seal
                    && own_code.get(&(inst.range.start, inst.range.end)) != Some(&inst.sass_address)
                {
                    problems.push(format!(
                        "`{}` {:?} `{}`: a copied instruction that is no function's own",
                        func.name, inst.sass_address, inst.opcode
                    ));
                }
            }
            if own < func.insts.len()
                && !func.insts[own..].iter().any(|i| i.kind == InstKind::Return)
            {
                problems.push(format!("`{}`: copied code without a return", func.name));
            }
            let mut previous = None;
            for inst in &func.insts[..own] {
                let at = format!(
                    "`{}` {:#06x} `{}`",
                    func.name,
                    inst.sass_address.unwrap_or(0),
                    inst.opcode
                );
                let Some(address) = inst.sass_address else {
                    problems.push(format!("{at}: no SASS address"));
                    continue;
                };
                if previous.is_some_and(|p| p >= address) {
                    problems.push(format!("{at}: addresses out of order"));
                }
                previous = Some(address);
                if inst.kind == InstKind::Unknown {
                    problems.push(format!("{at}: not understood"));
                }
                // nvdisasm text lists the targets of a jump table; cuobjdump and JSON do not,
                // and such a branch stays indirect (the CFG over-approximates its targets).
                let lists_targets = format == SassFormat::NvdisasmText;
                if matches!(inst.kind, InstKind::Branch)
                    && inst.control.targets.is_empty()
                    && !inst.control.exits
                    && (lists_targets || !inst.control.indirect)
                {
                    problems.push(format!("{at}: branch target not resolved"));
                }
                if lists_targets && inst.control.indirect {
                    problems.push(format!("{at}: indirect branch without its listed targets"));
                }
                if inst.kind.mem().is_some_and(|m| m.space != fencelint_ir::Space::Const)
                    && inst.address.is_none()
                {
                    problems.push(format!("{at}: memory access without an address"));
                }
                if name.ends_with(".nvdisasm-gp.sass") && inst.ptx_line.is_none() {
                    problems.push(format!("{at}: no PTX line in an -gp listing"));
                }
            }
            if name.ends_with(".nvdisasm.sass")
                && func.insts.iter().all(|i| i.source.is_none())
                && format == SassFormat::NvdisasmText
            {
                problems.push(format!("`{}`: no source line in an -g listing", func.name));
            }
        }
    }
    if functions == 0 {
        problems.push("no function".to_owned());
    }
    problems
}

#[test]
fn compiled_listings_lower_to_well_formed_ir() {
    let mut failures = Vec::new();
    for path in compiled_listings() {
        let text = std::fs::read_to_string(&path).unwrap();
        let Some(InputKind::Sass(format)) = detect(&text) else {
            failures.push(format!("{}: not recognised as SASS", path.display()));
            continue;
        };
        let lowered = lower(FileId(0), &text, InputKind::Sass(format), 0);
        if !lowered.diagnostics.is_empty() {
            failures.push(format!(
                "{}: {} parse errors",
                path.display(),
                lowered.diagnostics.len()
            ));
        }
        for problem in check(&path, format, &lowered.modules).into_iter().take(5) {
            failures.push(format!("{}: {problem}", path.display()));
        }
    }
    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}
