//! The grammar pieces (operands, instructions, declarations, directives) as nom parsers.
//!
//! The statement splitter in `parser` hands each piece a slice of the source; the pieces
//! borrow from it and turn slice positions into byte ranges through [`Cx`]. Comments count as
//! whitespace everywhere ([`ws`]). Recursion is bounded: operands nest at most
//! [`MAX_OPERAND_DEPTH`] levels and initializers are read with an explicit depth counter.

use fencelint_source::TextRange;
use nom::branch::alt;
use nom::bytes::complete::{tag, take_while, take_while1};
use nom::character::complete::{char, digit1};
use nom::combinator::{cut, map, opt, recognize};
use nom::error::{ContextError, ErrorKind, ParseError, context};
use nom::sequence::{delimited, pair, preceded};
use nom::{IResult, Parser};

use crate::ast::{
    Address, DeclName, Directive, FileEntry, Guard, Initializer, InlinedAt, Instruction, Label,
    Linkage, Loc, Operand, OperandKind, Target, VarDecl, Version,
};
use crate::scan::{block_comment_end, ident_end, is_ident_char, is_space, line_comment_end};

/// How deep operands may nest (`[%rd1, {%r1, %r2}]` is two levels).
pub(crate) const MAX_OPERAND_DEPTH: u32 = 8;
/// How deep initializer braces may nest (`{{1, 2}, {3, 4}}` is two levels).
pub(crate) const MAX_INITIALIZER_DEPTH: u32 = 64;

/// Turns slices of the source into byte ranges.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Cx {
    origin: usize,
    base: u32,
}

impl Cx {
    pub(crate) fn new(src: &str, base: u32) -> Self {
        Self { origin: src.as_ptr() as usize, base }
    }

    /// The offset of `slice` (which must borrow from the source) from the source start.
    pub(crate) fn offset(self, slice: &str) -> usize {
        slice.as_ptr() as usize - self.origin
    }

    /// The range from the start of `from` to the start of `to` (a later suffix).
    pub(crate) fn range(self, from: &str, to: &str) -> TextRange {
        self.span(self.offset(from), self.offset(to))
    }

    pub(crate) fn range_of(self, slice: &str) -> TextRange {
        let start = self.offset(slice);
        self.span(start, start + slice.len())
    }

    pub(crate) fn span(self, start: usize, end: usize) -> TextRange {
        TextRange::from_usize(start, end).shifted(self.base)
    }
}

/// A parse failure: where, and what was expected there.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Expected<'a> {
    pub(crate) at: &'a str,
    /// Says what was expected, for messages ("`]` closing the address"); may be empty.
    pub(crate) what: &'static str,
}

impl<'a> ParseError<&'a str> for Expected<'a> {
    fn from_error_kind(input: &'a str, _kind: ErrorKind) -> Self {
        Self { at: input, what: "" }
    }

    fn append(_input: &'a str, _kind: ErrorKind, other: Self) -> Self {
        other
    }

    /// Of two failed alternatives, keep the one that got further.
    fn or(self, other: Self) -> Self {
        if other.at.len() <= self.at.len() { other } else { self }
    }
}

impl<'a> ContextError<&'a str> for Expected<'a> {
    /// The outer context names the construct better than the lexical piece that failed.
    fn add_context(_input: &'a str, what: &'static str, mut other: Self) -> Self {
        other.what = what;
        other
    }
}

pub(crate) type PResult<'a, T> = IResult<&'a str, T, Expected<'a>>;

fn fail<'a, T>(at: &'a str, what: &'static str) -> PResult<'a, T> {
    Err(nom::Err::Error(Expected { at, what }))
}

/// Unwraps the error of a finished nom parse.
// A `map_err` adapter: taking the error by value is what `map_err` needs.
#[allow(clippy::needless_pass_by_value)]
pub(crate) fn into_expected(err: nom::Err<Expected<'_>>) -> Expected<'_> {
    match err {
        nom::Err::Error(e) | nom::Err::Failure(e) => e,
        nom::Err::Incomplete(_) => Expected { at: "", what: "more input" },
    }
}

/// Skips whitespace and comments (both kinds), never failing.
// A nom parser returns `IResult` even when it cannot fail.
#[allow(clippy::unnecessary_wraps)]
#[inline]
pub(crate) fn ws(i: &str) -> PResult<'_, ()> {
    Ok((skip_ws(i), ()))
}

/// [`ws`] as a plain function; the common case (nothing to skip) stays inline.
#[inline]
fn skip_ws(i: &str) -> &str {
    match i.as_bytes().first() {
        Some(&b) if is_space(b) || b == b'/' => skip_ws_slow(i),
        _ => i,
    }
}

fn skip_ws_slow(i: &str) -> &str {
    let bytes = i.as_bytes();
    let mut pos = 0;
    loop {
        match bytes.get(pos) {
            Some(&b) if is_space(b) => pos += 1,
            Some(b'/') if bytes.get(pos + 1) == Some(&b'/') => pos = line_comment_end(bytes, pos),
            Some(b'/') if bytes.get(pos + 1) == Some(&b'*') => {
                pos = block_comment_end(bytes, pos).0;
            }
            _ => break,
        }
    }
    &i[pos..]
}

/// Whitespace, then `c`.
fn sym<'a>(
    c: char,
    what: &'static str,
) -> impl Parser<&'a str, Output = char, Error = Expected<'a>> {
    preceded(ws, context(what, char(c)))
}

