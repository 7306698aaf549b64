//! HAND-WRITTEN SASS: the ptxas 13.5.37 listing of `fixtures/reorder/` edited by this test to
//! show a case that no compiler output of ours shows (a store sunk below a release fence). Not
//! compiler output; do not use as evidence of what ptxas does.

use std::fs;
use std::path::Path;

use fencelint_reorder::{AuditOptions, RULE};
use fencelint_source::SourceDb;

mod common;

use common::audit_texts;

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/reorder").join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn hand_edited_store_sunk_below_the_tensormap_release_fence() {
    let ptx = fixture("reorder_tensormap.ptx");
    let sass = fixture("reorder_tensormap.ptxas-13.5.37.nvdisasm-gp.sass");
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
