//! The SASS semantics table: `sass_semantics.tsv`, parsed once into rows that the lowering
//! looks up by opcode base.
//!
//! The table is data on purpose: one reviewed file says what every SASS opcode means to the
//! memory model and what SASS cannot tell, and `tests/sass_table_agreement.rs` keeps it in
//! agreement with real compiler output. `docs/sass-semantics.md` explains the columns.

use std::collections::HashMap;
use std::sync::LazyLock;

use fencelint_ir::{
    AluOp, AsyncOp, Barrier, BulkDir, Fence, FenceKind, InstKind, MbarrierOp, MemAccess,
    MultimemOp, Scope, Sem, Space, Tcgen05Op, WgmmaOp,
};

/// The table text, as committed.
pub const TABLE_TEXT: &str = include_str!("../sass_semantics.tsv");

static TABLE: LazyLock<Table> = LazyLock::new(|| Table::parse(TABLE_TEXT));

/// The SASS semantics table, parsed on first use.
pub fn table() -> &'static Table {
    &TABLE
}

/// What a row describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Class {
    Load,
    Store,
    Atomic,
    /// An atomic that returns nothing (`RED`, `REDG`).
    Reduction,
    Multimem,
    Fence,
    Barrier,
    Mbarrier,
    Async,
    Tcgen05,
    Wgmma,
    Elect,
    Compare,
    Move,
    Branch,
    Exit,
    Call,
    Return,
    Other,
    /// A modifier row that sets the strength (semantics, scope, coherence) of a memory access.
    Strength,
    /// A modifier row that sets the width of a memory access.
    Width,
}

impl Class {
    fn parse(word: &str) -> Option<Self> {
        Some(match word {
            "load" => Self::Load,
            "store" => Self::Store,
            "atomic" => Self::Atomic,
            "reduction" => Self::Reduction,
            "multimem" => Self::Multimem,
            "fence" => Self::Fence,
            "barrier" => Self::Barrier,
            "mbarrier" => Self::Mbarrier,
            "async" => Self::Async,
            "tcgen05" => Self::Tcgen05,
            "wgmma" => Self::Wgmma,
            "elect" => Self::Elect,
            "compare" => Self::Compare,
            "move" => Self::Move,
            "branch" => Self::Branch,
            "exit" => Self::Exit,
            "call" => Self::Call,
            "return" => Self::Return,
            "other" => Self::Other,
            "strength" => Self::Strength,
            "width" => Self::Width,
            _ => return None,
        })
    }

    /// Whether this is a modifier row class.
    pub const fn is_modifier(self) -> bool {
        matches!(self, Self::Strength | Self::Width)
    }
}

/// Which operands an instruction writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Defs {
    /// The operands before the first memory or constant-bank operand (none when there is no
    /// such operand): `LDG R0, [..]`, `ATOMG PT, R5, [..], R9`, `SYNCS.PHASECHK P1, [..], R2`.
    Mem,
    /// The first `n` operands.
    Count(u8),
    /// The first operand and the predicate operands right after it (carry-outs of `IADD3`,
    /// `LEA`): `IADD3 R4, P0, PT, R2, 0x4, RZ`.
    OnePlusPredicates,
    /// Every operand but the last: `VOTE.ANY P0, !P0` writes `P0`, `VOTE.ANY R4, PT, P0` writes
    /// `R4` and `PT`; the last operand is the predicate voted on.
    AllButLast,
    /// The predicate operands at the start and the operand after them: `LOP3.LUT P0, R6, R0,
    /// 0xc0000000, RZ, 0xc0, !PT` writes `P0` (whether the result is non-zero) and `R6`;
    /// `LOP3.LUT R6, R0, ...` writes `R6`.
    PredicatesPlusOne,
}

