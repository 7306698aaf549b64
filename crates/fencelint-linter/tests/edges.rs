//! `FunctionAnalysis::forced_successor` and the forward walks on hand-written PTX: a block that
//! compares a register with a constant and branches on it goes one way only when it is entered
//! from a block that last set that register to a constant; anything less certain keeps both ways.
//! Also a SASS branch with a second condition beside its guard (`@P0 BRA P1, target`), on
//! hand-written listings.

use fencelint_cfg::{BlockId, FunctionAnalysis};
use fencelint_ir::Function;
use fencelint_linter::InputKind;
use fencelint_source::FileId;

mod support;
use support::sass_function;

/// Lowers one kernel whose body is `body` (registers `%p<4>`, `%r<40>`, `%f<4>`).
fn kernel(body: &str) -> Function {
    let text = format!(
        ".version 8.5\n.target sm_80\n.address_size 64\n\
         .visible .entry k(.param .u32 n)\n{{\n\
         .reg .pred %p<4>;\n.reg .b32 %r<40>;\n.reg .f32 %f<4>;\n\
         .shared .align 16 .b8 buf[4096];\n{body}\nret;\n}}\n"
    );
    let lowered = fencelint_lower::lower(FileId(0), &text, InputKind::Ptx, 0);
    assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
    lowered.modules.into_iter().next().unwrap().functions.into_iter().next().unwrap()
}

/// The block that starts with the instruction after label `name`.
fn block_at(analysis: &FunctionAnalysis<'_>, text: &str, name: &str) -> BlockId {
    // Labels are not instructions: count the instructions before the label's line.
    let before = text
        .lines()
        .take_while(|line| line.trim() != format!("{name}:"))
        .filter(|line| {
            let line = line.trim();
            !line.is_empty() && !line.ends_with(':')
        })
        .count();
    analysis.cfg.block_of(fencelint_ir::InstId(before as u32))
}

/// `pred` sets `%r5` (the line `set`), then branches to `$L_foot` when `%p1`; the foot tests
/// `%r5` with `test` and branches back to `$L_top` when the test holds.
fn foot(set: &str, test: &str, branch: &str) -> String {
    format!(
        "ld.param.u32 %r1, [n];\n$L_top:\nadd.s32 %r1, %r1, 1;\nsetp.eq.s32 %p1, %r1, 9;\n\
         {set}\n@%p1 bra $L_foot;\nst.shared.u32 [buf], %r1;\nmov.u32 %r5, %r1;\n\
         $L_foot:\n{test}\n{branch} bra $L_top;\n$L_out:\nst.shared.u32 [buf+4], %r1;"
    )
}

/// What `forced_successor` says for the edge from the block with `set` to the foot: `Some(true)`
/// back to the top, `Some(false)` out of the loop, `None` both.
fn decided(set: &str, test: &str, branch: &str) -> Option<bool> {
    let body = foot(set, test, branch);
    let func = kernel(&body);
    let analysis = FunctionAnalysis::new(&func);
    let top = block_at(&analysis, &body, "$L_top");
    let foot = block_at(&analysis, &body, "$L_foot");
    let out = block_at(&analysis, &body, "$L_out");
    // The block that sets %r5 and branches to the foot is the loop's top block.
    let forced = analysis.forced_successor(top, foot);
    // The other predecessor copies a register: never decided.
    let other = BlockId(foot.0 - 1);
    assert_eq!(analysis.forced_successor(other, foot), None, "{body}");
    forced.map(|to| {
        assert!(to == top || to == out, "{body}");
        to == top
    })
}

