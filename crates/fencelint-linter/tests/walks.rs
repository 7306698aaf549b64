//! The walks of `FunctionAnalysis` take shortcuts, and each must give the answer of the plain
//! walk it stands for. Checked on every compiled fixture (PTX and every SASS listing format):
//! - `reachable_avoiding_memory` tests only memory and ordering instructions; for predicates
//!   that only such instructions satisfy it must answer like `reachable_avoiding`, which tests
//!   every instruction (from every memory instruction and every block start);
//! - `reaches_avoiding_memory` asks its block filter once a block and tests only memory and
//!   ordering instructions; it must answer like `reachable_avoiding` with the filter tested on
//!   every instruction (from every memory instruction of every loop to each exit branch);
//! - `reachable_avoiding` tests each instruction once (a walk that comes back to its first block
//!   tests only what its first visit skipped); it must answer like a walk that tests every
//!   instruction of every visit and drops repeated targets;
//! - `reaching_defs` skips blocks by a per-block register set and searches definition sites;
//!   it must answer like a backward scan of every instruction (for every register use);
//! - `deciding_reads` inside a loop walks only the loop's blocks; it must answer like a slice
//!   over whole-function reaching definitions with the definitions outside the loop dropped
//!   (for every guarded instruction of every loop);
//! - the CFG's successor and predecessor arrays, its dominator tree, `innermost_loop`'s table
//!   and `Loop::memory_insts` must give what petgraph (its edge lists and `simple_fast`), a
//!   scan of every loop and a filter of `Loop::insts` give;
//! - `Loop::address_is_invariant`, on hand-written cases (`loop_address_invariance`,
//!   `spilled_sass_poll_address_invariance`);
//! - `Loop::feeds_itself`, on hand-written cases (`atomic_feedback`).

use std::path::Path;

use std::collections::{BTreeSet, VecDeque};

use fencelint_cfg::{BlockId, FunctionAnalysis, Point, Reach};
use fencelint_ir::{Function, InstId, InstKind, Reg};
use fencelint_linter::{InputKind, detect};
use fencelint_source::FileId;

mod support;

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

/// Calls `check` with the path of each compiled fixture and each function lowered from it.
fn each_function(mut check: impl FnMut(&Path, &Function)) {
    for path in compiled_fixtures() {
        let text = std::fs::read_to_string(&path).expect("readable fixture");
        let kind = detect(&text).unwrap_or(InputKind::Ptx);
        let lowered = fencelint_lower::lower(FileId(0), &text, kind, 0);
        for func in lowered.modules.iter().flat_map(|m| &m.functions) {
            check(&path, func);
        }
    }
}

#[test]
fn the_memory_walk_answers_like_the_full_walk() {
    let mut compared = 0usize;
    let mut nonempty = 0usize;
    each_function(|path, func| {
        let analysis = FunctionAnalysis::new(func);
        let is_target = |id: InstId| func.inst(id).kind.reads_memory();
        let is_blocker =
            |id: InstId| matches!(func.inst(id).kind, InstKind::Fence(_) | InstKind::Barrier(_));
        let starts = func
            .ids()
            .filter(|&id| func.inst(id).kind.is_memory_or_order())
            .map(Point::After)
            .chain((0..analysis.cfg.blocks.len()).map(|b| Point::BlockStart(BlockId(b as u32))));
        for from in starts {
            let full = analysis.reachable_avoiding(from, is_target, is_blocker);
            let memory = analysis.reachable_avoiding_memory(from, is_target, is_blocker);
            assert_eq!(full, memory, "{} {} from {from:?}", path.display(), func.name);
            compared += 1;
            nonempty += usize::from(!full.is_empty());
        }
    });
    // The fixtures have loads after fences and barriers: the comparison is not vacuous.
    assert!(compared > 1000 && nonempty > 100, "{compared} walks, {nonempty} with reads");
}