/// Which register value computation the instruction performs, for address analysis.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueRule {
    /// `MOV Rd, Rs|imm|c[..]`, `R2UR URd, Rs`.
    Copy,
    /// `IMAD.MOV.U32 Rd, RZ, RZ, Rs|imm|c[..]`.
    ImadMov,
    /// `HFMA2.MMA Rd, -RZ, RZ, a, b`: `0 * 0 + (a, b)`, ptxas's way of writing a 32-bit
    /// constant as two halves (`HFMA2.MMA R5, -RZ, RZ, 0, 5.9604644775390625e-08` is `1`).
    Hfma2Const,
    /// `IADD3 Rd, [carry-outs,] Rs, imm, RZ`.
    Add3,
    /// `VIADD Rd, Rs, imm`.
    Add,
    /// `LDC Rd, c[0x0][0x210]`: the parameter in that constant-bank slot.
    Ldc,
    /// `ISETP.NE.AND P0, PT, R2, RZ, PT`: a comparison of a register with a constant.
    Isetp,
    /// `LOP3.LUT R2, R1, 0x3fffffff, RZ, 0xc0, !PT`: a register and a constant (a lookup table
    /// that is `a & b` where the third input is zero).
    Lop3And,
    /// `PLOP3.LUT P0, PT, P1, !P2, PT, 0x80, 0x0`: a function of three predicates by its truth
    /// table.
    Plop3,
    /// `VOTE.ANY P0, !P1`, `VOTEU.ALL UP0, P1`: a warp vote into a predicate; the ballot of
    /// `PT` (`VOTEU.ANY UR6, UPT, PT`) is the mask of the active lanes. Other ballots have no
    /// value.
    Vote,
    /// `POPC R7, UR6`: the number of set bits of a register.
    Popc,
    /// `PRMT R0, RZ, 0x7610, R0`: a byte permute.
    Permute,
    /// `SHF.R.U32.HI Rd, RZ, 0x8, Rs`: `Rs` shifted right by a constant.
    Shr,
    /// `S2R`, `MATCH`, ...: a value the register operands do not determine. `CS2R Rd, SRZ`
    /// (zero) is not one; `CS2R Rd, SR_CLOCKLO` is.
    Varying,
    /// `SHFL.IDX PT, R15, R19, RZ, 0x1f`: a register of another lane.
    Shuffle,
    /// `SEL R19, RZ, 0x1, P1`: one of two constants (`RZ` is 0).
    Either,
    /// `IMAD R2, R3, 0x1, RZ`, `UIMAD.WIDE.U32 UR6, UR6, 0x1, URZ`, `IMAD.U32 R8, RZ, RZ, UR6`:
    /// a register times one plus zero (not `.HI`, not `.X`).
    TimesOne,
    /// `QSPC.E.S P0, RZ, [R2.64]`: whether a generic address lies in the state space the last
    /// modifier names (`S` the CTA's shared memory, `D` a cluster CTA's, `G` global, `L`
    /// local).
    SpaceQuery,
    /// `ATOMG.E.ADD.STRONG.GPU PT, R15, [R18.64], R22`: an atomic add that returns the old
    /// value, of the register in its last operand (no value for other operations or for `RZ`).
    FetchAdd,
    /// A row with the `retry` fact (`ATOMS.CAST.SPIN`): the success flag of a compare-and-swap
    /// attempt. Implied by `retry`, not written as `value=`.
    RetriedSwap,
}

/// One row of the table.
#[derive(Clone, Debug)]
pub struct Row {
    /// 1-based line in `sass_semantics.tsv`.
    pub line: u32,
    /// The opcode column as written (`MEMBAR.SC.GPU`, `.STRONG.GPU`).
    pub opcode: String,
    /// The opcode base (empty for modifier rows).
    pub base: String,
    /// The modifiers the row requires.
    pub required: Vec<String>,
    pub class: Class,
    /// The facts column as written.
    pub facts: String,
    /// What SASS cannot tell, when the row says.
    pub hidden: Option<String>,
    /// `fixtures`, or why the row is kept without a fixture opcode.
    pub evidence: String,
    pub(crate) meaning: Meaning,
}

impl Row {
    /// Whether the agreement test must find an opcode of the compiled fixtures for this row.
    pub fn expects_fixture(&self) -> bool {
        self.evidence == "fixtures"
    }
}

/// The parsed facts of a row.
#[derive(Clone, Debug)]
pub(crate) struct Meaning {
    /// The instruction kind (opcode rows), before modifier rows adjust its memory access.
    pub kind: InstKind,
    /// Adjustments to a memory access (modifier rows).
    pub patch: MemPatch,
    pub defs: Defs,
    pub value: Option<ValueRule>,
    /// The family of an arithmetic or logic row (`alu=`).
    pub alu: Option<AluOp>,
    /// The row applies only when the first operand is this scoreboard (`DEPBAR.LE SB0, N`).
    pub scoreboard: Option<u16>,
    /// The operand (0-based) that holds a pending-group count.
    pub pending_operand: Option<usize>,
    pub indirect: bool,
    /// The row computes its one destination from its operands alone (`pure`): no memory, no
    /// state, no other thread.
    pub pure: bool,
}

/// What a modifier row changes in a memory access.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct MemPatch {
    sem: Option<Sem>,
    scope: Option<Scope>,
    width: Option<u32>,
    non_coherent: bool,
}

impl MemPatch {
    fn apply(&self, mem: &mut MemAccess) {
        if let Some(sem) = self.sem {
            mem.sem = sem;
        }
        if let Some(scope) = self.scope {
            mem.scope = Some(scope);
        }
        if let Some(width) = self.width {
            mem.width = Some(width);
        }
        if self.non_coherent {
            mem.non_coherent = true;
        }
    }
}

