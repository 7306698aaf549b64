//! `lint_pair`: the rules on a PTX text and its SASS, and the pair rules on the two together.

use std::fs;
use std::path::Path;

use fencelint_linter::{Settings, detect, lint_pair};
use fencelint_source::SourceDb;

const RULE: &str = "ptxas-reordered-across-wait";

fn fixture(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/reorder").join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn run(ptx: &str, sass: &str, settings: &Settings) -> Vec<fencelint_diagnostics::Diagnostic> {
    let mut db = SourceDb::new();
    let p = db.add("k.ptx", ptx.to_owned());
    let s = db.add("k.sass", sass.to_owned());
    let kind = detect(db.file(s).text()).unwrap_or(fencelint_linter::InputKind::Ptx);
    lint_pair(p, db.file(p).text(), s, db.file(s).text(), kind, settings, Some("ptxas 13.2.78"))
        .diagnostics
}

#[test]
fn inputs_that_are_not_ptx_and_gp_sass_are_input_errors() {
    let ptx = fixture("reorder_tensormap.ptx");
    let sass = fixture("reorder_tensormap.ptxas-13.2.78.nvdisasm-gp.sass");
    let settings = Settings::default();
    let codes = |d: Vec<fencelint_diagnostics::Diagnostic>| -> Vec<String> {
        d.into_iter().map(|d| format!("{}: {}", d.rule, d.message)).collect()
    };
    // The text is still linted as what it claims to be (here: a PTX parse error).
    let found = codes(run("hello\n", &sass, &settings));
    assert!(found.contains(&"input-error: the first input is not PTX".to_owned()), "{found:#?}");
    assert!(found.iter().all(|d| !d.starts_with(RULE)), "{found:#?}");
    let found = codes(run(&ptx, "hello\n", &settings));
    assert_eq!(found, ["input-error: the second input is not a SASS listing"]);
    let no_markers = sass.replace("//## File \".nv_debug_ptx_txt\"", "//## File \"k.cu\"");
    let found = codes(run(&ptx, &no_markers, &settings));
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].contains("has no PTX line markers"), "{found:#?}");
}

#[test]
fn the_pair_rule_follows_the_settings() {
    let ptx = fixture("reorder_tensormap.ptx");
    let sass = fixture("reorder_tensormap.ptxas-13.2.78.nvdisasm-gp.sass");
    let on = run(&ptx, &sass, &Settings::only(&[RULE]).unwrap());
    assert_eq!(on.len(), 4, "{on:#?}");
    assert!(on.iter().all(|d| d.rule == RULE && d.message.starts_with("ptxas 13.2.78 moved")));
    let mut off = Settings::default();
    off.set_severity_of(RULE, None).unwrap();
    assert!(run(&ptx, &sass, &off).iter().all(|d| d.rule != RULE));
    let mut warn = Settings::only(&[RULE]).unwrap();
    warn.set_severity_of(RULE, Some(fencelint_diagnostics::Severity::Warning)).unwrap();
    let found = run(&ptx, &sass, &warn);
    assert!(found.iter().all(|d| d.severity == fencelint_diagnostics::Severity::Warning));
}

/// A suppression of the pair rule in the SASS listing covers its finding when the listing is
/// linted with its PTX, is reported as unused there when it covers nothing, and is left alone
/// when the listing is linted without its PTX (the rule could not run).
#[test]
fn pair_rule_suppressions_are_judged_only_when_the_rule_ran() {
    let ptx = fixture("reorder_tensormap.ptx");
    let sass = fixture("reorder_tensormap.ptxas-13.2.78.nvdisasm-gp.sass");
    let store = "        /*0280*/                   STG.E.128";
    assert!(sass.contains(store));
    let allow = format!("// fencelint: allow({RULE})");
    let covered = sass.replacen(store, &format!("\t{allow}\n{store}"), 1);
    let settings = Settings::default();
    let found = run(&ptx, &covered, &settings);
    assert_eq!(found.iter().filter(|d| d.rule == RULE).count(), 3, "{found:#?}");
    assert!(found.iter().all(|d| d.rule != "unused-suppression"), "{found:#?}");

    let kept = fixture("reorder_tensormap.ptxas-13.5.37.nvdisasm-gp.sass");
    let kept_useless = format!("\t// fencelint: allow-file({RULE})\n{kept}");
    let found = run(&ptx, &kept_useless, &settings);
    assert_eq!(found.iter().filter(|d| d.rule == "unused-suppression").count(), 1, "{found:#?}");

    let mut db = SourceDb::new();
    let alone = db.add("k.sass", kept_useless.clone());
    let kind = detect(db.file(alone).text()).unwrap();
    let output = fencelint_linter::lint_text(alone, db.file(alone).text(), kind, &settings);
    assert!(
        output.diagnostics.iter().all(|d| d.rule != "unused-suppression"),
        "{:#?}",
        output.diagnostics
    );
}
