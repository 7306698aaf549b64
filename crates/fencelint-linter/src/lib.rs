//! The fencelint pipeline as a library: source text in, sorted diagnostics out.
//!
//! `detect` → front end (`fencelint-ptx` / `fencelint-sass`) → lowering (`fencelint-lower`) →
//! per-function analyses (`fencelint-cfg`) → rules (`fencelint-rules`). No IO happens here.

mod settings;
pub mod suppress;

use std::panic::{AssertUnwindSafe, catch_unwind};

use fencelint_cfg::FunctionAnalysis;
use fencelint_diagnostics::{Diagnostic, Label, Severity, codes};
use fencelint_ir::{Function, Module};
pub use fencelint_lower::{InputKind, detect};
use fencelint_rules::FunctionCx;
use fencelint_source::{Dialect, FileId, TextRange};
use rayon::prelude::*;
pub use settings::{RuleSelection, SelectionError, Settings};
pub use suppress::{FunctionSpan, Suppressions};

/// What linting one input produced.
#[derive(Debug, Default)]
pub struct LintOutput {
    pub diagnostics: Vec<Diagnostic>,
    /// Kernels and device functions seen.
    pub functions: usize,
    pub instructions: usize,
    /// Findings removed by inline `// fencelint: allow(...)` suppressions.
    pub suppressed: usize,
    /// The functions that the SASS code calls by name but the text does not hold (one function
    /// of a listing cut into functions): their calls fell through. Sorted, once each.
    pub external_calls: Vec<String>,
    /// Whether the code has an instruction that touches memory other threads may see (not
    /// local, parameter or constant memory) or orders memory. Code without one
    /// (`__cuda_sm20_rem_u64`) cannot change what the code that calls it shows.
    pub shares_memory: bool,
    /// The architectures of the SASS code linted (`sm_90a`), sorted, once each.
    pub sass_archs: Vec<String>,
    /// The SASS calls that name no callee (`Function::unnamed_calls`), and the functions that
    /// make them.
    pub unnamed_calls: UnnamedCalls,
}

/// Calls that a listing prints with no callee (cuobjdump's `CALL.ABS.NOINC 0x0`), counted.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct UnnamedCalls {
    pub calls: usize,
    pub functions: usize,
}

impl UnnamedCalls {
    /// Those of `func`'s own code.
    pub fn of(func: &Function) -> Self {
        let calls = func.unnamed_calls as usize;
        Self { calls, functions: usize::from(calls > 0) }
    }

    pub fn add(&mut self, other: Self) {
        self.calls += other.calls;
        self.functions += other.functions;
    }
}

impl LintOutput {
    pub fn merge(&mut self, other: Self) {
        self.diagnostics.extend(other.diagnostics);
        self.functions += other.functions;
        self.instructions += other.instructions;
        self.suppressed += other.suppressed;
        self.external_calls.extend(other.external_calls);
        self.external_calls.sort_unstable();
        self.external_calls.dedup();
        self.shares_memory |= other.shares_memory;
        self.sass_archs.extend(other.sass_archs);
        self.sass_archs.sort_unstable();
        self.sass_archs.dedup();
        self.unnamed_calls.add(other.unnamed_calls);
    }
}

/// Lints one text of a known kind. `file` is the id the caller registered the text under.
/// Inline suppressions in the text (see [`suppress`]) are applied to the findings.
pub fn lint_text(file: FileId, text: &str, kind: InputKind, settings: &Settings) -> LintOutput {
    let mut output = lint_text_with(file, text, kind, settings, None, Extent::Listing);
    if kind == InputKind::Ptx
        && let Some(target) = debug_target(text)
    {
        output.diagnostics.push(debug_build_note(file, target));
        fencelint_diagnostics::sort(&mut output.diagnostics);
    }
    output
}

