//! SASS lowering: the syntax trees of `fencelint-sass` into the IR.
//!
//! What an opcode means comes from one declarative table, `sass_semantics.tsv` (see [`table`]
//! and `docs/sass-semantics.md`); this module only reads operands: definitions and uses,
//! memory operands, the register moves that address analysis follows, guards and branch
//! targets.
//!
//! Conventions:
//! - one [`Module`] per architecture section of the listing (a fat binary holds several), one
//!   [`Function`] per SASS function, one [`Inst`] per instruction;
//! - `@PT` is no guard; `@!PT` never executes, so the instruction is dropped (ptxas writes
//!   `@!PT LDS RZ, [RZ]` as filler) and branches to it land on the next instruction;
//! - `RZ`, `URZ`, `PT` and `UPT` are neither defined nor used; `R2.64` uses `R2` and `R3`;
//! - a branch whose condition is an operand (`BRA.U !UP0, target`) gets that predicate as its
//!   guard, so that rules read one shape for both spellings; beside a guard the operand is the
//!   branch's second condition (`@P4 BRA P0, target`, [`Control::condition`]).
//!
//! [`Control::condition`]: fencelint_ir::Control::condition

mod table;

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

use rustc_hash::FxHashMap;

use fencelint_diagnostics::Diagnostic;
use fencelint_ir::{
    AddrBase, Address, AddressRole, AsyncOp, Barrier, CompactString, Control, Function, Guard,
    Inst, InstId, InstKind, IntCompare, Module, Name, Reg, Regs, Relation, Scope, Scoreboards, Sem,
    SourceLocation, Space, Tcgen05Op, ValueOp, WgmmaOp,
};
pub use fencelint_sass::Arch;
use fencelint_sass::{
    ConstBank, ConstOperand, MemOperand, MemPrefix, Operand, OperandKind, RegFile, RegRef,
    Register, SassFormat, SassFunction, SassInst, SassLabel, SassModule, SrcLine,
};
use fencelint_source::{Dialect, FileId, TextRange};
pub use table::{
    Class, Classification, Defs, Row, TABLE_TEXT, Table, ValueRule, table as semantics,
};

use crate::Lowered;

/// Parses a SASS listing of a known format and lowers it. A text listing is lowered as it is
/// parsed, an instruction at a time ([`LowerSink`]); the result is [`lower_parsed`]'s of the
/// syntax tree.
pub fn lower_text(file: FileId, text: &str, format: SassFormat, base: u32) -> Lowered {
    match format {
        SassFormat::NvdisasmJson => {
            lower_parsed(file, text, &fencelint_sass::parse_json(text), base)
        }
        SassFormat::CuobjdumpText | SassFormat::NvdisasmText => {
            lower_streamed(file, text, base, |sink| fencelint_sass::parse_text_into(text, sink))
        }
    }
}

/// [`lower_text`] for a text listing that holds one function (a chunk of a split listing), with
/// the architecture the listing named before it (see [`fencelint_sass::parse_function_text`]).
pub fn lower_function_text(
    file: FileId,
    text: &str,
    format: SassFormat,
    arch: Option<Arch>,
    base: u32,
) -> Lowered {
    match format {
        SassFormat::NvdisasmJson => lower_text(file, text, format, base),
        SassFormat::CuobjdumpText | SassFormat::NvdisasmText => {
            lower_streamed(file, text, base, |sink| {
                fencelint_sass::parse_function_text_into(text, arch, sink)
            })
        }
    }
}

/// Lowers a text listing with `parse`, which feeds a [`LowerSink`] and returns the parse errors.
fn lower_streamed<'a>(
    file: FileId,
    text: &'a str,
    base: u32,
    parse: impl FnOnce(&mut LowerSink<'a, '_>) -> Vec<fencelint_sass::ParseError>,
) -> Lowered {
    let table = table::table();
    OPCODES.with_borrow_mut(|cache| {
        let mut sink = LowerSink {
            text,
            // Set by the parser before the first function.
            format: SassFormat::NvdisasmText,
            base,
            table,
            cache,
            modules: Modules::new(file, None),
            body: None,
            expected: 0,
        };
        let errors = parse(&mut sink);
        Lowered { modules: sink.modules.finish(), diagnostics: parse_errors(file, &errors, base) }
    })
}

/// Lowers each instruction as the text parser reads it: no syntax tree, no operand vector
/// per instruction. Functions are grouped into modules as [`lower_module`] groups them.
struct LowerSink<'a, 'c> {
    text: &'a str,
    format: SassFormat,
    base: u32,
    table: &'static table::Table,
    cache: &'c mut OpcodeCache,
    modules: Modules<'a>,
    /// The function being lowered, from its first instruction on.
    body: Option<Body<'a>>,
    /// The instructions the parser expects in the function being read.
    expected: usize,
}

impl<'a> fencelint_sass::ListingSink<'a> for LowerSink<'a, '_> {
    fn listing(&mut self, format: SassFormat) {
        self.format = format;
    }

    fn open_function(&mut self, expected: usize) {
        self.expected = expected;
    }

    fn instruction(&mut self, inst: SassInst<'a>, operands: &[Operand<'a>]) {
        let expected = self.expected;
        let body = self.body.get_or_insert_with(|| Body::with_capacity(expected));
        body.instruction(&inst, operands, self.text, self.base, self.table, self.cache);
    }

    fn extend_encoding(&mut self, range: TextRange) {
        // The second, high word of the last instruction, on a line of its own: read as the
        // syntax tree's instruction, whose encoding then covers both lines, is read.
        if let Some(body) = &mut self.body
            && let Some(last) = &mut body.last
        {
            last.encoding = Some(last.encoding.map_or(range, |old| old.cover(range)));
            body.apply_encoding(self.text);
        }
    }

    fn close_function(&mut self, function: SassFunction<'a>) {
        let body = self.body.take().unwrap_or_else(|| Body::with_capacity(0));
        let (lowered, calls) = body.finish(&function, self.text, self.format, self.base);
        self.modules.push(function.arch, function.binary, lowered, calls);
    }
}

/// Lowered functions grouped into modules, one per run of functions that share an
/// architecture and fat-binary entry, with the calls of each function that name another
/// function; [`Modules::finish`] links those ([`link_functions`]).
struct Modules<'a> {
    file: FileId,
    producer: Option<&'a str>,
    done: Vec<Module>,
    current_key: Option<(Option<Arch>, Option<&'a str>)>,
    /// For each module: (function index, call, callee name) of its named calls.
    calls: Vec<Vec<(usize, InstId, &'a str)>>,
}

impl<'a> Modules<'a> {
    fn new(file: FileId, producer: Option<&'a str>) -> Self {
        Self { file, producer, done: Vec::new(), current_key: None, calls: Vec::new() }
    }

    fn push(
        &mut self,
        arch: Option<Arch>,
        binary: Option<&'a str>,
        func: Function,
        calls: Vec<(InstId, &'a str)>,
    ) {
        let key = (arch, binary);
        if self.current_key != Some(key) || self.done.is_empty() {
            self.current_key = Some(key);
            let target = arch.map(|a| a.to_string());
            self.done.push(new_module(self.file, target, self.producer));
            self.calls.push(Vec::new());
        }
        if let (Some(module), Some(module_calls)) = (self.done.last_mut(), self.calls.last_mut()) {
            let index = module.functions.len();
            module_calls.extend(calls.into_iter().map(|(call, name)| (index, call, name)));
            module.functions.push(func);
        }
    }

    fn finish(mut self) -> Vec<Module> {
        for (module, calls) in self.done.iter_mut().zip(&self.calls) {
            module.external_calls = link_functions(&mut module.functions, calls);
        }
        if self.done.is_empty() {
            self.done.push(new_module(self.file, None, self.producer));
        }
        self.done
    }
}

/// Lowers a listing parsed from `text` (for example one function of a streamed listing,
/// [`fencelint_sass::SassChunk::parse`]), turning its parse errors into diagnostics.
pub fn lower_parsed(
    file: FileId,
    text: &str,
    parsed: &fencelint_sass::Parsed<SassModule<'_>>,
    base: u32,
) -> Lowered {
    let modules = lower_module(file, text, &parsed.value, base);
    Lowered { modules, diagnostics: parse_errors(file, &parsed.errors, base) }
}

/// Parse errors as diagnostics, in text order.
fn parse_errors(file: FileId, errors: &[fencelint_sass::ParseError], base: u32) -> Vec<Diagnostic> {
    let mut diagnostics: Vec<Diagnostic> = errors
        .iter()
        .map(|e| crate::parse_error(file, e.range.shifted(base), &e.message, Dialect::Sass))
        .collect();
    diagnostics.sort_by_key(|d| d.primary.range.start);
    diagnostics
}

/// Lowers a parsed listing: one [`Module`] per run of functions that share an architecture
/// and fat-binary entry. `text` is the text the listing was parsed from.
pub fn lower_module(file: FileId, text: &str, module: &SassModule<'_>, base: u32) -> Vec<Module> {
    let table = table::table();
    OPCODES.with_borrow_mut(|cache| lower_module_with(file, text, module, base, table, cache))
}

/// What lowering needs to know of one opcode: its classification and the register width of
/// its data operands ([`opcode_width`]).
struct OpcodeFacts {
    class: Classification,
    width: u16,
    /// The opcode as each of its instructions keeps it: cloning an inline `CompactString` is
    /// a copy of 24 bytes, where making one from the text copies a variable length into a
    /// zeroed buffer and reads it back at once (a stalled load, 8% of the lowering's samples).
    opcode: CompactString,
}

/// Opcodes seen by this thread. A listing uses a few hundred distinct opcodes, in every one
/// of its functions: classifying them once a thread instead of once a function saves a table
/// lookup and an allocation for each opcode of each function.
#[derive(Default)]
struct OpcodeCache {
    /// The index in `facts` of each opcode seen.
    index: HashMap<Box<str>, u32, BuildHasherDefault<OpcodeHasher>>,
    facts: Vec<OpcodeFacts>,
}

/// Hashes an opcode eight bytes a step, with one multiply each (FxHash-like, without its
/// per-byte tail or the `str` terminator byte): an opcode is two or three words, and hashing
/// was a quarter of the lowering's own time. Every byte counts, so opcodes that share their
/// ends (as damaged input can spell by the thousand) do not all collide.
#[derive(Default)]
struct OpcodeHasher(u64);

impl OpcodeHasher {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    fn mix(&mut self, word: u64) {
        self.0 = (self.0 ^ word).wrapping_mul(Self::K).rotate_left(29);
    }
}

impl Hasher for OpcodeHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.mix(bytes.len() as u64);
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut array = [0u8; 8];
            array.copy_from_slice(chunk);
            self.mix(u64::from_le_bytes(array));
        }
        // The last bytes, zero-extended, built in a register: copying them into a zeroed array
        // and loading it as a word stalled the load (8% of the lowering's samples).
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let word = if bytes.len() >= 8 {
                let mut last = [0u8; 8];
                last.copy_from_slice(&bytes[bytes.len() - 8..]);
                u64::from_le_bytes(last) >> (8 * (8 - rest.len()))
            } else {
                rest.iter().rev().fold(0u64, |word, &byte| (word << 8) | u64::from(byte))
            };
            self.mix(word);
        }
    }

    fn write_u8(&mut self, byte: u8) {
        self.mix(u64::from(byte));
    }

    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 32)
    }
}

