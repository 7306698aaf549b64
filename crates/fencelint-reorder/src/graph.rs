//! Instruction-level control flow of one function, and the few walks the audit needs.

use std::collections::VecDeque;

use fencelint_ir::{Function, InstId, InstKind};

pub(crate) struct Graph {
    succ: Vec<Vec<u32>>,
    pred: Vec<Vec<u32>>,
    exits: Vec<bool>,
}

impl Graph {
    pub(crate) fn new(func: &Function) -> Self {
        let n = func.insts.len();
        let mut succ = vec![Vec::new(); n];
        let mut pred = vec![Vec::new(); n];
        let mut exits = vec![false; n];
        for (i, inst) in func.insts.iter().enumerate() {
            let mut add = |j: usize| {
                if j < n {
                    succ[i].push(j as u32);
                    pred[j].push(i as u32);
                }
            };
            for t in &inst.control.targets {
                add(t.index());
            }
            if inst.control.falls_through {
                add(i + 1);
            }
            exits[i] = inst.control.exits
                || matches!(inst.kind, InstKind::Exit | InstKind::Return)
                || (inst.control.falls_through && i + 1 == n);
        }
        Self { succ, pred, exits }
    }

    fn len(&self) -> usize {
        self.succ.len()
    }

    fn walk(
        &self,
        starts: impl IntoIterator<Item = usize>,
        avoid: &[InstId],
        forward: bool,
        budget: &mut usize,
    ) -> Vec<bool> {
        let mut blocked = vec![false; self.len()];
        for a in avoid {
            if let Some(b) = blocked.get_mut(a.index()) {
                *b = true;
            }
        }
        let mut seen = vec![false; self.len()];
        let mut queue: VecDeque<usize> = VecDeque::new();
        for s in starts {
            if s < self.len() && !blocked[s] && !seen[s] {
                seen[s] = true;
                queue.push_back(s);
            }
        }
        let edges = if forward { &self.succ } else { &self.pred };
        while let Some(i) = queue.pop_front() {
            if *budget == 0 {
                break;
            }
            *budget -= 1;
            for &j in &edges[i] {
                let j = j as usize;
                if !blocked[j] && !seen[j] {
                    seen[j] = true;
                    queue.push_back(j);
                }
            }
        }
        seen
    }

    /// Instructions reachable from the entry without passing any of `avoid`.
    pub(crate) fn reach_from_entry_avoiding(
        &self,
        avoid: &[InstId],
        budget: &mut usize,
    ) -> Vec<bool> {
        self.walk([0], avoid, true, budget)
    }

    /// Instructions from which one of `set` is reachable without passing another of `set`
    /// first.
    pub(crate) fn reaches_set_avoiding(&self, set: &[InstId], budget: &mut usize) -> Vec<bool> {
        let starts: Vec<usize> =
            set.iter().flat_map(|s| self.pred[s.index()].iter().map(|&p| p as usize)).collect();
        self.walk(starts, set, false, budget)
    }

    /// Instructions reachable from one of `set` without passing another of `set`.
    pub(crate) fn reach_from_set_avoiding(&self, set: &[InstId], budget: &mut usize) -> Vec<bool> {
        let starts: Vec<usize> =
            set.iter().flat_map(|s| self.succ[s.index()].iter().map(|&p| p as usize)).collect();
        self.walk(starts, set, true, budget)
    }

    /// Instructions from which an exit is reachable without passing any of `avoid`.
    pub(crate) fn reaches_exit_avoiding(&self, avoid: &[InstId], budget: &mut usize) -> Vec<bool> {
        let starts: Vec<usize> = (0..self.len()).filter(|&i| self.exits[i]).collect();
        self.walk(starts, avoid, false, budget)
    }

    /// The first of `set` met walking forward from `from`.
    pub(crate) fn first_hit_forward(&self, from: InstId, set: &[InstId]) -> Option<InstId> {
        self.first_hit(from, set, &self.succ)
    }

    /// The first of `set` met walking backward from `from`.
    pub(crate) fn first_hit_backward(&self, from: InstId, set: &[InstId]) -> Option<InstId> {
        self.first_hit(from, set, &self.pred)
    }

    fn first_hit(&self, from: InstId, set: &[InstId], edges: &[Vec<u32>]) -> Option<InstId> {
        let mut seen = vec![false; self.len()];
        let mut queue = VecDeque::from([from.index()]);
        seen[from.index()] = true;
        while let Some(i) = queue.pop_front() {
            for &j in &edges[i] {
                let j = j as usize;
                if set.iter().any(|s| s.index() == j) {
                    return Some(InstId(j as u32));
                }
                if !seen[j] {
                    seen[j] = true;
                    queue.push_back(j);
                }
            }
        }
        None
    }
}
