//! The SASS syntax tree shared by the text listings and the nvdisasm JSON reader.
//!
//! Every node borrows from the text it was parsed from (`'a`), and every instruction and
//! function carries its byte range in that text. Nothing here knows what an opcode means:
//! classification belongs to the lowering into the IR.

use std::fmt;
use std::sync::Arc;

use fencelint_source::TextRange;

use crate::SassFormat;

/// A GPU architecture such as `sm_90a`: the number (`90`) and an optional letter (`a`, `f`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Arch {
    /// Major and minor version run together: `sm_90a` is 90, `sm_100a` is 100, `sm_120` is 120.
    pub number: u32,
    /// The feature-set letter: `a` (architecture-specific) or `f` (family), if any.
    pub suffix: Option<char>,
}

/// The newest architecture whose SASS fencelint has read and its semantics table was checked
/// against: the `sm_121a` cubins of `PyTorch` (docs/sass-coverage.md). A listing for a newer
/// one may hold instructions the table does not know.
pub const NEWEST_CHECKED_ARCH: u32 = 121;

impl Arch {
    /// Whether this architecture is newer than [`NEWEST_CHECKED_ARCH`].
    pub fn is_newer_than_checked(self) -> bool {
        self.number > NEWEST_CHECKED_ARCH
    }

    /// Reads `sm_90a`, `compute_90a`, `SM90`, `sm90` or `90a`; returns `None` for anything else.
    pub fn parse(text: &str) -> Option<Self> {
        let text = text.trim();
        let rest = ["sm_", "compute_", "SM_", "sm", "SM"]
            .iter()
            .find_map(|prefix| text.strip_prefix(prefix))
            .unwrap_or(text);
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 || digits > 4 {
            return None;
        }
        let number = rest[..digits].parse().ok()?;
        let tail = &rest[digits..];
        let suffix = match tail.as_bytes() {
            [] => None,
            [letter] if letter.is_ascii_lowercase() => Some(char::from(*letter)),
            _ => return None,
        };
        Some(Self { number, suffix })
    }

    /// Builds the architecture from the major and minor version of nvdisasm's JSON metadata.
    pub fn from_version(major: u32, minor: u32) -> Self {
        Self { number: major * 10 + minor, suffix: None }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sm_{}", self.number)?;
        if let Some(suffix) = self.suffix {
            write!(f, "{suffix}")?;
        }
        Ok(())
    }
}

/// One parsed input: every function of a listing, in input order.
#[derive(Clone, Debug, PartialEq)]
pub struct SassModule<'a> {
    pub format: SassFormat,
    pub functions: Vec<SassFunction<'a>>,
    /// The disassembler that wrote a JSON listing (`Producer`), when it says.
    pub producer: Option<&'a str>,
}

/// One function (a kernel or a device function with its own code section).
///
/// Device subroutines that ptxas placed inside a kernel's section (`$kernel$callee:` in
/// nvdisasm, `CALL.REL.NOINC 0x2b0` in cuobjdump) stay part of that kernel; nvdisasm names them
/// in [`SassFunction::labels`].
#[derive(Clone, Debug, PartialEq)]
pub struct SassFunction<'a> {
    /// The symbol name as the disassembler prints it (mangled).
    pub name: &'a str,
    /// `code for sm_XX` / `.target` / `arch =` of the enclosing cubin, or the JSON `SM.version`.
    pub arch: Option<Arch>,
    /// The `identifier = x.cu` of the enclosing fat-binary entry (cuobjdump), when printed.
    pub binary: Option<&'a str>,
    /// From the function's header line to the end of its last line.
    pub range: TextRange,
    /// Instructions in address order.
    pub instructions: Vec<SassInst<'a>>,
    /// Labels in input order; not every label is a branch target.
    pub labels: Vec<SassLabel<'a>>,
}

impl<'a> SassFunction<'a> {
    /// The index of the instruction at `address`, when there is one.
    pub fn index_of(&self, address: u64) -> Option<usize> {
        self.instructions.binary_search_by_key(&address, |inst| inst.address).ok()
    }

