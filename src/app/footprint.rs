//! The device memory a GPU run will hold, estimated from its plan before anything is
//! allocated: phase by phase (the backend's set-up, the tuner, the solve's preparation,
//! the solve, the even-odd reconstruction, the final check, the report's triad), each the
//! allocations alive at its peak, in the purposes of the backend's books
//! (`backend::ledger`). The backend's sizes come from `backend::cuda::footprint`, the
//! solver's field counts from the solvers themselves (`Method::fields`,
//! `solver::mixed::{OUTER_FIELDS, INNER_FIELDS}`), and the flow from `app::run::solve_on`;
//! tests run that flow on a counting space (`backend::counted`) and on the GPU set the
//! estimate beside the books of a live backend (tests/gpu_memory.rs).
//!
//! Phases of the main job (F: a full double field; Hd: a half double field; L: a field of
//! the iterated layout; N: the method's fields; resident: links, reduction partials and
//! what the plan's layout adds: single links, the Schur temporary):
//!
//! ```text
//! set-up         the construction's peak (seed versions: the canonical copy too)
//! tuning         resident + the tuner's fields (2 F for a full double layout, F + 2 L else)
//! preparation    resident + a fused CR state of one history entry (fused iterations)
//! full lattice:  solve: resident + b (F) + the solve's fields; check: resident + 3 F
//! even-odd:      source preparation: resident + F + 3 Hd (source, b_e, b_o, rhs_e)
//!                solve: resident + rhs_e, b_o (2 Hd) + the solve's fields
//!                reconstruction: resident + x_e, b_o, x_o (3 Hd) + x (F)
//!                check: resident + 3 F (x, b uploaded after the solve, A x)
//! solve's fields: double: N L (+ CR state); single-double: 2 outer (x_d, scratch) +
//!                 1 L (the inner rhs) + N L (+ CR state)
//! triad          resident + 768 MiB (the report's bandwidth reference; not per site)
//! ```
//!
//! One exception, not counted: BiCGStab's second breakdown in a row (exact zeros, seen
//! only with special sources) takes a random shadow residual through one more full field
//! for a moment.

use crate::app::plan::SolvePlan;
use crate::backend::cuda::backend::footprint::{self as cuda_fp, total};
use crate::backend::cuda::CudaOptions;
use crate::backend::ledger::{describe_lines, field_bytes, sorted_lines, MemoryLine, Purpose};
use crate::config::Preconditioning;
use crate::geometry::partition::Partition;
use crate::linalg::{Layout, Precision, Subset};
use crate::solver::mixed::{INNER_FIELDS, OUTER_FIELDS};
use crate::solver::Method;
use serde::Serialize;

/// What the estimate depends on.
#[derive(Clone, Debug)]
pub struct DevicePlan {
    /// Sites of the lattice the backend holds (a rank's sub-lattice when decomposed).
    pub volume: usize,
    /// Stencil version, two-row compression.
    pub opts: CudaOptions,
    /// The layout the method iterates on (its precision; Even for even-odd).
    pub layout: Layout,
    pub method: Method,
    /// GCR's restart length.
    pub restart: usize,
    /// CR or BiCGStab by the fused iteration (device scalars).
    pub fused: bool,
    /// The fused CR's history holds max_iterations + 1 entries.
    pub max_iterations: usize,
    /// The live tuner may time the operator before the solve (`tune = true`).
    pub tune: bool,
    /// The decomposition of a rank (halo buffers, gathered sums); None on one GPU alone.
    pub partition: Option<Partition>,
    /// The report's triad after the solve (the single-GPU main job).
    pub triad: bool,
    /// A site term (the clover term, a twist): its arrays stay resident (3.0).
    pub site_term: bool,
}

impl DevicePlan {
    /// The main job's plan on one GPU.
    pub fn of_run(volume: usize, opts: &CudaOptions, plan: &SolvePlan, tune: bool) -> Self {
        DevicePlan {
            volume,
            opts: opts.clone(),
            layout: plan_layout(plan),
            method: plan.method,
            restart: plan.restart,
            fused: plan.fused,
            max_iterations: plan.cr.max_iterations,
            tune,
            partition: None,
            triad: true,
            site_term: false,
        }
    }

