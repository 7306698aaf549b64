//! The reorder audit (`ptxas-reordered-across-wait`) end to end: `audit-reorder`, a PTX file and
//! its `-gp` listing given to `check` together, and the rule's place among the others
//! (selection, `explain`, SARIF). A cubin given alone is tested in `binary.rs`.

use std::process::Output;

mod common;

use common::{fencelint, stderr, stdout};

const RULE: &str = "ptxas-reordered-across-wait";
const PTX: &str = "fixtures/reorder/reorder_tensormap.ptx";
const HOISTED: &str = "fixtures/reorder/reorder_tensormap.ptxas-13.2.78.nvdisasm-gp.sass";
const KEPT: &str = "fixtures/reorder/reorder_tensormap.ptxas-13.5.37.nvdisasm-gp.sass";

fn findings(out: &Output) -> Vec<String> {
    stdout(out).lines().filter(|l| l.contains(&format!("[{RULE}]"))).map(str::to_owned).collect()
}

#[test]
fn audit_reorder_fires_on_the_hoisted_build_and_names_the_compiler() {
    let out = fencelint(&["audit-reorder", PTX, HOISTED, "--format", "short"]);
    let found = findings(&out);
    assert_eq!(found.len(), 4, "{}{}", stdout(&out), stderr(&out));
    assert_eq!(out.status.code(), Some(1));
    // The version comes from the cubin beside the listing.
    assert!(
        found.iter().all(|l| l.contains("ptxas 13.2.78 moved the store of PTX line")),
        "{found:#?}"
    );
    assert!(
        found.iter().any(|l| l.contains("(`STG.E.128` at /*0280*/) above the wait of PTX line 91"))
    );

    let out = fencelint(&["audit-reorder", PTX, KEPT, "--format", "short"]);
    assert!(findings(&out).is_empty(), "{}", stdout(&out));
    assert_eq!(out.status.code(), Some(0));
}

#[test]
fn audit_reorder_refuses_a_listing_without_ptx_lines() {
    let sass = "fixtures/compiled/sm_90a/spin_poll.nvdisasm.sass";
    let out = fencelint(&["audit-reorder", PTX, sass, "--format", "short"]);
    assert_eq!(out.status.code(), Some(2), "{}", stdout(&out));
    assert!(stdout(&out).contains("no PTX line markers"), "{}", stdout(&out));
}

#[test]
fn check_pairs_a_ptx_file_with_its_gp_listing() {
    let out = fencelint(&["check", PTX, HOISTED, "--format", "short"]);
    assert_eq!(findings(&out).len(), 4, "{}", stdout(&out));
    assert!(findings(&out).iter().all(|l| l.starts_with(HOISTED)));

    let out = fencelint(&["check", PTX, KEPT, "--format", "short"]);
    assert!(findings(&out).is_empty(), "{}", stdout(&out));

    // Alone, the listing has nothing to be compared with.
    let out = fencelint(&["check", HOISTED, "--format", "short"]);
    assert!(findings(&out).is_empty(), "{}", stdout(&out));
}

#[test]
fn the_rule_is_selected_ignored_and_explained_like_any_other() {
    let out = fencelint(&["check", PTX, HOISTED, "--format", "short", "--ignore", RULE]);
    assert!(findings(&out).is_empty(), "{}", stdout(&out));
    let out = fencelint(&["check", PTX, HOISTED, "--format", "short", "--select", RULE]);
    let text = stdout(&out);
    assert_eq!(findings(&out).len(), 4, "{text}");
    assert_eq!(text.lines().filter(|l| l.contains("error[") || l.contains("warning[")).count(), 4);

    let rules = stdout(&fencelint(&["rules"]));
    assert!(
        rules.lines().any(|l| l.starts_with(RULE) && l.contains("ptx + sass (pair)")),
        "{rules}"
    );
    let explain = fencelint(&["explain", RULE]);
    assert!(stdout(&explain).starts_with(&format!("# {RULE}")));
}

#[test]
fn sarif_describes_the_rule() {
    let out = fencelint(&["check", PTX, HOISTED, "--format", "sarif"]);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).expect("sarif");
    let rules = doc["runs"][0]["tool"]["driver"]["rules"].as_array().expect("rules");
    assert!(rules.iter().any(|r| r["id"] == RULE), "{rules:#?}");
    let results = doc["runs"][0]["results"].as_array().expect("results");
    assert_eq!(results.iter().filter(|r| r["ruleId"] == RULE).count(), 4);
}
