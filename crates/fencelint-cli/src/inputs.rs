//! Finding inputs on disk and reading them into text, with a clear error for anything unreadable.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

use fencelint_linter::InputKind;

/// Extensions searched for when a directory is given.
const TEXT_EXTENSIONS: &[&str] = &["ptx", "sass", "json"];

/// An input path and whether the user named it directly.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct InputPath {
    pub path: PathBuf,
    pub explicit: bool,
}

/// A problem with an input that is not a diagnostic in its text.
#[derive(Debug, Clone)]
pub(crate) struct InputProblem {
    pub path: PathBuf,
    pub message: String,
}

/// The path that names standard input on the command line.
pub(crate) const STDIN: &str = "-";

/// Whether `path` names standard input (`-`).
pub(crate) fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == STDIN
}

/// Whether an input is read as a stream whose length is not known before its end: standard
/// input (`-`), or a pipe, FIFO or device named on the command line (`/dev/stdin` when it is a
/// pipe, `<(nvdisasm -c x.cubin)`).
pub(crate) fn is_piped(path: &Path) -> bool {
    is_stdin(path) || fs::metadata(path).is_ok_and(|meta| !meta.is_file() && !meta.is_dir())
}

/// Expands files and directories into a sorted, de-duplicated list of inputs.
pub(crate) fn collect(paths: &[PathBuf]) -> (Vec<InputPath>, Vec<InputProblem>) {
    let mut out = BTreeSet::new();
    let mut problems = Vec::new();
    for path in paths {
        if is_stdin(path) {
            out.insert(InputPath { path: path.clone(), explicit: true });
            continue;
        }
        match fs::metadata(path) {
            Ok(meta) if meta.is_dir() => {
                let mut visited = BTreeSet::new();
                walk(path, &mut out, &mut problems, &mut visited);
            }
            Ok(_) => {
                out.insert(InputPath { path: path.clone(), explicit: true });
            }
            Err(err) => problems.push(InputProblem {
                path: path.clone(),
                message: format!("cannot read `{}`: {err}", path.display()),
            }),
        }
    }
    (out.into_iter().collect(), problems)
}

fn walk(
    dir: &Path,
    out: &mut BTreeSet<InputPath>,
    problems: &mut Vec<InputProblem>,
    visited: &mut BTreeSet<PathBuf>,
) {
    // Symlink loops end here: a directory is entered once, by its canonical path.
    let Ok(canonical) = fs::canonicalize(dir) else {
        problems.push(InputProblem {
            path: dir.to_path_buf(),
            message: format!("cannot resolve directory `{}`", dir.display()),
        });
        return;
    };
    if !visited.insert(canonical) {
        return;
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(err) => {
            problems.push(InputProblem {
                path: dir.to_path_buf(),
                message: format!("cannot read directory `{}`: {err}", dir.display()),
            });
            return;
        }
    };
    let mut children: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    children.sort();
    for child in children {
        let ext = child.extension().and_then(|e| e.to_str()).unwrap_or("");
        let named_input = TEXT_EXTENSIONS.contains(&ext);
        match fs::metadata(&child) {
            Ok(meta) if meta.is_dir() => walk(&child, out, problems, visited),
            // Only regular files are opened: opening a FIFO that nobody writes blocks for ever.
            Ok(meta) if meta.is_file() => {
                if named_input || is_binary(&child) {
                    out.insert(InputPath { path: child, explicit: false });
                }
            }
            Ok(_) if named_input => problems.push(InputProblem {
                message: format!(
                    "`{}` is not a regular file (a FIFO, socket or device); skipped",
                    child.display()
                ),
                path: child,
            }),
            Ok(_) => {}
            // A dangling or looping symbolic link with an input's name.
            Err(err) if named_input => problems.push(InputProblem {
                message: format!("cannot read `{}`: {err}", child.display()),
                path: child,
            }),
            Err(_) => {}
        }
    }
}

/// Whether a file starts like a compiled binary (ELF, CUDA fat binary or static library), judged
/// from its first bytes; such files are disassembled (see `binary.rs`) instead of read as text.
/// Only regular files are looked at: the first bytes of a pipe (`cat x.sass | fencelint check
/// /dev/stdin`) cannot be read twice, and a binary is disassembled from a file anyway.
pub(crate) fn is_binary(path: &Path) -> bool {
    use std::io::Read;
    if !fs::metadata(path).is_ok_and(|meta| meta.is_file()) {
        return false;
    }
    let mut head = Vec::with_capacity(8);
    fs::File::open(path).and_then(|f| f.take(8).read_to_end(&mut head)).is_ok()
        && crate::check::binary::is_binary_magic(&head)
}

/// A file read into text, with what is wrong with it.
pub(crate) struct ReadInput {
    pub text: String,
    pub kind: Option<InputKind>,
    /// An error that stops the file from being linted (the text is then empty or partial).
    pub fatal: Option<(u32, String)>,
    /// An error that is reported while the file is still linted (invalid UTF-8).
    pub warning: Option<(u32, String)>,
}

/// Reads one input and decides what it is.
pub(crate) fn read(input: &InputPath) -> ReadInput {
    let bytes = match fs::read(&input.path) {
        Ok(bytes) => bytes,
        Err(err) => {
            return ReadInput {
                text: String::new(),
                kind: None,
                fatal: Some((0, format!("cannot read file: {err}"))),
                warning: None,
            };
        }
    };
    classify(&input.path, bytes, input.explicit)
}

/// A piped input (see [`is_piped`]) after its first bytes were read.
pub(crate) enum Piped {
    /// The whole input, read: it ended before `min` bytes, or it is not a SASS listing (PTX is
    /// lowered whole).
    Whole(ReadInput),
    /// A SASS listing of `min` bytes or more: the bytes read so far, then the rest of the
    /// stream, to be linted as it is read (`stream::lint_listing`) in bounded memory.
    Listing(Box<dyn std::io::BufRead>),
}