    /// A rank of a decomposed lattice (no tuning, no triad).
    pub fn of_rank(partition: &Partition, opts: &CudaOptions, plan: &SolvePlan) -> Self {
        DevicePlan {
            volume: partition.local_dims().iter().product(),
            partition: Some(partition.clone()),
            tune: false,
            triad: false,
            ..DevicePlan::of_run(1, opts, plan, false)
        }
    }
}

/// The layout a plan iterates on (even sites for even-odd; the plan's precision).
pub fn plan_layout(plan: &SolvePlan) -> Layout {
    let subset = if plan.preconditioning == Preconditioning::EvenOdd {
        Subset::Even
    } else {
        Subset::Full
    };
    Layout::new(subset, plan.precision)
}

/// The allocations alive at one phase's peak.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Phase {
    pub name: &'static str,
    pub lines: Vec<MemoryLine>,
}

impl Phase {
    pub fn bytes(&self) -> u64 {
        total(&self.lines)
    }

    /// A measurement of fixed size (not part of the per-site peak).
    pub fn is_measurement(&self) -> bool {
        self.lines.iter().any(|l| l.purpose == Purpose::Measurement)
    }

    /// The bytes of spinor fields.
    pub fn field_bytes(&self) -> u64 {
        self.lines
            .iter()
            .filter(|l| matches!(l.purpose, Purpose::Fields(_)))
            .map(|l| l.bytes)
            .sum()
    }
}

/// A plan's device memory, phase by phase.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceEstimate {
    pub volume: usize,
    pub phases: Vec<Phase>,
}

impl DeviceEstimate {
    /// The phase holding the most (the triad aside): the run's peak.
    pub fn peak(&self) -> &Phase {
        let mut best = &self.phases[0];
        for p in self.phases.iter().filter(|p| !p.is_measurement()) {
            if p.bytes() > best.bytes() {
                best = p;
            }
        }
        best
    }

    pub fn peak_bytes(&self) -> u64 {
        self.peak().bytes()
    }

    /// Bytes per site of the lattice at the peak.
    pub fn bytes_per_site(&self) -> f64 {
        self.peak_bytes() as f64 / self.volume as f64
    }

    /// What must be free on the device: the peak, or the triad's phase if larger (small
    /// lattices).
    pub fn need(&self) -> u64 {
        self.phases.iter().map(Phase::bytes).max().unwrap_or(0)
    }

    /// The most spinor-field bytes any phase holds.
    pub fn field_peak(&self) -> u64 {
        self.phases
            .iter()
            .map(Phase::field_bytes)
            .max()
            .unwrap_or(0)
    }

    /// "45.06 GiB at the peak (solve) = 1344.8 B/site: links double r12 12.00 GiB, ...".
    pub fn describe(&self) -> String {
        let p = self.peak();
        format!(
            "{} bytes ({}) at the peak ({}) = {:.1} B/site: {}",
            p.bytes(),
            crate::backend::ledger::human_bytes(p.bytes()),
            p.name,
            self.bytes_per_site(),
            describe_lines(&p.lines)
        )
    }
}

fn fields(layout: Layout, count: usize, volume: usize) -> MemoryLine {
    MemoryLine {
        purpose: Purpose::Fields(layout),
        count,
        bytes: count as u64 * field_bytes(layout, volume),
    }
}

fn phase(name: &'static str, parts: impl IntoIterator<Item = MemoryLine>) -> Phase {
    Phase {
        name,
        lines: sorted_lines(parts),
    }
}