/// The targets reachable from `from` on paths that meet no blocker, in the order a
/// breadth-first walk over blocks finds them: every visit of a block tests all of it from its
/// start (or from after the start instruction), and a target found again is dropped.
#[test]
fn the_block_filtered_reach_answers_like_the_full_walk() {
    let mut compared = 0usize;
    let mut reached = 0usize;
    each_function(|path, func| {
        let analysis = FunctionAnalysis::new(func);
        let is_blocker =
            |id: InstId| matches!(func.inst(id).kind, InstKind::Fence(_) | InstKind::Barrier(_));
        for lp in analysis.loops() {
            let exits: Vec<InstId> =
                lp.exits.iter().map(|&(from, _)| analysis.cfg.block(from).last()).collect();
            for from in lp.memory_insts(&analysis) {
                for &to in &exits {
                    let full = !analysis
                        .reachable_avoiding(
                            Point::After(from),
                            |id| id == to,
                            |id| !lp.contains_inst(&analysis, id) || is_blocker(id),
                        )
                        .is_empty();
                    let filtered = analysis.reaches_avoiding_memory(
                        Point::After(from),
                        to,
                        |block| lp.contains(block),
                        is_blocker,
                    );
                    assert_eq!(full, filtered, "{} {} {from} to {to}", path.display(), func.name);
                    compared += 1;
                    reached += usize::from(full);
                }
            }
        }
    });
    // Loops with fences and barriers on some paths and not on others: not vacuous either way.
    // 4,643 walks, 2,486 reaching the exit, when this was written.
    assert!(
        compared > 2000 && reached > 1000 && compared - reached > 1000,
        "{compared}, {reached}"
    );
}

fn plain_reachable_avoiding(
    analysis: &FunctionAnalysis<'_>,
    from: Point,
    is_target: impl Fn(InstId) -> bool,
    is_blocker: impl Fn(InstId) -> bool,
) -> Vec<InstId> {
    let cfg = &analysis.cfg;
    let (mut found, mut found_set) = (Vec::new(), BTreeSet::new());
    let mut seen = vec![false; cfg.blocks.len()];
    let mut work = match from {
        Point::After(inst) => VecDeque::from([(cfg.block_of(inst), Some(inst))]),
        Point::BlockStart(block) => {
            seen[block.index()] = true;
            VecDeque::from([(block, None)])
        }
    };
    while let Some((block, after)) = work.pop_front() {
        let insts = &cfg.block(block).insts;
        let start = after.map_or(insts.start, |a| (a.0 + 1).max(insts.start)).min(insts.end);
        let mut blocked = false;
        for id in (start..insts.end).map(InstId) {
            if is_target(id) && found_set.insert(id) {
                found.push(id);
            }
            if is_blocker(id) {
                blocked = true;
                break;
            }
        }
        if blocked {
            continue;
        }
        for succ in cfg.successors(block) {
            if !std::mem::replace(&mut seen[succ.index()], true) {
                work.push_back((succ, None));
            }
        }
    }
    found
}

#[test]
fn the_walk_answers_like_a_walk_that_tests_every_visit() {
    let mut compared = 0usize;
    let mut nonempty = 0usize;
    each_function(|path, func| {
        let analysis = FunctionAnalysis::new(func);
        let is_target = |id: InstId| func.inst(id).kind.reads_memory();
        let is_blocker =
            |id: InstId| matches!(func.inst(id).kind, InstKind::Fence(_) | InstKind::Barrier(_));
        // From after every instruction: the starts whose block a loop can lead back to.
        for from in func.ids().map(Point::After) {
            let expected = plain_reachable_avoiding(&analysis, from, is_target, is_blocker);
            let got = analysis.reachable_avoiding(from, is_target, is_blocker);
            assert_eq!(got, expected, "{} {} from {from:?}", path.display(), func.name);
            compared += 1;
            nonempty += usize::from(!got.is_empty());
        }
    });
    assert!(compared > 10_000 && nonempty > 1_000, "{compared} walks, {nonempty} with reads");
}

