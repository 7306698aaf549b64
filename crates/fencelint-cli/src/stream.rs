//! Linting a SASS listing too large to hold in memory (the `cuobjdump -sass` text of NCCL's
//! `sm_90` cubin is 1.6 GB), in any of the three formats, one function at a time on worker
//! threads. A text listing in a regular file is memory-mapped and cut into functions while the
//! workers lint the functions already cut ([`lint_mapped`]); anything else (JSON, a pipe,
//! invalid UTF-8) is read once and cut by `fencelint_sass::FunctionSplitter` on the reading
//! thread, with a bounded channel to the workers ([`lint_listing`]). Only functions with
//! findings are kept, as excerpts that report lines, columns and byte offsets of the whole file.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{channel, sync_channel};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};

use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_linter::{InputKind, Settings, Split, UnnamedCalls};
use fencelint_sass::{FunctionSplitter, SassChunk, SassFormat};
use fencelint_source::{Excerpt, FileId, TextRange};

use super::linking::{self, NotFollowed};
use super::snippets::{self, Snippet};

/// Text inputs at least this large are streamed when their first bytes read as SASS
/// (`cuobjdump -sass`, `nvdisasm` text, or `nvdisasm -json`, cut into its function objects).
pub(crate) const STREAM_MIN: u64 = 8 << 20;

/// `nvdisasm -json` listings are streamed from this size: reading one whole costs more than
/// cutting it into function objects (a 7.6 MB listing, medians of 3: 0.32 s whole, 0.14 s
/// streamed), and the findings are the same either way.
pub(crate) const JSON_STREAM_MIN: u64 = 1 << 20;

/// The sizes from which text and JSON listings are streamed: [`STREAM_MIN`] and
/// [`JSON_STREAM_MIN`], or both `FENCELINT_STREAM_MIN` (bytes), for tests and measurements.
pub(crate) fn thresholds() -> (u64, u64) {
    match std::env::var("FENCELINT_STREAM_MIN").ok().and_then(|v| v.parse().ok()) {
        Some(min) => (min, min),
        None => (STREAM_MIN, JSON_STREAM_MIN),
    }
}

/// Whether the file at `path` is a SASS listing to stream.
pub(crate) fn should_stream(path: &std::path::Path) -> bool {
    use std::io::Read;
    let Ok(meta) = std::fs::metadata(path) else { return false };
    let (min, json_min) = thresholds();
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
    /// The architectures the listing's functions were compiled for, in the order first met.
    pub archs: Vec<fencelint_sass::Arch>,
    /// The calls that name no callee (`fencelint_linter::LintOutput::unnamed_calls`).
    pub unnamed_calls: UnnamedCalls,
}

/// Adds `arch` to `archs` unless it is there.
fn note_arch(archs: &mut Vec<fencelint_sass::Arch>, arch: Option<fencelint_sass::Arch>) {
    if let Some(arch) = arch
        && !archs.contains(&arch)
    {
        archs.push(arch);
    }
}

/// What the workers of one listing found: the number of functions, and the excerpts of those
/// with findings under their index in the file.
#[derive(Default)]
struct Found {
    functions: AtomicUsize,
    excerpts: Mutex<Vec<(usize, Excerpted)>>,
    /// The functions that call others by name, with those names ([`follow_calls`]).
    calls: Mutex<Vec<Caller>>,
    /// The functions with no instruction that touches memory other threads see or orders it
    /// (`fencelint_linter::LintOutput::shares_memory`): calls of them are not followed.
    private: Mutex<Vec<usize>>,
    unnamed_calls: Mutex<UnnamedCalls>,
}

impl Found {
    /// Records that function `index` touches no memory other threads see and orders none.
    fn private(&self, index: usize) {
        self.private.lock().unwrap_or_else(PoisonError::into_inner).push(index);
    }

    /// Records the linting of function `index`: its result, or the `internal-error` for
    /// `function` at `at` when it panicked.
    fn add(
        &self,
        index: usize,
        result: std::thread::Result<(usize, Option<Excerpted>, UnnamedCalls)>,
        function: &str,
        at: Excerpt,
    ) {
        let (n, excerpt, unnamed) =
            result.unwrap_or_else(|_| (0, Some(crashed(function, at)), UnnamedCalls::default()));
        self.functions.fetch_add(n, Ordering::Relaxed);
        if unnamed.calls > 0 {
            self.unnamed_calls.lock().unwrap_or_else(PoisonError::into_inner).add(unnamed);
        }
        if let Some(excerpt) = excerpt {
            let mut excerpts =
                self.excerpts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            excerpts.push((index, excerpt));
        }
    }

    /// The output, findings in file order.
    fn into_output(
        self,
        error: Option<(u64, String)>,
        archs: Vec<fencelint_sass::Arch>,
    ) -> StreamOutput {
        let mut excerpts =
            self.excerpts.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
        excerpts.sort_by_key(|(index, _)| *index);
        StreamOutput {
            findings: excerpts.into_iter().map(|(_, excerpt)| excerpt).collect(),
            functions: self.functions.into_inner(),
            error,
            archs,
            unnamed_calls: self.unnamed_calls.into_inner().unwrap_or_else(PoisonError::into_inner),
        }
    }
}

