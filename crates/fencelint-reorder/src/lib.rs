//! The PTX-versus-SASS reorder audit: pairs a PTX module with the `nvdisasm -gp` SASS of the
//! same kernels and reports memory operations that ptxas scheduled across an ordering point.
//!
//! A rule on PTX judges what the program asks for; this audit judges what the compiler made of
//! it. For every ordering point of a PTX kernel (a bulk-group or `cp.async` wait, an mbarrier
//! wait, a fence, a CTA or cluster barrier) it finds the SASS instructions that implement it
//! (same PTX line, matching kind) and looks for a SASS memory operation that
//!
//! - comes *after* an acquire-type point in PTX (the point dominates it) but that SASS can
//!   execute *before* it: reachable from the function entry without passing the point, and
//!   reaching the point; or
//! - comes *before* a release-type point in PTX (the point post-dominates it) but that SASS can
//!   execute *after* it: reachable from the point, and reaching an exit without passing it.
//!
//! What `-gp` output makes hard, and how it is handled:
//! - markers are sticky, so an instruction may carry the line of the instruction printed before
//!   it: a memory operation counts only when the PTX line it names holds a PTX memory operation
//!   of the same direction, and an ordering point only when its line holds that point;
//! - ptxas splits an mbarrier wait into an inline fast path (often credited to the preceding PTX
//!   line) and an out-of-line retry loop credited to the wait's own line: the two halves are
//!   joined by barrier address and by the branch from the fast path into the retry loop (the
//!   first branch that tests the fast path's predicate, however far ptxas schedules it), so the
//!   retry loop at the end of the function is never mistaken for the wait.
//!
//! No IO and no parsing happen here: callers lower the two texts (`fencelint-linter`'s
//! `lint_pair` and `lint_sass_paired`, through the rule registry) and pass the modules to
//! [`audit_modules`]; for binaries, [`ptx_from_debug_section`] rebuilds the PTX text from a
//! cubin's `.nv_debug_ptx_txt` section. Like the rules, this crate sees only the IR.

mod debug_section;
mod graph;

use std::collections::{BTreeMap, HashMap};

pub use debug_section::{ptx_from_debug_section, ptxas_version};
use fencelint_diagnostics::{Diagnostic, Label, Severity, codes, stable_hash};
use fencelint_ir::{
    AsyncOp, Barrier, Fence, FenceKind, Function, Inst, InstId, InstKind, MbarrierOp, Module,
};
use fencelint_source::{Dialect, FileId};

use crate::graph::Graph;

/// How many instructions after the fast path of a split mbarrier wait
/// ([`Pair::failure_branch`]) its failure branch may come.
const SPLIT_WAIT_SPAN: usize = 64;

/// The rule name of the findings.
pub const RULE: &str = "ptxas-reordered-across-wait";

/// The default severity: a reordered access is a data race the source does not contain.
pub const DEFAULT_SEVERITY: Severity = Severity::Error;

/// The rule's document.
pub const DOC: &str = include_str!("../../../rules/ptxas-reordered-across-wait.md");

/// Choices of the caller.
#[derive(Clone, Debug)]
pub struct AuditOptions {
    /// The compiler that produced the SASS (`ptxas 13.2.78`), when the caller knows it (from
    /// the cubin's notes, see [`ptxas_version`]). Otherwise the SASS listing's own producer is
    /// used when it names one (nvdisasm JSON).
    pub producer: Option<String>,
    pub severity: Severity,
    /// The most instructions visited per function (all walks together) before the function is
    /// reported as `analysis-incomplete`.
    pub budget: usize,
}

impl Default for AuditOptions {
    fn default() -> Self {
        Self { producer: None, severity: DEFAULT_SEVERITY, budget: 50_000_000 }
    }
}

