//! Byte-level scanning: trivia, statement ends and line ends, without allocation.
//!
//! Every function here looks at each byte a bounded number of times and only ever stops on an
//! ASCII byte, so the offsets it returns are always `char` boundaries of the source.

/// Byte classes, looked up in one table: identifier start, identifier character, space.
const IDENT_START: u8 = 1;
const IDENT_CHAR: u8 = 2;
const SPACE: u8 = 4;

static CLASSES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 256 {
        let byte = b as u8;
        if byte.is_ascii_alphabetic() || byte == b'_' || byte == b'$' {
            table[b] |= IDENT_START | IDENT_CHAR;
        }
        if byte.is_ascii_digit() {
            table[b] |= IDENT_CHAR;
        }
        if matches!(byte, b' ' | b'\t' | b'\r' | b'\n' | b'\x0b' | b'\x0c') {
            table[b] |= SPACE;
        }
        b += 1;
    }
    table[b'%' as usize] |= IDENT_START;
    table
};

/// Whether `b` may start an identifier (`[A-Za-z_$%]`).
#[inline]
pub(crate) fn is_ident_start(b: u8) -> bool {
    CLASSES[b as usize] & IDENT_START != 0
}

/// Whether `b` may continue an identifier (`[A-Za-z0-9_$]`).
#[inline]
pub(crate) fn is_ident_char(b: u8) -> bool {
    CLASSES[b as usize] & IDENT_CHAR != 0
}

#[inline]
pub(crate) fn is_space(b: u8) -> bool {
    CLASSES[b as usize] & SPACE != 0
}

/// The offset just past the next character at `pos` (which must be a char boundary).
pub(crate) fn next_char(src: &str, pos: usize) -> usize {
    src[pos..].chars().next().map_or(src.len(), |c| pos + c.len_utf8())
}

/// The end of the identifier that starts at `pos` (equal to `pos` when none starts there).
pub(crate) fn ident_end(bytes: &[u8], pos: usize) -> usize {
    if pos >= bytes.len() || !is_ident_start(bytes[pos]) {
        return pos;
    }
    let mut i = pos + 1;
    while i < bytes.len() && is_ident_char(bytes[i]) {
        i += 1;
    }
    i
}

/// The offset of the `\n` that ends the line comment starting at `pos` (or the end of input).
pub(crate) fn line_comment_end(bytes: &[u8], pos: usize) -> usize {
    let mut i = pos;
    while i < bytes.len() && bytes[i] != b'\n' {
        i += 1;
    }
    i
}

/// The offset past the `*/` that ends the block comment starting at `pos`, and whether it was
/// terminated (an unterminated comment runs to the end of input).
pub(crate) fn block_comment_end(bytes: &[u8], pos: usize) -> (usize, bool) {
    let mut i = pos + 2;
    while i + 1 < bytes.len() {
        if bytes[i] == b'*' && bytes[i + 1] == b'/' {
            return (i + 2, true);
        }
        i += 1;
    }
    (bytes.len(), false)
}

/// The offset past the string literal starting at `pos` (at a `"`), and whether it was closed.
/// Strings do not span lines: an unclosed string stops before the line break.
pub(crate) fn string_end(bytes: &[u8], pos: usize) -> (usize, bool) {
    let mut i = pos + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => return (i + 1, true),
            b'\\' if i + 1 < bytes.len() && bytes[i + 1] != b'\n' => i += 2,
            b'\n' => return (i, false),
            _ => i += 1,
        }
    }
    (bytes.len(), false)
}

/// What [`skip_trivia`] met on the way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Trivia {
    /// The start of a block comment that never ends, if one was met.
    pub(crate) unterminated_comment: Option<usize>,
}