    /// The instruction at `address`, when there is one.
    pub fn inst_at(&self, address: u64) -> Option<&SassInst<'a>> {
        self.index_of(address).map(|index| &self.instructions[index])
    }

    /// The address of the label `name` (for example `.L_x_8`), when the listing has it.
    pub fn label_address(&self, name: &str) -> Option<u64> {
        self.labels.iter().find(|label| label.name == name).map(|label| label.address)
    }
}

/// A label line (`.L_x_8:`, `_Z6kernelPi:`, `$kernel$callee:`) and the address it names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SassLabel<'a> {
    pub name: &'a str,
    /// The address of the next instruction, or the end of the function for a trailing label.
    pub address: u64,
    pub range: TextRange,
}

/// A `//## File "x.cu", line N` location from `nvdisasm -g`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SrcLine<'a> {
    pub file: &'a str,
    pub line: u32,
}

/// An instruction predicate such as `@P0`, `@!P1`, `@!PT` or `@!UP0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Guard {
    /// A register of [`RegFile::P`] or [`RegFile::UP`]; `PT`/`UPT` use [`Register::SPECIAL`].
    pub reg: Register,
    pub negated: bool,
    /// Whether the predicate is a uniform one (`UP*`).
    pub uniform: bool,
}

impl Guard {
    /// `@!PT` / `@!UPT`: the instruction never executes (ptxas uses it as filler).
    pub fn is_never(self) -> bool {
        self.negated && self.reg.is_special()
    }

    /// `@PT` / `@UPT`: the instruction always executes.
    pub fn is_always(self) -> bool {
        !self.negated && self.reg.is_special()
    }
}

impl fmt::Display for Guard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "@{}{}", if self.negated { "!" } else { "" }, self.reg)
    }
}

/// One SASS instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct SassInst<'a> {
    /// Byte offset inside the function's code section (`/*0030*/`, or JSON `start + 16*i`).
    pub address: u64,
    pub guard: Option<Guard>,
    /// The full dotted opcode, for example `LDG.E.128.STRONG.GPU`. Unknown opcodes are kept.
    pub opcode: &'a str,
    pub operands: Vec<Operand<'a>>,
    /// From the address column (or the JSON object) to the terminating `;`.
    pub range: TextRange,
    /// The innermost source location from `nvdisasm -g`/`-gi` (sticky until the next marker).
    pub src_line: Option<SrcLine<'a>>,
    /// Where the code was inlined, from `nvdisasm -gi`: the innermost call site first, the
    /// kernel's own line last; `None` when it was not inlined or the listing does not say.
    pub inlined_at: Option<Arc<[SrcLine<'a>]>>,
    /// The PTX line from `nvdisasm -gp` (sticky until the next marker).
    pub ptx_line: Option<u32>,
    /// The resolved address of a code target: `BRA 0x200`, `` BRA `(.L_x_8) ``,
    /// `BSSY B0, 0x210`, `CALL.REL.NOINC 0x2b0`. `RET` has none: the symbol that nvdisasm
    /// prints after it names the function returned into, not a target.
    pub branch_target: Option<u64>,
    /// The `/* 0x... */` encoding comments (both words), when the listing has them.
    pub encoding: Option<TextRange>,
    /// Set when the line could not be read completely; an error describes why.
    pub malformed: bool,
}

impl<'a> SassInst<'a> {
    /// The opcode without modifiers: `LDG` for `LDG.E.128.STRONG.GPU`.
    pub fn base(&self) -> &'a str {
        crate::text::opcode_base(self.opcode)
    }

    /// The modifiers after the base, in order: `E`, `128`, `STRONG`, `GPU`.
    pub fn modifiers(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        let rest = self.opcode.split_once('.').map_or("", |(_, rest)| rest);
        rest.split('.').filter(|modifier| !modifier.is_empty())
    }

    /// The base followed by the modifiers.
    pub fn tokens(&self) -> impl Iterator<Item = &'a str> + use<'a> {
        self.opcode.split('.').filter(|token| !token.is_empty())
    }

    pub fn has_modifier(&self, modifier: &str) -> bool {
        self.modifiers().any(|m| m == modifier)
    }

    /// The 64-bit encoding words in the text at [`SassInst::encoding`]; `text` is the input
    /// the instruction was parsed from.
    pub fn encoding_words<'t>(&self, text: &'t str) -> impl Iterator<Item = u64> + use<'t> {
        let comments = self.encoding.and_then(|range| text.get(range.to_usize())).unwrap_or("");
        comments.split("0x").skip(1).filter_map(|word| {
            let digits = word.bytes().take_while(u8::is_ascii_hexdigit).count();
            u64::from_str_radix(&word[..digits], 16).ok()
        })
    }
}

