//! The dialect-neutral instruction model that every rule reads.
//!
//! PTX and SASS are lowered into the same [`Module`] / [`Function`] / [`Inst`] shapes, with the
//! memory semantics of each instruction classified once ([`InstKind`], [`MemAccess`]). Rules
//! never see the front ends; dialect facts they need (SASS address, PTX line, target) are fields
//! here.

mod kinds;
mod mem;

use rustc_hash::FxHashMap;
use std::fmt;

pub use compact_str::CompactString;

pub use fencelint_source::{Dialect, FileId, SourceLocation, TextRange};
pub use kinds::*;
pub use mem::*;

/// An index into [`Function::insts`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct InstId(pub u32);

impl InstId {
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// The registers an instruction defines or uses: almost always four or fewer, kept inline so
/// that lowering millions of SASS instructions does not allocate for each.
pub type Regs = smallvec::SmallVec<[Reg; 4]>;

/// A vector one pointer wide, for an instruction's fields that are empty on most instructions
/// (branch targets, further addresses): an `Inst` stays small.
pub use thin_vec::{ThinVec, thin_vec};

/// A register interned per function; [`Function::reg_name`] gives its spelling.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reg(pub u32);

/// One lowered input file.
#[derive(Clone, Debug, Default)]
pub struct Module {
    pub file: Option<FileId>,
    pub dialect: Option<Dialect>,
    /// `sm_90a`, from `.target` or the SASS header.
    pub target: Option<String>,
    /// The PTX ISA version, from `.version` (for example `9.5`).
    pub ptx_version: Option<String>,
    /// The compiler that produced the input, when known (for example `ptxas 13.2.78`).
    pub producer: Option<String>,
    pub functions: Vec<Function>,
    /// The functions that SASS code of this module calls by name but the module does not hold
    /// (a function of a listing cut into functions): those calls fall through. Sorted, once each.
    pub external_calls: Vec<String>,
}

impl Module {
    /// The numeric SM version of the target (`sm_90a` gives 90).
    pub fn sm_version(&self) -> Option<u32> {
        parse_sm(self.target.as_deref()?)
    }
}

/// Parses `sm_90a`, `sm_100f`, `sm_80` into the number.
pub fn parse_sm(target: &str) -> Option<u32> {
    let rest = target.trim().strip_prefix("sm_")?;
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

/// One kernel (`.entry`, SASS function with `STO_CUDA_ENTRY`) or device function.
#[derive(Clone, Debug, Default)]
pub struct Function {
    pub name: String,
    pub is_kernel: bool,
    /// The whole function in the input file.
    pub range: TextRange,
    /// Instructions in text order. Non-instruction statements are not kept.
    pub insts: Vec<Inst>,
    /// Register names, indexed by [`Reg`].
    pub regs: Vec<String>,
    /// Parameter names in declaration order (PTX).
    pub params: Vec<String>,
    /// Where copies of called code start, when the function has any: the bodies of the PTX
    /// functions it calls, and the SASS subroutines and functions of its listing it calls
    /// (`CALL.REL` into its own code, `` CALL.ABS `(name) ``), one copy per call, placed after
    /// the function's own instructions (the call jumps to its copy, the copy's returns jump
    /// back). What comes before is the function's own code, in text order.
    pub inlined_from: Option<u32>,
    /// The function's SASS calls whose callee the listing does not name: cuobjdump prints a
    /// call that the linker resolves (`-rdc` code, `__assertfail`) as `CALL.ABS.NOINC 0x0`.
    /// They fall through, so the code they call is not seen in this function's context.
    pub unnamed_calls: u32,
    reg_index: FxHashMap<String, Reg>,
}

impl Function {
    pub fn new(name: impl Into<String>, is_kernel: bool, range: TextRange) -> Self {
        Self { name: name.into(), is_kernel, range, ..Self::default() }
    }

    /// The function's own code: without the copies of called code that start at
    /// [`Function::inlined_from`], and with its calls made instructions that fall through
    /// again.
    pub fn own_code(&self) -> std::borrow::Cow<'_, Function> {
        let Some(own) = self.inlined_from.map(|k| k as usize) else {
            return std::borrow::Cow::Borrowed(self);
        };
        let mut func = Function { insts: Vec::with_capacity(own), ..self.clone_header() };
        func.insts.extend(self.insts.iter().take(own).cloned());
        for inst in &mut func.insts {
            if matches!(inst.kind, InstKind::Call) {
                inst.control.targets.clear();
                inst.control.falls_through = true;
            }
        }
        std::borrow::Cow::Owned(func)
    }

    /// Everything but the instructions.
    fn clone_header(&self) -> Function {
        Function {
            name: self.name.clone(),
            is_kernel: self.is_kernel,
            range: self.range,
            insts: Vec::new(),
            regs: self.regs.clone(),
            params: self.params.clone(),
            inlined_from: None,
            unnamed_calls: self.unnamed_calls,
            reg_index: self.reg_index.clone(),
        }
    }

    pub fn inst(&self, id: InstId) -> &Inst {
        &self.insts[id.index()]
    }

    pub fn ids(&self) -> impl DoubleEndedIterator<Item = InstId> + ExactSizeIterator + '_ {
        (0..self.insts.len()).map(|i| InstId(i as u32))
    }

