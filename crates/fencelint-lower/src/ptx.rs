//! PTX lowering: the classification of PTX opcodes into the IR, with the ISA's defaults applied.
//!
//! Modifiers come in any order; classification looks at the set of tokens, never at positions
//! (except that a compound opcode's leading words decide its family).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use smallvec::SmallVec;

use fencelint_diagnostics::Diagnostic;
use fencelint_ir::{
    AddrBase, Address, AddressRole, AluOp, AsyncOp, Barrier, BulkDir, Control, Fence, FenceKind,
    Function, Guard, Inst, InstId, InstKind, IntCompare, MbarrierOp, MemAccess, Module, MultimemOp,
    Relation, Scope, Sem, SourceLocation, Space, Tcgen05Op, TensormapOp, ValueOp, WgmmaOp,
};
use fencelint_ptx as ast;
use fencelint_source::{Dialect, FileId, TextRange};

use crate::Lowered;

/// Parses PTX text and lowers it.
pub fn lower_text(file: FileId, text: &str, base: u32) -> Lowered {
    let parsed = ast::parse(text);
    let diagnostics = parse_errors(file, &parsed.errors, base);
    let module = lower_module(file, &parsed.value, base);
    Lowered { modules: vec![module], diagnostics }
}

/// PTX parse errors as diagnostics, in text order.
fn parse_errors(file: FileId, errors: &[ast::ParseError], base: u32) -> Vec<Diagnostic> {
    let mut diagnostics: Vec<Diagnostic> = errors
        .iter()
        .map(|e| crate::parse_error(file, e.range.shifted(base), &e.message, Dialect::Ptx))
        .collect();
    diagnostics.sort_by_key(|d| d.primary.range.start);
    diagnostics
}

/// The functions with a body of a parsed module, lowered.
fn lower_bodies(
    module: &ast::Module<'_>,
    files: &HashMap<u32, &str>,
    base: u32,
    callees: &dyn Callees,
) -> Vec<Function> {
    module
        .functions()
        .filter(|f| f.body.is_some())
        .map(|f| lower_function(f, files, base, callees))
        .collect()
}

/// The functions of a parsed module, by name.
fn module_callees<'m, 'a>(module: &'m ast::Module<'a>) -> HashMap<&'a str, &'m ast::Function<'a>> {
    module.functions().map(|f| (f.name, f)).collect()
}

/// A PTX module of `functions` with the given target and version.
fn ptx_module(
    file: FileId,
    target: Option<String>,
    ptx_version: Option<String>,
    functions: Vec<Function>,
) -> Module {
    Module {
        file: Some(file),
        dialect: Some(Dialect::Ptx),
        target,
        ptx_version,
        producer: None,
        functions,
        external_calls: Vec::new(),
    }
}

/// A PTX text read without its function bodies: where each function is and what the module
/// says around them, so that the functions can be parsed and lowered one at a time
/// ([`PtxOutline::lower_function`]) with the same IR as [`lower_text`] gives for them when the
/// text parses cleanly (a function cut out of damaged text may read differently at its end).
/// Large PTX files are linted that way, with one function's syntax tree and IR in memory.
pub struct PtxOutline<'a> {
    pub spans: Vec<ast::FunctionSpan<'a>>,
    /// Where each function with a body is, by name: a call is inlined from there.
    by_name: HashMap<&'a str, TextRange>,
    files: HashMap<u32, &'a str>,
    target: Option<String>,
    version: Option<String>,
    /// The parse errors outside the functions.
    pub diagnostics: Vec<Diagnostic>,
}

/// Finds the functions of `text` (`fencelint_ptx::split_functions`) and parses the text between
/// them: module-level statements never straddle a function. `None` when a function's bounds do
/// not fall on character boundaries (damaged input), which the whole-text path reads instead.
pub fn outline(file: FileId, text: &str) -> Option<PtxOutline<'_>> {
    let spans = ast::split_functions(text);
    let on_boundaries = spans.iter().all(|span| {
        text.is_char_boundary(span.range.start as usize)
            && text.is_char_boundary(span.range.end as usize)
    });
    if !on_boundaries {
        return None;
    }
    let by_name = spans.iter().filter(|s| s.has_body).map(|s| (s.name, s.range)).collect();
    let mut outline = PtxOutline {
        spans,
        by_name,
        files: HashMap::new(),
        target: None,
        version: None,
        diagnostics: Vec::new(),
    };
    let mut gaps = Vec::with_capacity(outline.spans.len() + 1);
    let mut at = 0;
    for span in &outline.spans {
        gaps.push(at..span.range.start as usize);
        at = span.range.end as usize;
    }
    gaps.push(at..text.len());
    // Only empty gaps are passed over: what counts as blank is the parser's to say (a
    // no-break space is no PTX whitespace).
    for gap in gaps.into_iter().filter(|gap| !gap.is_empty()) {
        let parsed = ast::parse_with_offset(&text[gap.clone()], gap.start as u32);
        outline.diagnostics.extend(parse_errors(file, &parsed.errors, 0));
        let module = &parsed.value;
        outline.files.extend(module.files().map(|f| (f.id, f.name)));
        if outline.target.is_none() {
            outline.target = module_target(module);
        }
        if outline.version.is_none() {
            outline.version = module_version(module);
        }
    }
    outline.diagnostics.sort_by_key(|d| d.primary.range.start);
    Some(outline)
}

impl PtxOutline<'_> {
    /// Parses and lowers the function at `span` (one of [`Self::spans`]) of `text`, the text
    /// the outline was made from: a module of the text's target and version with that function
    /// (none for a declaration), and the parse errors inside it.
    pub fn lower_function(
        &self,
        file: FileId,
        text: &str,
        span: &ast::FunctionSpan<'_>,
    ) -> Lowered {
        let range = span.range.to_usize();
        let parsed = ast::parse_with_offset(&text[range.clone()], range.start as u32);
        let diagnostics = parse_errors(file, &parsed.errors, 0);
        let callees = SpanCallees { text, spans: &self.by_name };
        let functions = lower_bodies(&parsed.value, &self.files, 0, &callees);
        let module = ptx_module(file, self.target.clone(), self.version.clone(), functions);
        Lowered { modules: vec![module], diagnostics }
    }
}

/// The functions of an outlined text, parsed when a call names them.
struct SpanCallees<'o, 'a> {
    text: &'a str,
    spans: &'o HashMap<&'a str, TextRange>,
}

impl Callees for SpanCallees<'_, '_> {
    fn with_body(&self, name: &str, f: &mut dyn FnMut(&ast::Function<'_>)) {
        let Some(range) = self.spans.get(name).map(|r| r.to_usize()) else { return };
        let Some(text) = self.text.get(range.clone()) else { return };
        let parsed = ast::parse_with_offset(text, range.start as u32);
        if !parsed.errors.is_empty() {
            return;
        }
        if let Some(function) =
            parsed.value.functions().find(|g| g.name == name && g.body.is_some())
        {
            f(function);
        }
    }
}

/// Lowers a parsed module.
pub fn lower_module(file: FileId, module: &ast::Module<'_>, base: u32) -> Module {
    let files: HashMap<u32, &str> = module.files().map(|f| (f.id, f.name)).collect();
    ptx_module(
        file,
        module_target(module),
        module_version(module),
        lower_bodies(module, &files, base, &module_callees(module)),
    )
}

/// The first name of the module's `.target` directive (`sm_90a`).
fn module_target(module: &ast::Module<'_>) -> Option<String> {
    module.target().and_then(|t| t.names.first()).map(|s| (*s).to_owned())
}

/// The text of the module's `.version` directive (`9.5`).
fn module_version(module: &ast::Module<'_>) -> Option<String> {
    module.version().map(|v| v.text.to_owned())
}

/// A `.loc` location: file index, line, column.
type Site = (u32, u32, u32);

/// The call sites of one stretch of inlined code, innermost first (`None`: not inlined).
type Chain = Option<Arc<[SourceLocation]>>;

/// The call sites of inlined code. A `.loc` of inlined code names the site it was inlined at
/// (`.loc 5 126 1, function_name ..., inlined_at 4 377 13`); that site, when it lies in
/// inlined code itself, has a `.loc` of its own naming the next one (`.loc 4 377 13, ...,
/// inlined_at 2 182 9`), and so on out to a line of the kernel's own code, which names none.
struct InlineSites<'f> {
    files: &'f HashMap<u32, &'f str>,
    /// The call site of each location that a `.loc` of this function gives one: the latest
    /// `.loc` read so far, else the first of the function (a call site's `.loc` normally comes
    /// first; the same location inlined at two sites takes the nearer one before it).
    latest: HashMap<Site, Site>,
    first: HashMap<Site, Site>,
    /// Bumped whenever a location's call site changes, which may change any chain.
    generation: u32,
    /// The chain from each call site, with the generation it was followed in.
    resolved: HashMap<Site, (u32, Chain)>,
    /// Chains already built, shared by every instruction with the same one.
    built: HashMap<Vec<Site>, Chain>,
}

/// The longest chain of call sites followed (a cycle in damaged line info stops there too).
const MAX_INLINE_DEPTH: usize = 64;