/// Lints the SASS text listing that `reader` yields on `workers` threads besides the reading
/// one. Functions are not held once linted, except those that a call by name may need again
/// ([`Keep`]): a caller whose callees were read and kept before it is linted with them at once
/// ([`Seen`], [`Keep::link_early`]); once all are linted, the other callers are linted again
/// with what they call ([`follow_calls`]).
pub(crate) fn lint_listing<R: BufRead>(
    reader: R,
    settings: &Settings,
    workers: usize,
) -> StreamOutput {
    let (sender, receiver) =
        sync_channel::<(usize, SassChunk, Reserved, Option<Early>)>(workers * 4);
    let receiver = Mutex::new(receiver);
    // Texts go back to the splitter once linted, to be read into again.
    let (recycle, recycled) = channel::<String>();
    let found = Found::default();
    let keep = Keep::new(kept_from_pipe());
    let mut seen = Seen::default();
    let mut error = None;
    let mut offset = 0;
    let mut archs = Vec::new();
    std::thread::scope(|scope| {
        let (receiver, found, keep) = (&receiver, &found, &keep);
        for _ in 0..workers.max(1) {
            let recycle = recycle.clone();
            scope.spawn(move || {
                loop {
                    let next =
                        receiver.lock().unwrap_or_else(std::sync::PoisonError::into_inner).recv();
                    let Ok((index, chunk, reserved, early)) = next else { break };
                    // A panic outside the rules (which the linter already guards) must neither
                    // stop this worker, which would leave the reader blocked on a full channel,
                    // nor pass silently.
                    let at = Excerpt {
                        line: u32::try_from(chunk.line).unwrap_or(u32::MAX),
                        column: u32::try_from(chunk.column).unwrap_or(u32::MAX),
                        offset: chunk.offset,
                    };
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let mut alone = lint_chunk(&chunk, settings);
                        // A caller whose callees were read before it: linted with them now.
                        let link = early.as_ref().map(|e| keep.link_early(&chunk, e, settings));
                        // Whether it was linked, and what linting it alone gave if the link
                        // replaced that.
                        let replaced = match link {
                            Some(EarlyLink::Linked(excerpt)) => {
                                Some(Some(std::mem::replace(&mut alone.excerpt, excerpt)))
                            }
                            Some(EarlyLink::Alone) => Some(None),
                            Some(EarlyLink::Failed) | None => None,
                        };
                        let linked = replaced.zip(early).map(|(replaced, early)| {
                            // Kept only while a name is pending ([`LinkedEarly::replaced`]).
                            let replaced = replaced.filter(|_| !early.pending.is_empty());
                            LinkedEarly {
                                pending: early.pending,
                                replaced: replaced.is_some(),
                                alone: replaced.flatten(),
                            }
                        });
                        (alone, linked)
                    }));
                    let function = chunk.function.clone();
                    let result = match result {
                        Ok((linted, early_link)) => {
                            if !linted.shares {
                                found.private(index);
                            }
                            let offered = (index, chunk, reserved);
                            let (calls, shares) = (linted.calls, linted.shares);
                            let calls = (calls, early_link);
                            let text = keep.offer(offered, at, calls, shares, found);
                            if let Some(text) = text {
                                let _ = recycle.send(text);
                            }
                            Ok((linted.functions, linted.excerpt, linted.unnamed_calls))
                        }
                        Err(panic) => {
                            // Callers linked as they are read wait for no function that failed.
                            if reserved == Reserved::Kept {
                                keep.settle(index, None);
                            }
                            Err(panic)
                        }
                    };
                    found.add(index, result, &function, at);
                }
            });
        }
        drop(recycle);
        let mut splitter = FunctionSplitter::new(reader).with_target_lines();
        let mut index = 0;
        while let Some(chunk) = splitter.next() {
            index += 1;
            for text in recycled.try_iter() {
                splitter.recycle(text);
            }
            match chunk {
                Ok(chunk) => {
                    note_arch(&mut archs, chunk.arch);
                    offset =
                        chunk.offset + (chunk.text.len() as u64 - u64::from(chunk.target_line));
                    let (reserved, early) = seen.read(index, &chunk, keep);
                    if sender.send((index, chunk, reserved, early)).is_err() {
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
    let Keep { kept, left_out, .. } = keep;
    let mut kept = kept.into_inner().unwrap_or_else(PoisonError::into_inner);
    kept.sort_unstable_by_key(|(index, _)| *index);
    let left_out = left_out.into_inner().unwrap_or_else(PoisonError::into_inner);
    let views: Vec<Kept<'_>> = kept.iter().map(|(index, chunk)| kept_view(*index, chunk)).collect();
    let listing_len = usize::try_from(offset).unwrap_or(usize::MAX);
    let is_left_out = |key: &Key| left_out.contains(key);
    let budget = (listing_len, seen.spent);
    follow_calls(&views, budget, &|_| (), &is_left_out, &found, settings, workers);
    found.into_output(error, archs)
}

/// The functions of a listing streamed from a reader that [`follow_calls`] may read again,
/// kept as they are linted up to a budget of text: in nvdisasm text, those that are not kernels
/// (what a call can name) and those that call a function by name ([`Resolved::calls`]); in
/// nvdisasm JSON, which does not mark kernels, every function (cuobjdump's calls name no
/// callee). What is kept is decided on the reading thread, in file order, so that the same
/// input keeps the same functions however the workers run.
struct Keep {
    kept: Mutex<Vec<(usize, Arc<SassChunk>)>>,
    /// The keys of the functions that a call could name, that matter to their callers (they
    /// touch memory other threads see, or call others), and that were not kept.
    left_out: Mutex<std::collections::HashSet<Key>>,
    /// Bytes of text that may still be kept (written by the reading thread only).
    room: AtomicUsize,
    /// Each kept function once linted, by index, for the callers linked as they are read
    /// ([`Keep::link_early`]); `None` for one whose linting panicked.
    ready: Mutex<HashMap<usize, Option<Arc<SassChunk>>>>,
    readied: Condvar,
    /// What linting each kept function alone gives, for the callers linked as they are read.
    alone: Mutex<HashMap<usize, Arc<OnceLock<fencelint_linter::LintOutput>>>>,
}

/// What [`Keep::reserve`] decided for a function.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reserved {
    /// A kernel of nvdisasm text that calls no function by name, cuobjdump text (whose calls
    /// name no callee), or text with bytes that were not UTF-8 (replaced, so no longer at the
    /// file's offsets).
    NotWanted,
    Kept,
    /// Wanted, but the budget was spent; `callable` when it is not a kernel (a call may name
    /// it).
    NoRoom {
        callable: bool,
    },
}

impl Keep {
    fn new(budget: usize) -> Self {
        Self {
            kept: Mutex::default(),
            left_out: Mutex::default(),
            room: AtomicUsize::new(budget),
            ready: Mutex::default(),
            readied: Condvar::new(),
            alone: Mutex::default(),
        }
    }

    /// On the reading thread, in file order: whether to keep `chunk` once it is linted, as a
    /// function a call may name or as a caller (`calls`: it calls a function worth following,
    /// and is not linked with its callees as it is read, [`Seen::read`]).
    fn reserve(&self, chunk: &SassChunk, calls: bool) -> Reserved {
        let own = &chunk.text[chunk.target_line as usize..];
        let callable = match chunk.format {
            SassFormat::NvdisasmText => !is_kernel_text(own),
            // JSON does not tell kernels from the functions they call.
            SassFormat::NvdisasmJson => true,
            SassFormat::CuobjdumpText => false,
        };
        let wanted = chunk.invalid_utf8.is_none()
            && chunk.format != SassFormat::CuobjdumpText
            && (callable || calls);
        if !wanted {
            return Reserved::NotWanted;
        }
        let room = self.room.load(Ordering::Relaxed);
        match room.checked_sub(own.len()) {
            Some(left) => {
                self.room.store(left, Ordering::Relaxed);
                Reserved::Kept
            }
            None => Reserved::NoRoom { callable },
        }
    }

    /// Keeps the function `index` if it was reserved; records its calls in `found`, and
    /// whether it was linked with its callees already. Gives back the text when it was not
    /// kept.
    /// `at` is where the function starts in the listing.
    fn offer(
        &self,
        (index, chunk, reserved): (usize, SassChunk, Reserved),
        at: Excerpt,
        (calls, linked): (Vec<String>, Option<LinkedEarly>),
        shares: bool,
        found: &Found,
    ) -> Option<String> {
        let calls_others = !calls.is_empty();
        if calls_others {
            let unkept = (reserved != Reserved::Kept).then(|| Unkept {
                function: chunk.function.clone(),
                base: at,
                arch: chunk.arch,
                binary: chunk.binary.clone(),
            });
            let caller = Caller { index, names: calls, unkept, linked };
            found.calls.lock().unwrap_or_else(PoisonError::into_inner).push(caller);
        }
        match reserved {
            Reserved::Kept => {
                // A text read into a recycled buffer has the capacity of the largest function
                // read into it before: only the text is kept.
                let mut chunk = chunk;
                chunk.text.shrink_to_fit();
                let chunk = Arc::new(chunk);
                self.settle(index, Some(Arc::clone(&chunk)));
                self.kept.lock().unwrap_or_else(PoisonError::into_inner).push((index, chunk));
                None
            }
            Reserved::NoRoom { callable: true } if shares || calls_others => {
                let key = (chunk.function.clone(), chunk.arch, chunk.binary.clone());
                self.left_out.lock().unwrap_or_else(PoisonError::into_inner).insert(key);
                Some(chunk.text)
            }
            _ => Some(chunk.text),
        }
    }

    /// Makes the kept function `index` (or that it failed, `None`) known to the callers
    /// linked as they are read, which may wait for it.
    fn settle(&self, index: usize, chunk: Option<Arc<SassChunk>>) {
        self.ready.lock().unwrap_or_else(PoisonError::into_inner).insert(index, chunk);
        self.readied.notify_all();
    }

    /// Lints `caller` with the functions it calls, all read before it and kept
    /// ([`Seen::read`]), once they are linted: what [`follow_calls`] would give it.
    fn link_early(&self, caller: &SassChunk, early: &Early, settings: &Settings) -> EarlyLink {
        // The callees were read before the caller, so some worker has them or is done with
        // them; one that waits here waits only for functions read before its own.
        let callees: HashMap<usize, Arc<SassChunk>> = {
            let mut ready = self.ready.lock().unwrap_or_else(PoisonError::into_inner);
            while !early.calls.keys().all(|k| ready.contains_key(k)) {
                ready = self.readied.wait(ready).unwrap_or_else(PoisonError::into_inner);
            }
            let found = early.calls.keys().map(|&k| Some((k, Arc::clone(ready[&k].as_ref()?))));
            match found.collect::<Option<_>>() {
                Some(callees) => callees,
                None => return EarlyLink::Failed,
            }
        };
        let alone = |k: usize| -> Arc<OnceLock<fencelint_linter::LintOutput>> {
            let mut alone = self.alone.lock().unwrap_or_else(PoisonError::into_inner);
            Arc::clone(alone.entry(k).or_default())
        };
        let outputs: HashMap<usize, Arc<OnceLock<fencelint_linter::LintOutput>>> =
            callees.keys().map(|&k| (k, alone(k))).collect();
        let alone_of = |k: usize| -> &fencelint_linter::LintOutput {
            outputs[&k].get_or_init(|| kept_view(k, &callees[&k]).lint_alone(settings))
        };
        // As [`follow_calls`]: a callee that neither touches memory other threads see, nor
        // orders it, nor calls another function is not followed.
        let private = |k: usize| !linking::matters_to_callers(alone_of(k));
        let calls_of = |k: usize| early.calls.get(&k).map_or(&[][..], Vec::as_slice);
        let size = |k: usize| {
            let chunk = &callees[&k];
            chunk.text.len() - chunk.target_line as usize
        };
        let closure =
            linking::closure(usize::MAX, early.direct.iter().copied(), calls_of, size, |k| {
                !private(k)
            });
        if closure.is_empty() {
            return EarlyLink::Alone;
        }
        let mut views = vec![kept_view(0, caller)];
        views.extend(closure.iter().map(|&k| kept_view(k, &callees[&k])));
        let parts: Vec<usize> = (0..views.len()).collect();
        EarlyLink::Linked(linked(&views, &parts, settings, |at| alone_of(closure[at - 1])))
    }
}

/// How much of its functions' text a listing read from a pipe keeps to lint them again
/// ([`Keep`]): [`linking::budget`] of nothing, 64 MiB, or `FENCELINT_PIPE_KEEP` (bytes), for
/// tests and measurements.
fn kept_from_pipe() -> usize {
    std::env::var("FENCELINT_PIPE_KEEP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| linking::budget(0))
}

/// A kept function of a listing read from a pipe, as [`follow_calls`] reads it.
fn kept_view(index: usize, chunk: &SassChunk) -> Kept<'_> {
    Kept {
        index,
        source: &chunk.text,
        range: chunk.target_line as usize..chunk.text.len(),
        function: &chunk.function,
        arch: chunk.arch,
        binary: chunk.binary.as_deref(),
        format: chunk.format,
        line: chunk.line,
        column: chunk.column,
        offset: chunk.offset,
    }
}

/// A caller linted with the functions it calls as soon as it is read ([`Keep::link_early`]):
/// those it calls, and for each function of its closure, those that function calls (indices
/// of the listing's functions, all kept).
struct Early {
    direct: Vec<usize>,
    calls: HashMap<usize, Vec<usize>>,
    /// The names it calls that no function read before it has (in this architecture and
    /// binary): the link stands only if none of them names a function that changes what the
    /// caller shows, which [`follow_calls`] finds out once the whole listing is read.
    pending: Vec<String>,
}

/// What [`Keep::link_early`] did with a caller.
enum EarlyLink {
    /// Linted with its callees: its findings (`None` when it has none) replace those of
    /// linting it alone.
    Linked(Option<Excerpted>),
    /// It calls only functions that cannot change what it shows: what linting it alone gave
    /// stands, as in [`follow_calls`].
    Alone,
    /// A function it calls failed to lint: it keeps what linting it alone gave, and
    /// [`follow_calls`] sees it as any other caller.
    Failed,
}

/// On the reading thread, in file order: the kept functions that a call may name, so that a
/// function whose calls name only functions read before it (and theirs too) is linted with
/// them as soon as it is read, without keeping its text to lint it again at the end. A listing
/// read from a pipe keeps 64 MiB of text: NCCL's `sm_80` listing has 200 MB of functions that
/// call `__cuda_sm70_warpsync` and the like, which come first; kept for the end, the last 425
/// of them were not followed. Decided here, on what was kept before, so that the same input
/// gives the same output however the workers run.
#[derive(Default)]
struct Seen {
    /// The kept function that a key names (the last one read).
    by_key: HashMap<Key, usize>,
    /// Each kept function's text size, the kept functions its calls name, and whether each
    /// of its calls worth following names one whose calls do too.
    known: HashMap<usize, (usize, Vec<usize>, bool)>,
    /// The text read so far, and the text linted again in callers' closures so far: at most
    /// [`linking::budget`] of the text read, as [`follow_calls`] allows of a whole listing
    /// (which gets what is left).
    read: usize,
    spent: usize,
}

/// What a function's calls by name name among the functions kept before it ([`Seen::resolve`]).
struct Resolved {
    /// The kept functions its calls name.
    direct: Vec<usize>,
    /// Whether each of `direct` calls, in turn, only functions kept before it, which do too.
    direct_complete: bool,
    /// Its calls worth following that name no function kept before it: functions that come
    /// later (the compiler's numbered helper copies often do), or none of the listing.
    pending: Vec<String>,
    /// Whether it makes a call worth following ([`linking::worth_following`]): keeping NCCL's
    /// kernels for their calls of `__assertfail` and of the 64-bit division helpers filled the
    /// budget.
    calls: bool,
}

impl Resolved {
    /// Whether each of its calls worth following names a function kept before it whose calls
    /// do too.
    fn complete(&self) -> bool {
        self.direct_complete && self.pending.is_empty()
    }
}

impl Seen {
    /// On the reading thread, in file order: reads function `index` once, for all that is
    /// decided about it here. Whether it is linked with its callees at once ([`Early`]) and
    /// whether it is kept ([`Keep::reserve`]); a kept one is recorded for the functions after
    /// it.
    fn read(&mut self, index: usize, chunk: &SassChunk, keep: &Keep) -> (Reserved, Option<Early>) {
        let own = &chunk.text[chunk.target_line as usize..];
        self.read += own.len();
        let text = chunk.format == SassFormat::NvdisasmText && chunk.invalid_utf8.is_none();
        let resolved = text.then(|| self.resolve(own, chunk.arch, chunk.binary.as_ref()));
        let early = resolved.as_ref().and_then(|r| self.early(own.len(), r));
        // A caller linked at once is not linted again, unless a name it calls was not read yet:
        // otherwise kept only if a call may name it.
        let again = early.as_ref().is_none_or(|e| !e.pending.is_empty());
        let calls = again && resolved.as_ref().is_some_and(|r| r.calls);
        let reserved = keep.reserve(chunk, calls);
        if let (Reserved::Kept, Some(resolved)) = (reserved, resolved) {
            let complete = resolved.complete();
            self.known.insert(index, (own.len(), resolved.direct, complete));
            let key = (chunk.function.clone(), chunk.arch, chunk.binary.clone());
            self.by_key.insert(key, index);
        }
        (reserved, early)
    }

    /// What the calls by name of the text `own` (of a function of `arch` and `binary`) name
    /// among the functions kept before it.
    fn resolve(
        &self,
        own: &str,
        arch: Option<fencelint_sass::Arch>,
        binary: Option<&String>,
    ) -> Resolved {
        let mut names: Vec<&str> = linking::named_calls(own).collect();
        names.sort_unstable();
        names.dedup();
        let mut resolved = Resolved {
            direct: Vec::new(),
            direct_complete: true,
            pending: Vec::new(),
            calls: false,
        };
        for name in names {
            let following = linking::worth_following(name);
            resolved.calls |= following;
            match self.by_key.get(&(name.to_owned(), arch, binary.cloned())) {
                Some(&k) => {
                    resolved.direct.push(k);
                    resolved.direct_complete &= self.known[&k].2;
                }
                None if following => resolved.pending.push(name.to_owned()),
                None => {}
            }
        }
        resolved
    }

    /// Whether a function of `own` bytes whose calls are `resolved` is linked with its callees
    /// at once, and with which: when what it calls among the functions kept before it calls
    /// only such functions too, and the budget allows. Calls of names not read yet are left
    /// pending ([`Early::pending`]).
    fn early(&mut self, own: usize, resolved: &Resolved) -> Option<Early> {
        if !resolved.direct_complete || !resolved.calls || resolved.direct.is_empty() {
            return None;
        }
        let calls_of = |k: usize| self.known[&k].1.as_slice();
        let size = |k: usize| self.known[&k].0;
        let direct = resolved.direct.iter().copied();
        let closure = linking::closure(usize::MAX, direct, calls_of, size, |_| true);
        // The caller is linted alone and again with its callees, as in [`follow_calls`].
        let cost = own + closure.iter().map(|&k| size(k)).sum::<usize>();
        if self.spent + cost > linking::budget(self.read) {
            return None;
        }
        self.spent += cost;
        let calls = closure.iter().map(|&k| (k, self.known[&k].1.clone())).collect();
        let pending = resolved.pending.clone();
        Some(Early { direct: resolved.direct.clone(), calls, pending })
    }
}

/// Whether a function of an nvdisasm text listing is a kernel: its header, before the first
/// instruction, says `STO_CUDA_ENTRY` (as `fencelint_lower` reads it).
fn is_kernel_text(text: &str) -> bool {
    let header = memchr::memmem::find(text.as_bytes(), b"/*").map_or(text, |end| &text[..end]);
    header.contains("STO_CUDA_ENTRY")
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
    // Every function cut, in file order: those that call others by name are linted again with
    // them once all are linted alone ([`follow_calls`]).
    let mut cut_out: Vec<fencelint_sass::TextChunk<'_>> = Vec::new();
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
                        let linted = lint_text_chunk(&chunk, at, settings);
                        if !linted.calls.is_empty() {
                            let names = linted.calls;
                            let caller = Caller { index, names, unkept: None, linked: None };
                            found.calls.lock().unwrap_or_else(PoisonError::into_inner).push(caller);
                        }
                        if !linted.shares {
                            found.private(index);
                        }
                        (linted.functions, linted.excerpt, linted.unnamed_calls)
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
            cut_out.push(chunk);
            sender.send((index - 1, chunk)).is_ok()
        });
        if cut.is_none() {
            abandoned.store(true, Ordering::Relaxed);
        }
        drop(sender);
        cut
    });
    cut?;
    let kept: Vec<Kept<'_>> = cut_out
        .iter()
        .enumerate()
        .map(|(index, chunk)| Kept {
            index,
            source: chunk.input,
            range: chunk.range.to_usize(),
            function: chunk.function,
            arch: chunk.arch,
            binary: chunk.binary,
            format: chunk.format,
            line: chunk.line,
            column: 0,
            offset: u64::from(chunk.range.start),
        })
        .collect();
    let release_kept = |p: usize| release(cut_out[p].range.to_usize());
    let left_out = |_: &Key| false;
    let budget = (bytes.len(), 0);
    follow_calls(&kept, budget, &release_kept, &left_out, &found, settings, workers);
    let mut archs = Vec::new();
    for chunk in &cut_out {
        note_arch(&mut archs, chunk.arch);
    }
    Some(found.into_output(None, archs))
}