/// The result of looking up an opcode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Classification {
    /// The index of the opcode row that matched, in [`Table::rows`]; `None` when no row did
    /// (the instruction is [`InstKind::Other`]).
    pub row: Option<usize>,
    /// The indices of the modifier rows that adjusted the memory access.
    pub modifier_rows: Vec<usize>,
    pub kind: InstKind,
}

/// The parsed table.
#[derive(Debug)]
pub struct Table {
    rows: Vec<Row>,
    by_base: HashMap<String, Vec<usize>>,
    modifier_rows: Vec<usize>,
    errors: Vec<String>,
}

impl Table {
    /// Parses the table text. Malformed rows are skipped and described in [`Table::errors`].
    pub fn parse(text: &str) -> Self {
        let mut table = Self {
            rows: Vec::new(),
            by_base: HashMap::new(),
            modifier_rows: Vec::new(),
            errors: Vec::new(),
        };
        for (index, line) in text.lines().enumerate() {
            let line_no = index as u32 + 1;
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            match parse_row(line_no, line) {
                Ok(row) => table.add(row),
                Err(message) => table.errors.push(format!("line {line_no}: {message}")),
            }
        }
        table
    }

    fn add(&mut self, row: Row) {
        let duplicate = self.rows.iter().any(|other| {
            other.base == row.base
                && other.class.is_modifier() == row.class.is_modifier()
                && other.required == row.required
        });
        if duplicate {
            self.errors.push(format!("line {}: `{}` has two rows", row.line, row.opcode));
            return;
        }
        let index = self.rows.len();
        if row.class.is_modifier() {
            self.modifier_rows.push(index);
        } else {
            self.by_base.entry(row.base.clone()).or_default().push(index);
        }
        self.rows.push(row);
    }

    pub fn rows(&self) -> &[Row] {
        &self.rows
    }

    /// Problems found while parsing; empty for the committed table (a unit test checks it).
    pub fn errors(&self) -> &[String] {
        &self.errors
    }

    /// The most specific opcode row for `opcode`: the row with this base whose required
    /// modifiers all appear, in the row's order, and that requires the most of them (the
    /// first such row on a tie).
    pub fn row_for(&self, opcode: &str) -> Option<usize> {
        let (base, modifiers) = split_opcode(opcode);
        let candidates = self.by_base.get(base)?;
        let mut best: Option<usize> = None;
        for &index in candidates {
            let row = &self.rows[index];
            if !contains_in_order(&modifiers, &row.required) {
                continue;
            }
            if best.is_none_or(|b| row.required.len() > self.rows[b].required.len()) {
                best = Some(index);
            }
        }
        best
    }

    /// Classifies an opcode as written (`LDG.E.128.STRONG.GPU`). Operand-dependent facts
    /// (scoreboards, pending counts) are applied by the lowering.
    pub fn classify(&self, opcode: &str) -> Classification {
        let Some(row) = self.row_for(opcode) else {
            return Classification { row: None, modifier_rows: Vec::new(), kind: InstKind::Other };
        };
        let mut kind = self.rows[row].meaning.kind.clone();
        let mut modifier_rows = Vec::new();
        if let Some(mem) = mem_mut(&mut kind) {
            let (_, modifiers) = split_opcode(opcode);
            for &index in &self.modifier_rows {
                let patch = &self.rows[index];
                if contains_in_order(&modifiers, &patch.required) {
                    patch.meaning.patch.apply(mem);
                    modifier_rows.push(index);
                }
            }
        }
        Classification { row: Some(row), modifier_rows, kind }
    }

    pub(crate) fn meaning(&self, row: usize) -> &Meaning {
        &self.rows[row].meaning
    }
}

/// Whether `required` appears in `modifiers` in order (not necessarily adjacent): `S.G` is in
/// `UBLKCP.S.G` but not in `UBLKCP.G.S`.
fn contains_in_order(modifiers: &[&str], required: &[String]) -> bool {
    let mut rest = modifiers.iter();
    required.iter().all(|m| rest.any(|have| *have == m))
}

/// `LDG.E.128.STRONG.GPU` → (`LDG`, [`E`, `128`, `STRONG`, `GPU`]).
fn split_opcode(opcode: &str) -> (&str, Vec<&str>) {
    let mut parts = opcode.split('.');
    let base = parts.next().unwrap_or("");
    (base, parts.filter(|m| !m.is_empty()).collect())
}

