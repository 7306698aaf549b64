//! The SASS semantics table and real compiler output must agree.
//!
//! Every SASS listing under `fixtures/compiled/` (cuobjdump text, nvdisasm text in all its
//! flavours, nvdisasm JSON; produced by ptxas from `fixtures/kernels/*.cu`) is parsed and its
//! opcodes are looked up in `sass_semantics.tsv`:
//!
//! - (a) an opcode that looks like a memory or synchronization instruction (`LD*`, `ST*`,
//!   `ATOM*`, `RED*`, `MEMBAR`, `FENCE`, `CCTL`, `*BAR*`, `SYNCS`, `DEPBAR`, `UTMA*`, `UBLK*`,
//!   `UTC*`, ...) must be matched by a table row. A row may still say `other` (a reviewed
//!   decision, listed in the test output); what fails is falling through to the default.
//! - (b) every row whose evidence column says `fixtures` must match at least one opcode of the
//!   fixtures (for modifier rows: adjust at least one memory access), and a row that gives
//!   another reason (from the primer's measurements, or a fallback) must match none, so the
//!   evidence column stays true. That column is the allowlist, each entry with its reason.

#![allow(clippy::print_stderr)] // prints the opcode inventory

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use fencelint_lower::sass::{Class, semantics};

fn compiled_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled")
}

fn listings(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            listings(&path, out);
        } else if path.extension().is_some_and(|e| e == "sass" || e == "json") {
            out.push(path);
        }
    }
}

/// Opcode bases that name memory accesses, fences, barriers and async machinery.
fn looks_memory_or_sync(base: &str) -> bool {
    const PREFIXES: &[&str] = &[
        "LD",
        "ST",
        "ATOM",
        "RED",
        "MEMBAR",
        "FENCE",
        "CCTL",
        "SYNCS",
        "DEPBAR",
        "ARRIVES",
        "UTMA",
        "UBLK",
        "UTC",
        "USTG",
        "UREDG",
        "WARPGROUP",
        "WARPSYNC",
        "HGMMA",
        "ELECT",
        "ACQBULK",
        "UVIRTCOUNT",
        "ERRBAR",
    ];
    // `REDUX` is a warp reduction into a register, not a memory reduction.
    base != "REDUX" && (PREFIXES.iter().any(|p| base.starts_with(p)) || base.contains("BAR"))
}

/// Every opcode of every compiled listing, with how often it occurs and one file it is in.
fn fixture_opcodes() -> BTreeMap<String, (usize, String)> {
    let mut files = Vec::new();
    listings(&compiled_dir(), &mut files);
    assert!(!files.is_empty(), "no SASS listing under {}", compiled_dir().display());
    let mut opcodes: BTreeMap<String, (usize, String)> = BTreeMap::new();
    for path in &files {
        let text = std::fs::read_to_string(path).unwrap();
        let parsed = fencelint_sass::parse(&text);
        let shown = path.strip_prefix(compiled_dir()).unwrap_or(path).display().to_string();
        for func in &parsed.value.functions {
            for inst in &func.instructions {
                let entry = opcodes.entry(inst.opcode.to_owned()).or_insert((0, shown.clone()));
                entry.0 += 1;
            }
        }
    }
    opcodes
}

#[test]
fn table_agrees_with_compiled_fixtures() {
    let table = semantics();
    assert!(table.errors().is_empty(), "sass_semantics.tsv: {:#?}", table.errors());
    let opcodes = fixture_opcodes();

    let mut failures = Vec::new();
    let mut matched_rows: BTreeMap<usize, BTreeSet<&str>> = BTreeMap::new();
    let mut inventory: BTreeMap<&str, (usize, BTreeSet<String>)> = BTreeMap::new();
    for (opcode, (count, file)) in &opcodes {
        let base = opcode.split('.').next().unwrap_or("");
        let class = table.classify(opcode);
        let row_class = class.row.map(|r| table.rows()[r].class);
        let entry = inventory.entry(base).or_default();
        entry.0 += count;
        entry.1.insert(match row_class {
            Some(c) => format!("{c:?}").to_lowercase(),
            None => "default other".to_owned(),
        });
        match class.row {
            Some(row) => {
                matched_rows.entry(row).or_default().insert(opcode);
            }
            None if looks_memory_or_sync(base) => failures.push(format!(
                "(a) `{opcode}` ({count}x, e.g. in {file}) looks like a memory or synchronization \
                 instruction but no row of sass_semantics.tsv matches it: add a row"
            )),
            None => {}
        }
        for m in class.modifier_rows {
            matched_rows.entry(m).or_default().insert(opcode);
        }
    }

    for (index, row) in table.rows().iter().enumerate() {
        let matched = matched_rows.get(&index);
        match (row.expects_fixture(), matched) {
            (true, None) => failures.push(format!(
                "(b) sass_semantics.tsv:{}: `{}` says `fixtures` but matches no opcode of \
                 fixtures/compiled/: say why it is kept in its evidence column, or remove it",
                row.line, row.opcode
            )),
            (false, Some(opcodes)) => failures.push(format!(
                "(b) sass_semantics.tsv:{}: `{}` is kept for `{}` but matches {:?} in \
                 fixtures/compiled/: its evidence is now `fixtures`",
                row.line, row.opcode, row.evidence, opcodes
            )),
            _ => {}
        }
    }

    eprintln!("opcode bases in fixtures/compiled/ (occurrences, table classes):");
    for (base, (count, classes)) in &inventory {
        let classes: Vec<&str> = classes.iter().map(String::as_str).collect();
        eprintln!("  {base:<24} {count:>6}  {}", classes.join(", "));
    }
    let explicit_other: Vec<&str> = opcodes
        .keys()
        .filter(|op| {
            let base = op.split('.').next().unwrap_or("");
            looks_memory_or_sync(base)
                && table.classify(op).row.is_some_and(|r| table.rows()[r].class == Class::Other)
        })
        .map(String::as_str)
        .collect();
    eprintln!("memory/sync-looking opcodes that a row classifies as other: {explicit_other:?}");
    let allowlisted: Vec<String> = table
        .rows()
        .iter()
        .filter(|r| !r.expects_fixture())
        .map(|r| format!("{} ({})", r.opcode, r.evidence))
        .collect();
    eprintln!("rows kept without a fixture opcode: {}", allowlisted.len());

    assert!(failures.is_empty(), "\n{}\n", failures.join("\n"));
}

#[test]
fn memory_and_sync_prefixes() {
    for base in ["LDG", "STS", "ATOMS", "REDG", "MEMBAR", "CCTL", "BAR", "ERRBAR", "CGAERRBAR"] {
        assert!(looks_memory_or_sync(base), "{base}");
    }
    for base in ["UCGABAR_ARV", "SYNCS", "DEPBAR", "UTMALDG", "UBLKCP", "UTCBAR", "LDTM", "STTM"] {
        assert!(looks_memory_or_sync(base), "{base}");
    }
    for base in ["REDUX", "IMAD", "ISETP", "BRA", "MOV", "S2R", "NOP"] {
        assert!(!looks_memory_or_sync(base), "{base}");
    }
}