/// The `.target` directive of a PTX text when it names `debug` (`.target sm_90a, debug`, what
/// `nvcc -G` writes), with where it is. The directive comes before the first function, so only
/// the text up to the first `.entry` or `.func` is read.
fn debug_target(text: &str) -> Option<TextRange> {
    let mut offset = 0usize;
    for line in text.split_inclusive('\n') {
        let start = offset;
        offset += line.len();
        let trimmed = line.trim_start();
        if trimmed.starts_with("//") {
            continue;
        }
        if trimmed.contains(".entry") || trimmed.contains(".func") {
            return None;
        }
        let Some(names) = trimmed.strip_prefix(".target") else { continue };
        let names = names.split("//").next().unwrap_or("");
        if !names.split(',').any(|name| name.trim() == "debug") {
            return None;
        }
        let at = start + (line.len() - trimmed.len());
        let end = at + trimmed.trim_end().len();
        return Some(TextRange::new(u32::try_from(at).ok()?, u32::try_from(end).ok()?));
    }
    None
}

/// The note of [`codes::DEBUG_BUILD`] at the `.target` directive `target`.
fn debug_build_note(file: FileId, target: TextRange) -> Diagnostic {
    Diagnostic::new(
        codes::DEBUG_BUILD,
        Severity::Note,
        "this PTX is a debug build (`nvcc -G`): it keeps variables in memory and calls library \
         functions that a release build inlines, so a hazard may go unreported and a correct \
         wait may be reported; lint the release build",
        Label::new(file, target, "`debug` target"),
    )
}

/// Lints what a splitter cut out of a larger SASS listing (the text of a
/// `fencelint_sass::SassChunk` or `TextChunk`, or several such texts one after another), with
/// the architecture the listing named before it: the result of [`lint_text`], or of
/// [`lint_sass_paired`] when `pair` is given, with the parser's tables sized for one function
/// up front. [`Split`] says which functions are checked.
pub fn lint_split_function(
    file: FileId,
    text: &str,
    kind: InputKind,
    split: Split,
    settings: &Settings,
    pair: Option<(&PairedPtx, Option<&str>)>,
) -> LintOutput {
    let extent = match split {
        Split::Function(arch) => Extent::Function(arch),
        Split::Caller(arch) => Extent::Caller(arch),
    };
    lint_text_with(file, text, kind, settings, pair, extent)
}

/// What [`lint_split_function`] gets, with the architecture the listing named before it.
#[derive(Clone, Copy, Debug)]
pub enum Split {
    /// One function, checked.
    Function(Option<fencelint_lower::sass::Arch>),
    /// A function followed by functions it calls by name (cut from one listing): the text is
    /// lowered whole, so that each call is followed into a copy of the callee's code, and only
    /// the first function, the caller, is checked. What the callees show by themselves is
    /// theirs to report.
    Caller(Option<fencelint_lower::sass::Arch>),
}

/// Lints a whole SASS listing, as [`lint_text`] does, with the pair rules against `pair` as
/// [`lint_split_function`] runs them: for the listing of a cubin whose functions call each
/// other by name, read whole so that the calls are followed into the callees' code.
pub fn lint_listing(
    file: FileId,
    text: &str,
    kind: InputKind,
    settings: &Settings,
    pair: Option<(&PairedPtx, Option<&str>)>,
) -> LintOutput {
    lint_text_with(file, text, kind, settings, pair, Extent::Listing)
}

/// The PTX-versus-SASS reorder audit (`ptxas-reordered-across-wait`), for callers that hold a
/// cubin: `reorder::ptx_from_debug_section` rebuilds the PTX from the `.nv_debug_ptx_txt`
/// section and `reorder::ptxas_version` reads the compiler version from the notes.
pub use fencelint_reorder as reorder;

/// A PTX text prepared for the pair rules: lowered once, with its line index, and then used for
/// every SASS function of the cubin that ptxas assembled from it.
pub struct PairedPtx {
    lowered: fencelint_lower::Lowered,
    lines: reorder::LineIndex,
}

impl PairedPtx {
    pub fn new(file: FileId, text: &str) -> Self {
        Self {
            lowered: fencelint_lower::lower(file, text, InputKind::Ptx, 0),
            lines: reorder::LineIndex::new(text),
        }
    }