/// The control bits of a 128-bit (`sm_70` and later) encoding whose comments lie at `encoding`
/// in `text` (an instruction's [`SassInst::encoding`], both words): bits 41 to 61 of the second,
/// high word, in the last comment, shifted down (see `fencelint_ir::Scoreboards::from_control`).
/// `None` unless the range holds two comments (two words are two comments of 24 bytes at
/// least: the first word alone, which a cuobjdump instruction line holds before its second
/// line is read, is turned away at once) and the last one a full 64-bit word. `sm_50` to
/// `sm_62` print one word per instruction and their control bits apart: callers discard these.
pub fn encoding_control_bits(text: &str, encoding: TextRange) -> Option<u32> {
    let comments = text.get(encoding.to_usize())?;
    if comments.len() < 48 {
        return None;
    }
    // The last comment opens a few bytes from the end: found from there with a byte search
    // (a string search would build a searcher for every instruction of a listing).
    let bytes = comments.as_bytes();
    let mut end = bytes.len();
    let last = loop {
        let slash = memchr::memrchr(b'/', &bytes[..end])?;
        if bytes.get(slash + 1) == Some(&b'*') {
            break slash;
        }
        end = slash;
    };
    control_bits(&comments[last..])
}

/// The control bits of the word that `comment` starts with, taken for the high word of a
/// 128-bit encoding (`/* 0x000fe20000000f00 */`, the line cuobjdump and `nvdisasm -hex` print
/// under the instruction): bits 41 to 61, shifted down. `None` unless the word has 16 digits.
pub fn control_bits(comment: &str) -> Option<u32> {
    let bytes = comment.as_bytes();
    // `/* 0x`: the word starts within the first few bytes. This runs for every instruction of
    // a listing, so no search is set up for it and the digits are read through a table.
    let x = match bytes.get(4) {
        Some(b'x') => 4,
        _ => bytes.iter().take(8).position(|&b| b == b'x')?,
    };
    if x == 0 || bytes[x - 1] != b'0' {
        return None;
    }
    let digits = bytes.get(x + 1..x + 17)?;
    if HEX[usize::from(digits[15])] > 15 || bytes.get(x + 17).is_some_and(u8::is_ascii_hexdigit) {
        return None;
    }
    // The first six digits are bits 40 to 63.
    let mut top = 0u32;
    for &digit in &digits[..6] {
        let value = HEX[usize::from(digit)];
        if value > 15 {
            return None;
        }
        top = top << 4 | u32::from(value);
    }
    Some((top >> 1) & 0x1f_ffff)
}

/// The value of each hexadecimal digit; 255 for any other byte.
const HEX: [u8; 256] = {
    let mut table = [255u8; 256];
    let mut i = 0;
    while i < 10 {
        table[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        table[b'a' as usize + i] = 10 + i as u8;
        table[b'A' as usize + i] = 10 + i as u8;
        i += 1;
    }
    table
};

/// The register files that SASS operands name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RegFile {
    /// General-purpose `R0..R254`, `RZ`.
    R,
    /// Uniform `UR0..`, `URZ`.
    UR,
    /// Predicates `P0..P6`, `PT`.
    P,
    /// Uniform predicates `UP0..UP6`, `UPT`.
    UP,
    /// Convergence barriers `B0..B15` (`BSSY`, `BSYNC`).
    B,
    /// Scoreboards `SB0..SB5` (`DEPBAR.LE SB0, 0x1`).
    SB,
    /// Warpgroup scoreboards `gsb0` (`WARPGROUP.DEPBAR.LE gsb0, 0x0`).
    Gsb,
    /// The whole predicate file `PR` (`P2R`, `R2P`).
    PR,
    /// The whole uniform predicate file `UPR`.
    UPR,
}

