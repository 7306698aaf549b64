//! Immediate dominators of a CFG's blocks, by the iterative algorithm of Cooper, Harvey and
//! Kennedy ("A Simple, Fast Dominance Algorithm", 2001) over the flat successor and predecessor
//! arrays. petgraph's `simple_fast` is the same algorithm over hash maps and hash sets of
//! predecessors; on a cut of NCCL's listing it was 8% of the instructions of the rules and
//! analyses (callgrind); this is under 2%.

use crate::{BlockId, Cfg};

/// No block: the entry's dominator, and that of a block the entry does not reach.
const NONE: u32 = u32::MAX;

/// The dominator tree of a function, as each block's immediate dominator.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DomTree {
    /// Block index to the index of its immediate dominator ([`NONE`] for the entry and for
    /// unreachable blocks).
    idom: Vec<u32>,
    reachable: Vec<bool>,
}

impl DomTree {
    pub(crate) fn build(cfg: &Cfg) -> Self {
        let n = cfg.blocks.len();
        Self::compute(n, |b| cfg.successor_slice(BlockId(b)), |b| cfg.predecessor_slice(BlockId(b)))
    }

    /// The dominators of a graph of `n` nodes whose entry is node 0.
    fn compute<'g>(
        n: usize,
        successors: impl Fn(u32) -> &'g [BlockId],
        predecessors: impl Fn(u32) -> &'g [BlockId],
    ) -> Self {
        if n == 0 {
            return Self { idom: Vec::new(), reachable: Vec::new() };
        }
        // Postorder numbers from an iterative depth-first search from the entry.
        let mut post = vec![NONE; n];
        let mut order = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        let mut stack: Vec<(u32, usize)> = vec![(0, 0)];
        seen[0] = true;
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&succ) = successors(node).get(*next) {
                *next += 1;
                if !seen[succ.index()] {
                    seen[succ.index()] = true;
                    stack.push((succ.0, 0));
                }
            } else {
                post[node as usize] = order.len() as u32;
                order.push(node);
                stack.pop();
            }
        }
        // `idom` by block index; the entry is its own until the end.
        let mut idom = vec![NONE; n];
        idom[0] = 0;
        let intersect = |idom: &[u32], mut a: u32, mut b: u32| {
            while a != b {
                while post[a as usize] < post[b as usize] {
                    a = idom[a as usize];
                }
                while post[b as usize] < post[a as usize] {
                    b = idom[b as usize];
                }
            }
            a
        };
        let mut changed = true;
        while changed {
            changed = false;
            // Reverse postorder, without the entry (the last in postorder).
            for &node in order.iter().rev().skip(1) {
                let mut new_idom = NONE;
                for &pred in predecessors(node) {
                    let pred = pred.0;
                    if idom[pred as usize] == NONE {
                        continue;
                    }
                    new_idom =
                        if new_idom == NONE { pred } else { intersect(&idom, pred, new_idom) };
                }
                if new_idom != idom[node as usize] {
                    idom[node as usize] = new_idom;
                    changed = true;
                }
            }
        }
        idom[0] = NONE;
        Self { idom, reachable: seen }
    }

    /// The block's immediate dominator; `None` for the entry and for blocks it does not reach.
    pub fn immediate_dominator(&self, block: BlockId) -> Option<BlockId> {
        match self.idom[block.index()] {
            NONE => None,
            idom => Some(BlockId(idom)),
        }
    }

    /// Whether the entry reaches the block.
    pub fn is_reachable(&self, block: BlockId) -> bool {
        self.reachable[block.index()]
    }
}

/// A small deterministic generator for the random-graph tests, so that failures reproduce.
#[cfg(test)]
pub(crate) struct Lcg(pub(crate) u64);

#[cfg(test)]
impl Lcg {
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.0 =
            self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        (self.0 >> 33) % n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use petgraph::algo::dominators::simple_fast;
    use petgraph::graph::{DiGraph, NodeIndex};

    /// Random graphs (with loops, unreachable nodes, self edges and repeated edges) give the
    /// immediate dominators that petgraph's `simple_fast` gives.
    #[test]
    fn agrees_with_petgraph_on_random_graphs() {
        let mut rng = Lcg(7);
        for round in 0..2_000 {
            let n = 1 + rng.below(40) as usize;
            let edges = rng.below(3 * n as u64) as usize;
            let mut succs = vec![Vec::new(); n];
            let mut preds = vec![Vec::new(); n];
            let mut graph = DiGraph::<(), ()>::new();
            let nodes: Vec<NodeIndex> = (0..n).map(|_| graph.add_node(())).collect();
            for _ in 0..edges {
                let (a, b) = (rng.below(n as u64) as usize, rng.below(n as u64) as usize);
                succs[a].push(BlockId(b as u32));
                preds[b].push(BlockId(a as u32));
                graph.add_edge(nodes[a], nodes[b], ());
            }
            let tree = DomTree::compute(n, |b| &succs[b as usize][..], |b| &preds[b as usize][..]);
            let expected = simple_fast(&graph, nodes[0]);
            for (i, &node) in nodes.iter().enumerate() {
                let want = expected.immediate_dominator(node).map(|d| BlockId(d.index() as u32));
                let got = tree.immediate_dominator(BlockId(i as u32));
                assert_eq!(got, want, "round {round}, node {i}");
                let reachable = i == 0 || want.is_some();
                assert_eq!(tree.is_reachable(BlockId(i as u32)), reachable, "round {round}");
            }
        }
    }
}