#[test]
fn graph_arrays_loop_tables_and_loop_scans_answer_like_plain_ones() {
    use petgraph::Direction;
    use petgraph::visit::EdgeRef;
    let (mut blocks, mut in_loops) = (0usize, 0usize);
    each_function(|path, func| {
        let analysis = FunctionAnalysis::new(func);
        let cfg = &analysis.cfg;
        let graph = cfg.graph();
        let doms = petgraph::algo::dominators::simple_fast(graph, cfg.entry());
        for block in cfg.block_ids() {
            let node = cfg.node(block);
            let idom = doms.immediate_dominator(node).map(|d| BlockId(d.index() as u32));
            let got = analysis.dominators().immediate_dominator(block);
            assert_eq!(got, idom, "{} {} block {}", path.display(), func.name, block.index());
            let succs: Vec<BlockId> = graph
                .edges_directed(node, Direction::Outgoing)
                .map(|e| BlockId(e.target().index() as u32))
                .collect();
            let preds: Vec<BlockId> = graph
                .edges_directed(node, Direction::Incoming)
                .map(|e| BlockId(e.source().index() as u32))
                .collect();
            assert_eq!(cfg.successors(block).collect::<Vec<_>>(), succs, "{}", path.display());
            assert_eq!(cfg.predecessors(block).collect::<Vec<_>>(), preds, "{}", path.display());
            blocks += 1;
        }
        for id in func.ids() {
            let block = cfg.block_of(id);
            let expected = analysis
                .loops()
                .iter()
                .filter(|l| l.contains(block))
                .min_by_key(|l| l.blocks.len());
            let got = analysis.innermost_loop(id);
            assert_eq!(got, expected, "{} {} at {id}", path.display(), func.name);
            in_loops += usize::from(got.is_some());
        }
        for lp in analysis.loops() {
            let expected: Vec<InstId> =
                lp.insts(&analysis).filter(|&id| func.inst(id).kind.is_memory_or_order()).collect();
            assert_eq!(lp.memory_insts(&analysis).collect::<Vec<_>>(), expected);
        }
    });
    assert!(blocks > 1_000 && in_loops > 1_000, "{blocks} blocks, {in_loops} in loops");
}

/// The definitions of `reg` that reach `at`, by scanning every instruction backward from `at`
/// and through the predecessors that the entry reaches; a guarded definition does not end the
/// path.
fn plain_reaching_defs(
    analysis: &FunctionAnalysis<'_>,
    func: &Function,
    at: InstId,
    reg: Reg,
) -> Reach {
    let cfg = &analysis.cfg;
    let mut reach = Reach::default();
    let mut seen = vec![false; cfg.blocks.len()];
    // The blocks that a path from the entry enters, found by a walk of their own.
    let mut reachable = vec![false; cfg.blocks.len()];
    let mut stack = vec![BlockId(0)];
    while let Some(block) = stack.pop() {
        if !std::mem::replace(&mut reachable[block.index()], true) {
            stack.extend(cfg.successors(block));
        }
    }
    let mut work = vec![(cfg.block_of(at), Some(at))];
    while let Some((block, before)) = work.pop() {
        let insts = &cfg.block(block).insts;
        let end = before.map_or(insts.end, |b| b.0);
        let mut killed = false;
        for id in (insts.start..end).rev().map(InstId) {
            let inst = func.inst(id);
            if inst.defs.contains(&reg) {
                reach.defs.push(id);
                if inst.guard.is_none() {
                    killed = true;
                    break;
                }
            }
        }
        if killed {
            continue;
        }
        let mut has_pred = false;
        for pred in cfg.predecessors(block) {
            has_pred = true;
            if reachable[pred.index()] && !std::mem::replace(&mut seen[pred.index()], true) {
                work.push((pred, None));
            }
        }
        reach.from_entry |= !has_pred;
    }
    reach.defs.sort();
    reach.defs.dedup();
    reach
}

#[test]
fn reaching_definitions_answer_like_a_plain_backward_scan() {
    let mut compared = 0usize;
    let mut with_defs = 0usize;
    each_function(|path, func| {
        let analysis = FunctionAnalysis::new(func);
        for at in func.ids() {
            for &reg in &func.inst(at).uses {
                let expected = plain_reaching_defs(&analysis, func, at, reg);
                let got = analysis.reaching_defs(at, reg);
                assert_eq!(got, expected, "{} {} at {at} of {reg:?}", path.display(), func.name);
                compared += 1;
                with_defs += usize::from(!got.defs.is_empty());
            }
        }
    });
    assert!(
        compared > 10_000 && with_defs > 5_000,
        "{compared} uses, {with_defs} with definitions"
    );
}

