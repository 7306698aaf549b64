//! Symbolic addresses: "the same flag", "the same mbarrier", seen through moves, constant adds,
//! `cvta` and `mapa`.

use fencelint_ir::{AddrBase, Address, InstId, InstKind, Name, Reg, Space, ValueOp};

use crate::FunctionAnalysis;

/// What an address is ultimately computed from.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AddrRoot {
    /// The value of a kernel parameter (a pointer passed in).
    Param(Name),
    /// The address of a named variable (`.shared`, `.global`) or a parameter's own slot.
    Symbol(Name),
    /// An absolute constant address.
    Absolute(i64),
    /// The result of this instruction, which the analysis does not see through.
    Def(InstId),
    /// A register with several reaching definitions, or none (named for messages).
    Unknown(Reg),
}

/// A canonical address: root, constant offset, and whether `mapa` moved it to another CTA.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct AddrKey {
    pub root: AddrRoot,
    pub offset: i64,
    /// The address went through `mapa`: it names the same object in a peer CTA.
    pub mapped: bool,
}

impl AddrKey {
    /// Whether two keys certainly name the same location.
    pub fn same_as(&self, other: &Self) -> bool {
        !matches!(self.root, AddrRoot::Unknown(_)) && self == other
    }

    /// Whether two keys name the same object, ignoring `mapa` (a local barrier and its mapped
    /// remote view).
    pub fn same_object(&self, other: &Self) -> bool {
        !matches!(self.root, AddrRoot::Unknown(_))
            && self.root == other.root
            && self.offset == other.offset
    }
}

const MAX_DEPTH: usize = 64;