/// The first file id of the marks that [`follow_calls`] puts on labels: `MARK - k` for the
/// `k`-th function a finding's labels point into.
const MARK: u32 = u32::MAX - 2;

/// A function of a listing as [`follow_calls`] reads it again: from the map, or the text that
/// [`lint_listing`] kept.
#[derive(Clone)]
struct Kept<'a> {
    /// The function's place in the listing (the index its findings are kept under).
    index: usize,
    /// The function's own text (no `.target` line in front) is `source[range]`, cut only when
    /// it is read: cutting a `&str` reads the bytes at both ends, and doing that for every
    /// function of a mapped listing up front mapped 620 MB of NCCL's 1.8 GB listing again.
    source: &'a str,
    range: std::ops::Range<usize>,
    function: &'a str,
    arch: Option<fencelint_sass::Arch>,
    binary: Option<&'a str>,
    format: SassFormat,
    /// The 0-based line, character column and byte offset of the listing where `text` starts
    /// (the column is 0 but for a JSON function object).
    line: u64,
    column: u64,
    offset: u64,
}

impl<'a> Kept<'a> {
    fn text(&self) -> &'a str {
        &self.source[self.range.clone()]
    }

    fn base(&self) -> Excerpt {
        Excerpt {
            line: u32::try_from(self.line).unwrap_or(u32::MAX),
            column: u32::try_from(self.column).unwrap_or(u32::MAX),
            offset: self.offset,
        }
    }

    /// Lints the function alone, as the worker that cut it did.
    fn lint_alone(&self, settings: &Settings) -> fencelint_linter::LintOutput {
        lint_function(self.text(), self.format, self.arch, settings)
    }
}

