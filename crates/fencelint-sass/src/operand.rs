//! Splits an operand list into operands and reads each one, without allocating.
//!
//! The same code serves the text listings (`R0, desc[UR4][R2.64] ;`) and nvdisasm JSON
//! (`"R0,desc[UR4][R2.64]"`). Shapes it does not know become [`OperandKind::Other`].

use fencelint_source::TextRange;

use crate::ast::{
    Address, ConstBank, ConstOperand, FloatImm, MemOperand, MemPrefix, Operand, OperandKind,
    RegFile, RegRef, Register, Suffix,
};

/// Why [`scan_operands`] stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stop {
    /// At the `;` at this index.
    Semicolon(usize),
    /// At a `//` or `/*` comment starting at this index (the `;` is missing).
    Comment(usize),
    /// At the end of the text (the `;` is missing in a listing; normal in JSON).
    End,
}

/// Reads the operands in `text[from..]` up to the statement's `;`, pushing them to `out`.
///
/// `base` is the offset of `text` in the input, for the operand ranges. Operands are separated
/// by commas or whitespace outside brackets (`RET.REL.NODEC R2 0x0`); two bracket groups with no
/// word in front (`[R6][R8.64]`, as nvdisasm JSON writes `LDGSTS`) are two operands.
pub(crate) fn scan_operands<'a>(
    text: &'a str,
    from: usize,
    base: usize,
    out: &mut Vec<Operand<'a>>,
) -> Stop {
    let bytes = text.as_bytes();
    let len = bytes.len();
    let mut index = from;
    loop {
        while index < len && matches!(bytes[index], b',' | b' ' | b'\t') {
            index += 1;
        }
        let Some(&byte) = bytes.get(index) else { return Stop::End };
        match byte {
            b';' => return Stop::Semicolon(index),
            b'/' if matches!(bytes.get(index + 1), Some(b'/' | b'*')) => {
                return Stop::Comment(index);
            }
            _ => {}
        }
        if let Some((operand, end)) = plain_register(text, index, base) {
            out.push(operand);
            index = end;
            continue;
        }
        let start = index;
        let mut depth = 0u32;
        while index < len {
            let byte = bytes[index];
            match BYTE_CLASS[usize::from(byte)] {
                ORDINARY => index += 1,
                OPEN => {
                    depth += 1;
                    index += 1;
                }
                CLOSE => {
                    depth = depth.saturating_sub(1);
                    index += 1;
                    if depth == 0
                        && byte == b']'
                        && bytes.get(index) == Some(&b'[')
                        && bytes[start] == b'['
                    {
                        break;
                    }
                }
                SEPARATOR if depth > 0 => index += 1,
                SLASH if depth > 0 || !matches!(bytes.get(index + 1), Some(b'/' | b'*')) => {
                    index += 1;
                }
                // A separator, a `;` (even inside unbalanced brackets) or a comment.
                _ => break,
            }
        }
        out.push(parse_operand(&text[start..index], base + start));
    }
}

/// A register operand with no decoration (`R2`, `UR4`, `P0`, `PT`, `RZ`) at `start`, which
/// most operands are, and the index after it: the result [`parse_operand`] gives for it,
/// without classifying each byte. `None` for anything else, which the general path reads.
fn plain_register(text: &str, start: usize, base: usize) -> Option<(Operand<'_>, usize)> {
    let bytes = text.as_bytes();
    if !matches!(bytes[start], b'R' | b'U' | b'P' | b'B') {
        return None;
    }
    let mut end = start + 1;
    while end < bytes.len() && bytes[end].is_ascii_alphanumeric() {
        end += 1;
    }
    // The token must end where the general scanner ends it: at a separator, the `;` or the end.
    if end < bytes.len() && !matches!(bytes[end], b',' | b' ' | b'\t' | b';') {
        return None;
    }
    // No `.` in the token: the register has no suffix.
    let reg = RegRef::plain(register(&bytes[start..end])?);
    let operand = Operand {
        kind: OperandKind::Reg(reg),
        range: TextRange::from_usize(base + start, base + end),
        neg: false,
        invert: false,
        abs: false,
        reuse: false,
    };
    Some((operand, end))
}

const ORDINARY: u8 = 0;
const SEPARATOR: u8 = 1;
const SEMICOLON: u8 = 2;
const SLASH: u8 = 3;
const OPEN: u8 = 4;
const CLOSE: u8 = 5;