/// An identifier: `[A-Za-z_$%][A-Za-z0-9_$]*`.
pub(crate) fn ident(i: &str) -> PResult<'_, &str> {
    let end = ident_end(i.as_bytes(), 0);
    if end == 0 {
        return fail(i, "an identifier");
    }
    Ok((&i[end..], &i[..end]))
}

/// A name in an operand or guard: an identifier with an optional `.x`-style suffix
/// (`%tid.x`, `%ctaid.y`, or a vector component `V.w`).
fn name(i: &str) -> PResult<'_, &str> {
    let (rest, base) = ident(i)?;
    let bytes = rest.as_bytes();
    if bytes.first() == Some(&b'.') && bytes.get(1).is_some_and(u8::is_ascii_alphabetic) {
        let end = ident_end(bytes, 1).max(2);
        let suffix = &rest[1..end];
        let component = matches!(suffix, "x" | "y" | "z" | "w");
        if base.starts_with('%') || component {
            return Ok((&rest[end..], &i[..base.len() + end]));
        }
    }
    Ok((rest, base))
}

/// A dotted word after `.`: identifier characters and `::` qualifiers (`shared::cluster`).
fn dotted_word(i: &str) -> PResult<'_, &str> {
    recognize(pair(
        take_while1(|c: char| c.is_ascii() && is_ident_char(c as u8)),
        take_while(|c: char| c == ':' || (c.is_ascii() && is_ident_char(c as u8))),
    ))
    .parse(i)
}

/// `.word` (whitespace allowed before the dot, not after it).
fn directive_word(i: &str) -> PResult<'_, &str> {
    preceded((ws, char('.')), dotted_word).parse(i)
}

fn digits_value(digits: &str, radix: u32) -> Option<u64> {
    let mut value: u64 = 0;
    for c in digits.bytes() {
        let d = (c as char).to_digit(radix)?;
        value = value.checked_mul(u64::from(radix))?.checked_add(u64::from(d))?;
    }
    Some(value)
}

/// An unsigned integer literal: decimal, `0x` hex, `0b` binary or `0`-prefixed octal, with an
/// optional `U` suffix. Values keep their 64-bit pattern.
fn integer_literal(i: &str) -> PResult<'_, u64> {
    let bytes = i.as_bytes();
    let (radix, skip) = match bytes {
        [b'0', b'x' | b'X', ..] => (16, 2),
        [b'0', b'b' | b'B', ..] => (2, 2),
        [b'0', b'0'..=b'9', ..] => (8, 1),
        [b'0'..=b'9', ..] => (10, 0),
        _ => return fail(i, "an integer"),
    };
    let body = &i[skip..];
    let len = body.bytes().take_while(u8::is_ascii_hexdigit).count();
    let digits = &body[..len];
    if digits.is_empty() {
        return fail(body, "digits");
    }
    let Some(value) = digits_value(digits, radix) else {
        return fail(i, "an integer that fits in 64 bits");
    };
    let mut rest = &body[len..];
    if let Some(after) = rest.strip_prefix(['U', 'u']) {
        rest = after;
    }
    if rest.bytes().next().is_some_and(is_ident_char) {
        return fail(rest, "the end of the number");
    }
    Ok((rest, value))
}

/// A signed integer (`-8`, `+4`, `0x10`); the 64-bit pattern wraps like PTX's.
pub(crate) fn signed_integer(i: &str) -> PResult<'_, i64> {
    let (i, negative) = sign(i);
    let (i, value) = integer_literal(i)?;
    let value = value.cast_signed();
    Ok((i, if negative { value.wrapping_neg() } else { value }))
}

/// An optional `-` or `+`: the rest, and whether it was `-`.
fn sign(i: &str) -> (&str, bool) {
    match i.as_bytes().first() {
        Some(b'-') => (&i[1..], true),
        Some(b'+') => (&i[1..], false),
        _ => (i, false),
    }
}

fn unsigned_u32(i: &str) -> PResult<'_, u32> {
    let (rest, value) = integer_literal(i)?;
    match u32::try_from(value) {
        Ok(value) => Ok((rest, value)),
        Err(_) => fail(i, "a number below 2^32"),
    }
}

/// A number operand: an integer, an exact-bits float (`0f3F800000`, `0d...`) or a decimal
/// float (`1.5`, `1e-3`, `.5`), with an optional sign.
fn number(i: &str) -> PResult<'_, OperandKind<'_>> {
    let start = i;
    let (i, negative) = sign(i);
    let bytes = i.as_bytes();
    let exact_bits = match bytes {
        [b'0', b'f' | b'F', ..] => Some(8),
        [b'0', b'd' | b'D', ..] => Some(16),
        _ => None,
    };
    if let Some(width) = exact_bits {
        let hex = &i[2..];
        let len = hex.bytes().take_while(u8::is_ascii_hexdigit).count();
        if len != width || hex.as_bytes().get(len).copied().is_some_and(is_ident_char) {
            return fail(
                hex,
                if width == 8 { "8 hex digits after `0f`" } else { "16 hex digits after `0d`" },
            );
        }
        let bits = digits_value(&hex[..len], 16).unwrap_or(0);
        let value =
            if width == 8 { f64::from(f32::from_bits(bits as u32)) } else { f64::from_bits(bits) };
        return Ok((&hex[len..], OperandKind::Float(if negative { -value } else { value })));
    }
    // A decimal float has a `.` or an exponent after its leading digits.
    let int_len = bytes.iter().take_while(|b| b.is_ascii_digit()).count();
    let is_hex_or_bin = matches!(bytes, [b'0', b'x' | b'X' | b'b' | b'B', ..]);
    let after = bytes.get(int_len);
    let is_float = !is_hex_or_bin
        && (matches!(after, Some(b'.'))
            || (int_len > 0
                && matches!(after, Some(b'e' | b'E'))
                && matches!(bytes.get(int_len + 1), Some(b'0'..=b'9' | b'-' | b'+'))));
    if is_float {
        let (rest, text) = recognize((
            take_while(|c: char| c.is_ascii_digit()),
            opt(pair(char('.'), take_while(|c: char| c.is_ascii_digit()))),
            opt((alt((char('e'), char('E'))), opt(alt((char('-'), char('+')))), digit1)),
        ))
        .parse(i)?;
        let Ok(value) = text.parse::<f64>() else { return fail(i, "a number") };
        if rest.bytes().next().is_some_and(is_ident_char) {
            return fail(rest, "the end of the number");
        }
        return Ok((rest, OperandKind::Float(if negative { -value } else { value })));
    }
    let (rest, value) = signed_integer(start)?;
    Ok((rest, OperandKind::Integer(value)))
}