    pub fn reg_name(&self, reg: Reg) -> &str {
        self.regs.get(reg.0 as usize).map_or("?", String::as_str)
    }

    /// Interns a register name.
    pub fn intern_reg(&mut self, name: &str) -> Reg {
        if let Some(&reg) = self.reg_index.get(name) {
            return reg;
        }
        let reg = Reg(self.regs.len() as u32);
        self.regs.push(name.to_owned());
        self.reg_index.insert(name.to_owned(), reg);
        reg
    }
}

/// A guard predicate `@%p1` / `@!P0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Guard {
    pub reg: Reg,
    pub negated: bool,
}

/// How control leaves an instruction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Control {
    /// Branch targets (resolved to instructions). Empty for a non-branch.
    pub targets: ThinVec<InstId>,
    /// Whether execution can continue with the next instruction (false for an unguarded
    /// `bra`, `ret`, `exit`, `trap`).
    pub falls_through: bool,
    /// The instruction ends the thread (`exit`, `ret` from a kernel, `trap`, `EXIT`).
    pub exits: bool,
    /// An indirect branch whose targets are not all known.
    pub indirect: bool,
    /// A branch's second condition, written as an operand beside its guard (SASS
    /// `@P4 BRA P0, target`): the branch is taken only when the guard and this both hold.
    pub condition: Option<Guard>,
}

/// The dependency scoreboards of a SASS instruction (`sm_70` and later), read from the control
/// bits of its encoding: a variable-latency instruction (a load, `LDTM`, a shared-memory
/// access) counts up a scoreboard when it issues and down when its result is written, and an
/// instruction that waits on a scoreboard issues only once it is down to zero. So an
/// instruction that waits on the scoreboard a load writes runs after that load completed; this
/// is how `tcgen05.wait::ld` shows in SASS (a `NOP` that waits on the `LDTM`'s scoreboard).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Scoreboards {
    /// The scoreboard (0 to 5) released when the result is written.
    pub write: Option<u8>,
    /// The scoreboards waited on before issuing, one bit each (bit `n`: `SBn`).
    pub wait: u8,
}

impl Scoreboards {
    /// The scoreboards of the control bits `control` (bits 41 to 62 of the encoding's high
    /// word, shifted down): stall cycles (4 bits), yield (1), write scoreboard (3, 7 for none),
    /// read scoreboard (3), wait mask (6), operand reuse (4).
    pub fn from_control(control: u32) -> Self {
        let write = ((control >> 5) & 7) as u8;
        Self { write: (write < 6).then_some(write), wait: ((control >> 11) & 0x3f) as u8 }
    }

    /// Whether the instruction waits for scoreboard `sb` to be released.
    pub fn waits_for(self, sb: u8) -> bool {
        sb < 6 && self.wait & (1 << sb) != 0
    }
}

/// A name that analyses copy often (a parameter, a variable, a constant-bank slot): shared, so
/// that copying it does not allocate.
pub type Name = std::sync::Arc<str>;