/// How [`scan_operands`] treats each byte.
static BYTE_CLASS: [u8; 256] = {
    let mut table = [ORDINARY; 256];
    table[b',' as usize] = SEPARATOR;
    table[b' ' as usize] = SEPARATOR;
    table[b'\t' as usize] = SEPARATOR;
    table[b';' as usize] = SEMICOLON;
    table[b'/' as usize] = SLASH;
    table[b'[' as usize] = OPEN;
    table[b'{' as usize] = OPEN;
    table[b'(' as usize] = OPEN;
    table[b']' as usize] = CLOSE;
    table[b'}' as usize] = CLOSE;
    table[b')' as usize] = CLOSE;
    table
};

/// Reads one operand token (no surrounding whitespace, no separators).
pub(crate) fn parse_operand(token: &str, offset: usize) -> Operand<'_> {
    let range = TextRange::from_usize(offset, offset + token.len());
    let mut operand = Operand {
        kind: OperandKind::Other(token),
        range,
        neg: false,
        invert: false,
        abs: false,
        reuse: false,
    };
    let mut text = token;
    loop {
        match text.as_bytes().first() {
            Some(b'-') if !starts_number(&text[1..]) => {
                operand.neg = true;
                text = &text[1..];
            }
            Some(b'!' | b'~') => {
                operand.invert = true;
                text = &text[1..];
            }
            Some(b'|') => {
                let Some(close) = byte_index(&text[1..], b'|') else { return operand };
                let after = &text[close + 2..];
                if !after.is_empty() && after != ".reuse" {
                    return operand;
                }
                operand.abs = true;
                operand.reuse = !after.is_empty();
                text = &text[1..=close];
            }
            _ => break,
        }
    }
    if let Some(stripped) = text.strip_suffix(".reuse") {
        operand.reuse = true;
        text = stripped;
    }
    operand.kind = match parse_kind(text) {
        Some(kind) => kind,
        None => match reused_half(text) {
            Some(reg) => {
                operand.reuse = true;
                OperandKind::Reg(reg)
            }
            None => OperandKind::Other(text),
        },
    };
    operand
}

/// A register with the reuse flag before a half selector (`HADD2.F32 R6, -RZ, R0.reuse.H0_H0`):
/// tried only for operands nothing else reads, so the common path pays nothing for it.
fn reused_half(text: &str) -> Option<RegRef> {
    let at = text.find(".reuse.")?;
    let selector = &text[at + ".reuse.".len()..];
    if selector.is_empty() {
        return None;
    }
    Some(RegRef { reg: register(&text.as_bytes()[..at])?, suffix: Suffix::new(selector)? })
}

fn parse_kind(text: &str) -> Option<OperandKind<'_>> {
    let bytes = text.as_bytes();
    match *bytes.first()? {
        b'R' | b'U' | b'P' | b'B' => parse_reg(text).map(OperandKind::Reg),
        b'g' if text.starts_with("gsb") => parse_reg(text).map(OperandKind::Reg),
        b'S' => {
            if text.starts_with("SR_") || text == "SRZ" {
                Some(OperandKind::Special(text))
            } else {
                parse_reg(text).map(OperandKind::Reg)
            }
        }
        b'[' => {
            let (addr, rest) = parse_bracket(text)?;
            rest.is_empty().then_some(OperandKind::Mem(MemOperand {
                prefix: MemPrefix::None,
                desc: None,
                addr,
            }))
        }
        b'{' => parse_set(text).map(OperandKind::Set),
        b'(' => {
            // nvdisasm's `(*"..."*)` annotations: `BRANCH_TARGETS` lists the targets of an
            // indirect branch; the others (`SpillRefill`, `RELOCATOR ...`) are remarks.
            let inner = text.strip_prefix("(*\"")?.strip_suffix("\"*)")?;
            Some(match inner.strip_prefix("BRANCH_TARGETS ") {
                Some(list) => OperandKind::BranchTargets(list),
                None => OperandKind::Remark(inner),
            })
        }
        b'`' => {
            let name = text.strip_prefix("`(")?.strip_suffix(')')?;
            Some(OperandKind::Label(name))
        }
        b'$' | b'_' | b'.' => Some(OperandKind::Label(text)),
        b'0'..=b'9' => parse_number(text).or_else(|| parse_relocation(text)),
        b'-' | b'+' | b'I' | b'Q' | b'N' => parse_number(text),
        b'a'..=b'z' if byte_index(text, b'[').is_some() => parse_prefixed(text),
        // No SASS keyword is lower case: a bare lower-case word is a symbol (`extern "C"` names
        // in nvdisasm JSON).
        b'a'..=b'z' if is_symbol(text) => Some(OperandKind::Label(text)),
        _ => None,
    }
}

