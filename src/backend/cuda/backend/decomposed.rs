//! `CudaBackend` on a decomposed lattice: `new_decomposed` builds a rank's
//! backend (version 3.0 only) around its sub-lattice, a `DeviceExchange` for the faces and
//! a host `Comms` for the global sums; the halo books (`HaloTimings`); the helpers that cut
//! a rank's sub-lattice out of global fields and put it back (tests, single-process runs);
//! and `time_decomposed_apply`, the decomposed operator's cost against the undecomposed
//! one on the same GPU, for the app's `floor` / `scale` reports.

use crate::backend::cuda::backend::{CudaBackend, CudaOptions};
use crate::backend::cuda::halo::peer::PeerCopies;
use crate::backend::cuda::halo::rank::Halo;
use crate::backend::cuda::halo::timings::HaloTimings;
use crate::comms::{Comms, DeviceExchange};
use crate::error::{Error, Result};
use crate::field::{GaugeField, SpinorField};
use crate::geometry::lattice::{Lattice, NDIM};
use crate::geometry::partition::Partition;
use crate::linalg::{Operator, Space, WilsonKernels};
use std::time::Instant;

impl CudaBackend {
    /// A rank's backend of a lattice decomposed by `partition`: `gauge` is the rank's
    /// local field (its lattice `partition.local_lattice(boundary)`: local extents, global
    /// extents and offset), `exchange` moves the faces between the ranks' devices
    /// (`PeerCopies` for ranks as threads on one GPU, NCCL across GPUs) and carries the
    /// global sums of dot and norm2 (every rank's partial gathered on the device, then
    /// added in rank order: `Halo::global_sum_device`), `comms` the one-time exchange of
    /// the ghost links and the host's agreements and barriers. Version 3.0 only (its fast
    /// path: full and even-odd, double and single, 12-real links, the fused CR iteration
    /// with its sums over ranks on the device).
    pub fn new_decomposed(
        gauge: &GaugeField,
        kappa: f64,
        opts: &CudaOptions,
        partition: Partition,
        exchange: Box<dyn DeviceExchange>,
        comms: Box<dyn Comms>,
    ) -> Result<Self> {
        if !opts.version.is_fast_path() {
            return Err(Error::invalid(
                "parallel.grid",
                format!(
                    "a decomposed lattice needs kernel 3.0 (the fast path's halo exchange); version {} runs on one GPU only",
                    opts.version
                ),
            ));
        }
        let l = &gauge.lattice;
        if l.dims != partition.local_dims()
            || l.global != partition.global
            || l.offset != partition.offset()
        {
            return Err(Error::invalid(
                "parallel.grid",
                format!(
                    "rank {}'s gauge field is {} at offset {:?} of {:?}, but the partition gives it {:?} at {:?} of {:?}",
                    partition.rank(),
                    l.dims_string(),
                    l.offset,
                    l.global,
                    partition.local_dims(),
                    partition.offset(),
                    partition.global
                ),
            ));
        }
        let ranks = partition.ranks();
        if comms.size() != ranks
            || exchange.size() != ranks
            || comms.rank() != partition.rank()
            || exchange.rank() != partition.rank()
        {
            return Err(Error::invalid(
                "parallel.grid",
                format!(
                    "grid {:?} has {ranks} ranks and this is rank {}, but the communicator is rank {} of {} ({}) and the exchange rank {} of {} ({})",
                    partition.grid,
                    partition.rank(),
                    comms.rank(),
                    comms.size(),
                    comms.describe(),
                    exchange.rank(),
                    exchange.size(),
                    exchange.describe()
                ),
            ));
        }
        let mut b = CudaBackend::new(gauge, kappa, opts)?;
        let halo = Halo::new(
            &b.core.gpu,
            gauge,
            partition,
            exchange,
            comms,
            opts.reconstruct,
            &b.core.ledger.clone(),
        )?;
        b.core.halo = Some(halo);
        Ok(b)
    }

    /// Whether the fused CR's reductions end in `cr_peer_sum` (over peer memory) rather
    /// than an all-gather and `cr_global`.
    pub fn peer_sums(&self) -> bool {
        self.core
            .halo
            .as_ref()
            .is_some_and(|h| h.peer_sums.is_some())
    }