fn is_operator(b: u8) -> bool {
    matches!(b, b'+' | b'-' | b'*' | b'/' | b'%' | b'<' | b'>' | b'&' | b'|' | b'^' | b'?' | b':')
}

/// A constant expression kept as text: up to the next `,` (or closing bracket) at depth 0.
fn expression(i: &str) -> PResult<'_, &str> {
    let bytes = i.as_bytes();
    let mut depth = 0u32;
    let mut pos = 0;
    // Whether the last non-space byte ended an atom (a name, number or `)`), and whether
    // space followed it: two atoms separated only by space are not an expression.
    let mut after_atom = false;
    let mut spaced = false;
    while pos < bytes.len() {
        let b = bytes[pos];
        // `%` starts a register name when a letter follows it, else it is the modulo operator.
        let register_start =
            b == b'%' && bytes.get(pos + 1).is_some_and(|&next| next.is_ascii_alphabetic());
        let atom_byte = is_ident_char(b) || matches!(b, b'.' | b'$') || register_start;
        if atom_byte && after_atom && spaced {
            return fail(&i[pos..], "an operator between the parts of the expression");
        }
        match b {
            b'(' => depth += 1,
            b')' if depth == 0 => break,
            b')' => depth -= 1,
            b',' | b']' | b'}' | b';' if depth == 0 => break,
            b'/' if matches!(bytes.get(pos + 1), Some(b'/' | b'*')) => break,
            _ if atom_byte || is_space(b) || is_operator(b) => {}
            b'~' | b'!' => {}
            _ => return fail(&i[pos..], "an operand"),
        }
        if is_space(b) {
            spaced = true;
        } else {
            after_atom = atom_byte || b == b')';
            spaced = false;
        }
        pos += 1;
    }
    let text = i[..pos].trim_end();
    if depth != 0 || text.is_empty() {
        return fail(i, "an operand");
    }
    Ok((&i[text.len()..], text))
}

/// One operand at nesting depth `depth`.
pub(crate) fn operand(cx: Cx, i: &str, depth: u32) -> PResult<'_, Operand<'_>> {
    if depth > MAX_OPERAND_DEPTH {
        return Err(nom::Err::Failure(Expected { at: i, what: "operands nested less deeply" }));
    }
    let start = i;
    let primary = match i.as_bytes().first() {
        Some(b'[') => bracket(cx, i, depth),
        Some(b'{') => map(
            delimited(
                char('{'),
                |i| operand_list(cx, i, depth + 1, b'}'),
                sym('}', "`}` closing the vector"),
            ),
            OperandKind::Vector,
        )
        .parse(i),
        Some(b'(') => map(
            delimited(
                char('('),
                |i| operand_list(cx, i, depth + 1, b')'),
                sym(')', "`)` closing the list"),
            ),
            OperandKind::List,
        )
        .parse(i),
        Some(b'!') => map(preceded((char('!'), ws), name), OperandKind::Negated).parse(i),
        Some(b'"') => map(string_literal, OperandKind::String).parse(i),
        Some(b'-' | b'+' | b'0'..=b'9') => number(i),
        Some(b'.') if i.as_bytes().get(1).is_some_and(u8::is_ascii_digit) => number(i),
        // A section-name argument in data directives: `.b32 .debug_abbrev`.
        Some(b'.') => map(recognize(pair(char('.'), dotted_name)), OperandKind::Name).parse(i),
        Some(b'_') if !i.as_bytes().get(1).copied().is_some_and(is_ident_char) => {
            Ok((&i[1..], OperandKind::Sink))
        }
        Some(_) => named(i),
        None => fail(i, "an operand"),
    };
    match primary {
        Ok((rest, kind)) => {
            // An operator after the primary makes the whole operand an expression.
            let after = skip_ws(rest);
            let operator = match after.as_bytes() {
                [b'%', next, ..] => !next.is_ascii_alphabetic(),
                [first, ..] => is_operator(*first),
                [] => false,
            };
            if operator && let Ok((rest, text)) = expression(start) {
                return Ok((
                    rest,
                    Operand { kind: OperandKind::Expr(text), range: cx.range_of(text) },
                ));
            }
            Ok((rest, Operand { kind, range: cx.range(start, rest) }))
        }
        Err(nom::Err::Error(err)) if start.starts_with(['(', '~', '!', '-', '+']) => {
            // Last resort: a constant expression (`~1`, `(1 << 4) + 2`).
            match expression(start) {
                Ok((rest, text)) => {
                    Ok((rest, Operand { kind: OperandKind::Expr(text), range: cx.range_of(text) }))
                }
                Err(_) => Err(nom::Err::Error(err)),
            }
        }
        Err(other) => Err(other),
    }
}

