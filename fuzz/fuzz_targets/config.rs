//! The `fencelint.toml` reader on arbitrary bytes. The reader lives in the CLI binary crate
//! (`crates/fencelint-cli/src/config.rs`, crate-private); this target compiles that very file
//! as a module, with the one item it takes from its parent (`FailLevel`) defined here.
#![no_main]
#![allow(dead_code, unreachable_pub)]

use std::path::{Path, PathBuf};

use fencelint_diagnostics::{Diagnostic, Label, Severity};
use fencelint_source::TextRange;
use libfuzzer_sys::fuzz_target;

/// Mirrors `check::FailLevel` of the CLI (the variants the configuration names).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum FailLevel {
    Note,
    Warning,
    Error,
    Never,
}

#[path = "../../crates/fencelint-cli/src/config.rs"]
mod config;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let path = Path::new("fencelint.toml");
    if let Ok(config) = config::parse(path, text, PathBuf::from("/project")) {
        let _ = config.settings(&fencelint_linter::RuleSelection::default());
        let mut db = fencelint_source::SourceDb::new();
        let file = db.add("/project/vendor/a b/k\u{e9}.ptx".to_owned(), String::new());
        let label = Label::new(file, TextRange::empty(0), "");
        let mut diagnostics = vec![
            Diagnostic::new("spin-poll-without-acquire", Severity::Error, "m", label.clone())
                .with_kernel("_Z9poll_flagPVj".to_owned()),
            Diagnostic::new("input-error", Severity::Error, "m", label),
        ];
        let _ = config.filter(&db, &mut diagnostics);
    }
});
