//! The SASS text front ends (`cuobjdump -sass` and `nvdisasm` listings) on arbitrary bytes:
//! the whole-text parser, the in-memory splitters (of a `str`, and of bytes checked as they are
//! cut, in parallel or in order, which must agree on UTF-8 input and decline other bytes) and
//! the streaming splitter. The streaming splitter must also cut exactly the same chunks
//! whatever the size of its reader's buffer, with its buffers recycled as the linter recycles
//! them. A text listing lowered as it is parsed (no syntax tree) must give what lowering the
//! syntax tree gives.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let _ = fencelint_sass::detect_input(&text);
    let tree = fencelint_sass::parse_text(&text);
    let _ = fencelint_sass::parse(&text);
    let format = fencelint_sass::text_format(&text);
    let file = fencelint_source::FileId(0);
    let streamed = fencelint_lower::sass::lower_text(file, &text, format, 0);
    let from_tree = fencelint_lower::sass::lower_parsed(file, &text, &tree, 0);
    assert_eq!(
        format!("{:?}{:?}", streamed.modules, streamed.diagnostics),
        format!("{:?}{:?}", from_tree.modules, from_tree.diagnostics)
    );
    let in_memory = fencelint_sass::split_functions(&text);
    for chunk in &in_memory {
        let _ = chunk.parse();
    }
    let from_bytes = fencelint_sass::split_bytes_parallel_with(data, |_| {});
    let mut in_order = Vec::new();
    let ordered = fencelint_sass::split_bytes_in_order(
        data,
        |_| {},
        |chunk| {
            // Handed out with the text up to its end; compared against the whole text.
            assert!(chunk.input.len() >= chunk.range.end as usize);
            in_order.push(fencelint_sass::TextChunk { input: &text, ..chunk });
            true
        },
    );
    let is_json = fencelint_sass::detect(&text) == Some(fencelint_sass::SassFormat::NvdisasmJson);
    match std::str::from_utf8(data) {
        Ok(_) if !is_json => {
            assert_eq!(ordered, Some(()));
            assert_eq!(in_order, in_memory);
            assert_eq!(from_bytes, Some(in_memory));
        }
        _ => {
            assert_eq!(ordered, None);
            assert_eq!(from_bytes, None);
        }
    }
    let whole: Vec<_> = fencelint_sass::FunctionSplitter::new(data).with_target_lines().collect();
    for chunk in whole.iter().flatten() {
        let _ = chunk.parse();
    }
    let capacity = 1 + data.first().map_or(0, |&b| usize::from(b % 64));
    let reader = std::io::BufReader::with_capacity(capacity, data);
    let mut splitter = fencelint_sass::FunctionSplitter::new(reader).with_target_lines();
    let mut small = Vec::new();
    while let Some(chunk) = splitter.next() {
        if let Ok(chunk) = &chunk {
            splitter.recycle(chunk.text.clone());
        }
        small.push(chunk.map_err(|e| e.to_string()));
    }
    let whole: Vec<_> = whole.into_iter().map(|c| c.map_err(|e| e.to_string())).collect();
    assert_eq!(whole, small, "{capacity}-byte buffer");
});