/// What one audit found and how much it could check.
#[derive(Debug, Default)]
pub struct Audit {
    /// Findings, parse errors of both inputs and input errors, sorted.
    pub diagnostics: Vec<Diagnostic>,
    /// SASS functions that found their PTX function by name.
    pub paired: Vec<String>,
    /// SASS functions with no PTX function of that name.
    pub unpaired: Vec<String>,
    /// Ordering points in the paired PTX functions.
    pub points: usize,
    /// Ordering points whose SASS implementation was found.
    pub matched_points: usize,
}

/// Byte offsets to 1-based line numbers of one text.
pub struct LineIndex {
    starts: Vec<u32>,
}

impl LineIndex {
    pub fn new(text: &str) -> Self {
        let mut starts = vec![0];
        starts.extend(text.match_indices('\n').map(|(i, _)| i as u32 + 1));
        Self { starts }
    }

    /// The 1-based line holding `offset`.
    pub fn line(&self, offset: u32) -> u32 {
        self.starts.partition_point(|&s| s <= offset) as u32
    }
}

/// Audits every SASS function of `sass` that has a PTX function of the same name in `ptx`.
pub fn audit_modules(
    ptx: &Module,
    lines: &LineIndex,
    sass: &Module,
    options: &AuditOptions,
    audit: &mut Audit,
) {
    let by_name: HashMap<&str, &Function> =
        ptx.functions.iter().map(|f| (f.name.as_str(), f)).collect();
    let producer = options.producer.clone().or_else(|| sass.producer.clone());
    for sass_func in &sass.functions {
        let Some(ptx_func) = by_name.get(sass_func.name.as_str()) else {
            audit.unpaired.push(sass_func.name.clone());
            continue;
        };
        audit.paired.push(sass_func.name.clone());
        // Called code is copied once per call on both sides, so a PTX line stands for several
        // places of each: the functions are compared as written, calls falling through.
        let (ptx_func, sass_func) = (ptx_func.own_code(), sass_func.own_code());
        let pair = Pair {
            ptx_file: ptx.file.unwrap_or(FileId(0)),
            sass_file: sass.file.unwrap_or(FileId(0)),
            ptx: &ptx_func,
            sass: &sass_func,
            lines,
            producer: producer.as_deref(),
            options,
        };
        pair.audit(audit);
    }
}

/// What an ordering point orders.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PointKind {
    /// `cp.async.bulk.wait_group` (`read_only` for `.read`) and `cp.async.wait_group`.
    AsyncWait {
        read_only: bool,
    },
    MbarrierWait,
    Fence {
        acquire: bool,
        release: bool,
    },
    CtaBarrier {
        acquire: bool,
        release: bool,
    },
    ClusterArrive,
    ClusterWait,
}

impl PointKind {
    fn of(kind: &InstKind) -> Option<Self> {
        Some(match kind {
            InstKind::Async(AsyncOp::BulkWait { read_only, .. }) => {
                Self::AsyncWait { read_only: *read_only }
            }
            InstKind::Async(AsyncOp::CpAsyncWait { .. }) => Self::AsyncWait { read_only: false },
            InstKind::Mbarrier(MbarrierOp::Wait { .. }) => Self::MbarrierWait,
            InstKind::Fence(Fence { kind: FenceKind::Plain, sem, .. }) => {
                Self::Fence { acquire: sem.has_acquire(), release: sem.has_release() }
            }
            InstKind::Fence(Fence { kind: FenceKind::ProxyTensormapRelease, .. }) => {
                Self::Fence { acquire: false, release: true }
            }
            InstKind::Barrier(Barrier::CtaSync { .. } | Barrier::CtaReduce) => {
                Self::CtaBarrier { acquire: true, release: true }
            }
            InstKind::Barrier(Barrier::CtaArrive) => {
                Self::CtaBarrier { acquire: false, release: true }
            }
            InstKind::Barrier(Barrier::ClusterArrive { release: true }) => Self::ClusterArrive,
            InstKind::Barrier(Barrier::ClusterWait) => Self::ClusterWait,
            _ => return None,
        })
    }

