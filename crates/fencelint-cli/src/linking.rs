//! Following calls between functions that were cut apart: a cubin streamed function by function
//! ([`super::binary`]) and a listing file too large to read whole ([`super::stream`]) lint each
//! function alone, so a call of another function by name (nvdisasm prints
//! `` CALL.ABS.NOINC `(_Z12wait_relaxedPKj) `` in a `-rdc` build) falls through there. A
//! function that makes such calls is linted again together with the functions it calls,
//! directly or not ([`closure`]), so that `fencelint_lower` follows each call into a copy of the
//! callee's code; [`lint_together`] keeps the findings that belong to it.

use std::collections::{BTreeMap, HashMap, HashSet};

use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_linter::LintOutput;
use fencelint_source::{FileId, TextRange};

/// A function is linted with at most this much text of the functions it calls, directly or
/// not (the IR of the whole is held while it is linted: about five times its text).
pub(crate) const CLOSURE_MAX_TEXT: usize = 8 << 20;

/// The functions `direct` and those they call (`calls`), nearest first, without `caller`
/// itself and without those not worth following (`follows`), as many as [`CLOSURE_MAX_TEXT`]
/// of their text (`size`) allows.
pub(crate) fn closure<'c>(
    caller: usize,
    direct: impl Iterator<Item = usize>,
    calls: impl Fn(usize) -> &'c [usize],
    size: impl Fn(usize) -> usize,
    follows: impl Fn(usize) -> bool,
) -> Vec<usize> {
    let mut found: Vec<usize> = Vec::new();
    // Functions can be small: a closure of thousands of them must not be searched for each.
    let mut seen: HashSet<usize> = HashSet::new();
    let mut total = 0usize;
    let mut add = |k: usize, found: &mut Vec<usize>| {
        if k != caller && !seen.contains(&k) && total + size(k) <= CLOSURE_MAX_TEXT && follows(k) {
            seen.insert(k);
            total += size(k);
            found.push(k);
        }
    };
    for k in direct {
        add(k, &mut found);
    }
    let mut next = 0;
    while let Some(&k) = found.get(next) {
        for &callee in calls(k) {
            add(callee, &mut found);
        }
        next += 1;
    }
    found
}

/// Functions that the driver provides and a listing never holds: calls of them fall through.
const DRIVER_FUNCTIONS: &[&str] = &["__assertfail", "vprintf", "malloc", "free"];

/// The prefix of the compiler's arithmetic helpers (`__cuda_sm20_div_u64`,
/// `__cuda_sm20_rem_s64__1251`): functions that touch no memory other threads see and order
/// nothing.
const ARITHMETIC_HELPERS: &str = "__cuda_sm20_";

/// Whether a call of `name` is worth following into the callee: not a label or a subroutine of
/// the caller's own (`.L_x_3`, `$kernel$helper`), not a function the driver provides, not an
/// arithmetic helper. NCCL's kernels call `__assertfail` a thousand times and the 64-bit
/// division helpers a hundred.
pub(crate) fn worth_following(name: &str) -> bool {
    !name.starts_with(['.', '$'])
        && !DRIVER_FUNCTIONS.contains(&name)
        && !name.starts_with(ARITHMETIC_HELPERS)
}

/// Whether a function, linted alone (`alone`), may change what its callers show when it is
/// linted with them: it touches memory other threads see, orders it, or calls a function by
/// name. One that does none of that (the compiler's arithmetic helpers) is not followed.
pub(crate) fn matters_to_callers(alone: &fencelint_linter::LintOutput) -> bool {
    alone.shares_memory || !alone.external_calls.is_empty()
}

/// The names of the functions that a SASS text calls by name (the `` `(name) `` target of a
/// `CALL`; labels of the function's own code are among them).
pub(crate) fn named_calls(text: &str) -> impl Iterator<Item = &str> {
    memchr::memmem::find_iter(text.as_bytes(), b"CALL.").filter_map(move |at| {
        let line = &text[at..];
        let line = &line[..memchr::memchr(b'\n', line.as_bytes()).unwrap_or(line.len())];
        let start = line.find("`(")? + 2;
        let len = line[start..].find(')')?;
        Some(&line[start..start + len])
    })
}

