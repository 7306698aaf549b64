//! Linting a SASS listing too large to hold in memory (the `cuobjdump -sass` text of NCCL's
//! `sm_90` cubin is 1.6 GB), in any of the three formats, one function at a time on worker
//! threads. A text listing in a regular file is memory-mapped and cut into functions while the
//! workers lint the functions already cut ([`lint_mapped`]); anything else (JSON, a pipe,
//! invalid UTF-8) is read once and cut by `fencelint_sass::FunctionSplitter` on the reading
//! thread, with a bounded channel to the workers ([`lint_listing`]). Only functions with
//! findings are kept, as excerpts that report lines, columns and byte offsets of the whole file.

use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel};
use std::sync::{Mutex, PoisonError};

use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_linter::{InputKind, Settings};
use fencelint_sass::{FunctionSplitter, SassChunk, SassFormat};
use fencelint_source::{Excerpt, FileId, TextRange};

use super::snippets::{self, Snippet};

/// Text inputs at least this large are streamed when their first bytes read as SASS
/// (`cuobjdump -sass`, `nvdisasm` text, or `nvdisasm -json`, cut into its function objects).
pub(crate) const STREAM_MIN: u64 = 8 << 20;

/// `nvdisasm -json` listings are streamed from this size: reading one whole costs more than
/// cutting it into function objects (a 7.6 MB listing, medians of 3: 0.32 s whole, 0.14 s
/// streamed), and the findings are the same either way.
pub(crate) const JSON_STREAM_MIN: u64 = 1 << 20;

/// Whether the file at `path` is a SASS listing to stream.
pub(crate) fn should_stream(path: &std::path::Path) -> bool {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else { return false };
    // `FENCELINT_STREAM_MIN` (bytes) moves both thresholds, for tests and measurements.
    let (min, json_min) =
        match std::env::var("FENCELINT_STREAM_MIN").ok().and_then(|v| v.parse().ok()) {
            Some(min) => (min, min),
            None => (STREAM_MIN, JSON_STREAM_MIN),
        };
    if !meta.is_file() || meta.len() < min.min(json_min) {
        return false;
    }
    let mut head = Vec::with_capacity(64 << 10);
    let Ok(file) = std::fs::File::open(path) else { return false };
    if file.take(64 << 10).read_to_end(&mut head).is_err() || head.contains(&0) {
        return false;
    }
    let text = String::from_utf8_lossy(&head);
    match fencelint_linter::detect(&text) {
        Some(InputKind::Sass(SassFormat::NvdisasmJson)) => meta.len() >= json_min,
        Some(InputKind::Sass(_)) => meta.len() >= min,
        _ => false,
    }
}

/// How many functions of a mapped listing may wait, cut, for a worker.
const MAPPED_AHEAD: usize = 4096;

/// The id that diagnostics carry until their lines are cut out.
const PLACEHOLDER: FileId = FileId(u32::MAX);

/// A function with findings: the lines its labels point at, and its diagnostics (label `file`
/// is the index of the snippet, see [`snippets::cut`]).
pub(crate) struct Excerpted {
    pub snippets: Vec<Snippet>,
    pub diagnostics: Vec<Diagnostic>,
}

pub(crate) struct StreamOutput {
    /// In the order of the file.
    pub findings: Vec<Excerpted>,
    pub functions: usize,
    /// A read error, with the byte offset reached.
    pub error: Option<(u64, String)>,
}

/// What the workers of one listing found: the number of functions, and the excerpts of those
/// with findings under their index in the file.
#[derive(Default)]
struct Found {
    functions: AtomicUsize,
    excerpts: Mutex<Vec<(usize, Excerpted)>>,
}

impl Found {
    /// Records the linting of function `index`: its result, or the `internal-error` for
    /// `function` at `at` when it panicked.
    fn add(
        &self,
        index: usize,
        result: std::thread::Result<(usize, Option<Excerpted>)>,
        function: &str,
        at: Excerpt,
    ) {
        let (n, excerpt) = result.unwrap_or_else(|_| (0, Some(crashed(function, at))));
        self.functions.fetch_add(n, Ordering::Relaxed);
        if let Some(excerpt) = excerpt {
            let mut excerpts =
                self.excerpts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            excerpts.push((index, excerpt));
        }
    }