    const fn acquire(self) -> bool {
        match self {
            Self::AsyncWait { .. } | Self::MbarrierWait | Self::ClusterWait => true,
            Self::Fence { acquire, .. } | Self::CtaBarrier { acquire, .. } => acquire,
            Self::ClusterArrive => false,
        }
    }

    const fn release(self) -> bool {
        match self {
            Self::Fence { release, .. } | Self::CtaBarrier { release, .. } => release,
            Self::ClusterArrive => true,
            _ => false,
        }
    }

    /// Whether only writes are ordered after the point: `cp.async.bulk.wait_group.read` says
    /// that the bulk operations finished *reading* their sources, so reading those sources
    /// early is no race.
    const fn writes_only(self) -> bool {
        matches!(self, Self::AsyncWait { read_only: true })
    }

    /// Whether a SASS instruction is part of this point's implementation.
    fn implemented_by(self, kind: &InstKind) -> bool {
        match self {
            Self::AsyncWait { .. } => matches!(
                kind,
                InstKind::Async(AsyncOp::BulkWait { .. } | AsyncOp::CpAsyncWait { .. })
            ),
            Self::MbarrierWait => matches!(kind, InstKind::Mbarrier(MbarrierOp::Wait { .. })),
            Self::Fence { .. } => matches!(
                kind,
                InstKind::Fence(Fence { kind: FenceKind::Plain | FenceKind::L1Invalidate, .. })
            ),
            Self::CtaBarrier { .. } => {
                matches!(kind, InstKind::Barrier(b) if *b != Barrier::WarpSync)
            }
            Self::ClusterArrive => matches!(
                kind,
                InstKind::Barrier(Barrier::ClusterArrive { .. })
                    | InstKind::Fence(Fence { kind: FenceKind::Plain, .. })
            ),
            Self::ClusterWait => matches!(
                kind,
                InstKind::Barrier(Barrier::ClusterWait | Barrier::CtaSync { .. })
                    | InstKind::Fence(Fence { kind: FenceKind::L1Invalidate, .. })
            ),
        }
    }

    const fn noun(self) -> &'static str {
        match self {
            Self::AsyncWait { .. } => "wait",
            Self::MbarrierWait => "mbarrier wait",
            Self::Fence { .. } => "fence",
            Self::CtaBarrier { .. } | Self::ClusterArrive | Self::ClusterWait => "barrier",
        }
    }
}

/// Which way memory moves through an instruction.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Access {
    reads: bool,
    writes: bool,
}

impl Access {
    fn of(kind: &InstKind) -> Self {
        // Accesses of memory that no other thread writes while the kernel runs (kernel
        // parameters, the constant bank, local memory, `.nc` loads) race with nothing: moving
        // them across a wait or barrier is no hazard.
        if let InstKind::Load(mem) | InstKind::Store(mem) = kind
            && !mem.others_may_write()
        {
            return Self::default();
        }
        let tensormap = matches!(kind, InstKind::Tensormap(_));
        Self { reads: kind.reads_memory() || tensormap, writes: kind.writes_memory() || tensormap }
    }

    const fn any(self) -> bool {
        self.reads || self.writes
    }

    fn noun(self) -> &'static str {
        match (self.reads, self.writes) {
            (true, true) => "atomic",
            (false, true) => "store",
            (true, false) => "load",
            (false, false) => "instruction",
        }
    }
}

struct Pair<'a> {
    ptx_file: FileId,
    sass_file: FileId,
    ptx: &'a Function,
    sass: &'a Function,
    lines: &'a LineIndex,
    producer: Option<&'a str>,
    options: &'a AuditOptions,
}

/// One finding before it becomes a diagnostic.
struct Finding {
    point: InstId,
    point_kind: PointKind,
    /// The SASS instruction implementing the point, on the path of the moved access.
    sass_point: InstId,
    /// The moved SASS access and its PTX instruction.
    sass_op: InstId,
    ptx_op: InstId,
    /// True when the access moved above an acquire-type point, false when it moved below a
    /// release-type point.
    hoisted: bool,
}

