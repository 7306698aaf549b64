//! Tests that police the suite: rule documents, fixtures, message style, tidiness, determinism.

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

use fencelint_linter::{Settings, detect, lint_text};
use fencelint_rules::all_rules;
use fencelint_source::SourceDb;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

const SECTIONS: &[&str] = &[
    "## What it does",
    "## Why is this bad?",
    "## Example",
    "Use instead:",
    "## Known problems",
    "## References",
];

fn files_under(dir: &Path, ext: &str) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path, ext));
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn lint(name: &str, text: &str, settings: &Settings) -> Vec<fencelint_diagnostics::Diagnostic> {
    let mut db = SourceDb::new();
    let file = db.add(name, text);
    let kind = detect(text).unwrap_or(fencelint_linter::InputKind::Ptx);
    lint_text(file, db.file(file).text(), kind, settings).diagnostics
}

#[test]
fn every_rule_has_a_document_with_the_fixed_sections_and_matching_header() {
    for rule in all_rules() {
        let meta = rule.meta();
        let path = repo().join("rules").join(format!("{}.md", meta.name));
        let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert_eq!(text, meta.doc, "{}: the binary embeds another text", path.display());
        assert!(text.starts_with(&format!("# {}\n", meta.name)), "{}: title", path.display());
        let mut at = 0;
        for section in SECTIONS {
            let found = text[at..].find(section).unwrap_or_else(|| {
                panic!("{}: missing or out-of-order section `{section}`", path.display())
            });
            at += found;
        }
        let level = meta.default_severity().map_or("off", |s| s.as_str());
        let row = format!(
            "| {} | {} | {} | {} | none |",
            meta.category,
            level,
            meta.dialects,
            meta.since()
        );
        assert!(text.contains(&row), "{}: header table must be `{row}`", path.display());
    }
}

fn code_blocks<'a>(text: &'a str, info: &str) -> Vec<&'a str> {
    let fence = format!("```{info}\n");
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(&fence) {
        let body = &rest[start + fence.len()..];
        let end = body.find("```").expect("closed code block");
        out.push(&body[..end]);
        rest = &body[end..];
    }
    out
}

#[test]
fn document_examples_fire_and_stay_clean() {
    for rule in all_rules() {
        let meta = rule.meta();
        if meta.dialects.pair {
            continue; // a PTX example alone cannot show a pair finding; see the fixtures test
        }
        let settings = Settings::only(&[meta.name]).unwrap();
        let bad = code_blocks(meta.doc, "ptx (bad)");
        let good = code_blocks(meta.doc, "ptx (good)");
        assert!(!bad.is_empty() && !good.is_empty(), "{}: needs bad and good examples", meta.name);
        for block in bad {
            let diags = lint("bad.ptx", block, &settings);
            assert!(!diags.is_empty(), "{}: bad example does not fire", meta.name);
            assert!(diags.iter().all(|d| d.rule == meta.name), "{}: {diags:#?}", meta.name);
        }
        for block in good {
            let diags = lint("good.ptx", block, &settings);
            assert!(diags.is_empty(), "{}: good example fires: {diags:#?}", meta.name);
        }
    }
}

#[test]
fn every_rule_has_fixtures_that_fire_and_stay_clean_and_every_fixture_dir_is_a_rule() {
    let names: Vec<&str> = all_rules().iter().map(|r| r.meta().name).collect();
    for dialect in ["ptx", "sass"] {
        let dir = repo().join("fixtures").join(dialect);
        let Ok(entries) = fs::read_dir(&dir) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            assert!(names.contains(&name.as_str()), "fixtures/{dialect}/{name} names no rule");
        }
    }
    for rule in all_rules() {
        let meta = rule.meta();
        if meta.dialects.pair {
            pair_fixtures_fire_and_stay_clean(meta.name);
            continue;
        }
        let mut files = Vec::new();
        for dialect in ["ptx", "sass"] {
            files.extend(files_under(
                &repo().join("fixtures").join(dialect).join(meta.name),
                dialect,
            ));
        }
        let texts: Vec<String> = files.iter().map(|f| fs::read_to_string(f).unwrap()).collect();
        assert!(
            texts.iter().any(|t| t.contains("expect:")),
            "{}: no fixture that fires",
            meta.name
        );
        assert!(texts.iter().any(|t| !t.contains("expect")), "{}: no clean fixture", meta.name);
    }
}