/// What an instruction's result is, where a front end can tell: a computation that address
/// analysis and the loop-exit walks see through (a copy, an add of a constant, a comparison with
/// a constant, ...), or a fact about the value that rules read instead of the opcode (a count of
/// set bits, the ballot of the active lanes, a value that varies between lanes or executions).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueOp {
    /// `mov`, `cvta`, `cvt` of an address, SASS `MOV`/`IMAD.MOV`: the value of another register.
    Copy(Reg),
    /// `add`/`sub` with an immediate, SASS `IADD3 Rd, Rs, imm, RZ`.
    AddImm(Reg, i64),
    /// `mapa`: the same shared-memory object in another CTA of the cluster.
    Mapa(Reg),
    /// `ld.param [name]`, or the SASS constant-bank slot of a parameter (`c[0x0][0x210]`).
    Param(Name),
    /// The address of a variable (`mov.u64 %rd1, tile;`, `cvta.shared` of a symbol).
    SymbolAddr(Name),
    /// A constant.
    Imm(i64),
    /// A bitwise `and` with a constant: PTX `and.b32 %r2, %r1, 1073741823`, SASS
    /// `LOP3.LUT R2, R1, 0x3fffffff, RZ, 0xc0, !PT`. Lets a rule see a field taken out of a
    /// word.
    AndImm(Reg, i64),
    /// A bitwise `and` of two registers: PTX `and.b32 %r3, %r1, %r2`, SASS `LOP3.LUT R3, R1,
    /// R2, RZ, 0xc0, !PT`.
    And(Reg, Reg),
    /// A bitwise `or` of two registers: PTX `or.b32 %r3, %r1, %r2`. PTX only.
    Or(Reg, Reg),
    /// A shift right by a constant: PTX `shr.u32 %r2, %r1, 8`, SASS `SHF.R.U32.HI R2, RZ, 0x8,
    /// R1` (`.S32` shifts the sign in). Lets a rule see the high field of a word taken out.
    ShrImm(Reg, i64),
    /// A multiplication by a non-negative constant, wrapping at 32 or 64 bits: PTX `mul.lo.s32
    /// %r2, %r1, 48`, `mul.wide.u32 %rd2, %r1, 8`, and `shl.b32 %r2, %r1, 3` (times 8). Lets an
    /// analysis bound an index scaled into an address. PTX only.
    MulImm(Reg, i64),
    /// A predicate that compares a register with a constant: PTX `setp.ne.s32 %p1, %r2, 0`,
    /// SASS `ISETP.NE.AND P0, PT, R2, RZ, PT`. Lets a walk tell which way a branch goes on an
    /// edge where the register is a known constant.
    Compare(IntCompare, Reg, i64),
    /// A predicate that compares two registers: PTX `setp.eq.s32 %p1, %r1, %r2`, SASS
    /// `ISETP.GE.U32.AND P2, PT, R9, UR6, PT`.
    CompareRegs(IntCompare, Reg, Reg),
    /// Predicate logic: PTX `and.pred`, `or.pred`, `not.pred`. Lets a walk that knows a
    /// combined predicate's outcome tell the outcome of its parts.
    PredAnd(Reg, Reg),
    PredOr(Reg, Reg),
    PredNot(Reg),
    /// A warp vote into a predicate: PTX `vote.sync.any.pred %p2, %p1, mask`, SASS
    /// `VOTE.ANY P0, !P0` (`negated`: the lane's predicate is inverted first). `all` for
    /// `.all`, false for `.any`. Lets a walk that knows the vote's outcome tell the lane's own:
    /// an `any` that is false was false in every lane, an `all` that is true was true.
    Vote {
        all: bool,
        src: Reg,
        negated: bool,
    },
    /// The high half of a 64-bit (in)equality with a constant, SASS `ISETP.NE.AND.EX P0, PT,
    /// R25, -0x1, PT, P0` after `ISETP.NE.U32.AND P0, PT, R24, -0x1, PT`: `ne` is
    /// `high != bound || low`, `eq` is `high == bound && low`, where `low` is the predicate the
    /// low halves' comparison wrote.
    CompareHigh {
        compare: IntCompare,
        high: Reg,
        bound: i64,
        low: Reg,
    },
    /// A returning atomic add of a constant (PTX `atom.global.add.u32 %r1, [%rd1], 1`): what it
    /// returns is the location's value before the add. Lets a rule tell a ticket taken from a
    /// counter from a poll (`atom.add` of 0).
    FetchAdd(i64),
    /// A returning atomic add of a register (PTX `atom.global.add.u32 %r1, [%rd1], %r2`, SASS
    /// `ATOMG.E.ADD.STRONG.GPU PT, R15, [R18.64], R22`): the addend, whose definitions tell
    /// whether it can be zero.
    FetchAddReg(Reg),
    /// A comparison with a constant joined to another predicate, SASS `ISETP.EQ.U32.OR P1, PT,
    /// R198, -0x800001, P1`: `(src <compare> bound) || other`, or `&& other` when `or` is
    /// false; `negated` when the other predicate is read inverted (`!P0`). ptxas chains the
    /// tests of several values this way.
    CompareJoined {
        compare: IntCompare,
        src: Reg,
        bound: i64,
        other: Reg,
        negated: bool,
        or: bool,
    },
    /// [`ValueOp::CompareJoined`] of two registers, SASS `ISETP.LT.U32.OR P0, PT, R9, UR6,
    /// !P0`: `(a <compare> b) || other` (`&& other` when `or` is false).
    CompareRegsJoined {
        compare: IntCompare,
        a: Reg,
        b: Reg,
        other: Reg,
        negated: bool,
        or: bool,
    },
    /// The sum of two registers: PTX `add.s64 %rd3, %rd1, %rd2`. SASS additions carry none
    /// (`IADD3` may negate its operands, `LEA` shifts one).
    Sum(Reg, Reg),
    /// The number of set bits of a register: SASS `POPC R7, UR6`.
    PopCount(Reg),
    /// A ballot of the always-true predicate: the mask of the warp's lanes that execute it,
    /// SASS `VOTEU.ANY UR6, UPT, PT`. ptxas counts them (`POPC`) to aggregate a warp's
    /// `atomicAdd(p, 1)` into one add by one lane.
    ActiveLanes,
    /// A byte permute, SASS `PRMT R0, RZ, 0x7610, R0`: the result is bytes of the register
    /// operands (`uses`) and of constants, chosen by a selector. When the selector is a
    /// constant and every byte it picks comes from one register (the other source `RZ` or the
    /// same register), `src` is that register and `bytes` the bits of the bytes read (bit `i`
    /// for byte `i`; a sign copy reads its byte): `PRMT R4, R0, 0x9910, RZ` reads bytes 0 and 1
    /// of `R0` (the low half, sign-extended), `PRMT R7, R0, 0xbb32, RZ` bytes 2 and 3.
    BytePermute {
        src: Option<Reg>,
        bytes: u8,
    },
    /// A value that the instruction's register operands do not determine: it differs between
    /// lanes or from one execution to the next. Special registers (SASS `S2R`, `S2UR`, `CS2R` of
    /// a clock), and what comes from other lanes (`shfl`, `match`, `redux`; SASS `SHFL`,
    /// `MATCH`, `REDUX`).
    Varying,
    /// `src` times one plus zero: SASS `IMAD R2, R3, 0x1, RZ`, `UIMAD.WIDE.U32 UR6, UR6, 0x1,
    /// URZ` (how ptxas widens a warp's lane count for a 64-bit `atomicAdd`), `IMAD.U32 R8, RZ,
    /// RZ, UR6`. The destination, or for `.WIDE` its low register, holds `src`; the high
    /// register of a `.WIDE` holds zero (or the sign). Unlike [`ValueOp::Copy`], which every
    /// analysis follows, this one is read only where it is named (the ticket test of
    /// spin-poll-without-acquire), since a `.WIDE` instruction writes two registers.
    TimesOne(Reg),
    /// The value of `src` in a lane of the warp that the instruction picks (PTX `shfl.sync`,
    /// SASS `SHFL`): varying as [`ValueOp::Varying`] is, but one of the values `src` takes in
    /// the warp's lanes. Lets an analysis see that a flag one lane computed and broadcast keeps
    /// its few possible values.
    Shuffle(Reg),
    /// One of two constants, chosen by a predicate: SASS `SEL R19, RZ, 0x1, P1`, PTX `selp.b32
    /// %r1, 1, 0, %p1`.
    Either(i64, i64),
    /// The success flag of a compare-and-swap that ptxas retries until it succeeds: one attempt
    /// of the loop by which it emulates an atomic the hardware lacks (SASS `ATOMS.CAST.SPIN`,
    /// `ATOM.E.CAST.SPIN`).
    RetriedSwap,
    /// A predicate: whether the generic address of the instruction's memory operand lies in
    /// `space`. SASS `QSPC.E.S P0, RZ, [R2.64]` (the CTA's shared memory), `QSPC.E.D` (the
    /// shared memory of a CTA of the cluster), `QSPC.E.G`, `QSPC.E.L`.
    InSpace(Space),
    /// A function of three predicates given by its truth table, SASS `PLOP3.LUT P0, PT, P1,
    /// !P2, PT, 0x80, 0x0`: bit `4a + 2b + c` of `table`, where `a`, `b`, `c` are the values of
    /// `inputs` in order (`0x80` is `a && b && c`, as `LOP3.LUT` counts). Inputs read inverted
    /// and constant inputs (`PT`) are folded into the table, which then does not depend on the
    /// input in that place (it repeats another register): `PLOP3.LUT P0, PT, PT, PT, PT, 0x80,
    /// 0x0` has the table `0xff`, true whatever its inputs.
    PredTable {
        inputs: [Reg; 3],
        table: u8,
    },
}