/// A register: its file and number. `RZ`, `URZ`, `PT`, `UPT`, `PR` and `UPR` use the
/// [`Register::SPECIAL`] index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Register {
    pub file: RegFile,
    pub index: u16,
}

impl Register {
    /// The index of `RZ`, `URZ` (read as zero), `PT`, `UPT` (always true), `PR` and `UPR`.
    pub const SPECIAL: u16 = u16::MAX;

    pub const fn new(file: RegFile, index: u16) -> Self {
        Self { file, index }
    }

    pub const fn is_special(self) -> bool {
        self.index == Self::SPECIAL
    }

    /// `RZ` or `URZ`.
    pub const fn is_zero(self) -> bool {
        matches!(self.file, RegFile::R | RegFile::UR) && self.is_special()
    }

    /// `PT` or `UPT`.
    pub const fn is_true(self) -> bool {
        matches!(self.file, RegFile::P | RegFile::UP) && self.is_special()
    }

    pub const fn is_uniform(self) -> bool {
        matches!(self.file, RegFile::UR | RegFile::UP | RegFile::UPR)
    }
}

impl fmt::Display for Register {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (prefix, special) = match self.file {
            RegFile::R => ("R", "RZ"),
            RegFile::UR => ("UR", "URZ"),
            RegFile::P => ("P", "PT"),
            RegFile::UP => ("UP", "UPT"),
            RegFile::B => ("B", "B?"),
            RegFile::SB => ("SB", "SB?"),
            RegFile::Gsb => ("gsb", "gsb?"),
            RegFile::PR => return f.write_str("PR"),
            RegFile::UPR => return f.write_str("UPR"),
        };
        if self.is_special() { f.write_str(special) } else { write!(f, "{prefix}{}", self.index) }
    }
}

/// The suffix of a register operand, stored inline: `64` in `R2.64`, `U32` in `RZ.U32`, `B3`
/// in `UR62.B3`, `X16` in `R3.X16`, `H1_H1` in `R4.H1_H1`. At most [`Suffix::CAPACITY`] ASCII
/// characters; a longer suffix makes the operand [`OperandKind::Other`].
#[derive(Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Suffix {
    len: u8,
    bytes: [u8; Suffix::CAPACITY],
}

impl Suffix {
    pub const CAPACITY: usize = 7;
    pub const NONE: Self = Self { len: 0, bytes: [0; Self::CAPACITY] };

    /// Stores `text` when it is short enough and made of ASCII letters, digits, `_` and `.`.
    pub fn new(text: &str) -> Option<Self> {
        let valid = text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'.');
        if text.len() > Self::CAPACITY || !valid {
            return None;
        }
        let mut bytes = [0; Self::CAPACITY];
        bytes[..text.len()].copy_from_slice(text.as_bytes());
        Some(Self { len: text.len() as u8, bytes })
    }

    pub fn as_str(&self) -> &str {
        std::str::from_utf8(self.as_bytes()).unwrap_or("")
    }

    /// The suffix's bytes (ASCII, see [`Suffix::new`]).
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes[..usize::from(self.len)]
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl fmt::Debug for Suffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self.as_str(), f)
    }
}

impl fmt::Display for Suffix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<str> for Suffix {
    fn eq(&self, other: &str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl PartialEq<&str> for Suffix {
    fn eq(&self, other: &&str) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

/// A register as written in an operand, with its suffix: `R2.64`, `RZ.U32`, `UR62.B3`,
/// `R3.X16`, `R4.H1_H1`. The operand-cache hint `.reuse` is not part of the suffix (see
/// [`Operand::reuse`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct RegRef {
    pub reg: Register,
    /// The text after the first `.`, without `.reuse`; empty when there is none.
    pub suffix: Suffix,
}

impl RegRef {
    /// A register without suffix.
    pub const fn plain(reg: Register) -> Self {
        Self { reg, suffix: Suffix::NONE }
    }

    /// A register with `suffix` (empty for none); `None` when the suffix cannot be stored.
    pub fn new(reg: Register, suffix: &str) -> Option<Self> {
        Some(Self { reg, suffix: Suffix::new(suffix)? })
    }
}

impl fmt::Display for RegRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.reg)?;
        if !self.suffix.is_empty() {
            write!(f, ".{}", self.suffix)?;
        }
        Ok(())
    }
}