/// Reads a piped input up to `min` bytes and decides how to lint it: a longer SASS listing is
/// streamed (a `cuobjdump -sass` of a large cubin piped in is gigabytes), anything else is read
/// whole.
pub(crate) fn read_piped(input: &InputPath, min: u64) -> Piped {
    use std::io::Read;
    // The first 64 KiB tell a listing (as for a file, `stream::should_stream`).
    const DETECT: usize = 64 << 10;
    let failed = |err: std::io::Error| {
        Piped::Whole(ReadInput {
            text: String::new(),
            kind: None,
            fatal: Some((0, format!("cannot read file: {err}"))),
            warning: None,
        })
    };
    let mut source: Box<dyn Read> = if is_stdin(&input.path) {
        Box::new(std::io::stdin())
    } else {
        match fs::File::open(&input.path) {
            Ok(file) => Box::new(file),
            Err(err) => return failed(err),
        }
    };
    let mut head = Vec::new();
    if let Err(err) = source.by_ref().take(min.max(DETECT as u64)).read_to_end(&mut head) {
        return failed(err);
    }
    if (head.len() as u64) < min {
        return Piped::Whole(classify(&input.path, head, input.explicit));
    }
    let first = &head[..head.len().min(DETECT)];
    let listing = !first.contains(&0)
        && matches!(
            fencelint_linter::detect(&String::from_utf8_lossy(first)),
            Some(InputKind::Sass(_))
        );
    if listing {
        let rest = std::io::Cursor::new(head).chain(source);
        return Piped::Listing(Box::new(std::io::BufReader::with_capacity(1 << 20, rest)));
    }
    if let Err(err) = source.read_to_end(&mut head) {
        return failed(err);
    }
    Piped::Whole(classify(&input.path, head, input.explicit))
}

pub(crate) fn classify(path: &Path, bytes: Vec<u8>, explicit: bool) -> ReadInput {
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    if bytes.is_empty() {
        return ReadInput {
            text: String::new(),
            kind: None,
            fatal: Some((0, "empty file: expected PTX or SASS text".to_owned())),
            warning: None,
        };
    }
    if let Some(nul) = memchr_nul(&bytes) {
        let what = if bytes.starts_with(b"\x7fELF") {
            "an ELF binary (cubin, `.o` or `.so`)"
        } else if bytes.starts_with(crate::check::binary::AR_MAGIC) {
            "a static library (`ar` archive)"
        } else if bytes.starts_with(b"BC\xc0\xde") {
            // NVSHMEM and libdevice ship device code as bitcode for link-time optimisation.
            "LLVM bitcode, which fencelint does not read: compile it to PTX \
             (`llc -mtriple=nvptx64-nvidia-cuda -mcpu=sm_90`) and lint the PTX"
        } else {
            "binary data"
        };
        let text = String::from_utf8_lossy(&bytes[..nul]).into_owned();
        // A binary read from a pipe: the tools that disassemble it need a file.
        let piped = crate::check::binary::is_binary_magic(&bytes)
            && !fs::metadata(path).is_ok_and(|meta| meta.is_file());
        let hint =
            if piped { "; binaries are disassembled from a file: pass its path" } else { "" };
        return ReadInput {
            text,
            kind: None,
            fatal: Some((
                u32::try_from(nul).unwrap_or(u32::MAX),
                format!(
                    "not PTX or SASS text: the file holds {what} (NUL byte at offset {nul}){hint}"
                ),
            )),
            warning: None,
        };
    }
    let (text, warning) = match String::from_utf8(bytes) {
        Ok(text) => (text, None),
        Err(err) => {
            let at = err.utf8_error().valid_up_to();
            let text = String::from_utf8_lossy(err.as_bytes()).into_owned();
            let message = format!(
                "invalid UTF-8 at byte {at}; the invalid bytes were replaced and the rest was linted"
            );
            (text, Some((u32::try_from(at).unwrap_or(u32::MAX), message)))
        }
    };
    let kind = fencelint_linter::detect(&text).or_else(|| (ext == "ptx").then_some(InputKind::Ptx));
    let fatal = match kind {
        Some(_) => None,
        None if explicit || ext != "json" => Some((
            0,
            "not recognised as PTX, `cuobjdump -sass`, `nvdisasm` text or `nvdisasm -json` output"
                .to_owned(),
        )),
        None => None,
    };
    ReadInput { text, kind, fatal, warning }
}

fn memchr_nul(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(0, bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory search never opens a FIFO (that blocks for ever when nobody writes to it)
    /// and names a looping link instead of skipping it silently.
    #[test]
    fn a_search_reports_fifos_and_looping_links_without_opening_them() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("pipe.ptx");
        let other_fifo = dir.path().join("pipe");
        for path in [&fifo, &other_fifo] {
            let status = std::process::Command::new("mkfifo").arg(path).status().unwrap();
            assert!(status.success());
        }
        let link = dir.path().join("self.ptx");
        std::os::unix::fs::symlink("self.ptx", &link).unwrap();
        fs::write(dir.path().join("k.ptx"), ".version 8.5\n").unwrap();
        let (inputs, problems) = collect(&[dir.path().to_path_buf()]);
        assert_eq!(inputs.len(), 1, "{inputs:?}");
        let named: Vec<_> = problems.iter().map(|p| p.path.clone()).collect();
        assert_eq!(named, [fifo, link], "{problems:?}");
        assert!(problems[0].message.contains("not a regular file"), "{problems:?}");
    }
}
