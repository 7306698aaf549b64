//! Symbolic addresses: "the same flag", "the same mbarrier", seen through moves, constant adds,
//! `cvta` and `mapa`.

use fencelint_ir::{AddrBase, Address, InstId, Name, Reg, ValueOp};

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
        let Some(address) = &self.func.inst(id).address else { return false };
        if let Some(Some(known)) = self.inst_keys.borrow().get(id.index()) {
            return known.same_as(key);
        }
        let computed = self.address_key(id, address);
        let same = computed.same_as(key);
        let mut keys = self.inst_keys.borrow_mut();
        if keys.len() != self.func.insts.len() {
            keys.resize(self.func.insts.len(), None);
        }
        keys[id.index()] = Some(computed);
        same
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
                // No value op, or a predicate: the address starts at this definition.
                _ => return AddrKey { root: AddrRoot::Def(def), offset, mapped },
            }
        }
        self.mark_incomplete();
        AddrKey { root: AddrRoot::Unknown(reg), offset, mapped }
    }
}