/// The fields (and fused CR or BiCGStab state) a solve of A x = b holds at its peak beside b, for a
/// right-hand side of layout `outer` (double) iterated in `plan.layout`'s precision.
pub fn solve_fields(plan: &DevicePlan, outer: Layout) -> Vec<MemoryLine> {
    let v = plan.volume;
    let inner = outer.with_precision(plan.layout.precision);
    let n = plan.method.fields(plan.restart);
    let mut out = Vec::new();
    if inner != outer {
        out.push(fields(outer, OUTER_FIELDS, v));
        out.push(fields(inner, INNER_FIELDS, v));
    }
    out.push(fields(inner, n, v));
    if plan.method == Method::Cr && plan.fused {
        out.push(cuda_fp::cr_state(
            v,
            plan.max_iterations as u64,
            ranks(plan),
        ));
    }
    if plan.method == Method::Bicgstab && plan.fused {
        out.push(cuda_fp::bi_state(plan.max_iterations as u64, ranks(plan)));
    }
    out
}

/// The most a solve holds of fields it allocates and frees itself (the source's
/// preparation, the solve's fields and state, the reconstruction, the check; the
/// right-hand side included; what stays resident aside): what a GPU backend reserves in its
/// memory pool before the solve's clock starts (`Prepare::reserve`).
pub fn solve_working_bytes(plan: &DevicePlan) -> u64 {
    let v = plan.volume;
    let full = Layout::FULL;
    let phases: Vec<Vec<MemoryLine>> = if plan.layout.subset == Subset::Full {
        let mut s = vec![fields(full, 1, v)];
        s.extend(solve_fields(plan, full));
        vec![s, vec![fields(full, 3, v)]]
    } else {
        let even = Layout::new(Subset::Even, Precision::Double);
        let odd = Layout::new(Subset::Odd, Precision::Double);
        let mut s = vec![fields(even, 1, v), fields(odd, 1, v)];
        s.extend(solve_fields(plan, even));
        vec![
            vec![fields(full, 1, v), fields(even, 2, v), fields(odd, 1, v)],
            s,
            vec![fields(even, 1, v), fields(odd, 2, v), fields(full, 1, v)],
            vec![fields(full, 3, v)],
        ]
    };
    phases.iter().map(|p| total(p)).max().unwrap_or(0)
}

fn ranks(plan: &DevicePlan) -> Option<usize> {
    plan.partition.as_ref().map(|p| p.ranks())
}

/// The plan's phases (see the module documentation).
pub fn estimate(plan: &DevicePlan) -> DeviceEstimate {
    let v = plan.volume;
    let full = Layout::FULL;
    let even = Layout::new(Subset::Even, Precision::Double);
    let odd = Layout::new(Subset::Odd, Precision::Double);
    let fast = plan.opts.version.is_fast_path();
    let construction = cuda_fp::construction(v, &plan.opts);
    let mut phases = vec![phase("set-up", construction.peak.clone())];

    // What stays for the whole run: the links and partials, the halo of a rank, and what
    // the plan's layout adds on 3.0 (made by the tuner or the preparation, whichever
    // comes first).
    let mut resident = construction.resident.clone();
    if let Some(p) = &plan.partition {
        resident.push(cuda_fp::halo(p, plan.opts.reconstruct));
    }
    if fast && plan.site_term {
        resident.push(cuda_fp::clover_term(v, Precision::Double));
    }
    let mut prepared = resident.clone();
    // Single iterations read the single-precision links, half ones the 16-bit links (the
    // single ones with 8 reals a link), both the single clover term.
    if fast && plan.layout.precision != Precision::Double {
        let links = if plan.layout.precision == Precision::Half
            && plan.opts.reconstruct != crate::backend::cuda::Reconstruct::R8
        {
            Precision::Half
        } else {
            Precision::Single
        };
        prepared.push(cuda_fp::v3_links(v, plan.opts.reconstruct, links));
        if plan.site_term {
            prepared.push(cuda_fp::clover_term(v, Precision::Single));
        }
    }
    if fast && plan.layout.subset != Subset::Full {
        prepared.push(cuda_fp::schur_temporary(v));
        // A split lattice's Schur operator with a site term: a second odd temporary.
        if plan.site_term && plan.partition.is_some() {
            prepared.push(cuda_fp::schur_temporary(v));
        }
        if plan.layout.precision == Precision::Half {
            prepared.push(cuda_fp::schur_temporary_norms(v));
        }
    }
    let with = |extra: Vec<MemoryLine>| prepared.iter().copied().chain(extra);

    let base = crate::backend::cuda::Geometry {
        multiple: plan.opts.multiple,
        coarse_block: plan.opts.coarse_block,
        link_hint: 0,
    };
    let candidates = crate::backend::cuda::core::tune::geometry_candidates(plan.opts.version, base);
    if plan.tune && candidates.len() > 1 {
        let tuner = if plan.layout == full {
            vec![fields(full, 2, v)]
        } else {
            vec![fields(full, 1, v), fields(plan.layout, 2, v)]
        };
        phases.push(phase("tuning", with(tuner)));
    }
    if plan.fused {
        phases.push(phase(
            "preparation",
            with(vec![cuda_fp::cr_state(v, 0, ranks(plan))]),
        ));
    }
    if plan.layout.subset == Subset::Full {
        let mut s = vec![fields(full, 1, v)];
        s.extend(solve_fields(plan, full));
        phases.push(phase("solve", with(s)));
    } else {
        phases.push(phase(
            "source preparation",
            with(vec![
                fields(full, 1, v),
                fields(even, 2, v),
                fields(odd, 1, v),
            ]),
        ));
        let mut s = vec![fields(even, 1, v), fields(odd, 1, v)];
        s.extend(solve_fields(plan, even));
        phases.push(phase("solve", with(s)));
        phases.push(phase(
            "reconstruction",
            with(vec![
                fields(even, 1, v),
                fields(odd, 2, v),
                fields(full, 1, v),
            ]),
        ));
    }
    phases.push(phase("check", with(vec![fields(full, 3, v)])));
    if plan.triad {
        phases.push(phase(
            "triad",
            with(vec![cuda_fp::triad(crate::report::TRIAD_BYTES)]),
        ));
    }
    DeviceEstimate { volume: v, phases }
}

