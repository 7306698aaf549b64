//! The reorder audit on real compiler output: our reproduction in `fixtures/reorder/` (ptxas
//! 13.2.78 and 13.5 from one PTX) and every `<stem>.ptx` + `<stem>.nvdisasm-gp.sass` pair of
//! `fixtures/compiled/`.

use std::fs;
use std::path::{Path, PathBuf};

use fencelint_diagnostics::Diagnostic;
use fencelint_reorder::{Audit, AuditOptions, RULE, ptx_from_debug_section, ptxas_version};
use fencelint_source::SourceDb;

mod common;

use common::audit_texts;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn audit(ptx: &Path, sass: &Path, producer: Option<String>) -> (Audit, SourceDb) {
    let mut db = SourceDb::new();
    let ptx_id = db.add(ptx.display().to_string(), read(ptx));
    let sass_id = db.add(sass.display().to_string(), read(sass));
    let options = AuditOptions { producer, ..AuditOptions::default() };
    let audit =
        audit_texts(ptx_id, db.file(ptx_id).text(), sass_id, db.file(sass_id).text(), &options);
    (audit, db)
}

fn findings(audit: &Audit) -> Vec<&Diagnostic> {
    audit.diagnostics.iter().filter(|d| d.rule == RULE).collect()
}

fn others(audit: &Audit) -> Vec<&Diagnostic> {
    audit.diagnostics.iter().filter(|d| d.rule != RULE).collect()
}

fn reorder(name: &str) -> PathBuf {
    repo().join("fixtures/reorder").join(name)
}

#[test]
fn ptxas_13_2_78_hoists_stores_above_the_bulk_wait() {
    let cubin = fs::read(reorder("reorder_tensormap.ptxas-13.2.78.cubin")).unwrap();
    let producer = ptxas_version(&cubin);
    assert_eq!(producer.as_deref(), Some("ptxas 13.2.78"));
    let (audit, db) = audit(
        &reorder("reorder_tensormap.ptx"),
        &reorder("reorder_tensormap.ptxas-13.2.78.nvdisasm-gp.sass"),
        producer,
    );
    assert!(others(&audit).is_empty(), "{:#?}", others(&audit));
    assert_eq!(audit.paired.len(), 4, "{:?}", audit.paired);
    let found = findings(&audit);
    let summary: Vec<(String, String)> =
        found.iter().map(|d| (d.kernel.clone().unwrap_or_default(), d.message.clone())).collect();
    // One STG.E.128 above the DEPBAR in the straight-line kernel, one in each of the three
    // copies of the loop body; none in the kernels with __syncwarp().
    assert_eq!(found.len(), 4, "{summary:#?}");
    assert_eq!(
        found.iter().filter(|d| d.kernel.as_deref() == Some("tmap_rewrite_loop")).count(),
        3
    );
    let regs = found.iter().find(|d| d.kernel.as_deref() == Some("tmap_rewrite_regs")).unwrap();
    assert_eq!(
        regs.message,
        "ptxas 13.2.78 moved the store of PTX line 95 (`STG.E.128` at /*0280*/) above the wait of \
         PTX line 91 (`DEPBAR.LE` at /*0290*/) that it comes after in PTX"
    );
    assert_eq!(regs.primary.address, Some(0x280));
    assert_eq!(regs.secondary[0].address, Some(0x290));
    assert_ne!(regs.primary.file, regs.secondary[1].file, "primary in SASS, secondary in PTX");
    let ptx = db.file(regs.secondary[1].file).text();
    assert!(ptx[regs.secondary[1].range.to_usize()].starts_with("st.global.v4.u32"));
    assert!(ptx[regs.secondary[2].range.to_usize()].starts_with("cp.async.bulk.wait_group.read 0"));
    assert!(regs.help.as_deref().unwrap().contains("__syncwarp()"));
}

