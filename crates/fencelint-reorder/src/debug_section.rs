//! The PTX that a `-lineinfo` cubin carries in its `.nv_debug_ptx_txt` section, and the ptxas
//! version in its notes.

/// Rebuilds PTX text from the bytes of a cubin's `.nv_debug_ptx_txt` section.
///
/// ptxas stores one NUL-terminated record per line of the PTX it assembled, with comments and
/// `.loc` directives blanked and leading white space trimmed; record *n* (from 1) is line *n*,
/// which is the line that `nvdisasm -gp` markers name. The text returned has one line per
/// record, so those line numbers stay valid. Bytes that are not UTF-8 are replaced.
pub fn ptx_from_debug_section(bytes: &[u8]) -> String {
    let body = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    let mut out = String::with_capacity(body.len() + 1);
    if bytes.is_empty() {
        return out;
    }
    for record in body.split(|&b| b == 0) {
        let text = String::from_utf8_lossy(record);
        // A record never spans lines; a stray line break would shift every later line number.
        out.extend(text.chars().map(|c| if c == '\n' || c == '\r' { ' ' } else { c }));
        out.push('\n');
    }
    out
}

/// The ptxas version recorded in a cubin (or any binary holding cubins), for example
/// `ptxas 13.2.78`.
///
/// ptxas writes its tool name and the string `Cuda compilation tools, release 13.2, V13.2.78`
/// into the `.note.nv.tkinfo` note of every cubin it produces; the first such string whose
/// note also names `ptxas` is used. Returns `None` when the bytes hold no such note.
pub fn ptxas_version(bytes: &[u8]) -> Option<String> {
    const NEEDLE: &[u8] = b"Cuda compilation tools, release ";
    let mut from = 0;
    while let Some(at) = find(&bytes[from..], NEEDLE).map(|i| i + from) {
        from = at + NEEDLE.len();
        let window = &bytes[at.saturating_sub(256)..at];
        if find(window, b"ptxas").is_none() {
            continue;
        }
        let rest = &bytes[from..bytes.len().min(from + 64)];
        let Some(v) = find(rest, b", V") else { continue };
        let version: String = rest[v + 3..]
            .iter()
            .take_while(|b| b.is_ascii_digit() || **b == b'.')
            .map(|&b| char::from(b))
            .collect();
        if version.contains('.') {
            return Some(format!("ptxas {version}"));
        }
    }
    None
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_become_lines_with_the_same_numbers() {
        let bytes = b"\0\0.version 9.2\0.target sm_90a\0\0}\0";
        let text = ptx_from_debug_section(bytes);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines, ["", "", ".version 9.2", ".target sm_90a", "", "}"]);
    }

    #[test]
    fn empty_section_gives_empty_text() {
        assert_eq!(ptx_from_debug_section(b""), "");
        assert_eq!(ptx_from_debug_section(b"\0"), "\n");
    }

    #[test]
    fn stray_line_breaks_do_not_shift_lines() {
        let text = ptx_from_debug_section(b"a\nb\0c\0");
        assert_eq!(text, "a b\nc\n");
    }

    #[test]
    fn version_from_tool_note() {
        let note = b"\x00\x00ptxas\x00Cuda compilation tools, release 13.2, V13.2.78\x00Build";
        assert_eq!(ptxas_version(note).as_deref(), Some("ptxas 13.2.78"));
        assert_eq!(ptxas_version(b"Cuda compilation tools, release 13.2, V13.2.78"), None);
        assert_eq!(ptxas_version(b"nothing"), None);
    }
}