    /// The front end's diagnostics about the PTX text (parse errors).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        &self.lowered.diagnostics
    }
}

/// Lints a SASS text (`nvdisasm -c -gp` of a cubin, or any listing with `.nv_debug_ptx_txt`
/// markers) with the rules of `settings`, and runs the pair rules against `ptx`, the PTX that
/// ptxas assembled it from (functions paired by name). `producer` names the compiler of the
/// SASS (`ptxas 13.2.78`, from [`reorder::ptxas_version`]) when the caller knows it.
pub fn lint_sass_paired(
    sass_file: FileId,
    sass_text: &str,
    sass_kind: InputKind,
    ptx: &PairedPtx,
    settings: &Settings,
    producer: Option<&str>,
) -> LintOutput {
    lint_text_with(
        sass_file,
        sass_text,
        sass_kind,
        settings,
        Some((ptx, producer)),
        Extent::Listing,
    )
}

/// Lints a PTX text and the SASS of the same kernels (`nvdisasm -c -gp`) together: the rules of
/// `settings` on each text, and the pair rules on the two (kernels paired by name).
/// `sass_kind` is what [`detect`] said of `sass_text`.
pub fn lint_pair(
    ptx_file: FileId,
    ptx_text: &str,
    sass_file: FileId,
    sass_text: &str,
    sass_kind: InputKind,
    settings: &Settings,
    producer: Option<&str>,
) -> LintOutput {
    let mut output = lint_text(ptx_file, ptx_text, InputKind::Ptx, settings);
    let not_pair = |file, message: &str| {
        Diagnostic::new(
            codes::INPUT_ERROR,
            Severity::Error,
            message.to_owned(),
            Label::new(file, TextRange::new(0, 0), "this input"),
        )
    };
    if detect(ptx_text) != Some(InputKind::Ptx) {
        output.diagnostics.push(not_pair(ptx_file, "the first input is not PTX"));
    }
    if !matches!(sass_kind, InputKind::Sass(_)) {
        output.diagnostics.push(not_pair(sass_file, "the second input is not a SASS listing"));
    } else if settings.enabled().any(|(rule, _)| rule.meta().dialects.pair)
        && !sass_text.contains(".nv_debug_ptx_txt")
    {
        output.diagnostics.push(not_pair(
            sass_file,
            "the SASS listing has no PTX line markers; disassemble with `nvdisasm -c -gp` a cubin \
             built with `-lineinfo`",
        ));
    }
    if output.diagnostics.iter().any(|d| d.rule == codes::INPUT_ERROR) {
        fencelint_diagnostics::sort(&mut output.diagnostics);
        return output;
    }
    let ptx = PairedPtx::new(ptx_file, ptx_text);
    output.merge(lint_sass_paired(sass_file, sass_text, sass_kind, &ptx, settings, producer));
    fencelint_diagnostics::sort(&mut output.diagnostics);
    output
}

/// What a linted text holds.
#[derive(Clone, Copy)]
enum Extent {
    /// A whole input.
    Listing,
    /// One function of a split SASS listing, and the architecture the listing named before it.
    Function(Option<fencelint_lower::sass::Arch>),
    /// A function and the functions it calls, cut from a SASS listing, checked as the first
    /// ([`Split::Caller`]).
    Caller(Option<fencelint_lower::sass::Arch>),
}

/// PTX texts of this size or more are linted function by function ([`lint_ptx_by_function`]):
/// from 1 MiB on that path takes less memory and no more time (docs/performance.md).
const PTX_BY_FUNCTION_MIN: usize = 1 << 20;

