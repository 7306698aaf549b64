//! Text inputs that belong together: a PTX file and the `nvdisasm -c -gp` listing of the cubin
//! that ptxas assembled from it, given to one `fencelint check`. Such a listing is linted with
//! the pair rules against its PTX (see docs/reorder.md).

use std::path::{Path, PathBuf};

use fencelint_linter::InputKind;
use fencelint_source::{FileId, SourceDb};

/// One text input of a run.
pub(crate) struct Job {
    pub file: FileId,
    pub kind: InputKind,
    pub path: PathBuf,
}

/// For each job, the index of the PTX job that its SASS was assembled from: a SASS listing with
/// PTX line markers is paired with the PTX input that defines the most of its functions (the
/// first such input on a tie); every other job gets `None`.
pub(crate) fn partners(db: &SourceDb, jobs: &[Job]) -> Vec<Option<usize>> {
    let mut out = vec![None; jobs.len()];
    let listings: Vec<usize> = (0..jobs.len())
        .filter(|&i| {
            matches!(jobs[i].kind, InputKind::Sass(_))
                && db.file(jobs[i].file).text().contains(".nv_debug_ptx_txt")
        })
        .collect();
    if listings.is_empty() {
        return out;
    }
    let ptx_names: Vec<(usize, Vec<&str>)> = (0..jobs.len())
        .filter(|&i| jobs[i].kind == InputKind::Ptx)
        .map(|i| {
            let spans = fencelint_ptx::split_functions(db.file(jobs[i].file).text());
            let mut names: Vec<&str> =
                spans.into_iter().filter(|s| s.has_body).map(|s| s.name).collect();
            names.sort_unstable();
            (i, names)
        })
        .collect();
    for sass in listings {
        let functions = fencelint_sass::split_functions(db.file(jobs[sass].file).text());
        let mut best: Option<(usize, usize)> = None;
        for (ptx, names) in &ptx_names {
            let shared = functions
                .iter()
                .filter(|chunk| names.binary_search(&chunk.function).is_ok())
                .count();
            if shared > 0 && best.is_none_or(|(_, most)| shared > most) {
                best = Some((*ptx, shared));
            }
        }
        out[sass] = best.map(|(ptx, _)| ptx);
    }
    out
}

/// The cubin that `k.nvdisasm-gp.sass` was disassembled from: `k.cubin` beside it, when it
/// exists (its notes name the ptxas version).
pub(crate) fn cubin_beside(sass: &Path) -> Option<PathBuf> {
    let name = sass.file_name()?.to_str()?;
    let stem = name.strip_suffix(".nvdisasm-gp.sass")?;
    let cubin = sass.parent().unwrap_or(Path::new("")).join(format!("{stem}.cubin"));
    cubin.is_file().then_some(cubin)
}

/// The ptxas version recorded in the cubin beside `sass`.
pub(crate) fn producer_beside(sass: &Path) -> Option<String> {
    let bytes = std::fs::read(cubin_beside(sass)?).ok()?;
    fencelint_linter::reorder::ptxas_version(&bytes)
}