/// A function that calls others by name, as a worker found it: its place in the listing and
/// the names it calls.
struct Caller {
    index: usize,
    names: Vec<String>,
    /// For a function whose text [`lint_listing`] did not keep (the mapped path keeps every
    /// function): what [`follow_calls`] says about it.
    unkept: Option<Unkept>,
    /// Linted with its callees already, as it was read ([`Keep::link_early`]): not linted
    /// again unless a name it calls that was not read then names a function that changes what
    /// it shows, but the functions that call it follow its calls.
    linked: Option<LinkedEarly>,
}

/// A caller linked with its callees as it was read ([`Keep::link_early`]).
struct LinkedEarly {
    /// The names it calls that were not read yet ([`Early::pending`]).
    pending: Vec<String>,
    /// Whether the link's findings replaced those of linting it alone while names are
    /// pending: if one of them names a function that matters and the caller is not linted
    /// again with it, those of linting it alone (`alone`) are its findings again, as when it
    /// is not linked at all.
    replaced: bool,
    alone: Option<Excerpted>,
}

/// A function that calls others by name and whose text was not kept.
struct Unkept {
    function: String,
    /// Where it starts in the listing.
    base: Excerpt,
    arch: Option<fencelint_sass::Arch>,
    binary: Option<String>,
}

