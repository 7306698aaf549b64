//! Basic blocks and the petgraph graph of one function.

use std::ops::Range;

use fencelint_ir::{Function, InstId};
use petgraph::Direction;
use petgraph::graph::{DiGraph, NodeIndex};
use petgraph::visit::EdgeRef;

/// An index into [`Cfg::blocks`]; equal to the petgraph node index.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct BlockId(pub u32);

impl BlockId {
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// A maximal run of instructions entered only at the top and left only at the bottom.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Block {
    /// Instruction indices `start..end` in [`Function::insts`].
    pub insts: Range<u32>,
}

impl Block {
    pub fn ids(&self) -> impl DoubleEndedIterator<Item = InstId> + '_ {
        self.insts.clone().map(InstId)
    }

    pub fn first(&self) -> InstId {
        InstId(self.insts.start)
    }

    pub fn last(&self) -> InstId {
        InstId(self.insts.end - 1)
    }
}

/// How control moves along an edge.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EdgeKind {
    /// To the next block in text order (no branch, or a guarded branch not taken).
    Fallthrough,
    /// A taken branch.
    Branch,
}

/// The control-flow graph. Node weights are block ids; an empty function has one empty block.
#[derive(Clone, Debug)]
pub struct Cfg {
    graph: DiGraph<BlockId, EdgeKind>,
    pub blocks: Vec<Block>,
    block_of: Vec<u32>,
    /// The successors and predecessors of every block, in the order petgraph lists them, as
    /// flat arrays: the walks ask for them millions of times on a large listing, and following
    /// petgraph's edge lists cost more than the walks' own work.
    succs: Adjacency,
    preds: Adjacency,
}

/// One direction of the graph's edges: the neighbours of block `b` are
/// `targets[starts[b]..starts[b + 1]]`.
#[derive(Clone, Debug, Default)]
struct Adjacency {
    starts: Vec<u32>,
    targets: Vec<BlockId>,
}

impl Adjacency {
    fn new(graph: &DiGraph<BlockId, EdgeKind>, direction: Direction) -> Self {
        let mut starts = Vec::with_capacity(graph.node_count() + 1);
        let mut targets = Vec::with_capacity(graph.edge_count());
        for node in graph.node_indices() {
            starts.push(targets.len() as u32);
            targets.extend(graph.edges_directed(node, direction).map(|e| {
                let other = if direction == Direction::Outgoing { e.target() } else { e.source() };
                BlockId(other.index() as u32)
            }));
        }
        starts.push(targets.len() as u32);
        Self { starts, targets }
    }

    fn of(&self, block: BlockId) -> &[BlockId] {
        let (start, end) = (self.starts[block.index()], self.starts[block.index() + 1]);
        &self.targets[start as usize..end as usize]
    }
}

/// Gives every indirect branch whose targets are not all known (`Control::indirect`: a jump
/// table that the listing does not spell out) an edge to every block that nothing else
/// reaches. A jump table's targets are such blocks unless a direct branch also reaches them,
/// so the over-approximation keeps the code behind the table in the graph (reachable, its
/// loops found) at the price of edges to cases a given table does not hold.
fn link_unknown_targets(func: &Function, blocks: &[Block], graph: &mut DiGraph<BlockId, EdgeKind>) {
    let is_unknown =
        |block: &Block| !block.insts.is_empty() && func.inst(block.last()).control.indirect;
    if !blocks.iter().any(is_unknown) {
        return;
    }
    let orphans: Vec<NodeIndex> = (1..blocks.len())
        .map(NodeIndex::new)
        .filter(|&node| graph.edges_directed(node, Direction::Incoming).next().is_none())
        .collect();
    for (id, block) in blocks.iter().enumerate() {
        if !is_unknown(block) {
            continue;
        }
        let from = NodeIndex::new(id);
        // Orphans had no incoming edge, so none of these exists yet.
        for &to in &orphans {
            graph.add_edge(from, to, EdgeKind::Branch);
        }
    }
}

impl Cfg {
    pub fn build(func: &Function) -> Self {
        let n = func.insts.len();
        let mut leader = vec![false; n.max(1)];
        leader[0] = true;
        for (i, inst) in func.insts.iter().enumerate() {
            for target in &inst.control.targets {
                if let Some(slot) = leader.get_mut(target.index()) {
                    *slot = true;
                }
            }
            let ends_block = inst.is_branch() || inst.control.exits || !inst.control.falls_through;
            if ends_block && i + 1 < n {
                leader[i + 1] = true;
            }
        }

        let mut blocks = Vec::new();
        let mut block_of = vec![0u32; n];
        let mut start = 0usize;
        for i in 1..=n {
            if i == n || leader[i] {
                if i > start || n == 0 {
                    let id = blocks.len() as u32;
                    block_of[start..i].iter_mut().for_each(|b| *b = id);
                    blocks.push(Block { insts: start as u32..i as u32 });
                }
                start = i;
            }
        }
        if blocks.is_empty() {
            blocks.push(Block { insts: 0..0 });
        }

        let mut graph = DiGraph::with_capacity(blocks.len(), blocks.len() * 2);
        for id in 0..blocks.len() {
            graph.add_node(BlockId(id as u32));
        }
        for (id, block) in blocks.iter().enumerate() {
            if block.insts.is_empty() {
                continue;
            }
            let last = func.inst(block.last());
            let from = NodeIndex::new(id);
            for target in &last.control.targets {
                if let Some(&to) = block_of.get(target.index()) {
                    graph.update_edge(from, NodeIndex::new(to as usize), EdgeKind::Branch);
                }
            }
            if last.falls_to_next() && id + 1 < blocks.len() {
                let to = NodeIndex::new(id + 1);
                if graph.find_edge(from, to).is_none() {
                    graph.add_edge(from, to, EdgeKind::Fallthrough);
                }
            }
        }
        link_unknown_targets(func, &blocks, &mut graph);
        let succs = Adjacency::new(&graph, Direction::Outgoing);
        let preds = Adjacency::new(&graph, Direction::Incoming);
        Self { graph, blocks, block_of, succs, preds }
    }

