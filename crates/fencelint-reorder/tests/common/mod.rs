//! What the tests need beyond the library: lowering the two texts (the library takes modules).

use fencelint_lower::InputKind;
use fencelint_reorder::{Audit, AuditOptions, LineIndex, audit_modules};
use fencelint_source::FileId;

/// Lowers a PTX text and a SASS listing of the same kernels and audits every pair of modules;
/// the parse errors of both texts come first in the diagnostics.
pub(crate) fn audit_texts(
    ptx_file: FileId,
    ptx_text: &str,
    sass_file: FileId,
    sass_text: &str,
    options: &AuditOptions,
) -> Audit {
    let kind = fencelint_lower::detect(sass_text).expect("a SASS listing");
    assert!(matches!(kind, InputKind::Sass(_)), "not SASS: {kind:?}");
    let ptx = fencelint_lower::lower(ptx_file, ptx_text, InputKind::Ptx, 0);
    let sass = fencelint_lower::lower(sass_file, sass_text, kind, 0);
    let mut audit = Audit::default();
    audit.diagnostics.extend(ptx.diagnostics);
    audit.diagnostics.extend(sass.diagnostics);
    let lines = LineIndex::new(ptx_text);
    for sass_module in &sass.modules {
        for ptx_module in &ptx.modules {
            audit_modules(ptx_module, &lines, sass_module, options, &mut audit);
        }
    }
    fencelint_diagnostics::sort(&mut audit.diagnostics);
    audit
}
