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
use fencelint_source::{FileId, TextRange};
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
}

impl LintOutput {
    pub fn merge(&mut self, other: Self) {
        self.diagnostics.extend(other.diagnostics);
        self.functions += other.functions;
        self.instructions += other.instructions;
        self.suppressed += other.suppressed;
    }
}

/// Lints one text of a known kind. `file` is the id the caller registered the text under.
/// Inline suppressions in the text (see [`suppress`]) are applied to the findings.
pub fn lint_text(file: FileId, text: &str, kind: InputKind, settings: &Settings) -> LintOutput {
    let lowered = fencelint_lower::lower(file, text, kind, 0);
    let functions: Vec<FunctionSpan> = if text.contains("fencelint:") {
        lowered
            .modules
            .iter()
            .flat_map(|module| &module.functions)
            .map(|func| FunctionSpan { name: func.name.clone(), range: func.range })
            .collect()
    } else {
        Vec::new()
    };
    let mut suppressions = Suppressions::parse(text, &functions);
    let mut output = lint_lowered(lowered, settings);
    if !suppressions.is_empty() {
        output.suppressed =
            suppressions.apply(file, kind.dialect(), &mut output.diagnostics, settings);
        fencelint_diagnostics::sort(&mut output.diagnostics);
    }
    output
}

/// The PTX-versus-SASS reorder audit (`ptxas-reordered-across-wait`), for callers that hold a
/// cubin: `reorder::ptx_from_debug_section` rebuilds the PTX from the `.nv_debug_ptx_txt`
/// section and `reorder::ptxas_version` reads the compiler version from the notes.
pub use fencelint_reorder as reorder;

/// Lints a PTX text and the SASS of the same kernels (`nvdisasm -c -gp`) together: the rules of
/// `settings` on each text, and the reorder audit on the pair (kernels paired by name).
/// `sass_kind` is what [`detect`] said of `sass_text`; `producer` names the compiler of the SASS
/// (`ptxas 13.2.78`, from [`reorder::ptxas_version`]) when the caller knows it.
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
    output.merge(lint_text(sass_file, sass_text, sass_kind, settings));
    let options = reorder::AuditOptions {
        producer: producer.map(ToOwned::to_owned),
        ..reorder::AuditOptions::default()
    };
    let audit =
        reorder::audit_texts_as(ptx_file, ptx_text, sass_file, sass_text, sass_kind, &options);
    // The parse errors of the two texts are already in `output`.
    output
        .diagnostics
        .extend(audit.diagnostics.into_iter().filter(|d| d.rule != codes::PARSE_ERROR));
    fencelint_diagnostics::sort(&mut output.diagnostics);
    output
}

/// Lints lowered modules, keeping the front end's diagnostics.
pub fn lint_lowered(lowered: fencelint_lower::Lowered, settings: &Settings) -> LintOutput {
    let mut output = LintOutput { diagnostics: lowered.diagnostics, ..LintOutput::default() };
    for module in &lowered.modules {
        output.functions += module.functions.len();
        output.instructions += module.functions.iter().map(|f| f.insts.len()).sum::<usize>();
        output.diagnostics.extend(lint_module(module, settings));
    }
    fencelint_diagnostics::sort(&mut output.diagnostics);
    output
}

/// Runs every enabled rule over every function of `module`, functions in parallel.
pub fn lint_module(module: &Module, settings: &Settings) -> Vec<Diagnostic> {
    let rules: Vec<_> =
        settings.enabled().filter(|(rule, _)| rule.should_run(module)).collect::<Vec<_>>();
    if rules.is_empty() {
        return Vec::new();
    }
    let mut diagnostics: Vec<Diagnostic> = module
        .functions
        .par_iter()
        .flat_map_iter(|func| lint_function(module, func, &rules))
        .collect();
    fencelint_diagnostics::sort(&mut diagnostics);
    diagnostics
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
                let what = payload
                    .downcast_ref::<&str>()
                    .map(ToString::to_string)
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".to_owned());
                let label = Label::new(file, func_range(func), "in this function");
                out.push(
                    Diagnostic::new(
                        codes::INTERNAL_ERROR,
                        Severity::Error,
                        format!(
                            "rule `{}` failed on `{}`: {what}",
                            rule.meta().name,
                            func.name
                        ),
                        label,
                    )
                    .with_kernel(func.name.clone())
                    .with_help("report this with the input file; other rules and kernels were still checked"),
                );
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

/// The function's header: from its start to its first instruction (empty when it has none).
fn func_range(func: &Function) -> TextRange {
    let first = func.insts.first().map_or(func.range.start, |i| i.range.start);
    TextRange::new(func.range.start, first.max(func.range.start))
}
