//! Coulomb and Landau gauge fixing on the GPU: `fix_on_gpu`, the contract of
//! `crate::gauge_fix::fix` with the sweeps on the device (kernels/gauge_fix.cu, compiled
//! with `--fmad=false`). The iteration is the CPU's step for step: per sweep, for parity 0
//! then 1, the local updates of that parity (G accumulated on the device) and their
//! application to every link; the links and G reunitarised every `REUNITARISE_EVERY`
//! sweeps; after every sweep the per-site traces and thetas come back and are added on the
//! host in the CPU's fixed order (`measure::quality_of_sites`), so the stopping rule sees
//! the CPU's numbers for the same links. The end is the CPU's own (`gauge_fix::finish`):
//! G downloaded and reunitarised, the fixed field `G U G^dagger` computed on the host
//! from the input, and its functional and theta measured there. Runs on GPU 0.

use crate::backend::cuda::core::compile::gauge_fix_program;
use crate::backend::cuda::core::device::{
    driver_err, ensure_fits, function, load_module, open_context,
};
use crate::backend::cuda::core::field::{download_matrices, upload_matrices};
use crate::error::Result;
use crate::field::{GaugeField, Su3};
use crate::gauge_fix::measure::quality_of_sites;
use crate::gauge_fix::{
    check_input, finish, met, FixOptions, FixReport, GaugeTransform, REUNITARISE_EVERY,
};
use crate::geometry::lattice::Lattice;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream, LaunchConfig, PushKernelArg};
use std::sync::Arc;
use std::time::Instant;

const BLOCK: u32 = 128;
/// Reals of one SU(3) matrix.
const REALS: usize = 18;

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

/// Gauge-fix `g` as `opts` asks, on GPU 0: the same contract (and the same checks and
/// errors) as `crate::gauge_fix::fix`; without a usable GPU, the driver's clear error.
pub fn fix_on_gpu(
    g: &GaugeField,
    opts: &FixOptions,
) -> Result<(GaugeField, GaugeTransform, FixReport)> {
    let start = Instant::now();
    check_input(g, opts)?;
    let mut fixer = Fixer::new(g, opts)?;
    let outcome = fixer.iterate()?;
    let matrices = fixer.transform()?;
    Ok(finish(g, matrices, opts.kind, outcome, start))
}

/// The device state of one fix: the working links, G, one half-sweep's local updates and
/// the per-site (trace, theta) pairs.
struct Fixer {
    stream: Arc<CudaStream>,
    site: CudaFunction,
    apply: CudaFunction,
    quality: CudaFunction,
    reunitarise: CudaFunction,
    links: CudaSlice<f64>,
    transform: CudaSlice<f64>,
    local: CudaSlice<f64>,
    sums: CudaSlice<f64>,
    lattice: Lattice,
    opts: FixOptions,
}

impl Fixer {
    /// Open GPU 0, check the memory, compile and load the program, upload the links and
    /// set G = 1.
    fn new(g: &GaugeField, opts: &FixOptions) -> Result<Fixer> {
        let ctx = open_context(0)?;
        let v = g.lattice.volume();
        let bytes = (4 * v + 2 * v) * REALS * 8 + 2 * v * 8;
        ensure_fits(&ctx, bytes, "gauge fixing (links, G and the local updates)")?;
        let (module, _) = load_module(&ctx, &gauge_fix_program())?;
        let stream = ctx.default_stream();
        let links = upload_matrices(&stream, &g.links, "the links")?;
        let transform = upload_matrices(&stream, &vec![Su3::identity(); v], "G = 1")?;
        let local = stream
            .alloc_zeros::<f64>(v * REALS)
            .map_err(err("allocating the local updates"))?;
        let sums = stream
            .alloc_zeros::<f64>(2 * v)
            .map_err(err("allocating the per-site sums"))?;
        Ok(Fixer {
            site: function(&module, "gauge_fix_site")?,
            apply: function(&module, "gauge_fix_apply")?,
            quality: function(&module, "gauge_fix_quality")?,
            reunitarise: function(&module, "reunitarise_links")?,
            stream,
            links,
            transform,
            local,
            sums,
            lattice: g.lattice.clone(),
            opts: *opts,
        })
    }

    fn dims(&self) -> [i32; 4] {
        self.lattice.dims.map(|d| d as i32)
    }