/// Dotted names such as `debug_abbrev` or `nv.constant0` (after the leading dot).
fn dotted_name(i: &str) -> PResult<'_, &str> {
    take_while1(|c: char| c == '.' || (c.is_ascii() && is_ident_char(c as u8))).parse(i)
}

/// A name operand and what may follow it: `tbl[12]`, `%r0|%p0`, `generic(sym)` (an expression).
fn named(i: &str) -> PResult<'_, OperandKind<'_>> {
    let (rest, first) =
        name(i).map_err(|_| nom::Err::Error(Expected { at: i, what: "an operand" }))?;
    match rest.as_bytes().first() {
        Some(b'[') => {
            let (rest, index) = delimited(
                char('['),
                preceded(ws, cut(context("an integer index", signed_integer))),
                sym(']', "`]` closing the index"),
            )
            .parse(rest)?;
            Ok((rest, OperandKind::ArrayElement { name: first, index }))
        }
        Some(b'|') if rest.as_bytes().get(1) != Some(&b'|') => {
            let (rest, second) =
                preceded((char('|'), ws), context("a second register after `|`", name))
                    .parse(rest)?;
            Ok((rest, OperandKind::Pipe { first, second }))
        }
        Some(b'(') => {
            let (rest, text) = expression(i)?;
            Ok((rest, OperandKind::Expr(text)))
        }
        _ => Ok((rest, OperandKind::Name(first))),
    }
}

/// `[...]`: an address (`[%rd1+-8]`, `[sym]`, `[0x100]`) or a tensor address (`[%rd9, {...}]`).
fn bracket(cx: Cx, i: &str, depth: u32) -> PResult<'_, OperandKind<'_>> {
    let (inner, _) = (char('['), ws).parse(i)?;
    let first_start = inner;
    let (after_base, base) = if let Some(b'0'..=b'9' | b'-' | b'+') = inner.as_bytes().first() {
        let (rest, value) = signed_integer(inner)?;
        (rest, Err(value))
    } else {
        let (rest, base) = name(inner).map_err(|_| {
            nom::Err::Error(Expected { at: inner, what: "an address register, symbol or integer" })
        })?;
        (rest, Ok(base))
    };
    let rest = skip_ws(after_base);
    match rest.as_bytes().first() {
        Some(b']') => {
            let address = match base {
                Ok(base) => Address { base: Some(base), offset: 0 },
                Err(value) => Address { base: None, offset: value },
            };
            Ok((&rest[1..], OperandKind::Address(address)))
        }
        Some(b'+' | b'-') => {
            let negative = rest.starts_with('-');
            let (rest, offset) =
                preceded(ws, context("an integer offset", signed_integer)).parse(&rest[1..])?;
            let (rest, _) = sym(']', "`]` closing the address").parse(rest)?;
            let offset = if negative { offset.wrapping_neg() } else { offset };
            let address = match base {
                Ok(base) => Address { base: Some(base), offset },
                Err(value) => Address { base: None, offset: value.wrapping_add(offset) },
            };
            Ok((rest, OperandKind::Address(address)))
        }
        Some(b',') => {
            let kind = match base {
                Ok(name) => OperandKind::Name(name),
                Err(value) => OperandKind::Integer(value),
            };
            let mut items = vec![Operand { kind, range: cx.range(first_start, after_base) }];
            let (rest, more) =
                preceded(char(','), |i| operand_list(cx, i, depth + 1, b']')).parse(rest)?;
            items.extend(more);
            let (rest, _) = sym(']', "`]` closing the tensor address").parse(rest)?;
            Ok((rest, OperandKind::TensorAddress(items)))
        }
        _ => fail(rest, "`]`, `+offset` or `,` in the address"),
    }
}

/// Comma-separated operands up to (not including) `close`; may be empty.
fn operand_list(cx: Cx, i: &str, depth: u32, close: u8) -> PResult<'_, Vec<Operand<'_>>> {
    let mut items = Vec::new();
    let mut i = skip_ws(i);
    if i.as_bytes().first() == Some(&close) {
        return Ok((i, items));
    }
    loop {
        let (rest, item) = operand(cx, i, depth)?;
        items.push(item);
        let rest = skip_ws(rest);
        if let Some(after) = rest.strip_prefix(',') {
            i = skip_ws(after);
        } else {
            return Ok((rest, items));
        }
    }
}

/// `"..."`, returning the text between the quotes.
pub(crate) fn string_literal(i: &str) -> PResult<'_, &str> {
    let bytes = i.as_bytes();
    if bytes.first() != Some(&b'"') {
        return fail(i, "a string");
    }
    let (end, closed) = crate::scan::string_end(bytes, 0);
    if !closed {
        return Err(nom::Err::Failure(Expected { at: &i[end..], what: "`\"` closing the string" }));
    }
    Ok((&i[end..], &i[1..end - 1]))
}