impl<'f> InlineSites<'f> {
    fn new(statements: &[ast::Statement<'_>], files: &'f HashMap<u32, &'f str>) -> Self {
        let mut first = HashMap::new();
        for statement in statements {
            if let ast::Statement::Loc(l) = statement
                && let Some(at) = l.inlined_at
            {
                first.entry((l.file, l.line, l.column)).or_insert((at.file, at.line, at.column));
            }
        }
        Self {
            files,
            latest: HashMap::new(),
            first,
            generation: 0,
            resolved: HashMap::new(),
            built: HashMap::new(),
        }
    }

    fn parent(&self, site: Site) -> Option<Site> {
        self.latest.get(&site).or_else(|| self.first.get(&site)).copied()
    }

    /// The call sites of the code after `loc`, innermost first; `None` when it names none.
    fn chain(&mut self, loc: &ast::Loc<'_>) -> Chain {
        let at = loc.inlined_at?;
        let here = (loc.file, loc.line, loc.column);
        let start = (at.file, at.line, at.column);
        if self.parent(here) != Some(start) {
            self.generation = self.generation.wrapping_add(1);
        }
        self.latest.insert(here, start);
        if let Some((generation, chain)) = self.resolved.get(&start)
            && *generation == self.generation
        {
            return chain.clone();
        }
        let mut sites = vec![start];
        let mut site = start;
        while sites.len() < MAX_INLINE_DEPTH {
            let Some(next) = self.parent(site) else { break };
            if sites.contains(&next) {
                break;
            }
            sites.push(next);
            site = next;
        }
        // A site in a file the module does not declare ends the chain.
        if let Some(unknown) = sites.iter().position(|s| !self.files.contains_key(&s.0)) {
            sites.truncate(unknown);
        }
        let files = self.files;
        let chain = self
            .built
            .entry(sites)
            .or_insert_with_key(|sites| {
                (!sites.is_empty()).then(|| {
                    sites
                        .iter()
                        .map(|&(file, line, column)| {
                            SourceLocation::new(files[&file], line, column)
                        })
                        .collect()
                })
            })
            .clone();
        self.resolved.insert(start, (self.generation, chain.clone()));
        chain
    }
}

struct Pending {
    inst: Inst,
    /// Label names this instruction branches to, resolved after the whole body is read.
    targets: Vec<String>,
}

/// The `{ }` blocks of one body, numbered in the order they open (the body itself is block 0),
/// and the innermost one open while the body is read in order ([`Names::new`] reads it once;
/// [`Names::block_of`] keeps where each statement is). Labels and registers declared in a block
/// are local to it.
#[derive(Default)]
struct Blocks {
    /// Each block's enclosing block; block 0 has none (its entry is unused).
    parent: Vec<u32>,
    /// The open blocks, innermost last; empty in the body itself.
    open: Vec<u32>,
}

impl Blocks {
    fn current(&self) -> u32 {
        self.open.last().copied().unwrap_or(0)
    }

    fn open(&mut self) {
        if self.parent.is_empty() {
            self.parent.push(0);
        }
        let id = self.parent.len() as u32;
        self.parent.push(self.current());
        self.open.push(id);
    }

    fn close(&mut self) {
        self.open.pop();
    }

    /// `block`, then each block around it, out to the body (block 0).
    fn outwards(&self, mut block: u32) -> impl Iterator<Item = u32> + '_ {
        let mut done = false;
        std::iter::from_fn(move || {
            if done {
                return None;
            }
            let this = block;
            done = block == 0;
            block = self.parent.get(block as usize).copied().unwrap_or(0);
            Some(this)
        })
    }
}

/// How the registers of one body are named in the function it is lowered into.
struct Names<'a> {
    /// The names declared with `.reg`, a parametrized `%r<8>` as `%r` with its count.
    declared: HashMap<&'a str, Option<u32>>,
    /// The registers declared inside a `{ }` block, by block ([`Blocks`]' numbers) and name:
    /// each is a register of its own, apart from any of the same name outside the block
    /// (inline asm declares its temporaries that way, `{ .reg .pred P1; ... }`, once per pasted
    /// copy, and may shadow a register of the compiler's).
    in_blocks: HashMap<(u32, &'a str), Option<u32>>,
    blocks: Blocks,
    /// The innermost block around each statement of the body, by statement index.
    block_of: Vec<u32>,
    /// The block of the instruction being lowered, set by [`lower_body`].
    block: std::cell::Cell<u32>,
    /// For a callee's body lowered into its caller ([`Inliner::inline_calls`]): what is
    /// appended to each register the body declares, so that its registers are not the
    /// caller's. Special registers (`%tid.x`, `%laneid`, `%clock64`) are the thread's own and
    /// keep their names.
    suffix: Option<String>,
}

impl<'a> Names<'a> {
    fn new(statements: &[ast::Statement<'a>], suffix: Option<String>) -> Self {
        let mut declared = HashMap::new();
        let mut in_blocks = HashMap::new();
        let mut blocks = Blocks::default();
        let mut block_of = Vec::with_capacity(statements.len());
        for statement in statements {
            block_of.push(blocks.current());
            match statement {
                ast::Statement::ScopeOpen(_) => blocks.open(),
                ast::Statement::ScopeClose(_) => blocks.close(),
                ast::Statement::Decl(decl) if decl.space == "reg" => {
                    let names = decl.names.iter().map(|n| (n.name, n.count));
                    match blocks.current() {
                        0 => declared.extend(names),
                        block => {
                            for (name, count) in names {
                                declared.entry(name).or_insert(count);
                                in_blocks.insert((block, name), count);
                            }
                        }
                    }
                }
                _ => {}
            }
        }
        blocks.open.clear();
        Self { declared, in_blocks, blocks, block_of, block: std::cell::Cell::new(0), suffix }
    }

    /// Names declared with `.reg` anywhere in the body are registers, even without `%` (`t1`
    /// of `.reg .b32 t<2>` too).
    fn is_reg(&self, name: &str) -> bool {
        name.starts_with('%') || self.is_declared(name)
    }

    /// Whether `declared` holds `name`: itself, or as one of a parametrized declaration's
    /// registers (`%r12` of `%r<20>`).
    fn holds(name: &str, lookup: impl Fn(&str) -> Option<Option<u32>>) -> bool {
        if lookup(name).is_some() {
            return true;
        }
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
        stem.len() < name.len() && matches!(lookup(stem), Some(Some(_)))
    }

    /// Whether the body declares `name`.
    fn is_declared(&self, name: &str) -> bool {
        Self::holds(name, |n| self.declared.get(n).copied())
    }

    /// The innermost block around the current instruction that declares `name`, if one does.
    fn declaring_block(&self, name: &str) -> Option<u32> {
        if self.in_blocks.is_empty() {
            return None;
        }
        self.blocks
            .outwards(self.block.get())
            .take_while(|&block| block != 0)
            .find(|&block| Self::holds(name, |n| self.in_blocks.get(&(block, n)).copied()))
    }

    fn intern(&self, func: &mut Function, name: &str) -> fencelint_ir::Reg {
        let suffix = self.suffix.as_deref().filter(|_| self.is_declared(name));
        match (self.declaring_block(name), suffix) {
            (Some(block), suffix) => {
                func.intern_reg(&format!("{name}{}@block{block}", suffix.unwrap_or("")))
            }
            (None, Some(suffix)) => func.intern_reg(&format!("{name}{suffix}")),
            (None, None) => func.intern_reg(name),
        }
    }
}

/// A `call` of a function named by the instruction (`call.uni (retval0), f, (param0, param1)`):
/// the call's instruction, the callee, and the `.param` names the call passes and receives.
struct CallSite {
    inst: InstId,
    /// The instructions of the body the call is in: the `.param` accesses of the call are
    /// looked for there, and the instruction after the call, where the callee returns to, must
    /// be one of them.
    body_start: u32,
    body_end: u32,
    callee: String,
    args: Vec<String>,
    rets: Vec<String>,
}

impl CallSite {
    /// The call site of `instruction`, lowered as `inst`; `None` for an indirect call (through a
    /// register) and for anything else.
    fn of(inst: InstId, instruction: &ast::Instruction<'_>, names: &Names<'_>) -> Option<Self> {
        if instruction.mnemonic() != "call" {
            return None;
        }
        let ops = &instruction.operands;
        let at = ops.iter().position(|o| o.as_name().is_some())?;
        let callee = ops[at].as_name().filter(|name| !names.is_reg(name))?;
        let list = |o: Option<&ast::Operand<'_>>| match o.map(|o| &o.kind) {
            Some(ast::OperandKind::List(items)) => {
                items.iter().filter_map(ast::Operand::as_name).map(ToOwned::to_owned).collect()
            }
            _ => Vec::new(),
        };
        let rets = if at > 0 { list(ops.first()) } else { Vec::new() };
        let args = list(ops.get(at + 1));
        Some(Self {
            inst,
            body_start: 0,
            body_end: u32::MAX,
            callee: callee.to_owned(),
            args,
            rets,
        })
    }
}