/// Functions linted together: where each one's text starts in the whole, and the findings kept,
/// grouped by the function each belongs to (its index among the parts).
pub(crate) struct Together {
    pub(crate) starts: Vec<u32>,
    pub(crate) groups: BTreeMap<usize, Vec<Diagnostic>>,
    /// What linting the whole counted.
    pub(crate) functions: usize,
    /// The functions that the whole calls by name and does not hold (sorted, once each).
    pub(crate) external_calls: Vec<String>,
}

impl Together {
    /// The part whose text holds `offset` of the whole.
    pub(crate) fn part_at(&self, offset: u32) -> usize {
        self.starts.partition_point(|&start| start <= offset).saturating_sub(1)
    }

    /// `range` of the whole, made relative to the text of `part`.
    pub(crate) fn relative(&self, part: usize, range: TextRange) -> TextRange {
        let start = self.starts[part];
        TextRange::new(range.start.saturating_sub(start), range.end.saturating_sub(start))
    }
}

/// How the texts of functions are joined into one listing.
#[derive(Clone, Copy)]
pub(crate) enum Joined<'a> {
    /// Text listings, one after another, each ending in a line end.
    Lines,
    /// nvdisasm JSON function objects, in a document whose metadata object is `metadata`.
    JsonObjects { metadata: &'a str },
}

/// Lints the texts of several functions as one listing (`lint` gets the whole, joined as
/// `joined` says; its labels are on `file`). A finding belongs to the function its `kernel`
/// names (`names` gives each part's name), else to the one its primary label is in. `keep`
/// chooses among those on `file`: it gets the function a finding belongs to and the one its
/// primary label is in (indices into `texts`), and the label's range in that function's text.
/// Findings on other files are kept.
pub(crate) fn lint_together(
    texts: &[&str],
    names: &[&str],
    joined: Joined<'_>,
    file: FileId,
    lint: impl FnOnce(&str) -> LintOutput,
    keep: impl Fn(usize, usize, TextRange, &Diagnostic) -> bool,
) -> Together {
    let mut whole = String::with_capacity(texts.iter().map(|t| t.len() + 2).sum::<usize>() + 64);
    let mut starts: Vec<u32> = Vec::with_capacity(texts.len());
    if let Joined::JsonObjects { metadata } = joined {
        whole.push('[');
        whole.push_str(metadata);
        whole.push_str(",[\n");
    }
    for (k, text) in texts.iter().enumerate() {
        starts.push(u32::try_from(whole.len()).unwrap_or(u32::MAX));
        whole.push_str(text);
        match joined {
            Joined::Lines if !whole.ends_with('\n') => whole.push('\n'),
            Joined::Lines => {}
            Joined::JsonObjects { .. } if k + 1 < texts.len() => whole.push_str(",\n"),
            Joined::JsonObjects { .. } => whole.push_str("\n]]\n"),
        }
    }
    let lint = lint(&whole);
    let mut together = Together {
        starts,
        groups: BTreeMap::new(),
        functions: lint.functions,
        external_calls: lint.external_calls,
    };
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (index, name) in names.iter().enumerate() {
        by_name.entry(name).or_insert(index);
    }
    for diagnostic in lint.diagnostics {
        let at = together.part_at(diagnostic.primary.range.start);
        let own = diagnostic
            .kernel
            .as_deref()
            .and_then(|kernel| by_name.get(kernel).copied())
            .unwrap_or(at);
        let place = together.relative(at, diagnostic.primary.range);
        if diagnostic.primary.file != file || keep(own, at, place, &diagnostic) {
            together.groups.entry(own).or_default().push(diagnostic);
        }
    }
    together
}

