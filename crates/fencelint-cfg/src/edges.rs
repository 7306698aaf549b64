//! Branches decided by the edge that enters their block: the block compares a register with a
//! constant and branches on the result, and the predecessor set that register to a constant.
//!
//! ```text
//! $L_done:                          // entered from a block that ends with `mov.u32 %r5, 0;`
//!     setp.ne.s32 %p9, %r5, 0;
//!     @%p9 bra $L_loop;             // never taken on that edge
//! ```
//!
//! Compilers emit this shape when they merge two exits of a loop (`if (n == 0) break;` next to
//! the loop's own `while (n != 0)`): one edge sets the loop variable to the constant that the
//! merged test then rejects. A walk that follows every edge takes the back edge on such a path,
//! which no execution takes.

use fencelint_ir::{InstId, IntCompare, Reg, ValueOp};

use crate::outcomes::CondBranch;
use crate::{BlockId, FunctionAnalysis};

/// The branch that ends a block, when it tests a comparison of a register with a constant and
/// that register is not written in the block before the comparison.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Decider {
    reg: Reg,
    compare: IntCompare,
    constant: i64,
    branch: CondBranch,
}

impl FunctionAnalysis<'_> {
    /// The one successor of `block` that control can reach when it enters `block` from `pred`,
    /// when the branch that ends `block` is decided on that edge (see the module's comment):
    /// `pred` writes a constant to the register that `block` compares, as its last write of
    /// that register, with no guard. `None` when both successors stay possible.
    pub fn forced_successor(&self, pred: BlockId, block: BlockId) -> Option<BlockId> {
        let decider = self.deciders().get(block.index()).copied().flatten()?;
        let value = constant_at_end(self, pred, decider.reg)?;
        let branch = decider.branch;
        let taken = decider.compare.holds(value, decider.constant) != branch.guard.negated;
        Some(if taken { branch.taken } else { branch.not_taken })
    }

    fn deciders(&self) -> &[Option<Decider>] {
        self.deciders.get_or_init(|| self.cfg.block_ids().map(|b| decider_of(self, b)).collect())
    }
}

fn decider_of(analysis: &FunctionAnalysis<'_>, block: BlockId) -> Option<Decider> {
    let func = analysis.func;
    let branch = analysis.cond_branch(block)?;
    // A branch with a second condition is not decided by its guard alone.
    if branch.condition.is_some() {
        return None;
    }
    let (guard, last) = (branch.guard, branch.inst);
    let range = &analysis.cfg.block(block).insts;
    // The last write of the guard before the branch: an unguarded comparison with a constant.
    let setp = (range.start..last.0)
        .rev()
        .map(InstId)
        .find(|&id| func.inst(id).defs.contains(&guard.reg))?;
    let compare_inst = func.inst(setp);
    if compare_inst.guard.is_some() || compare_inst.defs.as_slice() != [guard.reg] {
        return None;
    }
    let Some(ValueOp::Compare(compare, reg, constant)) = compare_inst.value else { return None };
    // The compared register holds what it held on entry to the block.
    if (range.start..setp.0).any(|i| func.inst(InstId(i)).defs.contains(&reg)) {
        return None;
    }
    Some(Decider { reg, compare, constant, branch })
}

/// The constant that `block` leaves in `reg`: its last write of `reg` is an unguarded move of a
/// constant into `reg` alone.
fn constant_at_end(analysis: &FunctionAnalysis<'_>, block: BlockId, reg: Reg) -> Option<i64> {
    let func = analysis.func;
    let write =
        analysis.cfg.block(block).ids().rev().find(|&id| func.inst(id).defs.contains(&reg))?;
    let inst = func.inst(write);
    if inst.guard.is_some() || inst.defs.as_slice() != [reg] {
        return None;
    }
    match inst.value {
        Some(ValueOp::Imm(value)) => Some(value),
        _ => None,
    }
}