#[test]
fn a_constant_on_the_edge_decides_the_branch() {
    let test = "setp.ne.s32 %p2, %r5, 0;";
    assert_eq!(decided("mov.u32 %r5, 0;", test, "@%p2"), Some(false));
    assert_eq!(decided("mov.u32 %r5, 3;", test, "@%p2"), Some(true));
    assert_eq!(decided("mov.u32 %r5, 0;", test, "@!%p2"), Some(true));
    // The operands in the other order.
    assert_eq!(decided("mov.u32 %r5, 0;", "setp.ne.s32 %p2, 0, %r5;", "@%p2"), Some(false));
    assert_eq!(decided("mov.u32 %r5, 2;", "setp.gt.s32 %p2, 5, %r5;", "@%p2"), Some(true));
    // Signed and unsigned readings of -1, and 32-bit wrap-around.
    assert_eq!(decided("mov.u32 %r5, -1;", "setp.lt.s32 %p2, %r5, 4;", "@%p2"), Some(true));
    assert_eq!(decided("mov.u32 %r5, -1;", "setp.lt.u32 %p2, %r5, 4;", "@%p2"), Some(false));
    assert_eq!(decided("mov.u32 %r5, -1;", "setp.hs.u32 %p2, %r5, 4;", "@%p2"), Some(true));
    assert_eq!(
        decided("mov.u32 %r5, 4294967295;", "setp.eq.s32 %p2, %r5, -1;", "@%p2"),
        Some(true)
    );
    assert_eq!(decided("mov.u32 %r5, 7;", "setp.eq.b32 %p2, %r5, 7;", "@%p2"), Some(true));
}

#[test]
fn anything_less_certain_keeps_both_ways() {
    let test = "setp.ne.s32 %p2, %r5, 0;";
    // Not a constant, a guarded move, a move of something else into the register.
    assert_eq!(decided("add.s32 %r5, %r1, 1;", test, "@%p2"), None);
    assert_eq!(decided("@%p1 mov.u32 %r5, 0;", test, "@%p2"), None);
    assert_eq!(decided("mov.u32 %r5, %r1;", test, "@%p2"), None);
    // The constant is overwritten later in the same block.
    assert_eq!(decided("mov.u32 %r5, 0;\nadd.s32 %r5, %r5, %r1;", test, "@%p2"), None);
    // The foot writes the register before comparing it.
    assert_eq!(
        decided("mov.u32 %r5, 0;", "add.s32 %r5, %r5, %r1;\nsetp.ne.s32 %p2, %r5, 0;", "@%p2"),
        None
    );
    // A comparison combined with another predicate, a floating-point one, one of two registers.
    assert_eq!(decided("mov.u32 %r5, 0;", "setp.ne.and.s32 %p2, %r5, 0, %p1;", "@%p2"), None);
    assert_eq!(
        decided("mov.f32 %f1, 0f00000000;", "setp.ne.f32 %p2, %f1, 0f00000000;", "@%p2"),
        None
    );
    assert_eq!(decided("mov.u32 %r5, 0;", "setp.ne.s32 %p2, %r5, %r1;", "@%p2"), None);
    // The predicate is written again after the comparison.
    assert_eq!(
        decided("mov.u32 %r5, 0;", "setp.ne.s32 %p2, %r5, 0;\nsetp.eq.s32 %p2, %r1, 3;", "@%p2"),
        None
    );
    // Bit types have no ordered comparisons.
    assert_eq!(decided("mov.u32 %r5, 0;", "setp.lt.b32 %p2, %r5, 1;", "@%p2"), None);
}