/// Lints a PTX text one function at a time: each is parsed, lowered and linted on its own (two
/// or more in parallel), so memory holds a few functions' syntax trees and IR instead of the
/// whole module's (a 34 MB PTX file took 865 MB whole). Every rule checks one function and
/// reads only the module's target and version, so the findings are those of [`lint_text`];
/// `crates/fencelint-linter/tests/ptx_by_function.rs` and the `pipeline` fuzz target hold the
/// two to the same output. Text with parse errors is linted whole here, and text with
/// suppression comments by the caller.
pub fn lint_ptx_by_function(file: FileId, text: &str, settings: &Settings) -> LintOutput {
    let whole = || lint_lowered(fencelint_lower::lower(file, text, InputKind::Ptx, 0), settings);
    // Text that does not parse cleanly is linted whole: a function cut out of damaged text
    // reads differently at its end (the parser's message names what follows it).
    let Some(outline) = fencelint_lower::ptx::outline(file, text) else { return whole() };
    if !outline.diagnostics.is_empty() {
        return whole();
    }
    let parts: Option<Vec<LintOutput>> = outline
        .spans
        .par_iter()
        .map(|span| {
            let lowered = outline.lower_function(file, text, span);
            lowered.diagnostics.is_empty().then(|| lint_lowered(lowered, settings))
        })
        .collect();
    let Some(parts) = parts else { return whole() };
    // Kernels first, as `lint_module` takes them.
    let mut parts: Vec<(bool, TextRange, LintOutput)> = outline
        .spans
        .iter()
        .zip(parts)
        .map(|(span, part)| (span.is_kernel(), span.range, part))
        .collect();
    parts.sort_by_key(|(kernel, ..)| !kernel);
    let mut output = LintOutput::default();
    let mut found = Vec::new();
    for (_, range, mut part) in parts {
        found.extend(std::mem::take(&mut part.diagnostics).into_iter().map(|d| (range, d)));
        output.merge(part);
    }
    output.diagnostics = keep_once(found, file);
    output
}

/// Sorts the findings of several functions of one text, each with the range of the function
/// that found it, and keeps one of each place, rule and message. Code that several functions
/// hold (a callee's body, copied into each caller per call) gives the same finding once per
/// copy: the one found by the function whose own code it is in is kept, so that a finding in
/// a callee's code that the callee shows alone is the callee's, as when a listing is cut into
/// functions (`fencelint-cli`'s `linking`); else the first, in the order given.
fn keep_once(found: Vec<(TextRange, Diagnostic)>, file: FileId) -> Vec<Diagnostic> {
    let mut found: Vec<(bool, Diagnostic)> = found
        .into_iter()
        .map(|(range, d)| {
            let own = d.primary.file == file
                && range.start <= d.primary.range.start
                && d.primary.range.end <= range.end;
            (!own, d)
        })
        .collect();
    // Stable: among equal findings of equal standing, the order given.
    found.sort_by(|(a_other, a), (b_other, b)| {
        a.sort_key().cmp(&b.sort_key()).then(a_other.cmp(b_other))
    });
    let mut diagnostics: Vec<Diagnostic> = found.into_iter().map(|(_, d)| d).collect();
    fencelint_diagnostics::dedup_sorted(&mut diagnostics);
    diagnostics
}

fn lint_text_with(
    file: FileId,
    text: &str,
    kind: InputKind,
    settings: &Settings,
    pair: Option<(&PairedPtx, Option<&str>)>,
    extent: Extent,
) -> LintOutput {
    if kind == InputKind::Ptx
        && text.len() >= PTX_BY_FUNCTION_MIN
        && pair.is_none()
        && !suppress::has_marker(text)
    {
        return lint_ptx_by_function(file, text, settings);
    }
    let mut lowered = match (kind, extent) {
        (InputKind::Sass(format), Extent::Function(arch) | Extent::Caller(arch)) => {
            fencelint_lower::sass::lower_function_text(file, text, format, arch, 0)
        }
        _ => fencelint_lower::lower(file, text, kind, 0),
    };
    if let Extent::Caller(_) = extent {
        // The callees' code is in the caller now, copied at its calls.
        lowered.modules.truncate(1);
        if let Some(module) = lowered.modules.first_mut() {
            module.functions.truncate(1);
        }
    }
    // One vector search for the marker: most texts (every compiler listing) have none.
    let mut suppressions = if suppress::has_marker(text) {
        let functions: Vec<FunctionSpan> = lowered
            .modules
            .iter()
            .flat_map(|module| &module.functions)
            .map(|func| FunctionSpan { name: func.name.clone(), range: func.range })
            .collect();
        Suppressions::parse(text, &functions)
    } else {
        Suppressions::default()
    };
    let paired = match pair {
        Some((ptx, producer)) => lint_pairs(ptx, &lowered.modules, settings, producer),
        None => Vec::new(),
    };
    let mut output = lint_lowered(lowered, settings);
    if !paired.is_empty() {
        output.diagnostics.extend(paired);
        fencelint_diagnostics::sort(&mut output.diagnostics);
    }
    if !suppressions.is_empty() {
        output.suppressed = suppressions.apply(
            file,
            kind.dialect(),
            &mut output.diagnostics,
            settings,
            pair.is_some(),
        );
        fencelint_diagnostics::sort(&mut output.diagnostics);
    }
    output
}

