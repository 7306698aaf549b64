//! `FunctionAnalysis::reachable_avoiding_memory` tests only memory and ordering instructions;
//! for predicates that only such instructions satisfy it must give exactly the answer of
//! `reachable_avoiding`, which tests every instruction. Checked on every compiled fixture (PTX
//! and every SASS listing format), from every memory instruction and every block start.

use std::path::Path;

use fencelint_cfg::{BlockId, FunctionAnalysis, Point};
use fencelint_ir::{InstId, InstKind};
use fencelint_linter::{InputKind, detect};
use fencelint_source::FileId;

fn compiled_fixtures() -> Vec<std::path::PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled");
    let mut files = Vec::new();
    for arch in std::fs::read_dir(&root).expect("fixtures/compiled exists") {
        let arch = arch.expect("readable entry").path();
        if !arch.is_dir() {
            continue;
        }
        for entry in std::fs::read_dir(&arch).expect("readable folder") {
            let path = entry.expect("readable entry").path();
            let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
            if matches!(ext, "ptx" | "sass" | "json") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

#[test]
fn the_memory_walk_answers_like_the_full_walk() {
    let mut compared = 0usize;
    let mut nonempty = 0usize;
    for path in compiled_fixtures() {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let kind = detect(&text).unwrap_or(InputKind::Ptx);
        let lowered = fencelint_lower::lower(FileId(0), &text, kind, 0);
        for func in lowered.modules.iter().flat_map(|m| &m.functions) {
            let analysis = FunctionAnalysis::new(func);
            let is_target = |id: InstId| func.inst(id).kind.reads_memory();
            let is_blocker = |id: InstId| {
                matches!(func.inst(id).kind, InstKind::Fence(_) | InstKind::Barrier(_))
            };
            let starts = func
                .ids()
                .filter(|&id| func.inst(id).kind.is_memory_or_order())
                .map(Point::After)
                .chain(
                    (0..analysis.cfg.blocks.len()).map(|b| Point::BlockStart(BlockId(b as u32))),
                );
            for from in starts {
                let full = analysis.reachable_avoiding(from, is_target, is_blocker);
                let memory = analysis.reachable_avoiding_memory(from, is_target, is_blocker);
                assert_eq!(full, memory, "{} {} from {from:?}", path.display(), func.name);
                compared += 1;
                nonempty += usize::from(!full.is_empty());
            }
        }
    }
    // The fixtures have loads after fences and barriers: the comparison is not vacuous.
    assert!(compared > 1000 && nonempty > 100, "{compared} walks, {nonempty} with reads");
}
