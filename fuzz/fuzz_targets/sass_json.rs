//! The `nvdisasm -json` front end on arbitrary bytes (lossy UTF-8).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = fencelint_sass::parse_json(&text);
});
