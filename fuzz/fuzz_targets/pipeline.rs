//! The whole pipeline on arbitrary bytes: detect, parse, lower, analyse and run every rule
//! (`Settings::all()`). Text that is not recognised is read as PTX, as the CLI does for `.ptx`.
//! A rule panic is caught by the linter and becomes an `internal-error`; that is a finding
//! here too. PTX is also linted function by function (the path of large files), which must
//! give the same output.
#![no_main]

use fencelint_diagnostics::codes;
use fencelint_linter::{
    InputKind, Settings, detect, lint_lowered, lint_ptx_by_function, lint_text,
};
use fencelint_source::FileId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let kind = detect(&text).unwrap_or(InputKind::Ptx);
    let output = lint_text(FileId(0), &text, kind, &Settings::all());
    if let Some(internal) = output.diagnostics.iter().find(|d| d.rule == codes::INTERNAL_ERROR) {
        panic!("internal error: {}", internal.message);
    }
    // Large PTX files are linted one function at a time; that must change nothing.
    // Compared with the whole module lowered at once, whatever the input's size.
    if kind == InputKind::Ptx && !text.contains("fencelint:") {
        let settings = Settings::all();
        let whole =
            lint_lowered(fencelint_lower::lower(FileId(0), &text, InputKind::Ptx, 0), &settings);
        let parts = lint_ptx_by_function(FileId(0), &text, &settings);
        assert_eq!(whole.diagnostics, parts.diagnostics, "function by function");
        assert_eq!(whole.functions, parts.functions, "function by function");
        assert_eq!(whole.instructions, parts.instructions, "function by function");
    }
});
