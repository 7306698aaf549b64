//! HAND-WRITTEN SASS: compiled listings edited by these tests to show cases that no compiler
//! output of ours shows: a store sunk below a release fence (the ptxas 13.5.37 listing of
//! `fixtures/reorder/`), and a split mbarrier wait whose halves ptxas 13.5 never produces from
//! our kernels but a CUDA 12 ptxas did in lmdeploy 0.18 (`fixtures/compiled/sm_90a/
//! stage_wait_loop`). Not compiler output; do not use as evidence of what ptxas does.

use std::fs;
use std::path::Path;

use fencelint_reorder::{AuditOptions, RULE};
use fencelint_source::SourceDb;

mod common;

use common::audit_texts;

/// A file under `fixtures/`.
fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures").join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn hand_edited_store_sunk_below_the_tensormap_release_fence() {
    let ptx = fixture("reorder/reorder_tensormap.ptx");
    let sass = fixture("reorder/reorder_tensormap.ptxas-13.5.37.nvdisasm-gp.sass");
    // In `tmap_rewrite_regs`, move the last STG.E.128 of the rewrite (PTX line 102) below the
    // MEMBAR sequence of `fence.proxy.tensormap::generic.release.gpu` (PTX line 106).
    let store = "\t//## File \".nv_debug_ptx_txt\", line 102\n        /*0300*/                   STG.E.128 desc[UR12][R2.64+0x70], R32 ;\n";
    let fence_end = "        /*0340*/                   CGAERRBAR ;\n";
    let start = sass.find("\ntmap_rewrite_regs:\n").expect("kernel");
    let at_store = start + sass[start..].find(store).expect("store");
    let at_fence_end = start + sass[start..].find(fence_end).expect("fence") + fence_end.len();
    let edited = format!(
        "{}{}{}{}",
        &sass[..at_store],
        &sass[at_store + store.len()..at_fence_end],
        store,
        &sass[at_fence_end..]
    );
    let mut db = SourceDb::new();
    let p = db.add("reorder_tensormap.ptx", ptx);
    let s = db.add("hand-edited.sass", edited);
    let audit = audit_texts(p, db.file(p).text(), s, db.file(s).text(), &AuditOptions::default());
    let found: Vec<_> = audit.diagnostics.iter().filter(|d| d.rule == RULE).collect();
    assert_eq!(found.len(), 1, "{:#?}", audit.diagnostics);
    assert_eq!(found[0].kernel.as_deref(), Some("tmap_rewrite_regs"));
    assert!(
        found[0].message.starts_with(
            "ptxas moved the store of PTX line 102 (`STG.E.128` at /*0300*/) below the fence of \
             PTX line 106"
        ),
        "{}",
        found[0].message
    );
    assert!(found[0].help.as_deref().unwrap().contains("right before the fence"));
}

