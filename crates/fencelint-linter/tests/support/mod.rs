//! Helpers shared by the integration tests of this crate.

use std::fmt::Write as _;

use fencelint_ir::Function;
use fencelint_linter::InputKind;
use fencelint_source::FileId;

/// Lowers a hand-written cuobjdump listing (a test input, not compiler output) of one `sm_90`
/// function `k`, one instruction a line, at addresses 0x0, 0x10, ...
pub(crate) fn sass_function(lines: &[&str]) -> Function {
    let mut text = String::from(
        "\n\tcode for sm_90\n\t\tFunction : k\n\t.headerflags\t@\"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)\"\n",
    );
    for (index, line) in lines.iter().enumerate() {
        writeln!(text, "        /*{:04x}*/                   {line}", index * 16).unwrap();
    }
    text.push_str("\t\t..........\n");
    let kind = InputKind::Sass(fencelint_sass::SassFormat::CuobjdumpText);
    let lowered = fencelint_lower::lower(FileId(0), &text, kind, 0);
    assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
    lowered.modules.into_iter().next().unwrap().functions.into_iter().next().unwrap()
}