/// What identifies a function that a call names: its name, architecture and fat-binary entry.
type Key = (String, Option<fencelint_sass::Arch>, Option<String>);

/// Lints each function of a listing that calls others by name again, together with the
/// functions it calls, directly or not, so that the calls are followed into their code
/// (`fencelint_lower`'s linking of named calls, [`linking`]); its findings then replace those
/// of linting it alone. As for a large cubin ([`super::binary`]), a function keeps the findings
/// in its own code and those that the callees' code makes in its context; a finding in a
/// callee's code that the callee shows alone is left to the callee. A callee is looked for
/// among the functions of the same cubin (architecture and fat-binary entry), the nearest in
/// the file first.
///
/// `kept` are the functions whose text can be read again, in listing order; `release(p)` gives
/// back what reading `kept[p]` mapped. `left_out(key)` says whether the listing has a function
/// of that key that is not among `kept` (a streamed listing keeps callable functions up to a
/// budget): a caller that names one is not linted again and says so, as is a caller whose own
/// text was not kept.
fn follow_calls(
    kept: &[Kept<'_>],
    (budget_of_listing, spent): (usize, usize),
    release: &(dyn Fn(usize) + Sync),
    left_out: &dyn Fn(&Key) -> bool,
    found: &Found,
    settings: &Settings,
    workers: usize,
) {
    let calls = std::mem::take(&mut *found.calls.lock().unwrap_or_else(PoisonError::into_inner));
    if calls.is_empty() {
        return;
    }
    // Every function's name, copied: reading it in the map maps its page again (and the pages
    // around it), so each is given back at once; else the names of NCCL's 905 functions kept
    // 320 MB of its 476 MB nvdisasm listing mapped to the end.
    let key = |piece: &Kept<'_>| -> Key {
        (piece.function.to_owned(), piece.arch, piece.binary.map(str::to_owned))
    };
    let mut by_name: HashMap<Key, Vec<usize>> = HashMap::new();
    let mut keys: Vec<Key> = Vec::with_capacity(kept.len());
    for (p, piece) in kept.iter().enumerate() {
        keys.push(key(piece));
        release(p);
        by_name.entry(keys[p].clone()).or_default().push(p);
    }
    let position = |index: usize| kept.binary_search_by_key(&index, |piece| piece.index).ok();
    // The functions that neither touch memory other threads see, nor order it, nor call
    // others by name, by index.
    let calling: std::collections::HashSet<usize> = calls.iter().map(|c| c.index).collect();
    let mut private =
        std::mem::take(&mut *found.private.lock().unwrap_or_else(PoisonError::into_inner));
    private.retain(|index| !calling.contains(index));
    private.sort_unstable();
    let budget = linking::budget(budget_of_listing);
    // The callers that are not linted again with all they call (the budget ran out, or a
    // function they call, directly or not, was not kept), each with where it starts.
    let mut incomplete: Vec<(usize, String, Excerpt, NotFollowed)> = Vec::new();
    // What a listing read from a pipe keeps of its text ([`Keep`]); a mapped one keeps all.
    let kept_text = kept_from_pipe();
    let mut callees: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    // Kept callers that name a function that was not kept: neither they nor those that call
    // them are linted again.
    let mut names_left_out: std::collections::HashSet<usize> = std::collections::HashSet::new();
    // Callers linked with their callees as they were read ([`Keep::link_early`]), by position:
    // the closures of those that call them still go through them.
    let mut linked_early: std::collections::HashSet<usize> = std::collections::HashSet::new();
    // Whether a function of that key may change what its callers show: one that touches memory
    // other threads see, orders it or calls others, or one that was not kept.
    let matters = |k: &Key| {
        left_out(k)
            || by_name.get(k).is_some_and(|found| {
                found.iter().any(|&p| private.binary_search(&kept[p].index).is_err())
            })
    };
    // Callers linked as they were read whose link does not stand (a name not read then
    // matters), with what linting them alone gave: theirs again unless linted again below.
    let mut fall_back: Vec<(usize, Option<Excerpted>)> = Vec::new();
    for caller in calls {
        let (arch, binary) = match position(caller.index) {
            Some(p) => (keys[p].1, keys[p].2.clone()),
            None => match &caller.unkept {
                Some(unkept) => (unkept.arch, unkept.binary.clone()),
                None => continue,
            },
        };
        let key = |name: &str| (name.to_owned(), arch, binary.clone());
        // A caller linked as it was read stands unless a name that was not read then names a
        // function that matters.
        let stands = match caller.linked {
            Some(linked) if linked.pending.iter().any(|name| matters(&key(name))) => {
                if linked.replaced {
                    fall_back.push((caller.index, linked.alone));
                }
                false
            }
            Some(_) => true,
            None => false,
        };
        let Some(p) = position(caller.index) else {
            // Not kept: it is left out only if it names a function of the listing that could
            // change what it shows.
            let Some(unkept) = caller.unkept.filter(|_| !stands) else { continue };
            if caller.names.iter().any(|name| matters(&key(name))) {
                let why = NotFollowed::CallerNotKept(kept_text);
                incomplete.push((caller.index, unkept.function, unkept.base, why));
            }
            continue;
        };
        if stands {
            linked_early.insert(p);
        }
        let mut missing = false;
        let resolved: Vec<usize> = caller
            .names
            .iter()
            .filter_map(|name| {
                let key = key(name);
                missing |= left_out(&key);
                let found = by_name.get(&key)?;
                found.iter().copied().filter(|&k| k != p).min_by_key(|&k| k.abs_diff(p))
            })
            .collect();
        if missing {
            names_left_out.insert(p);
        }
        if !resolved.is_empty() {
            callees.insert(p, resolved);
        }
    }
    // A callee that neither touches memory other threads see, nor orders, nor calls another
    // function (`__cuda_sm20_rem_u64`, the arithmetic helpers every large listing calls) cannot
    // change what its callers show: its callers are not linted again for it.
    let private: Vec<usize> = private.into_iter().filter_map(position).collect();
    for resolved in callees.values_mut() {
        resolved.retain(|k| private.binary_search(k).is_err());
    }
    callees.retain(|_, resolved| !resolved.is_empty());
    // A caller that names a function that was not kept and nothing else to follow.
    let mut alone_left_out: Vec<usize> = names_left_out
        .iter()
        .copied()
        .filter(|p| !callees.contains_key(p) && !linked_early.contains(p))
        .collect();
    alone_left_out.sort_unstable();
    for p in alone_left_out {
        let why = NotFollowed::CalleeNotKept(kept_text);
        incomplete.push((kept[p].index, kept[p].function.to_owned(), kept[p].base(), why));
    }
    // Each caller with what it calls, directly or not, in file order, as long as the listing's
    // budget lasts: the functions of a chain of calls would otherwise each be linted with all
    // those after them (2,000 small functions calling one another, 1.1 MB of listing: 34 s).
    let calls_of = |k: usize| callees.get(&k).map_or(&[][..], Vec::as_slice);
    let size = |k: usize| kept[k].range.len();
    // Less what linting callers with their callees as they were read took.
    let mut left = budget.saturating_sub(spent);
    let mut planned: Vec<Vec<usize>> = Vec::new();
    for &caller in callees.keys().filter(|p| !linked_early.contains(p)) {
        let closure =
            linking::closure(caller, calls_of(caller).iter().copied(), calls_of, size, |_| true);
        let parts: Vec<usize> = std::iter::once(caller).chain(closure).collect();
        let cost: usize = parts.iter().map(|&k| size(k)).sum();
        let callee_not_kept = parts.iter().any(|k| names_left_out.contains(k));
        if cost <= left && !callee_not_kept {
            left -= cost;
            planned.push(parts);
        } else {
            let why = if callee_not_kept {
                NotFollowed::CalleeNotKept(kept_text)
            } else {
                NotFollowed::Budget(budget)
            };
            let caller = &kept[caller];
            incomplete.push((caller.index, caller.function.to_owned(), caller.base(), why));
        }
    }
    let mut linked_again: Vec<usize> = planned.iter().map(|parts| kept[parts[0]].index).collect();
    linked_again.sort_unstable();
    // What each callee gives alone, once, to tell its own findings from a caller's.
    let alone: HashMap<usize, OnceLock<fencelint_linter::LintOutput>> =
        callees.values().flatten().map(|&k| (k, OnceLock::new())).collect();
    let alone_of = |k: usize| alone[&k].get_or_init(|| kept[k].lint_alone(settings));
    let next = AtomicUsize::new(0);
    let relinted: Mutex<Vec<(usize, Excerpted)>> = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for _ in 0..workers.max(1).min(planned.len()) {
            scope.spawn(|| {
                while let Some(parts) = planned.get(next.fetch_add(1, Ordering::Relaxed)) {
                    let caller = &kept[parts[0]];
                    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        linked(kept, parts, settings, alone_of)
                    }));
                    // Read from the map again: given back again (docs/performance.md).
                    for &k in parts {
                        release(k);
                    }
                    let excerpt =
                        result.unwrap_or_else(|_| Some(crashed(caller.function, caller.base())));
                    if let Some(excerpt) = excerpt {
                        let mut relinted = relinted.lock().unwrap_or_else(PoisonError::into_inner);
                        relinted.push((caller.index, excerpt));
                    }
                }
            });
        }
    });
    // The callers' findings replace those of linting them alone (`linked_again` is sorted).
    let mut excerpts = found.excerpts.lock().unwrap_or_else(PoisonError::into_inner);
    // Callers whose link as they were read did not stand and that were not linted again give
    // what they gave alone.
    fall_back.retain(|(index, _)| linked_again.binary_search(index).is_err());
    fall_back.sort_unstable_by_key(|(index, _)| *index);
    let replaced = |index: &usize| {
        linked_again.binary_search(index).is_ok()
            || fall_back.binary_search_by_key(index, |(at, _)| *at).is_ok()
    };
    excerpts.retain(|(index, _)| !replaced(index));
    excerpts.extend(relinted.into_inner().unwrap_or_else(PoisonError::into_inner));
    let alone = fall_back.into_iter().filter_map(|(index, alone)| Some((index, alone?)));
    excerpts.extend(alone);
    // The callers left out keep what linting them alone gave, and say so.
    let mut at_index: HashMap<usize, usize> =
        excerpts.iter().enumerate().map(|(at, (index, _))| (*index, at)).collect();
    for (index, function, base, why) in incomplete {
        let mut diagnostics = [linking::calls_not_followed(&function, why, PLACEHOLDER)];
        let at = *at_index.entry(index).or_insert_with(|| {
            excerpts.push((index, Excerpted { snippets: Vec::new(), diagnostics: Vec::new() }));
            excerpts.len() - 1
        });
        let excerpt = &mut excerpts[at].1;
        // The label is at the function's first byte: its first line is cut out.
        let first_line = match position(index) {
            Some(p) => kept[p].text(),
            None => "",
        };
        snippets::cut_into(&mut excerpt.snippets, first_line, base, PLACEHOLDER, &mut diagnostics);
        excerpt.diagnostics.extend(diagnostics);
    }
}