/// `32@lo((k + .L_x_0@srel))`, `32@hi(symbol)`: a width in bits, the half, the expression.
fn parse_relocation(text: &str) -> Option<OperandKind<'_>> {
    let (width, rest) = text.split_once('@')?;
    if width.is_empty() || !width.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let expression = rest.strip_prefix("lo(").or_else(|| rest.strip_prefix("hi("))?;
    expression.strip_suffix(')').filter(|e| !e.is_empty()).map(OperandKind::Relocation)
}

/// Whether `text` can be a code symbol: letters, digits, `_`, `$`, `.`.
fn is_symbol(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'.'))
}

/// In control-flow instructions, a bare word that no other rule claimed is a code symbol
/// (nvdisasm JSON writes `CALL.REL.NOINC MyKernel$helper`, `RET.REL.NODEC R2,MyKernel`).
pub(crate) fn claim_symbols(opcode: &str, operands: &mut [Operand<'_>]) {
    if !crate::text::may_transfer_control(opcode) {
        return;
    }
    if !matches!(
        crate::text::opcode_base(opcode),
        "CALL"
            | "RET"
            | "BRA"
            | "BRX"
            | "JMP"
            | "JMX"
            | "BSSY"
            | "SSY"
            | "PBK"
            | "PCNT"
            | "CAL"
            | "JCAL"
    ) {
        return;
    }
    for operand in operands {
        if let OperandKind::Other(text) = operand.kind
            && is_symbol(text)
            && !operand.neg
            && !operand.invert
            && !operand.abs
        {
            operand.kind = OperandKind::Label(text);
        }
    }
}

/// The index of the first `byte` in a short text (operands are a few bytes long).
fn byte_index(text: &str, byte: u8) -> Option<usize> {
    text.bytes().position(|b| b == byte)
}

/// Whether `text` begins like a numeric immediate (after a `-` sign).
fn starts_number(text: &str) -> bool {
    match text.as_bytes().first() {
        Some(b'0'..=b'9') => true,
        Some(b'I' | b'Q' | b'N') => matches!(text, "INF" | "QNAN" | "NAN" | "SNAN"),
        _ => false,
    }
}

/// Reads a register name with an optional suffix: `R2.64`, `URZ`, `UP0`, `PT`, `B1`, `SB0`,
/// `gsb0`, `UR62.B3`.
pub(crate) fn parse_reg(text: &str) -> Option<RegRef> {
    let bytes = text.as_bytes();
    let dot = bytes.iter().position(|&b| b == b'.').unwrap_or(bytes.len());
    let suffix = match text.get(dot + 1..) {
        None => Suffix::NONE,
        Some(suffix) if !suffix.is_empty() => Suffix::new(suffix)?,
        Some(_) => return None,
    };
    Some(RegRef { reg: register(&bytes[..dot])?, suffix })
}

/// Reads a register name without suffix: `R2`, `URZ`, `UP0`, `PT`, `B1`, `SB0`, `gsb0`.
fn register(name: &[u8]) -> Option<Register> {
    let (file, digits) = match name {
        b"RZ" => (RegFile::R, None),
        b"URZ" => (RegFile::UR, None),
        b"PT" => (RegFile::P, None),
        b"UPT" => (RegFile::UP, None),
        b"PR" => (RegFile::PR, None),
        b"UPR" => (RegFile::UPR, None),
        [b'R', digits @ ..] => (RegFile::R, Some(digits)),
        [b'U', b'R', digits @ ..] => (RegFile::UR, Some(digits)),
        [b'U', b'P', digits @ ..] => (RegFile::UP, Some(digits)),
        [b'P', digits @ ..] => (RegFile::P, Some(digits)),
        [b'S', b'B', digits @ ..] => (RegFile::SB, Some(digits)),
        [b'B', digits @ ..] => (RegFile::B, Some(digits)),
        [b'g', b's', b'b', digits @ ..] => (RegFile::Gsb, Some(digits)),
        _ => return None,
    };
    let index = match digits {
        None => Register::SPECIAL,
        Some(digits) => parse_small(digits)?,
    };
    Some(Register::new(file, index))
}

/// Reads up to four decimal digits.
fn parse_small(digits: &[u8]) -> Option<u16> {
    if digits.is_empty() || digits.len() > 4 {
        return None;
    }
    let mut value = 0u16;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u16::from(byte - b'0');
    }
    Some(value)
}