// Every instruction holds an `Option<ValueOp>`: a larger variant makes every `Inst` larger, and
// a listing's instruction tables are most of the memory a lint touches (docs/performance.md).
const _: () = assert!(std::mem::size_of::<ValueOp>() <= 24);

/// An integer comparison: its relation and width, the first register, and the second register
/// or a constant.
pub type Comparison = (IntCompare, Reg, Result<Reg, i64>);

/// The predicate a comparison is joined to: `(a <compare> b) || other`, or `&& other` when `or`
/// is false; `other` read inverted when `negated`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct JoinedTo {
    pub other: Reg,
    pub negated: bool,
    pub or: bool,
}

impl ValueOp {
    /// The four forms of an integer comparison into a predicate, read alike: the comparison,
    /// and the predicate it is joined to ([`ValueOp::CompareJoined`],
    /// [`ValueOp::CompareRegsJoined`]). `None` for other values.
    pub fn comparison(&self) -> Option<(Comparison, Option<JoinedTo>)> {
        Some(match *self {
            Self::Compare(compare, src, bound) => ((compare, src, Err(bound)), None),
            Self::CompareRegs(compare, a, b) => ((compare, a, Ok(b)), None),
            Self::CompareJoined { compare, src, bound, other, negated, or } => {
                ((compare, src, Err(bound)), Some(JoinedTo { other, negated, or }))
            }
            Self::CompareRegsJoined { compare, a, b, other, negated, or } => {
                ((compare, a, Ok(b)), Some(JoinedTo { other, negated, or }))
            }
            _ => return None,
        })
    }