    /// The output, findings in file order.
    fn into_output(self, error: Option<(u64, String)>) -> StreamOutput {
        let mut excerpts =
            self.excerpts.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        excerpts.sort_by_key(|(index, _)| *index);
        StreamOutput {
            findings: excerpts.into_iter().map(|(_, excerpt)| excerpt).collect(),
            functions: self.functions.into_inner(),
            error,
        }
    }
}

/// Lints the SASS text listing that `reader` yields on `workers` threads besides the reading
/// one.
pub(crate) fn lint_listing<R: BufRead>(
    reader: R,
    settings: &Settings,
    workers: usize,
) -> StreamOutput {
    let (sender, receiver) = sync_channel::<(usize, SassChunk)>(workers * 4);
    let receiver = Mutex::new(receiver);
    // Texts go back to the splitter once linted, to be read into again.
    let (recycle, recycled) = channel::<String>();
    let found = Found::default();
    let mut error = None;
    std::thread::scope(|scope| {
        let (receiver, found) = (&receiver, &found);
        for _ in 0..workers.max(1) {
            let recycle = recycle.clone();
            scope.spawn(move || {
                loop {
                    let next =
                        receiver.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv();
                    let Ok((index, chunk)) = next else { break };
                    // A panic outside the rules (which the linter already guards) must neither
                    // stop this worker, which would leave the reader blocked on a full channel,
                    // nor pass silently.
                    let function = chunk.function.clone();
                    let at = Excerpt {
                        line: u32::try_from(chunk.line).unwrap_or(u32::MAX),
                        column: u32::try_from(chunk.column).unwrap_or(u32::MAX),
                        offset: chunk.offset,
                    };
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let (n, excerpt, text) = lint_chunk(chunk, settings);
                        let _ = recycle.send(text);
                        (n, excerpt)
                    }));
                    found.add(index, result, &function, at);
                }
            });
        }
        drop(recycle);
        let mut offset = 0;
        let mut splitter = FunctionSplitter::new(reader).with_target_lines();
        let mut index = 0;
        while let Some(chunk) = splitter.next() {
            index += 1;
            for text in recycled.try_iter() {
                splitter.recycle(text);
            }
            match chunk {
                Ok(chunk) => {
                    offset =
                        chunk.offset + (chunk.text.len() as u64 - u64::from(chunk.target_line));
                    if sender.send((index, chunk)).is_err() {
                        break;
                    }
                }
                Err(err) => {
                    error = Some((offset, format!("reading stopped: {err}")));
                    break;
                }
            }
        }
        drop(sender);
    });
    found.into_output(error)
}