/// Operands of an instruction or directive: the whole of `i` must be consumed.
pub(crate) fn operands(cx: Cx, i: &str) -> Result<Vec<Operand<'_>>, Expected<'_>> {
    let mut i = skip_ws(i);
    if i.is_empty() {
        return Ok(Vec::new());
    }
    // Most instructions have at most four operands: one allocation, no growth.
    let mut items = Vec::with_capacity(4);
    loop {
        let (rest, item) = operand(cx, i, 0).map_err(into_expected)?;
        items.push(item);
        let rest = skip_ws(rest);
        if rest.is_empty() {
            return Ok(items);
        }
        let Some(after) = rest.strip_prefix(',') else {
            return Err(Expected { at: rest, what: "`,` or `;` after an operand" });
        };
        i = skip_ws(after);
    }
}

/// `@%p1` / `@!%p1`.
fn guard(cx: Cx, i: &str) -> PResult<'_, Guard<'_>> {
    let start = i;
    let (i, _) = char('@').parse(i)?;
    let (i, negated) = preceded(ws, opt(char('!'))).parse(i)?;
    let (rest, register) =
        preceded(ws, cut(context("a predicate register after `@`", name))).parse(i)?;
    Ok((rest, Guard { register, negated: negated.is_some(), range: cx.range(start, rest) }))
}

/// The dotted opcode: a letter, then letters, digits, `_`, `$`, `.` and `::`. Also returns
/// the number of tokens (dots plus one).
fn opcode(i: &str) -> PResult<'_, (&str, usize)> {
    let bytes = i.as_bytes();
    if !bytes.first().is_some_and(u8::is_ascii_alphabetic) {
        return fail(i, "an instruction opcode");
    }
    let mut len = 1;
    let mut n_tokens = 1;
    while let Some(&b) = bytes.get(len) {
        if b == b'.' {
            n_tokens += 1;
        } else if !(is_ident_char(b) || b == b':') {
            break;
        }
        len += 1;
    }
    Ok((&i[len..], (&i[..len], n_tokens)))
}

/// One instruction statement (the text before its `;`); `range` is filled by the caller.
pub(crate) fn instruction(cx: Cx, text: &str) -> Result<Instruction<'_>, Expected<'_>> {
    let i = skip_ws(text);
    let (i, guard) = if i.starts_with('@') {
        let (rest, guard) = guard(cx, i).map_err(into_expected)?;
        (skip_ws(rest), Some(guard))
    } else {
        (i, None)
    };
    let (rest, (opcode, n_tokens)) = opcode(i).map_err(into_expected)?;
    let mut tokens = Vec::with_capacity(n_tokens);
    let mut remaining = opcode;
    loop {
        let dot = remaining.bytes().position(|b| b == b'.');
        let token = &remaining[..dot.unwrap_or(remaining.len())];
        if token.is_empty() {
            return Err(Expected { at: i, what: "a modifier after each `.` of the opcode" });
        }
        tokens.push(token);
        match dot {
            Some(dot) => remaining = &remaining[dot + 1..],
            None => break,
        }
    }
    if rest.as_bytes().first().is_some_and(|&b| !is_space(b) && b != b'/') {
        // Operands must be separated from the opcode (`bra$L1` is not valid).
        if !matches!(rest.as_bytes()[0], b'{' | b'[' | b'(' | b'!' | b'-' | b'"') {
            return Err(Expected { at: rest, what: "a space between the opcode and its operands" });
        }
    }
    let operands = operands(cx, rest)?;
    Ok(Instruction {
        guard,
        opcode,
        opcode_range: cx.range_of(opcode),
        tokens,
        operands,
        range: TextRange::default(),
    })
}

/// Whether this declared space-like word is a state space.
fn is_linkage(word: &str) -> bool {
    Linkage::from_word(word).is_some()
}

/// A variable or parameter declaration starting at its first dotted word. With `param`, one
/// name is read (commas separate parameters); otherwise a comma-separated name list and an
/// optional initializer.
pub(crate) fn var_decl(cx: Cx, i: &str, param: bool) -> PResult<'_, VarDecl<'_>> {
    let i = skip_ws(i);
    let start = i;
    let mut linkage = None;
    let mut space = None;
    let mut attrs = Vec::new();
    let mut align = None;
    let mut i = i;
    while skip_ws(i).starts_with('.') {
        let (rest, word) = directive_word(i)?;
        i = rest;
        if word == "align" {
            let (rest, value) =
                preceded(ws, context("the alignment after `.align`", integer_literal)).parse(i)?;
            align = Some(value);
            i = rest;
        } else if space.is_none() && is_linkage(word) {
            linkage = Linkage::from_word(word);
        } else if space.is_none() {
            space = Some(word);
        } else if word == "attribute" && skip_ws(i).starts_with('(') {
            let open = skip_ws(i);
            let len = balanced_parens(open);
            let attr_start = cx.offset(word) - cx.offset(start);
            let attr_end = cx.offset(open) + len - cx.offset(start);
            attrs.push(&start[attr_start..attr_end]);
            i = &open[len..];
        } else {
            attrs.push(word);
        }
    }
    let Some(space) = space else {
        return fail(i, "a state space such as `.reg` or `.param`");
    };
    let mut names = Vec::new();
    loop {
        let (rest, decl_name) = preceded(ws, |i| decl_name(cx, i)).parse(i)?;
        names.push(decl_name);
        i = rest;
        if param {
            break;
        }
        match skip_ws(i).strip_prefix(',') {
            Some(rest) => i = rest,
            None => break,
        }
    }
    let mut init = None;
    if !param && let Some(rest) = skip_ws(i).strip_prefix('=') {
        let (rest, initializer) = initializer(cx, rest)?;
        init = Some(initializer);
        i = rest;
    }
    let end = cx.offset(i);
    let range = cx.span(cx.offset(start), end);
    Ok((i, VarDecl { linkage, space, attrs, align, names, init, range }))
}

