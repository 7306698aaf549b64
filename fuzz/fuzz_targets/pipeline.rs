//! The whole pipeline on arbitrary bytes: detect, parse, lower, analyse and run every rule
//! (`Settings::all()`). Text that is not recognised is read as PTX, as the CLI does for `.ptx`.
//! A rule panic is caught by the linter and becomes an `internal-error`; that is a finding
//! here too.
#![no_main]

use fencelint_diagnostics::codes;
use fencelint_linter::{InputKind, Settings, detect, lint_text};
use fencelint_source::FileId;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let kind = detect(&text).unwrap_or(InputKind::Ptx);
    let output = lint_text(FileId(0), &text, kind, &Settings::all());
    if let Some(internal) = output.diagnostics.iter().find(|d| d.rule == codes::INTERNAL_ERROR) {
        panic!("internal error: {}", internal.message);
    }
});