fn mem_mut(kind: &mut InstKind) -> Option<&mut MemAccess> {
    match kind {
        InstKind::Load(mem) | InstKind::Store(mem) | InstKind::Atomic { mem, .. } => Some(mem),
        InstKind::Multimem { mem, .. } => Some(mem),
        _ => None,
    }
}

// ---------------------------------------------------------------------------------------------
// Row parsing.

/// The facts column, split into `key=value` pairs and flags.
struct Facts<'a> {
    pairs: Vec<(&'a str, &'a str)>,
    flags: Vec<&'a str>,
    used: Vec<&'a str>,
}

impl<'a> Facts<'a> {
    fn parse(text: &'a str) -> Self {
        let mut pairs = Vec::new();
        let mut flags = Vec::new();
        if text != "-" {
            for word in text.split_whitespace() {
                match word.split_once('=') {
                    Some((key, value)) => pairs.push((key, value)),
                    None => flags.push(word),
                }
            }
        }
        Self { pairs, flags, used: Vec::new() }
    }

    fn get(&mut self, key: &'a str) -> Option<&'a str> {
        let value = self.pairs.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
        if value.is_some() {
            self.used.push(key);
        }
        value
    }

    fn flag(&mut self, name: &'a str) -> bool {
        let present = self.flags.contains(&name);
        if present {
            self.used.push(name);
        }
        present
    }

    fn unused(&self) -> Vec<&'a str> {
        let keys = self.pairs.iter().map(|(k, _)| *k);
        keys.chain(self.flags.iter().copied()).filter(|k| !self.used.contains(k)).collect()
    }
}

fn parse_row(line: u32, text: &str) -> Result<Row, String> {
    let columns: Vec<&str> = text.split('\t').collect();
    let [opcode, class, facts_text, hidden, evidence] = columns.as_slice() else {
        return Err(format!("expected 5 tab-separated columns, found {}", columns.len()));
    };
    let class = Class::parse(class).ok_or_else(|| format!("unknown class `{class}`"))?;
    let (base, required) = match opcode.strip_prefix('.') {
        Some(rest) if class.is_modifier() => (String::new(), rest),
        None if !class.is_modifier() => {
            let (base, rest) = opcode.split_once('.').unwrap_or((opcode, ""));
            (base.to_owned(), rest)
        }
        _ => return Err("modifier rows (and only they) start with `.`".to_owned()),
    };
    if opcode.is_empty() || opcode.contains(char::is_whitespace) {
        return Err(format!("bad opcode `{opcode}`"));
    }
    let required: Vec<String> =
        required.split('.').filter(|m| !m.is_empty()).map(ToOwned::to_owned).collect();
    if evidence.trim().is_empty() {
        return Err("the evidence column is empty".to_owned());
    }
    let mut facts = Facts::parse(facts_text);
    let meaning = meaning_of(class, &mut facts)?;
    let unused = facts.unused();
    if !unused.is_empty() {
        return Err(format!("facts not understood for class {class:?}: {}", unused.join(", ")));
    }
    Ok(Row {
        line,
        opcode: (*opcode).to_owned(),
        base,
        required,
        class,
        facts: (*facts_text).to_owned(),
        hidden: (*hidden != "-").then(|| (*hidden).to_owned()),
        evidence: (*evidence).to_owned(),
        meaning,
    })
}

fn parse_space(word: &str) -> Result<Space, String> {
    Ok(match word {
        "global" => Space::Global,
        "shared" => Space::SharedCta,
        "shared_cluster" => Space::SharedCluster,
        "generic" => Space::Generic,
        "local" => Space::Local,
        "const" => Space::Const,
        "tmem" => Space::Tensor,
        _ => return Err(format!("unknown space `{word}`")),
    })
}

fn parse_sem(word: &str) -> Result<Sem, String> {
    Ok(match word {
        "weak" => Sem::Weak,
        "relaxed" => Sem::Relaxed,
        "volatile" => Sem::Volatile,
        "mmio" => Sem::Mmio,
        "acquire" => Sem::Acquire,
        "release" => Sem::Release,
        "acq_rel" => Sem::AcqRel,
        "sc" => Sem::Sc,
        _ => return Err(format!("unknown sem `{word}`")),
    })
}

fn parse_scope(word: &str) -> Result<Scope, String> {
    Ok(match word {
        "cta" => Scope::Cta,
        "cluster" => Scope::Cluster,
        "gpu" => Scope::Gpu,
        "sys" => Scope::Sys,
        _ => return Err(format!("unknown scope `{word}`")),
    })
}

fn parse_dir(word: &str) -> Result<BulkDir, String> {
    Ok(match word {
        "g2s" => BulkDir::GlobalToShared,
        "s2g" => BulkDir::SharedToGlobal,
        "s2s" => BulkDir::SharedToShared,
        "unknown" => BulkDir::Unknown,
        _ => return Err(format!("unknown direction `{word}`")),
    })
}