/// The reads that decide `branch` inside `lp`, sliced with whole-function reaching definitions
/// and the definitions outside the loop dropped afterwards: what `deciding_reads` computed before
/// its walks were kept inside the loop (with the same branch predicates to start from and the same
/// branches followed where constants meet).
fn plain_deciding_reads(
    analysis: &FunctionAnalysis<'_>,
    func: &Function,
    branch: InstId,
    lp: &fencelint_cfg::Loop,
) -> Vec<InstId> {
    let mut found = Vec::new();
    let mut visited = BTreeSet::new();
    let mut queue: VecDeque<_> =
        analysis.branch_predicates(branch).into_iter().map(|reg| (branch, reg)).collect();
    while let Some((at, reg)) = queue.pop_front() {
        if !visited.insert((at, reg)) {
            continue;
        }
        for def in analysis.reaching_defs(at, reg).defs {
            if !lp.contains_inst(analysis, def) {
                continue;
            }
            let inst = func.inst(def);
            // The predicate of a SASS atomic on a generic address says where it was performed,
            // not what memory held.
            if let InstKind::Atomic { mem, .. } = &inst.kind
                && mem.space == fencelint_ir::Space::Generic
                && inst.value != Some(fencelint_ir::ValueOp::RetriedSwap)
                && analysis.is_predicate(reg)
            {
                continue;
            }
            if inst.kind.reads_memory()
                || matches!(inst.kind, InstKind::Mbarrier(fencelint_ir::MbarrierOp::Wait { .. }))
            {
                found.push(def);
                continue;
            }
            for &used in &inst.uses {
                queue.push_back((def, used));
            }
            // The branches that choose between constants, as the loop's slice follows them.
            for choice in analysis.constant_choices(lp, def, at, reg) {
                for &used in &func.inst(choice).uses {
                    queue.push_back((choice, used));
                }
            }
        }
    }
    found.sort_unstable();
    found.dedup();
    found
}

#[test]
fn loop_exit_slices_answer_like_whole_function_slices() {
    let mut compared = 0usize;
    let mut with_reads = 0usize;
    each_function(|path, func| {
        let analysis = FunctionAnalysis::new(func);
        for lp in analysis.loops() {
            for branch in lp.insts(&analysis).filter(|&id| func.inst(id).guard.is_some()) {
                let expected = plain_deciding_reads(&analysis, func, branch, lp);
                let got = analysis.deciding_reads(branch, Some(lp));
                assert_eq!(got, expected, "{} {} at {branch}", path.display(), func.name);
                compared += 1;
                with_reads += usize::from(!got.is_empty());
            }
        }
    });
    assert!(compared > 2_000 && with_reads > 500, "{compared} branches, {with_reads} with reads");
}

/// One `sm_90a` kernel whose pointer parameter is loaded into `%rd1` before `body` (registers
/// `%p<4>`, `%r<12>`, `%rd<8>`).
fn kernel_with_pointer(body: &str) -> String {
    format!(
        ".version 8.5\n.target sm_90a\n.address_size 64\n\
         .visible .entry k(.param .u64 p)\n{{\n\
         .reg .pred %p<4>;\n.reg .b32 %r<12>;\n.reg .b64 %rd<8>;\n\
         ld.param.u64 %rd1, [p];\n{body}\nret;\n}}\n"
    )
}