/// A pair rule's fixtures are `fixtures/reorder/`: one PTX file and the `nvdisasm -c -gp`
/// listings of the cubins that different ptxas versions assembled from it.
fn pair_fixtures_fire_and_stay_clean(name: &str) {
    let dir = repo().join("fixtures/reorder");
    let ptx_files = files_under(&dir, "ptx");
    assert!(!ptx_files.is_empty(), "{name}: no PTX under fixtures/reorder");
    let settings = Settings::only(&[name]).unwrap();
    let (mut fires, mut clean) = (false, false);
    for ptx_path in ptx_files {
        let stem = ptx_path.file_stem().unwrap().to_string_lossy().into_owned();
        for sass_path in files_under(&dir, "sass") {
            let sass_name = sass_path.file_name().unwrap().to_string_lossy().into_owned();
            if !sass_name.starts_with(&format!("{stem}.")) {
                continue;
            }
            let mut db = SourceDb::new();
            let ptx = db.add("k.ptx", fs::read_to_string(&ptx_path).unwrap());
            let sass = db.add("k.sass", fs::read_to_string(&sass_path).unwrap());
            let kind = detect(db.file(sass).text()).unwrap();
            let output = fencelint_linter::lint_pair(
                ptx,
                db.file(ptx).text(),
                sass,
                db.file(sass).text(),
                kind,
                &settings,
                None,
            );
            let found = output.diagnostics.iter().filter(|d| d.rule == name).count();
            assert_eq!(found, output.diagnostics.len(), "{sass_name}: {:#?}", output.diagnostics);
            fires |= found > 0;
            clean |= found == 0;
        }
    }
    assert!(fires, "{name}: no fixture pair that fires");
    assert!(clean, "{name}: no fixture pair that stays clean");
}

#[test]
fn messages_are_lowercase_without_trailing_period_and_help_is_imperative() {
    let settings = Settings::all();
    let mut inputs = files_under(&repo().join("fixtures/ptx"), "ptx");
    inputs.extend(files_under(&repo().join("fixtures/compiled/sm_90a"), "ptx"));
    let mut seen = 0;
    for path in inputs {
        let text = fs::read_to_string(&path).unwrap();
        for d in lint(&path.display().to_string(), &text, &settings) {
            seen += 1;
            let first = d.message.chars().next().unwrap();
            assert!(!first.is_uppercase(), "{}: message starts uppercase: {}", d.rule, d.message);
            assert!(!d.message.ends_with('.'), "{}: message ends with a period", d.rule);
            if let Some(help) = &d.help {
                let word = help.split_whitespace().next().unwrap_or("");
                assert!(
                    word.chars().all(|c| c.is_ascii_lowercase()) && !word.ends_with('s'),
                    "{}: help should start with an imperative verb: {help}",
                    d.rule
                );
            }
        }
    }
    assert!(seen > 0, "no diagnostics to check");
}

#[test]
fn module_files_open_with_a_doc_comment_and_tests_use_no_should_panic_or_ignore() {
    for path in files_under(&repo().join("crates"), "rs") {
        let text = fs::read_to_string(&path).unwrap();
        let is_module = path.components().any(|c| c.as_os_str() == "src");
        if is_module {
            assert!(text.starts_with("//!"), "{} must open with `//!`", path.display());
        }
        for banned in [concat!("#[", "should_panic"), concat!("#[", "ignore")] {
            assert!(!text.contains(banned), "{} uses {banned}", path.display());
        }
    }
}

#[test]
fn output_is_identical_with_one_thread_and_many() {
    let mut inputs = files_under(&repo().join("fixtures/compiled"), "ptx");
    inputs.extend(files_under(&repo().join("fixtures/ptx"), "ptx"));
    let run = || {
        inputs
            .iter()
            .map(|path| {
                let text = fs::read_to_string(path).unwrap();
                format!("{:?}", lint(&path.display().to_string(), &text, &Settings::all()))
            })
            .collect::<Vec<_>>()
    };
    let one = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap().install(run);
    let many = rayon::ThreadPoolBuilder::new().num_threads(8).build().unwrap().install(run);
    assert_eq!(one, many);
}

/// The rules table of `README.md` between the `rules:start`/`rules:end` markers is generated from
/// the registry. `FENCELINT_UPDATE_README=1 cargo test -p fencelint-linter --test meta` rewrites it.
#[test]
fn readme_rules_table_matches_the_registry() {
    let mut table = String::from(
        "| rule | category | default | dialects | what it finds |\n| --- | --- | --- | --- | --- |\n",
    );
    for rule in all_rules() {
        let meta = rule.meta();
        let level = meta.default_severity().map_or("off", |s| s.as_str());
        let _ = writeln!(
            table,
            "| [`{0}`](rules/{0}.md) | {1} | {2} | {3} | {4} |",
            meta.name, meta.category, level, meta.dialects, meta.summary
        );
    }
    let path = repo().join("README.md");
    let readme = fs::read_to_string(&path).unwrap();
    let (start, end) = ("<!-- rules:start -->\n", "<!-- rules:end -->");
    let a = readme.find(start).expect("README has a rules:start marker") + start.len();
    let b = readme.find(end).expect("README has a rules:end marker");
    if readme[a..b] == table {
        return;
    }
    if std::env::var_os("FENCELINT_UPDATE_README").is_some() {
        fs::write(&path, format!("{}{table}{}", &readme[..a], &readme[b..])).unwrap();
        return;
    }
    panic!(
        "README rules table is stale; run FENCELINT_UPDATE_README=1 cargo test -p fencelint-linter --test meta"
    );
}