/// Skips whitespace, comments and `#` preprocessor lines from `pos`. `on_line_comment` sees the
/// range of each `//` comment, so that callers can notice `// begin inline asm` markers.
pub(crate) fn skip_trivia(
    bytes: &[u8],
    mut pos: usize,
    mut on_line_comment: impl FnMut(usize, usize),
) -> (usize, Trivia) {
    let mut trivia = Trivia::default();
    let mut line_start = pos == 0 || bytes.get(pos.wrapping_sub(1)) == Some(&b'\n');
    while pos < bytes.len() {
        match bytes[pos] {
            b'\n' => {
                line_start = true;
                pos += 1;
            }
            b if is_space(b) => pos += 1,
            b'/' if bytes.get(pos + 1) == Some(&b'/') => {
                let end = line_comment_end(bytes, pos);
                on_line_comment(pos, end);
                pos = end;
            }
            b'/' if bytes.get(pos + 1) == Some(&b'*') => {
                let (end, closed) = block_comment_end(bytes, pos);
                if !closed {
                    trivia.unterminated_comment = Some(pos);
                }
                pos = end;
                line_start = false;
            }
            b'#' if line_start => pos = line_comment_end(bytes, pos),
            _ => break,
        }
    }
    (pos, trivia)
}

/// What a statement-end scan watches for at the start of each continuation line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LineChecks {
    /// Nothing: only `;`, an unbalanced `}` and the end of input end the statement.
    None,
    /// A line that starts a directive, guard or label ends the statement.
    Statements,
    /// Also a line that starts with `{` (for instructions).
    StatementsAndBraces,
}

/// Where a statement ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct StatementEnd {
    /// The end of the statement text (the `;` excluded).
    pub(crate) end: usize,
    /// Where scanning resumes (past the `;` when there is one).
    pub(crate) next: usize,
    /// Whether a `;` ended the statement.
    pub(crate) terminated: bool,
    /// The start of an unterminated block comment met inside the statement, if any.
    pub(crate) unterminated_comment: Option<usize>,
}

/// The bytes that [`statement_end`] must look at when not at the start of a line.
static STATEMENT_SPECIAL: [bool; 256] = {
    let mut table = [false; 256];
    table[b';' as usize] = true;
    table[b'\n' as usize] = true;
    table[b'/' as usize] = true;
    table[b'"' as usize] = true;
    table[b'{' as usize] = true;
    table[b'}' as usize] = true;
    table
};

/// Skips bytes that [`statement_end`] can ignore, eight at a time where possible.
fn skip_plain(bytes: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    // Whether any byte of `word` equals `b` (the classic zero-byte test).
    let has = |word: u64, b: u8| {
        let x = word ^ (ONES * u64::from(b));
        x.wrapping_sub(ONES) & !x & HIGHS
    };
    while let Some(chunk) = bytes.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().unwrap_or([0; 8]));
        let special = has(word, b';')
            | has(word, b'\n')
            | has(word, b'/')
            | has(word, b'"')
            | has(word, b'{')
            | has(word, b'}');
        if special != 0 {
            break;
        }
        i += 8;
    }
    while i < bytes.len() && !STATEMENT_SPECIAL[bytes[i] as usize] {
        i += 1;
    }
    i
}

/// Finds the `;` that ends the statement starting at `pos`, skipping comments and strings.
///
/// The statement also ends, unterminated, before a `}` that closes an enclosing scope, and at
/// the end of input. With line checks, a continuation line that starts with something that
/// can only begin a new statement (a directive, a guard, a label, and for instructions a `{`)
/// ends it too, so that one missing `;` costs one statement and not the rest of the function.
pub(crate) fn statement_end(bytes: &[u8], pos: usize, checks: LineChecks) -> StatementEnd {
    let line_checks = checks != LineChecks::None;
    let brace_checks = checks == LineChecks::StatementsAndBraces;
    let mut i = pos;
    let mut depth = 0u32;
    let mut at_line_start = false;
    let mut unterminated_comment = None;
    let stop = |end: usize, unterminated_comment| StatementEnd {
        end,
        next: end,
        terminated: false,
        unterminated_comment,
    };
    while i < bytes.len() {
        if !at_line_start {
            // Fast path: only a few bytes change the state away from a line start.
            i = skip_plain(bytes, i);
            if i >= bytes.len() {
                break;
            }
        }
        let b = bytes[i];
        match b {
            b';' => {
                return StatementEnd {
                    end: i,
                    next: i + 1,
                    terminated: true,
                    unterminated_comment,
                };
            }
            b'\n' => {
                at_line_start = true;
                i += 1;
                continue;
            }
            b' ' | b'\t' | b'\r' => {
                i += 1;
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = line_comment_end(bytes, i);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                let (end, closed) = block_comment_end(bytes, i);
                if !closed {
                    unterminated_comment = Some(i);
                }
                i = end;
                continue;
            }
            b'"' => {
                let (end, closed) = string_end(bytes, i);
                if !closed {
                    // Strings do not span lines: the statement is broken; end it here.
                    return stop(end, unterminated_comment);
                }
                i = end;
                at_line_start = false;
                continue;
            }
            b'{' => {
                if at_line_start && brace_checks && depth == 0 && !opens_vector_operand(bytes, i) {
                    return stop(i, unterminated_comment);
                }
                depth += 1;
            }
            b'}' => {
                if depth == 0 {
                    return stop(i, unterminated_comment);
                }
                depth -= 1;
            }
            _ => {
                if at_line_start && line_checks && depth == 0 && starts_statement(bytes, i) {
                    return stop(i, unterminated_comment);
                }
            }
        }
        at_line_start = false;
        i += 1;
    }
    stop(bytes.len(), unterminated_comment)
}