#[test]
fn ptxas_13_5_keeps_the_order() {
    let (audit, _) = audit(
        &reorder("reorder_tensormap.ptx"),
        &reorder("reorder_tensormap.ptxas-13.5.37.nvdisasm-gp.sass"),
        None,
    );
    assert!(audit.diagnostics.is_empty(), "{:#?}", audit.diagnostics);
    assert_eq!(audit.paired.len(), 4);
    assert!(audit.matched_points > 0);
}

#[test]
fn embedded_ptx_equals_the_ptx_file_line_for_line() {
    let cubin = fs::read(reorder("reorder_tensormap.ptxas-13.2.78.cubin")).unwrap();
    let section = elf_section(&cubin, ".nv_debug_ptx_txt").expect("-lineinfo cubin");
    let embedded = ptx_from_debug_section(section);
    let original = read(&reorder("reorder_tensormap.ptx"));
    let a: Vec<&str> = embedded.lines().collect();
    let b: Vec<&str> = original.lines().collect();
    assert_eq!(a.len(), b.len());
    for (n, (x, y)) in a.iter().zip(&b).enumerate() {
        let y = y.trim_start();
        // Comments and `.loc` lines are blanked.
        if !x.is_empty() {
            assert_eq!(*x, y, "line {}", n + 1);
        }
    }
    // The audit on the embedded PTX gives the same findings as on the file.
    let mut db = SourceDb::new();
    let ptx_id = db.add("embedded.ptx", embedded);
    let sass_id =
        db.add("s.sass", read(&reorder("reorder_tensormap.ptxas-13.2.78.nvdisasm-gp.sass")));
    let audit = audit_texts(
        ptx_id,
        db.file(ptx_id).text(),
        sass_id,
        db.file(sass_id).text(),
        &AuditOptions::default(),
    );
    assert_eq!(findings(&audit).len(), 4, "{:#?}", audit.diagnostics);
}

#[test]
fn the_compiled_corpus_gives_no_findings() {
    let mut pairs = 0;
    for arch in fs::read_dir(repo().join("fixtures/compiled")).unwrap().flatten() {
        for entry in fs::read_dir(arch.path()).into_iter().flatten().flatten() {
            let path = entry.path();
            let name = path.file_name().unwrap().to_string_lossy().to_string();
            let Some(stem) = name.strip_suffix(".nvdisasm-gp.sass") else { continue };
            let ptx = arch.path().join(format!("{stem}.ptx"));
            if !ptx.exists() {
                continue;
            }
            let (audit, _) = audit(&ptx, &path, None);
            assert!(audit.diagnostics.is_empty(), "{}: {:#?}", path.display(), audit.diagnostics);
            assert!(audit.unpaired.is_empty(), "{}: {:?}", path.display(), audit.unpaired);
            pairs += 1;
        }
    }
    assert!(pairs >= 10, "only {pairs} pairs");
}

/// The bytes of a section of a 64-bit little-endian ELF file (test helper; the library does
/// no ELF parsing).
fn elf_section<'a>(elf: &'a [u8], name: &str) -> Option<&'a [u8]> {
    let u16_at = |o: usize| u16::from_le_bytes(elf[o..o + 2].try_into().unwrap()) as usize;
    let u32_at = |o: usize| u32::from_le_bytes(elf[o..o + 4].try_into().unwrap()) as usize;
    let u64_at = |o: usize| u64::from_le_bytes(elf[o..o + 8].try_into().unwrap()) as usize;
    let shoff = u64_at(0x28);
    let (entsize, count, strndx) = (u16_at(0x3a), u16_at(0x3c), u16_at(0x3e));
    let header = |i: usize| shoff + i * entsize;
    let strtab = u64_at(header(strndx) + 0x18);
    (0..count).find_map(|i| {
        let h = header(i);
        let start = strtab + u32_at(h);
        let end = start + elf[start..].iter().position(|&b| b == 0)?;
        (&elf[start..end] == name.as_bytes())
            .then(|| &elf[u64_at(h + 0x18)..u64_at(h + 0x18) + u64_at(h + 0x20)])
    })
}