    /// Renames the registers the value reads ([`Inst::map_regs`]).
    pub fn map_regs(&mut self, map: &mut impl FnMut(Reg) -> Reg) {
        match self {
            Self::Copy(a)
            | Self::AddImm(a, _)
            | Self::Mapa(a)
            | Self::AndImm(a, _)
            | Self::ShrImm(a, _)
            | Self::MulImm(a, _)
            | Self::Compare(_, a, _)
            | Self::PredNot(a)
            | Self::Vote { src: a, .. }
            | Self::FetchAddReg(a)
            | Self::PopCount(a)
            | Self::Shuffle(a)
            | Self::TimesOne(a)
            | Self::BytePermute { src: Some(a), .. } => *a = map(*a),
            Self::And(a, b)
            | Self::Or(a, b)
            | Self::CompareRegs(_, a, b)
            | Self::PredAnd(a, b)
            | Self::PredOr(a, b)
            | Self::CompareHigh { high: a, low: b, .. }
            | Self::CompareJoined { src: a, other: b, .. }
            | Self::Sum(a, b) => {
                *a = map(*a);
                *b = map(*b);
            }
            Self::Param(_)
            | Self::SymbolAddr(_)
            | Self::Imm(_)
            | Self::FetchAdd(_)
            | Self::ActiveLanes
            | Self::BytePermute { src: None, .. }
            | Self::Varying
            | Self::Either(..)
            | Self::RetriedSwap
            | Self::InSpace(_) => {}
            Self::PredTable { inputs, .. } => {
                for reg in inputs {
                    *reg = map(*reg);
                }
            }
            Self::CompareRegsJoined { a, b, other, .. } => {
                *a = map(*a);
                *b = map(*b);
                *other = map(*other);
            }
        }
    }
}