fn opt<T>(
    facts: &mut Facts<'_>,
    key: &'static str,
    parse: impl Fn(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    facts.get(key).map(parse).transpose()
}

fn required_op<'a>(facts: &mut Facts<'a>) -> Result<&'a str, String> {
    facts.get("op").ok_or_else(|| "missing `op=`".to_owned())
}

fn meaning_of(class: Class, facts: &mut Facts<'_>) -> Result<Meaning, String> {
    let default_defs = match class {
        Class::Load
        | Class::Store
        | Class::Atomic
        | Class::Reduction
        | Class::Multimem
        | Class::Mbarrier
        | Class::Async
        | Class::Tcgen05
        | Class::Wgmma => Defs::Mem,
        Class::Fence
        | Class::Barrier
        | Class::Branch
        | Class::Exit
        | Class::Call
        | Class::Return
        | Class::Strength
        | Class::Width => Defs::Count(0),
        Class::Elect | Class::Compare | Class::Move | Class::Other => Defs::Count(1),
    };
    let defs = match facts.get("defs") {
        None => default_defs,
        Some("mem") => Defs::Mem,
        Some("1+p") => Defs::OnePlusPredicates,
        Some("n-1") => Defs::AllButLast,
        Some("p+1") => Defs::PredicatesPlusOne,
        Some(n) => Defs::Count(n.parse().map_err(|_| format!("bad defs `{n}`"))?),
    };
    let value = match facts.get("value") {
        None => None,
        Some("copy") => Some(ValueRule::Copy),
        Some("imad_mov") => Some(ValueRule::ImadMov),
        Some("hfma2_const") => Some(ValueRule::Hfma2Const),
        Some("add3") => Some(ValueRule::Add3),
        Some("add") => Some(ValueRule::Add),
        Some("ldc") => Some(ValueRule::Ldc),
        Some("isetp") => Some(ValueRule::Isetp),
        Some("lop3_and") => Some(ValueRule::Lop3And),
        Some("plop3") => Some(ValueRule::Plop3),
        Some("vote") => Some(ValueRule::Vote),
        Some("popc") => Some(ValueRule::Popc),
        Some("permute") => Some(ValueRule::Permute),
        Some("shr") => Some(ValueRule::Shr),
        Some("varying") => Some(ValueRule::Varying),
        Some("shuffle") => Some(ValueRule::Shuffle),
        Some("either") => Some(ValueRule::Either),
        Some("times_one") => Some(ValueRule::TimesOne),
        Some("space_query") => Some(ValueRule::SpaceQuery),
        Some("fetch_add") => Some(ValueRule::FetchAdd),
        Some(other) => return Err(format!("unknown value rule `{other}`")),
    };
    let alu = match facts.get("alu") {
        None => None,
        Some("add") => Some(AluOp::Add),
        Some("multiply_add") => Some(AluOp::MultiplyAdd),
        Some("int_compare") => Some(AluOp::IntCompare),
        Some("float_compare") => Some(AluOp::FloatCompare),
        Some("float_set") => Some(AluOp::FloatSet),
        Some("bit_logic") => Some(AluOp::BitLogic),
        Some("select") => Some(AluOp::Select),
        Some(other) => return Err(format!("unknown alu family `{other}`")),
    };
    if alu.is_some() && !matches!(class, Class::Compare | Class::Move | Class::Other) {
        return Err("`alu=` is for compare, move and other rows".to_owned());
    }
    // `retry`: one compare-and-swap attempt of the loop by which ptxas emulates an atomic that
    // the hardware lacks (`ATOMS.CAST.SPIN`). Its result says whether the swap happened, not
    // what memory held: the loop is one atomic, not a poll.
    let retry = class == Class::Atomic && facts.flag("retry");
    let value = match (retry, value) {
        (false, value) => value,
        (true, None) => Some(ValueRule::RetriedSwap),
        (true, Some(_)) => return Err("`retry` rows take no `value=`".to_owned()),
    };
    let scoreboard = match facts.get("scoreboard") {
        None => None,
        Some(sb) => Some(
            sb.strip_prefix("SB")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("bad scoreboard `{sb}`"))?,
        ),
    };
    let pending_operand = match facts.get("pending") {
        None => None,
        Some(p) => Some(
            p.strip_prefix("operand")
                .and_then(|n| n.parse::<usize>().ok())
                .and_then(|n| n.checked_sub(1))
                .ok_or_else(|| format!("bad pending `{p}` (operand1, operand2, ...)"))?,
        ),
    };
    let indirect = facts.flag("indirect");
    let pure = facts.flag("pure");
    let mut patch = MemPatch::default();
    let kind = match class {
        Class::Load | Class::Store | Class::Atomic | Class::Reduction => {
            let mem = mem_access(facts, true)?;
            match class {
                Class::Load => InstKind::Load(mem),
                Class::Store => InstKind::Store(mem),
                Class::Atomic => InstKind::Atomic { mem, returns: !retry },
                _ => InstKind::Atomic { mem, returns: false },
            }
        }
        Class::Multimem => {
            let op = match required_op(facts)? {
                "ld_reduce" => MultimemOp::LdReduce,
                "st" => MultimemOp::St,
                "red" => MultimemOp::Red,
                other => return Err(format!("unknown multimem op `{other}`")),
            };
            InstKind::Multimem { op, mem: mem_access(facts, true)? }
        }
        Class::Fence => InstKind::Fence(fence(facts)?),
        Class::Barrier => InstKind::Barrier(match required_op(facts)? {
            "cta_sync" => Barrier::CtaSync { partial: false },
            "cta_arrive" => Barrier::CtaArrive,
            "cta_reduce" => Barrier::CtaReduce,
            "cluster_arrive" => Barrier::ClusterArrive { release: facts.flag("release") },
            "cluster_wait" => Barrier::ClusterWait,
            "warp_sync" => Barrier::WarpSync,
            other => return Err(format!("unknown barrier op `{other}`")),
        }),
        Class::Mbarrier => InstKind::Mbarrier(mbarrier(facts)?),
        Class::Async => InstKind::Async(async_op(facts)?),
        Class::Tcgen05 => InstKind::Tcgen05(match required_op(facts)? {
            "alloc" => Tcgen05Op::Alloc,
            "dealloc" => Tcgen05Op::Dealloc,
            "relinquish" => Tcgen05Op::Relinquish,
            "ld" => Tcgen05Op::Ld,
            "st" => Tcgen05Op::St,
            "wait_ld" => Tcgen05Op::WaitLd,
            "wait_st" => Tcgen05Op::WaitSt,
            "mma" => Tcgen05Op::Mma,
            "cp" => Tcgen05Op::Cp,
            "shift" => Tcgen05Op::Shift,
            "commit" => Tcgen05Op::Commit { multicast: false },
            "commit_multicast" => Tcgen05Op::Commit { multicast: true },
            other => return Err(format!("unknown tcgen05 op `{other}`")),
        }),
        Class::Wgmma => InstKind::Wgmma(match required_op(facts)? {
            "fence" => WgmmaOp::Fence,
            "mma" => WgmmaOp::Mma { register_a: None },
            "commit" => WgmmaOp::Commit,
            "wait" => WgmmaOp::Wait,
            other => return Err(format!("unknown wgmma op `{other}`")),
        }),
        Class::Elect => InstKind::Elect,
        Class::Compare => InstKind::Compare,
        Class::Move => InstKind::Move,
        Class::Branch => InstKind::Branch,
        Class::Exit => InstKind::Exit,
        Class::Call => InstKind::Call,
        Class::Return => InstKind::Return,
        Class::Other => InstKind::Other,
        Class::Strength => {
            patch.sem = opt(facts, "sem", parse_sem)?;
            patch.scope = opt(facts, "scope", parse_scope)?;
            patch.non_coherent = facts.flag("nc");
            InstKind::Other
        }
        Class::Width => {
            patch.width = Some(
                facts
                    .get("width")
                    .and_then(|w| w.parse().ok())
                    .ok_or_else(|| "missing or bad `width=`".to_owned())?,
            );
            InstKind::Other
        }
    };
    Ok(Meaning { kind, patch, defs, value, alu, scoreboard, pending_operand, indirect, pure })
}

