//! The fused iterations on a decomposed backend over NCCL (one rank on GPU 0): the fused
//! CR and the fused BiCGStab against one GPU, the CR's sums over peer memory against
//! NCCL's all-gathers, and the reliable updates recorded as graphs.

use super::gpu;
use qcd_solve::comms::nccl::communicator::NcclComms;

/// The fused-CR tests' problem: a random 8^3x16 gauge field and source (seed `seed`),
/// kappa 0.12, kernel 3.0 with 128-thread blocks.
struct FusedCase {
    gauge: qcd_solve::field::GaugeField,
    source: qcd_solve::field::SpinorField,
    opts: qcd_solve::backend::cuda::CudaOptions,
    kappa: f64,
}

/// What `FusedCase::solve` reports of one solve.
struct FusedRun {
    iterations: usize,
    history: Vec<f64>,
    reason: qcd_solve::solver::StopReason,
    reliable_updates: usize,
    /// The backend's books of the solve (per kernel and the graphs, `launches`).
    stats: Vec<qcd_solve::backend::cuda::KernelStat>,
}

impl FusedRun {
    /// Launches booked as `name` (a kernel, or "cr graph").
    fn launches(&self, name: &str) -> u64 {
        self.stats
            .iter()
            .find(|k| k.name == name)
            .map_or(0, |k| k.launches)
    }
}

impl FusedCase {
    fn new(seed: u64) -> FusedCase {
        use qcd_solve::backend::cuda::{CudaOptions, StencilVersion};
        use qcd_solve::field::{GaugeField, SpinorField};
        use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
        let _ = gpu();
        let l = Lattice::new([8, 8, 8, 16], DEFAULT_BOUNDARY).unwrap();
        FusedCase {
            gauge: GaugeField::random(&l, seed),
            source: SpinorField::random(l.volume(), seed, 1 << 40),
            opts: CudaOptions {
                version: StencilVersion::V3_0,
                coarse_block: 128,
                ..CudaOptions::default()
            },
            kappa: 0.12,
        }
    }

    /// The undecomposed backend on GPU 0.
    fn whole(&self) -> qcd_solve::backend::cuda::CudaBackend {
        qcd_solve::backend::cuda::CudaBackend::new(&self.gauge, self.kappa, &self.opts).unwrap()
    }

    /// The decomposed backend of grid 1,1,1,1 whose exchange is an NCCL communicator of
    /// one rank on GPU 0 (`peer`: `SharedNccl::in_one_process`, the sums over peer memory).
    fn split(&self, peer: bool) -> qcd_solve::backend::cuda::CudaBackend {
        use qcd_solve::backend::cuda::{local_gauge, stream_on, CudaBackend};
        use qcd_solve::comms::nccl::shared::SharedNccl;
        use qcd_solve::geometry::partition::Partition;
        let p = Partition::new(self.gauge.lattice.dims, [1, 1, 1, 1], 0).unwrap();
        let id = qcd_solve::comms::nccl::library::new_unique_id().unwrap();
        let nccl = NcclComms::new(stream_on(0).unwrap(), 0, 1, &id).unwrap();
        let shared = if peer {
            SharedNccl::in_one_process(nccl)
        } else {
            SharedNccl::new(nccl)
        };
        let (comms, exchange) = shared.handles();
        let local = local_gauge(&self.gauge, &p).unwrap();
        CudaBackend::new_decomposed(&local, self.kappa, &self.opts, p, exchange, comms).unwrap()
    }

    /// One fused CR solve of g5 D x = g5 source (tolerance 1e-10, a check every 10
    /// iterations) on `b`, its graphs forgotten after.
    fn solve(
        &self,
        b: &mut qcd_solve::backend::cuda::CudaBackend,
        even_odd: bool,
        prec: qcd_solve::backend::Precision,
    ) -> FusedRun {
        self.solve_with(qcd_solve::solver::Method::Cr, b, even_odd, prec)
    }