#[test]
fn forward_walks_do_not_take_a_decided_branch() {
    // Past the store at the top, the loop's exit path sets %r5 to 0 and reaches the foot,
    // which then does not branch back: the walk from the first store reaches the store after
    // the loop, and reaches the first store again only through the other predecessor.
    let reached = |set: &str| {
        let body = foot(set, "setp.ne.s32 %p2, %r5, 0;", "@%p2");
        let func = kernel(&body);
        let analysis = FunctionAnalysis::new(&func);
        let stores: Vec<_> =
            func.ids().filter(|&id| func.inst(id).opcode.starts_with("st.shared")).collect();
        let mut seen = Vec::new();
        // Start at the `add` of the top block, so the walk leaves the top block through its
        // branch to the foot and through its fall-through.
        let start = analysis.cfg.block(block_at(&analysis, &body, "$L_top")).first();
        analysis.walk_forward(start, (), |id, ()| {
            seen.push(id);
            Some(())
        });
        stores.iter().map(|s| seen.contains(s)).collect::<Vec<_>>()
    };
    // Both stores are reached either way (the fall-through path copies %r1 into %r5).
    assert_eq!(reached("mov.u32 %r5, 0;"), [true, true]);
    // With only the decided edge into the foot, the store inside the loop is not reached.
    let body = "ld.param.u32 %r1, [n];\nmov.u32 %r5, 1;\n$L_top:\nst.shared.u32 [buf], %r1;\n\
                setp.eq.s32 %p1, %r1, 9;\nmov.u32 %r5, 0;\n@%p1 bra $L_foot;\n\
                add.s32 %r1, %r1, 1;\nmov.u32 %r5, 0;\n\
                $L_foot:\nsetp.ne.s32 %p2, %r5, 0;\n@%p2 bra $L_top;\nst.shared.u32 [buf+4], %r1;";
    let func = kernel(body);
    let analysis = FunctionAnalysis::new(&func);
    let stores: Vec<_> =
        func.ids().filter(|&id| func.inst(id).opcode.starts_with("st.shared")).collect();
    let mut seen = Vec::new();
    analysis.walk_forward(stores[0], (), |id, ()| {
        seen.push(id);
        Some(())
    });
    assert!(!seen.contains(&stores[0]), "the loop's store is reached again: {seen:?}");
    assert!(seen.contains(&stores[1]));
}

/// The loop's foot of `cp_async_ring_drained_between_slices` in the compiled SASS (`sm_80`,
/// cuobjdump): `UMOV UR4, URZ` on the "no slice left" edge, then `ISETP.NE.AND P0, PT, RZ, UR4,
/// PT; @P0 BRA` back to the loop. That edge decides the branch; the loop's own edge does not.
#[test]
fn the_compiled_sass_loop_foot_is_decided_by_the_exit_edge() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures/compiled/sm_80/cp_async.cuobjdump.sass");
    let text = std::fs::read_to_string(&path).unwrap();
    let kind = InputKind::Sass(fencelint_sass::SassFormat::CuobjdumpText);
    let lowered = fencelint_lower::lower(FileId(0), &text, kind, 0);
    let func = lowered
        .modules
        .iter()
        .flat_map(|m| &m.functions)
        .find(|f| f.name == "cp_async_ring_drained_between_slices")
        .expect("the kernel is in the listing");
    let analysis = FunctionAnalysis::new(func);
    let cfg = &analysis.cfg;
    let mut decided = Vec::new();
    for block in cfg.block_ids() {
        for pred in cfg.predecessors(block) {
            if let Some(to) = analysis.forced_successor(pred, block) {
                decided.push((pred, block, to));
            }
        }
    }
    let [(pred, foot, to)] = decided.as_slice() else { panic!("decided edges: {decided:?}") };
    let first = |b: BlockId| func.inst(cfg.block(b).first()).opcode.to_string();
    let last = |b: BlockId| func.inst(cfg.block(b).last()).opcode.to_string();
    assert!(first(*foot).starts_with("ISETP.NE.AND"), "{}", first(*foot));
    assert_eq!(last(*foot), "BRA");
    assert_eq!(first(*to), "EXIT");
    assert!(
        cfg.block(*pred).ids().any(|id| func.inst(id).opcode == "UMOV"),
        "the deciding edge comes from the block that clears UR4"
    );
    // The loop's own edge into the foot stays undecided.
    assert!(cfg.predecessors(*foot).count() >= 2);
}

/// Whether a walk from the first `st.shared` reaches the last one without passing the other
/// stores (each ends the path), with and without remembering branch outcomes.
fn reaches_end(body: &str) -> (bool, bool) {
    reaches_last_store(&kernel(body), |opcode| opcode.starts_with("st.shared"))
}

/// Whether a walk from the first store (`is_store` of its opcode) reaches the last one without
/// passing the others, with and without remembering branch outcomes.
fn reaches_last_store(func: &Function, is_store: impl Fn(&str) -> bool) -> (bool, bool) {
    let analysis = FunctionAnalysis::new(func);
    let stores: Vec<_> = func.ids().filter(|&id| is_store(&func.inst(id).opcode)).collect();
    let (start, end) = (stores[0], *stores.last().unwrap());
    let run = |learning: bool| {
        let mut reached = false;
        let step = |id, ()| {
            if id == end {
                reached = true;
            }
            (!stores.contains(&id) || id == end).then_some(())
        };
        if learning {
            analysis.walk_forward_learning(start, (), step);
        } else {
            analysis.walk_forward(start, (), step);
        }
        reached
    };
    (run(false), run(true))
}