/// The family of an arithmetic or logic instruction, for rules that tell tests and bit
/// manipulation from other work. Filled by both front ends: the SASS semantics table's `alu=`
/// fact, the PTX lowering from the mnemonic and its type (and its state space, for `cvta`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AluOp {
    /// An addition or subtraction: PTX `add`, `sub`; SASS `IADD3`, `UIADD3`, `VIADD`, and `LEA`,
    /// `ULEA` (a shifted index plus a base).
    Add,
    /// A multiply-add: PTX `mad`, SASS `IMAD` (`IMAD.WIDE`, `IMAD.SHL`, `IMAD.MOV`, ...).
    MultiplyAdd,
    /// An integer comparison into a predicate: PTX `setp` of an integer type, SASS `ISETP`,
    /// `UISETP`.
    IntCompare,
    /// A floating-point test into a predicate: PTX `setp` of a floating-point type, `testp`;
    /// SASS `FSETP`, `DSETP`, `HSETP2`.
    FloatCompare,
    /// A floating-point comparison into a mask: PTX `set` with a floating-point source type,
    /// SASS `FSET`, `HSET2`.
    FloatSet,
    /// Bitwise logic: PTX `and`, `or`, `xor`, `not`; SASS `LOP3`, `PLOP3`, `ULOP3`.
    BitLogic,
    /// A value chosen by a predicate: PTX `selp`, SASS `SEL`.
    Select,
    /// A copy of a register or a constant: PTX `mov`. Unlike `cvt` and `cvta`, which the
    /// lowering also records as [`ValueOp::Copy`], it leaves the bits as they are. PTX only.
    Move,
    /// An address in a state space's window made generic: PTX `cvta.shared`, `cvta.global`
    /// (the space it came from). `cvta.to.<space>` goes the other way and carries none. PTX
    /// only: SASS adds the window's base with ordinary arithmetic.
    ToGeneric(Space),
    /// A logical or arithmetic shift right: PTX `shr`. PTX only.
    ShiftRight,
}

impl AluOp {
    /// A comparison of either kind, into a predicate or a mask.
    pub fn compares(self) -> bool {
        matches!(self, Self::IntCompare | Self::FloatCompare | Self::FloatSet)
    }

    /// A floating-point comparison, into a predicate or a mask.
    pub fn compares_floats(self) -> bool {
        matches!(self, Self::FloatCompare | Self::FloatSet)
    }
}

/// An integer comparison: the relation, whether it is signed, and the operand width.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct IntCompare {
    pub relation: Relation,
    pub signed: bool,
    /// 16, 32 or 64.
    pub bits: u8,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Relation {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

impl Relation {
    /// The relation with its operands swapped: `a < b` is `b > a`.
    #[must_use]
    pub fn swapped(self) -> Self {
        match self {
            Self::Lt => Self::Gt,
            Self::Le => Self::Ge,
            Self::Gt => Self::Lt,
            Self::Ge => Self::Le,
            other => other,
        }
    }
}

impl IntCompare {
    /// `a <relation> b`, both cut to the width and read as signed or unsigned.
    pub fn holds(self, a: i64, b: i64) -> bool {
        let shift = 64 - u32::from(self.bits.clamp(1, 64));
        let (a, b) = if self.signed {
            (i128::from((a << shift) >> shift), i128::from((b << shift) >> shift))
        } else {
            (
                i128::from(a.cast_unsigned() << shift >> shift),
                i128::from(b.cast_unsigned() << shift >> shift),
            )
        };
        match self.relation {
            Relation::Eq => a == b,
            Relation::Ne => a != b,
            Relation::Lt => a < b,
            Relation::Le => a <= b,
            Relation::Gt => a > b,
            Relation::Ge => a >= b,
        }
    }
}

/// A memory operand as written: base and constant offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AddrBase {
    Reg(Reg),
    /// A named variable or parameter (`[flag]`, `[k_param_0]`).
    Symbol(Name),
    /// An absolute address (`[0x100]`).
    Absolute,
    /// Several registers or an unknown form (SASS `[R0+UR4]`).
    Complex(Vec<Reg>),
}