    /// `solve` with `method` (CR: g5 D x = g5 source; BiCGStab: D x = source).
    fn solve_with(
        &self,
        method: qcd_solve::solver::Method,
        b: &mut qcd_solve::backend::cuda::CudaBackend,
        even_odd: bool,
        prec: qcd_solve::backend::Precision,
    ) -> FusedRun {
        use qcd_solve::backend::prelude::*;
        use qcd_solve::backend::{Layout, Subset};
        use qcd_solve::solver::{solve, SolveSpec, StopRules};
        let mut s = SolveSpec::new(method, StopRules::new(1e-10, 2000));
        s.fused = true;
        s.check_every = 10;
        s.even_odd = even_odd;
        s.precision = prec;
        let subset = if even_odd { Subset::Even } else { Subset::Full };
        b.prepare(Layout::new(subset, prec), true).unwrap();
        b.reset_stats().unwrap();
        let form = method.default_operator();
        let rhs_host = if form.gamma5() {
            self.source.gamma5()
        } else {
            self.source.clone()
        };
        let rhs = b.upload(&rhs_host).unwrap();
        let src = b.upload(&self.source).unwrap();
        let out = solve(b, &s, form, &rhs, Some(&src), &mut |_, _| {}).unwrap();
        let stats = b.kernel_stats();
        b.forget_graphs();
        FusedRun {
            iterations: out.iterations,
            history: out.history,
            reason: out.reason,
            reliable_updates: out.stats.reliable_updates,
            stats,
        }
    }
}

fn bits(v: &[f64]) -> Vec<u64> {
    v.iter().map(|x| x.to_bits()).collect()
}

/// The fused CR on a decomposed backend whose exchange is an NCCL communicator of one
/// rank (grid 1,1,1,1): its three reductions end in an ncclAllGather and the rank-order
/// sum kernel, and the iterations are recorded into CUDA graphs (NCCL is capturable). The
/// expected values come from the same solve on the undecomposed backend (one GPU, the
/// stencil's fused (r|Ar) epilogue): the same iteration count and histories within 1e-12
/// (absolute, relative residuals; the decomposed (r|Ar) is a separate pass over the
/// elements, so it adds in another order: rounding at 1e-16); in single-double iterations
/// within 3.
#[test]
fn the_fused_cr_over_nccl_runs_in_graphs_and_follows_one_gpu() {
    follows_one_gpu(qcd_solve::solver::Method::Cr, 5);
}

/// The fused BiCGStab on the same decomposed backend over NCCL (grid 1,1,1,1): its four
/// reductions end in an ncclAllGather and `bi_global`, and the iterations are recorded
/// into CUDA graphs. Expected values from the fused BiCGStab on the undecomposed backend:
/// in double the same iteration count and histories within 1e-12 (the sums are the same
/// numbers added by bi_global after the block tree instead of in it: rounding at 1e-16);
/// in single-double iterations within 3.
#[test]
fn the_fused_bicgstab_over_nccl_runs_in_graphs_and_follows_one_gpu() {
    follows_one_gpu(qcd_solve::solver::Method::Bicgstab, 6);
}

/// The checks of the two tests above for `method` on `FusedCase::new(seed)`.
fn follows_one_gpu(method: qcd_solve::solver::Method, seed: u64) {
    use qcd_solve::backend::Precision;
    use qcd_solve::solver::StopReason;
    let case = FusedCase::new(seed);
    let mut split = case.split(false);
    let mut whole = case.whole();
    for even_odd in [false, true] {
        for prec in [Precision::Double, Precision::Single] {
            let w = case.solve_with(method, &mut whole, even_odd, prec);
            let g = case.solve_with(method, &mut split, even_odd, prec);
            let (wi, gi, reason, graphs) =
                (w.iterations, g.iterations, g.reason, g.launches("cr graph"));
            let worst = g
                .history
                .iter()
                .zip(&w.history)
                .map(|(a, b)| (a - b).abs())
                .fold(0.0, f64::max);
            eprintln!(
                "fused {} over NCCL, even_odd={even_odd} {prec:?}: {gi} iterations (one GPU {wi}), {reason:?}, {graphs} graph launches, history max |diff| {worst:.2e}",
                method.label()
            );
            assert_eq!(reason, StopReason::Converged);
            assert!(graphs > 0, "no CUDA graph was launched");
            if prec == Precision::Double {
                assert_eq!(gi, wi);
                assert!(worst <= 1e-12, "history differs by {worst:e}");
            } else {
                assert!(gi.abs_diff(wi) <= 3, "{gi} iterations vs {wi}");
            }
        }
    }
}