/// `if (a < 1 && b < 1) leave; if (a >= 1) first; if (b >= 1) second; end`: `end` comes only
/// after `first` or `second`. `test` recomputes or reuses the value of `b < 1`.
fn two_optional_parts(test: &str) -> String {
    format!(
        "ld.param.u32 %r1, [n];\nadd.s32 %r2, %r1, 7;\nst.shared.u32 [buf], %r1;\n\
         setp.lt.s32 %p1, %r1, 1;\nsetp.lt.s32 %p2, %r2, 1;\nand.pred %p3, %p1, %p2;\n\
         @%p3 bra $L_exit;\n@%p1 bra $L_second;\nst.shared.u32 [buf+4], %r1;\n\
         $L_second:\n{test}\nst.shared.u32 [buf+8], %r1;\n$L_end:\nst.shared.u32 [buf+12], %r1;\n\
         $L_exit:"
    )
}

#[test]
fn a_learned_outcome_decides_a_later_test_of_the_same_value() {
    // Recomputed (`%p4` is `%p2` again) and reused.
    let recomputed = two_optional_parts("setp.lt.s32 %p0, %r2, 1;\n@%p0 bra $L_end;");
    assert_eq!(reaches_end(&recomputed), (true, false));
    let reused = two_optional_parts("@%p2 bra $L_end;");
    assert_eq!(reaches_end(&reused), (true, false));
    // `or.pred` and `not.pred`: `!(a >= 1 || b >= 1)` leaves early.
    let ors = "ld.param.u32 %r1, [n];\nadd.s32 %r2, %r1, 7;\nst.shared.u32 [buf], %r1;\n\
               setp.ge.s32 %p1, %r1, 1;\nsetp.ge.s32 %p2, %r2, 1;\nor.pred %p3, %p1, %p2;\n\
               not.pred %p0, %p3;\n@%p0 bra $L_exit;\n@!%p1 bra $L_second;\n\
               st.shared.u32 [buf+4], %r1;\n$L_second:\n@!%p2 bra $L_end;\n\
               st.shared.u32 [buf+8], %r1;\n$L_end:\nst.shared.u32 [buf+12], %r1;\n$L_exit:";
    assert_eq!(reaches_end(ors), (true, false));
}

#[test]
fn outcomes_that_prove_nothing_keep_the_path() {
    // The later test reads another value.
    let other = two_optional_parts("setp.lt.s32 %p0, %r1, 2;\n@%p0 bra $L_end;");
    assert_eq!(reaches_end(&other), (true, true));
    // The tested register changes before the second test.
    let changed =
        two_optional_parts("add.s32 %r2, %r2, 1;\nsetp.lt.s32 %p0, %r2, 1;\n@%p0 bra $L_end;");
    assert_eq!(reaches_end(&changed), (true, true));
}

#[test]
fn a_learning_walk_over_its_budget_says_so_and_leaves_the_analysis_complete() {
    let body = two_optional_parts("@%p2 bra $L_end;");
    let func = kernel(&body);
    let budget = fencelint_cfg::Budget { walk_steps: 3, ..fencelint_cfg::Budget::default() };
    let analysis = FunctionAnalysis::with_budget(&func, budget);
    let start = func.ids().find(|&id| func.inst(id).opcode.starts_with("st.shared")).unwrap();
    assert!(!analysis.walk_forward_learning(start, (), |_, ()| Some(())));
    assert!(!analysis.is_incomplete());
    // The plain walk over the same budget marks the analysis incomplete, as before.
    analysis.walk_forward(start, (), |_, ()| Some(()));
    assert!(analysis.is_incomplete());
    // Within the budget, the learning walk says it finished.
    let analysis = FunctionAnalysis::new(&func);
    assert!(analysis.walk_forward_learning(start, (), |_, ()| Some(())));
}

