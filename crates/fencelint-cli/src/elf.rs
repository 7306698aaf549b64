//! Just enough of ELF to read a cubin's tables: the section headers and their names, named
//! sections, the function symbols, and the relocations by which one function's code names
//! another's (its calls). Only 64-bit little-endian files (every cubin) are read;
//! anything else, or a damaged table, gives `None` and the caller falls back to the tools.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;

/// The most bytes read from one table or section; larger ones are left to the tools.
const MAX_TABLE: u64 = 256 << 20;

/// One section header.
#[derive(Clone, Debug)]
pub(crate) struct Section {
    pub name: String,
    pub kind: u32,
    pub offset: u64,
    pub size: u64,
    /// `sh_link`: for the symbol table, the section of its names.
    pub link: u32,
    /// `sh_info`: for a relocation table, the section its entries patch.
    pub info: u32,
}

/// A function of a cubin with a code section of its own ([`Elf::functions`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CodeFunction {
    /// The index of its symbol (what `nvdisasm -fun` takes).
    pub(crate) index: usize,
    /// The size of its code section.
    pub(crate) size: u64,
    /// Not a kernel (no `STO_CUDA_ENTRY`): a function the code calls by name, such as a
    /// `__noinline__` function of a `-rdc` build, a device function of a debug build or a
    /// compiler helper (`__cuda_sm20_div_s64`) that ptxas kept apart.
    pub(crate) callable: bool,
    /// Its symbol's name (empty when the names cannot be read).
    pub(crate) name: String,
}

/// An open cubin and its section headers.
pub(crate) struct Elf {
    file: File,
    len: u64,
    pub sections: Vec<Section>,
}

impl Elf {
    pub(crate) fn open(path: &Path) -> Option<Self> {
        let mut file = File::open(path).ok()?;
        let len = file.metadata().ok()?.len();
        let mut header = [0u8; 64];
        file.read_exact(&mut header).ok()?;
        if &header[..4] != b"\x7fELF" || header[4] != 2 || header[5] != 1 {
            return None;
        }
        let shoff = u64_at(&header, 0x28);
        let shentsize = usize::from(u16_at(&header, 0x3a));
        let shnum = usize::from(u16_at(&header, 0x3c));
        let shstrndx = usize::from(u16_at(&header, 0x3e));
        if shentsize < 64 || shnum == 0 || shoff.checked_add((shentsize * shnum) as u64)? > len {
            return None;
        }
        let mut table = vec![0u8; shentsize * shnum];
        file.seek(SeekFrom::Start(shoff)).ok()?;
        file.read_exact(&mut table).ok()?;
        let raw: Vec<(u32, u32, u64, u64, u32, u32)> = table
            .chunks_exact(shentsize)
            .map(|h| {
                (
                    u32_at(h, 0),
                    u32_at(h, 4),
                    u64_at(h, 24),
                    u64_at(h, 32),
                    u32_at(h, 40),
                    u32_at(h, 44),
                )
            })
            .collect();
        let mut elf = Self { file, len, sections: Vec::new() };
        let names =
            raw.get(shstrndx).and_then(|&(_, _, offset, size, ..)| elf.read_at(offset, size));
        elf.sections = raw
            .into_iter()
            .map(|(name_at, kind, offset, size, link, info)| Section {
                name: names.as_deref().map(|n| c_string(n, name_at as usize)).unwrap_or_default(),
                kind,
                offset,
                size,
                link,
                info,
            })
            .collect();
        Some(elf)
    }

    /// The bytes of the first section called `name` (`None` when there is none, or it is
    /// damaged or too large to read).
    pub(crate) fn section(&mut self, name: &str) -> Option<Vec<u8>> {
        let index = self.sections.iter().position(|s| s.name == name)?;
        self.read_section(index)
    }

    /// Whether the cubin has a code section (`.text.<function>`); `None` when the section names
    /// could not be read. A cubin without one (a translation unit of device variables only)
    /// has no function to disassemble.
    pub(crate) fn has_code(&self) -> Option<bool> {
        if self.sections.iter().all(|s| s.name.is_empty()) {
            return None;
        }
        Some(self.sections.iter().any(|s| s.name == ".text" || s.name.starts_with(".text.")))
    }

