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
    pub graph: DiGraph<BlockId, EdgeKind>,
    pub blocks: Vec<Block>,
    block_of: Vec<u32>,
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
            let falls = last.control.falls_through && !(last.control.exits && last.guard.is_none());
            if falls && id + 1 < blocks.len() {
                let to = NodeIndex::new(id + 1);
                if graph.find_edge(from, to).is_none() {
                    graph.add_edge(from, to, EdgeKind::Fallthrough);
                }
            }
        }
        Self { graph, blocks, block_of }
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

    pub fn successors(&self, block: BlockId) -> impl Iterator<Item = BlockId> + '_ {
        self.graph
            .edges_directed(self.node(block), Direction::Outgoing)
            .map(|e| BlockId(e.target().index() as u32))
    }

    pub fn predecessors(&self, block: BlockId) -> impl Iterator<Item = BlockId> + '_ {
        self.graph
            .edges_directed(self.node(block), Direction::Incoming)
            .map(|e| BlockId(e.source().index() as u32))
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