/// Reads an integer: `0x1f`, `-0x8`, `12`, `-3`. Hex values above `i64::MAX` wrap.
pub(crate) fn parse_int(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let magnitude = if let Some(hex) =
        digits.strip_prefix("0x").or_else(|| digits.strip_prefix("0X"))
    {
        parse_hex(hex)?
    } else {
        if digits.is_empty() || digits.len() > 20 || !digits.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        digits.parse::<u64>().ok()?
    };
    #[allow(clippy::cast_possible_wrap)]
    let value = magnitude as i64;
    Some(if negative { value.wrapping_neg() } else { value })
}

/// Reads 1 to 16 hex digits.
pub(crate) fn parse_hex(digits: &str) -> Option<u64> {
    if digits.is_empty() || digits.len() > 16 {
        return None;
    }
    let mut value = 0u64;
    for byte in digits.bytes() {
        let digit = match byte {
            b'0'..=b'9' => byte - b'0',
            b'a'..=b'f' => byte - b'a' + 10,
            b'A'..=b'F' => byte - b'A' + 10,
            _ => return None,
        };
        value = (value << 4) | u64::from(digit);
    }
    Some(value)
}

fn parse_number(text: &str) -> Option<OperandKind<'_>> {
    let unsigned = text.strip_prefix(['-', '+']).unwrap_or(text);
    let negative = text.starts_with('-');
    let special = match unsigned {
        "INF" => Some(f64::INFINITY),
        "QNAN" | "NAN" | "SNAN" => Some(f64::NAN),
        _ => None,
    };
    if let Some(value) = special {
        return Some(OperandKind::Float(FloatImm(if negative { -value } else { value })));
    }
    let is_hex = unsigned.starts_with("0x") || unsigned.starts_with("0X");
    if !is_hex && unsigned.bytes().any(|b| matches!(b, b'.' | b'e' | b'E')) {
        if !unsigned
            .bytes()
            .all(|b| b.is_ascii_digit() || matches!(b, b'.' | b'e' | b'E' | b'-' | b'+'))
        {
            return None;
        }
        return text.parse::<f64>().ok().map(|value| OperandKind::Float(FloatImm(value)));
    }
    parse_int(text).map(OperandKind::Imm)
}

/// Reads `[...]` at the start of `text`; returns the address and the text after `]`.
fn parse_bracket(text: &str) -> Option<(Address, &str)> {
    let inner_start = text.strip_prefix('[')?;
    let close = byte_index(inner_start, b']')?;
    Some((parse_address(&inner_start[..close])?, &inner_start[close + 1..]))
}

/// Reads the inside of `[...]`: terms joined by `+` (or `-` before an immediate).
pub(crate) fn parse_address(inner: &str) -> Option<Address> {
    let bytes = inner.as_bytes();
    if bytes.is_empty() {
        return None;
    }
    let mut address = Address::default();
    let mut index = 0;
    loop {
        let mut negative = false;
        while index < bytes.len() && matches!(bytes[index], b'+' | b'-') {
            negative ^= bytes[index] == b'-';
            index += 1;
        }
        let start = index;
        while index < bytes.len() && !matches!(bytes[index], b'+' | b'-') {
            index += 1;
        }
        let term = &inner[start..index];
        match term.as_bytes().first() {
            None => return None,
            Some(b'0'..=b'9') => {
                let value = parse_int(term)?;
                let value = if negative { value.wrapping_neg() } else { value };
                address.offset = address.offset.wrapping_add(value);
            }
            Some(_) => {
                if negative {
                    return None;
                }
                let reg = parse_reg(term)?;
                if address.base.is_none() {
                    address.base = Some(reg);
                } else if address.index.is_none() {
                    address.index = Some(reg);
                } else {
                    return None;
                }
            }
        }
        if index >= bytes.len() {
            return Some(address);
        }
    }
}

/// Reads a prefixed memory or constant operand: `c[0x0][0x210]`, `cx[UR4][R0]`,
/// `desc[UR4][R2.64+0x4]`, `gdesc[UR8]`, `tmem[UR4]`, `idesc[UR5]`.
fn parse_prefixed(text: &str) -> Option<OperandKind<'_>> {
    let open = byte_index(text, b'[')?;
    let (word, brackets) = text.split_at(open);
    if !word.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return None;
    }
    if word == "c" || word == "cx" {
        let inner_start = &brackets[1..];
        let close = byte_index(inner_start, b']')?;
        let bank_text = &inner_start[..close];
        let bank = match parse_int(bank_text) {
            Some(bank) => ConstBank::Index(u32::try_from(bank).ok()?),
            None => ConstBank::Reg(parse_reg(bank_text)?),
        };
        let (addr, rest) = parse_bracket(&inner_start[close + 1..])?;
        let suffix = match rest.strip_prefix('.') {
            Some(suffix) if !suffix.is_empty() => Suffix::new(suffix)?,
            _ if rest.is_empty() => Suffix::NONE,
            _ => return None,
        };
        return Some(OperandKind::Const(ConstOperand { bank, addr, suffix }));
    }
    let prefix = match word {
        "desc" => MemPrefix::Desc,
        "gdesc" => MemPrefix::Gdesc,
        "tmem" => MemPrefix::Tmem,
        "idesc" => MemPrefix::Idesc,
        _ => MemPrefix::Other,
    };
    let (first, rest) = parse_bracket(brackets)?;
    if rest.is_empty() {
        return Some(OperandKind::Mem(MemOperand { prefix, desc: None, addr: first }));
    }
    let (addr, rest) = parse_bracket(rest)?;
    if !rest.is_empty() || first.index.is_some() || first.offset != 0 {
        return None;
    }
    Some(OperandKind::Mem(MemOperand { prefix, desc: first.base, addr }))
}