    /// The partition of a decomposed backend (None on one GPU alone).
    pub fn partition(&self) -> Option<&Partition> {
        self.core.halo.as_ref().map(|h| &h.partition)
    }

    /// Time the decomposed applications' phases with CUDA events (off by default, so
    /// that hot loops record no extra events). No-op when not decomposed.
    pub fn set_halo_timing(&mut self, on: bool) {
        if let Some(h) = &mut self.core.halo {
            h.set_timing(on);
        }
    }

    /// The halo books since construction or the last reset (synchronises); None when
    /// not decomposed.
    pub fn halo_timings(&mut self) -> Result<Option<HaloTimings>> {
        self.core.gpu.sync()?;
        self.core.halo.as_mut().map(|h| h.timings()).transpose()
    }

    pub fn reset_halo_timings(&mut self) -> Result<()> {
        self.core.gpu.sync()?;
        match &mut self.core.halo {
            Some(h) => h.reset_timings(),
            None => Ok(()),
        }
    }

    /// Every rank's `local` (each of the same length), concatenated in rank order, over
    /// the host communicator (a collective: every rank calls it); `local` itself when not
    /// decomposed. The collective tuning's agreement on a geometry.
    pub fn all_gather(&mut self, local: &[f64]) -> Result<Vec<f64>> {
        match &mut self.core.halo {
            Some(h) => h.comms.all_gather(local),
            None => Ok(local.to_vec()),
        }
    }

    /// Wait until every rank has come here (an all-gather of one value through the host
    /// communicator); no-op when not decomposed.
    pub fn halo_barrier(&mut self) -> Result<()> {
        self.all_gather(&[0.0]).map(|_| ())
    }
}

/// Rank `p`'s part of a global gauge field (`field::scatter`).
pub fn local_gauge(global: &GaugeField, p: &Partition) -> Result<GaugeField> {
    crate::field::scatter::scatter_gauge(global, p)
}

/// Rank `p`'s sites of a global spinor field (`field::scatter`).
pub fn local_spinor(
    global: &SpinorField,
    _global_lattice: &Lattice,
    p: &Partition,
) -> Result<SpinorField> {
    crate::field::scatter::scatter_spinor(global, p)
}

/// Write rank `p`'s local field into its sites of a global field.
pub fn gather_spinor(
    local: &SpinorField,
    global: &mut SpinorField,
    _global_lattice: &Lattice,
    p: &Partition,
) -> Result<()> {
    for s in 0..local.volume() {
        let g = p.global_site(s);
        global.data[g * 12..g * 12 + 12].copy_from_slice(&local.data[s * 12..s * 12 + 12]);
    }
    Ok(())
}

/// Milliseconds per application of D on a full double field, decomposed and not, on the
/// one GPU of this process (`time_decomposed_apply`).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct HaloCost {
    /// The whole lattice on one backend.
    pub undecomposed_ms: f64,
    /// The slowest rank's pack + exchange + interior + exterior (ranks as threads on the
    /// same GPU, so their kernels share it: this is the wall time of all ranks' work per
    /// application, against the undecomposed operator doing the same sites).
    pub decomposed_ms: f64,
    /// Ranks of the decomposition.
    pub ranks: usize,
    /// decomposed_ms / undecomposed_ms (the target is at most 1.10).
    pub ratio: f64,
    /// Rank 0's halo books over `repeat / 4 + 1` further applications timed by events.
    pub rank0: HaloTimings,
}

