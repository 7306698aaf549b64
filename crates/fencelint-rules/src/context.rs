//! The context a rule reports through.

use fencelint_cfg::FunctionAnalysis;
use fencelint_diagnostics::{Diagnostic, Label, Severity};
use fencelint_ir::{FileId, Inst, InstId, Module, TextRange};
use fencelint_reorder::LineIndex;

use crate::RuleMeta;

/// What a rule sees for one function: the module, the function's shared analyses, and a sink.
pub struct FunctionCx<'a> {
    pub module: &'a Module,
    pub analysis: &'a FunctionAnalysis<'a>,
    rule: &'static RuleMeta,
    severity: Severity,
    file: FileId,
    diagnostics: Vec<Diagnostic>,
}

impl<'a> FunctionCx<'a> {
    pub fn new(
        module: &'a Module,
        analysis: &'a FunctionAnalysis<'a>,
        rule: &'static RuleMeta,
        severity: Severity,
    ) -> Self {
        Self {
            module,
            analysis,
            rule,
            severity,
            file: module.file.unwrap_or(FileId(0)),
            diagnostics: Vec::new(),
        }
    }

    pub fn func(&self) -> &'a fencelint_ir::Function {
        self.analysis.func
    }

    pub fn inst(&self, id: InstId) -> &'a Inst {
        self.analysis.func.inst(id)
    }

    /// A label on an instruction, carrying its SASS address and source location.
    pub fn label(&self, id: InstId, message: impl Into<String>) -> Label {
        let inst = self.inst(id);
        Label::new(self.file, inst.range, message)
            .with_address(inst.sass_address.map(u64::from))
            .with_source(inst.source.as_deref().cloned())
    }

    /// Starts a diagnostic whose primary label is on `id`.
    pub fn report(&mut self, id: InstId, message: impl Into<String>) -> Report<'_, 'a> {
        let primary = self.label(id, "");
        let window = self.window(id);
        let opcode = self.inst(id).opcode.to_string();
        let mut report = self.start(primary, message);
        report.window = window;
        report.anchor.push(opcode);
        report
    }

    /// The opcodes of up to three instructions either side of `id`: the normalized context that
    /// identifies a finding across recompiles (registers, lines and addresses left out).
    fn window(&self, id: InstId) -> Vec<String> {
        let insts = &self.analysis.func.insts;
        let start = id.index().saturating_sub(3);
        let end = (id.index() + 4).min(insts.len());
        insts[start..end].iter().map(|inst| inst.opcode.to_string()).collect()
    }

    /// Starts a diagnostic on an arbitrary range (for findings not tied to one instruction).
    pub fn report_range(&mut self, range: TextRange, message: impl Into<String>) -> Report<'_, 'a> {
        let primary = Label::new(self.file, range, "");
        self.start(primary, message)
    }

    fn start(&mut self, primary: Label, message: impl Into<String>) -> Report<'_, 'a> {
        let mut diagnostic = Diagnostic::new(self.rule.name, self.severity, message, primary)
            .with_kernel(self.analysis.func.name.clone());
        diagnostic.dialect = self.module.dialect;
        Report { cx: self, diagnostic: Some(diagnostic), window: Vec::new(), anchor: Vec::new() }
    }

    pub fn into_diagnostics(self) -> Vec<Diagnostic> {
        self.diagnostics
    }
}

/// A diagnostic being built; it is recorded when dropped.
pub struct Report<'c, 'a> {
    cx: &'c mut FunctionCx<'a>,
    diagnostic: Option<Diagnostic>,
    /// Opcodes that identify the finding (see [`FunctionCx::report`]).
    window: Vec<String>,
    /// The opcodes of the labelled instructions alone: the finding's anchor (see
    /// `Diagnostic::anchor`).
    anchor: Vec<String>,
}

impl Report<'_, '_> {
    fn diag(&mut self) -> &mut Diagnostic {
        self.diagnostic.as_mut().expect("report is live until dropped")
    }

    /// Sets the message under the primary label.
    #[must_use]
    pub fn primary_label(mut self, message: impl Into<String>) -> Self {
        self.diag().primary.message = message.into();
        self
    }

    /// Adds a label on the other end of the ordering problem.
    #[must_use]
    pub fn secondary(mut self, id: InstId, message: impl Into<String>) -> Self {
        let label = self.cx.label(id, message);
        self.window.push(self.cx.inst(id).opcode.to_string());
        self.anchor.push(self.cx.inst(id).opcode.to_string());
        self.diag().secondary.push(label);
        self
    }

    /// Lowers the finding's severity to `cap` when the configured one is higher: for a finding
    /// the rule is less sure of than of its others.
    #[must_use]
    pub fn at_most(mut self, cap: Severity) -> Self {
        let diagnostic = self.diag();
        diagnostic.severity = diagnostic.severity.min(cap);
        self
    }

    #[must_use]
    pub fn note(mut self, note: impl Into<String>) -> Self {
        self.diag().notes.push(note.into());
        self
    }

    #[must_use]
    pub fn help(mut self, help: impl Into<String>) -> Self {
        self.diag().help = Some(help.into());
        self
    }
}

impl Drop for Report<'_, '_> {
    fn drop(&mut self) {
        if let Some(mut diagnostic) = self.diagnostic.take() {
            let kernel = diagnostic.kernel.clone().unwrap_or_default();
            let head = [diagnostic.rule.as_str(), kernel.as_str()];
            let parts = head.into_iter().chain(self.window.iter().map(String::as_str));
            diagnostic.fingerprint = Some(fencelint_diagnostics::stable_hash(parts));
            let parts = head.into_iter().chain(self.anchor.iter().map(String::as_str));
            diagnostic.anchor = Some(fencelint_diagnostics::stable_hash(parts));
            self.cx.diagnostics.push(diagnostic);
        }
    }
}

/// What a pair rule sees: a lowered PTX module, the SASS module that ptxas made of it (with
/// `nvdisasm -gp` PTX line markers), and a sink.
pub struct PairCx<'a> {
    pub ptx: &'a Module,
    /// Line numbers of the PTX text, which the SASS markers name.
    pub ptx_lines: &'a LineIndex,
    pub sass: &'a Module,
    /// The compiler of the SASS (`ptxas 13.2.78`), when the caller knows it.
    pub producer: Option<&'a str>,
    pub severity: Severity,
    diagnostics: Vec<Diagnostic>,
}

impl<'a> PairCx<'a> {
    pub fn new(
        ptx: &'a Module,
        ptx_lines: &'a LineIndex,
        sass: &'a Module,
        producer: Option<&'a str>,
        severity: Severity,
    ) -> Self {
        Self { ptx, ptx_lines, sass, producer, severity, diagnostics: Vec::new() }
    }

    /// Records finished diagnostics (a pair rule labels both texts and fingerprints its own
    /// findings).
    pub fn extend(&mut self, diagnostics: impl IntoIterator<Item = Diagnostic>) {
        self.diagnostics.extend(diagnostics);
    }

    pub fn into_diagnostics(self) -> Vec<Diagnostic> {
        self.diagnostics
    }
}