/// The length of the balanced `( ... )` group at the start of `i` (the whole text if it never
/// closes).
fn balanced_parens(i: &str) -> usize {
    let mut depth = 0usize;
    for (pos, b) in i.bytes().enumerate() {
        match b {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth == 0 {
                    return pos + 1;
                }
            }
            _ => {}
        }
    }
    i.len()
}

/// `%r<21>`, `tile[1024]`, `tbl[2][4]`, `smem[]`.
fn decl_name(cx: Cx, i: &str) -> PResult<'_, DeclName<'_>> {
    let start = i;
    let (mut i, name) = context("a declared name", ident).parse(i)?;
    let mut count = None;
    if let Some(rest) = i.strip_prefix('<') {
        let (rest, n) = preceded(ws, context("a register count", unsigned_u32)).parse(rest)?;
        let (rest, _) = sym('>', "`>` closing the register count").parse(rest)?;
        count = Some(n);
        i = rest;
    }
    let mut dims = Vec::new();
    while let Some(rest) = skip_ws(i).strip_prefix('[') {
        let (rest, dim) = preceded(ws, opt(integer_literal)).parse(rest)?;
        let (rest, _) = sym(']', "`]` closing the array size").parse(rest)?;
        dims.push(dim);
        i = rest;
    }
    Ok((i, DeclName { name, count, dims, range: cx.range(start, i) }))
}

/// `= {1, 2, {3, 4}}` (after the `=`): leaf values flattened, braces counted, not recursed.
fn initializer(cx: Cx, i: &str) -> PResult<'_, Initializer<'_>> {
    let mut i = skip_ws(i);
    let start = i;
    let mut values = Vec::new();
    let mut depth = 0u32;
    loop {
        i = skip_ws(i);
        if let Some(rest) = i.strip_prefix('{') {
            depth += 1;
            if depth > MAX_INITIALIZER_DEPTH {
                return Err(nom::Err::Failure(Expected {
                    at: i,
                    what: "initializer braces nested less deeply",
                }));
            }
            i = rest;
            continue;
        }
        if depth > 0 && i.starts_with('}') {
            // An empty list `{}` or a trailing comma.
        } else {
            let (rest, value) = operand(cx, i, 0)?;
            values.push(value);
            i = skip_ws(rest);
        }
        // After a value: `,` continues, `}` closes levels.
        loop {
            if depth == 0 {
                return Ok((i, Initializer { values, range: cx.range(start, i) }));
            }
            if let Some(rest) = i.strip_prefix('}') {
                depth -= 1;
                i = skip_ws(rest);
                continue;
            }
            if let Some(rest) = i.strip_prefix(',') {
                i = rest;
                break;
            }
            return fail(i, "`,` or `}` in the initializer");
        }
    }
}

/// `.version 9.4` (the whole line).
pub(crate) fn version(cx: Cx, i: &str) -> PResult<'_, Version<'_>> {
    let start = i;
    let (i, _) = preceded(ws, tag(".version")).parse(i)?;
    let (i, text) =
        preceded(ws, context("a version such as `9.4`", recognize((digit1, char('.'), digit1))))
            .parse(i)?;
    let (major, minor) = text.split_once('.').unwrap_or((text, "0"));
    let version = Version {
        major: major.parse().unwrap_or(u32::MAX),
        minor: minor.parse().unwrap_or(u32::MAX),
        text,
        range: cx.range(start, i),
    };
    Ok((i, version))
}

/// `.target sm_90a, texmode_independent`.
pub(crate) fn target(cx: Cx, i: &str) -> PResult<'_, Target<'_>> {
    let start = i;
    let (mut i, _) = preceded(ws, tag(".target")).parse(i)?;
    let mut names = Vec::new();
    loop {
        let (rest, word) = preceded(ws, context("a target name", ident)).parse(i)?;
        names.push(word);
        i = rest;
        match skip_ws(i).strip_prefix(',') {
            Some(rest) => i = rest,
            None => break,
        }
    }
    Ok((i, Target { names, range: cx.range(start, i) }))
}

/// `.address_size 64`.
pub(crate) fn address_size(i: &str) -> PResult<'_, u32> {
    preceded((ws, tag(".address_size"), ws), context("an address size", unsigned_u32)).parse(i)
}

/// `.file 1 "name"` with an optional `, timestamp, size`.
pub(crate) fn file(cx: Cx, i: &str) -> PResult<'_, FileEntry<'_>> {
    let start = i;
    let (i, _) = preceded(ws, tag(".file")).parse(i)?;
    let (i, id) = preceded(ws, context("a file number", unsigned_u32)).parse(i)?;
    let (i, name) = preceded(ws, context("a quoted file name", string_literal)).parse(i)?;
    let (i, extra) = opt(pair(
        preceded(sym(',', "`,`"), preceded(ws, integer_literal)),
        opt(preceded(sym(',', "`,`"), preceded(ws, integer_literal))),
    ))
    .parse(i)?;
    let (timestamp, size) = match extra {
        Some((timestamp, size)) => (Some(timestamp), size),
        None => (None, None),
    };
    Ok((i, FileEntry { id, name, timestamp, size, range: cx.range(start, i) }))
}