/// The most opcodes kept by a thread; past it the cache starts again (fuzzed or damaged input
/// can spell any number of opcodes).
const OPCODE_CACHE_MAX: usize = 1 << 16;

thread_local! {
    static OPCODES: std::cell::RefCell<OpcodeCache> = std::cell::RefCell::default();
}

impl OpcodeCache {
    /// The facts of `opcode`, found with one hash lookup when the opcode was seen before.
    fn get(&mut self, table: &table::Table, opcode: &str) -> &OpcodeFacts {
        if let Some(&at) = self.index.get(opcode) {
            return &self.facts[at as usize];
        }
        if self.facts.len() >= OPCODE_CACHE_MAX {
            self.index.clear();
            self.facts.clear();
        }
        let at = self.facts.len();
        self.facts.push(OpcodeFacts {
            class: table.classify(opcode),
            width: opcode_width(opcode),
            opcode: opcode.into(),
        });
        self.index.insert(opcode.into(), at as u32);
        &self.facts[at]
    }
}

fn lower_module_with(
    file: FileId,
    text: &str,
    module: &SassModule<'_>,
    base: u32,
    table: &table::Table,
    cache: &mut OpcodeCache,
) -> Vec<Module> {
    let mut modules = Modules::new(file, module.producer);
    for func in &module.functions {
        let (lowered, calls) = lower_function(func, text, module.format, base, table, cache);
        modules.push(func.arch, func.binary, lowered, calls);
    }
    modules.finish()
}

fn new_module(file: FileId, target: Option<String>, producer: Option<&str>) -> Module {
    Module {
        file: Some(file),
        dialect: Some(Dialect::Sass),
        target,
        ptx_version: None,
        producer: producer.map(ToOwned::to_owned),
        functions: Vec::new(),
        external_calls: Vec::new(),
    }
}

/// Whether the function is a kernel. nvdisasm text says so (`.other name,@"STO_CUDA_ENTRY
/// ..."` in the header); cuobjdump and nvdisasm JSON do not, and the functions they list are
/// taken to be kernels.
fn is_kernel(
    func: &SassFunction<'_>,
    first_start: Option<u32>,
    text: &str,
    format: SassFormat,
) -> bool {
    if format != SassFormat::NvdisasmText {
        return true;
    }
    let start = func.range.start as usize;
    let end = first_start.unwrap_or(func.range.end) as usize;
    text.get(start..end.max(start)).is_none_or(|header| header.contains("STO_CUDA_ENTRY"))
}

/// The function being lowered, with a dense map from SASS registers to interned IR registers:
/// a listing names a few registers millions of times, and formatting and hashing each name
/// cost a tenth of the lowering.
struct Lowering {
    func: Function,
    /// `REGS_PER_FILE * file + index` to `Reg + 1` (0: not interned yet).
    dense: Vec<u32>,
    /// The names of the constant banks (`c[0x0]`) and slots (`c[0x0][0x210]`) used so far:
    /// a kernel reads the same parameter slots many times.
    names: FxHashMap<(u32, Option<i64>), Name>,
}

/// Register numbers below this are cached densely (`R0..R254`, `UR0..UR63`, `P0..P6`).
const REGS_PER_FILE: usize = 256;

/// The register files whose data flow the IR follows, numbered for the dense cache; the others
/// (convergence barriers, scoreboards, the whole predicate file) get no IR register.
const fn dense_file(file: RegFile) -> Option<usize> {
    match file {
        RegFile::R => Some(0),
        RegFile::UR => Some(1),
        RegFile::P => Some(2),
        RegFile::UP => Some(3),
        _ => None,
    }
}

impl Lowering {
    fn new(func: Function) -> Self {
        Self { func, dense: vec![0; 4 * REGS_PER_FILE], names: FxHashMap::default() }
    }

    /// The name of constant bank `bank` (`c[0x4]`), or of its slot at `offset` (`c[0x0][0x210]`).
    fn name(&mut self, bank: u32, offset: Option<i64>) -> Name {
        self.names
            .entry((bank, offset))
            .or_insert_with(|| match offset {
                None => format!("c[{bank:#x}]").into(),
                Some(offset) => format!("c[{bank:#x}][{offset:#x}]").into(),
            })
            .clone()
    }

    /// The IR register of `reg` (interned under its spelling, `R2`), or `None` for the zero and
    /// true registers and for the files [`dense_file`] does not follow.
    fn reg(&mut self, reg: Register) -> Option<Reg> {
        if reg.is_special() {
            return None;
        }
        let file = dense_file(reg.file)?;
        let index = usize::from(reg.index);
        if index >= REGS_PER_FILE {
            return Some(self.func.intern_reg(&reg.to_string()));
        }
        let slot = &mut self.dense[file * REGS_PER_FILE + index];
        if *slot == 0 {
            *slot = self.func.intern_reg(&reg.to_string()).0 + 1;
        }
        Some(Reg(*slot - 1))
    }
}