    /// One function symbol per code section, with the size of the section. `nvdisasm -fun`
    /// prints the whole section of the symbol it is given, and a kernel's section also holds
    /// the subroutines that ptxas placed in it (`$__internal_0_$__cuda_sm20_div_rn_f64_full` at
    /// an offset inside the kernel's code); one symbol of each section is enough to print it,
    /// and a second one would print it again. The symbol at offset 0 (the function the section
    /// is named after) is preferred. Sorted by symbol index.
    pub(crate) fn functions(&mut self) -> Option<Vec<CodeFunction>> {
        let symbols = self.symbols()?;
        let names = self.symbol_names().unwrap_or_default();
        // For each section: (offset of the symbol in it, symbol index) of the best symbol yet.
        let mut chosen: Vec<Option<(u64, usize)>> = vec![None; self.sections.len()];
        for (index, symbol) in symbols.chunks_exact(24).enumerate() {
            let shndx = usize::from(u16_at(symbol, 6));
            if is_function(symbol) && shndx > 0 && shndx < self.sections.len() {
                let candidate = (u64_at(symbol, 8), index);
                let best = &mut chosen[shndx];
                if best.is_none_or(|best| candidate < best) {
                    *best = Some(candidate);
                }
            }
        }
        let mut out: Vec<CodeFunction> = chosen
            .iter()
            .enumerate()
            .filter_map(|(shndx, best)| {
                let (offset, index) = (*best)?;
                let section = &self.sections[shndx];
                let entry = symbols[index * 24 + 5] & 0x10 != 0; // STO_CUDA_ENTRY
                Some(CodeFunction {
                    index,
                    size: section.size,
                    callable: !entry && offset == 0 && section.name.starts_with(".text."),
                    name: c_string(&names, u32_at(&symbols[index * 24..], 0) as usize),
                })
            })
            .collect();
        out.sort_unstable_by_key(|f| f.index);
        Some(out)
    }

    /// For each of `functions` (what [`Self::functions`] gave), the symbol indices of the others
    /// among them that the relocations of its code section name, sorted: the functions it calls
    /// by name (a call of another section's code is patched when the cubin is loaded; nvdisasm
    /// names the callee from the relocation, cuobjdump prints `0x0`) or whose address it takes.
    /// Known before any disassembly. `None` when a table cannot be read.
    pub(crate) fn references(&mut self, functions: &[CodeFunction]) -> Option<Vec<Vec<usize>>> {
        let symbols = self.symbols()?;
        let section_of = |symbol: usize| {
            symbols.get(symbol * 24..symbol * 24 + 24).map(|entry| usize::from(u16_at(entry, 6)))
        };
        // The function whose code each section is: its position in `functions`.
        let mut function_of: Vec<Option<usize>> = vec![None; self.sections.len()];
        for (at, function) in functions.iter().enumerate() {
            if let Some(slot) = section_of(function.index).and_then(|s| function_of.get_mut(s)) {
                *slot = Some(at);
            }
        }
        let mut out = vec![Vec::new(); functions.len()];
        for index in 0..self.sections.len() {
            let section = &self.sections[index];
            // `SHT_RELA` entries are 24 bytes, `SHT_REL` ones 16; `r_info`'s upper half is the
            // symbol.
            let entry = match section.kind {
                4 => 24,
                9 => 16,
                _ => continue,
            };
            let target = usize::try_from(section.info).ok();
            let Some(patched) = target.and_then(|t| function_of.get(t).copied().flatten()) else {
                continue;
            };
            let table = self.read_section(index)?;
            for relocation in table.chunks_exact(entry) {
                let symbol = (u64_at(relocation, 8) >> 32) as usize;
                let named = section_of(symbol).and_then(|s| function_of.get(s).copied().flatten());
                if let Some(named) = named.filter(|&named| named != patched) {
                    out[patched].push(functions[named].index);
                }
            }
        }
        for list in &mut out {
            list.sort_unstable();
            list.dedup();
        }
        Some(out)
    }

    /// The symbol table's entries, 24 bytes each (`None` without one).
    fn symbols(&mut self) -> Option<Vec<u8>> {
        let symtab = self.symtab()?;
        self.read_section(symtab)
    }

    /// The string table of the symbols' names.
    fn symbol_names(&mut self) -> Option<Vec<u8>> {
        let symtab = self.symtab()?;
        self.read_section(self.sections[symtab].link as usize)
    }

    /// The index of the symbol table's section (`SHT_SYMTAB`).
    fn symtab(&self) -> Option<usize> {
        self.sections.iter().position(|s| s.kind == 2)
    }

    fn read_section(&mut self, index: usize) -> Option<Vec<u8>> {
        let section = self.sections.get(index)?;
        let (offset, size) = (section.offset, section.size);
        self.read_at(offset, size)
    }

