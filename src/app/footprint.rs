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
        out.push(cuda_fp::bi_state(plan.max_iterations as u64));
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
    // Single and half iterations read the single-precision links (and clover term).
    if fast && plan.layout.precision != Precision::Double {
        prepared.push(cuda_fp::v3_links(
            v,
            plan.opts.reconstruct,
            Precision::Single,
        ));
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
mod tests {
    use super::*;
    use crate::backend::counted::Counted;
    use crate::backend::cpu::CpuBackend;
    use crate::backend::cuda::StencilVersion;
    use crate::field::{GaugeField, SpinorField};
    use crate::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
    use crate::linalg::Operator;
    use crate::problem::Problem;
    use crate::solver::{CrParams, StopReason};

    const GIB: u64 = 1 << 30;

    fn opts(version: StencilVersion, reconstruct_12: bool) -> CudaOptions {
        CudaOptions {
            version,
            reconstruct: if reconstruct_12 {
                crate::backend::cuda::Reconstruct::R12
            } else {
                crate::backend::cuda::Reconstruct::R18
            },
            ..CudaOptions::default()
        }
    }

    /// A plan as the main job makes it: CR fused on 3.0 (the default iteration), others
    /// as asked.
    fn plan(method: Method, even_odd: bool, precision: Precision) -> SolvePlan {
        let mut p = SolvePlan::seed(CrParams::new(1e-10, 2000));
        p.method = method;
        p.fused = method == Method::Cr;
        p.precision = precision;
        p.preconditioning = if even_odd {
            Preconditioning::EvenOdd
        } else {
            Preconditioning::None
        };
        p
    }

    fn fast_estimate(volume: usize, method: Method) -> DeviceEstimate {
        let p = plan(method, true, Precision::Single);
        estimate(&DevicePlan::of_run(
            volume,
            &opts(StencilVersion::V3_0, true),
            &p,
            false,
        ))
    }

    #[test]
    fn even_odd_single_double_r12_needs_at_most_1500_bytes_per_site() {
        // The peak is the solve: links double r12 (384) and single r12 (192), the Schur
        // temporary (96), rhs_e and b_o (2 x 96), x_d and the scratch (2 x 96), the inner
        // rhs (48) and the method's fields in even single (48 each), plus partial sums
        // and the CR state (under 1 B/site here).
        for volume in [16 * 16 * 16 * 32, 64 * 64 * 64 * 128] {
            for (method, fields) in [(Method::Cr, 5), (Method::Bicgstab, 6), (Method::Cgne, 5)] {
                let e = fast_estimate(volume, method);
                let base = 384 + 192 + 96 + 2 * 96 + 2 * 96 + 48 + 48 * fields;
                let b = e.bytes_per_site();
                assert!(b <= 1500.0, "{method}: {b} B/site");
                assert!(b >= base as f64 && b < base as f64 + 2.0, "{method}: {b}");
                assert_eq!(e.peak().name, "solve", "{method}");
            }
        }
    }

    #[test]
    fn the_working_reserve_is_the_largest_phase_beyond_what_stays() {
        // The estimate's source preparation, solve, reconstruction and check phases each
        // hold the resident part (the check's beside its three full fields) plus what the
        // solve allocates and frees itself: the largest of them is the resident part plus
        // `solve_working_bytes`. The seed's even-odd single-double BiCGStab: the solve
        // phase, rhs_e and b_o (2 x 96 B/site), x_d and the scratch (2 x 96), the inner rhs
        // (48) and six fields (6 x 48), and the fused state (history and partials).
        let v = 16 * 16 * 16 * 32;
        for method in [Method::Cr, Method::Bicgstab, Method::Gcr] {
            for even_odd in [false, true] {
                let mut p = plan(method, even_odd, Precision::Single);
                p.fused = method != Method::Gcr;
                let dp = DevicePlan::of_run(v, &opts(StencilVersion::V3_0, true), &p, false);
                let e = estimate(&dp);
                let check = e.phases.iter().find(|x| x.name == "check").unwrap();
                let resident = check.bytes() - 3 * (v as u64) * 192;
                let largest = e
                    .phases
                    .iter()
                    .filter(|x| {
                        ["source preparation", "solve", "reconstruction", "check"].contains(&x.name)
                    })
                    .map(|x| x.bytes())
                    .max()
                    .unwrap();
                assert_eq!(
                    resident + solve_working_bytes(&dp),
                    largest,
                    "{method} {even_odd}"
                );
            }
        }
        let mut p = plan(Method::Bicgstab, true, Precision::Single);
        p.fused = true;
        let dp = DevicePlan::of_run(v, &opts(StencilVersion::V3_0, true), &p, false);
        let fields = (v as u64) * (2 * 96 + 2 * 96 + 48 + 6 * 48);
        let state = crate::backend::cuda::backend::footprint::bi_state(2000).bytes;
        assert_eq!(solve_working_bytes(&dp), fields + state);
    }

    #[test]
    fn eight_real_links_take_a_third_less_than_twelve() {
        // r8 stores 8 reals per link instead of 12: links double 256 B/site (not 384) and
        // single 128 (not 192), so the even-odd single-double CR peak drops by 192 B/site.
        let p = plan(Method::Cr, true, Precision::Single);
        let v = 1 << 20;
        let of = |r| {
            let o = CudaOptions {
                version: StencilVersion::V3_0,
                reconstruct: r,
                ..CudaOptions::default()
            };
            estimate(&DevicePlan::of_run(v, &o, &p, false)).bytes_per_site()
        };
        let (r12, r8) = (
            of(crate::backend::cuda::Reconstruct::R12),
            of(crate::backend::cuda::Reconstruct::R8),
        );
        assert!((r12 - r8 - 192.0).abs() < 1e-9, "r12 {r12}, r8 {r8}");
    }

    #[test]
    fn a_64_3x128_even_odd_single_double_r12_solve_fits_an_80_gb_h100() {
        // 64^3 x 128 = 33554432 sites. The seed's 3.0 estimate was 104740159488 bytes
        // (3122 B/site) for every plan; CR and BiCGStab with every option now need about
        // 45 GB, well inside the 79 GiB an 80 GB H100 has free; the report's triad after
        // the solve holds only the resident part besides its 768 MiB.
        let v = 64 * 64 * 64 * 128;
        for method in [Method::Cr, Method::Bicgstab] {
            let e = fast_estimate(v, method);
            assert!(e.need() < 79 * GIB, "{method}: {}", e.describe());
            assert!(e.need() < 50_000_000_000, "{method}: {}", e.describe());
            let triad = e.phases.iter().find(|p| p.name == "triad").unwrap();
            assert!(triad.bytes() < e.peak_bytes());
        }
        // The seed versions with the seed's plan: 1.6.1 holds the seed buffer and its
        // reordered copy at the set-up (2304 B/site, 77.3e9 bytes: inside an 80 GB H100's
        // free memory by this exact count, where the old per-version bound refused it);
        // 2.0 adds its temporaries to the solve (2688 B/site, 90.2e9: refused on an H100,
        // inside an H200's 141 GB).
        let seed = |version| {
            estimate(&DevicePlan::of_run(
                v,
                &opts(version, false),
                &SolvePlan::seed(CrParams::new(1e-10, 2000)),
                true,
            ))
        };
        let e = seed(StencilVersion::V1_6_1);
        assert_eq!(e.bytes_per_site().floor(), 2304.0, "{}", e.describe());
        let e = seed(StencilVersion::V2_0);
        assert_eq!(e.bytes_per_site().floor(), 2688.0, "{}", e.describe());
        assert!(e.need() > 85_000_000_000 && e.need() < 140 * GIB);
    }

    #[test]
    fn bytes_per_site_per_plan_as_the_readme_lists_them() {
        // (version, r12, method, even-odd, precision) -> B/site at 2^20 sites of the fields
        // and links, the README's table; reduction partials and the CR state add under
        // 2 B/site.
        let v = 1 << 20;
        let table = [
            (
                StencilVersion::V3_0,
                false,
                Method::Cr,
                false,
                Precision::Double,
                1728,
            ),
            (
                StencilVersion::V3_0,
                false,
                Method::Cr,
                false,
                Precision::Single,
                2016,
            ),
            (
                StencilVersion::V3_0,
                false,
                Method::Cr,
                true,
                Precision::Double,
                1344,
            ),
            (
                StencilVersion::V3_0,
                false,
                Method::Cr,
                true,
                Precision::Single,
                1632,
            ),
            (
                StencilVersion::V3_0,
                true,
                Method::Cr,
                false,
                Precision::Double,
                1536,
            ),
            (
                StencilVersion::V3_0,
                true,
                Method::Cr,
                true,
                Precision::Double,
                1152,
            ),
            (
                StencilVersion::V3_0,
                true,
                Method::Cr,
                true,
                Precision::Single,
                1344,
            ),
            (
                StencilVersion::V3_0,
                true,
                Method::Bicgstab,
                true,
                Precision::Single,
                1392,
            ),
            (
                StencilVersion::V3_0,
                true,
                Method::Cgne,
                true,
                Precision::Single,
                1344,
            ),
            (
                StencilVersion::V3_0,
                true,
                Method::Gcr,
                true,
                Precision::Single,
                2160,
            ),
            (
                StencilVersion::V1_6_1,
                false,
                Method::Cr,
                false,
                Precision::Double,
                2304,
            ),
            (
                StencilVersion::V1_5,
                false,
                Method::Cr,
                false,
                Precision::Double,
                2304,
            ),
        ];
        for (version, r12, method, eo, prec, want) in table {
            let mut p = plan(method, eo, prec);
            if !version.is_fast_path() {
                p.fused = false;
            }
            let e = estimate(&DevicePlan::of_run(v, &opts(version, r12), &p, false));
            let b = e.bytes_per_site();
            assert!(
                b >= want as f64 && b < want as f64 + 2.0,
                "{version} r12 {r12} {}: {}",
                p.describe(),
                e.describe()
            );
        }
    }

    #[test]
    fn tuning_and_a_decomposition_add_their_phases_and_buffers() {
        let v = 8 * 8 * 8 * 16;
        let p = plan(Method::Cr, true, Precision::Single);
        let o = opts(StencilVersion::V3_0, true);
        let tuned = estimate(&DevicePlan::of_run(v, &o, &p, true));
        let t = tuned.phases.iter().find(|p| p.name == "tuning").unwrap();
        // A full double field uploaded, then two even single fields.
        assert_eq!(
            t.field_bytes(),
            field_bytes(Layout::FULL, v) + 2 * field_bytes(plan_layout(&p), v)
        );
        let part = Partition::new([8, 8, 8, 16], [1, 1, 2, 2], 1).unwrap();
        let rank = estimate(&DevicePlan::of_rank(&part, &o, &p));
        assert_eq!(rank.volume, v / 4);
        let halo = rank
            .peak()
            .lines
            .iter()
            .find(|l| l.purpose == Purpose::Halo);
        // A face set per split direction (z, t) and the global sums' buffer.
        assert_eq!(halo.map(|l| l.count), Some(3));
        assert!(rank.phases.iter().all(|p| p.name != "triad"));
    }

    fn problem(dims: [usize; 4]) -> Problem {
        let lattice = Lattice::new(dims, DEFAULT_BOUNDARY).unwrap();
        let gauge = GaugeField::random(&lattice, 3);
        Problem {
            plaquette: gauge.plaquette(),
            link_trace: gauge.link_trace(),
            source: SpinorField::random(lattice.volume(), 8, 1 << 40),
            lattice,
            gauge,
            gauge_description: "random".into(),
            gauge_reunitarised: None,
            kappa: 0.12,
            csw: 0.0,
            mu: 0.0,
            operator: Operator::G5D,
            source_description: "random".into(),
            setup_seconds: 0.0,
        }
    }

    /// The fields of the phase that holds the most fields (the first, as the books keep).
    fn field_peak_lines(e: &DeviceEstimate) -> Vec<MemoryLine> {
        let mut best = &e.phases[0];
        for p in &e.phases {
            if p.field_bytes() > best.field_bytes() {
                best = p;
            }
        }
        best.lines
            .iter()
            .filter(|l| matches!(l.purpose, Purpose::Fields(_)))
            .copied()
            .collect()
    }

    #[test]
    fn the_estimate_counts_the_fields_the_solve_really_allocates() {
        // The app's solve flow (solve_on: uploads, preparation, the method, the wrappers,
        // reconstruction, the final check) on the CPU backend with every field booked at
        // its GPU size: the books' peak and its parts are the estimate's field phase.
        let v = 4 * 4 * 4 * 8;
        for method in Method::ALL {
            for eo in [false, true] {
                for prec in [Precision::Double, Precision::Single] {
                    let mut sp = plan(method, eo, prec);
                    sp.restart = 4;
                    let mut p = problem([4, 4, 4, 8]);
                    p.operator = method.default_operator();
                    let mut be = Counted::new(CpuBackend::new(&p.gauge, p.kappa), v);
                    let r = crate::app::run::solve_on(&mut be, &p, &sp).unwrap();
                    assert_eq!(r.reason, StopReason::Converged, "{}", sp.describe());
                    let books = be.books();
                    let e = estimate(&DevicePlan::of_run(
                        v,
                        &opts(StencilVersion::V3_0, true),
                        &sp,
                        false,
                    ));
                    assert_eq!(books.held_bytes, 0, "{}: fields left", sp.describe());
                    assert_eq!(
                        books.peak_bytes,
                        e.field_peak(),
                        "{}: books {:?}, estimate {:?}",
                        sp.describe(),
                        books.at_peak,
                        field_peak_lines(&e)
                    );
                    assert_eq!(books.at_peak, field_peak_lines(&e), "{}", sp.describe());
                }
            }
        }
    }
}