/// The inside of one `[...]`: up to two registers and an immediate offset, for example
/// `[R0+UR4]`, `[UR4+0x8]`, `[R2.64+0x10]`, `[RZ.U32+UR4]`, `[R0+-0x8]` or `[0x10]`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Address {
    /// The first register written.
    pub base: Option<RegRef>,
    /// The second register written (usually uniform: `[R0+UR4]`).
    pub index: Option<RegRef>,
    /// The sum of the immediate terms.
    pub offset: i64,
}

impl Address {
    /// The registers of the address, in the order written.
    pub fn regs(&self) -> impl Iterator<Item = RegRef> + use<> {
        self.base.into_iter().chain(self.index)
    }

    /// Whether both addresses use the same registers (ignoring `RZ`/`URZ` terms) and offset.
    /// This is textual identity: equal registers may still hold different values.
    pub fn same_location(&self, other: &Self) -> bool {
        self.offset == other.offset && self.same_registers(other)
    }

    /// Whether both addresses use the same registers (ignoring `RZ`/`URZ` terms), whatever the
    /// offsets: `[UR6]` and `[UR6+0x8]` share a base.
    pub fn same_registers(&self, other: &Self) -> bool {
        let key = |address: &Self| {
            let mut regs = [None, None];
            for (slot, reg) in regs.iter_mut().zip(address.regs().filter(|r| !r.reg.is_zero())) {
                *slot = Some(reg.reg);
            }
            regs
        };
        key(self) == key(other)
    }
}

impl fmt::Display for Address {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("[")?;
        let mut first = true;
        for reg in self.regs() {
            if !first {
                f.write_str("+")?;
            }
            write!(f, "{reg}")?;
            first = false;
        }
        if self.offset != 0 || first {
            if !first {
                f.write_str("+")?;
            }
            if self.offset < 0 {
                write!(f, "-{:#x}", self.offset.unsigned_abs())?;
            } else {
                write!(f, "{:#x}", self.offset)?;
            }
        }
        f.write_str("]")
    }
}

/// The word in front of a memory operand's brackets.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MemPrefix {
    /// `[R0+0x8]`.
    None,
    /// `desc[UR4][R2.64+0x4]`: a global access through a memory descriptor.
    Desc,
    /// `gdesc[UR8]`: a matrix descriptor (`UTCHMMA`, `HGMMA`).
    Gdesc,
    /// `tmem[UR4]`: tensor memory (`LDTM`, `STTM`, `UTCHMMA`).
    Tmem,
    /// `idesc[UR5]`: an instruction descriptor (`UTCHMMA`).
    Idesc,
    /// Any other word (the operand's text has it).
    Other,
}

/// A memory operand: `[R0+UR4]`, `desc[UR4][R2.64+0x4]`, `gdesc[UR8]`, `tmem[UR4]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MemOperand {
    pub prefix: MemPrefix,
    /// The descriptor register of `desc[UR4][...]`.
    pub desc: Option<RegRef>,
    pub addr: Address,
}

/// The bank of a constant operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ConstBank {
    /// `c[0x0][...]`.
    Index(u32),
    /// `cx[UR4][...]`: a bank chosen by a register.
    Reg(RegRef),
}

/// A constant-bank operand: `c[0x0][0x210]`, `c[0x0][RZ]`, `cx[UR4][R0]`, `c[0x0][0x160].H0_H0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ConstOperand {
    pub bank: ConstBank,
    pub addr: Address,
    /// The text after `].`, empty when there is none.
    pub suffix: Suffix,
}

/// A floating-point immediate. Equality and hashing compare the bits, so that a `QNAN`
/// operand equals itself.
#[derive(Clone, Copy, Debug)]
pub struct FloatImm(pub f64);

impl FloatImm {
    pub const fn value(self) -> f64 {
        self.0
    }
}