impl AddrBase {
    /// The registers the address is computed from (none for a symbol or an absolute address).
    pub fn regs(&self) -> &[Reg] {
        match self {
            Self::Reg(reg) => std::slice::from_ref(reg),
            Self::Complex(regs) => regs,
            Self::Symbol(_) | Self::Absolute => &[],
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Address {
    pub base: AddrBase,
    pub offset: i64,
}

/// One instruction, lowered.
#[derive(Clone, Debug)]
pub struct Inst {
    /// The span of the whole instruction in the input file.
    pub range: TextRange,
    /// The opcode as written (`ld.relaxed.gpu.global.u32`, `LDG.E.STRONG.GPU`), for messages;
    /// inline up to 24 bytes (every SASS opcode and most PTX ones), so no allocation for most.
    pub opcode: CompactString,
    pub kind: InstKind,
    pub guard: Option<Guard>,
    /// Registers written.
    pub defs: Regs,
    /// Registers read (including address registers and the guard).
    pub uses: Regs,
    /// What the result is, where the front end can tell.
    pub value: Option<ValueOp>,
    /// The family of an arithmetic or logic instruction.
    pub alu: Option<AluOp>,
    /// Set when the instruction computes its one definition from its uses (in order) and its
    /// other operands alone, with no guard and no access to memory or changing state: two
    /// instructions with the same key compute the same value from the same inputs. The key
    /// stands for the opcode and every operand that is not a register. Filled by the PTX
    /// lowering, and by the SASS lowering for rows marked `pure` in the semantics table,
    /// except where value numbering reads the instruction's [`ValueOp`] itself (a comparison, a
    /// mask, a predicate table; see `FunctionAnalysis::value_number`).
    pub pure_key: Option<std::num::NonZeroU64>,
    /// The memory operand, for memory ops, mbarrier ops, tensormap ops and async copies.
    pub address: Option<Address>,
    /// Further address operands (the mbarrier of a `cp.async.bulk`, the tensormap of a TMA op).
    pub extra_addresses: ThinVec<(AddressRole, Address)>,
    pub control: Control,
    /// The original source location, from `.loc` or `//## File` line info: shared by the
    /// instructions of one location, so that a copy is no allocation and an `Inst` stays small.
    pub source: Option<std::sync::Arc<SourceLocation>>,
    /// The SASS byte address (an offset in the function's section, so 32 bits are plenty).
    pub sass_address: Option<u32>,
    /// The line of the embedded PTX that produced this SASS instruction (`nvdisasm -gp`).
    pub ptx_line: Option<u32>,
    /// The scoreboards of a SASS instruction whose listing prints its encoding (cuobjdump,
    /// `nvdisasm -hex`), `sm_70` and later; `None` otherwise.
    pub scoreboards: Option<Scoreboards>,
}

// Lowering moves millions of instructions into their functions' vectors, and the analyses walk
// them: a larger `Inst` costs in both (272 bytes to 232 made the NCCL listing's lint 2% faster,
// docs/performance.md). Grow it knowingly.
#[cfg(target_pointer_width = "64")]
const _: () = assert!(std::mem::size_of::<Inst>() <= 232);

impl Inst {
    pub fn new(range: TextRange, opcode: impl Into<CompactString>, kind: InstKind) -> Self {
        Self {
            range,
            opcode: opcode.into(),
            kind,
            guard: None,
            defs: Regs::new(),
            uses: Regs::new(),
            value: None,
            alu: None,
            pure_key: None,
            address: None,
            extra_addresses: ThinVec::new(),
            control: Control { falls_through: true, ..Control::default() },
            source: None,
            sass_address: None,
            ptx_line: None,
            scoreboards: None,
        }
    }

    pub fn mem(&self) -> Option<&MemAccess> {
        self.kind.mem()
    }

    /// Renames every register the instruction names: definitions, uses, the guard and a branch's
    /// second condition, the value,
    /// the addresses and the A fragment of a register-A MMA. For code copied from one function
    /// into another, whose registers are numbered apart. The value-number key, made of register
    /// numbers, is dropped.
    pub fn map_regs(&mut self, mut map: impl FnMut(Reg) -> Reg) {
        for reg in self.defs.iter_mut().chain(self.uses.iter_mut()) {
            *reg = map(*reg);
        }
        for guard in self.guard.iter_mut().chain(self.control.condition.iter_mut()) {
            guard.reg = map(guard.reg);
        }
        if let Some(value) = &mut self.value {
            value.map_regs(&mut map);
        }
        for address in
            self.address.iter_mut().chain(self.extra_addresses.iter_mut().map(|(_, a)| a))
        {
            match &mut address.base {
                AddrBase::Reg(reg) => *reg = map(*reg),
                AddrBase::Complex(regs) => regs.iter_mut().for_each(|reg| *reg = map(*reg)),
                AddrBase::Symbol(_) | AddrBase::Absolute => {}
            }
        }
        if let InstKind::Wgmma(WgmmaOp::Mma { register_a: Some(reg) }) = &mut self.kind {
            *reg = map(*reg);
        }
        self.pure_key = None;
    }

    pub fn extra_address(&self, role: AddressRole) -> Option<&Address> {
        self.extra_addresses.iter().find(|(r, _)| *r == role).map(|(_, a)| a)
    }

    /// The mbarrier the instruction names: the memory operand of an `mbarrier.*` op, the barrier
    /// of a `tcgen05.commit` (its extra operand, or its only one), and the completion barrier of
    /// an async copy or `st.async`/`red.async`.
    pub fn mbarrier(&self) -> Option<&Address> {
        match self.kind {
            InstKind::Mbarrier(_) => self.address.as_ref(),
            InstKind::Tcgen05(Tcgen05Op::Commit { .. }) => {
                self.extra_address(AddressRole::Mbarrier).or(self.address.as_ref())
            }
            _ => self.extra_address(AddressRole::Mbarrier),
        }
    }

    /// Whether execution can go on to the next instruction: the instruction falls through and
    /// is not an unconditional exit.
    pub fn falls_to_next(&self) -> bool {
        self.control.falls_through && !(self.control.exits && self.guard.is_none())
    }

    /// An instruction of no width right where this one ends, with its source location, PTX
    /// line and the next SASS address: what a lowering adds so that code does not fall off its
    /// end into what is placed after it.
    #[must_use]
    pub fn after(&self, opcode: &str, kind: InstKind, control: Control) -> Inst {
        let end = self.range.end;
        let mut next = Inst::new(TextRange::new(end, end), opcode, kind);
        next.control = control;
        next.source.clone_from(&self.source);
        next.ptx_line = self.ptx_line;
        // No instruction of a listing has the address after its last one.
        next.sass_address = self.sass_address.and_then(|a| a.checked_add(16));
        next
    }

    pub fn is_branch(&self) -> bool {
        !self.control.targets.is_empty() || self.control.indirect
    }

    /// A branch or an exit whose taking depends on registers it reads (`@P0 BRA`, `@P6 BRA P5,
    /// 0x480`, `@!P1 EXIT`, `BRX R4`): what chooses the path of an iteration.
    pub fn is_conditional_transfer(&self) -> bool {
        (self.is_branch() || self.control.exits) && !self.uses.is_empty()
    }
}

/// What an extra address operand names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AddressRole {
    Mbarrier,
    Tensormap,
    Source,
    Destination,
}

impl fmt::Display for InstId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "i{}", self.0)
    }
}