/// The most text that the functions of one listing or cubin may be linted with again, callees
/// included: `size` (the listing's, or the held functions' text), at least 64 MiB (the 57 MB
/// nvdisasm listing of NVSHMEM's `sm_90` device code uses 32 MB). Without a bound, a chain of
/// small functions that call one another lints each function with all those after it.
/// `FENCELINT_LINKED_BUDGET` (bytes) sets it, for tests and measurements.
pub(crate) fn budget(size: usize) -> usize {
    std::env::var("FENCELINT_LINKED_BUDGET")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| size.max(64 << 20))
}

/// `bytes` for a message: `42.3 MiB`, `12 KiB`.
pub(crate) fn size_text(bytes: u64) -> String {
    if bytes >= 1 << 20 {
        // Tenths of a MiB, rounded.
        let tenths = bytes.saturating_mul(10).saturating_add(1 << 19) >> 20;
        format!("{}.{} MiB", tenths / 10, tenths % 10)
    } else {
        format!("{} KiB", bytes.div_ceil(1 << 10))
    }
}

/// Why a function's calls were not followed ([`calls_not_followed`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum NotFollowed {
    /// Linting functions with those they call spent [`budget`] (bytes).
    Budget(usize),
    /// A listing read from a pipe keeps this much of its functions' text (bytes) to lint them
    /// again, and the function's own text was not among it.
    CallerNotKept(usize),
    /// The same, for a function it calls.
    CalleeNotKept(usize),
}

/// The warning of a function whose calls were not followed, and why; its label is at the start
/// of the function's text, on `file`.
pub(crate) fn calls_not_followed(function: &str, why: NotFollowed, file: FileId) -> Diagnostic {
    let why = match why {
        NotFollowed::Budget(budget) => format!(
            "linting functions with those they call reached its budget ({} of text)",
            size_text(budget as u64)
        ),
        NotFollowed::CallerNotKept(kept) => format!(
            "a listing read from a pipe keeps {} of its functions' text to lint them again with \
             those they call, and this function's text was not kept (give the listing's path, \
             or lint the cubin itself)",
            size_text(kept as u64)
        ),
        NotFollowed::CalleeNotKept(kept) => format!(
            "a listing read from a pipe keeps {} of its functions' text to lint them again with \
             those they call, and the text of a function it calls was not kept (give the \
             listing's path, or lint the cubin itself)",
            size_text(kept as u64)
        ),
    };
    Diagnostic::new(
        codes::ANALYSIS_INCOMPLETE,
        Severity::Warning,
        format!(
            "the calls of `{function}` to other functions were not followed: {why}; findings may \
             be missing"
        ),
        Label::new(file, TextRange::empty(0), "in this function"),
    )
    .with_kernel(function.to_owned())
}

/// Whether a function linted alone (`alone`, its labels on `file`) gives `diagnostic`'s rule
/// and message at `place` of its text: a finding in its own code, which it reports itself,
/// rather than one that only a caller's context makes.
pub(crate) fn shows_alone(
    alone: &LintOutput,
    file: FileId,
    place: TextRange,
    diagnostic: &Diagnostic,
) -> bool {
    alone.diagnostics.iter().any(|d| {
        d.primary.file == file
            && d.primary.range == place
            && d.rule == diagnostic.rule
            && d.message == diagnostic.message
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closure_goes_nearest_first_within_its_budget() {
        // 0 calls 1 and 2; 1 calls 3; 3 calls 0 (back to the caller) and 4.
        let calls: Vec<Vec<usize>> = vec![vec![1, 2], vec![3], vec![], vec![0, 4], vec![]];
        let of = |k: usize| calls[k].as_slice();
        let all = |_| true;
        assert_eq!(closure(0, [1, 2].into_iter(), of, |_| 1, all), vec![1, 2, 3, 4]);
        // Function 2 is too large: the others still fit.
        let size = |k: usize| if k == 2 { CLOSURE_MAX_TEXT } else { 1 };
        assert_eq!(closure(0, [1, 2].into_iter(), of, size, all), vec![1, 3, 4]);
        // Function 3 is not followed, nor what only it calls.
        assert_eq!(closure(0, [1, 2].into_iter(), of, |_| 1, |k| k != 3), vec![1, 2]);
    }
}