/// Runs the enabled pair rules on every SASS module against every module of `ptx`.
fn lint_pairs(
    ptx: &PairedPtx,
    sass: &[Module],
    settings: &Settings,
    producer: Option<&str>,
) -> Vec<Diagnostic> {
    let mut out = Vec::new();
    for (rule, severity) in settings.enabled().filter(|(rule, _)| rule.meta().dialects.pair) {
        for sass_module in sass {
            for ptx_module in &ptx.lowered.modules {
                let result = catch_unwind(AssertUnwindSafe(|| {
                    let mut cx = fencelint_rules::PairCx::new(
                        ptx_module,
                        &ptx.lines,
                        sass_module,
                        producer,
                        severity,
                    );
                    rule.check_pair(&mut cx);
                    cx.into_diagnostics()
                }));
                match result {
                    Ok(diagnostics) => out.extend(diagnostics),
                    Err(payload) => {
                        let file = sass_module.file.unwrap_or(FileId(0));
                        let range =
                            sass_module.functions.first().map_or(TextRange::new(0, 0), func_range);
                        out.push(internal_error(rule, "these kernels", &*payload, file, range));
                    }
                }
            }
        }
    }
    out
}

/// Lints lowered modules, keeping the front end's diagnostics.
pub fn lint_lowered(lowered: fencelint_lower::Lowered, settings: &Settings) -> LintOutput {
    let mut output = LintOutput { diagnostics: lowered.diagnostics, ..LintOutput::default() };
    for module in &lowered.modules {
        output.functions += module.functions.len();
        output.instructions += module.functions.iter().map(|f| f.insts.len()).sum::<usize>();
        output.diagnostics.extend(lint_module(module, settings));
        output.external_calls.extend(module.external_calls.iter().cloned());
        output.shares_memory |= module.functions.iter().any(shares_memory);
        for func in &module.functions {
            output.unnamed_calls.add(UnnamedCalls::of(func));
        }
        if module.dialect == Some(Dialect::Sass) {
            output.sass_archs.extend(module.target.clone());
        }
    }
    output.external_calls.sort_unstable();
    output.external_calls.dedup();
    output.sass_archs.sort_unstable();
    output.sass_archs.dedup();
    fencelint_diagnostics::sort(&mut output.diagnostics);
    fencelint_diagnostics::dedup_sorted(&mut output.diagnostics);
    output
}

/// [`LintOutput::shares_memory`] for one function.
fn shares_memory(func: &Function) -> bool {
    use fencelint_ir::Space;
    func.insts.iter().any(|inst| {
        inst.kind.is_memory_or_order()
            && inst
                .mem()
                .is_none_or(|m| !matches!(m.space, Space::Local | Space::Param | Space::Const))
    })
}