/// Whether the `{` at `pos`, first on its line, opens a vector operand (`{%r1, %r2}`, `{a, b}`)
/// and not a scope: an instruction may continue on the next lines with its operands, as
/// cuBLASLt's `mma.sync` do (`mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32` alone on
/// a line, then `{%r2705, %r2704, %r2703, %r2702},` on the next). A scope's `{` is followed
/// by the end of the line, a comment, a directive or an instruction, never by a register and
/// a `,` or `}`.
fn opens_vector_operand(bytes: &[u8], pos: usize) -> bool {
    let mut i = pos + 1;
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t') {
        i += 1;
    }
    match bytes.get(i) {
        Some(b'%' | b'-' | b'0'..=b'9') => true,
        Some(&b) if is_ident_start(b) => {
            let mut j = ident_end(bytes, i);
            while j < bytes.len() && matches!(bytes[j], b' ' | b'\t') {
                j += 1;
            }
            matches!(bytes.get(j), Some(b',' | b'}'))
        }
        _ => false,
    }
}

/// Whether the text at `pos` (first on its line) can only be the start of a new statement.
fn starts_statement(bytes: &[u8], pos: usize) -> bool {
    match bytes[pos] {
        b'@' | b'#' => true,
        b'.' => bytes.get(pos + 1).is_some_and(u8::is_ascii_alphabetic),
        _ => label_end(bytes, pos).is_some(),
    }
}

/// When a label (`name:`, not `name::`) starts at `pos`, the offset past its `:`.
pub(crate) fn label_end(bytes: &[u8], pos: usize) -> Option<usize> {
    let end = ident_end(bytes, pos);
    if end == pos {
        return None;
    }
    let mut i = end;
    while i < bytes.len() && matches!(bytes[i], b' ' | b'\t') {
        i += 1;
    }
    (bytes.get(i) == Some(&b':') && bytes.get(i + 1) != Some(&b':')).then_some(i + 1)
}

/// The end of the line that starts at `pos`, for line-terminated directives (`.loc`, `.file`,
/// `.version`...). Block comments and strings are skipped; a block comment that spans lines
/// extends the line.
pub(crate) fn line_end(bytes: &[u8], pos: usize) -> usize {
    let mut i = pos;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' => return i,
            b'/' if bytes.get(i + 1) == Some(&b'/') => return line_comment_end(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = block_comment_end(bytes, i).0,
            b'"' => i = string_end(bytes, i).0,
            _ => i += 1,
        }
    }
    i
}

/// The end of one data line in a `.section` block: the line break, `;` or `}` that ends it,
/// whichever comes first outside comments and strings (a line comment ends the line).
pub(crate) fn data_line_end(bytes: &[u8], pos: usize) -> usize {
    let mut i = pos;
    while i < bytes.len() {
        match bytes[i] {
            b'\n' | b';' | b'}' => return i,
            b'/' if bytes.get(i + 1) == Some(&b'/') => return line_comment_end(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'*') => i = block_comment_end(bytes, i).0,
            b'"' => i = string_end(bytes, i).0,
            _ => i += 1,
        }
    }
    i
}