/// A memory access from `space=`, `sem=` (weak when absent), `scope=`, `width=` (32 when
/// absent), `nc` and `matrix`.
fn mem_access(facts: &mut Facts<'_>, need_space: bool) -> Result<MemAccess, String> {
    let space = match opt(facts, "space", parse_space)? {
        Some(space) => space,
        None if need_space => return Err("missing `space=`".to_owned()),
        None => Space::Unknown,
    };
    let sem = opt(facts, "sem", parse_sem)?.unwrap_or(Sem::Weak);
    let scope = opt(facts, "scope", parse_scope)?;
    let mut mem = MemAccess::new(space, sem, scope);
    mem.width = Some(match facts.get("width") {
        Some(w) => w.parse().map_err(|_| format!("bad width `{w}`"))?,
        None => 32,
    });
    mem.non_coherent = facts.flag("nc");
    mem.matrix = facts.flag("matrix");
    Ok(mem)
}

fn fence(facts: &mut Facts<'_>) -> Result<Fence, String> {
    let kind = match facts.get("kind").ok_or("missing `kind=`")? {
        "plain" => FenceKind::Plain,
        "proxy_async" => FenceKind::ProxyAsync(opt(facts, "space", parse_space)?),
        "proxy_alias" => FenceKind::ProxyAlias,
        "error_barrier" => FenceKind::ErrorBarrier,
        "l1_invalidate" => FenceKind::L1Invalidate,
        "tensormap_acquire" => FenceKind::ProxyTensormapAcquire,
        "tensormap_release" => FenceKind::ProxyTensormapRelease,
        other => return Err(format!("unknown fence kind `{other}`")),
    };
    let default_sem = match kind {
        FenceKind::ErrorBarrier => Sem::Release,
        _ => Sem::AcqRel,
    };
    let sem = opt(facts, "sem", parse_sem)?.unwrap_or(default_sem);
    let scope = opt(facts, "scope", parse_scope)?;
    Ok(Fence { kind, sem, scope })
}