/// Time `repeat` applications of D (full, double) at `global` extents split over `grid`
/// (ranks as threads on GPU `opts.device`, `PeerCopies`), against the undecomposed
/// operator in the same run, after `repeat / 4 + 1` warm-up applications each. Random
/// gauge field (seed 2013) and source; antiperiodic t.
pub fn time_decomposed_apply(
    global: [usize; NDIM],
    grid: [usize; NDIM],
    opts: &CudaOptions,
    repeat: usize,
) -> Result<HaloCost> {
    use crate::geometry::lattice::DEFAULT_BOUNDARY;
    let lattice = Lattice::new(global, DEFAULT_BOUNDARY)?;
    let gauge = GaugeField::random(&lattice, 2013);
    let source = SpinorField::random(lattice.volume(), 2013, 1 << 40);
    let warm = repeat / 4 + 1;
    let kappa = 0.124;
    let undecomposed_ms = {
        let mut b = CudaBackend::new(&gauge, kappa, opts)?;
        let x = b.upload(&source)?;
        let mut y = b.alloc()?;
        for _ in 0..warm {
            b.apply(Operator::D, &mut y, &x)?;
        }
        b.synchronize()?;
        let t = Instant::now();
        for _ in 0..repeat {
            b.apply(Operator::D, &mut y, &x)?;
        }
        b.synchronize()?;
        t.elapsed().as_secs_f64() * 1e3 / repeat as f64
    };
    let ranks: usize = grid.iter().product();
    let exchanges = PeerCopies::world(ranks);
    let comms = crate::comms::threads::ThreadComms::world(ranks);
    let results: Vec<Result<(f64, HaloTimings)>> = std::thread::scope(|scope| {
        let handles: Vec<_> = exchanges
            .into_iter()
            .zip(comms)
            .enumerate()
            .map(|(rank, (exchange, comms))| {
                let (gauge, source, opts) = (&gauge, &source, opts.clone());
                scope.spawn(move || -> Result<(f64, HaloTimings)> {
                    let p = Partition::new(global, grid, rank)?;
                    let local = local_gauge(gauge, &p)?;
                    let src = local_spinor(source, &gauge.lattice, &p)?;
                    let mut b = CudaBackend::new_decomposed(
                        &local,
                        kappa,
                        &opts,
                        p,
                        Box::new(exchange),
                        Box::new(comms),
                    )?;
                    let x = b.upload(&src)?;
                    let mut y = b.alloc()?;
                    for _ in 0..warm {
                        b.apply(Operator::D, &mut y, &x)?;
                    }
                    b.synchronize()?;
                    b.halo_barrier()?;
                    let t = Instant::now();
                    for _ in 0..repeat {
                        b.apply(Operator::D, &mut y, &x)?;
                    }
                    b.synchronize()?;
                    let ms = t.elapsed().as_secs_f64() * 1e3 / repeat as f64;
                    // The phases, timed apart (their events are not in the time above).
                    b.set_halo_timing(true);
                    b.reset_halo_timings()?;
                    for _ in 0..warm {
                        b.apply(Operator::D, &mut y, &x)?;
                    }
                    let books = b.halo_timings()?.unwrap_or_default();
                    Ok((ms, books))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(Error::internal("a rank thread panicked")))
            })
            .collect()
    });
    let mut decomposed_ms: f64 = 0.0;
    let mut rank0 = HaloTimings::default();
    for (rank, r) in results.into_iter().enumerate() {
        let (ms, books) = r?;
        decomposed_ms = decomposed_ms.max(ms);
        if rank == 0 {
            rank0 = books;
        }
    }
    Ok(HaloCost {
        undecomposed_ms,
        decomposed_ms,
        ranks,
        ratio: decomposed_ms / undecomposed_ms,
        rank0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    #[test]
    fn local_fields_tile_the_global_ones() {
        let l = Lattice::new([4, 4, 2, 8], DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::random(&l, 5);
        let psi = SpinorField::random(l.volume(), 5, 1);
        let mut back = SpinorField::zeros(l.volume());
        for rank in 0..4 {
            let p = Partition::new([4, 4, 2, 8], [2, 1, 1, 2], rank).unwrap();
            let lg = local_gauge(&g, &p).unwrap();
            assert_eq!(lg.lattice.offset, p.offset());
            let c = lg.lattice.coords(3);
            let gs = p.global_site(3);
            assert_eq!(
                l.coords(gs),
                std::array::from_fn(|mu| c[mu] + p.offset()[mu])
            );
            assert_eq!(lg.link(3, 2).0, g.link(gs, 2).0);
            let lp = local_spinor(&psi, &l, &p).unwrap();
            gather_spinor(&lp, &mut back, &l, &p).unwrap();
        }
        assert_eq!(back.data, psi.data);
    }
}
