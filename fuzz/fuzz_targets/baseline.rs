//! The baseline reader on arbitrary bytes. The reader lives in the CLI binary crate
//! (`crates/fencelint-cli/src/baseline.rs`, crate-private); this target compiles that very file
//! as a module.
#![no_main]
#![allow(dead_code, unreachable_pub)]

use libfuzzer_sys::fuzz_target;

#[path = "../../crates/fencelint-cli/src/baseline.rs"]
mod baseline;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(baseline) = baseline::parse(text) {
        let _ = baseline.filter(&mut Vec::new());
    }
});