fn mbarrier(facts: &mut Facts<'_>) -> Result<MbarrierOp, String> {
    let op = required_op(facts)?;
    let sem = opt(facts, "sem", parse_sem)?;
    let scope = opt(facts, "scope", parse_scope)?.unwrap_or(Scope::Cta);
    Ok(match op {
        "init" => MbarrierOp::Init,
        "inval" => MbarrierOp::Inval,
        "arrive" => MbarrierOp::Arrive {
            expect_tx: facts.flag("expect_tx"),
            drop: facts.flag("drop"),
            sem: sem.unwrap_or(Sem::Release),
            scope,
            remote: facts.flag("remote"),
        },
        "expect_tx" => MbarrierOp::ExpectTx,
        "complete_tx" => MbarrierOp::CompleteTx,
        "wait" => MbarrierOp::Wait {
            try_wait: facts.flag("try_wait"),
            parity: facts.flag("parity"),
            sem: sem.unwrap_or(Sem::Acquire),
            scope,
        },
        "cp_async_arrive" => MbarrierOp::CpAsyncArrive,
        "pending_count" => MbarrierOp::PendingCount,
        other => return Err(format!("unknown mbarrier op `{other}`")),
    })
}

fn async_op(facts: &mut Facts<'_>) -> Result<AsyncOp, String> {
    let op = required_op(facts)?;
    let dir = opt(facts, "dir", parse_dir)?;
    let reduce = facts.flag("reduce");
    let need_dir = || dir.ok_or_else(|| format!("`op={op}` needs `dir=`"));
    Ok(match op {
        "cp_async" => AsyncOp::CpAsync,
        "cp_async_commit" => AsyncOp::CpAsyncCommit,
        "cp_async_wait" => AsyncOp::CpAsyncWait { pending: None, all: false },
        "bulk_wait" => AsyncOp::BulkWait { pending: None, read_only: false },
        "bulk" => AsyncOp::Bulk { dir: need_dir()?, reduce, multicast: false },
        "bulk_tensor" => AsyncOp::BulkTensor { dir: need_dir()?, reduce, multicast: false },
        "bulk_prefetch" => AsyncOp::BulkPrefetch,
        "bulk_commit" => AsyncOp::BulkCommit,
        "st_async" => AsyncOp::StAsync,
        "red_async" => AsyncOp::RedAsync,
        other => return Err(format!("unknown async op `{other}`")),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_table_parses_cleanly() {
        let table = table();
        assert!(table.errors().is_empty(), "{:#?}", table.errors());
        assert!(table.rows().len() > 100);
    }

    #[test]
    fn most_specific_row_wins() {
        let t = table();
        let row = |op: &str| t.row_for(op).map(|i| t.rows()[i].opcode.as_str());
        assert_eq!(row("SYNCS.ARRIVE.TRANS64"), Some("SYNCS.ARRIVE.TRANS64"));
        assert_eq!(row("SYNCS.ARRIVE.TRANS64.RED.A1T0"), Some("SYNCS.ARRIVE.TRANS64.RED.A1T0"));
        assert_eq!(row("SYNCS.ARRIVE.TRANS64.A1T0"), Some("SYNCS.ARRIVE.TRANS64.A1T0"));
        assert_eq!(row("MEMBAR.SC.GPU"), Some("MEMBAR.SC.GPU"));
        assert_eq!(row("MEMBAR.XYZ"), Some("MEMBAR"));
        assert_eq!(row("CCTL.IVALL"), Some("CCTL.IVALL"));
        assert_eq!(row("CCTL.E.C.LDCU.IV.DEEP"), Some("CCTL"));
        assert_eq!(row("IMAD.MOV.U32"), Some("IMAD.MOV"));
        assert_eq!(row("IMAD.WIDE.U32"), Some("IMAD"));
        assert_eq!(row("BAR.SYNC.DEFER_BLOCKING"), Some("BAR.SYNC"));
        assert_eq!(row("REDUX.SUM"), Some("REDUX"));
        assert_eq!(row("FROBNICATE.X"), None);
        assert_eq!(row("UBLKCP.S.G"), Some("UBLKCP.S.G"));
        assert_eq!(row("UBLKCP.G.S"), Some("UBLKCP.G.S"));
        assert_eq!(row("UBLKCP.S.G.MULTICAST"), Some("UBLKCP.S.G"));
    }

    #[test]
    fn modifiers_set_strength_scope_and_width() {
        let t = table();
        let kind = t.classify("LDG.E.128.STRONG.GPU").kind;
        let InstKind::Load(mem) = kind else { panic!("{kind:?}") };
        assert_eq!(
            (mem.space, mem.sem, mem.scope, mem.width),
            (Space::Global, Sem::Relaxed, Some(Scope::Gpu), Some(128))
        );
        let InstKind::Load(mem) = t.classify("LDG.E").kind else { panic!() };
        assert_eq!((mem.sem, mem.scope, mem.width), (Sem::Weak, None, Some(32)));
        let InstKind::Load(mem) = t.classify("LDG.E.CONSTANT").kind else { panic!() };
        assert!(mem.non_coherent && !mem.matrix);
        let InstKind::Store(mem) = t.classify("STSM.16.M88.4").kind else { panic!() };
        assert!(mem.matrix);
        let InstKind::Load(mem) = t.classify("LDSM.16.MT88.2").kind else { panic!() };
        assert!(mem.matrix);
        let InstKind::Store(mem) = t.classify("STG.E.MMIO.SYS").kind else { panic!() };
        assert_eq!((mem.sem, mem.scope), (Sem::Mmio, Some(Scope::Sys)));
        let InstKind::Atomic { mem, returns: false } =
            t.classify("REDG.E.ADD.F32.FTZ.RN.STRONG.SYS").kind
        else {
            panic!()
        };
        assert_eq!(mem.scope, Some(Scope::Sys));
        let InstKind::Load(mem) = t.classify("LDS.U8").kind else { panic!() };
        assert_eq!((mem.space, mem.sem, mem.width), (Space::SharedCta, Sem::Weak, Some(8)));
    }

    #[test]
    fn fences_and_unknowns() {
        let t = table();
        assert_eq!(
            t.classify("CCTL.IVALL").kind,
            InstKind::Fence(Fence {
                kind: FenceKind::L1Invalidate,
                sem: Sem::Acquire,
                scope: Some(Scope::Sys)
            })
        );
        assert_eq!(
            t.classify("MEMBAR.ALL.GPU").kind,
            InstKind::Fence(Fence {
                kind: FenceKind::Plain,
                sem: Sem::AcqRel,
                scope: Some(Scope::Gpu)
            })
        );
        // `IV` does not match the `IVALL` modifier: one invalidates a named barrier
        // (mbarrier.inval), the other ends an mbarrier.init written with STS.64.
        assert_eq!(t.classify("SYNCS.CCTL.IV").kind, InstKind::Mbarrier(MbarrierOp::Inval));
        assert_eq!(t.classify("SYNCS.CCTL.IVALL").kind, InstKind::Mbarrier(MbarrierOp::Init));
        // On sm_80 an mbarrier.arrive on a generic address is an `ATOM` with the `ARRIVE`
        // modifier: an arrive, not an atomic on the barrier word.
        let arrive = MbarrierOp::Arrive {
            expect_tx: false,
            drop: false,
            sem: Sem::Relaxed,
            scope: Scope::Cta,
            remote: false,
        };
        assert_eq!(t.classify("ATOM.E.ARRIVE.64.STRONG.SM").kind, InstKind::Mbarrier(arrive));
        assert_eq!(t.classify("ATOMS.ARRIVE.64").kind, InstKind::Mbarrier(arrive));
        let unknown = t.classify("QUUX.64");
        assert_eq!((unknown.row, unknown.kind), (None, InstKind::Other));
    }

    #[test]
    fn malformed_rows_are_reported_not_fatal() {
        let table = Table::parse(
            "LDG\tload\tspace=global\t-\tfixtures\nXX\tbogus\t-\t-\tx\nLDS\tload\tspace=mars\t-\tx\nLDG\tload\tspace=global\t-\tx\nST\tstore\tspace=generic frob\t-\tx\n",
        );
        assert_eq!(table.rows().len(), 1);
        assert_eq!(table.errors().len(), 4, "{:#?}", table.errors());
    }
}