/// Lints a SASS text listing in a regular file through a read-only memory map. Nothing is
/// copied: the calling thread checks the mapped bytes for UTF-8 and cuts them into functions
/// one piece after another (`split_bytes_in_order`), and hands each function, its text borrowed
/// from the map, to `workers` threads as soon as it is cut. A file that is not in the page
/// cache is thus read from the disk while the functions before the reading point are linted.
/// Pages are given back once scanned and once linted, so that the resident memory stays that
/// of the functions in flight, not the file's.
///
/// Returns `None`, having printed nothing, when the file cannot take this path: empty, not
/// mappable, 4 GiB or larger (text ranges are 32-bit), `nvdisasm -json`, or not valid UTF-8
/// (found when the cut reaches the bad bytes: what was linted before is dropped). The caller
/// then streams it with [`lint_listing`], which reports the invalid bytes.
#[allow(unsafe_code)]
pub(crate) fn lint_mapped(
    file: &std::fs::File,
    settings: &Settings,
    workers: usize,
) -> Option<StreamOutput> {
    let len = file.metadata().ok()?.len();
    // `FENCELINT_NO_MAP` (any value) streams every listing, for tests and measurements.
    if len == 0 || len >= u64::from(u32::MAX) || std::env::var_os("FENCELINT_NO_MAP").is_some() {
        return None;
    }
    // SAFETY: the map is read-only and private, and nothing here writes to it. The file could
    // still be truncated by another process while it is linted; reading the lost pages would
    // then raise SIGBUS (see docs/robustness.md), as for any tool that maps its input.
    let map = unsafe { memmap2::MmapOptions::new().map(file) }.ok()?;
    let bytes: &[u8] = &map;
    // No `MADV_WILLNEED` for the whole map: a file not in the page cache then had up to 700 MB
    // of it mapped while it was cut (1.6 GB listing), against 20 MB without the advice, and the
    // kernel's own read-ahead on faults keeps the cut as fast (docs/performance.md).
    let release = |range: std::ops::Range<usize>| release_pages(&map, range);

    // The cut runs ahead of the workers by up to this many functions (a 1.6 GB listing has
    // about 900), so that a file read from the disk is read ahead of the linting; bounded so
    // that a file of millions of tiny functions does not queue them all.
    let (sender, receiver) = sync_channel::<(usize, fencelint_sass::TextChunk<'_>)>(MAPPED_AHEAD);
    let receiver = Mutex::new(receiver);
    let abandoned = AtomicBool::new(false);
    let found = Found::default();
    let cut = std::thread::scope(|scope| {
        for _ in 0..workers.max(1) {
            scope.spawn(|| {
                loop {
                    let next = receiver.lock().unwrap_or_else(PoisonError::into_inner).recv();
                    let Ok((index, chunk)) = next else { break };
                    if abandoned.load(Ordering::Relaxed) {
                        continue;
                    }
                    let at = Excerpt {
                        line: u32::try_from(chunk.line).unwrap_or(u32::MAX),
                        column: 0,
                        offset: u64::from(chunk.range.start),
                    };
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        lint_text_chunk(&chunk, at, settings)
                    }));
                    release(chunk.range.to_usize());
                    found.add(index, result, chunk.function, at);
                }
            });
        }
        // JSON (whose chunks carry character columns that this path does not compute) and
        // bytes that are not UTF-8 give `None`, and the caller streams the file instead.
        let mut index = 0;
        let cut = fencelint_sass::split_bytes_in_order(bytes, release, |chunk| {
            index += 1;
            sender.send((index - 1, chunk)).is_ok()
        });
        if cut.is_none() {
            abandoned.store(true, Ordering::Relaxed);
        }
        drop(sender);
        cut
    });
    cut?;
    Some(found.into_output(None))
}

/// Gives back the pages that lie wholly inside `range` of the map. They are still in the page
/// cache: reading them again maps them again, with the same bytes.
#[allow(unsafe_code)]
fn release_pages(map: &memmap2::Mmap, range: std::ops::Range<usize>) {
    const PAGE: usize = 4096;
    let start = range.start.next_multiple_of(PAGE);
    let end = range.end.min(map.len()) / PAGE * PAGE;
    if end > start {
        // SAFETY: `MADV_DONTNEED` on a private read-only file mapping that was never written
        // drops the page table entries only; the next read faults in the same file bytes, so
        // no borrowed `&str` into the map ever sees different contents.
        let _ = unsafe {
            map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
        };
    }
}

/// Lints one function of a mapped listing; `at` is where its text starts in the file.
fn lint_text_chunk(
    chunk: &fencelint_sass::TextChunk<'_>,
    at: Excerpt,
    settings: &Settings,
) -> (usize, Option<Excerpted>) {
    let text = chunk.text();
    let kind = InputKind::Sass(chunk.format);
    let mut lint =
        fencelint_linter::lint_split_function(PLACEHOLDER, text, kind, chunk.arch, settings, None);
    if lint.diagnostics.is_empty() {
        return (lint.functions, None);
    }
    let snippets = snippets::cut(text, at, PLACEHOLDER, &mut lint.diagnostics);
    (lint.functions, Some(Excerpted { snippets, diagnostics: lint.diagnostics }))
}