/// The compiled `fixtures/compiled/sm_90a/stage_wait_loop` listing edited into the shape of the
/// split mbarrier waits of lmdeploy 0.18's `sm_90` GEMM kernels (assembled by a CUDA 12 ptxas):
/// the consumers' remainder loop waits once an iteration, inline (`TRYWAIT P0, [R7+URZ], R6;
/// @!P0 BRA` back to its head). The edit makes that wait a fast path credited to the PTX line
/// before it (its own marker removed), moves three instructions of the loop body between it and
/// its `@!P0 BRA`, and sends that branch to an out-of-line retry loop after the last `EXIT`,
/// credited to the wait's line, that reads the barrier through a register copy (`[R20+URZ]`),
/// so the two halves differ in address form. Every instruction is re-addressed in order.
fn split_wait_scheduled_apart() -> String {
    let sass = fixture("compiled/sm_90a/stage_wait_loop.nvdisasm-gp.sass");
    let mut lines: Vec<String> = sass.lines().map(str::to_owned).collect();
    let at = |lines: &[String], needle: &str| {
        lines.iter().position(|l| l.contains(needle)).unwrap_or_else(|| panic!("{needle}"))
    };
    let fast = at(&lines, "TRYWAIT P0, [R7+URZ], R6 ;");
    let wait_marker = lines[fast - 1].clone();
    assert!(wait_marker.contains("//## File"), "{wait_marker}");
    assert!(lines[fast + 2].contains("@!P0 BRA"), "{}", lines[fast + 2]);
    // The branch went back to the wait's own inline head; it goes to the new retry loop instead.
    let head = lines[fast + 2].split("`(").nth(1).unwrap().trim_end_matches(") ;").to_owned();
    // Three instructions after the branch that touch neither R6, R7 nor P0, with their markers.
    let mut moved = Vec::new();
    let mut k = fast + 3;
    while moved.len() < 6 {
        let inst = &lines[k + 1];
        let free = ["S2UR", "VIADD R4", "UMOV"].iter().any(|op| inst.contains(op));
        if lines[k].contains("//## File") && free {
            moved.extend(lines.drain(k..k + 2));
        } else {
            k += 1;
        }
    }
    let back = ".L_x_back".to_owned();
    lines[fast + 2] = lines[fast + 2].replace(&format!("`({head})"), "`(.L_x_retry)");
    let branch = lines.remove(fast + 2);
    insert_all(&mut lines, fast + 1, moved);
    lines.insert(fast + 8, branch);
    lines.insert(fast + 9, format!("{back}:"));
    lines.remove(fast - 1);
    // The retry loop, after the function's last `EXIT`.
    let exit = lines.iter().rposition(|l| l.contains(" EXIT ;")).expect("EXIT");
    let retry = [
        ".L_x_retry:".to_owned(),
        wait_marker,
        "        /*0000*/                   IMAD.MOV.U32 R20, RZ, RZ, R7 ;".to_owned(),
        "        /*0000*/                   SYNCS.PHASECHK.TRANS64.TRYWAIT P0, [R20+URZ], R6 ;"
            .to_owned(),
        "        /*0000*/              @!P0 BRA `(.L_x_retry) ;".to_owned(),
        format!("        /*0000*/                   BRA `({back}) ;"),
    ];
    insert_all(&mut lines, exit + 1, retry);
    // Addresses in order again, from the kernel's start (branch targets are labels).
    let mut next = 0;
    for line in &mut lines {
        if line.starts_with("\t.section") {
            next = 0;
        }
        let column = line.trim_start().strip_prefix("/*").and_then(|rest| rest.get(..6));
        if column
            .is_some_and(|c| c.ends_with("*/") && c[..4].bytes().all(|b| b.is_ascii_hexdigit()))
        {
            let open = line.find("/*").unwrap();
            line.replace_range(open..open + 8, &format!("/*{next:04x}*/"));
            next += 16;
        }
    }
    lines.join("\n") + "\n"
}

/// Inserts `items` into `lines` before index `at`.
fn insert_all(lines: &mut Vec<String>, at: usize, items: impl IntoIterator<Item = String>) {
    let tail = lines.split_off(at);
    lines.extend(items);
    lines.extend(tail);
}

#[test]
fn hand_edited_split_wait_with_its_branch_scheduled_apart_is_one_wait() {
    let ptx = fixture("compiled/sm_90a/stage_wait_loop.ptx");
    let edited = split_wait_scheduled_apart();
    let mut db = SourceDb::new();
    let p = db.add("stage_wait_loop.ptx", ptx);
    let s = db.add("hand-edited.sass", edited);
    let audit = audit_texts(p, db.file(p).text(), s, db.file(s).text(), &AuditOptions::default());
    // Joined by the branch that tests the fast path's predicate, the two halves are one wait:
    // the shared read after the fast path is not "moved above" the retry loop.
    assert!(audit.diagnostics.is_empty(), "{:#?}", audit.diagnostics);
}