impl Pair<'_> {
    fn audit(&self, audit: &mut Audit) {
        let ptx_graph = Graph::new(self.ptx);
        let sass_graph = Graph::new(self.sass);
        let mut budget = self.options.budget;
        // PTX instructions by line.
        let mut by_line: BTreeMap<u32, Vec<InstId>> = BTreeMap::new();
        for id in self.ptx.ids() {
            by_line.entry(self.lines.line(self.ptx.inst(id).range.start)).or_default().push(id);
        }
        let line_of_ptx = |id: InstId| self.lines.line(self.ptx.inst(id).range.start);
        let mbarrier_wait_lines: Vec<u32> = self
            .ptx
            .ids()
            .filter(|&id| PointKind::of(&self.ptx.inst(id).kind) == Some(PointKind::MbarrierWait))
            .map(line_of_ptx)
            .collect();
        // SASS memory operations whose PTX line holds a PTX memory operation of the same
        // direction (sticky markers credit other instructions to wrong lines).
        let mut sass_ops: Vec<(InstId, Access, Vec<InstId>)> = Vec::new();
        for id in self.sass.ids() {
            let inst = self.sass.inst(id);
            let access = Access::of(&inst.kind);
            let Some(line) = inst.ptx_line else { continue };
            if !access.any() {
                continue;
            }
            let ptx_ops: Vec<InstId> = by_line
                .get(&line)
                .into_iter()
                .flatten()
                .copied()
                .filter(|&q| {
                    let a = Access::of(&self.ptx.inst(q).kind);
                    (access.writes && a.writes) || (access.reads && a.reads)
                })
                .collect();
            if !ptx_ops.is_empty() {
                sass_ops.push((id, access, ptx_ops));
            }
        }
        let mut findings = Vec::new();
        for point in self.ptx.ids() {
            let Some(kind) = PointKind::of(&self.ptx.inst(point).kind) else { continue };
            audit.points += 1;
            let line = line_of_ptx(point);
            let mut impl_set: Vec<InstId> = self
                .sass
                .ids()
                .filter(|&id| {
                    let inst = self.sass.inst(id);
                    inst.ptx_line == Some(line) && kind.implemented_by(&inst.kind)
                })
                .collect();
            if impl_set.is_empty() {
                continue;
            }
            if kind == PointKind::MbarrierWait {
                self.join_split_waits(&mut impl_set, &mbarrier_wait_lines);
            }
            audit.matched_points += 1;
            let candidates: Vec<&(InstId, Access, Vec<InstId>)> = sass_ops
                .iter()
                .filter(|(id, access, _)| {
                    self.sass.inst(*id).ptx_line != Some(line)
                        && (access.writes || !kind.writes_only())
                })
                .collect();
            if candidates.is_empty() {
                continue;
            }
            if kind.acquire() {
                let ptx_before = ptx_graph.reach_from_entry_avoiding(&[point], &mut budget);
                let sass_before = sass_graph.reach_from_entry_avoiding(&impl_set, &mut budget);
                let sass_reaches = sass_graph.reaches_set_avoiding(&impl_set, &mut budget);
                for (op, _, ptx_ops) in &candidates {
                    if !(sass_before[op.index()] && sass_reaches[op.index()]) {
                        continue;
                    }
                    // In PTX every path to the access passes the point.
                    let Some(&q) = ptx_ops.iter().find(|q| !ptx_before[q.index()]) else {
                        continue;
                    };
                    let sass_point =
                        sass_graph.first_hit_forward(*op, &impl_set).unwrap_or(impl_set[0]);
                    findings.push(Finding {
                        point,
                        point_kind: kind,
                        sass_point,
                        sass_op: *op,
                        ptx_op: q,
                        hoisted: true,
                    });
                }
            }
            if kind.release() {
                let ptx_exits = ptx_graph.reaches_exit_avoiding(&[point], &mut budget);
                let sass_exits = sass_graph.reaches_exit_avoiding(&impl_set, &mut budget);
                let sass_after = sass_graph.reach_from_set_avoiding(&impl_set, &mut budget);
                for (op, _, ptx_ops) in &candidates {
                    if !(sass_exits[op.index()] && sass_after[op.index()]) {
                        continue;
                    }
                    // In PTX every path from the access to an exit passes the point, and the
                    // access is not after the point itself (a loop may bring it back).
                    let Some(&q) =
                        ptx_ops.iter().find(|q| !ptx_exits[q.index()] && line_of_ptx(**q) < line)
                    else {
                        continue;
                    };
                    let sass_point =
                        sass_graph.first_hit_backward(*op, &impl_set).unwrap_or(impl_set[0]);
                    findings.push(Finding {
                        point,
                        point_kind: kind,
                        sass_point,
                        sass_op: *op,
                        ptx_op: q,
                        hoisted: false,
                    });
                }
            }
            if budget == 0 {
                break;
            }
        }
        if budget == 0 {
            audit.diagnostics.push(
                Diagnostic::new(
                    codes::ANALYSIS_INCOMPLETE,
                    Severity::Warning,
                    format!(
                        "reorder audit of `{}` stopped at its budget; findings may be missing",
                        self.sass.name
                    ),
                    Label::new(self.sass_file, self.sass.range, "in this function"),
                )
                .with_kernel(self.sass.name.clone())
                .with_dialect(Dialect::Sass),
            );
        }
        for finding in findings {
            audit.diagnostics.push(self.diagnostic(&finding, line_of_ptx));
        }
    }

    /// Adds the other half of a split mbarrier wait: a wait on the same barrier credited to a
    /// line that holds no PTX mbarrier wait (the inline fast path, credited to the preceding
    /// line), or a wait whose failure branch leads straight into one of `set` (the retry loop).
    fn join_split_waits(&self, set: &mut Vec<InstId>, wait_lines: &[u32]) {
        let is_wait = |id: InstId| {
            matches!(self.sass.inst(id).kind, InstKind::Mbarrier(MbarrierOp::Wait { .. }))
        };
        let addresses: Vec<_> =
            set.iter().filter_map(|&id| self.sass.inst(id).address.clone()).collect();
        let mut extra = Vec::new();
        for id in self.sass.ids() {
            if set.contains(&id) || !is_wait(id) {
                continue;
            }
            let inst = self.sass.inst(id);
            let same_barrier = inst.address.as_ref().is_some_and(|a| addresses.contains(a))
                && inst.ptx_line.is_none_or(|l| !wait_lines.contains(&l));
            let into_set = |t: &InstId| {
                set.iter().any(|s| s.index() >= t.index() && s.index() < t.index() + 8)
            };
            let branches_into = (id.index() + 1..(id.index() + 4).min(self.sass.insts.len()))
                .flat_map(|k| self.sass.insts[k].control.targets.iter())
                .any(into_set);
            let tested_into = self
                .failure_branch(id)
                .is_some_and(|b| self.sass.inst(b).control.targets.iter().any(into_set));
            if same_barrier || branches_into || tested_into {
                extra.push(id);
            }
        }
        set.extend(extra);
        set.sort();
    }

    /// The branch that tests the result of the mbarrier wait `wait`: the first branch after it,
    /// before its predicate is written again or control leaves the straight run, whose guard
    /// reads that predicate. ptxas schedules other work between the two (lmdeploy's `sm_90` GEMM
    /// kernels: `SYNCS.PHASECHK.TRANS64.TRYWAIT P3, [UR10+0x20698], R2`, 28 instructions of
    /// `FFMA` and loads, then `@!P3 BRA` to the retry loop).
    fn failure_branch(&self, wait: InstId) -> Option<InstId> {
        let predicate = *self.sass.inst(wait).defs.first()?;
        for k in self.sass.ids().skip(wait.index() + 1).take(SPLIT_WAIT_SPAN) {
            let inst = self.sass.inst(k);
            let tests = inst.guard.is_some_and(|g| g.reg == predicate)
                || inst.control.condition.is_some_and(|c| c.reg == predicate);
            if !inst.control.targets.is_empty() || !inst.control.falls_through {
                return tests.then_some(k);
            }
            if inst.defs.contains(&predicate) {
                return None;
            }
        }
        None
    }

    fn diagnostic(&self, finding: &Finding, line_of_ptx: impl Fn(InstId) -> u32) -> Diagnostic {
        let op = self.sass.inst(finding.sass_op);
        let at = self.sass.inst(finding.sass_point);
        let ptx_op = self.ptx.inst(finding.ptx_op);
        let ptx_point = self.ptx.inst(finding.point);
        let op_line = line_of_ptx(finding.ptx_op);
        let point_line = line_of_ptx(finding.point);
        let noun = Access::of(&op.kind).noun();
        let point_noun = finding.point_kind.noun();
        let who = self.producer.unwrap_or("ptxas");
        let (direction, order) =
            if finding.hoisted { ("above", "after") } else { ("below", "before") };
        let message = format!(
            "{who} moved the {noun} of PTX line {op_line} (`{}` at {}) {direction} the {point_noun} \
             of PTX line {point_line} (`{}` at {}) that it comes {order} in PTX",
            op.opcode,
            address(op),
            at.opcode,
            address(at),
        );
        let help = if finding.hoisted {
            format!(
                "pin the order: put `__syncwarp()` (`bar.warp.sync`) right after the {point_noun}, \
                 which ptxas does not schedule across, or assemble with a ptxas that keeps the \
                 order; report the pair of files to NVIDIA"
            )
        } else {
            format!(
                "pin the order: put `__syncwarp()` (`bar.warp.sync`) right before the {point_noun}, \
                 which ptxas does not schedule across, or assemble with a ptxas that keeps the \
                 order; report the pair of files to NVIDIA"
            )
        };
        let primary =
            Label::new(self.sass_file, op.range, format!("{direction} the {point_noun} in SASS"))
                .with_address(op.sass_address.map(u64::from))
                .with_source(op.source.as_deref().cloned());
        Diagnostic::new(RULE, self.options.severity, message, primary)
            .with_secondary(
                Label::new(self.sass_file, at.range, format!("the {point_noun} in SASS"))
                    .with_address(at.sass_address.map(u64::from)),
            )
            .with_secondary(
                Label::new(self.ptx_file, ptx_op.range, format!("the {noun} in PTX"))
                    .with_source(ptx_op.source.as_deref().cloned()),
            )
            .with_secondary(
                Label::new(self.ptx_file, ptx_point.range, format!("the {point_noun} in PTX"))
                    .with_source(ptx_point.source.as_deref().cloned()),
            )
            .with_note(format!(
                "this judges the compiler's output, not the source: the PTX orders the {noun} \
                 {order} `{}`, the SASS does not",
                ptx_point.opcode
            ))
            .with_help(help)
            .with_kernel(self.sass.name.clone())
            .with_dialect(Dialect::Sass)
            .with_fingerprint(stable_hash([
                RULE,
                self.sass.name.as_str(),
                op.opcode.as_str(),
                at.opcode.as_str(),
                ptx_op.opcode.as_str(),
                ptx_point.opcode.as_str(),
            ]))
    }
}

fn address(inst: &Inst) -> String {
    inst.sass_address.map_or_else(|| "?".to_owned(), |a| format!("/*{a:04x}*/"))
}

trait WithFingerprint {
    #[must_use]
    fn with_fingerprint(self, fingerprint: String) -> Self;
}

impl WithFingerprint for Diagnostic {
    /// Sets the fingerprint, which names only the instructions of the finding: it is its anchor
    /// as well (`Diagnostic::anchor`).
    fn with_fingerprint(mut self, fingerprint: String) -> Self {
        self.anchor = Some(fingerprint.clone());
        self.fingerprint = Some(fingerprint);
        self
    }
}