/// The `internal-error` for a function whose linting panicked.
fn crashed(function: &str, at: Excerpt) -> Excerpted {
    let diagnostic = Diagnostic::new(
        codes::INTERNAL_ERROR,
        Severity::Error,
        format!("linting `{function}` failed; the other functions were still checked"),
        Label::new(FileId(0), TextRange::empty(0), "in this function"),
    )
    .with_kernel(function.to_owned())
    .with_help("report this with the input file");
    Excerpted {
        snippets: vec![Snippet { text: String::new(), base: at }],
        diagnostics: vec![diagnostic],
    }
}

/// Lints one function, and gives its text back for reuse. The splitter put a `.target` line in front of a function whose
/// architecture the stream named, on the line before the function's own first line, so that
/// lowering knows the architecture and every position still maps back to the file.
fn lint_chunk(chunk: SassChunk, settings: &Settings) -> (usize, Option<Excerpted>, String) {
    let prefix = u64::from(chunk.target_line);
    let base = Excerpt {
        line: u32::try_from(chunk.line.saturating_sub(u64::from(prefix > 0))).unwrap_or(u32::MAX),
        column: u32::try_from(chunk.column).unwrap_or(u32::MAX),
        offset: chunk.offset.saturating_sub(prefix),
    };
    let mut lint = if chunk.format == SassFormat::NvdisasmJson {
        // A JSON chunk is one function object, not a document: it is parsed as such, with the
        // architecture the stream's metadata named. JSON carries no suppression comments.
        let parsed = chunk.parse();
        let lowered = fencelint_lower::sass::lower_parsed(PLACEHOLDER, &chunk.text, &parsed, 0);
        // The syntax tree is not needed once lowered: freed before the analyses allocate theirs.
        drop(parsed);
        fencelint_linter::lint_lowered(lowered, settings)
    } else {
        super::binary::lint_alone(&chunk, settings, None)
    };
    let text = chunk.text;
    // The splitter replaced bytes that are not UTF-8; say so, as the whole-file path does.
    if let Some(at) = chunk.invalid_utf8 {
        lint.diagnostics.push(Diagnostic::new(
            codes::INPUT_ERROR,
            Severity::Error,
            "invalid UTF-8 in this function; the invalid bytes were replaced and the rest was linted"
                .to_owned(),
            Label::new(PLACEHOLDER, TextRange::empty(at), ""),
        ));
    }
    if lint.diagnostics.is_empty() {
        return (lint.functions, None, text);
    }
    let snippets = snippets::cut(&text, base, PLACEHOLDER, &mut lint.diagnostics);
    (lint.functions, Some(Excerpted { snippets, diagnostics: lint.diagnostics }), text)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing of `size` bytes or more: `head` padded with blank lines.
    fn padded(dir: &std::path::Path, name: &str, head: &str, size: u64) -> std::path::PathBuf {
        let mut text = head.to_owned();
        let missing = usize::try_from(size).unwrap().saturating_sub(text.len());
        text.push_str(&"\n".repeat(missing));
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// nvdisasm JSON streams from 1 MiB, text listings from 8 MiB (when no
    /// `FENCELINT_STREAM_MIN` is set, as in the test process).
    #[test]
    fn json_streams_from_a_smaller_size_than_text() {
        if std::env::var_os("FENCELINT_STREAM_MIN").is_some() {
            return;
        }
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/compiled");
        let json = std::fs::read_to_string(root.join("sm_90a/cp_async.nvdisasm.json")).unwrap();
        let sass = std::fs::read_to_string(root.join("sm_90a/cp_async.cuobjdump.sass")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let size = JSON_STREAM_MIN + (JSON_STREAM_MIN / 2);
        let big_json = padded(dir.path(), "a.json", &json, size);
        let small_json = padded(dir.path(), "b.json", &json, 0);
        let text = padded(dir.path(), "c.sass", &sass, size);
        assert!(should_stream(&big_json));
        assert!(!should_stream(&small_json));
        assert!(!should_stream(&text));
    }
}
