//! The SASS text front ends (`cuobjdump -sass` and `nvdisasm` listings) on arbitrary bytes:
//! the whole-text parser, the in-memory splitter and the streaming splitter.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = fencelint_sass::detect_input(&text);
    let _ = fencelint_sass::parse_text(&text);
    let _ = fencelint_sass::parse(&text);
    for chunk in fencelint_sass::split_functions(&text) {
        let _ = chunk.parse();
    }
    for chunk in fencelint_sass::FunctionSplitter::new(data).flatten() {
        let _ = chunk.parse();
    }
});