/// `Loop::address_is_invariant` on hand-written PTX (a test input, not compiler output): an
/// address re-materialised inside the loop from an invariant register is invariant; one that
/// advances every iteration, directly or through a copy round the loop, is not.
#[test]
fn loop_address_invariance() {
    let ptx = kernel_with_pointer;
    // (loop body, whether the load's address is the same every iteration)
    let cases = [
        // The address is computed before the loop.
        ("add.s64 %rd2, %rd1, 36;\n$L: ld.relaxed.gpu.global.u32 %r1, [%rd2];\n", true),
        // Re-materialised inside the loop from a register defined outside it.
        ("$L: add.s64 %rd2, %rd1, 36;\nld.relaxed.gpu.global.u32 %r1, [%rd2];\n", true),
        // Through two copies inside the loop.
        (
            "$L: mov.b64 %rd3, %rd1;\nadd.s64 %rd2, %rd3, 8;\nld.relaxed.gpu.global.u32 %r1, [%rd2];\n",
            true,
        ),
        // Advances every iteration.
        (
            "mov.b64 %rd2, %rd1;\n$L: ld.relaxed.gpu.global.u32 %r1, [%rd2];\nadd.s64 %rd2, %rd2, 4;\n",
            false,
        ),
        // Advances through a copy round the loop.
        (
            "mov.b64 %rd2, %rd1;\n$L: ld.relaxed.gpu.global.u32 %r1, [%rd2];\nadd.s64 %rd3, %rd2, 4;\nmov.b64 %rd2, %rd3;\n",
            false,
        ),
        // Loaded from memory inside the loop (a list walk).
        (
            "mov.b64 %rd2, %rd1;\n$L: ld.relaxed.gpu.global.u32 %r1, [%rd2];\nld.global.u64 %rd2, [%rd2+8];\n",
            false,
        ),
        // Re-materialised inside the loop from the parameter and a register defined before it,
        // through a conversion, a mask and a sum of two registers (nvcc's PTX for cuSOLVER's
        // bulge-chasing kernels).
        (
            "mov.u32 %r9, %tid.x;\n$L: ld.param.u64 %rd3, [p];\ncvta.to.global.u64 %rd4, %rd3;\n\
             cvt.u64.u32 %rd5, %r9;\nand.b64 %rd6, %rd5, 4294967292;\nadd.s64 %rd2, %rd4, %rd6;\n\
             ld.relaxed.gpu.global.u32 %r1, [%rd2];\n",
            true,
        ),
        // A sum of two registers one of which advances every iteration.
        (
            "mov.b64 %rd3, 0;\n$L: add.s64 %rd2, %rd1, %rd3;\nld.relaxed.gpu.global.u32 %r1, [%rd2];\n\
             add.s64 %rd3, %rd3, 4;\n",
            false,
        ),
        // Indexed by the clock, which changes on its own.
        (
            "$L: mov.u32 %r9, %clock;\nand.b32 %r10, %r9, 12;\ncvt.u64.u32 %rd3, %r10;\n\
             add.s64 %rd2, %rd1, %rd3;\nld.relaxed.gpu.global.u32 %r1, [%rd2];\n",
            false,
        ),
        // Offset in place: the add reads the register it writes, whose definition inside the
        // loop is a copy of an invariant register.
        (
            "$L: mov.b64 %rd2, %rd1;\nadd.s64 %rd2, %rd2, 8;\nld.relaxed.gpu.global.u32 %r1, [%rd2];\n",
            true,
        ),
        // Base and index reloaded from local memory on every try (spilled), and summed in place.
        (
            "$L: ld.local.u64 %rd2, [%rd1];\nld.local.u32 %r2, [%rd1+8];\nmul.wide.s32 %rd3, %r2, 4;\n\
             add.s64 %rd2, %rd2, %rd3;\nld.relaxed.gpu.global.u32 %r1, [%rd2];\n",
            true,
        ),
        // The same with a store to local memory in the loop: the reloaded index may change.
        (
            "$L: ld.local.u64 %rd2, [%rd1];\nld.local.u32 %r2, [%rd1+8];\nmul.wide.s32 %rd3, %r2, 4;\n\
             add.s64 %rd2, %rd2, %rd3;\nld.relaxed.gpu.global.u32 %r1, [%rd2];\nst.local.u32 [%rd1+8], %r1;\n",
            false,
        ),
    ];
    for (body, invariant) in cases {
        let text = ptx(&format!("{body}setp.eq.s32 %p1, %r1, 0;\n@%p1 bra $L;\n"));
        let lowered = fencelint_lower::lower(FileId(0), &text, InputKind::Ptx, 0);
        let func = &lowered.modules[0].functions[0];
        let analysis = FunctionAnalysis::new(func);
        let poll = func
            .ids()
            .find(|&id| func.inst(id).opcode.starts_with("ld.relaxed"))
            .expect("the poll");
        let lp = analysis.innermost_loop(poll).expect("the loop");
        assert_eq!(lp.address_is_invariant(&analysis, poll), invariant, "{body}");
    }
}

