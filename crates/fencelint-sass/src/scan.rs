//! Byte-level helpers of the hot path: finding bytes (memchr's vector search) and skipping
//! blanks eight bytes at a time.

fn word(chunk: &[u8]) -> u64 {
    let mut array = [0; 8];
    array.copy_from_slice(chunk);
    u64::from_le_bytes(array)
}

/// The index of the first `needle` at or after `from`, if any (memchr's vector search).
pub(crate) fn find_byte(bytes: &[u8], from: usize, needle: u8) -> Option<usize> {
    memchr::memchr(needle, bytes.get(from..)?).map(|at| from + at)
}

/// The index of the first `a` or `b` at or after `from`, if any.
pub(crate) fn find_either(bytes: &[u8], from: usize, a: u8, b: u8) -> Option<usize> {
    memchr::memchr2(a, b, bytes.get(from..)?).map(|at| from + at)
}

/// The index of the first `needle` pair (such as `*/`) at or after `from`, if any.
pub(crate) fn find_pair(bytes: &[u8], from: usize, first: u8, second: u8) -> Option<usize> {
    let mut index = from;
    while let Some(at) = find_byte(bytes, index, first) {
        if bytes.get(at + 1) == Some(&second) {
            return Some(at);
        }
        index = at + 1;
    }
    None
}

/// The index of the first byte at or after `index` that is not a space or a tab (the length
/// when there is none).
pub fn skip_blanks(bytes: &[u8], index: usize) -> usize {
    const SPACES: u64 = u64::from_ne_bytes([b' '; 8]);
    if index >= bytes.len() {
        return index;
    }
    let mut at = index;
    // Thirty-two bytes a step through long runs (the encoding lines of a cuobjdump listing
    // start with about a hundred spaces), then eight, then one.
    while let Some(chunk) = bytes.get(at..at + 32) {
        let blank = |i: usize| word(&chunk[i..i + 8]) ^ SPACES;
        if (blank(0) | blank(8) | blank(16) | blank(24)) != 0 {
            break;
        }
        at += 32;
    }
    for chunk in bytes[at..].chunks_exact(8) {
        let other = word(chunk) ^ SPACES;
        if other != 0 {
            // Skip the leading spaces of the word; a tab is handled byte by byte below.
            at += (other.trailing_zeros() / 8) as usize;
            break;
        }
        at += 8;
    }
    while at < bytes.len() && matches!(bytes[at], b' ' | b'\t') {
        at += 1;
    }
    at
}

/// The index of the first space, tab or `;` in `bytes[from..end]` (`end` when there is none):
/// where an opcode ends. Eight bytes a step (an opcode such as `LDG.E.64.STRONG.GPU` is two or
/// three words), then one.
pub(crate) fn opcode_end(bytes: &[u8], from: usize, end: usize) -> usize {
    const ONES: u64 = u64::from_ne_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_ne_bytes([0x80; 8]);
    // The high bit of each zero byte of `x`, and perhaps of bytes above a zero byte; the
    // lowest one set is exact.
    let zeros = |x: u64| x.wrapping_sub(ONES) & !x & HIGHS;
    let end = end.min(bytes.len());
    let mut at = from;
    while let Some(chunk) = bytes.get(at..at + 8).filter(|_| at + 8 <= end) {
        let w = word(chunk);
        let found = zeros(w ^ (ONES * u64::from(b' ')))
            | zeros(w ^ (ONES * u64::from(b'\t')))
            | zeros(w ^ (ONES * u64::from(b';')));
        if found != 0 {
            return at + (found.trailing_zeros() / 8) as usize;
        }
        at += 8;
    }
    while at < end && !matches!(bytes[at], b' ' | b'\t' | b';') {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_bytes_at_every_position() {
        for len in 0..40 {
            for at in 0..len {
                let mut bytes = vec![b'a'; len];
                bytes[at] = b'\n';
                for from in 0..=len {
                    let expected = (from <= at).then_some(at);
                    assert_eq!(find_byte(&bytes, from, b'\n'), expected, "{len} {at} {from}");
                }
            }
        }
        assert_eq!(find_byte(b"\xff\x0a\x0a", 0, b'\n'), Some(1));
        assert_eq!(find_byte(b"\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0b\x0a", 0, b'\n'), Some(8));
        assert_eq!(find_pair(b"a*b*/c", 0, b'*', b'/'), Some(3));
        for len in 0..40 {
            for at in 0..len {
                for (needle, other) in [(b'"', b'\\'), (b'\\', b'"')] {
                    let mut bytes = vec![b'a'; len];
                    bytes[at] = needle;
                    let expected = Some(at);
                    assert_eq!(find_either(&bytes, 0, b'"', b'\\'), expected, "{len} {at}");
                    assert_eq!(find_either(&bytes, at + 1, needle, other), None);
                }
            }
        }
    }

    #[test]
    fn finds_the_end_of_an_opcode() {
        let naive = |bytes: &[u8], from: usize, end: usize| {
            (from..end).find(|&i| matches!(bytes[i], b' ' | b'\t' | b';')).unwrap_or(end)
        };
        // Every stop byte at every place, with bytes that differ from a stop byte by one bit
        // (`!`, `:`, `\x08`, `\xa0`, `\xbb`) and high bytes around it.
        for len in 0..26 {
            for at in 0..len {
                for stop in [b' ', b'\t', b';'] {
                    for filler in [b'A', b'!', b':', 0x08, 0xa0, 0xbb, 0xff, 0x00] {
                        let mut bytes = vec![filler; len];
                        bytes[at] = stop;
                        for from in 0..3.min(len) {
                            for end in [len, len.saturating_sub(1), at] {
                                let end = end.max(from);
                                let got = opcode_end(&bytes, from, end);
                                assert_eq!(got, naive(&bytes, from, end), "{bytes:?} {from} {end}");
                            }
                        }
                    }
                }
            }
        }
        assert_eq!(opcode_end(b"LDG.E.64.STRONG.GPU R2", 0, 22), 19);
        assert_eq!(opcode_end(b"EXIT;", 0, 5), 4);
    }

    #[test]
    fn skips_blanks() {
        // Past the 32-byte and 8-byte steps, from several starts, ending in text or at the end.
        for len in 0..150 {
            for from in 0..3.min(len + 1) {
                let mut text = " ".repeat(len);
                text.push('x');
                assert_eq!(skip_blanks(text.as_bytes(), from), len, "{len} {from}");
                let tabbed = format!("{}\t  x", " ".repeat(len));
                assert_eq!(skip_blanks(tabbed.as_bytes(), from), len + 3, "{len} {from}");
                assert_eq!(skip_blanks(" ".repeat(len).as_bytes(), from), len, "{len} {from}");
            }
        }
        assert_eq!(skip_blanks(b"   ", 0), 3);
        assert_eq!(skip_blanks(b"", 0), 0);
    }
}