impl PartialEq for FloatImm {
    fn eq(&self, other: &Self) -> bool {
        self.0.to_bits() == other.0.to_bits()
    }
}

impl Eq for FloatImm {}

impl std::hash::Hash for FloatImm {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.to_bits().hash(state);
    }
}

/// What an operand is. Shapes the parser does not know are kept as [`OperandKind::Other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum OperandKind<'a> {
    /// `R5`, `RZ`, `UR4`, `P0`, `!PT`, `UPT`, `B0`, `SB0`, `gsb0`, `PR`, `R2.64`, `-RZ`.
    Reg(RegRef),
    /// A special register read by `S2R`/`S2UR`/`CS2R`: `SR_TID.X`, `SR_CgaCtaId`, `SRZ`.
    Special(&'a str),
    /// An integer immediate: `0x400`, `12`, `-0x8`. Hex values above `i64::MAX` wrap.
    Imm(i64),
    /// A floating-point immediate: `0.5`, `5.9604644775390625e-08`, `+INF`, `-QNAN`.
    Float(FloatImm),
    Mem(MemOperand),
    Const(ConstOperand),
    /// A `{5,4,3,2,1,0}` set, as a bit mask (bit `n` for member `n`).
    Set(u64),
    /// A code symbol: `` `(.L_x_8) ``, `` `($kernel$callee) ``, or a bare `$callee` (JSON).
    Label(&'a str),
    /// The targets nvdisasm prints after an indirect branch, from the cubin's
    /// `EIATTR_INDIRECT_BRANCH_TARGETS`: `(*"BRANCH_TARGETS .L_x_12,.L_x_3"*)` holds
    /// `.L_x_12,.L_x_3` (see [`Operand::branch_targets`]).
    BranchTargets(&'a str),
    /// A value the loader patches in, as nvdisasm prints a relocation: `32@lo((k + .L_x_0@srel))`
    /// (the low half of the return address that a call of another function passes in `R20`),
    /// `32@hi(symbol)`. Holds the expression inside `lo(...)` or `hi(...)`.
    Relocation(&'a str),
    /// Another of nvdisasm's `(*"..."*)` remarks, which say nothing about what the instruction
    /// does: `(*"SpillRefill"*)`, `(*"RELOCATOR OPCODE,YIELD,280"*)` (an instruction the loader
    /// may patch, in a `-rdc` cubin). Holds the text between the quotes.
    Remark(&'a str),
    /// Anything else, as written (without the prefixes recorded in the flags).
    Other(&'a str),
}

/// One operand with its span and the decorations written around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Operand<'a> {
    pub kind: OperandKind<'a>,
    /// The operand's text in the input, decorations included.
    pub range: TextRange,
    /// `-R7`, `-RZ`, `-c[0x0][0x10]` (negative immediates are in the value instead).
    pub neg: bool,
    /// `!P0`, `!PT` (logical), `~R2` (bitwise).
    pub invert: bool,
    /// `|R3|`.
    pub abs: bool,
    /// `R6.reuse`: an operand-cache hint with no effect on meaning.
    pub reuse: bool,
}

impl<'a> Operand<'a> {
    pub fn reg(&self) -> Option<RegRef> {
        match self.kind {
            OperandKind::Reg(reg) => Some(reg),
            _ => None,
        }
    }

    pub fn mem(&self) -> Option<&MemOperand> {
        match &self.kind {
            OperandKind::Mem(mem) => Some(mem),
            _ => None,
        }
    }

    pub fn imm(&self) -> Option<i64> {
        match self.kind {
            OperandKind::Imm(value) => Some(value),
            _ => None,
        }
    }

    pub fn label(&self) -> Option<&'a str> {
        match self.kind {
            OperandKind::Label(name) => Some(name),
            _ => None,
        }
    }

    /// The labels of a `(*"BRANCH_TARGETS ..."*)` annotation, in the order printed.
    pub fn branch_targets(&self) -> Option<impl Iterator<Item = &'a str> + use<'a>> {
        match self.kind {
            OperandKind::BranchTargets(list) => {
                Some(list.split(',').map(str::trim).filter(|name| !name.is_empty()))
            }
            _ => None,
        }
    }
}