/// Reads `{5,4,3,2,1,0}` into a bit mask.
fn parse_set(text: &str) -> Option<u64> {
    let inner = text.strip_prefix('{')?.strip_suffix('}')?;
    let mut mask = 0u64;
    for member in inner.split(',') {
        let member = member.trim();
        if member.is_empty() {
            continue;
        }
        let value = parse_int(member)?;
        if !(0..64).contains(&value) {
            return None;
        }
        mask |= 1 << value;
    }
    Some(mask)
}

#[cfg(test)]
mod tests {
    //! Hand-written operand shapes (primer §5.4), one assertion each.

    use super::*;

    fn one(token: &str) -> Operand<'_> {
        parse_operand(token, 0)
    }

    fn reg(file: RegFile, index: u16, suffix: &str) -> OperandKind<'static> {
        OperandKind::Reg(RegRef::new(Register::new(file, index), suffix).unwrap())
    }

    const SPECIAL: u16 = Register::SPECIAL;

    #[test]
    fn registers_and_suffixes() {
        assert_eq!(one("R0").kind, reg(RegFile::R, 0, ""));
        assert_eq!(one("R255").kind, reg(RegFile::R, 255, ""));
        assert_eq!(one("RZ").kind, reg(RegFile::R, SPECIAL, ""));
        assert_eq!(one("UR4").kind, reg(RegFile::UR, 4, ""));
        assert_eq!(one("URZ").kind, reg(RegFile::UR, SPECIAL, ""));
        assert_eq!(one("R2.64").kind, reg(RegFile::R, 2, "64"));
        assert_eq!(one("RZ.U32").kind, reg(RegFile::R, SPECIAL, "U32"));
        assert_eq!(one("UR62.B3").kind, reg(RegFile::UR, 62, "B3"));
        let reuse = one("R6.reuse");
        assert_eq!(reuse.kind, reg(RegFile::R, 6, ""));
        assert!(reuse.reuse);
        let half = one("R0.reuse.H0_H0");
        assert_eq!(half.kind, reg(RegFile::R, 0, "H0_H0"));
        assert!(half.reuse);
        let negated = one("-R0.reuse.H1_H1");
        assert_eq!(negated.kind, reg(RegFile::R, 0, "H1_H1"));
        assert!(negated.neg && negated.reuse);
        let both = one("R2.64.reuse");
        assert_eq!(both.kind, reg(RegFile::R, 2, "64"));
        assert!(both.reuse);
    }

    #[test]
    fn decorations() {
        let neg = one("-R7");
        assert!(neg.neg);
        assert_eq!(neg.kind, reg(RegFile::R, 7, ""));
        let neg_rz = one("-RZ");
        assert!(neg_rz.neg && neg_rz.reg().unwrap().reg.is_zero());
        let abs = one("|R3|");
        assert!(abs.abs && !abs.neg);
        assert_eq!(abs.kind, reg(RegFile::R, 3, ""));
        let abs_reuse = one("|R0|.reuse");
        assert!(abs_reuse.abs && abs_reuse.reuse);
        let neg_abs = one("-|R4|");
        assert!(neg_abs.abs && neg_abs.neg);
        let never = one("!PT");
        assert!(never.invert);
        assert_eq!(never.kind, reg(RegFile::P, SPECIAL, ""));
        let inverted = one("!P0");
        assert!(inverted.invert);
        assert_eq!(inverted.kind, reg(RegFile::P, 0, ""));
        assert!(one("~R2").invert);
        let neg_const = one("-c[0x0][0x170]");
        assert!(neg_const.neg);
        assert!(matches!(neg_const.kind, OperandKind::Const(_)));
    }

    #[test]
    fn predicates_barriers_scoreboards() {
        assert_eq!(one("P0").kind, reg(RegFile::P, 0, ""));
        assert_eq!(one("PT").kind, reg(RegFile::P, SPECIAL, ""));
        assert_eq!(one("UP0").kind, reg(RegFile::UP, 0, ""));
        assert_eq!(one("UPT").kind, reg(RegFile::UP, SPECIAL, ""));
        assert!(one("!UPT").invert);
        assert_eq!(one("B0").kind, reg(RegFile::B, 0, ""));
        assert_eq!(one("SB0").kind, reg(RegFile::SB, 0, ""));
        assert_eq!(one("gsb0").kind, reg(RegFile::Gsb, 0, ""));
        assert_eq!(one("PR").kind, reg(RegFile::PR, SPECIAL, ""));
        assert_eq!(one("UPR").kind, reg(RegFile::UPR, SPECIAL, ""));
        assert_eq!(one("{5,4,3,2,1,0}").kind, OperandKind::Set(0b11_1111));
        assert_eq!(one("{}").kind, OperandKind::Set(0));
    }

    #[test]
    fn special_registers() {
        assert_eq!(one("SR_TID.X").kind, OperandKind::Special("SR_TID.X"));
        assert_eq!(one("SR_CgaCtaId").kind, OperandKind::Special("SR_CgaCtaId"));
        assert_eq!(one("SRZ").kind, OperandKind::Special("SRZ"));
    }

    fn mem(token: &str) -> MemOperand {
        match parse_operand(token, 0).kind {
            OperandKind::Mem(mem) => mem,
            other => panic!("{token}: {other:?}"),
        }
    }

    fn rr(file: RegFile, index: u16, suffix: &str) -> Option<RegRef> {
        RegRef::new(Register::new(file, index), suffix)
    }

    #[test]
    fn memory_operands() {
        let m = mem("[R0+UR4]");
        assert_eq!(m.prefix, MemPrefix::None);
        assert_eq!(
            (m.addr.base, m.addr.index, m.addr.offset),
            (rr(RegFile::R, 0, ""), rr(RegFile::UR, 4, ""), 0)
        );
        let m = mem("[UR4+0x8]");
        assert_eq!((m.addr.base, m.addr.index, m.addr.offset), (rr(RegFile::UR, 4, ""), None, 8));
        let m = mem("[R2.64]");
        assert_eq!(m.addr.base, rr(RegFile::R, 2, "64"));
        let m = mem("[RZ.U32+UR4]");
        assert_eq!(
            (m.addr.base, m.addr.index),
            (rr(RegFile::R, SPECIAL, "U32"), rr(RegFile::UR, 4, ""))
        );
        let m = mem("[R2.64+0x10]");
        assert_eq!(m.addr.offset, 0x10);
        let m = mem("[R0+-0x8]");
        assert_eq!(m.addr.offset, -8);
        let m = mem("[R0-0x8]");
        assert_eq!(m.addr.offset, -8);
        let m = mem("[R3.X16+UR5]");
        assert_eq!(m.addr.base, rr(RegFile::R, 3, "X16"));
        let m = mem("[0x10]");
        assert_eq!((m.addr.base, m.addr.offset), (None, 0x10));
        let m = mem("[R0+URZ]");
        assert_eq!(m.addr.index, rr(RegFile::UR, SPECIAL, ""));
        assert!(mem("[UR6]").addr.same_registers(&mem("[UR6+0x8]").addr));
        assert!(!mem("[UR6]").addr.same_location(&mem("[UR6+0x8]").addr));
        assert!(mem("[R4+URZ]").addr.same_location(&mem("[R4]").addr));
    }

    #[test]
    fn descriptors() {
        let m = mem("desc[UR4][R2.64+0x4]");
        assert_eq!(m.prefix, MemPrefix::Desc);
        assert_eq!(m.desc, rr(RegFile::UR, 4, ""));
        assert_eq!((m.addr.base, m.addr.offset), (rr(RegFile::R, 2, "64"), 4));
        let m = mem("gdesc[UR8]");
        assert_eq!((m.prefix, m.addr.base), (MemPrefix::Gdesc, rr(RegFile::UR, 8, "")));
        let m = mem("tmem[UR4]");
        assert_eq!((m.prefix, m.addr.base), (MemPrefix::Tmem, rr(RegFile::UR, 4, "")));
        let m = mem("idesc[UR5]");
        assert_eq!(m.prefix, MemPrefix::Idesc);
        let m = mem("smem[UR5+0x10]");
        assert_eq!(m.prefix, MemPrefix::Other);
    }

    fn konst(token: &str) -> ConstOperand {
        match parse_operand(token, 0).kind {
            OperandKind::Const(c) => c,
            other => panic!("{token}: {other:?}"),
        }
    }

    #[test]
    fn constant_banks() {
        let c = konst("c[0x0][0x210]");
        assert_eq!((c.bank, c.addr.offset, c.addr.base), (ConstBank::Index(0), 0x210, None));
        let c = konst("c[0x0][RZ]");
        assert_eq!(c.addr.base, rr(RegFile::R, SPECIAL, ""));
        let c = konst("c[0x4][0x8]");
        assert_eq!(c.bank, ConstBank::Index(4));
        let c = konst("cx[UR4][R0]");
        assert_eq!(c.bank, ConstBank::Reg(RegRef::plain(Register::new(RegFile::UR, 4))));
        assert_eq!(c.addr.base, rr(RegFile::R, 0, ""));
        let c = konst("c[0x0][0x160].H0_H0");
        assert_eq!(c.suffix, "H0_H0");
    }

    #[test]
    fn immediates() {
        assert_eq!(one("0x400").kind, OperandKind::Imm(0x400));
        assert_eq!(one("0xffffffff").kind, OperandKind::Imm(0xffff_ffff));
        assert_eq!(one("12").kind, OperandKind::Imm(12));
        assert_eq!(one("-0x8").kind, OperandKind::Imm(-8));
        assert_eq!(one("-1").kind, OperandKind::Imm(-1));
        assert!(!one("-0x8").neg);
        assert_eq!(one("0.5").kind, OperandKind::Float(FloatImm(0.5)));
        assert_eq!(
            one("5.9604644775390625e-08").kind,
            OperandKind::Float(FloatImm(5.960_464_477_539_063e-8))
        );
        assert_eq!(
            one("1.84467440737095516160e+19").kind,
            OperandKind::Float(FloatImm(1.844_674_407_370_955_2e19))
        );
        assert_eq!(one("+INF").kind, OperandKind::Float(FloatImm(f64::INFINITY)));
        assert_eq!(one("INF").kind, OperandKind::Float(FloatImm(f64::INFINITY)));
        assert_eq!(one("-INF").kind, OperandKind::Float(FloatImm(f64::NEG_INFINITY)));
        assert!(matches!(one("-QNAN").kind, OperandKind::Float(v) if v.0.is_nan()));
        assert_eq!(one("0xffffffffffffffff").kind, OperandKind::Imm(-1));
    }

    #[test]
    fn labels_and_fallback() {
        assert_eq!(one("`(.L_x_8)").kind, OperandKind::Label(".L_x_8"));
        assert_eq!(one("`(symbol$with$dollars)").kind, OperandKind::Label("symbol$with$dollars"));
        assert_eq!(
            one("$_Z7inlinedPKfPfi$_Z8outlinedf").kind,
            OperandKind::Label("$_Z7inlinedPKfPfi$_Z8outlinedf")
        );
        assert_eq!(one("_Z7inlinedPKfPfi").kind, OperandKind::Label("_Z7inlinedPKfPfi"));
        assert_eq!(one("mbar_cta_exchange").kind, OperandKind::Label("mbar_cta_exchange"));
        assert_eq!(one("MyKernel").kind, OperandKind::Other("MyKernel"));
        let mut ops = [one("R2"), one("MyKernel")];
        claim_symbols("RET.REL.NODEC", &mut ops);
        assert_eq!(ops[1].kind, OperandKind::Label("MyKernel"));
        let mut ops = [one("ARRAY_2D")];
        claim_symbols("TEX", &mut ops);
        assert_eq!(ops[0].kind, OperandKind::Other("ARRAY_2D"));
        assert_eq!(one("2D").kind, OperandKind::Other("2D"));
        assert_eq!(one("ARRAY_2D").kind, OperandKind::Other("ARRAY_2D"));
        assert_eq!(one("R2.").kind, OperandKind::Other("R2."));
        assert_eq!(one("[R0").kind, OperandKind::Other("[R0"));
        assert_eq!(one("[R0+R1+R2]").kind, OperandKind::Other("[R0+R1+R2]"));
        assert_eq!(one("|R0").kind, OperandKind::Other("|R0"));
    }

    #[test]
    fn relocations() {
        // The return address a `-rdc` call passes (nvdisasm), and a symbol's high half.
        let text = "32@lo((call_wait_and_read_twice + .L_x_0@srel))";
        let expected = OperandKind::Relocation("(call_wait_and_read_twice + .L_x_0@srel)");
        assert_eq!(one(text).kind, expected);
        assert_eq!(one("32@hi(symbol)").kind, OperandKind::Relocation("symbol"));
        for other in ["@lo(x)", "32@mid(x)", "32@lo()", "32@lo(x", "3a@lo(x)"] {
            assert_eq!(one(other).kind, OperandKind::Other(other), "{other}");
        }
    }

    #[test]
    fn branch_target_annotations() {
        let (ops, stop) = scan(r#"R2 -0xf0 (*"BRANCH_TARGETS .L_x_12,.L_x_13,.L_x_3"*);"#);
        assert!(matches!(stop, Stop::Semicolon(_)));
        assert_eq!(ops.len(), 3);
        assert_eq!(ops[2].kind, OperandKind::BranchTargets(".L_x_12,.L_x_13,.L_x_3"));
        let targets: Vec<&str> = ops[2].branch_targets().expect("targets").collect();
        assert_eq!(targets, [".L_x_12", ".L_x_13", ".L_x_3"]);
        assert_eq!(one(r#"(*"SpillRefill"*)"#).kind, OperandKind::Remark("SpillRefill"));
        let relocator = r#"(*"RELOCATOR OPCODE,YIELD,280"*)"#;
        assert_eq!(one(relocator).kind, OperandKind::Remark("RELOCATOR OPCODE,YIELD,280"));
        assert_eq!(one(r#"(*"BRANCH_TARGETS"#).kind, OperandKind::Other(r#"(*"BRANCH_TARGETS"#));
        assert!(one("R2").branch_targets().is_none());
    }

    fn scan(text: &str) -> (Vec<Operand<'_>>, Stop) {
        let mut out = Vec::new();
        let stop = scan_operands(text, 0, 0, &mut out);
        (out, stop)
    }

    #[test]
    fn operand_lists() {
        let (ops, stop) = scan("R0, desc[UR4][R2.64+0x4] ;  /* 0x0 */");
        assert_eq!(ops.len(), 2);
        assert_eq!(stop, Stop::Semicolon(25));
        assert_eq!(ops[1].range, TextRange::new(4, 24));
        let (ops, _) = scan("R2 `(_Z13volatile_spinPViPKdPd) ;");
        assert_eq!(ops.len(), 2);
        assert_eq!(ops[1].kind, OperandKind::Label("_Z13volatile_spinPViPKdPd"));
        let (ops, stop) = scan("{5,4,3,2,1,0} ;");
        assert_eq!((ops.len(), stop), (1, Stop::Semicolon(14)));
        let (ops, stop) = scan("[R6][R8.64]");
        assert_eq!((ops.len(), stop), (2, Stop::End));
        assert_eq!(ops[1].range, TextRange::new(4, 11));
        let (ops, _) = scan("R6,R0,+INF ");
        assert_eq!(ops[2].kind, OperandKind::Float(FloatImm(f64::INFINITY)));
        let (ops, stop) = scan("`(.L_x_4);");
        assert_eq!((ops.len(), stop), (1, Stop::Semicolon(9)));
        let (ops, stop) = scan("R1, R2 // expect: [rule]");
        assert_eq!((ops.len(), stop), (2, Stop::Comment(7)));
    }

    /// The shortcut for plain registers ends each token where the general scanner does and reads
    /// it as `parse_operand` does; tokens that only start like a register go the general way.
    #[test]
    fn plain_registers_read_as_any_operand() {
        let cases: [(&str, &[&str]); 8] = [
            ("R2, UR4, PT, RZ, P0, UP1, B3 ;", &["R2", "UR4", "PT", "RZ", "P0", "UP1", "B3"]),
            ("R1,R2\tR3 ;", &["R1", "R2", "R3"]),
            ("R6.reuse, R2.64, R2/R3 ;", &["R6.reuse", "R2.64", "R2/R3"]),
            ("R12345, RX, Rfoo, R2[0x4], PR ;", &["R12345", "RX", "Rfoo", "R2[0x4]", "PR"]),
            ("R1//c", &["R1"]),
            ("R1/*c*/", &["R1"]),
            ("UR4", &["UR4"]),
            ("P0;", &["P0"]),
        ];
        for (line, tokens) in cases {
            let (ops, _) = scan(line);
            let texts: Vec<&str> = ops.iter().map(|o| &line[o.range.to_usize()]).collect();
            assert_eq!(texts, tokens, "{line}");
            for op in &ops {
                let start = op.range.start as usize;
                assert_eq!(*op, parse_operand(&line[op.range.to_usize()], start), "{line}");
            }
        }
        assert_eq!(scan("R12345 ;").0[0].kind, OperandKind::Other("R12345"));
    }
}