/// The bodies of the functions of a module, by name, for [`Inliner::inline_calls`].
pub(crate) trait Callees {
    /// Calls `f` with the function named `name` when the module defines it with a body.
    fn with_body(&self, name: &str, f: &mut dyn FnMut(&ast::Function<'_>));
}

impl Callees for HashMap<&str, &ast::Function<'_>> {
    fn with_body(&self, name: &str, f: &mut dyn FnMut(&ast::Function<'_>)) {
        if let Some(function) = self.get(name).filter(|function| function.body.is_some()) {
            f(function);
        }
    }
}

fn lower_function(
    func: &ast::Function<'_>,
    files: &HashMap<u32, &str>,
    base: u32,
    callees: &dyn Callees,
) -> Function {
    let mut out = Function::new(func.name, func.is_kernel(), func.range.shifted(base));
    out.params = func.param_names().map(ToOwned::to_owned).collect();
    let statements = func.statements();
    let names = Names::new(statements, None);
    let calls = lower_body(&mut out, statements, &names, files, base);
    if !calls.is_empty() {
        let own = out.insts.len();
        let mut inliner =
            Inliner { callees, files, base, stack: vec![func.name.to_owned()], count: 0 };
        inliner.inline_calls(&mut out, calls, INLINE_BUDGET_MIN.max(own));
        out.inlined_from = (out.insts.len() > own).then_some(own as u32);
    }
    crate::frames::read_frames(&mut out);
    crate::constants::fold_constant_branches(&mut out);
    out
}

/// The labels of one body, by the `{ }` scope that declares them. A PTX label is local to its
/// block, and inline asm relies on it: CUTLASS-style mbarrier waits are blocks
/// `{ .reg .pred P1; LAB_WAIT: mbarrier.try_wait... P1, ...; @P1 bra DONE; bra LAB_WAIT; DONE: }`,
/// pasted once per wait, so one kernel may declare `LAB_WAIT` and `DONE` dozens of times. A
/// branch goes to the label of its name in the innermost scope around it that declares one,
/// before or after the branch.
#[derive(Default)]
struct ScopedLabels<'a> {
    /// Each label's pending instruction index, by block ([`Blocks`]' numbers) and name.
    labels: HashMap<(u32, &'a str), u32>,
}

impl<'a> ScopedLabels<'a> {
    /// Declares `name` in `block`; of two declarations in one block (invalid PTX) the later one
    /// counts.
    fn declare(&mut self, block: u32, name: &'a str, index: u32) {
        self.labels.insert((block, name), index);
    }

    /// The label `name` as a branch in `block` of `blocks` sees it.
    fn resolve(&self, blocks: &Blocks, block: u32, name: &str) -> Option<u32> {
        blocks.outwards(block).find_map(|block| self.labels.get(&(block, name)).copied())
    }
}

/// Lowers the instructions of `statements` into `out`, after those it holds, and returns the
/// calls among them.
fn lower_body(
    out: &mut Function,
    statements: &[ast::Statement<'_>],
    names: &Names<'_>,
    files: &HashMap<u32, &str>,
    base: u32,
) -> Vec<CallSite> {
    let offset = out.insts.len() as u32;
    let mut labels = ScopedLabels::default();
    // The block each pending instruction is in, for its branches' labels.
    let mut scope_of: Vec<u32> = Vec::with_capacity(statements.len());
    let mut branch_tables: HashMap<&str, Vec<String>> = HashMap::new();
    // At most one instruction a statement: sized once, not grown by doubling (an `Inst` is
    // a few hundred bytes, and growing copied them about twice over).
    let mut pending: Vec<Pending> = Vec::with_capacity(statements.len());
    let mut calls = Vec::new();
    let mut loc: Option<std::sync::Arc<SourceLocation>> = None;
    let mut inlining = InlineSites::new(statements, files);
    for (statement, &block) in statements.iter().zip(&names.block_of) {
        match statement {
            ast::Statement::Label(label) => {
                labels.declare(block, label.name, pending.len() as u32);
            }
            ast::Statement::Loc(l) => {
                loc = files.get(&l.file).map(|name| {
                    std::sync::Arc::new(SourceLocation {
                        file: (*name).to_owned(),
                        line: l.line,
                        column: l.column,
                        inlined_at: inlining.chain(l),
                    })
                });
            }
            ast::Statement::Directive(d) if d.name == "branchtargets" => {
                if let Some(label) = &d.label {
                    let names =
                        d.args.iter().filter_map(ast::Operand::as_name).map(ToOwned::to_owned);
                    branch_tables.insert(label.name, names.collect());
                }
            }
            ast::Statement::Instruction(instruction) => {
                let id = InstId(offset + pending.len() as u32);
                names.block.set(block);
                calls.extend(CallSite::of(id, instruction, names));
                let mut lowered = lower_instruction(out, instruction, names, base);
                lowered.inst.source.clone_from(&loc);
                pending.push(lowered);
                scope_of.push(block);
            }
            ast::Statement::Unknown(unknown) => {
                let mut inst = Inst::new(
                    unknown.range.shifted(base),
                    first_word(unknown.text),
                    InstKind::Unknown,
                );
                inst.source.clone_from(&loc);
                pending.push(Pending { inst, targets: Vec::new() });
                scope_of.push(block);
            }
            _ => {}
        }
    }

    let n = pending.len() as u32;
    let blocks = &names.blocks;
    out.insts.reserve_exact(pending.len());
    for (mut p, scope) in pending.into_iter().zip(scope_of) {
        let mut names = Vec::new();
        // A `brx.idx` through a `.branchtargets` table of this function whose labels all
        // resolve has exactly those targets: it is not left to the CFG's over-approximation
        // of indirect branches.
        let mut listed = p.inst.control.indirect && !p.targets.is_empty();
        for target in &p.targets {
            if let Some(table) = branch_tables.get(target.as_str()) {
                names.extend(table.iter().cloned());
            } else {
                listed = false;
                names.push(target.clone());
            }
        }
        for name in names {
            match labels.resolve(blocks, scope, &name) {
                Some(idx) if idx < n => p.inst.control.targets.push(InstId(offset + idx)),
                Some(_) => {
                    // A label after the last instruction: the branch leaves the function.
                    p.inst.control.exits = true;
                }
                None => listed = false,
            }
        }
        if listed {
            p.inst.control.indirect = false;
        }
        p.inst.control.targets.sort();
        p.inst.control.targets.dedup();
        out.insts.push(p.inst);
    }
    for call in &mut calls {
        call.body_start = offset;
        call.body_end = offset + n;
    }
    calls
}

/// Joins the copy of `callee`'s body (`out.insts[entry..]`, lowered with `names`) to the call
/// `site`: see [`Inliner::inline_calls`].
fn bind(
    out: &mut Function,
    site: &CallSite,
    callee: &ast::Function<'_>,
    names: &Names<'_>,
    entry: InstId,
) {
    let suffix = names.suffix.as_deref().unwrap_or("");
    let call = site.inst.index();
    let return_to = (site.inst.0 + 1 < site.body_end).then_some(InstId(site.inst.0 + 1));
    let end = out.insts.len();
    // Arguments: the caller's `st.param [param0], %rd1` before the call, the callee's
    // `ld.param %rd2, [f_param_0]`.
    for (arg, param) in site.args.iter().zip(callee.param_names()) {
        let reg = out.intern_reg(&format!("{arg}{suffix}"));
        for at in (site.body_start as usize..call).rev() {
            if matches!(out.insts[at].kind, InstKind::Call) {
                break;
            }
            if param_access(&out.insts[at], arg, false) {
                let uses = out.insts[at].uses.clone();
                into_copy(&mut out.insts[at], smallvec::smallvec![reg], uses);
            }
        }
        for inst in &mut out.insts[entry.index()..end] {
            if param_access(inst, param, true) {
                let defs = inst.defs.clone();
                into_copy(inst, defs, smallvec::smallvec![reg]);
            }
        }
    }
    // Results: the callee's `st.param [func_retval0], %r1`, the caller's `ld.param %r5,
    // [retval0]` after the call.
    let returns = callee.returns.iter().filter_map(ast::VarDecl::name);
    for (ret, result) in site.rets.iter().zip(returns) {
        let reg = out.intern_reg(&format!("{ret}{suffix}"));
        for inst in &mut out.insts[entry.index()..end] {
            if param_access(inst, result, false) {
                let uses = inst.uses.clone();
                into_copy(inst, smallvec::smallvec![reg], uses);
            }
        }
        for at in call + 1..site.body_end.min(end as u32) as usize {
            if matches!(out.insts[at].kind, InstKind::Call) {
                break;
            }
            if param_access(&out.insts[at], ret, true) {
                let defs = out.insts[at].defs.clone();
                into_copy(&mut out.insts[at], defs, smallvec::smallvec![reg]);
            }
        }
    }
    // The copy's returns go back to the instruction after the call; so does falling off its end.
    for inst in &mut out.insts[entry.index()..end] {
        if matches!(inst.kind, InstKind::Return) {
            inst.kind = InstKind::Branch;
            let falls_through = inst.guard.is_some();
            inst.control = Control {
                targets: return_to.into_iter().collect(),
                falls_through,
                exits: return_to.is_none(),
                indirect: false,
                condition: None,
            };
        }
    }
    if let Some(last) = out.insts.last().filter(|last| last.falls_to_next()) {
        let control = Control {
            targets: return_to.into_iter().collect(),
            exits: return_to.is_none(),
            ..Control::default()
        };
        let back = last.after("ret", InstKind::Branch, control);
        out.insts.push(back);
    }
    let call = &mut out.insts[call];
    call.control.targets = fencelint_ir::thin_vec![entry];
    call.control.falls_through = call.guard.is_some();
}

/// Whether `inst` is a `.param` load (`load`) or store of the parameter `name`.
fn param_access(inst: &Inst, name: &str, load: bool) -> bool {
    let space = match (&inst.kind, load) {
        (InstKind::Load(mem), true) | (InstKind::Store(mem), false) => mem.space,
        _ => return false,
    };
    let symbol = match &inst.address {
        Some(Address { base: AddrBase::Symbol(symbol), .. }) => &**symbol,
        _ => return false,
    };
    space == Space::Param && symbol == name
}

/// Makes `inst` a copy from `uses` to `defs`: a parameter passed through `.param` memory is a
/// value passed from the caller's registers to the callee's, and a slot of a stack frame is a
/// register of its own (`frames::promote_frames`).
pub(crate) fn into_copy(inst: &mut Inst, defs: fencelint_ir::Regs, mut uses: fencelint_ir::Regs) {
    let one = defs.len() == 1 && inst.guard.is_none();
    let whole = inst.address.as_ref().is_none_or(|a| a.offset == 0);
    inst.value = match (uses.as_slice(), &inst.value) {
        (&[src], _) if one && whole => Some(ValueOp::Copy(src)),
        // A constant argument stays a constant.
        (&[], &Some(ValueOp::Imm(value))) if one && whole => Some(ValueOp::Imm(value)),
        _ => None,
    };
    if let Some(guard) = inst.guard {
        uses.push(guard.reg);
    }
    inst.kind = InstKind::Move;
    inst.alu = Some(AluOp::Move);
    inst.address = None;
    inst.extra_addresses.clear();
    inst.pure_key = None;
    inst.defs = defs;
    inst.uses = uses;
}

/// The most instructions that inlining adds to a function, or as many as its own when that is
/// more: a call tree that would add more is left with calls that fall through.
const INLINE_BUDGET_MIN: usize = 16_384;

/// How deep calls inside inlined bodies are inlined too.
const INLINE_DEPTH_MAX: usize = 8;

/// Lowers the bodies of called functions into their callers ([`Inliner::inline_calls`]).
struct Inliner<'c, 'f> {
    callees: &'c dyn Callees,
    files: &'c HashMap<u32, &'f str>,
    base: u32,
    /// The caller and the functions being inlined into it, outermost first: a call of one of
    /// them (recursion) is not inlined.
    stack: Vec<String>,
    /// Bodies inlined so far, for the register suffixes.
    count: usize,
}

impl Inliner<'_, '_> {
    /// Lowers the body of the callee of each call of `calls` (instructions of `out`) after
    /// `out`'s instructions, and joins it to the call: the call jumps to the copy, the copy's
    /// `ret` jumps back to the instruction after the call, and the `.param` stores and loads
    /// that pass arguments and results become copies between the caller's registers and the
    /// copy's. A `__noinline__` device function stays a `.func` in PTX; a wait or a poll in it
    /// is a wait in its caller all the same. Each call gets its own copy (registers renamed
    /// apart), so paths through a callee return to their own caller. Not inlined: calls
    /// through a register, of a function the module only declares, recursion, calls nested
    /// deeper than [`INLINE_DEPTH_MAX`], and calls past `budget` instructions added.
    fn inline_calls(&mut self, out: &mut Function, calls: Vec<CallSite>, budget: usize) {
        // What inlining has cost so far (every body counts for one instruction at least), and
        // the size of each callee looked up (`None`: no body), so that a callee too large for
        // what is left is not looked up (parsed, on the by-function path) again.
        let mut spent = 0usize;
        let mut sizes: HashMap<String, Option<usize>> = HashMap::new();
        let mut work: Vec<(CallSite, usize)> = calls.into_iter().rev().map(|c| (c, 0)).collect();
        while let Some((site, depth)) = work.pop() {
            // The stack holds the caller and then, depth first, the callees being inlined: its
            // first `depth + 1` entries are the bodies the call sits in.
            if depth >= INLINE_DEPTH_MAX || self.stack[..=depth].contains(&site.callee) {
                continue;
            }
            match sizes.get(&site.callee) {
                Some(None) => continue,
                Some(Some(size)) if spent + size > budget => continue,
                _ => {}
            }
            let callees = self.callees;
            let mut nested = None;
            let mut size = None;
            callees.with_body(&site.callee, &mut |callee| {
                let statements = callee.statements();
                let cost = statements.len().max(1);
                size = Some(cost);
                if spent + cost > budget {
                    return;
                }
                spent += cost;
                self.count += 1;
                let names =
                    Names::new(statements, Some(format!("@{}#{}", callee.name, self.count)));
                crate::seal(&mut out.insts, "ret");
                let entry = InstId(out.insts.len() as u32);
                let calls = lower_body(out, statements, &names, self.files, self.base);
                bind(out, &site, callee, &names, entry);
                nested = Some(calls);
            });
            sizes.insert(site.callee.clone(), size);
            if let Some(calls) = nested {
                self.stack.truncate(depth + 1);
                self.stack.push(site.callee.clone());
                work.extend(calls.into_iter().rev().map(|c| (c, depth + 1)));
            }
        }
    }
}

fn first_word(text: &str) -> &str {
    text.split_whitespace().next().unwrap_or("?")
}

fn lower_instruction(
    func: &mut Function,
    instruction: &ast::Instruction<'_>,
    names: &Names<'_>,
    base: u32,
) -> Pending {
    let kind = classify(instruction);
    let mut inst = Inst::new(instruction.range.shifted(base), instruction.opcode, kind);
    if let Some(guard) = &instruction.guard {
        let reg = names.intern(func, guard.register);
        inst.guard = Some(Guard { reg, negated: guard.negated });
        inst.uses.push(reg);
    }

    let operands = &instruction.operands;
    let has_dest = has_destination(instruction) && !operands.is_empty();
    for (i, operand) in operands.iter().enumerate() {
        // Inline: most operands name one register, vectors a few.
        let mut registers: SmallVec<[&str; 4]> = SmallVec::new();
        operand.visit_names(&mut |name| {
            if names.is_reg(name) {
                registers.push(name);
            }
        });
        for name in registers {
            let reg = names.intern(func, name);
            let is_def = has_dest && i == 0 && operand.as_address().is_none();
            if is_def {
                inst.defs.push(reg);
                if instruction.mnemonic() == "wgmma" {
                    inst.uses.push(reg);
                }
            } else {
                inst.uses.push(reg);
            }
        }
    }

    // `wgmma.mma_async d, {a0, a1, a2, a3}, b_desc, ...`: A from registers.
    if let InstKind::Wgmma(WgmmaOp::Mma { register_a }) = &mut inst.kind
        && let Some(ast::OperandKind::Vector(a)) = operands.get(1).map(|o| &o.kind)
        && let Some(ast::OperandKind::Name(first)) = a.first().map(|o| &o.kind)
        && names.is_reg(first)
    {
        *register_a = Some(names.intern(func, first));
    }

    // Memory operands: the first address is the accessed location.
    let mut addresses = operands.iter().filter_map(|o| address_of(func, o, names));
    if touches_memory(&inst.kind) {
        inst.address = addresses.next();
        let rest: Vec<Address> = addresses.collect();
        add_extra_addresses(&mut inst, instruction, rest);
    }

    inst.value = value_op(func, instruction, names);
    inst.alu = alu_op(instruction);
    if inst.guard.is_none() && inst.defs.len() == 1 && has_dest {
        inst.pure_key = pure_key(instruction, names);
    }
    set_control(&mut inst, instruction);
    let targets = if matches!(inst.kind, InstKind::Branch) {
        instruction.target_names().map(ToOwned::to_owned).collect()
    } else {
        Vec::new()
    };
    Pending { inst, targets }
}

fn add_extra_addresses(inst: &mut Inst, instruction: &ast::Instruction<'_>, rest: Vec<Address>) {
    match &inst.kind {
        InstKind::Async(AsyncOp::BulkTensor { dir, .. }) => {
            // `[dst], [tmap, {coords}], [mbar]` for loads; `[tmap, {coords}], [src]` for stores.
            let tensor = instruction.operands.iter().find_map(|o| match &o.kind {
                ast::OperandKind::TensorAddress(items) => items.first().and_then(|first| {
                    first
                        .as_name()
                        .map(|name| Address { base: AddrBase::Symbol(name.into()), offset: 0 })
                }),
                _ => None,
            });
            if let Some(map) = tensor {
                inst.extra_addresses.push((AddressRole::Tensormap, map));
            }
            let mut rest = rest.into_iter();
            if *dir == BulkDir::GlobalToShared {
                if let Some(mbar) = rest.next_back() {
                    inst.extra_addresses.push((AddressRole::Mbarrier, mbar));
                }
            } else if let Some(src) = rest.next() {
                inst.extra_addresses.push((AddressRole::Source, src));
            }
        }
        InstKind::Async(AsyncOp::Bulk { dir, .. }) => {
            let mut rest = rest.into_iter();
            if let Some(src) = rest.next() {
                inst.extra_addresses.push((AddressRole::Source, src));
            }
            if matches!(dir, BulkDir::GlobalToShared | BulkDir::SharedToShared)
                && let Some(mbar) = rest.next()
            {
                inst.extra_addresses.push((AddressRole::Mbarrier, mbar));
            }
        }
        InstKind::Async(AsyncOp::StAsync | AsyncOp::RedAsync)
        | InstKind::Tcgen05(Tcgen05Op::Commit { .. }) => {
            if let Some(mbar) = rest.into_iter().next_back() {
                inst.extra_addresses.push((AddressRole::Mbarrier, mbar));
            }
        }
        InstKind::Async(AsyncOp::CpAsync) => {
            if let Some(src) = rest.into_iter().next() {
                inst.extra_addresses.push((AddressRole::Source, src));
            }
        }
        _ => {}
    }
}

fn touches_memory(kind: &InstKind) -> bool {
    matches!(
        kind,
        InstKind::Load(_)
            | InstKind::Store(_)
            | InstKind::Atomic { .. }
            | InstKind::Multimem { .. }
            | InstKind::Mbarrier(_)
            | InstKind::Async(_)
            | InstKind::Tensormap(_)
            | InstKind::Tcgen05(_)
            | InstKind::Fence(Fence { kind: FenceKind::ProxyTensormapAcquire, .. })
    )
}

fn address_of(
    func: &mut Function,
    operand: &ast::Operand<'_>,
    names: &Names<'_>,
) -> Option<Address> {
    let address = operand.as_address()?;
    let base = match address.base {
        Some(name) if names.is_reg(name) => AddrBase::Reg(names.intern(func, name)),
        Some(name) => AddrBase::Symbol(name.into()),
        None => AddrBase::Absolute,
    };
    Some(Address { base, offset: address.offset })
}

fn value_op(
    func: &mut Function,
    instruction: &ast::Instruction<'_>,
    names: &Names<'_>,
) -> Option<ValueOp> {
    let ops = &instruction.operands;
    let src = ops.get(1)?;
    let reg_of = |func: &mut Function, op: &ast::Operand<'_>| {
        op.as_name().filter(|n| names.is_reg(n)).map(|n| names.intern(func, n))
    };
    match instruction.mnemonic() {
        "ld" if instruction.has_modifier("param") => {
            let address = src.as_address()?;
            address.base.filter(|b| !names.is_reg(b)).map(|b| ValueOp::Param(b.into()))
        }
        // An argument passed as a constant (`st.param.b32 [param1+0], 2`): what the callee's
        // copy reads, once the call is inlined (`bind`).
        "st" if instruction.has_modifier("param") => src.as_integer().map(ValueOp::Imm),
        "mov" | "cvta" | "cvt" => {
            if let Some(reg) = reg_of(func, src) {
                Some(ValueOp::Copy(reg))
            } else if let Some(value) = src.as_integer() {
                Some(ValueOp::Imm(value))
            } else {
                src.as_name().map(|n| ValueOp::SymbolAddr(n.into()))
            }
        }
        "mapa" => reg_of(func, src).map(ValueOp::Mapa),
        "shr" => {
            let amount = ops.get(2)?.as_integer()?;
            reg_of(func, src).map(|reg| ValueOp::ShrImm(reg, amount))
        }
        // Only at 32 and 64 bits, where a scaled thread index cannot wrap.
        "shl" if matches!(instruction.modifiers(), ["b32" | "b64"]) => {
            let amount = ops.get(2)?.as_integer().filter(|n| (0..31).contains(n))?;
            reg_of(func, src).map(|reg| ValueOp::MulImm(reg, 1 << amount))
        }
        "mul"
            if matches!(
                instruction.modifiers(),
                ["lo", "s32" | "u32" | "s64" | "u64"] | ["wide", "s32" | "u32"]
            ) && ops.len() == 3 =>
        {
            let other = ops.get(2)?;
            let (reg, factor) = match (reg_of(func, src), other.as_integer()) {
                (Some(reg), Some(factor)) => (reg, factor),
                _ => (reg_of(func, other)?, src.as_integer()?),
            };
            (factor >= 0).then_some(ValueOp::MulImm(reg, factor))
        }
        // Values from other lanes: `shfl.sync.idx.b32 %r2, %r1, 0, 31, -1` is `%r1` of lane 0
        // (`%r2|%p1` writes a predicate too).
        "shfl" => Some(reg_of(func, src).map_or(ValueOp::Varying, ValueOp::Shuffle)),
        "match" | "redux" => Some(ValueOp::Varying),
        // `selp.b32 %r1, 1, 0, %p1`: one of two constants.
        "selp" => Some(ValueOp::Either(src.as_integer()?, ops.get(2)?.as_integer()?)),
        // A fetch-and-add of a constant, `atom.global.add.u32 %r1, [%rd1], 1`, or of a
        // register, `atom.global.add.u32 %r1, [%rd1], %r2`.
        "atom" if instruction.has_modifier("add") && ops.len() == 3 => match ops[2].as_integer() {
            Some(amount) => Some(ValueOp::FetchAdd(amount)),
            None => reg_of(func, &ops[2]).map(ValueOp::FetchAddReg),
        },
        "and" | "or" if instruction.modifiers() == ["pred"] && ops.len() == 3 => {
            let (a, b) = (reg_of(func, src)?, reg_of(func, ops.get(2)?)?);
            Some(if instruction.mnemonic() == "and" {
                ValueOp::PredAnd(a, b)
            } else {
                ValueOp::PredOr(a, b)
            })
        }
        "and" if ops.len() == 3 && matches!(instruction.modifiers(), ["b16" | "b32" | "b64"]) => {
            let other = ops.get(2)?;
            match (reg_of(func, src), other.as_integer()) {
                (Some(reg), Some(imm)) => Some(ValueOp::AndImm(reg, imm)),
                (Some(a), None) => reg_of(func, other).map(|b| ValueOp::And(a, b)),
                _ => match (src.as_integer(), reg_of(func, other)) {
                    (Some(imm), Some(reg)) => Some(ValueOp::AndImm(reg, imm)),
                    _ => None,
                },
            }
        }
        "or" if ops.len() == 3 && matches!(instruction.modifiers(), ["b32" | "b64"]) => {
            Some(ValueOp::Or(reg_of(func, src)?, reg_of(func, ops.get(2)?)?))
        }
        "vote" if ops.len() >= 2 && instruction.modifiers().last() == Some(&"pred") => {
            let all = match instruction.modifiers() {
                ["sync", mode, "pred"] | [mode, "pred"] => *mode == "all",
                _ => return None,
            };
            if !all && !instruction.modifiers().contains(&"any") {
                return None;
            }
            let (name, negated) = match src.kind {
                ast::OperandKind::Name(name) => (name, false),
                ast::OperandKind::Negated(name) => (name, true),
                _ => return None,
            };
            names.is_reg(name).then(|| ValueOp::Vote {
                all,
                src: names.intern(func, name),
                negated,
            })
        }
        "not" if instruction.modifiers() == ["pred"] && ops.len() == 2 => {
            reg_of(func, src).map(ValueOp::PredNot)
        }
        "setp" => {
            // Only `setp.<cmp>.<type> p, a, b` (no combining predicate, no second destination).
            let [relation, ty] = instruction.modifiers() else { return None };
            if ops.len() != 3 {
                return None;
            }
            let mut compare = int_compare(relation, ty)?;
            let other = ops.get(2)?;
            match (reg_of(func, src), other.as_integer()) {
                (Some(reg), Some(imm)) => return Some(ValueOp::Compare(compare, reg, imm)),
                (Some(a), None) => {
                    return reg_of(func, other).map(|b| ValueOp::CompareRegs(compare, a, b));
                }
                (None, _) => {}
            }
            // The constant first: `setp.gt.s32 %p, 5, %r` is `%r < 5`.
            let (imm, reg) = (src.as_integer()?, reg_of(func, other)?);
            compare.relation = compare.relation.swapped();
            Some(ValueOp::Compare(compare, reg, imm))
        }
        "add" | "sub" => {
            let other = ops.get(2)?;
            let sign = if instruction.mnemonic() == "sub" { -1 } else { 1 };
            match (reg_of(func, src), other.as_integer()) {
                (Some(reg), Some(imm)) => Some(ValueOp::AddImm(reg, sign * imm)),
                _ if sign == 1 => match (src.as_integer(), reg_of(func, other)) {
                    (Some(imm), Some(reg)) => Some(ValueOp::AddImm(reg, imm)),
                    (None, Some(b)) => reg_of(func, src).map(|a| ValueOp::Sum(a, b)),
                    _ => None,
                },
                _ => None,
            }
        }
        _ => None,
    }
}

/// The family of an arithmetic or logic instruction (`setp` and `set` by their types).
fn alu_op(instruction: &ast::Instruction<'_>) -> Option<AluOp> {
    let is_float = |ty: &str| matches!(ty, "f16" | "f16x2" | "bf16" | "bf16x2" | "f32" | "f64");
    match instruction.mnemonic() {
        "setp" if instruction.modifiers().iter().any(|m| is_float(m)) => Some(AluOp::FloatCompare),
        "setp" => Some(AluOp::IntCompare),
        "testp" => Some(AluOp::FloatCompare),
        // `set.eq.u32.f32`: the last type is the sources'.
        "set" if instruction.modifiers().last().is_some_and(|m| is_float(m)) => {
            Some(AluOp::FloatSet)
        }
        "add" | "sub" => Some(AluOp::Add),
        "mad" => Some(AluOp::MultiplyAdd),
        "and" | "or" | "xor" | "not" => Some(AluOp::BitLogic),
        "selp" => Some(AluOp::Select),
        "mov" => Some(AluOp::Move),
        "shr" => Some(AluOp::ShiftRight),
        "cvta" if !instruction.has_modifier("to") => Some(AluOp::ToGeneric(space_of(instruction))),
        _ => None,
    }
}

/// The comparison of `setp.<relation>.<type>` on integers (`None` for floating-point types).
fn int_compare(relation: &str, ty: &str) -> Option<IntCompare> {
    let (kind, bits) = (ty.get(..1)?, ty.get(1..)?);
    let bits = match bits {
        "16" => 16,
        "32" => 32,
        "64" => 64,
        _ => return None,
    };
    let signed = match kind {
        "s" => true,
        "u" | "b" => false,
        _ => return None,
    };
    let (relation, signed) = match relation {
        "eq" => (Relation::Eq, signed),
        "ne" => (Relation::Ne, signed),
        // Bit types have only `eq` and `ne`.
        _ if kind == "b" => return None,
        "lt" => (Relation::Lt, signed),
        "le" => (Relation::Le, signed),
        "gt" => (Relation::Gt, signed),
        "ge" => (Relation::Ge, signed),
        "lo" => (Relation::Lt, false),
        "ls" => (Relation::Le, false),
        "hi" => (Relation::Gt, false),
        "hs" => (Relation::Ge, false),
        _ => return None,
    };
    Some(IntCompare { relation, signed, bits })
}

/// [`Inst::pure_key`] of an instruction with one destination register and no guard: the opcode
/// and the source operands that are not registers, when the mnemonic computes its result from
/// its operands alone and every source is a register or a literal.
fn pure_key(instruction: &ast::Instruction<'_>, names: &Names<'_>) -> Option<std::num::NonZeroU64> {
    if !is_pure_mnemonic(instruction.mnemonic()) {
        return None;
    }
    let mut hasher = rustc_hash::FxHasher::default();
    instruction.opcode.hash(&mut hasher);
    for operand in instruction.operands.iter().skip(1) {
        match operand.kind {
            ast::OperandKind::Name(name) if names.is_reg(name) => 0u8.hash(&mut hasher),
            ast::OperandKind::Negated(name) if names.is_reg(name) => 1u8.hash(&mut hasher),
            ast::OperandKind::Integer(value) => (2u8, value).hash(&mut hasher),
            ast::OperandKind::Float(value) => (3u8, value.to_bits()).hash(&mut hasher),
            // The address of a variable or parameter: a constant.
            ast::OperandKind::Name(name) => (4u8, name).hash(&mut hasher),
            _ => return None,
        }
    }
    // Never zero, so that the key and its absence take one word.
    std::num::NonZeroU64::new(hasher.finish().max(1))
}

/// Whether `mnemonic` computes its result from its operands alone (no memory, no clock, no
/// other thread).
fn is_pure_mnemonic(mnemonic: &str) -> bool {
    matches!(
        mnemonic,
        "abs"
            | "add"
            | "and"
            | "bfe"
            | "bfi"
            | "bfind"
            | "bmsk"
            | "brev"
            | "clz"
            | "cnot"
            | "cvt"
            | "cvta"
            | "div"
            | "dp2a"
            | "dp4a"
            | "fma"
            | "lop3"
            | "mad"
            | "mad24"
            | "max"
            | "min"
            | "mov"
            | "mul"
            | "mul24"
            | "neg"
            | "not"
            | "or"
            | "popc"
            | "prmt"
            | "rem"
            | "sad"
            | "selp"
            | "set"
            | "setp"
            | "shf"
            | "shl"
            | "shr"
            | "slct"
            | "sub"
            | "szext"
            | "xor"
    )
}

fn set_control(inst: &mut Inst, instruction: &ast::Instruction<'_>) {
    let guarded = instruction.guard.is_some();
    match &inst.kind {
        InstKind::Branch => {
            inst.control = Control { falls_through: guarded, ..Control::default() };
            if instruction.mnemonic() == "brx" {
                inst.control.indirect = true;
            }
        }
        InstKind::Exit | InstKind::Return => {
            inst.control = Control { falls_through: guarded, exits: true, ..Control::default() };
        }
        _ => {}
    }
}

/// Whether the first operand is written.
fn has_destination(instruction: &ast::Instruction<'_>) -> bool {
    let t = &instruction.tokens;
    let second = t.get(1).copied().unwrap_or("");
    match instruction.mnemonic() {
        "st" | "red" | "bar" | "barrier" | "fence" | "membar" | "cp" | "tensormap" | "bra"
        | "brx" | "ret" | "exit" | "trap" | "prefetch" | "prefetchu" | "pmevent" | "nanosleep"
        | "griddepcontrol" | "setmaxnreg" | "discard" | "applypriority" | "call" | "stmatrix" => {
            false
        }
        "wmma" => second != "store",
        "mbarrier" => {
            matches!(second, "arrive" | "arrive_drop" | "test_wait" | "try_wait" | "pending_count")
        }
        "multimem" => second == "ld_reduce",
        "tcgen05" => second == "ld",
        "wgmma" => second == "mma_async",
        _ => true,
    }
}

// ---------------------------------------------------------------------------------------------
// Classification.

fn sem_of(instruction: &ast::Instruction<'_>) -> Option<Sem> {
    instruction.modifiers().iter().find_map(|m| match *m {
        "weak" => Some(Sem::Weak),
        "relaxed" => Some(Sem::Relaxed),
        "volatile" => Some(Sem::Volatile),
        "mmio" => Some(Sem::Mmio),
        "acquire" => Some(Sem::Acquire),
        "release" => Some(Sem::Release),
        "acq_rel" => Some(Sem::AcqRel),
        "sc" => Some(Sem::Sc),
        _ => None,
    })
}

fn scope_of(instruction: &ast::Instruction<'_>) -> Option<Scope> {
    instruction.modifiers().iter().find_map(|m| match *m {
        "cta" => Some(Scope::Cta),
        "cluster" => Some(Scope::Cluster),
        "gpu" => Some(Scope::Gpu),
        "sys" => Some(Scope::Sys),
        _ => None,
    })
}

fn space_of(instruction: &ast::Instruction<'_>) -> Space {
    instruction
        .modifiers()
        .iter()
        .find_map(|m| match *m {
            "global" => Some(Space::Global),
            "shared" | "shared::cta" => Some(Space::SharedCta),
            "shared::cluster" => Some(Space::SharedCluster),
            "local" => Some(Space::Local),
            "param" => Some(Space::Param),
            "const" => Some(Space::Const),
            _ => None,
        })
        .unwrap_or(Space::Generic)
}

fn width_of(instruction: &ast::Instruction<'_>) -> (Option<u32>, u8) {
    let mut width = None;
    let mut vector = 1;
    for m in instruction.modifiers() {
        if let Some(n) = m.strip_prefix('v').and_then(|n| n.parse::<u8>().ok()) {
            vector = n;
        } else if ast::is_type_word(m) {
            width = m.get(1..).and_then(|n| n.parse::<u32>().ok()).or(width);
        }
    }
    (width, vector)
}

fn mem_access(
    instruction: &ast::Instruction<'_>,
    default: Sem,
    default_scope: Option<Scope>,
) -> MemAccess {
    let sem = sem_of(instruction).unwrap_or(default);
    let scope = match sem {
        Sem::Weak => None,
        Sem::Volatile | Sem::Mmio => scope_of(instruction).or(Some(Scope::Sys)),
        _ => scope_of(instruction).or(default_scope),
    };
    let (width, vector) = width_of(instruction);
    let mut mem = MemAccess::new(space_of(instruction), sem, scope);
    mem.width = width;
    mem.vector = vector;
    mem.non_coherent = instruction.has_modifier("nc");
    mem.matrix = matches!(instruction.mnemonic(), "ldmatrix" | "stmatrix");
    mem
}

/// Classifies one PTX instruction.
pub fn classify(instruction: &ast::Instruction<'_>) -> InstKind {
    let t = &instruction.tokens;
    let second = t.get(1).copied().unwrap_or("");
    match instruction.mnemonic() {
        // `ldmatrix`/`stmatrix` are weak shared-memory accesses of the generic proxy.
        "ld" | "ldu" | "ldmatrix" => InstKind::Load(mem_access(instruction, Sem::Weak, None)),
        "st" if second == "async" => InstKind::Async(AsyncOp::StAsync),
        "st" | "stmatrix" => InstKind::Store(mem_access(instruction, Sem::Weak, None)),
        "atom" => InstKind::Atomic {
            mem: mem_access(instruction, Sem::Relaxed, Some(Scope::Gpu)),
            returns: true,
        },
        "red" if second == "async" => InstKind::Async(AsyncOp::RedAsync),
        "red" => InstKind::Atomic {
            mem: mem_access(instruction, Sem::Relaxed, Some(Scope::Gpu)),
            returns: false,
        },
        "multimem" => {
            let (op, default, scope) = match second {
                "ld_reduce" => (MultimemOp::LdReduce, Sem::Weak, None),
                "st" => (MultimemOp::St, Sem::Weak, None),
                _ => (MultimemOp::Red, Sem::Relaxed, Some(Scope::Sys)),
            };
            let mut mem = mem_access(instruction, default, scope);
            mem.space = Space::Global;
            InstKind::Multimem { op, mem }
        }
        "fence" => InstKind::Fence(classify_fence(instruction)),
        "membar" => {
            if instruction.has_modifier("proxy") {
                InstKind::Fence(Fence {
                    kind: FenceKind::ProxyAlias,
                    sem: Sem::Sc,
                    scope: Some(Scope::Sys),
                })
            } else {
                let scope = match second {
                    "cta" => Scope::Cta,
                    "sys" => Scope::Sys,
                    _ => Scope::Gpu,
                };
                InstKind::Fence(Fence { kind: FenceKind::Plain, sem: Sem::Sc, scope: Some(scope) })
            }
        }
        "bar" | "barrier" => classify_barrier(instruction),
        "mbarrier" => classify_mbarrier(instruction),
        "cp" => classify_cp(instruction),
        "tensormap" => InstKind::Tensormap(if second == "replace" {
            TensormapOp::Replace
        } else {
            TensormapOp::CpFenceproxy
        }),
        "tcgen05" => classify_tcgen05(instruction),
        "wgmma" => InstKind::Wgmma(match second {
            "fence" => WgmmaOp::Fence,
            "commit_group" => WgmmaOp::Commit,
            "wait_group" => WgmmaOp::Wait,
            _ => WgmmaOp::Mma { register_a: None },
        }),
        "elect" => InstKind::Elect,
        "setp" | "set" => InstKind::Compare,
        "bra" | "brx" => InstKind::Branch,
        "call" => InstKind::Call,
        "ret" => InstKind::Return,
        "exit" | "trap" => InstKind::Exit,
        "mov" | "cvta" | "cvt" | "add" | "sub" | "mapa" | "selp" | "and" | "or" | "xor" | "not"
        | "shl" | "shr" | "mul" | "mad" => InstKind::Move,
        _ => InstKind::Other,
    }
}

fn classify_fence(instruction: &ast::Instruction<'_>) -> Fence {
    let t = &instruction.tokens;
    let scope = scope_of(instruction);
    let sem = sem_of(instruction);
    if instruction.has_modifier("proxy") {
        let which = t.get(2).copied().unwrap_or("");
        let kind = if which.starts_with("tensormap") {
            if sem == Some(Sem::Acquire) {
                FenceKind::ProxyTensormapAcquire
            } else {
                FenceKind::ProxyTensormapRelease
            }
        } else if which == "alias" {
            FenceKind::ProxyAlias
        } else if which.starts_with("async::")
            || instruction.modifiers().iter().any(|m| m.starts_with("sync_restrict"))
        {
            FenceKind::ProxyAsyncRestricted
        } else if which == "async" {
            let space = instruction.modifiers().iter().find_map(|m| match *m {
                "global" => Some(Space::Global),
                "shared::cta" | "shared" => Some(Space::SharedCta),
                "shared::cluster" => Some(Space::SharedCluster),
                _ => None,
            });
            FenceKind::ProxyAsync(space)
        } else {
            FenceKind::Plain
        };
        let default_sem = if kind == FenceKind::ProxyAlias { Sem::Sc } else { Sem::AcqRel };
        let scope = scope.or(if kind == FenceKind::ProxyAlias { Some(Scope::Sys) } else { None });
        return Fence { kind, sem: sem.unwrap_or(default_sem), scope };
    }
    if instruction.has_modifier("mbarrier_init") {
        return Fence {
            kind: FenceKind::MbarrierInit,
            sem: Sem::Release,
            scope: scope.or(Some(Scope::Cluster)),
        };
    }
    if instruction.modifiers().iter().any(|m| m.starts_with("sync_restrict")) {
        return Fence {
            kind: FenceKind::SyncRestrictShared,
            sem: sem.unwrap_or(Sem::AcqRel),
            scope,
        };
    }
    Fence { kind: FenceKind::Plain, sem: sem.unwrap_or(Sem::AcqRel), scope }
}

fn classify_barrier(instruction: &ast::Instruction<'_>) -> InstKind {
    let m = instruction.modifiers();
    let first = m.first().copied().unwrap_or("");
    let barrier = match first {
        "warp" => Barrier::WarpSync,
        "cluster" => {
            if instruction.has_modifier("wait") {
                Barrier::ClusterWait
            } else {
                Barrier::ClusterArrive { release: !instruction.has_modifier("relaxed") }
            }
        }
        _ if instruction.has_modifier("arrive") => Barrier::CtaArrive,
        _ if instruction.has_modifier("red") => Barrier::CtaReduce,
        _ => Barrier::CtaSync { partial: instruction.operands.len() >= 2 },
    };
    InstKind::Barrier(barrier)
}

fn classify_mbarrier(instruction: &ast::Instruction<'_>) -> InstKind {
    let second = instruction.tokens.get(1).copied().unwrap_or("");
    let scope = scope_of(instruction).unwrap_or(Scope::Cta);
    let remote = instruction.has_modifier("shared::cluster");
    let op = match second {
        "init" => MbarrierOp::Init,
        "inval" => MbarrierOp::Inval,
        "arrive" | "arrive_drop" => MbarrierOp::Arrive {
            expect_tx: instruction.has_modifier("expect_tx"),
            drop: second == "arrive_drop",
            sem: sem_of(instruction).unwrap_or(Sem::Release),
            scope,
            remote,
        },
        "expect_tx" => MbarrierOp::ExpectTx,
        "complete_tx" => MbarrierOp::CompleteTx,
        "test_wait" | "try_wait" => MbarrierOp::Wait {
            try_wait: second == "try_wait",
            parity: instruction.has_modifier("parity"),
            sem: sem_of(instruction).unwrap_or(Sem::Acquire),
            scope,
        },
        "pending_count" => MbarrierOp::PendingCount,
        _ => return InstKind::Other,
    };
    InstKind::Mbarrier(op)
}

fn bulk_dir(instruction: &ast::Instruction<'_>) -> BulkDir {
    let spaces: Vec<&str> = instruction
        .modifiers()
        .iter()
        .copied()
        .filter(|m| matches!(*m, "global" | "shared::cta" | "shared::cluster" | "shared"))
        .collect();
    match spaces.as_slice() {
        [dst, "global", ..] if dst.starts_with("shared") => BulkDir::GlobalToShared,
        ["global", src, ..] if src.starts_with("shared") => BulkDir::SharedToGlobal,
        [a, b, ..] if a.starts_with("shared") && b.starts_with("shared") => BulkDir::SharedToShared,
        _ => BulkDir::Unknown,
    }
}

fn classify_cp(instruction: &ast::Instruction<'_>) -> InstKind {
    let t = &instruction.tokens;
    let reduce = t.get(1) == Some(&"reduce");
    let multicast = is_multicast(instruction);
    let rest: Vec<&str> = t.iter().skip(if reduce { 2 } else { 1 }).copied().collect();
    if rest.first() != Some(&"async") {
        return InstKind::Other;
    }
    let op = match rest.get(1).copied().unwrap_or("") {
        "commit_group" => AsyncOp::CpAsyncCommit,
        "wait_group" => AsyncOp::CpAsyncWait { pending: pending_count(instruction), all: false },
        "wait_all" => AsyncOp::CpAsyncWait { pending: Some(0), all: true },
        "mbarrier" => return InstKind::Mbarrier(MbarrierOp::CpAsyncArrive),
        "bulk" => match rest.get(2).copied().unwrap_or("") {
            "commit_group" => AsyncOp::BulkCommit,
            "wait_group" => AsyncOp::BulkWait {
                pending: pending_count(instruction),
                read_only: instruction.has_modifier("read"),
            },
            "prefetch" => AsyncOp::BulkPrefetch,
            "tensor" => AsyncOp::BulkTensor { dir: bulk_dir(instruction), reduce, multicast },
            _ => AsyncOp::Bulk { dir: bulk_dir(instruction), reduce, multicast },
        },
        _ => AsyncOp::CpAsync,
    };
    InstKind::Async(op)
}

fn pending_count(instruction: &ast::Instruction<'_>) -> Option<u32> {
    instruction.operands.first()?.as_integer().and_then(|n| u32::try_from(n).ok())
}

/// `.multicast::cluster` (a bulk copy or a `tcgen05.commit` that signals every CTA of a mask).
fn is_multicast(instruction: &ast::Instruction<'_>) -> bool {
    instruction.modifiers().iter().any(|m| m.starts_with("multicast"))
}

fn classify_tcgen05(instruction: &ast::Instruction<'_>) -> InstKind {
    let second = instruction.tokens.get(1).copied().unwrap_or("");
    let op = match second {
        "alloc" => Tcgen05Op::Alloc,
        "dealloc" => Tcgen05Op::Dealloc,
        "relinquish_alloc_permit" => Tcgen05Op::Relinquish,
        "ld" => Tcgen05Op::Ld,
        "st" => Tcgen05Op::St,
        "wait::ld" => Tcgen05Op::WaitLd,
        "wait::st" => Tcgen05Op::WaitSt,
        "mma" => Tcgen05Op::Mma,
        "cp" => Tcgen05Op::Cp,
        "shift" => Tcgen05Op::Shift,
        "commit" => Tcgen05Op::Commit { multicast: is_multicast(instruction) },
        "fence::before_thread_sync" => {
            return InstKind::Fence(Fence {
                kind: FenceKind::Tcgen05Before,
                sem: Sem::Release,
                scope: None,
            });
        }
        "fence::after_thread_sync" => {
            return InstKind::Fence(Fence {
                kind: FenceKind::Tcgen05After,
                sem: Sem::Acquire,
                scope: None,
            });
        }
        _ => return InstKind::Other,
    };
    InstKind::Tcgen05(op)
}

#[cfg(test)]
mod tests {
    use fencelint_source::FileId;

    /// The one function of a PTX text that lowers without diagnostics.
    fn only_function(text: &str) -> fencelint_ir::Function {
        let lowered = super::lower_text(FileId(0), text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        lowered.modules.into_iter().next().unwrap().functions.remove(0)
    }

    fn reg_named(func: &fencelint_ir::Function, name: &str) -> fencelint_ir::Reg {
        fencelint_ir::Reg(func.regs.iter().position(|r| r == name).unwrap() as u32)
    }

    /// Hand-written PTX: the call sites of inlined code are followed from `.loc` to `.loc` out
    /// to the kernel's own line; a location inlined at two sites takes the latest `.loc` that
    /// names it; a cycle stops; a site in an undeclared file ends the chain.
    #[test]
    fn inlined_code_carries_its_call_sites() {
        let text = ".version 8.5\n.target sm_90\n.address_size 64\n\
             .visible .entry k()\n{\n.reg .b32 %r<9>;\n\
             .loc 1 10 3\n\
             mov.u32 %r1, 1;\n\
             .loc 2 20 5, function_name f, inlined_at 1 11 3\n\
             .loc 3 30 7, function_name g, inlined_at 2 20 5\n\
             mov.u32 %r2, 2;\n\
             .loc 2 20 5, function_name f, inlined_at 1 12 3\n\
             .loc 3 30 7, function_name g, inlined_at 2 20 5\n\
             mov.u32 %r3, 3;\n\
             .loc 3 31 7, function_name g, inlined_at 3 31 7\n\
             mov.u32 %r4, 4;\n\
             .loc 3 32 7, function_name g, inlined_at 9 1 1\n\
             mov.u32 %r5, 5;\n\
             ret;\n}\n\
             .file 1 \"k.cu\"\n.file 2 \"f.h\"\n.file 3 \"g.h\"\n";
        let lowered = super::lower_text(FileId(0), text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let func = &lowered.modules[0].functions[0];
        let frames = |index: usize| -> Vec<String> {
            let source = func.insts[index].source.as_ref().expect("line info");
            source.frames().map(|f| format!("{}:{}:{}", f.file, f.line, f.column)).collect()
        };
        assert_eq!(frames(0), ["k.cu:10:3"]);
        assert_eq!(frames(1), ["g.h:30:7", "f.h:20:5", "k.cu:11:3"]);
        assert_eq!(frames(2), ["g.h:30:7", "f.h:20:5", "k.cu:12:3"]);
        assert_eq!(frames(3), ["g.h:31:7", "g.h:31:7"]);
        assert_eq!(frames(4), ["g.h:32:7"]);
        assert!(func.insts[4].source.as_ref().unwrap().inlined_at.is_none());
    }

    /// `brx.idx` through a `.branchtargets` table gets exactly the table's labels; through a
    /// table that names a label the function lacks, it stays indirect.
    #[test]
    fn brx_through_a_table_has_exactly_its_targets() {
        let body = |table: &str| {
            format!(
                ".version 8.5\n.target sm_90\n.address_size 64\n\
                 .visible .entry k(.param .u32 p)\n{{\n.reg .b32 %r<3>;\n\
                 ld.param.u32 %r1, [p];\n\
                 ts: .branchtargets {table};\n\
                 brx.idx %r1, ts;\n\
                 A: mov.u32 %r2, 1;\nret;\n\
                 B: mov.u32 %r2, 2;\nret;\n\
                 C: mov.u32 %r2, 3;\nret;\n}}\n"
            )
        };
        let lower = |text: &str| {
            let lowered = super::lower_text(FileId(0), text, 0);
            assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
            let func = lowered.modules.into_iter().next().unwrap().functions.remove(0);
            let brx = func.insts.iter().find(|i| i.opcode.starts_with("brx")).unwrap().clone();
            // The three `mov`s are the first instructions of `A`, `B` and `C`.
            let expected: Vec<u32> = (0..func.insts.len() as u32)
                .filter(|&i| func.insts[i as usize].opcode.starts_with("mov"))
                .collect();
            (brx, expected)
        };
        let (brx, expected) = lower(&body("A, B, C"));
        assert!(!brx.control.indirect);
        let targets: Vec<u32> = brx.control.targets.iter().map(|t| t.0).collect();
        assert_eq!(targets, expected);

        let (brx, _) = lower(&body("A, B, Z"));
        assert!(brx.control.indirect, "a table with an unknown label stays indirect");
    }

    /// A label is local to the `{ }` block that declares it: each pasted wait block branches to
    /// its own `WAIT` and `DONE`, and a branch inside a block reaches a label of an enclosing
    /// scope, declared before or after it, when the block has none of that name.
    #[test]
    fn labels_are_local_to_their_block() {
        // Hand-written, in the shape of inline asm waits.
        let wait = |n: u32| {
            format!(
                "{{\n.reg .pred ready;\nWAIT:\nld.relaxed.gpu.global.u32 %r{n}, [%rd1];\n\
                 setp.ne.u32 ready, %r{n}, 0;\n@ready bra DONE;\nbra WAIT;\nDONE:\n}}\n"
            )
        };
        let text = format!(
            ".version 8.5\n.target sm_90\n.address_size 64\n\
             .visible .entry k(.param .u64 p)\n{{\n.reg .b32 %r<9>;\n.reg .b64 %rd<3>;\n\
             .reg .pred %p<2>;\nld.param.u64 %rd1, [p];\n{}st.global.u32 [%rd1], 1;\n{}\
             {{\n@%p1 bra OUT;\n}}\nst.global.u32 [%rd1], 2;\nOUT:\nret;\n}}\n",
            wait(1),
            wait(2)
        );
        let lowered = super::lower_text(FileId(0), &text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let func = lowered.modules.into_iter().next().unwrap().functions.remove(0);
        let at = |prefix: &str| -> Vec<u32> {
            (0..func.insts.len() as u32)
                .filter(|&i| func.insts[i as usize].opcode.starts_with(prefix))
                .collect()
        };
        let targets = |i: u32| -> Vec<u32> {
            func.insts[i as usize].control.targets.iter().map(|t| t.0).collect()
        };
        let (loads, stores, branches) = (at("ld.relaxed"), at("st.global"), at("bra"));
        let ret = at("ret")[0];
        // Each block: `@ready bra DONE` to the instruction after its `bra WAIT`, `bra WAIT` to
        // its own load.
        for (block, &load) in loads.iter().enumerate() {
            let (done, again) = (branches[2 * block], branches[2 * block + 1]);
            assert_eq!(targets(again), [load], "block {block}: `bra WAIT`");
            assert_eq!(targets(done), [again + 1], "block {block}: `@ready bra DONE`");
        }
        // Between the blocks, the store follows the first block's `bra WAIT`.
        assert_eq!(stores[0], branches[1] + 1);
        // The last block's branch goes to `OUT`, declared after it in the body.
        assert_eq!(targets(branches[4]), [ret]);
    }

    /// A register declared in a `{ }` block is the block's own: it shadows one of the same name
    /// outside (the compiler's `%p1` under inline asm's `.reg .pred %p1`), blocks beside each
    /// other each have theirs, and a block nested in the declaring one sees the declaring one's.
    #[test]
    fn registers_are_local_to_their_block() {
        // Hand-written.
        let text = ".version 8.5\n.target sm_90\n.address_size 64\n\
                    .visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<2>;\n\
                    .reg .pred %p<2>;\n\
                    ld.param.u64 %rd1, [p];\n\
                    ld.volatile.global.u32 %r1, [%rd1];\n\
                    setp.eq.u32 %p1, %r1, 0;\n\
                    {\n.reg .pred %p1;\n.reg .b32 t<2>;\nsetp.ne.u32 %p1, %r1, 1;\n\
                    mov.u32 t1, 7;\n{\n@%p1 st.global.u32 [%rd1+4], t1;\n}\n}\n\
                    {\n.reg .pred %p1;\nsetp.ne.u32 %p1, %r1, 2;\n}\n\
                    @%p1 bra DONE;\n\
                    st.global.u32 [%rd1+8], %r1;\n\
                    DONE:\nret;\n}\n";
        let lowered = super::lower_text(FileId(0), text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let func = lowered.modules.into_iter().next().unwrap().functions.remove(0);
        let setps: Vec<&fencelint_ir::Inst> =
            func.insts.iter().filter(|i| i.opcode.starts_with("setp")).collect();
        let defs: Vec<fencelint_ir::Reg> = setps.iter().map(|i| i.defs[0]).collect();
        let outer = defs[0];
        assert_eq!(func.reg_name(outer), "%p1");
        assert!(defs[1] != outer && defs[2] != outer && defs[1] != defs[2], "{defs:?}");
        let guard = |opcode: &str| {
            let inst = func.insts.iter().find(|i| i.opcode.starts_with(opcode)).unwrap();
            inst.guard.unwrap().reg
        };
        // The nested block's store is under the first block's `%p1`, the branch after both
        // blocks under the body's.
        assert_eq!(guard("st.global"), defs[1]);
        assert_eq!(guard("bra"), outer);
        // `t1` of `t<2>` declared in the block is a register (no `%`), the block's.
        let mov = func.insts.iter().find(|i| i.opcode.starts_with("mov")).unwrap();
        let store = func.insts.iter().find(|i| i.opcode.starts_with("st.global")).unwrap();
        assert_eq!(mov.defs.len(), 1);
        assert!(store.uses.contains(&mov.defs[0]));
    }

    /// `and.b32` with a constant (either operand) is a mask, with two registers an `And`; on
    /// predicates it is `PredAnd`.
    #[test]
    fn and_with_a_constant_is_a_mask() {
        let text = ".version 8.5\n.target sm_90\n.address_size 64\n\
                    .visible .entry k(.param .u32 p)\n{\n.reg .b32 %r<6>;\n.reg .pred %p<4>;\n\
                    ld.param.u32 %r1, [p];\n\
                    and.b32 %r2, %r1, 1073741823;\n\
                    and.b32 %r3, 0xff, %r1;\n\
                    and.b32 %r4, %r1, %r2;\n\
                    setp.ne.s32 %p1, %r1, 0;\n\
                    setp.ne.s32 %p2, %r2, 0;\n\
                    and.pred %p3, %p1, %p2;\n\
                    ret;\n}\n";
        let lowered = super::lower_text(FileId(0), text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let func = lowered.modules.into_iter().next().unwrap().functions.remove(0);
        let r1 = fencelint_ir::Reg(func.regs.iter().position(|r| r == "%r1").unwrap() as u32);
        let value = |opcode: &str, dest: &str| {
            func.insts
                .iter()
                .find(|i| {
                    i.opcode.as_str() == opcode
                        && i.defs.first().is_some_and(|d| func.reg_name(*d) == dest)
                })
                .unwrap()
                .value
                .clone()
        };
        assert_eq!(value("and.b32", "%r2"), Some(fencelint_ir::ValueOp::AndImm(r1, 0x3fff_ffff)));
        assert_eq!(value("and.b32", "%r3"), Some(fencelint_ir::ValueOp::AndImm(r1, 0xff)));
        let r2 = fencelint_ir::Reg(func.regs.iter().position(|r| r == "%r2").unwrap() as u32);
        assert_eq!(value("and.b32", "%r4"), Some(fencelint_ir::ValueOp::And(r1, r2)));
        assert!(matches!(value("and.pred", "%p3"), Some(fencelint_ir::ValueOp::PredAnd(..))));
    }

    /// Atomic adds of a register, values from other lanes, and the families of tests and
    /// logic, which rules read instead of the opcode text.
    #[test]
    fn fetch_adds_varying_values_and_alu_families() {
        use fencelint_ir::{AluOp, IntCompare, Relation, Space, ValueOp};
        let text = ".version 8.5\n.target sm_90\n.address_size 64\n\
                    .visible .entry k(.param .u64 p)\n{\n.reg .pred %p<4>;\n.reg .f32 %f<2>;\n\
                    .reg .b32 %r<9>;\n.reg .b64 %rd<3>;\n\
                    ld.param.u64 %rd1, [p];\n\
                    atom.global.add.u32 %r1, [%rd1], %r2;\n\
                    atom.global.add.u32 %r3, [%rd1], 1;\n\
                    shfl.sync.idx.b32 %r4, %r1, 0, 31, -1;\n\
                    setp.eq.s32 %p1, %r4, 0;\n\
                    setp.eq.f32 %p2, %f1, 0f00000000;\n\
                    set.eq.u32.f32 %r5, %f1, 0f00000000;\n\
                    or.b32 %r6, %r5, %r4;\n\
                    selp.u32 %r7, 1, 0, %p1;\n\
                    add.s32 %r8, %r7, 1;\n\
                    add.s32 %r1, %r7, %r8;\n\
                    sub.s32 %r1, %r7, %r8;\n\
                    mov.u32 %r2, %r7;\n\
                    cvta.shared.u64 %rd2, %rd1;\n\
                    cvta.global.u64 %rd2, %rd1;\n\
                    cvta.to.shared.u64 %rd2, %rd1;\n\
                    cvt.u32.u64 %r2, %rd1;\n\
                    shr.u32 %r2, %r7, 5;\n\
                    setp.eq.s32 %p3, %r7, %r8;\n\
                    ret;\n}\n";
        let lowered = super::lower_text(FileId(0), text, 0);
        assert!(lowered.diagnostics.is_empty(), "{:?}", lowered.diagnostics);
        let func = lowered.modules.into_iter().next().unwrap().functions.remove(0);
        let r2 = fencelint_ir::Reg(func.regs.iter().position(|r| r == "%r2").unwrap() as u32);
        let insts = &func.insts[1..];
        assert_eq!(insts[0].value, Some(ValueOp::FetchAddReg(r2)));
        assert_eq!(insts[1].value, Some(ValueOp::FetchAdd(1)));
        let r1 = fencelint_ir::Reg(func.regs.iter().position(|r| r == "%r1").unwrap() as u32);
        assert_eq!(insts[2].value, Some(ValueOp::Shuffle(r1)));
        assert_eq!(insts[7].value, Some(ValueOp::Either(1, 0)));
        let alu: Vec<Option<AluOp>> = insts[3..].iter().map(|i| i.alu).collect();
        assert_eq!(
            alu,
            [
                Some(AluOp::IntCompare),
                Some(AluOp::FloatCompare),
                Some(AluOp::FloatSet),
                Some(AluOp::BitLogic),
                Some(AluOp::Select),
                Some(AluOp::Add),
                Some(AluOp::Add),
                Some(AluOp::Add),
                Some(AluOp::Move),
                Some(AluOp::ToGeneric(Space::SharedCta)),
                Some(AluOp::ToGeneric(Space::Global)),
                None,
                None,
                Some(AluOp::ShiftRight),
                Some(AluOp::IntCompare),
                None,
            ]
        );
        // Only an `add` of two registers is their sum.
        let reg = |name: &str| {
            fencelint_ir::Reg(func.regs.iter().position(|r| r == name).unwrap() as u32)
        };
        assert_eq!(insts[9].value, Some(ValueOp::Sum(reg("%r7"), reg("%r8"))));
        assert_eq!(insts[10].value, None);
        assert_eq!(insts[16].value, Some(ValueOp::ShrImm(reg("%r7"), 5)));
        // A comparison of two registers.
        let eq = IntCompare { relation: Relation::Eq, signed: true, bits: 32 };
        assert_eq!(insts[17].value, Some(ValueOp::CompareRegs(eq, reg("%r7"), reg("%r8"))));
    }

    /// Multiplications by constants (`shl` is one) and `or`s of two registers, at 32 and 64
    /// bits only: what the span of an address is computed through.
    #[test]
    fn scaled_and_combined_values() {
        use fencelint_ir::ValueOp;
        let text = ".version 8.5\n.target sm_90\n.address_size 64\n\
                    .visible .entry k()\n{\n.reg .b16 %h<3>;\n.reg .b32 %r<9>;\n.reg .b64 %rd<3>;\n\
                    mov.u32 %r1, %tid.x;\n\
                    shl.b32 %r2, %r1, 3;\n\
                    mul.lo.s32 %r3, %r1, 48;\n\
                    mul.lo.s32 %r4, 48, %r1;\n\
                    mul.wide.u32 %rd1, %r1, 8;\n\
                    or.b32 %r5, %r2, %r3;\n\
                    mul.lo.s32 %r6, %r1, -4;\n\
                    mul.hi.s32 %r7, %r1, 48;\n\
                    mul.lo.s32 %r8, %r1, %r2;\n\
                    shl.b16 %h1, %h2, 3;\n\
                    shl.b32 %r6, %r1, 40;\n\
                    ret;\n}\n";
        let func = only_function(text);
        let reg = |name: &str| reg_named(&func, name);
        let values: Vec<Option<ValueOp>> =
            func.insts[1..12].iter().map(|i| i.value.clone()).collect();
        assert_eq!(
            values,
            [
                Some(ValueOp::MulImm(reg("%r1"), 8)),
                Some(ValueOp::MulImm(reg("%r1"), 48)),
                Some(ValueOp::MulImm(reg("%r1"), 48)),
                Some(ValueOp::MulImm(reg("%r1"), 8)),
                Some(ValueOp::Or(reg("%r2"), reg("%r3"))),
                // A negative factor, the high half, two registers, 16 bits, a shift past the
                // width: none is a multiplication by a constant.
                None,
                None,
                None,
                None,
                None,
                None,
            ]
        );
    }

    /// A `mov` that splits a register into parts copies it (the sentinel check of
    /// spin-poll-without-acquire follows the halves of a polled 64-bit word through it).
    #[test]
    fn splitting_mov_is_a_copy() {
        let text = ".version 8.5\n.target sm_90\n.address_size 64\n\
                    .visible .entry k(.param .u64 p)\n{\n.reg .b32 %r<3>;\n.reg .b64 %rd<2>;\n\
                    ld.param.u64 %rd1, [p];\n\
                    mov.b64 {%r1, %r2}, %rd1;\n\
                    ret;\n}\n";
        let func = only_function(text);
        let reg = |name: &str| reg_named(&func, name);
        let split = func.insts.iter().find(|i| i.opcode.as_str() == "mov.b64").unwrap();
        assert_eq!(split.value, Some(fencelint_ir::ValueOp::Copy(reg("%rd1"))));
        assert_eq!(split.defs.as_slice(), [reg("%r1"), reg("%r2")]);
    }
}