/// Runs every enabled rule over every function of `module`, functions in parallel.
pub fn lint_module(module: &Module, settings: &Settings) -> Vec<Diagnostic> {
    let rules: Vec<_> = settings
        .enabled()
        .filter(|(rule, _)| !rule.meta().dialects.pair && rule.should_run(module))
        .collect::<Vec<_>>();
    if rules.is_empty() {
        return Vec::new();
    }
    // Kernels first: a finding in code that a kernel and a function it calls both hold (the
    // callee's body, copied into the caller per call) and that is in neither's own code is
    // kept as the kernel's; one in the callee's own code is the callee's ([`keep_once`]).
    let mut functions: Vec<&Function> = module.functions.iter().collect();
    functions.sort_by_key(|func| !func.is_kernel);
    let found: Vec<(TextRange, Diagnostic)> = functions
        .par_iter()
        .flat_map_iter(|func| {
            lint_function(module, func, &rules).into_iter().map(|d| (func.range, d))
        })
        .collect();
    keep_once(found, module.file.unwrap_or(FileId(0)))
}

fn lint_function(
    module: &Module,
    func: &Function,
    rules: &[(&'static dyn fencelint_rules::Rule, Severity)],
) -> Vec<Diagnostic> {
    let file = module.file.unwrap_or(FileId(0));
    let analysis = FunctionAnalysis::new(func);
    let mut out = Vec::new();
    for &(rule, severity) in rules {
        let result = catch_unwind(AssertUnwindSafe(|| {
            let mut cx = FunctionCx::new(module, &analysis, rule.meta(), severity);
            rule.check_function(&mut cx);
            cx.into_diagnostics()
        }));
        match result {
            Ok(diagnostics) => out.extend(diagnostics),
            Err(payload) => {
                out.push(internal_error(rule, &func.name, &*payload, file, func_range(func)));
            }
        }
    }
    if analysis.is_incomplete() {
        let label = Label::new(file, func_range(func), "in this function");
        out.push(
            Diagnostic::new(
                codes::ANALYSIS_INCOMPLETE,
                Severity::Warning,
                format!(
                    "analysis of `{}` stopped at its budget; findings may be missing",
                    func.name
                ),
                label,
            )
            .with_kernel(func.name.clone()),
        );
    }
    for diagnostic in &mut out {
        diagnostic.dialect = diagnostic.dialect.or(module.dialect);
    }
    out
}

/// The `internal-error` diagnostic for a rule that panicked on `kernel`.
fn internal_error(
    rule: &dyn fencelint_rules::Rule,
    kernel: &str,
    payload: &(dyn std::any::Any + Send),
    file: FileId,
    range: TextRange,
) -> Diagnostic {
    let what = payload
        .downcast_ref::<&str>()
        .map(ToString::to_string)
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    Diagnostic::new(
        codes::INTERNAL_ERROR,
        Severity::Error,
        format!("rule `{}` failed on `{kernel}`: {what}", rule.meta().name),
        Label::new(file, range, "in this function"),
    )
    .with_kernel(kernel.to_owned())
    .with_help("report this with the input file; other rules and kernels were still checked")
}

/// The function's header: from its start to its first instruction (empty when it has none).
fn func_range(func: &Function) -> TextRange {
    let first = func.insts.first().map_or(func.range.start, |i| i.range.start);
    TextRange::new(func.range.start, first.max(func.range.start))
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_debug_target_is_found_before_the_first_function() {
        let range = |text: &str| super::debug_target(text).map(|r| text[r.to_usize()].to_owned());
        let header = ".version 8.5\n.target sm_90a, debug\n.address_size 64\n";
        assert_eq!(range(header).as_deref(), Some(".target sm_90a, debug"));
        let options = ".target sm_90, texmode_independent , debug // -G\n";
        assert_eq!(range(options).as_deref(), Some(options.trim_end()));
        assert_eq!(range(".version 8.5\n.target sm_90a\n"), None);
        assert_eq!(range("// .target sm_90a, debug\n.target sm_90a\n"), None);
        assert_eq!(range(".target sm_90a, debugger\n"), None);
        assert_eq!(range(".visible .entry k()\n{\n}\n.target sm_90a, debug\n"), None);
    }
}
