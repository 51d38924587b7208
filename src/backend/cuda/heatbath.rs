//! The quenched generator on the GPU: launches kernels/heatbath.cu in the order of the CPU's
//! `gauge_gen::Generator::sweep` (heatbath pass, `overrelax` overrelaxation passes, each
//! `for mu { for parity }`, then reunitarisation) with the same Philox draws, and measures
//! the plaquette after every sweep on the device (per-site sums, added on the host in a
//! fixed order). Links stay on the GPU between sweeps; only saved configurations and the
//! per-site plaquette sums come back.

use crate::backend::cuda::core::compile::heatbath_program;
use crate::backend::cuda::core::device::{
    driver_err, ensure_fits, function, load_module, open_context,
};
use crate::backend::cuda::core::field::{download_matrices, upload_matrices};
use crate::error::Result;
use crate::field::gauge::Plaquette;
use crate::field::GaugeField;
use crate::gauge_gen::{HeatbathParams, SweepRecord};
use crate::geometry::lattice::Lattice;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;
use std::time::Instant;

const BLOCK: u32 = 128;

pub struct GpuGenerator {
    stream: Arc<CudaStream>,
    heatbath: CudaFunction,
    overrelax: CudaFunction,
    reunitarise: CudaFunction,
    plaquette: CudaFunction,
    links: CudaSlice<f64>,
    sums: CudaSlice<f64>,
    lattice: Lattice,
    params: HeatbathParams,
    next_sweep: usize,
    started: Instant,
}

fn err(what: &'static str) -> impl Fn(cudarc::driver::DriverError) -> crate::Error {
    move |e| driver_err(what, e)
}

fn cfg(n: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: ((n as u32).div_ceil(BLOCK).max(1), 1, 1),
        block_dim: (BLOCK, 1, 1),
        shared_mem_bytes: 0,
    }
}

impl GpuGenerator {
    /// A hot or cold start exactly as the CPU generator's, uploaded to GPU 0.
    pub fn new(lattice: &Lattice, params: &HeatbathParams) -> Result<Self> {
        params.validate()?;
        lattice.require_even("the checkerboard heatbath")?;
        let field = if params.hot_start {
            GaugeField::random(lattice, params.seed)
        } else {
            GaugeField::unit(lattice)
        };
        let ctx = open_context(0)?;
        let v = lattice.volume();
        ensure_fits(&ctx, v * 4 * 18 * 8 + v * 2 * 8, "the gauge field")?;
        let (module, _) = load_module(&ctx, &heatbath_program())?;
        let stream = ctx.default_stream();
        let links = upload_matrices(&stream, &field.links, "the links")?;
        let sums = stream
            .alloc_zeros::<f64>(2 * v)
            .map_err(err("allocating plaquette sums"))?;
        Ok(GpuGenerator {
            heatbath: function(&module, "heatbath_update")?,
            overrelax: function(&module, "overrelax_update")?,
            reunitarise: function(&module, "reunitarise_links")?,
            plaquette: function(&module, "plaquette_sites")?,
            stream,
            links,
            sums,
            lattice: lattice.clone(),
            params: params.clone(),
            next_sweep: 0,
            started: Instant::now(),
        })
    }

    fn dims(&self) -> [i32; 4] {
        self.lattice.dims.map(|d| d as i32)
    }

    fn pass(&mut self, heatbath: bool, sweep: u32) -> Result<()> {
        let [lx, ly, lz, lt] = self.dims();
        let half = self.lattice.volume() / 2;
        let (beta, seed_lo, seed_hi) = (
            self.params.beta,
            self.params.seed as u32,
            (self.params.seed >> 32) as u32,
        );
        for mu in 0..4i32 {
            for parity in 0..2i32 {
                let mut b = if heatbath {
                    self.stream.launch_builder(&self.heatbath)
                } else {
                    self.stream.launch_builder(&self.overrelax)
                };
                b.arg(&mut self.links)
                    .arg(&lx)
                    .arg(&ly)
                    .arg(&lz)
                    .arg(&lt)
                    .arg(&mu)
                    .arg(&parity);
                if heatbath {
                    b.arg(&beta).arg(&seed_lo).arg(&seed_hi).arg(&sweep);
                }
                // SAFETY: the arguments match heatbath_update / overrelax_update in
                // kernels/heatbath.cu; V/2 threads cover the sites of one parity.
                unsafe { b.launch(cfg(half)) }.map_err(err("launching a heatbath pass"))?;
            }
        }
        Ok(())
    }

    /// One compound sweep; the record's `update_seconds` covers the update kernels only.
    pub fn sweep(&mut self) -> Result<SweepRecord> {
        let t0 = Instant::now();
        let sweep = self.next_sweep;
        self.pass(true, sweep as u32)?;
        for _ in 0..self.params.overrelax {
            self.pass(false, 0)?;
        }
        let n_links = (self.lattice.volume() * 4) as u32;
        // SAFETY: reunitarise_links(double* links, unsigned n_links).
        unsafe {
            self.stream
                .launch_builder(&self.reunitarise)
                .arg(&mut self.links)
                .arg(&n_links)
                .launch(cfg(n_links as usize))
        }
        .map_err(err("launching reunitarisation"))?;
        self.stream.synchronize().map_err(err("synchronising"))?;
        let update_seconds = t0.elapsed().as_secs_f64();
        let plaquette = self.plaquette()?;
        self.next_sweep += 1;
        Ok(SweepRecord {
            sweep,
            measured: sweep >= self.params.therm,
            plaquette,
            update_seconds,
            elapsed_seconds: self.started.elapsed().as_secs_f64(),
        })
    }

    pub fn plaquette(&mut self) -> Result<Plaquette> {
        let [lx, ly, lz, lt] = self.dims();
        let v = self.lattice.volume();
        // SAFETY: plaquette_sites(const double* links, int lx, ly, lz, lt, double* out[2V]).
        unsafe {
            self.stream
                .launch_builder(&self.plaquette)
                .arg(&self.links)
                .arg(&lx)
                .arg(&ly)
                .arg(&lz)
                .arg(&lt)
                .arg(&mut self.sums)
                .launch(cfg(v))
        }
        .map_err(err("launching the plaquette"))?;
        let sums = self
            .stream
            .clone_dtoh(&self.sums)
            .map_err(err("reading plaquette sums"))?;
        let pairs: Vec<[f64; 2]> = sums.chunks_exact(2).map(|c| [c[0], c[1]]).collect();
        let spatial = crate::reduce::det_sum(&pairs, |p| p[0]);
        let temporal = crate::reduce::det_sum(&pairs, |p| p[1]);
        let norm = 9.0 * v as f64;
        Ok(Plaquette {
            total: (spatial + temporal) / (2.0 * norm),
            spatial: spatial / norm,
            temporal: temporal / norm,
        })
    }

    /// The current field, downloaded.
    pub fn field(&mut self) -> Result<GaugeField> {
        Ok(GaugeField {
            lattice: self.lattice.clone(),
            links: download_matrices(&self.stream, &self.links, "the links")?,
        })
    }
}