fn lower_function<'a>(
    func: &SassFunction<'a>,
    text: &str,
    format: SassFormat,
    base: u32,
    table: &table::Table,
    cache: &mut OpcodeCache,
) -> (Function, Vec<(InstId, &'a str)>) {
    let mut body = Body::with_capacity(func.instructions.len());
    for inst in &func.instructions {
        body.instruction(inst, &inst.operands, text, base, table, cache);
    }
    body.finish(func, text, format, base)
}

/// The instructions of one function as they are lowered, in input order, and what waits for
/// the end of the function: branch targets (a branch can jump forward, and a label names its
/// address only once the instruction after it is read).
struct Body<'a> {
    lowering: Lowering,
    insts: Vec<Inst>,
    /// The addresses of `insts`, in order.
    addresses: Vec<u64>,
    /// The branches whose targets are resolved at the end.
    branches: Vec<(InstId, BranchRef<'a>)>,
    /// The calls, whose targets are resolved at the end too: a call into the function's own
    /// code (a subroutine) is followed there and back.
    calls: Vec<(InstId, BranchRef<'a>)>,
    /// Where the first instruction starts (kept or not): the function's header ends there.
    first_start: Option<u32>,
    /// What the encoding lines that follow the last instruction read add to: `None` when that
    /// instruction was dropped (`@!PT`), whose words then belong to no lowered instruction.
    last: Option<LastEncoding>,
    /// The last chain of call sites lowered (`-gi`), with the parser's chain it came from (kept
    /// alive, so that the same pointer is the same chain): one per run of instructions.
    inlined: Option<(CallSites<'a>, Arc<[SourceLocation]>)>,
    /// The last source location given an instruction, with the line and chain it came from:
    /// the instructions of one run share it.
    source: Option<(SrcLine<'a>, Option<CallSites<'a>>, Arc<SourceLocation>)>,
}

/// The parser's chain of call sites of one run of inlined instructions (`-gi`).
type CallSites<'a> = Arc<[SrcLine<'a>]>;

/// Where a branch goes, as the instruction says it.
enum BranchRef<'a> {
    /// A code address (`BRA 0x200`, or a label resolved by the parser).
    Address(u64),
    /// A `` `(.L_x_8) `` label, resolved against the function's labels and its own name.
    Label(&'a str),
    /// An indirect branch with the `(*"BRANCH_TARGETS .L_x_1,.L_x_2"*)` annotation's list.
    Listed(&'a str),
    /// An indirect branch, or a target that the instruction does not say.
    Unknown,
    /// A call that names no callee: `CALL.ABS.NOINC 0x0`, as cuobjdump prints a call that
    /// the linker resolves ([`Function::unnamed_calls`]).
    Unnamed,
}

/// The last lowered instruction's encoding comments as read so far, and the scoreboard bit that
/// it waits for as `DEPBAR.LE SBn, 0x0`: its scoreboards are made again from them as the
/// encoding grows ([`Body::apply_encoding`]), as the syntax tree would read them whole.
#[derive(Clone, Copy)]
struct LastEncoding {
    encoding: Option<TextRange>,
    depbar: u8,
}

impl<'a> Body<'a> {
    fn with_capacity(capacity: usize) -> Self {
        Self {
            lowering: Lowering::new(Function::default()),
            insts: Vec::with_capacity(capacity),
            addresses: Vec::with_capacity(capacity),
            branches: Vec::new(),
            calls: Vec::new(),
            first_start: None,
            last: None,
            inlined: None,
            source: None,
        }
    }

    /// Gives the last instruction its scoreboards: those of the control bits of its encoding
    /// as read so far (`fencelint_sass::encoding_control_bits`), with the scoreboard that a
    /// `DEPBAR.LE SBn, 0x0` waits for; none when neither says anything.
    fn apply_encoding(&mut self, text: &str) {
        let Some(last) = self.last else { return };
        let control = last.encoding.and_then(|r| fencelint_sass::encoding_control_bits(text, r));
        let depbar = last.depbar;
        if let Some(slot) = self.insts.last_mut() {
            slot.scoreboards = match control {
                Some(control) => {
                    let mut scoreboards = Scoreboards::from_control(control);
                    scoreboards.wait |= depbar;
                    Some(scoreboards)
                }
                None => (depbar != 0).then_some(Scoreboards { write: None, wait: depbar }),
            };
        }
    }

    /// The call sites of `sites`, lowered once for the run of instructions that share them.
    fn inlined(&mut self, sites: &CallSites<'a>) -> Arc<[SourceLocation]> {
        if let Some((from, lowered)) = &self.inlined
            && Arc::ptr_eq(from, sites)
        {
            return Arc::clone(lowered);
        }
        let lowered: Arc<[SourceLocation]> =
            sites.iter().map(|site| SourceLocation::new(site.file, site.line, 0)).collect();
        self.inlined = Some((Arc::clone(sites), Arc::clone(&lowered)));
        lowered
    }

    /// Lowers one instruction (`@!PT` ones are dropped) whose operands are `operands`.
    fn instruction(
        &mut self,
        inst: &SassInst<'a>,
        operands: &[Operand<'a>],
        text: &str,
        base: u32,
        table: &table::Table,
        cache: &mut OpcodeCache,
    ) {
        self.first_start.get_or_insert(inst.range.start);
        self.last = None;
        if inst.guard.is_some_and(fencelint_sass::Guard::is_never) {
            return;
        }
        let facts = cache.get(table, inst.opcode);
        let kind = kind_of(inst, operands, facts, table);
        let id = InstId(self.insts.len() as u32);
        // Each instruction is filled in where it lies in the table, not built and then moved
        // there (an `Inst` is about 300 bytes; the moves were 2% of a listing's lowering).
        self.insts.push(Inst::new(inst.range.shifted(base), facts.opcode.clone(), kind));
        self.addresses.push(inst.address);
        if let Some(slot) = self.insts.last_mut()
            && let Some(branch) = lower_inst(&mut self.lowering, slot, inst, operands, facts, table)
        {
            match slot.kind {
                InstKind::Call => self.calls.push((id, branch)),
                _ => self.branches.push((id, branch)),
            }
        }
        let depbar = depbar_zero(operands, &facts.opcode).map_or(0, |sb| 1 << sb);
        self.last = Some(LastEncoding { encoding: inst.encoding, depbar });
        // One word (a cuobjdump line before its second) gives nothing yet.
        if depbar != 0 || inst.encoding.is_some_and(|r| r.end - r.start >= 48) {
            self.apply_encoding(text);
        }
        if let Some(line) = inst.src_line {
            let source = self.source(line, inst.inlined_at.as_ref());
            if let Some(slot) = self.insts.last_mut() {
                slot.source = Some(source);
            }
        }
    }

    /// The source location of an instruction at `line`, inlined at `sites`: the last one made
    /// when it is the same.
    fn source(&mut self, line: SrcLine<'a>, sites: Option<&CallSites<'a>>) -> Arc<SourceLocation> {
        if let Some((last, from, made)) = &self.source
            && *last == line
            && match (from, sites) {
                (Some(from), Some(sites)) => Arc::ptr_eq(from, sites),
                (None, None) => true,
                _ => false,
            }
        {
            return Arc::clone(made);
        }
        let mut location = SourceLocation::new(line.file, line.line, 0);
        location.inlined_at = sites.map(|sites| self.inlined(sites));
        let made = Arc::new(location);
        self.source = Some((line, sites.cloned(), Arc::clone(&made)));
        made
    }

    /// Resolves the branches against the addresses of the kept instructions and the labels of
    /// `header`, and names the function after it (its instructions, if any, are not read).
    /// Also returns the calls that name something other than the function's own code
    /// (`` CALL.ABS.NOINC `(callee) ``), for [`link_functions`].
    fn finish(
        mut self,
        header: &SassFunction<'a>,
        text: &str,
        format: SassFormat,
        base: u32,
    ) -> (Function, Vec<(InstId, &'a str)>) {
        // Before sm_70 an instruction is one 64-bit word and the control bits are grouped in
        // words of their own: the words beside an instruction are no 128-bit encoding.
        if header.arch.is_some_and(|arch| arch.number < 70) {
            for inst in &mut self.insts {
                inst.scoreboards = None;
            }
        }
        let targets = Targets { addresses: &self.addresses, labels: &header.labels };
        let mut sorted: Vec<(&str, u64)> = Vec::new();
        if self.branches.iter().chain(&self.calls).any(|(_, b)| matches!(b, BranchRef::Label(_))) {
            sorted = header.labels.iter().map(|label| (label.name, label.address)).collect();
            sorted.sort_unstable();
        }
        let label_address =
            |label: &str| match sorted.binary_search_by(|(name, _)| (*name).cmp(label)) {
                Ok(index) => Some(sorted[index].1),
                Err(_) => (label == header.name).then_some(0),
            };
        for (id, branch) in std::mem::take(&mut self.branches) {
            let control = &mut self.insts[id.index()].control;
            let address = match branch {
                BranchRef::Address(address) => Some(address),
                BranchRef::Label(label) => label_address(label),
                BranchRef::Listed(list) => {
                    match targets.listed(list) {
                        Some(ids) => control.targets = ids.into(),
                        None => control.indirect = true,
                    }
                    continue;
                }
                BranchRef::Unknown | BranchRef::Unnamed => None,
            };
            match address {
                Some(address) => match resolve(&self.addresses, address) {
                    Some(id) => control.targets.push(id),
                    // Past the last instruction: the branch leaves the function.
                    None => control.exits = true,
                },
                None => control.indirect = true,
            }
        }
        // A call into the function's own code goes there, and the subroutine's returns come
        // back after it; a call that names another function is kept for [`link_functions`],
        // which follows it when the listing holds that function; anything else (an unknown
        // target, `0x0` in cuobjdump) stays an instruction that falls through. nvdisasm JSON
        // labels no subroutine: a kernel's only one is found by where its own code ends.
        let lone = match format {
            SassFormat::NvdisasmJson => lone_subroutine(&self.insts, &self.calls, header.name),
            _ => None,
        };
        let mut subroutine_calls = Vec::new();
        let mut named_calls = Vec::new();
        for (id, call) in std::mem::take(&mut self.calls) {
            let address = match call {
                BranchRef::Address(address) => Some(address),
                BranchRef::Label(label) => label_address(label),
                BranchRef::Unnamed => {
                    self.lowering.func.unnamed_calls =
                        self.lowering.func.unnamed_calls.saturating_add(1);
                    None
                }
                BranchRef::Listed(_) | BranchRef::Unknown => None,
            };
            let named = match call {
                BranchRef::Label(name) if address.is_none() => Some(name),
                _ => None,
            };
            let entry = match (address, call, lone) {
                (Some(address), ..) => resolve(&self.addresses, address),
                (None, BranchRef::Label(label), Some((name, entry))) if label == name => {
                    Some(entry)
                }
                _ => None,
            };
            let Some(entry) = entry else {
                named_calls.extend(named.map(|name| (id, name)));
                continue;
            };
            let inst = &mut self.insts[id.index()];
            inst.control.targets.push(entry);
            inst.control.falls_through = inst.guard.is_some();
            subroutine_calls.push((id, entry));
        }
        let inlined_from = if subroutine_calls.is_empty() {
            None
        } else {
            inline_subroutines(&mut self.insts, subroutine_calls)
        };
        mark_cta_acquires(&mut self.insts);
        let mut func = self.lowering.func;
        header.name.clone_into(&mut func.name);
        func.range = header.range.shifted(base);
        func.is_kernel = is_kernel(header, self.first_start, text, format);
        func.insts = self.insts;
        func.inlined_from = inlined_from;
        crate::constants::fold_call_constants(&mut func);
        (func, named_calls)
    }
}

/// How far after a CTA-scope strong access [`mark_cta_acquires`] looks for its `NOP`.
const CTA_ACQUIRE_NOP_SPAN: usize = 16;

/// Makes each CTA-scope strong load or returning atomic (`LD.E.STRONG.SM`, `LDG.E.STRONG.SM`,
/// `ATOMG.E.CAS.STRONG.SM`) that ptxas follows with its `NOP` an acquire. An acquire at CTA
/// scope needs no invalidate: `ld.acquire.cta` prints as `ld.relaxed.cta` does, plus one `NOP`
/// after the load, before or just after the first instruction that reads what it loaded
/// (`sm_80`: `LD.E.STRONG.SM R0, [R2.64]; ISETP.NE.AND P0, PT, R0, RZ, PT; NOP`; `sm_90a` and
/// `sm_100a`: `LD.E.STRONG.SM R0, [R2.64]; NOP; ISETP...`), and so does `atom.acquire.cta`.
/// Before `sm_90`, `mbarrier.test_wait` on a generic address is such a load of the barrier's
/// phase word (`LD.E.STRONG.SM R0, [R9.U32+UR6+0x4]; LOP3.LUT P0, RZ, R0, 0x80000000, RZ,
/// 0xc0, !PT; NOP`), an acquire at CTA scope: without the `NOP`, every such wait read as a
/// relaxed poll. The search stops at any instruction that accesses memory, orders or transfers
/// control, and one instruction past the first reader of the loaded registers.
fn mark_cta_acquires(insts: &mut [Inst]) {
    for at in 0..insts.len() {
        let (InstKind::Load(mem) | InstKind::Atomic { mem, returns: true }) = &insts[at].kind
        else {
            continue;
        };
        let cta_relaxed = mem.sem == Sem::Relaxed
            && mem.scope == Some(Scope::Cta)
            && matches!(mem.space, Space::Global | Space::Generic);
        if !cta_relaxed || insts[at].defs.is_empty() {
            continue;
        }
        let loaded = &insts[at].defs;
        let mut read = false;
        let mut slot = false;
        for next in insts.iter().skip(at + 1).take(CTA_ACQUIRE_NOP_SPAN) {
            if next.opcode == "NOP" && next.guard.is_none() {
                slot = true;
                break;
            }
            let transfers = next.is_branch() || next.control.exits || !next.falls_to_next();
            if read || transfers || next.kind.is_memory_or_order() {
                break;
            }
            read = next.uses.iter().any(|reg| loaded.contains(reg));
        }
        if slot && let InstKind::Load(mem) | InstKind::Atomic { mem, .. } = &mut insts[at].kind {
            mem.sem = Sem::Acquire;
        }
    }
}

fn is_predicate(reg: Register) -> bool {
    matches!(reg.file, RegFile::P | RegFile::UP)
}

/// Pushes `reg` and the `count - 1` registers after it (`R2.64` is `R2`, `R3`) onto `out`.
fn intern_regs(func: &mut Lowering, reg: Register, count: u16, out: &mut Regs) {
    for k in 0..count.max(1) {
        let Some(index) = reg.index.checked_add(k) else { break };
        let next = Register::new(reg.file, index);
        if next.is_special() {
            break;
        }
        if let Some(reg) = func.reg(next) {
            out.push(reg);
        }
    }
}

/// How many consecutive registers a register operand names: `R2.64` is two.
fn suffix_width(reg: &RegRef) -> u16 {
    if reg.suffix == "64" {
        2
    } else if reg.suffix == "128" {
        4
    } else {
        1
    }
}

/// How many consecutive registers the data operands of this opcode name (`LDG.E.128 R4` writes
/// `R4..R7`, `LDC.64 R2` writes `R2`, `R3`, `IMAD.WIDE R2` writes `R2`, `R3`, and
/// `LDSM.16.M88.4 R8` writes `R8..R11`, one register per 8x8 matrix; `CS2R R24, SRZ` writes
/// `R24`, `R25`, `CS2R.32` one register).
fn opcode_width(opcode: &str) -> u16 {
    let mut width = if opcode == "CS2R" { 2 } else { 1 };
    let mut matrices = false;
    for modifier in opcode.split('.').skip(1) {
        width = match modifier {
            "128" => 4,
            "64" | "WIDE" => width.max(2),
            "2" if matrices => width.max(2),
            "4" if matrices => 4,
            _ => width,
        };
        matrices = matches!(modifier, "M88" | "MT88");
    }
    width
}

fn memory_like(operand: &Operand<'_>) -> bool {
    matches!(operand.kind, OperandKind::Mem(_) | OperandKind::Const(_))
}

/// The number of leading operands that are written.
fn def_count(defs: Defs, operands: &[Operand<'_>]) -> usize {
    let n = match defs {
        Defs::Mem => operands.iter().position(memory_like).unwrap_or(0),
        Defs::Count(n) => usize::from(n),
        Defs::OnePlusPredicates => {
            if operands.is_empty() {
                0
            } else {
                1 + operands[1..]
                    .iter()
                    .take_while(|o| o.reg().is_some_and(|r| is_predicate(r.reg)))
                    .count()
            }
        }
        Defs::AllButLast => operands.len().saturating_sub(1),
        Defs::PredicatesPlusOne => {
            1 + operands.iter().take_while(|o| o.reg().is_some_and(|r| is_predicate(r.reg))).count()
        }
    };
    n.min(operands.len())
}

/// The scoreboard `n` of `DEPBAR.LE SBn, 0x0`, which waits for it as a wait mask does.
fn depbar_zero(operands: &[Operand<'_>], opcode: &str) -> Option<u8> {
    if opcode != "DEPBAR.LE" {
        return None;
    }
    let [first, count, ..] = operands else { return None };
    let sb = first.reg().filter(|r| r.reg.file == RegFile::SB)?;
    let index = u8::try_from(sb.reg.index).ok().filter(|&n| n < 6)?;
    (count.imm() == Some(0)).then_some(index)
}

/// The kind of `inst`: its opcode's, unless its operands say otherwise.
fn kind_of(
    inst: &SassInst<'_>,
    operands: &[Operand<'_>],
    facts: &OpcodeFacts,
    table: &table::Table,
) -> InstKind {
    let class = &facts.class;
    let meaning = class.row.map(|row| table.meaning(row));
    let mut kind = class.kind.clone();
    if let Some(meaning) = meaning {
        if let Some(sb) = meaning.scoreboard {
            let first_is_sb = operands
                .first()
                .and_then(Operand::reg)
                .is_some_and(|r| r.reg.file == RegFile::SB && r.reg.index == sb);
            if !first_is_sb {
                kind = InstKind::Other;
            }
        }
        if let (Some(at), InstKind::Async(AsyncOp::BulkWait { pending, .. })) =
            (meaning.pending_operand, &mut kind)
        {
            *pending = operands.get(at).and_then(Operand::imm).and_then(|n| u32::try_from(n).ok());
        }
    }
    // `BAR.SYNC.DEFER_BLOCKING 0x1, 0x80`: a thread count, a named barrier.
    if let InstKind::Barrier(Barrier::CtaSync { partial }) = &mut kind {
        *partial = operands.len() >= 2;
    }
    if inst.malformed {
        kind = InstKind::Unknown;
    }
    kind
}

/// Fills in `out`, made by [`Inst::new`] with the range, opcode and [`kind_of`] of `inst`, whose
/// operands are `operands`; a branch's target is returned, to be resolved at the end of the
/// function.
fn lower_inst<'a>(
    func: &mut Lowering,
    out: &mut Inst,
    inst: &SassInst<'a>,
    operands: &[Operand<'a>],
    facts: &OpcodeFacts,
    table: &table::Table,
) -> Option<BranchRef<'a>> {
    let meaning = facts.class.row.map(|row| table.meaning(row));
    // Function offsets: a listing whose addresses pass 4 GiB has none kept.
    out.sass_address = u32::try_from(inst.address).ok();
    out.ptx_line = inst.ptx_line;

    if let Some(guard) = inst.guard.filter(|g| !g.is_always())
        && let Some(reg) = func.reg(guard.reg)
    {
        out.guard = Some(Guard { reg, negated: guard.negated });
        out.uses.push(reg);
    }

    // Definitions and uses.
    let defs = match meaning {
        Some(meaning) => meaning.defs,
        None if operands.first().is_some_and(|o| o.reg().is_some()) => Defs::Count(1),
        None => Defs::Count(0),
    };
    let n_defs = def_count(defs, operands);
    let width = facts.width;
    let first_mem = operands.iter().position(memory_like);
    for (i, operand) in operands.iter().enumerate() {
        match &operand.kind {
            OperandKind::Reg(reg) => {
                let is_def = i < n_defs;
                // The first destination and the data operands after a memory operand carry the
                // access width; other registers name one register unless their suffix says.
                let count = if (is_def && i == 0) || first_mem.is_some_and(|m| i > m) {
                    width.max(suffix_width(reg))
                } else {
                    suffix_width(reg)
                };
                let count = if is_predicate(reg.reg) { 1 } else { count };
                let regs = if is_def { &mut out.defs } else { &mut out.uses };
                intern_regs(func, reg.reg, count, regs);
            }
            OperandKind::Mem(mem) => {
                uses_of_mem(func, mem, &mut out.uses);
            }
            OperandKind::Const(c) => {
                uses_of_const(func, c, &mut out.uses);
            }
            _ => {}
        }
    }

    // `HGMMA R24, R28, gdesc[UR4], ...`: A from registers (the second operand is one).
    if let InstKind::Wgmma(WgmmaOp::Mma { register_a }) = &mut out.kind
        && let Some(OperandKind::Reg(a)) = operands.get(1).map(|o| &o.kind)
        && a.reg.file == RegFile::R
    {
        *register_a = func.reg(a.reg);
    }

    set_addresses(func, out, operands);
    if let Some(alu) = meaning.and_then(|m| m.alu) {
        out.alu = Some(alu);
    }
    if let Some(rule) = meaning.and_then(|m| m.value) {
        out.value = value_op(func, rule, inst.opcode, operands);
        forget_self_copy(out);
    }
    if meaning.is_some_and(|m| m.pure)
        && out.guard.is_none()
        && out.defs.len() == 1
        && !numbered_by_form(out.value.as_ref())
    {
        out.pure_key = pure_key(inst.opcode, operands, n_defs);
    }
    set_control(func, out, inst, operands, meaning.is_some_and(|m| m.indirect))
}

/// Whether value numbering reads the instruction's [`ValueOp`] itself (a copy, `IADD3 R1, R2,
/// RZ, RZ` as `MOV R1, R2`; a comparison, the high half of a 64-bit one, a mask, a predicate
/// table; `FunctionAnalysis::value_number` in fencelint-cfg): such an instruction gets no pure
/// key, which would take precedence.
fn numbered_by_form(value: Option<&ValueOp>) -> bool {
    value.is_some_and(|op| {
        op.comparison().is_some()
            || matches!(
                op,
                ValueOp::Copy(_)
                    | ValueOp::CompareHigh { .. }
                    | ValueOp::AndImm(..)
                    | ValueOp::And(..)
                    | ValueOp::PredTable { .. }
            )
    })
}

/// [`Inst::pure_key`] of an instruction of a `pure` row with one destination register and no
/// guard: its opcode, how many destination operands it has and the first one's register file,
/// and each source operand that is not a register (immediates, a fixed constant-bank slot,
/// `RZ`, `PT`), with every operand's flags (`-`, `!`, `~`, `|..|`) and suffix (`.reuse` aside).
/// The registers are the instruction's uses, in order. `None` when a source is anything else
/// (a special register, a memory operand, a constant bank chosen by a register).
fn pure_key(opcode: &str, operands: &[Operand<'_>], n_defs: usize) -> Option<std::num::NonZeroU64> {
    let mut hasher = rustc_hash::FxHasher::default();
    ("sass", opcode, n_defs).hash(&mut hasher);
    operands.first().and_then(Operand::reg).map(|r| r.reg.file).hash(&mut hasher);
    for operand in operands.get(n_defs..)? {
        (operand.neg, operand.invert, operand.abs).hash(&mut hasher);
        match &operand.kind {
            OperandKind::Reg(reg) if reg.reg.is_special() => (0u8, reg).hash(&mut hasher),
            OperandKind::Reg(reg) => (1u8, reg.reg.file, reg.suffix).hash(&mut hasher),
            OperandKind::Imm(value) => (2u8, value).hash(&mut hasher),
            OperandKind::Float(value) => (3u8, value.value().to_bits()).hash(&mut hasher),
            OperandKind::Const(c)
                if matches!(c.bank, ConstBank::Index(_)) && c.addr.regs().next().is_none() =>
            {
                (4u8, c).hash(&mut hasher);
            }
            _ => return None,
        }
    }
    // Never zero, so that the key and its absence take one word.
    std::num::NonZeroU64::new(hasher.finish().max(1))
}

/// Makes a register copied onto itself (`MOV R6, R6`, `IMAD.MOV.U32 R6, RZ, RZ, R6`,
/// `IADD3 R6, R6, RZ, RZ`) an instruction that reads and writes nothing. Debug builds (`-G`)
/// emit such copies by the hundred to keep each variable's location, inside poll loops too;
/// taken as definitions, they made every register they touch look computed inside the loop
/// (the poll's address was no longer invariant) and stretched the chains that slices follow.
/// A copy of a register onto itself changes no value, guarded or not.
fn forget_self_copy(out: &mut Inst) {
    if let Some(ValueOp::Copy(src)) = out.value
        && out.defs.as_slice() == [src]
    {
        out.defs.clear();
        out.uses.clear();
        out.guard = None;
        out.value = None;
        out.alu = None;
    }
}

fn uses_of_address(func: &mut Lowering, address: &fencelint_sass::Address, uses: &mut Regs) {
    for reg in address.regs() {
        intern_regs(func, reg.reg, suffix_width(&reg), uses);
    }
}

fn uses_of_mem(func: &mut Lowering, mem: &MemOperand, uses: &mut Regs) {
    if let Some(desc) = mem.desc {
        intern_regs(func, desc.reg, suffix_width(&desc), uses);
    }
    uses_of_address(func, &mem.addr, uses);
}

fn uses_of_const(func: &mut Lowering, c: &ConstOperand, uses: &mut Regs) {
    if let ConstBank::Reg(reg) = c.bank {
        intern_regs(func, reg.reg, 1, uses);
    }
    uses_of_address(func, &c.addr, uses);
}

/// Index scalings of an address register (`[R2.X4+URZ]`).
const SCALES: [&str; 4] = ["X2", "X4", "X8", "X16"];

/// An IR address from the inside of `[...]`.
fn ir_address(func: &mut Lowering, address: &fencelint_sass::Address) -> Address {
    let regs = || address.regs().filter(|r| !r.reg.is_zero());
    // A scaled index (`[R2.X4+URZ]`) is not the register's value.
    let scaled = regs().any(|r| SCALES.iter().any(|scale| r.suffix == *scale));
    let mut nonzero = regs();
    let base = match (nonzero.next(), nonzero.next()) {
        (None, _) => AddrBase::Absolute,
        (Some(reg), None) if !scaled => match func.reg(reg.reg) {
            Some(reg) => AddrBase::Reg(reg),
            None => AddrBase::Complex(Vec::new()),
        },
        _ => AddrBase::Complex(regs().filter_map(|r| func.reg(r.reg)).collect()),
    };
    Address { base, offset: address.offset }
}

fn const_address(func: &mut Lowering, c: &ConstOperand) -> Address {
    match c.bank {
        ConstBank::Index(bank) if c.addr.regs().all(|r| r.reg.is_zero()) => {
            Address { base: AddrBase::Symbol(func.name(bank, None)), offset: c.addr.offset }
        }
        _ => {
            let mut address = ir_address(func, &c.addr);
            if let (ConstBank::Reg(reg), AddrBase::Complex(regs)) = (c.bank, &mut address.base)
                && let Some(reg) = func.reg(reg.reg)
            {
                regs.push(reg);
            }
            if !matches!(address.base, AddrBase::Complex(_)) {
                let regs = match address.base {
                    AddrBase::Reg(r) => vec![r],
                    _ => Vec::new(),
                };
                address.base = AddrBase::Complex(regs);
            }
            address
        }
    }
}

fn set_addresses(func: &mut Lowering, out: &mut Inst, operands: &[Operand<'_>]) {
    let mems = || operands.iter().filter_map(Operand::mem);
    let primary = match &out.kind {
        // tcgen05 operations name tensor memory; `UTCHMMA` lists its matrix descriptors first.
        InstKind::Tcgen05(_) => mems().find(|m| m.prefix == MemPrefix::Tmem).or(mems().next()),
        _ => mems().next(),
    };
    match primary {
        Some(mem) => out.address = Some(ir_address(func, &mem.addr)),
        None if matches!(out.kind, InstKind::Load(_)) => {
            let c = operands.iter().find_map(|o| match &o.kind {
                OperandKind::Const(c) => Some(c),
                _ => None,
            });
            out.address = c.map(|c| const_address(func, c));
        }
        None => {}
    }
    if let InstKind::Async(AsyncOp::Bulk { .. }) = out.kind
        && let Some(src) = mems().nth(1)
    {
        let address = ir_address(func, &src.addr);
        out.extra_addresses.push((AddressRole::Source, address));
    }
    if matches!(out.kind, InstKind::Tcgen05(Tcgen05Op::Alloc | Tcgen05Op::Dealloc)) {
        // The allocation writes its result through registers, not a printed address.
        out.address = None;
    }
}

/// The bank and name of a constant-bank slot: `c[0x0][0x210]`.
fn const_slot(func: &mut Lowering, c: &ConstOperand) -> Option<(u32, Name)> {
    match c.bank {
        ConstBank::Index(bank) if c.addr.regs().all(|r| r.reg.is_zero()) => {
            Some((bank, func.name(bank, Some(c.addr.offset))))
        }
        _ => None,
    }
}

/// The value a plain source operand gives: another register, an immediate, or a constant-bank
/// slot (a kernel parameter in bank 0, a module symbol's address in the others).
fn source_value(func: &mut Lowering, operand: &Operand<'_>) -> Option<ValueOp> {
    if operand.neg || operand.invert || operand.abs {
        return None;
    }
    match &operand.kind {
        OperandKind::Reg(reg) if reg.reg.is_zero() => Some(ValueOp::Imm(0)),
        OperandKind::Reg(reg) if is_predicate(reg.reg) => None,
        OperandKind::Reg(reg) => func.reg(reg.reg).map(ValueOp::Copy),
        OperandKind::Imm(value) => Some(ValueOp::Imm(*value)),
        OperandKind::Const(c) => const_slot(func, c).map(|(bank, slot)| {
            if bank == 0 { ValueOp::Param(slot) } else { ValueOp::SymbolAddr(slot) }
        }),
        _ => None,
    }
}

/// The bits of `value` as an IEEE half, when it is one exactly (zero, normal or subnormal).
fn f16_bits(value: f64) -> Option<u16> {
    let bits = value.to_bits();
    let sign = u16::from(bits >> 63 == 1) << 15;
    let exponent = i32::try_from((bits >> 52) & 0x7ff).ok()? - 1023;
    let fraction = bits & ((1u64 << 52) - 1);
    if exponent == -1023 && fraction == 0 {
        return Some(sign);
    }
    if (-14..=15).contains(&exponent) {
        // A normal half keeps the top 10 of the 52 fraction bits.
        if fraction & ((1u64 << 42) - 1) != 0 {
            return None;
        }
        let biased = u16::try_from(exponent + 15).ok()?;
        return Some(sign | biased << 10 | u16::try_from(fraction >> 42).ok()?);
    }
    if (-24..-14).contains(&exponent) {
        // A subnormal half is a multiple of 2^-24.
        let shift = u32::try_from(52 - (exponent + 24)).ok()?;
        let full = (1u64 << 52) | fraction;
        if full & ((1u64 << shift) - 1) != 0 {
            return None;
        }
        return Some(sign | u16::try_from(full >> shift).ok()?);
    }
    None
}

/// `a + b + c` where one term is a register and the others immediates or zero.
fn sum_value(func: &mut Lowering, terms: &[Operand<'_>]) -> Option<ValueOp> {
    let mut reg = None;
    let mut offset = 0i64;
    for term in terms {
        match source_value(func, term)? {
            ValueOp::Copy(r) if reg.is_none() => reg = Some(r),
            ValueOp::Imm(value) => offset = offset.wrapping_add(value),
            _ => return None,
        }
    }
    let reg = reg?;
    Some(if offset == 0 { ValueOp::Copy(reg) } else { ValueOp::AddImm(reg, offset) })
}

fn value_op(
    func: &mut Lowering,
    rule: ValueRule,
    opcode: &str,
    operands: &[Operand<'_>],
) -> Option<ValueOp> {
    match rule {
        ValueRule::Isetp => isetp_value(func, opcode, operands),
        ValueRule::Lop3And => lop3_and_value(func, operands),
        ValueRule::Plop3 => plop3_value(func, operands),
        ValueRule::Vote => vote_value(func, opcode, operands),
        ValueRule::TimesOne => {
            if opcode.split('.').skip(1).any(|m| m == "HI" || m == "X") {
                return None;
            }
            let [.., a, b, c] = operands else { return None };
            let zero = |o: &Operand<'_>| o.reg().is_some_and(|r| r.reg.is_zero());
            let one = |o: &Operand<'_>| !o.neg && matches!(o.kind, OperandKind::Imm(1));
            let src = if one(b) && zero(c) {
                a
            } else if zero(a) && zero(b) {
                c
            } else {
                return None;
            };
            if !is_general(src) || !is_plain(src) {
                return None;
            }
            Some(ValueOp::TimesOne(func.reg(src.reg()?.reg)?))
        }
        ValueRule::Popc => {
            let [_, src] = operands else { return None };
            if !is_general(src) || !is_plain(src) {
                return None;
            }
            Some(ValueOp::PopCount(func.reg(src.reg()?.reg)?))
        }
        ValueRule::Permute => Some(permute_value(func, opcode, operands)),
        // `SHF.R.U32.HI Rd, RZ, 0x8, Rs`: the high word of `Rs:0` shifted right, `Rs >> 8`.
        ValueRule::Shr => {
            let [_, low, amount, src] = operands else { return None };
            let zero = low.reg().is_some_and(|r| r.reg.is_zero());
            let amount = amount.imm().filter(|&k| (1..32).contains(&k))?;
            if !zero || !is_general(src) || !is_plain(src) {
                return None;
            }
            Some(ValueOp::ShrImm(func.reg(src.reg()?.reg)?, amount))
        }
        // `SHFL.IDX PT, R15, R19, RZ, 0x1f`: `R19` of the lane the index names.
        ValueRule::Shuffle => {
            let [_, _, src, ..] = operands else { return Some(ValueOp::Varying) };
            let src = is_general(src).then(|| src.reg()).flatten().and_then(|r| func.reg(r.reg));
            Some(src.map_or(ValueOp::Varying, ValueOp::Shuffle))
        }
        // `SEL R19, RZ, 0x1, P1`: one of two constants.
        ValueRule::Either => {
            let [_, a, b, _] = operands else { return None };
            if !is_plain(a) || !is_plain(b) {
                return None;
            }
            Some(ValueOp::Either(constant_operand(a)?, constant_operand(b)?))
        }
        // `CS2R R24, SRZ` is ptxas's way of zeroing a register pair.
        ValueRule::Varying => match operands.get(1).map(|o| o.kind) {
            Some(OperandKind::Special("SRZ")) => None,
            _ => Some(ValueOp::Varying),
        },
        ValueRule::SpaceQuery => Some(ValueOp::InSpace(match opcode.rsplit('.').next()? {
            "S" => Space::SharedCta,
            "D" => Space::SharedCluster,
            "G" => Space::Global,
            "L" => Space::Local,
            _ => return None,
        })),
        ValueRule::RetriedSwap => Some(ValueOp::RetriedSwap),
        ValueRule::FetchAdd => {
            let addend = operands.last()?;
            if !opcode.split('.').any(|w| w == "ADD") || !is_general(addend) || !is_plain(addend) {
                return None;
            }
            Some(ValueOp::FetchAddReg(func.reg(addend.reg()?.reg)?))
        }
        ValueRule::Copy | ValueRule::Ldc => source_value(func, operands.get(1)?),
        ValueRule::ImadMov => {
            let zero = |o: &Operand<'_>| o.reg().is_some_and(|r| r.reg.is_zero());
            if operands.len() == 4 && zero(&operands[1]) && zero(&operands[2]) {
                source_value(func, &operands[3])
            } else {
                None
            }
        }
        ValueRule::Hfma2Const => {
            let zero = |o: &Operand<'_>| o.reg().is_some_and(|r| r.reg.is_zero());
            let [_, a, b, high, low] = operands else { return None };
            if !zero(a) || !zero(b) {
                return None;
            }
            let half = |o: &Operand<'_>| match o.kind {
                OperandKind::Imm(value) if !o.neg => {
                    f16_bits(f64::from(i32::try_from(value).ok()?))
                }
                OperandKind::Float(value) => f16_bits(if o.neg { -value.0 } else { value.0 }),
                _ => None,
            };
            Some(ValueOp::Imm(i64::from(half(high)?) << 16 | i64::from(half(low)?)))
        }
        ValueRule::Add3 => {
            // The three terms after the destination and any carry-out predicates.
            let skip = operands
                .iter()
                .skip(1)
                .take_while(|o| o.reg().is_some_and(|r| is_predicate(r.reg)))
                .count();
            let sources = operands.get(1 + skip..)?;
            if sources.len() == 3 { sum_value(func, sources) } else { None }
        }
        ValueRule::Add => {
            let sources = operands.get(1..)?;
            if sources.len() == 2 { sum_value(func, sources) } else { None }
        }
    }
}

/// `PRMT Rd, Ra, sel, Rb` (`UPRMT`): which bytes of which one register a constant selector
/// picks. Each nibble of `sel` names a byte of `Ra` (0 to 3) or `Rb` (4 to 7); with its top bit
/// set, that byte's sign is copied. The mode forms (`PRMT.F4E`, ...) read the selector
/// differently and name none.
fn permute_value(func: &mut Lowering, opcode: &str, operands: &[Operand<'_>]) -> ValueOp {
    let unknown = ValueOp::BytePermute { src: None, bytes: 0 };
    let [_, a, selector, b] = operands else { return unknown };
    if !matches!(opcode, "PRMT" | "UPRMT") || !is_plain(a) || !is_plain(b) {
        return unknown;
    }
    let Some(selector) = selector.imm() else { return unknown };
    let source = |o: &Operand<'_>| if is_general(o) { o.reg().map(|r| r.reg) } else { None };
    let zero = |o: &Operand<'_>| o.reg().is_some_and(|r| r.reg.is_zero());
    let (mut src, mut bytes) = (None, 0u8);
    for nibble in (0..4).map(|i| (selector >> (4 * i)) & 0x7) {
        let (operand, byte) = if nibble < 4 { (a, nibble) } else { (b, nibble - 4) };
        if zero(operand) {
            continue;
        }
        let Some(reg) = source(operand) else { return unknown };
        if src.is_some_and(|s| s != reg) {
            return unknown;
        }
        src = Some(reg);
        bytes |= 1 << byte;
    }
    match src.and_then(|reg| func.reg(reg)) {
        Some(reg) => ValueOp::BytePermute { src: Some(reg), bytes },
        None => unknown,
    }
}

/// An operand with no negation, inversion or absolute value.
fn is_plain(o: &Operand<'_>) -> bool {
    !(o.neg || o.invert || o.abs)
}

/// `PT` (or `UPT`), not inverted.
fn is_always(o: &Operand<'_>) -> bool {
    !o.invert && o.reg().is_some_and(|r| r.reg.is_true())
}

/// A register that holds a value: not a zero register, a special register or a predicate.
fn is_general(o: &Operand<'_>) -> bool {
    o.reg().is_some_and(|r| !r.reg.is_zero() && !r.reg.is_special() && !is_predicate(r.reg))
}

/// The value of a constant operand: an immediate, or `RZ`/`URZ` as 0.
fn constant_operand(o: &Operand<'_>) -> Option<i64> {
    match o.reg() {
        Some(r) if r.reg.is_zero() => Some(0),
        Some(_) => None,
        None => o.imm(),
    }
}

/// `LOP3.LUT Rd, Ra, imm, RZ, lut, !PT` (`ULOP3.LUT` with uniform registers) whose table
/// computes `a & b` when the third input is zero (bits 0, 2, 4 and 6 of the table, the rows
/// where `c` is 0, are `0x40`; ptxas writes `0xc0`): `Rd` is `Ra & imm`, or `Ra & Rb` with a
/// register second source. With a predicate destination first (`LOP3.LUT P0, R6, R0,
/// 0xc0000000, RZ, 0xc0, !PT`, `Rd` may be `RZ`) the value is the same and the predicate says
/// whether it is non-zero. A third source other than zero gives `None`.
fn lop3_and_value(func: &mut Lowering, operands: &[Operand<'_>]) -> Option<ValueOp> {
    let (dest, a, b, c, lut, combine) = match operands {
        [dest, a, b, c, lut, combine] if is_general(dest) => (dest, a, b, c, lut, combine),
        // A predicate destination first: the register destination may be `RZ`.
        [p, dest, a, b, c, lut, combine]
            if p.reg().is_some_and(|r| is_predicate(r.reg) && !r.reg.is_true())
                && (is_general(dest) || dest.reg().is_some_and(|r| r.reg.is_zero())) =>
        {
            (dest, a, b, c, lut, combine)
        }
        _ => return None,
    };
    if !is_plain(dest) || !is_general(a) || !is_plain(a) || !is_plain(b) {
        return None;
    }
    let never = combine.invert && combine.reg().is_some_and(|r| r.reg.is_true());
    if !c.reg().is_some_and(|r| r.reg.is_zero()) || !never {
        return None;
    }
    if lut.imm()? & 0x55 != 0x40 {
        return None;
    }
    let reg = func.reg(a.reg()?.reg)?;
    if is_general(b) {
        return Some(ValueOp::And(reg, func.reg(b.reg()?.reg)?));
    }
    let mask = b.imm()?;
    Some(ValueOp::AndImm(reg, mask))
}

/// `PLOP3.LUT Pd, PT, a, b, c, table, 0x0`: `Pd` is the table's function of the three inputs,
/// each a predicate, read inverted or not, or `PT`/`!PT` ([`ValueOp::PredTable`], inversions
/// and constants folded into the table). `None` when the second destination is a predicate (it
/// gets a value of its own).
fn plop3_value(func: &mut Lowering, operands: &[Operand<'_>]) -> Option<ValueOp> {
    let [dest, second, a, b, c, table, _] = operands else { return None };
    let dest = dest.reg()?;
    if !is_predicate(dest.reg) || dest.reg.is_true() || !is_always(second) {
        return None;
    }
    let table = u8::try_from(table.imm()?).ok()?;
    // Each input: a register, or the constant it reads; and whether it is read inverted.
    let mut inputs = [(None, false); 3];
    for (input, o) in inputs.iter_mut().zip([a, b, c]) {
        let reg = o.reg()?.reg;
        if o.neg || o.abs || !is_predicate(reg) {
            return None;
        }
        *input = if reg.is_true() { (None, !o.invert) } else { (Some(func.reg(reg)?), o.invert) };
    }
    // Row `r` of the new table reads row `read(r)` of the instruction's.
    let read = |row: usize| {
        let mut original = 0;
        for (place, (reg, flag)) in inputs.iter().enumerate() {
            let bit = row >> (2 - place) & 1 == 1;
            let value = if reg.is_some() { bit != *flag } else { *flag };
            original |= usize::from(value) << (2 - place);
        }
        original
    };
    let folded = (0..8).fold(0u8, |acc, row| acc | (table >> read(row) & 1) << row);
    // A place whose input was a constant repeats a register: the table ignores it.
    let any = match inputs.iter().find_map(|(reg, _)| *reg) {
        Some(reg) => reg,
        None => func.reg(dest.reg)?,
    };
    let inputs = inputs.map(|(reg, _)| reg.unwrap_or(any));
    Some(ValueOp::PredTable { inputs, table: folded })
}

/// `VOTE.ANY Pd, [!]Ps` or `VOTE.ALL RZ, Pd, [!]Ps` (`VOTEU` with a uniform destination):
/// `Pd` is the vote of `Ps` over the warp. The ballot forms that write a register give `None`.
fn vote_value(func: &mut Lowering, opcode: &str, operands: &[Operand<'_>]) -> Option<ValueOp> {
    let all = match opcode.split('.').nth(1)? {
        "ANY" => false,
        "ALL" => true,
        _ => return None,
    };
    let (dest, src) = match operands {
        [dest, src] => (dest, src),
        [zero, dest, src] if zero.reg().is_some_and(|r| r.reg.is_zero()) => (dest, src),
        // The ballot of `PT`: the lanes that execute the vote (`VOTEU.ANY UR6, UPT, PT`).
        [ballot, _, src] if !all && is_general(ballot) && is_always(src) => {
            return Some(ValueOp::ActiveLanes);
        }
        _ => return None,
    };
    let predicate = |o: &Operand<'_>| {
        o.reg().is_some_and(|r| is_predicate(r.reg) && !r.reg.is_true() && !o.neg && !o.abs)
    };
    if !predicate(dest) || dest.invert || !predicate(src) {
        return None;
    }
    let negated = src.invert;
    let src = func.reg(src.reg()?.reg)?;
    Some(ValueOp::Vote { all, src, negated })
}

/// `ISETP.<relation>[.U32].AND Pd, PT, Ra, imm|RZ|Rb, PT`: `Pd` is `Ra <relation> imm` (or
/// `Rb`, or a constant-bank slot `c[0x0][0x180]`, which stands as a register named as the
/// slot); with another predicate than `PT` last, the comparison joined to it (`.AND`, `.OR`).
/// Other forms (a second destination, `.EX` halves other than a 64-bit (in)equality) give
/// `None`.
fn isetp_value(func: &mut Lowering, opcode: &str, operands: &[Operand<'_>]) -> Option<ValueOp> {
    let mut words = opcode.split('.').skip(1);
    let relation = match words.next()? {
        "EQ" => Relation::Eq,
        "NE" => Relation::Ne,
        "LT" => Relation::Lt,
        "LE" => Relation::Le,
        "GT" => Relation::Gt,
        "GE" => Relation::Ge,
        _ => return None,
    };
    let mut signed = true;
    let mut word = words.next()?;
    if word == "U32" {
        signed = false;
        word = words.next()?;
    }
    let or = match word {
        "AND" => false,
        "OR" => true,
        _ => return None,
    };
    match words.next() {
        None => {}
        Some("EX") if !or && words.next().is_none() => {
            return isetp_ex_value(func, relation, signed, operands);
        }
        Some(_) => return None,
    }
    let [_, second, a, b, combine] = operands else { return None };
    if !is_always(second) || !is_plain(a) || !is_plain(b) {
        return None;
    }
    // `.AND PT` is the comparison alone; another predicate is joined to it.
    let joined = if is_always(combine) {
        None
    } else if let Some(r) = combine.reg()
        && is_predicate(r.reg)
        && !r.reg.is_special()
    {
        Some((func.reg(r.reg)?, combine.invert))
    } else {
        return None;
    };
    if or && joined.is_none() {
        return None;
    }
    let register = |func: &mut Lowering, o: &Operand<'_>| match o.reg() {
        Some(r) if !r.reg.is_special() && !is_predicate(r.reg) => func.reg(r.reg),
        _ => None,
    };
    // A constant-bank slot (a kernel parameter) compared with a register stands as a register
    // that nothing defines, named as the slot: every read of it is one value.
    let slot_or_register = |func: &mut Lowering, o: &Operand<'_>| match &o.kind {
        OperandKind::Const(c) => {
            let (_, slot) = const_slot(func, c)?;
            Some(func.func.intern_reg(&slot))
        }
        _ => register(func, o),
    };
    let mut compare = IntCompare { relation, signed, bits: 32 };
    if constant_operand(a).is_none()
        && constant_operand(b).is_none()
        && let (Some(a), Some(b)) = (slot_or_register(func, a), slot_or_register(func, b))
    {
        return Some(match joined {
            None => ValueOp::CompareRegs(compare, a, b),
            Some((other, negated)) => {
                ValueOp::CompareRegsJoined { compare, a, b, other, negated, or }
            }
        });
    }
    let (src, bound) = if let (Some(reg), Some(value)) = (register(func, a), constant_operand(b)) {
        (reg, value)
    } else {
        let (value, reg) = (constant_operand(a)?, register(func, b)?);
        compare.relation = relation.swapped();
        (reg, value)
    };
    Some(match joined {
        None => ValueOp::Compare(compare, src, bound),
        Some((other, negated)) => {
            ValueOp::CompareJoined { compare, src, bound, other, negated, or }
        }
    })
}

/// `ISETP.{NE,EQ}.AND.EX Pd, PT, Rhi, imm|RZ, PT, Plo`: the high half of a 64-bit
/// (in)equality with a constant, whose low halves' comparison wrote `Plo`.
fn isetp_ex_value(
    func: &mut Lowering,
    relation: Relation,
    signed: bool,
    operands: &[Operand<'_>],
) -> Option<ValueOp> {
    if !matches!(relation, Relation::Eq | Relation::Ne) {
        return None;
    }
    let [_, second, a, b, combine, low] = operands else { return None };
    let plain = [a, b, low].iter().all(|o| is_plain(o));
    if !is_always(second) || !is_always(combine) || !plain || !is_general(a) {
        return None;
    }
    let high = func.reg(a.reg()?.reg)?;
    let bound = constant_operand(b)?;
    let low = match low.reg() {
        Some(r) if is_predicate(r.reg) && !r.reg.is_true() => func.reg(r.reg)?,
        _ => return None,
    };
    let compare = IntCompare { relation, signed, bits: 32 };
    Some(ValueOp::CompareHigh { compare, high, bound, low })
}

/// The most instructions that copies of subroutines add to a function, or as many as its own
/// when that is more; calls past it stay instructions that fall through.
const SUBROUTINE_BUDGET_MIN: usize = 16_384;

/// Follows calls into the function's own subroutines. ptxas places the code of a
/// `__noinline__` function after the kernel's own code, as a subroutine of the kernel
/// (`CALL.REL.NOINC 0xe0` ... `RET.REL.NODEC R4`), and calls small helpers of its own that way
/// (`WARPSYNC` sequences in NCCL's `sm_80` kernels). Each call gets its own copy of the
/// subroutine's instructions, placed after the function's, whose returns go back to the
/// instruction after that call: paths through a subroutine return to their own caller (one
/// shared copy would join every caller to every return site, and make loops of code that has
/// none). The subroutine is what a walk from its entry reaches without passing a return (a
/// nested call continues after itself); it must hold a return and share no instruction with
/// the function's own code ([`subroutine`]). Not followed: a call to the next instruction, a
/// target that is no subroutine, recursion, and calls past the budget.
fn inline_subroutines(insts: &mut Vec<Inst>, calls: Vec<(InstId, InstId)>) -> Option<u32> {
    let original = insts.len();
    let budget = SUBROUTINE_BUDGET_MIN.max(original);
    // The subroutine at each entry looked at (`None`: not one, or too large); the walks that
    // find them share one budget of steps, as hostile input can call thousands of targets.
    let mut regions: HashMap<InstId, Option<Arc<[InstId]>>> = HashMap::new();
    let mut steps = 4 * budget;
    let mut seen = vec![u32::MAX; original];
    let main = reached(insts, false);
    let mut first_copy = None;
    // (call, entry, where the call returns to, the entries of the copies the call sits in: no
    // recursion into them)
    let mut work: Vec<(InstId, InstId, Option<InstId>, Vec<InstId>)> = calls
        .into_iter()
        .rev()
        .map(|(call, entry)| {
            let return_to = (call.index() + 1 < original).then_some(InstId(call.0 + 1));
            (call, entry, return_to, Vec::new())
        })
        .collect();
    while let Some((call, entry, return_to, within)) = work.pop() {
        if entry.0 == call.0 + 1 || within.contains(&entry) {
            continue;
        }
        let left = budget.saturating_sub(insts.len() - original);
        let stamp = regions.len() as u32;
        let region = regions
            .entry(entry)
            .or_insert_with(|| {
                let walk =
                    Walk { max: left, steps: &mut steps, seen: &mut seen, stamp, main: &main };
                subroutine(&insts[..original], entry, walk).map(Arc::from)
            })
            .clone();
        let Some(region) = region else { continue };
        if region.len() > left {
            continue;
        }
        if first_copy.is_none() {
            crate::seal(insts, "EXIT");
            first_copy = Some(insts.len() as u32);
        }
        let base = insts.len() as u32;
        let moved = |id: InstId| region.binary_search(&id).ok().map(|k| InstId(base + k as u32));
        let mut nested = Vec::new();
        for &id in region.iter() {
            let mut copy = insts[id.index()].clone();
            if matches!(copy.kind, InstKind::Return) {
                copy.control.targets = return_to.into_iter().collect();
                copy.control.exits = return_to.is_none();
            } else if matches!(copy.kind, InstKind::Call) {
                // A nested call: followed from its copy in turn. What comes after it is in the
                // region (the walk went on there), right after it.
                if let Some(&target) = copy.control.targets.first() {
                    let at = moved(id).unwrap_or(id);
                    nested.push((at, target, moved(InstId(id.0 + 1))));
                }
            } else {
                for target in &mut copy.control.targets {
                    *target = moved(*target).unwrap_or(*target);
                }
            }
            insts.push(copy);
        }
        let copy_entry = moved(entry).unwrap_or(entry);
        let site = &mut insts[call.index()];
        site.control.targets = fencelint_ir::thin_vec![copy_entry];
        site.control.falls_through = site.guard.is_some();
        let mut inner = within.clone();
        inner.push(entry);
        work.extend(nested.into_iter().rev().map(|(c, e, r)| (c, e, r, inner.clone())));
    }
    // Calls that were not followed fall through, as calls of other functions do.
    for inst in insts.iter_mut() {
        if matches!(inst.kind, InstKind::Call)
            && inst.control.targets.first().is_some_and(|t| t.index() < original)
        {
            inst.control.targets.clear();
            inst.control.falls_through = true;
        }
    }
    first_copy
}

/// The most instructions that copies of other functions' code may add to a module, beyond its
/// own count ([`link_functions`]): each copy holds the copies of its own callees, so a chain of
/// calls would otherwise copy every function into every caller above it.
const LINK_BUDGET_MIN: usize = 65_536;

/// Follows the calls of each function to other functions of its module (`calls`: function
/// index, call, callee name). nvdisasm names the callee of a call that ptxas did not resolve
/// within the function (`` CALL.ABS.NOINC `(_Z12wait_relaxedPKj) `` in a `-rdc` build, whose
/// `__noinline__` functions are functions of their own); cuobjdump prints `0x0` there, so its
/// calls stay unresolved. As for a subroutine ([`inline_subroutines`]), the call goes to a copy
/// of the callee's code placed after the caller's own, one copy per call, and the copy's returns
/// come back after the call. Callees are linked before their callers (so a copy holds the
/// callee's own callees), and a call into a function whose linking is under way (recursion) is
/// not followed. Calls of functions the module does not hold (`__assertfail`, `vprintf`), and
/// calls past the caller's budget ([`SUBROUTINE_BUDGET_MIN`] or its own size, shared with its
/// subroutines) or the module's ([`LINK_BUDGET_MIN`] or its own size), stay instructions that
/// fall through. A function that another one calls is no kernel (device code does not call a
/// kernel): nvdisasm JSON, which does not mark kernels, then keeps a finding in called code as
/// the caller's, as the text listing does. Returns the names called that the module does not
/// hold, sorted, once each ([`fencelint_ir::Module::external_calls`]).
fn link_functions(functions: &mut [Function], calls: &[(usize, InstId, &str)]) -> Vec<String> {
    if calls.is_empty() {
        return Vec::new();
    }
    let by_name: HashMap<String, usize> = functions
        .iter()
        .enumerate()
        .rev()
        .map(|(index, func)| (func.name.clone(), index))
        .collect();
    let mut edges: Vec<Vec<(InstId, usize)>> = vec![Vec::new(); functions.len()];
    let mut external: Vec<String> = Vec::new();
    for &(caller, call, name) in calls {
        match by_name.get(name) {
            Some(&callee) if callee != caller => {
                edges[caller].push((call, callee));
                functions[callee].is_kernel = false;
            }
            Some(_) => {}
            None => external.push(name.to_owned()),
        }
    }
    external.sort_unstable();
    external.dedup();
    let total: usize = functions.iter().map(|func| func.insts.len()).sum();
    let mut budget = LINK_BUDGET_MIN.max(total);
    // The code of each linked callee reached from its entry, in text order, found once.
    let mut copied: Vec<Option<Vec<InstId>>> = vec![None; functions.len()];
    // Depth first, without recursion (a listing can chain thousands of calls): 0 not reached,
    // 1 on the stack, 2 linked.
    let mut state = vec![0u8; functions.len()];
    for root in 0..functions.len() {
        if state[root] != 0 || edges[root].is_empty() {
            continue;
        }
        state[root] = 1;
        let mut stack = vec![(root, 0usize)];
        while let Some((func, next)) = stack.last_mut() {
            let func = *func;
            if let Some(&(_, callee)) = edges[func].get(*next) {
                *next += 1;
                if state[callee] == 0 {
                    state[callee] = 1;
                    stack.push((callee, 0));
                }
                continue;
            }
            stack.pop();
            // A callee still on the stack calls back into this function.
            let sites: Vec<(InstId, usize)> =
                edges[func].iter().copied().filter(|&(_, callee)| state[callee] == 2).collect();
            for &(_, callee) in &sites {
                if copied[callee].is_none() {
                    let code = reached(&functions[callee].insts, true);
                    let ids = (0..code.len() as u32).filter(|&k| code[k as usize]).map(InstId);
                    copied[callee] = Some(ids.collect());
                }
            }
            link_calls(functions, func, &sites, &copied, &mut budget);
            crate::constants::fold_call_constants(&mut functions[func]);
            state[func] = 2;
        }
    }
    external
}

/// Copies the code of the callee of each of `sites` into `functions[into]` ([`link_functions`]).
fn link_calls(
    functions: &mut [Function],
    into: usize,
    sites: &[(InstId, usize)],
    copied: &[Option<Vec<InstId>>],
    budget: &mut usize,
) {
    for &(call, from) in sites {
        let (func, callee) = if into < from {
            let (left, right) = functions.split_at_mut(from);
            (&mut left[into], &right[0])
        } else {
            let (left, right) = functions.split_at_mut(into);
            (&mut right[0], &left[from])
        };
        let own = func.inlined_from.map_or(func.insts.len(), |k| k as usize);
        // The callee's code reached from its entry (not the padding after its last return), and
        // where each instruction goes in the caller.
        let Some(code) = &copied[from] else { continue };
        let length = code.len();
        let added = func.insts.len() - own;
        if length == 0 || added + length > SUBROUTINE_BUDGET_MIN.max(own) || length > *budget {
            continue;
        }
        *budget -= length;
        crate::seal(&mut func.insts, "EXIT");
        let base = func.insts.len() as u32;
        func.inlined_from.get_or_insert(base);
        let moved = |id: InstId| code.binary_search(&id).ok().map(|k| InstId(base + k as u32));
        let return_to = (call.index() + 1 < own).then_some(InstId(call.0 + 1));
        let regs: Vec<Reg> = callee.regs.iter().map(|name| func.intern_reg(name)).collect();
        for &id in code {
            let mut copy = callee.insts[id.index()].clone();
            copy.map_regs(|reg| regs[reg.0 as usize]);
            copy.control.targets.retain_mut(|target| match moved(*target) {
                Some(to) => {
                    *target = to;
                    true
                }
                None => false,
            });
            // The callee's returns (those of its copies of its own subroutines go back into it).
            if matches!(copy.kind, InstKind::Return) && copy.control.targets.is_empty() {
                copy.control.targets = return_to.into_iter().collect();
                copy.control.exits = return_to.is_none();
            }
            func.insts.push(copy);
        }
        crate::seal(&mut func.insts, "EXIT");
        let site = &mut func.insts[call.index()];
        site.control.targets = fencelint_ir::thin_vec![InstId(base)];
        site.control.falls_through = site.guard.is_some();
    }
}

/// Where the one subroutine of a kernel in nvdisasm JSON starts, with its name. The JSON names
/// the subroutine a call goes to (`$kernel$callee`, ptxas's name for a function it placed after
/// the kernel's code) but prints no label for it. When every such call of the function names
/// the same one, its code is what follows the kernel's own: the first instruction after the last
/// one reached from the entry (calls falling through). Not guessed with several subroutines
/// (their order is not known); [`inline_subroutines`] still checks that the code holds a `RET`
/// and is not the kernel's own (code reached only through a jump table, which the walk does not
/// follow, leads to an `EXIT`, not a `RET`).
fn lone_subroutine<'a>(
    insts: &[Inst],
    calls: &[(InstId, BranchRef<'a>)],
    function: &str,
) -> Option<(&'a str, InstId)> {
    let is_subroutine = |label: &str| {
        let callee = label.strip_prefix('$').and_then(|rest| rest.strip_prefix(function));
        callee.and_then(|rest| rest.strip_prefix('$')).is_some_and(|callee| !callee.is_empty())
    };
    let mut names = calls.iter().filter_map(|(_, call)| match call {
        BranchRef::Label(label) if is_subroutine(label) => Some(*label),
        _ => None,
    });
    let name = names.next()?;
    if names.any(|other| other != name) {
        return None;
    }
    let own = reached(insts, false);
    let entry = own.iter().rposition(|&r| r)? + 1;
    if entry >= insts.len() {
        return None;
    }
    Some((name, InstId(u32::try_from(entry).ok()?)))
}

/// The instructions reached from the function's entry. With `into_calls` false, calls fall
/// through and their targets are not followed: the function's own code, which no subroutine
/// shares. With it true, calls go where they were resolved to (the copies of the code they
/// call): a function's code as a caller copies it ([`link_calls`]), without the padding after
/// its last return.
fn reached(insts: &[Inst], into_calls: bool) -> Vec<bool> {
    let mut reached = vec![false; insts.len()];
    let mut work = vec![InstId(0)];
    while let Some(at) = work.pop() {
        if at.index() >= insts.len() || std::mem::replace(&mut reached[at.index()], true) {
            continue;
        }
        let inst = &insts[at.index()];
        if !into_calls && matches!(inst.kind, InstKind::Call) {
            work.push(InstId(at.0 + 1));
            continue;
        }
        work.extend(inst.control.targets.iter().copied());
        if inst.falls_to_next() {
            work.push(InstId(at.0 + 1));
        }
    }
    reached
}

/// What a walk for a subroutine may visit and has visited.
struct Walk<'w> {
    /// The most instructions the subroutine may hold.
    max: usize,
    /// The steps left to all walks of the function.
    steps: &'w mut usize,
    /// The instructions visited, marked with `stamp` (one stamp per walk).
    seen: &'w mut [u32],
    stamp: u32,
    /// The function's own code ([`reached`] without calls).
    main: &'w [bool],
}

/// The instructions of the subroutine at `entry`, in order: what a walk from it reaches
/// without passing a return (a call continues after itself). `None` when no return is reached,
/// when the walk reaches the function's own code, when the subroutine holds more than
/// `walk.max` instructions, or when the walk runs out of steps. ptxas also uses a `CALL` into
/// the middle of a kernel's own code, with a `RET` to an address set just before it (`MOV R11,
/// 0x60` ... `RET.REL.NODEC R4`) as a jump: that is no subroutine, and a copy of it returning
/// after the call would be a path the kernel does not take.
fn subroutine(insts: &[Inst], entry: InstId, walk: Walk<'_>) -> Option<Vec<InstId>> {
    let Walk { max, steps, seen, stamp, main } = walk;
    let mut region = Vec::new();
    let mut returns = false;
    let mut work = vec![entry];
    while let Some(at) = work.pop() {
        if at.index() >= insts.len() || std::mem::replace(&mut seen[at.index()], stamp) == stamp {
            continue;
        }
        if region.len() == max || *steps == 0 || main[at.index()] {
            return None;
        }
        *steps -= 1;
        region.push(at);
        let inst = &insts[at.index()];
        let next = InstId(at.0 + 1);
        match inst.kind {
            InstKind::Return => {
                returns = true;
                if inst.guard.is_some() {
                    work.push(next);
                }
            }
            InstKind::Call => work.push(next),
            _ => {
                work.extend(inst.control.targets.iter().copied());
                if inst.falls_to_next() {
                    work.push(next);
                }
            }
        }
    }
    region.sort_unstable();
    returns.then_some(region)
}

/// The first instruction at or after `address`, if the function has one.
fn resolve(addresses: &[u64], address: u64) -> Option<InstId> {
    let index = addresses.partition_point(|&a| a < address);
    (index < addresses.len()).then_some(InstId(index as u32))
}

/// What branch targets resolve against: the addresses of the kept instructions, in order, and
/// the function's labels.
#[derive(Clone, Copy)]
struct Targets<'t, 'a> {
    addresses: &'t [u64],
    labels: &'t [SassLabel<'a>],
}

impl Targets<'_, '_> {
    /// The instructions an indirect branch's `(*"BRANCH_TARGETS ..."*)` annotation names, in
    /// instruction order without repeats; `None` when the branch has no annotation or a label
    /// of it does not resolve to an instruction of the function.
    fn listed(&self, list: &str) -> Option<Vec<InstId>> {
        let mut ids = Vec::new();
        for name in list.split(',').map(str::trim).filter(|name| !name.is_empty()) {
            let label = self.labels.iter().find(|label| label.name == name)?;
            ids.push(resolve(self.addresses, label.address)?);
        }
        ids.sort_unstable();
        ids.dedup();
        (!ids.is_empty()).then_some(ids)
    }
}

/// Sets the control flow of `out` but for a branch's targets, which are returned.
fn set_control<'a>(
    func: &mut Lowering,
    out: &mut Inst,
    inst: &SassInst<'a>,
    operands: &[Operand<'a>],
    indirect: bool,
) -> Option<BranchRef<'a>> {
    let guarded = out.guard.is_some();
    match out.kind {
        InstKind::Branch => {
            // A condition written as an operand: `BRA.U !UP0, target`.
            let condition = operands.iter().find_map(|o| {
                o.reg().filter(|r| is_predicate(r.reg) && !r.reg.is_special()).map(|r| (r, o))
            });
            // `BRA.U !UP0, target` tests a predicate operand; `BRA.DIV ~URZ` and `BRA.CONV ~URZ`
            // branch on the warp's convergence state.
            let conditional_operand =
                operands.iter().any(|o| {
                    o.reg().is_some_and(|r| is_predicate(r.reg) && (!r.reg.is_true() || o.invert))
                }) || inst.opcode.split('.').skip(1).any(|m| matches!(m, "DIV" | "CONV"));
            // The operand alone decides an unguarded branch; beside a guard it is a second
            // condition (`@P4 BRA P0, target` jumps when both hold).
            let operand = condition.and_then(|(reg, operand)| {
                func.reg(reg.reg).map(|reg| Guard { reg, negated: operand.invert })
            });
            let second = if guarded { operand } else { None };
            if !guarded && operand.is_some() {
                out.guard = operand;
            }
            let conditional = guarded || conditional_operand;
            out.control =
                Control { falls_through: conditional, condition: second, ..Control::default() };
            if indirect {
                // nvdisasm lists the targets of a jump table; cuobjdump and nvdisasm JSON do
                // not, and the CFG then over-approximates them (`Cfg::build`).
                let list = operands.iter().find_map(|o| match o.kind {
                    OperandKind::BranchTargets(list) => Some(list),
                    _ => None,
                });
                return Some(list.map_or(BranchRef::Unknown, BranchRef::Listed));
            }
            Some(match inst.branch_target {
                Some(target) => BranchRef::Address(target),
                // A label the parser left to the sink (the tree's labels are resolved already;
                // `RET` names the function returned into, not a target).
                None if !inst.opcode.starts_with("RET") => operands
                    .iter()
                    .rev()
                    .find_map(Operand::label)
                    .map_or(BranchRef::Unknown, BranchRef::Label),
                None => BranchRef::Unknown,
            })
        }
        InstKind::Exit | InstKind::Return => {
            out.control = Control { falls_through: guarded, exits: true, ..Control::default() };
            None
        }
        // `CALL.REL.NOINC 0xe0`, `` CALL.REL.NOINC `($kernel$callee) ``: resolved at the end of
        // the function ([`link_returns`]); `CALL.ABS` names another function or nothing.
        InstKind::Call => Some(match inst.branch_target {
            Some(target) => BranchRef::Address(target),
            None if inst.opcode.contains(".ABS")
                && operands.last().is_some_and(|o| matches!(o.kind, OperandKind::Imm(_))) =>
            {
                BranchRef::Unnamed
            }
            None => operands
                .iter()
                .rev()
                .find_map(Operand::label)
                .map_or(BranchRef::Unknown, BranchRef::Label),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests;