/// The value a loop tests is read again every iteration: what one iteration learned about it
/// must not decide the next iteration's test. The walk counts the iterations (the reload at
/// `$L_back`) and records the count at the store after the test.
#[test]
fn an_outcome_is_forgotten_when_the_path_goes_round_a_loop() {
    let body = "ld.param.u32 %r1, [n];\nst.shared.u32 [buf], %r1;\nld.shared.u32 %r2, [buf+16];\n\
                $L_top:\nsetp.lt.s32 %p2, %r2, 1;\n@%p2 bra $L_back;\n\
                st.shared.u32 [buf+12], %r1;\n@%p2 bra $L_exit;\nbra.uni $L_exit;\n\
                $L_back:\nld.shared.u32 %r2, [buf+20];\nbra.uni $L_top;\n$L_exit:";
    let func = kernel(body);
    let analysis = FunctionAnalysis::new(&func);
    let find = |prefix: &str, nth: usize| {
        func.ids().filter(|&id| func.inst(id).opcode.starts_with(prefix)).nth(nth).unwrap()
    };
    let (start, end, reload) = (find("st.shared", 0), find("st.shared", 1), find("ld.shared", 1));
    let mut counts = std::collections::BTreeSet::new();
    let complete = analysis.walk_forward_learning(start, 0u8, |id, n| {
        if id == end {
            counts.insert(n);
        }
        Some(if id == reload { (n + 1).min(2) } else { n })
    });
    assert!(complete);
    // The first iteration branches back (`%p2` true); the second may fall through to the store.
    assert_eq!(counts.into_iter().collect::<Vec<_>>(), [0, 1, 2]);
}

/// Whether a walk from the first `STS` of a hand-written listing reaches the last one without
/// passing the others, with and without remembering branch outcomes.
fn sass_reaches_end(lines: &[&str]) -> (bool, bool) {
    reaches_last_store(&sass_function(lines), |opcode| opcode == "STS")
}

/// `@P0 BRA P1, target` jumps when both predicates hold. Not taken, it says only that one of
/// them fails: `P0` may hold, and the later `@P0 BRA` may jump.
#[test]
fn a_branch_with_a_second_condition_falls_through_with_its_guard_unknown() {
    let lines = [
        "LDC R1, c[0x0][0x28] ;",
        "LDC R2, c[0x0][0x210] ;",
        "LDC R3, c[0x0][0x214] ;",
        "STS [R1], R2 ;",
        "ISETP.NE.AND P0, PT, R2, RZ, PT ;",
        "ISETP.NE.AND P1, PT, R3, RZ, PT ;",
        "@P0 BRA P1, 0xa0 ;",
        "@P0 BRA 0xc0 ;",
        "STS [R1+0x4], R2 ;",
        "EXIT ;",
        "STS [R1+0x8], R2 ;",
        "EXIT ;",
        "STS [R1+0xc], R2 ;",
        "EXIT ;",
    ];
    let func = sass_function(&lines);
    let branch = func.inst(fencelint_ir::InstId(6));
    assert!(branch.guard.is_some() && branch.control.condition.is_some(), "{branch:?}");
    assert_eq!(sass_reaches_end(&lines), (true, true));
}

/// Taken, the same branch says that both hold: a later `@!P1 BRA` never jumps.
#[test]
fn a_branch_with_a_second_condition_taken_knows_both() {
    let lines = [
        "LDC R1, c[0x0][0x28] ;",
        "LDC R2, c[0x0][0x210] ;",
        "LDC R3, c[0x0][0x214] ;",
        "STS [R1], R2 ;",
        "ISETP.NE.AND P0, PT, R2, RZ, PT ;",
        "ISETP.NE.AND P1, PT, R3, RZ, PT ;",
        "@P0 BRA P1, 0x80 ;",
        "EXIT ;",
        "@!P1 BRA 0xa0 ;",
        "EXIT ;",
        "STS [R1+0x4], R2 ;",
        "EXIT ;",
    ];
    assert_eq!(sass_reaches_end(&lines), (true, false));
}