/// The offset past the `}` that balances the `{` at `pos`, skipping comments and strings
/// (the end of input when it is never balanced).
pub(crate) fn balanced_block_end(bytes: &[u8], pos: usize) -> usize {
    let mut depth = 0usize;
    let mut i = pos;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => depth += 1,
            b'}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            b'/' if bytes.get(i + 1) == Some(&b'/') => {
                i = line_comment_end(bytes, i);
                continue;
            }
            b'/' if bytes.get(i + 1) == Some(&b'*') => {
                i = block_comment_end(bytes, i).0;
                continue;
            }
            b'"' => {
                i = string_end(bytes, i).0;
                continue;
            }
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

/// The end of an unparsable stretch at module scope: the next `;` (included), line break,
/// or brace, whichever comes first; always past `pos`.
pub(crate) fn recovery_end(src: &str, pos: usize) -> usize {
    let bytes = src.as_bytes();
    let mut i = pos;
    while i < bytes.len() {
        match bytes[i] {
            b';' => return i + 1,
            b'\n' | b'{' | b'}' => break,
            b'"' => {
                i = string_end(bytes, i).0;
                continue;
            }
            b'/' if matches!(bytes.get(i + 1), Some(b'/' | b'*')) => break,
            _ => {}
        }
        i += 1;
    }
    if i == pos { next_char(src, pos) } else { i }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statement_end_skips_comments_and_strings() {
        // Hand-written.
        let src = b"mov.u32 %r1, /* ; */ 2; // ;\n";
        let end = statement_end(src, 0, LineChecks::StatementsAndBraces);
        assert!(end.terminated);
        assert_eq!(&src[..end.end], b"mov.u32 %r1, /* ; */ 2");
    }

    #[test]
    fn statement_end_stops_before_closing_brace_and_new_line_statements() {
        // Hand-written.
        assert_eq!(statement_end(b"ret\n}", 0, LineChecks::StatementsAndBraces).end, 4);
        assert_eq!(
            statement_end(b"mov.u32 %r1, 2\n@%p1 bra L;", 0, LineChecks::StatementsAndBraces).end,
            15
        );
        assert_eq!(
            statement_end(b"mov.u32 %r1, 2\nL1: ret;", 0, LineChecks::StatementsAndBraces).end,
            15
        );
        assert_eq!(
            statement_end(b"mov.u32 %r1, 2\n.loc 1 2 3", 0, LineChecks::StatementsAndBraces).end,
            15
        );
        let split_call = b"call.uni (retval0),\n_Z1f,\n(\nparam0\n);";
        assert!(statement_end(split_call, 0, LineChecks::StatementsAndBraces).terminated);
        // A scope opened on the next line still ends an unterminated statement.
        assert_eq!(statement_end(b"ret\n{\n", 0, LineChecks::StatementsAndBraces).end, 4);
        assert_eq!(
            statement_end(b"ret\n{ .reg .pred p;", 0, LineChecks::StatementsAndBraces).end,
            4
        );
        assert_eq!(
            statement_end(b"ret\n{ mov.u32 a, b; }", 0, LineChecks::StatementsAndBraces).end,
            4
        );
    }

    #[test]
    fn vector_operands_may_start_a_continuation_line() {
        // The shape of cuBLASLt 13.10's sm_120 PTX (hand-written here).
        let mma = b"mma.sync.aligned.m16n8k32.row.col.f32.e5m2.e4m3.f32 \n{%r1, %r2, %r3, %r4}, \n\
            {%r5, %r6, %r7, %r8}, \n{%r9, %r10}, \n{%r11, %r12, %r13, %r14};";
        let end = statement_end(mma, 0, LineChecks::StatementsAndBraces);
        assert!(end.terminated);
        assert_eq!(end.end, mma.len() - 1);
        let named = b"mov.b64 %rd1,\n{ lo, hi };";
        assert!(statement_end(named, 0, LineChecks::StatementsAndBraces).terminated);
        let negative = b"mov.b64 %rd1,\n{-1, 0};";
        assert!(statement_end(negative, 0, LineChecks::StatementsAndBraces).terminated);
    }

    #[test]
    fn labels_are_not_scoped_names() {
        // Hand-written.
        assert_eq!(label_end(b"$L__BB0_1:", 0), Some(10));
        assert_eq!(label_end(b"WAIT :", 0), Some(6));
        assert_eq!(label_end(b"tcgen05.wait::ld", 0), None);
        assert_eq!(label_end(b"a::b", 0), None);
    }
}