/// `.loc 1 42 7` with the optional `, function_name lbl+4, inlined_at 1 20 3`.
pub(crate) fn loc(cx: Cx, i: &str) -> PResult<'_, Loc<'_>> {
    let start = i;
    let (i, _) = preceded(ws, tag(".loc")).parse(i)?;
    let (i, file) = preceded(ws, context("a file number", unsigned_u32)).parse(i)?;
    let (i, line) = preceded(ws, context("a line number", unsigned_u32)).parse(i)?;
    let (mut i, column) = opt(preceded(ws, unsigned_u32)).parse(i)?;
    let mut function_name = None;
    let mut inlined_at = None;
    while let Some(rest) = skip_ws(i).strip_prefix(',') {
        let (rest, key) =
            preceded(ws, context("`function_name` or `inlined_at`", ident)).parse(rest)?;
        match key {
            "function_name" => {
                let (rest, label) = preceded(ws, context("a label", ident)).parse(rest)?;
                let (rest, offset) =
                    opt(preceded(sym('+', "`+`"), preceded(ws, signed_integer))).parse(rest)?;
                function_name = Some((label, offset.unwrap_or(0)));
                i = rest;
            }
            "inlined_at" => {
                let (rest, (file, line, column)) = (
                    preceded(ws, context("a file number", unsigned_u32)),
                    preceded(ws, context("a line number", unsigned_u32)),
                    preceded(ws, context("a column number", unsigned_u32)),
                )
                    .parse(rest)?;
                inlined_at = Some(InlinedAt { file, line, column });
                i = rest;
            }
            _ => return fail(key, "`function_name` or `inlined_at`"),
        }
    }
    let loc = Loc {
        file,
        line,
        column: column.unwrap_or(0),
        function_name,
        inlined_at,
        range: cx.range(start, i),
    };
    Ok((i, loc))
}

/// The words that make up a function header, in order.
pub(crate) struct Header<'a> {
    pub(crate) kind: crate::ast::FunctionKind,
    pub(crate) linkage: Option<Linkage>,
    pub(crate) returns: Vec<VarDecl<'a>>,
    pub(crate) name: &'a str,
    pub(crate) params: Vec<VarDecl<'a>>,
}

/// `[linkage] .entry|.func [(returns)] name [(params)]`.
pub(crate) fn function_header(cx: Cx, i: &str) -> PResult<'_, Header<'_>> {
    let mut linkage = None;
    let mut i = i;
    let kind = loop {
        let (rest, word) = context("`.entry` or `.func`", directive_word).parse(i)?;
        i = rest;
        match word {
            "entry" => break crate::ast::FunctionKind::Entry,
            "func" => break crate::ast::FunctionKind::Func,
            _ => match Linkage::from_word(word) {
                Some(found) => linkage = Some(found),
                None => return fail(word, "`.entry` or `.func`"),
            },
        }
    };
    let mut returns = Vec::new();
    if skip_ws(i).starts_with('(') {
        let (rest, list) = param_list(cx, skip_ws(i))?;
        returns = list;
        i = rest;
    }
    let (mut i, name) = preceded(ws, context("the function name", ident)).parse(i)?;
    let mut params = Vec::new();
    if skip_ws(i).starts_with('(') {
        let (rest, list) = param_list(cx, skip_ws(i))?;
        params = list;
        i = rest;
    }
    Ok((i, Header { kind, linkage, returns, name, params }))
}

/// `( .param .b32 a, .reg .b64 b )`.
pub(crate) fn param_list(cx: Cx, i: &str) -> PResult<'_, Vec<VarDecl<'_>>> {
    let (mut i, _) = char('(').parse(i)?;
    let mut params = Vec::new();
    if let Some(rest) = skip_ws(i).strip_prefix(')') {
        return Ok((rest, params));
    }
    loop {
        let (rest, param) = var_decl(cx, i, true)?;
        params.push(param);
        let rest = skip_ws(rest);
        if let Some(rest) = rest.strip_prefix(',') {
            i = rest;
        } else if let Some(rest) = rest.strip_prefix(')') {
            return Ok((rest, params));
        } else {
            return fail(rest, "`,` or `)` in the parameter list");
        }
    }
}