/// `Loop::address_is_invariant` on SASS, where instructions carry no value-numbering key: an
/// address that ptxas computes inside the poll loop from a base and an index it reloads from
/// the stack on every try (registers ran short), in a new register or in place. The listing is
/// hand-written (a test input in cuobjdump's form, not compiler output), after the shape of a
/// poll in a vendor library's all-reduce kernels.
#[test]
fn spilled_sass_poll_address_invariance() {
    // (the poll loop, whether the poll's address is the same every iteration)
    let cases = [
        ("LDL.64 R6, [R1+0x28] ;\nLDL R3, [R1+0x30] ;\nIMAD.WIDE R8, R3, 0x4, R6 ;", true),
        ("LDL.64 R8, [R1+0x28] ;\nLDL R3, [R1+0x30] ;\nIMAD.WIDE R8, R3, 0x4, R8 ;", true),
        // The index advances every iteration.
        ("LDL.64 R6, [R1+0x28] ;\nIADD3 R3, R3, 0x1, RZ ;\nIMAD.WIDE R8, R3, 0x4, R6 ;", false),
        // The index is stored back to the stack in the loop.
        (
            "LDL.64 R6, [R1+0x28] ;\nLDL R3, [R1+0x30] ;\nIMAD.WIDE R8, R3, 0x4, R6 ;\n\
             STL [R1+0x30], R0 ;",
            false,
        ),
    ];
    for (body, invariant) in cases {
        let mut lines = vec!["LDC R1, c[0x0][0x28] ;".to_owned(), "MOV R3, RZ ;".to_owned()];
        let top = lines.len() * 16;
        lines.extend(body.lines().map(|line| line.trim().to_owned()));
        lines.extend([
            "LD.E.STRONG.SYS R0, desc[UR36][R8.64] ;".to_owned(),
            "ISETP.GT.AND P0, PT, R0, -0x1, PT ;".to_owned(),
            format!("@!P0 BRA {top:#x} ;"),
            "EXIT ;".to_owned(),
        ]);
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let func = &support::sass_function(&lines);
        let analysis = FunctionAnalysis::new(func);
        let poll =
            func.ids().find(|&id| func.inst(id).opcode == "LD.E.STRONG.SYS").expect("the poll");
        let lp = analysis.innermost_loop(poll).expect("the loop");
        assert_eq!(lp.address_is_invariant(&analysis, poll), invariant, "{body}");
    }
}

/// `Loop::feeds_itself`: a compare-and-swap retried with what it returned last feeds itself
/// (directly, through a computation, or through a copy); a lock taken with constants, a swap
/// whose expected value is loaded again every iteration, and an add of a loop-invariant value
/// do not.
#[test]
fn atomic_feedback() {
    let ptx = |body: &str| kernel_with_pointer(&format!("ld.global.u32 %r1, [%rd1];\n{body}"));
    // (loop, whether the atomic feeds itself)
    let cases = [
        // An add written as a compare-and-swap: the new value is computed from the expected one,
        // which is what the swap returned.
        (
            "$L: add.s32 %r2, %r1, 7;\natom.global.cas.b32 %r3, [%rd1], %r1, %r2;\nsetp.ne.s32 %p1, %r3, %r1;\nmov.u32 %r1, %r3;\n@%p1 bra $L;\n",
            true,
        ),
        // The same through a second copy.
        (
            "$L: add.s32 %r2, %r1, 7;\natom.global.cas.b32 %r3, [%rd1], %r1, %r2;\nsetp.ne.s32 %p1, %r3, %r1;\nmov.u32 %r4, %r3;\nmov.u32 %r1, %r4;\n@%p1 bra $L;\n",
            true,
        ),
        // A lock: compare with 0, swap in 1.
        (
            "mov.u32 %r5, 0;\nmov.u32 %r6, 1;\n$L: atom.global.cas.b32 %r3, [%rd1], %r5, %r6;\nsetp.ne.s32 %p1, %r3, 0;\n@%p1 bra $L;\n",
            false,
        ),
        // The expected value loaded again from memory every iteration: a wait on that word.
        (
            "$L: ld.volatile.global.u32 %r1, [%rd1+4];\nadd.s32 %r2, %r1, 1;\natom.global.cas.b32 %r3, [%rd1], %r1, %r2;\nsetp.ne.s32 %p1, %r3, %r1;\n@%p1 bra $L;\n",
            false,
        ),
        // A counter polled with an add of a constant.
        (
            "mov.u32 %r5, 1;\n$L: atom.global.add.u32 %r3, [%rd1], %r5;\nsetp.lt.u32 %p1, %r3, 100;\n@%p1 bra $L;\n",
            false,
        ),
    ];
    for (body, feeds) in cases {
        let text = ptx(body);
        let lowered = fencelint_lower::lower(FileId(0), &text, InputKind::Ptx, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let func = &lowered.modules[0].functions[0];
        let analysis = FunctionAnalysis::new(func);
        let atomic =
            func.ids().find(|&id| func.inst(id).opcode.starts_with("atom")).expect("the atomic");
        let lp = analysis.innermost_loop(atomic).expect("the loop");
        assert_eq!(lp.feeds_itself(&analysis, atomic), feeds, "{body}");
    }
}