    /// The petgraph graph: one node per block (node index = block id), one edge per
    /// successor. It is never changed after [`Cfg::build`], which also derives the adjacency
    /// arrays behind [`Cfg::successors`] and [`Cfg::predecessors`] from it.
    pub fn graph(&self) -> &DiGraph<BlockId, EdgeKind> {
        &self.graph
    }

    pub fn entry(&self) -> NodeIndex {
        NodeIndex::new(0)
    }

    pub fn node(&self, block: BlockId) -> NodeIndex {
        NodeIndex::new(block.index())
    }

    pub fn block(&self, id: BlockId) -> &Block {
        &self.blocks[id.index()]
    }

    pub fn block_of(&self, inst: InstId) -> BlockId {
        BlockId(self.block_of[inst.index()])
    }

    pub fn block_ids(&self) -> impl Iterator<Item = BlockId> {
        (0..self.blocks.len() as u32).map(BlockId)
    }

    /// The blocks that `block` branches or falls to, in the order of petgraph's edge list.
    pub fn successors(&self, block: BlockId) -> impl ExactSizeIterator<Item = BlockId> + '_ {
        self.succs.of(block).iter().copied()
    }

    /// The blocks that branch or fall to `block`, in the order of petgraph's edge list.
    pub fn predecessors(&self, block: BlockId) -> impl ExactSizeIterator<Item = BlockId> + '_ {
        self.preds.of(block).iter().copied()
    }

    /// [`Cfg::successors`] as a slice.
    pub(crate) fn successor_slice(&self, block: BlockId) -> &[BlockId] {
        self.succs.of(block)
    }

    /// [`Cfg::predecessors`] as a slice.
    pub(crate) fn predecessor_slice(&self, block: BlockId) -> &[BlockId] {
        self.preds.of(block)
    }

    /// Edges as `(from, to, kind)`, in a deterministic order.
    pub fn edges(&self) -> Vec<(BlockId, BlockId, EdgeKind)> {
        let mut edges: Vec<_> = self
            .graph
            .edge_references()
            .map(|e| {
                (
                    BlockId(e.source().index() as u32),
                    BlockId(e.target().index() as u32),
                    *e.weight(),
                )
            })
            .collect();
        edges.sort_by_key(|&(a, b, _)| (a, b));
        edges
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencelint_ir::{Control, Inst, InstKind, TextRange};

    fn inst(kind: InstKind, control: Control) -> Inst {
        let mut inst = Inst::new(TextRange::default(), "OP", kind);
        inst.control = control;
        inst
    }

    fn plain() -> Inst {
        inst(InstKind::Move, Control { falls_through: true, ..Control::default() })
    }

    fn jump(targets: Vec<InstId>, indirect: bool) -> Inst {
        inst(InstKind::Branch, Control { targets: targets.into(), indirect, ..Control::default() })
    }

    fn exit() -> Inst {
        inst(InstKind::Exit, Control { exits: true, ..Control::default() })
    }

    fn successors(cfg: &Cfg, block: u32) -> Vec<u32> {
        let mut out: Vec<u32> = cfg.successors(BlockId(block)).map(|b| b.0).collect();
        out.sort_unstable();
        out
    }

    /// 0: mov; 1: indirect branch; 2: case A (jumps to 6); 4: case B (jumps to 6); 6: exit.
    fn switch(listed: Option<Vec<InstId>>) -> Function {
        let mut func = Function::default();
        let indirect = listed.is_none();
        func.insts = vec![
            plain(),
            jump(listed.unwrap_or_default(), indirect),
            plain(),
            jump(vec![InstId(6)], false),
            plain(),
            jump(vec![InstId(6)], false),
            exit(),
        ];
        func
    }

    #[test]
    fn listed_targets_are_the_only_successors() {
        let cfg = Cfg::build(&switch(Some(vec![InstId(4)])));
        // Blocks: 0..2 (0), 2..4 (1), 4..6 (2), 6..7 (3).
        assert_eq!(successors(&cfg, 0), [2]);
        assert!(cfg.predecessors(BlockId(1)).next().is_none());
    }

    #[test]
    fn unknown_targets_reach_every_block_nothing_else_reaches() {
        let cfg = Cfg::build(&switch(None));
        assert_eq!(successors(&cfg, 0), [1, 2]);
        // The exit block is reached by direct branches, so the indirect one gets no edge to it.
        assert_eq!(successors(&cfg, 1), [3]);
        assert_eq!(successors(&cfg, 3), Vec::<u32>::new());
    }

    #[test]
    fn functions_without_unknown_targets_get_no_extra_edges() {
        let mut func = switch(Some(vec![InstId(2), InstId(4)]));
        func.insts.push(plain());
        let cfg = Cfg::build(&func);
        // A block after the exit that nothing reaches stays unreached: every branch's targets
        // are known.
        let last = cfg.blocks.len() as u32 - 1;
        assert!(cfg.predecessors(BlockId(last)).next().is_none());
    }
}