/// A directive with operand arguments: `.maxntid 128, 1, 1`, `.pragma "nounroll"`,
/// `.branchtargets L1, L2`. Reads the arguments greedily and stops before what cannot be an
/// operand (a `{`, `;`, or, unless `dotted_args`, the next directive). With `dotted_args`,
/// an argument may be a dotted name (`.b32 .debug_abbrev` in a section).
pub(crate) fn directive<'a>(
    cx: Cx,
    i: &'a str,
    label: Option<Label<'a>>,
    dotted_args: bool,
) -> PResult<'a, Directive<'a>> {
    let start = i;
    let (i, name) = directive_word(i)?;
    let text_start = i;
    let mut args = Vec::new();
    let mut i = i;
    let mut rest_ws = skip_ws(i);
    let starts_operand = |s: &str| {
        s.as_bytes()
            .first()
            .is_some_and(|&b| !matches!(b, b'{' | b'}' | b';' | b'#') && (dotted_args || b != b'.'))
    };
    if starts_operand(rest_ws) {
        loop {
            let (rest, arg) = operand(cx, rest_ws, 0)?;
            args.push(arg);
            i = rest;
            match skip_ws(rest).strip_prefix(',') {
                Some(after) => rest_ws = skip_ws(after),
                None => break,
            }
        }
    }
    let text_len = cx.offset(i) - cx.offset(text_start);
    let text = text_start[..text_len].trim();
    // A labelled directive's range starts at its label.
    let mut range = cx.range(start, i);
    if let Some(label) = &label {
        range.start = label.range.start;
    }
    Ok((i, Directive { label, name, args, text, range }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op(text: &str) -> OperandKind<'_> {
        let cx = Cx::new(text, 0);
        let (rest, operand) = operand(cx, text, 0).unwrap();
        assert_eq!(rest, "", "operand {text:?} left {rest:?}");
        operand.kind
    }

    #[test]
    fn numbers() {
        // Hand-written.
        assert_eq!(op("42"), OperandKind::Integer(42));
        assert_eq!(op("-8"), OperandKind::Integer(-8));
        assert_eq!(op("0x3c"), OperandKind::Integer(0x3c));
        assert_eq!(op("0X3CU"), OperandKind::Integer(0x3c));
        assert_eq!(op("017"), OperandKind::Integer(0o17));
        assert_eq!(op("0b101"), OperandKind::Integer(5));
        assert_eq!(op("0"), OperandKind::Integer(0));
        assert_eq!(op("4294967295U"), OperandKind::Integer(4_294_967_295));
        assert_eq!(op("0xFFFFFFFFFFFFFFFF"), OperandKind::Integer(-1));
        assert_eq!(op("0f3F800000"), OperandKind::Float(1.0));
        assert_eq!(op("0FBF800000"), OperandKind::Float(-1.0));
        assert_eq!(op("0d3FF0000000000000"), OperandKind::Float(1.0));
        assert_eq!(op("1.5"), OperandKind::Float(1.5));
        assert_eq!(op("1e-3"), OperandKind::Float(1e-3));
        assert_eq!(op("2.5E+2"), OperandKind::Float(250.0));
        assert_eq!(op("-0.5"), OperandKind::Float(-0.5));
    }

    #[test]
    fn bad_numbers_fail() {
        // Hand-written.
        let cx = Cx::new("0f3F80", 0);
        assert!(operand(cx, "0f3F80", 0).is_err());
        assert!(operand(Cx::new("", 0), "", 0).is_err());
        let text = "99999999999999999999999";
        assert!(operand(Cx::new(text, 0), text, 0).is_err());
    }

    #[test]
    fn names_and_special_registers() {
        // Hand-written.
        assert_eq!(op("%r1"), OperandKind::Name("%r1"));
        assert_eq!(op("%tid.x"), OperandKind::Name("%tid.x"));
        assert_eq!(op("%clock64"), OperandKind::Name("%clock64"));
        assert_eq!(op("$L__BB0_2"), OperandKind::Name("$L__BB0_2"));
        assert_eq!(op("_"), OperandKind::Sink);
        assert_eq!(op("_Z5scalefi"), OperandKind::Name("_Z5scalefi"));
        assert_eq!(op("!%p1"), OperandKind::Negated("%p1"));
        assert_eq!(op("%r0|%p0"), OperandKind::Pipe { first: "%r0", second: "%p0" });
        assert_eq!(op("tbl[12]"), OperandKind::ArrayElement { name: "tbl", index: 12 });
        assert_eq!(op("\"nounroll\""), OperandKind::String("nounroll"));
    }

    #[test]
    fn addresses() {
        // Hand-written.
        let address = |base, offset| OperandKind::Address(Address { base, offset });
        assert_eq!(op("[%rd1]"), address(Some("%rd1"), 0));
        assert_eq!(op("[%rd1+16]"), address(Some("%rd1"), 16));
        assert_eq!(op("[%rd1+-8]"), address(Some("%rd1"), -8));
        assert_eq!(op("[%rd1-8]"), address(Some("%rd1"), -8));
        assert_eq!(op("[ %rd1 + 0 ]"), address(Some("%rd1"), 0));
        assert_eq!(op("[sym]"), address(Some("sym"), 0));
        assert_eq!(op("[sym+12]"), address(Some("sym"), 12));
        assert_eq!(op("[0x100]"), address(None, 0x100));
        let OperandKind::TensorAddress(items) = op("[%rd9, {%r1, %r2}]") else { panic!() };
        assert_eq!(items.len(), 2);
        assert_eq!(items[0].kind, OperandKind::Name("%rd9"));
        assert!(matches!(&items[1].kind, OperandKind::Vector(v) if v.len() == 2));
    }

    #[test]
    fn vectors_lists_and_expressions() {
        // Hand-written.
        let OperandKind::Vector(items) = op("{%r1, _, %r2}") else { panic!() };
        assert_eq!(items[1].kind, OperandKind::Sink);
        let OperandKind::List(items) = op("(param0, param1)") else { panic!() };
        assert_eq!(items.len(), 2);
        assert_eq!(op("generic(sym)+8"), OperandKind::Expr("generic(sym)+8"));
        assert_eq!(op("(1 << 4) + 2"), OperandKind::Expr("(1 << 4) + 2"));
        assert_eq!(op("lbl+12"), OperandKind::Expr("lbl+12"));
        assert_eq!(op("~1"), OperandKind::Expr("~1"));
    }

    #[test]
    fn deep_operand_nesting_is_refused() {
        // Hand-written.
        let text = format!("{}%r1{}", "{".repeat(100), "}".repeat(100));
        assert!(operand(Cx::new(&text, 0), &text, 0).is_err());
    }

    #[test]
    fn ranges_are_offsets_into_the_source() {
        // Hand-written.
        let src = "xx [%rd1+4], yy";
        let cx = Cx::new(src, 100);
        let (_, operand) = operand(cx, &src[3..], 0).unwrap();
        assert_eq!(operand.range, TextRange::new(103, 111));
    }
}