/// Refuse, before anything is allocated, a plan whose estimate does not fit in the free
/// memory of GPU `device`: exit 6 naming both numbers, the peak's parts and what lowers the
/// need. `ranks` estimates share the GPU (ranks as threads on one GPU): their needs add.
pub fn check_device(
    what: &str,
    estimates: &[DeviceEstimate],
    plan: &DevicePlan,
    device: usize,
) -> crate::Result<()> {
    let need: u64 = estimates.iter().map(DeviceEstimate::need).sum();
    let mut detail = match estimates {
        [one] => one.describe(),
        many => format!(
            "{} ranks sharing it, each {}",
            many.len(),
            many[0].describe()
        ),
    };
    if estimates.iter().any(|e| e.need() > e.peak_bytes()) {
        detail.push_str(&format!(
            "; the report's triad after the solve needs {}",
            crate::backend::ledger::human_bytes(estimates[0].need())
        ));
    }
    let advice =
        crate::app::memory::device_advice(plan.opts.version, plan.layout, plan.opts.reconstruct);
    crate::app::memory::check_device(what, need, &detail, &advice, device)
}

/// "lattice 16x16x16x32 with stencil 3.0 r12, fused CR, even-odd, single-double (delta 0.1)".
pub fn run_name(dims: &str, opts: &CudaOptions, plan: &SolvePlan) -> String {
    format!(
        "lattice {dims} with stencil {}{}, {}",
        opts.version,
        match opts.reconstruct {
            crate::backend::cuda::Reconstruct::R18 => String::new(),
            r => format!(" {}", r.label()),
        },
        plan.describe()
    )
}

/// The report's device-memory record: the estimate's peak beside the books' (the main job).
pub fn memory_report(
    estimate: &DeviceEstimate,
    books: &crate::backend::ledger::MemoryBooks,
) -> crate::report::DeviceMemory {
    let peak = estimate.peak();
    crate::report::DeviceMemory {
        estimate_phase: peak.name.to_string(),
        estimate_bytes: peak.bytes(),
        estimate_bytes_per_site: estimate.bytes_per_site(),
        estimate_parts: peak.lines.clone(),
        peak_bytes: books.peak_bytes,
        peak_bytes_per_site: books.peak_bytes as f64 / estimate.volume as f64,
        peak_parts: books.at_peak.clone(),
    }
}

#[cfg(test)]
mod tests;