    /// Sweep until converged or out of iterations: (iterations made, converged), as
    /// `gauge_fix::iterate`.
    fn iterate(&mut self) -> Result<(usize, bool)> {
        let mut previous = self.quality()?.0;
        for iteration in 1..=self.opts.max_iterations {
            self.sweep()?;
            if iteration % REUNITARISE_EVERY == 0 {
                self.reunitarise()?;
            }
            let (f, th) = self.quality()?;
            if met(
                &self.opts,
                iteration,
                f,
                std::mem::replace(&mut previous, f),
                th,
            ) {
                return Ok((iteration, true));
            }
        }
        Ok((self.opts.max_iterations, false))
    }

    /// Even sites, then odd sites: each parity's local updates, then their application.
    fn sweep(&mut self) -> Result<()> {
        let [lx, ly, lz, lt] = self.dims();
        let v = self.lattice.volume();
        let (ndir, omega) = (self.opts.kind.ndir() as i32, self.opts.omega);
        for parity in 0..2i32 {
            // SAFETY: gauge_fix_site(const double* links, double* local, double* transform,
            // int lx, ly, lz, lt, int parity, int ndir, double omega); V/2 threads cover
            // the sites of one parity.
            unsafe {
                self.stream
                    .launch_builder(&self.site)
                    .arg(&self.links)
                    .arg(&mut self.local)
                    .arg(&mut self.transform)
                    .arg(&lx)
                    .arg(&ly)
                    .arg(&lz)
                    .arg(&lt)
                    .arg(&parity)
                    .arg(&ndir)
                    .arg(&omega)
                    .launch(cfg(v / 2))
            }
            .map_err(err("launching the local gauge updates"))?;
            // SAFETY: gauge_fix_apply(double* links, const double* local, int lx, ly, lz,
            // lt, int parity); V threads, one a site.
            unsafe {
                self.stream
                    .launch_builder(&self.apply)
                    .arg(&mut self.links)
                    .arg(&self.local)
                    .arg(&lx)
                    .arg(&ly)
                    .arg(&lz)
                    .arg(&lt)
                    .arg(&parity)
                    .launch(cfg(v))
            }
            .map_err(err("launching the gauge update of the links"))?;
        }
        Ok(())
    }

    /// Reunitarise the working links and G.
    fn reunitarise(&mut self) -> Result<()> {
        let v = self.lattice.volume();
        for (m, n) in [(&mut self.links, 4 * v), (&mut self.transform, v)] {
            let count = n as u32;
            // SAFETY: reunitarise_links(double* links, unsigned n): n matrices of 18 reals.
            unsafe {
                self.stream
                    .launch_builder(&self.reunitarise)
                    .arg(m)
                    .arg(&count)
                    .launch(cfg(n))
            }
            .map_err(err("launching the reunitarisation"))?;
        }
        Ok(())
    }

    /// (F, theta) of the working links as the stopping rule reads them
    /// (`measure::quality`): per-site sums on the device, added on the host.
    fn quality(&mut self) -> Result<(f64, f64)> {
        let [lx, ly, lz, lt] = self.dims();
        let ndir = self.opts.kind.ndir() as i32;
        // SAFETY: gauge_fix_quality(const double* links, int lx, ly, lz, lt, int ndir,
        // double* out[2V]); V threads.
        unsafe {
            self.stream
                .launch_builder(&self.quality)
                .arg(&self.links)
                .arg(&lx)
                .arg(&ly)
                .arg(&lz)
                .arg(&lt)
                .arg(&ndir)
                .arg(&mut self.sums)
                .launch(cfg(self.lattice.volume()))
        }
        .map_err(err("launching the gauge fixing's measurement"))?;
        let sums = self
            .stream
            .clone_dtoh(&self.sums)
            .map_err(err("reading the gauge fixing's per-site sums"))?;
        let (traces, thetas): (Vec<f64>, Vec<f64>) =
            sums.chunks_exact(2).map(|p| (p[0], p[1])).unzip();
        Ok(quality_of_sites(
            &self.lattice,
            self.opts.kind,
            &traces,
            &thetas,
        ))
    }

    /// G as it stands, downloaded.
    fn transform(&mut self) -> Result<Vec<Su3>> {
        download_matrices(&self.stream, &self.transform, "the gauge transform")
    }
}