/// The fused CR's sums over peer memory (`cr_peer_sum`, `SharedNccl::in_one_process`)
/// against NCCL's all-gather and `cr_global` (`SharedNccl::new`), one rank on GPU 0 (its
/// own buffer is its only peer's): the same sums in the same order, so the same bits:
/// equal iterations and equal histories, in graphs (the solves launch some) and over
/// several runs of the same backends (the sequence numbers carry on between runs).
#[test]
fn peer_sums_give_the_bits_of_the_nccl_all_gathers() {
    use qcd_solve::backend::Precision;
    use qcd_solve::solver::StopReason;
    let case = FusedCase::new(7);
    let mut nccl = case.split(false);
    let mut peer = case.split(true);
    assert!(
        !nccl.peer_sums() && peer.peer_sums(),
        "the wiring picks the sums"
    );
    for (even_odd, prec) in [
        (true, Precision::Single),
        (false, Precision::Double),
        (true, Precision::Single),
    ] {
        let n = case.solve(&mut nccl, even_odd, prec);
        let p = case.solve(&mut peer, even_odd, prec);
        let (ngraphs, npeer) = (n.launches("cr graph"), n.launches("cr_peer_sum"));
        let (pgraphs, ppeer) = (p.launches("cr graph"), p.launches("cr_peer_sum"));
        let (ni, pi) = (n.iterations, p.iterations);
        eprintln!(
            "peer sums, even_odd={even_odd} {prec:?}: {pi} iterations (NCCL {ni}), {pgraphs} graph launches (NCCL {ngraphs}), {ppeer} eager cr_peer_sum launches"
        );
        assert_eq!(
            (n.reason, p.reason),
            (StopReason::Converged, StopReason::Converged)
        );
        assert!(pgraphs > 0, "no CUDA graph was launched");
        assert_eq!(npeer, 0, "the NCCL backend launched cr_peer_sum");
        assert_eq!(pi, ni, "iterations");
        assert_eq!(bits(&p.history), bits(&n.history), "histories differ");
    }
}

/// The reliable updates recorded as a CUDA graph (`set_record_updates`, opt-in) against
/// the same updates queued one launch at a time: the same kernels on the same values, so
/// the same bits (iterations, histories), with more graph launches (the records'
/// replays: from the second update on). On one GPU and on one rank split over NCCL (whose
/// exchanges are then captured too), eo single-double CR.
#[test]
fn recorded_reliable_updates_give_the_same_bits() {
    use qcd_solve::backend::Precision;
    use qcd_solve::solver::StopReason;
    let case = FusedCase::new(9);
    for (what, mut b) in [
        ("one GPU", case.whole()),
        ("one rank over NCCL", case.split(false)),
    ] {
        b.set_record_updates(false);
        let q = case.solve(&mut b, true, Precision::Single);
        b.set_record_updates(true);
        let r = case.solve(&mut b, true, Precision::Single);
        let (qi, qu, qg) = (q.iterations, q.reliable_updates, q.launches("cr graph"));
        let (ri, ru, rg) = (r.iterations, r.reliable_updates, r.launches("cr graph"));
        eprintln!(
            "recorded updates, {what}: {ri} iterations ({qi} queued), {ru} reliable updates, {rg} graph launches ({qg} queued)"
        );
        assert_eq!(
            (q.reason, r.reason),
            (StopReason::Converged, StopReason::Converged)
        );
        assert!(ru >= 3, "{ru} reliable updates: too few to replay a record");
        assert_eq!((ri, ru), (qi, qu), "iterations and reliable updates");
        assert_eq!(
            rg,
            qg + (ru as u64 - 1),
            "one graph launch per update after the first"
        );
        assert_eq!(bits(&r.history), bits(&q.history), "histories differ");
    }
}