/// A function of a listing linted with the functions it calls ([`follow_calls`]): `parts` are
/// the function and those, as indices into `kept`. Its findings, cut out of its text and the
/// callees' texts.
fn linked<'c>(
    kept: &[Kept<'_>],
    parts: &[usize],
    settings: &Settings,
    alone: impl Fn(usize) -> &'c fencelint_linter::LintOutput,
) -> Option<Excerpted> {
    let caller = &kept[parts[0]];
    let texts: Vec<&str> = parts.iter().map(|&k| kept[k].text()).collect();
    let names: Vec<&str> = parts.iter().map(|&k| kept[k].function).collect();
    let kind = InputKind::Sass(caller.format);
    // JSON objects go into a document whose metadata names the architecture, as nvdisasm's
    // `tki_toolOptions` does.
    let metadata = match caller.arch {
        Some(arch) => format!(r#"{{".note.nv.tkinfo":{{"tki_toolOptions":"-arch {arch}"}}}}"#),
        None => "{}".to_owned(),
    };
    let joined = match caller.format {
        SassFormat::NvdisasmJson => linking::Joined::JsonObjects { metadata: &metadata },
        _ => linking::Joined::Lines,
    };
    let lint = |text: &str| {
        fencelint_linter::lint_split_function(
            PLACEHOLDER,
            text,
            kind,
            Split::Caller(caller.arch),
            settings,
            None,
        )
    };
    let keep = |own: usize, at: usize, place: TextRange, diagnostic: &Diagnostic| {
        own == 0
            && (at == 0 || !linking::shows_alone(alone(parts[at]), PLACEHOLDER, place, diagnostic))
    };
    let mut together = linking::lint_together(&texts, &names, joined, PLACEHOLDER, lint, keep);
    let mut diagnostics = together.groups.remove(&0)?;
    // Each label onto the text of the function it points into, marked with that function's
    // place among those pointed into; then each text's lines are cut out with its own base.
    let mut pointed: Vec<usize> = Vec::new();
    for diagnostic in &mut diagnostics {
        let labels = std::iter::once(&mut diagnostic.primary).chain(&mut diagnostic.secondary);
        for label in labels.filter(|label| label.file == PLACEHOLDER) {
            let part = together.part_at(label.range.start);
            let slot = pointed.iter().position(|&p| p == part).unwrap_or_else(|| {
                pointed.push(part);
                pointed.len() - 1
            });
            label.range = together.relative(part, label.range);
            label.file = FileId(MARK - slot as u32);
        }
    }
    let mut snippets = Vec::new();
    for (slot, &part) in pointed.iter().enumerate() {
        let piece = &kept[parts[part]];
        let mark = FileId(MARK - slot as u32);
        snippets::cut_into(&mut snippets, piece.text(), piece.base(), mark, &mut diagnostics);
    }
    Some(Excerpted { snippets, diagnostics })
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
) -> Linted {
    let text = chunk.text();
    Linted::new(lint_function(text, chunk.format, chunk.arch, settings), text, at)
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

/// Lints the text of one function cut out of a listing whose architecture was named before it:
/// a function of a text listing, or a function object of an nvdisasm JSON listing. A JSON
/// object is not a document: it is parsed as such. JSON carries no suppression comments.
fn lint_function(
    text: &str,
    format: SassFormat,
    arch: Option<fencelint_sass::Arch>,
    settings: &Settings,
) -> fencelint_linter::LintOutput {
    if format != SassFormat::NvdisasmJson {
        let kind = InputKind::Sass(format);
        let split = Split::Function(arch);
        return fencelint_linter::lint_split_function(
            PLACEHOLDER,
            text,
            kind,
            split,
            settings,
            None,
        );
    }
    let parsed = fencelint_sass::parse_function_object(text, arch);
    let lowered = fencelint_lower::sass::lower_parsed(PLACEHOLDER, text, &parsed, 0);
    // The syntax tree is not needed once lowered: freed before the analyses allocate theirs.
    drop(parsed);
    fencelint_linter::lint_lowered(lowered, settings)
}

/// What linting one function of a listing cut into functions gave.
struct Linted {
    functions: usize,
    excerpt: Option<Excerpted>,
    /// The functions it calls by name that its text does not hold ([`follow_calls`]).
    calls: Vec<String>,
    /// Whether it touches memory other threads see or orders memory
    /// (`fencelint_linter::LintOutput::shares_memory`).
    shares: bool,
    unnamed_calls: UnnamedCalls,
}

impl Linted {
    /// What linting the function whose text is `text`, at `at` of the file, gave: its findings
    /// with the lines under their labels cut out.
    fn new(mut lint: fencelint_linter::LintOutput, text: &str, at: Excerpt) -> Self {
        let excerpt = (!lint.diagnostics.is_empty()).then(|| {
            let snippets = snippets::cut(text, at, PLACEHOLDER, &mut lint.diagnostics);
            Excerpted { snippets, diagnostics: lint.diagnostics }
        });
        Linted {
            functions: lint.functions,
            excerpt,
            calls: lint.external_calls,
            shares: lint.shares_memory,
            unnamed_calls: lint.unnamed_calls,
        }
    }
}

/// Lints one function. The splitter put a `.target` line in front of a function whose
/// architecture the stream named, on the line before the function's own first line, so that
/// lowering knows the architecture and every position still maps back to the file.
fn lint_chunk(chunk: &SassChunk, settings: &Settings) -> Linted {
    let prefix = u64::from(chunk.target_line);
    let base = Excerpt {
        line: u32::try_from(chunk.line.saturating_sub(u64::from(prefix > 0))).unwrap_or(u32::MAX),
        column: u32::try_from(chunk.column).unwrap_or(u32::MAX),
        offset: chunk.offset.saturating_sub(prefix),
    };
    let mut lint = if chunk.format == SassFormat::NvdisasmJson {
        lint_function(&chunk.text, chunk.format, chunk.arch, settings)
    } else {
        super::binary::lint_alone(chunk, settings, None)
    };
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
    Linted::new(lint, &chunk.text, base)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A function is kept as a caller for a call of another function by name only: not for a
    /// label, a subroutine of its own, a driver function or an arithmetic helper.
    #[test]
    fn only_calls_of_functions_of_the_listing_make_a_caller() {
        let call = |target: &str| format!("        /*0090*/   CALL.ABS.NOINC `({target}) ;\n");
        let calls_a_function = |text: &str| Seen::default().resolve(text, None, None).calls;
        for target in [
            ".L_x_3",
            "$k$__internal_helper",
            "__assertfail",
            "vprintf",
            "__cuda_sm20_div_u64__637",
        ] {
            assert!(!calls_a_function(&call(target)), "{target}");
        }
        for target in ["_Z12wait_relaxedPKj", "_Z21wait_relaxed_and_readPKjPKf$1"] {
            assert!(calls_a_function(&call(target)), "{target}");
        }
        let both = call("__assertfail") + &call("_Z12wait_relaxedPKj");
        assert!(calls_a_function(&both));
        assert!(!calls_a_function("        /*0090*/   CALL.REL.NOINC 0xe0 ;\n"));
    }

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

    /// Only a callee that touches memory other threads see, or orders memory, is followed
    /// ([`follow_calls`]): the flag that tells, for functions that touch only registers,
    /// constant, local (spills) or global memory, or that fence. (Hand-written nvdisasm text,
    /// four functions of a few instructions.)
    #[test]
    fn callees_without_shared_memory_are_not_followed() {
        let function = |name: &str, body: &str| {
            format!(
                "//--------------------- .text.{name} --------------------------\n\
                 \t.section\t.text.{name},\"ax\",@progbits\n\
                 .text.{name}:\n\
                 {name}:\n{body}\
                 \x20       /*0030*/                   RET.ABS.NODEC R20 0x0 ;\n\n"
            )
        };
        let listing = [
            function(
                "arithmetic",
                "        /*0000*/                   IMAD R4, R4, R5, RZ ;\n\
                 \x20       /*0010*/                   LDC R6, c[0x0][0x210] ;\n",
            ),
            function("spills", "        /*0000*/                   STL [R1+0x4], R4 ;\n"),
            function(
                "polls",
                "        /*0000*/                   LDG.E.STRONG.GPU R4, desc[UR4][R4.64] ;\n",
            ),
            function("orders", "        /*0000*/                   MEMBAR.SC.GPU ;\n"),
        ]
        .concat();
        let text = format!("\t.target\tsm_90a\n\n{listing}");
        let chunks = fencelint_sass::split_functions(&text);
        let settings = Settings::default();
        let shares: Vec<(&str, bool)> = chunks
            .iter()
            .map(|chunk| {
                (chunk.function, lint_text_chunk(chunk, Excerpt::default(), &settings).shares)
            })
            .collect();
        assert_eq!(
            shares,
            [("arithmetic", false), ("spills", false), ("polls", true), ("orders", true)]
        );
    }
}