impl FunctionAnalysis<'_> {
    /// The canonical form of an address operand used by instruction `at`.
    pub fn address_key(&self, at: InstId, address: &Address) -> AddrKey {
        match &address.base {
            AddrBase::Symbol(name) => AddrKey {
                root: AddrRoot::Symbol(name.clone()),
                offset: address.offset,
                mapped: false,
            },
            AddrBase::Absolute => {
                AddrKey { root: AddrRoot::Absolute(address.offset), offset: 0, mapped: false }
            }
            AddrBase::Reg(reg) => {
                let mut key = self.value_key(at, *reg);
                key.offset = key.offset.wrapping_add(address.offset);
                key
            }
            AddrBase::Complex(regs) => AddrKey {
                root: AddrRoot::Unknown(regs.first().copied().unwrap_or(Reg(u32::MAX))),
                offset: address.offset,
                mapped: false,
            },
        }
    }

    /// Whether instruction `id` has a memory operand ([`fencelint_ir::Inst::address`]) and it
    /// certainly names the location `key` names ([`AddrKey::same_as`]). The instruction's key
    /// is computed once and kept by instruction: walks test every load they pass against a
    /// flag.
    pub fn inst_address_is(&self, id: InstId, key: &AddrKey) -> bool {
        self.with_inst_key(id, |known| known.same_as(key))
    }

    /// Whether instruction `id` has a memory operand and it certainly starts inside the `bytes`
    /// bytes that `key` starts: a read of part of a flag (libcu++ reads a flag that may be in
    /// local memory a byte at a time). Keys are kept as for [`Self::inst_address_is`].
    pub fn inst_address_within(&self, id: InstId, key: &AddrKey, bytes: i64) -> bool {
        self.with_inst_key(id, |known| {
            !matches!(known.root, AddrRoot::Unknown(_))
                && known.root == key.root
                && known.mapped == key.mapped
                && (key.offset..key.offset.saturating_add(bytes)).contains(&known.offset)
        })
    }

    /// `test` of the key of instruction `id`'s memory operand (false when it has none).
    fn with_inst_key(&self, id: InstId, test: impl FnOnce(&AddrKey) -> bool) -> bool {
        let Some(address) = &self.func.inst(id).address else { return false };
        if let Some(Some(known)) = self.inst_keys.borrow().get(id.index()) {
            return test(known);
        }
        let computed = self.address_key(id, address);
        let answer = test(&computed);
        let mut keys = self.inst_keys.borrow_mut();
        if keys.len() != self.func.insts.len() {
            keys.resize(self.func.insts.len(), None);
        }
        keys[id.index()] = Some(computed);
        answer
    }

    /// The canonical value of `reg` as read by instruction `at`.
    pub fn value_key(&self, at: InstId, reg: Reg) -> AddrKey {
        if let Some(key) = self.value_keys.borrow().get(&(at, reg)) {
            return key.clone();
        }
        let key = self.compute_value_key(at, reg);
        self.value_keys.borrow_mut().insert((at, reg), key.clone());
        key
    }

    fn compute_value_key(&self, at: InstId, reg: Reg) -> AddrKey {
        let mut offset = 0i64;
        let mut mapped = false;
        let (mut at, mut reg) = (at, reg);
        for _ in 0..MAX_DEPTH {
            let reach = self.reaching_defs(at, reg);
            let [def] = reach.defs.as_slice() else {
                return AddrKey { root: AddrRoot::Unknown(reg), offset, mapped };
            };
            if reach.from_entry {
                return AddrKey { root: AddrRoot::Unknown(reg), offset, mapped };
            }
            let def = *def;
            let inst = self.func.inst(def);
            match &inst.value {
                Some(ValueOp::Copy(src)) => (at, reg) = (def, *src),
                Some(ValueOp::AddImm(src, k)) => {
                    offset = offset.wrapping_add(*k);
                    (at, reg) = (def, *src);
                }
                Some(ValueOp::Mapa(src)) => {
                    mapped = true;
                    (at, reg) = (def, *src);
                }
                Some(ValueOp::Param(name)) => {
                    return AddrKey { root: AddrRoot::Param(name.clone()), offset, mapped };
                }
                Some(ValueOp::SymbolAddr(name)) => {
                    return AddrKey { root: AddrRoot::Symbol(name.clone()), offset, mapped };
                }
                Some(ValueOp::Imm(v)) => {
                    return AddrKey {
                        root: AddrRoot::Absolute(v.wrapping_add(offset)),
                        offset: 0,
                        mapped,
                    };
                }
                // A reload of a local copy: the value stored there, when one store writes it.
                _ => match self.forwarded_local(def, reg) {
                    Some((store, src)) => (at, reg) = (store, src),
                    // No value op, or a predicate: the address starts at this definition.
                    None => return AddrKey { root: AddrRoot::Def(def), offset, mapped },
                },
            }
        }
        self.mark_incomplete();
        AddrKey { root: AddrRoot::Unknown(reg), offset, mapped }
    }

    /// Where the value that `load` reads into `reg` (its first register) was stored, when `load`
    /// reads local memory and exactly one store of the function writes that slot, unguarded and
    /// as wide, and nothing else may write it (every other store to local memory writes a slot
    /// of the same base that does not overlap it; no generic store, no call): the store and its
    /// data register. libcu++'s `atomic_ref::wait` keeps the pointer it polls in a volatile
    /// local copy and reloads it before every try (`st.local.u64 [%rd1], %rd7; ...
    /// ld.volatile.local.u64 %rd31, [%rd1]`, SASS `STL.64 [R1], R2; ... LDL.64 R2, [R1]`).
    fn forwarded_local(&self, load: InstId, reg: Reg) -> Option<(InstId, Reg)> {
        let inst = self.func.inst(load);
        let InstKind::Load(mem) = &inst.kind else { return None };
        if mem.space != Space::Local || inst.defs.first() != Some(&reg) || inst.guard.is_some() {
            return None;
        }
        // A slot's address read from another slot, and so on: followed a few times only.
        if self.forwarding.get() >= MAX_FORWARDING {
            return None;
        }
        if let Some(&found) = self.forwarded.borrow().get(&load) {
            return found;
        }
        let depth = self.forwarding.get();
        self.forwarding.set(depth + 1);
        let found = self.single_local_store(load);
        self.forwarding.set(depth);
        // Kept only when asked from the top: deeper down, the limit may have cut it short.
        if depth == 0 {
            self.forwarded.borrow_mut().insert(load, found);
        }
        found
    }

    fn single_local_store(&self, load: InstId) -> Option<(InstId, Reg)> {
        // Every writer must be a store to local memory at a known slot (no call, no generic
        // store): checked before any slot's address is computed.
        let writers = self.local_writers();
        let all_local = writers.iter().all(|&id| {
            matches!(&self.func.inst(id).kind, InstKind::Store(mem) if mem.space == Space::Local)
        });
        if !all_local {
            return None;
        }
        let inst = self.func.inst(load);
        let width = inst.mem()?.width?;
        let key = self.address_key(load, inst.address.as_ref()?);
        if matches!(key.root, AddrRoot::Unknown(_)) {
            return None;
        }
        let bytes = |bits: u32| i64::from(bits.div_ceil(8)).max(1);
        let mut found = None;
        for &store in writers {
            let writer = self.func.inst(store);
            let (InstKind::Store(wmem), Some(waddress)) = (&writer.kind, &writer.address) else {
                return None;
            };
            let wkey = self.address_key(store, waddress);
            if wkey.same_as(&key) && wmem.width == Some(width) && writer.guard.is_none() {
                if found.is_some() {
                    return None;
                }
                let address_regs = waddress.base.regs();
                let data = writer.uses.iter().find(|reg| !address_regs.contains(reg))?;
                found = Some((store, *data));
                continue;
            }
            let apart = wkey.root == key.root
                && !matches!(wkey.root, AddrRoot::Unknown(_))
                && wkey.mapped == key.mapped
                && (wkey.offset.saturating_add(bytes(wmem.width.unwrap_or(u32::MAX)))
                    <= key.offset
                    || key.offset.saturating_add(bytes(width)) <= wkey.offset);
            if !apart {
                return None;
            }
        }
        found
    }

    /// The instructions that may write local memory, in text order: stores to local, generic
    /// or unknown memory, calls and unparsed instructions.
    pub(crate) fn local_writers(&self) -> &[InstId] {
        self.local_writers.get_or_init(|| {
            self.func
                .ids()
                .filter(|&id| match &self.func.inst(id).kind {
                    InstKind::Store(mem) => {
                        matches!(mem.space, Space::Local | Space::Generic | Space::Unknown)
                    }
                    InstKind::Call | InstKind::Unknown => true,
                    _ => false,
                })
                .collect()
        })
    }
}

/// How many reloads of local copies one address is followed through.
const MAX_FORWARDING: u32 = 4;
