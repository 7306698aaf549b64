//! The PTX front end on arbitrary bytes (lossy UTF-8): `parse` must never panic, and the
//! function splitter must agree with it on how many functions there are.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let parsed = fencelint_ptx::parse(&text);
    let _ = fencelint_ptx::stats(&parsed.value);
    for span in fencelint_ptx::split_functions(&text) {
        let range = span.range.to_usize();
        if let Some(body) = text.get(range) {
            let _ = fencelint_ptx::parse_with_offset(body, span.range.start);
        }
    }
});