    fn read_at(&mut self, offset: u64, size: u64) -> Option<Vec<u8>> {
        if offset.checked_add(size)? > self.len || size > MAX_TABLE {
            return None;
        }
        let mut bytes = vec![0u8; usize::try_from(size).ok()?];
        self.file.seek(SeekFrom::Start(offset)).ok()?;
        self.file.read_exact(&mut bytes).ok()?;
        Some(bytes)
    }
}

/// Whether a symbol table entry is a function (`STT_FUNC`).
fn is_function(symbol: &[u8]) -> bool {
    symbol[4] & 0xf == 2
}

fn c_string(table: &[u8], at: usize) -> String {
    let Some(rest) = table.get(at..) else { return String::new() };
    let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
    String::from_utf8_lossy(&rest[..end]).into_owned()
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn repo() -> std::path::PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
    }

    #[test]
    fn reads_the_debug_ptx_and_notes_of_a_lineinfo_cubin() {
        let path = repo().join("fixtures/reorder/reorder_tensormap.ptxas-13.2.78.cubin");
        let mut elf = Elf::open(&path).expect("a cubin");
        let ptx = elf.section(".nv_debug_ptx_txt").expect("built with -lineinfo");
        let text = fencelint_linter::reorder::ptx_from_debug_section(&ptx);
        let file =
            std::fs::read_to_string(repo().join("fixtures/reorder/reorder_tensormap.ptx")).unwrap();
        assert_eq!(text.lines().count(), file.lines().count());
        let note = elf.section(".note.nv.tkinfo").expect("ptxas writes its notes");
        assert_eq!(
            fencelint_linter::reorder::ptxas_version(&note).as_deref(),
            Some("ptxas 13.2.78")
        );
        assert!(elf.functions().is_some_and(|f| f.len() >= 4));
    }

    #[test]
    fn one_function_per_code_section() {
        // tcgen05.cubin's kernels hold ptxas's guardrail subroutines (`$__internal_0_$...`,
        // function symbols at an offset inside the kernel's section); `nvdisasm -fun` of such
        // a symbol prints the whole kernel, so a second symbol of a section would lint the
        // kernel twice when a large cubin is disassembled in parts.
        let path = repo().join("fixtures/compiled/sm_100a/tcgen05.cubin");
        let mut elf = Elf::open(&path).expect("a cubin");
        let code_sections = elf.sections.iter().filter(|s| s.name.starts_with(".text.")).count();
        let functions = elf.functions().expect("a symbol table");
        assert!(code_sections > 1);
        assert_eq!(functions.len(), code_sections, "{functions:?}");
        let symtab = elf.sections.iter().position(|s| s.kind == 2).unwrap();
        let (offset, size) = (elf.sections[symtab].offset, elf.sections[symtab].size);
        let symbols = elf.read_at(offset, size).unwrap();
        let internal = symbols.chunks_exact(24).filter(|s| s[4] & 0xf == 2 && u64_at(s, 8) != 0);
        assert!(internal.count() > 0, "the fixture holds subroutines inside kernels");
        for function in functions {
            let index = function.index;
            assert_eq!(u64_at(&symbols[index * 24..], 8), 0, "symbol {index} starts its section");
            assert!(!function.callable, "symbol {index}: every function of tcgen05.cu is a kernel");
        }
    }

    #[test]
    fn functions_of_their_own_that_are_not_kernels() {
        // A `-rdc` build keeps its `__noinline__` functions, each in a section of its own; the
        // release build places them in the kernels as subroutines (symbols inside the kernels'
        // sections, not at offset 0).
        let rdc = repo().join("fixtures/compiled/sm_90a/noinline_poll.rdc.cubin");
        let mut elf = Elf::open(&rdc).unwrap();
        let functions = elf.functions().unwrap();
        assert_eq!(functions.len(), 16);
        let text: u64 =
            elf.sections.iter().filter(|s| s.name.starts_with(".text.")).map(|s| s.size).sum();
        assert_eq!(functions.iter().map(|f| f.size).sum::<u64>(), text);
        let callable: Vec<&str> =
            functions.iter().filter(|f| f.callable).map(|f| f.name.as_str()).collect();
        // The `__device__` functions are callable, the eight kernels are not.
        assert!(callable.contains(&"_Z12wait_relaxedPKj"), "{callable:?}");
        assert_eq!(functions.len() - callable.len(), 8, "{callable:?}");
        let kernels = functions.iter().filter(|f| !f.callable).map(|f| f.name.as_str());
        assert!(kernels.clone().any(|name| name == "call_wait_relaxed_then_read"));
        assert!(kernels.clone().all(|name| !name.starts_with("_Z")), "{functions:?}");
        for plain in ["sm_90a/noinline_poll.cubin", "sm_100a/tcgen05.cubin"] {
            let path = repo().join("fixtures/compiled").join(plain);
            let functions = Elf::open(&path).unwrap().functions().unwrap();
            assert!(functions.iter().all(|f| !f.callable), "{plain}");
        }
    }

    #[test]
    fn relocations_name_the_functions_each_function_calls() {
        // What nvdisasm prints as `` CALL.ABS.NOINC `(callee) `` in each function's section of
        // the same cubin is what its relocations name, for every architecture.
        for arch in ["sm_80", "sm_90a", "sm_100a", "sm_120"] {
            let dir = repo().join("fixtures/compiled").join(arch);
            let mut elf = Elf::open(&dir.join("noinline_poll.rdc.cubin")).unwrap();
            let functions = elf.functions().unwrap();
            let references = elf.references(&functions).unwrap();
            let name = |index: usize| {
                functions.iter().find(|f| f.index == index).map(|f| f.name.clone()).unwrap()
            };
            let found: std::collections::BTreeMap<String, Vec<String>> = functions
                .iter()
                .zip(&references)
                .filter(|(_, calls)| !calls.is_empty())
                .map(|(f, calls)| {
                    let mut names: Vec<String> = calls.iter().map(|&k| name(k)).collect();
                    names.sort();
                    (f.name.clone(), names)
                })
                .collect();
            let listing =
                std::fs::read_to_string(dir.join("noinline_poll.rdc.nvdisasm.sass")).unwrap();
            let mut expected = std::collections::BTreeMap::<String, Vec<String>>::new();
            let mut current = String::new();
            for line in listing.lines() {
                if let Some(section) = line.strip_prefix(".text.").and_then(|l| l.strip_suffix(':'))
                {
                    section.clone_into(&mut current);
                } else if let Some((_, callee)) = line.split_once("CALL.ABS.NOINC `(") {
                    let callee = callee.split(')').next().unwrap().to_owned();
                    let calls = expected.entry(current.clone()).or_default();
                    if !calls.contains(&callee) {
                        calls.push(callee);
                        calls.sort();
                    }
                }
            }
            assert!(expected.len() >= 8, "{arch}: {expected:?}");
            assert_eq!(found, expected, "{arch}");
        }
    }

    #[test]
    fn refuses_what_is_not_a_64_bit_little_endian_elf() {
        let dir = tempfile::tempdir().unwrap();
        for (name, bytes) in [
            ("empty", &b""[..]),
            ("text", &b"not an elf file at all, but long enough for a header.............."[..]),
            ("truncated", &b"\x7fELF\x02\x01\x01"[..]),
        ] {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).unwrap();
            assert!(Elf::open(&path).is_none(), "{name}");
        }
    }

    #[test]
    fn damaged_tables_give_answers_or_none_never_a_panic() {
        // The `-rdc` cubin with bytes overwritten in its section headers, symbol table and
        // relocation tables (the places the reader trusts least), 3,000 ways.
        let path = repo().join("fixtures/compiled/sm_90a/noinline_poll.rdc.cubin");
        let original = std::fs::read(&path).unwrap();
        let elf = Elf::open(&path).unwrap();
        let tables: Vec<(u64, u64)> = elf
            .sections
            .iter()
            .filter(|s| matches!(s.kind, 2 | 4 | 9))
            .map(|s| (s.offset, s.size))
            .collect();
        let headers = (u64_at(&original, 0x28), original.len() as u64 - u64_at(&original, 0x28));
        let dir = tempfile::tempdir().unwrap();
        let damaged = dir.path().join("damaged.cubin");
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for round in 0..3_000 {
            let mut bytes = original.clone();
            let (start, len) = if round % 3 == 0 {
                headers
            } else {
                tables[(next() % tables.len() as u64) as usize]
            };
            for _ in 0..=(next() % 4) {
                let at = (start + next() % len.max(1)) as usize;
                if let Some(byte) = bytes.get_mut(at) {
                    *byte = next() as u8;
                }
            }
            std::fs::write(&damaged, &bytes).unwrap();
            let Some(mut elf) = Elf::open(&damaged) else { continue };
            if let Some(functions) = elf.functions()
                && let Some(references) = elf.references(&functions)
            {
                assert_eq!(references.len(), functions.len());
            }
        }
    }
}
