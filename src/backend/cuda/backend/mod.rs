//! `CudaBackend`: the vector space, Wilson kernels and fused-CR capability on one NVIDIA GPU, with the stencil version of
//! the run. At construction it opens the device, checks free memory, compiles (NVRTC) and
//! loads the kernels, uploads the canonical gauge field through a pinned host buffer and
//! builds the version's link layout (and bufMove table) on the device; then it chooses,
//! once, the stencil object of the version's family (`StencilImpl`: `SeedStencil` for
//! 1.0-2.0, `FastStencil` for 3.0), to which `seam`'s `Space`, `WilsonKernels` and
//! `FusedCr` delegate with no version branch. In the solver loop everything stays on the
//! device; the only host-device traffic is the scalar each reduction returns.
//! `set_geometry` changes the launch geometry of the live backend (the tuner's hook).

pub mod bicgstab;
pub mod decomposed;
pub mod footprint;
pub mod seam;

use crate::backend::cuda::backend::footprint::{construction_bytes, construction_bytes_with};
use crate::backend::cuda::core::compile::{Program, BLAS1, LAYOUT, REDUCE};
use crate::backend::cuda::core::device::{
    ensure_fits, err, function, load_module, open_context, triad_on,
};
use crate::backend::cuda::core::fast_layout::{
    check_even_lattice, link_chunks, links_chunk_to_soa, Segment,
};
use crate::backend::cuda::core::field::as_f64;
use crate::backend::cuda::core::kernels::{li_in_hop_order, reduce_blocks, Kernel, BLAS_BLOCK};
use crate::backend::cuda::core::launch::cfg_1d;
use crate::backend::cuda::core::options::CudaOptions;
use crate::backend::cuda::core::staging::StageShape;
use crate::backend::cuda::core::stencil::programs::{self, StencilKind};
use crate::backend::cuda::core::stencil::v3::V3Kernels;
use crate::backend::cuda::core::stencil::StencilKernels;
use crate::backend::cuda::core::timing::{launch, GpuStream, KernelStat};
use crate::backend::cuda::core::version::{LinkLayout, StencilVersion};
use crate::backend::cuda::dirac::blas::{BlasKernels, Core, ReduceBuffers};
use crate::backend::cuda::dirac::fast::FastStencil;
use crate::backend::cuda::dirac::link_upload::chunks::{links_as_f64, scratch_values};
use crate::backend::cuda::dirac::link_upload::{upload as upload_links, LayoutKernel, LinkUpload};
use crate::backend::cuda::dirac::seed::SeedStencil;
use crate::backend::cuda::dirac::stencil_impl::{Geometry, StencilImpl};
use crate::backend::cuda::engines::fused::Fused;
use crate::backend::ledger::{Ledger, MemoryBooks, Purpose};
use crate::backend::Capabilities;
use crate::error::{Error, Result};
use crate::field::GaugeField;
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
use rayon::prelude::*;
use std::time::Instant;

/// Wall-clock times of the set-up phases, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SetupTimes {
    /// NVRTC compilation and module loading (first use in the process only).
    pub compile_ms: f64,
    /// Device allocations.
    pub alloc_ms: f64,
    /// Gauge field to the device through the pinned staging buffers: pinning them and
    /// the time the copies were not hidden behind the host's layout.
    pub upload_ms: f64,
    /// Laying the links out: 3.0 with the host upload (`LinkUpload::Host`, always r8), on the
    /// host into the staging buffers (overlapped with the copies); 3.0 with the device or
    /// registered upload, the layout kernels' event-timed device time (they overlap the host's
    /// copies of the next chunk; `upload_ms` is the rest of the upload's wall time); the seed
    /// versions, on the device (their host copy into the staging buffers is in `upload_ms`).
    pub layout_ms: f64,
    /// Bytes of the gauge field uploaded at construction (3.0: of the final device link
    /// array, whatever the path moved), and the staged upload's whole wall time (pinning
    /// or registering, host layout or copy, transfers, device layout), milliseconds.
    pub links_bytes: u64,
    pub links_upload_ms: f64,
    /// 3.0's link upload as taken ("host", "device", "registered", "workers";
    /// `LinkUpload`), empty for the seed versions, and the bytes it copied host to device (registered r12: the
    /// whole links, 18/12 of `links_bytes`).
    pub links_upload: &'static str,
    pub links_transfer_bytes: u64,
    /// Tuning the launch geometry on the live backend (0 when it came from the cache or
    /// the config).
    pub tune_ms: f64,
}

pub struct CudaBackend {
    pub(crate) core: Core,
    /// The version's stencil family, chosen once at construction.
    pub(crate) stencil: Box<dyn StencilImpl>,
    /// The stencil's capabilities (what the seam refuses without it).
    pub(crate) caps: Capabilities,
    /// The fused CR iteration's kernels (loaded on first use) and recorded graphs.
    pub(crate) fused: Fused,
    /// The fused BiCGStab's kernels (loaded on first use).
    pub(crate) bi: crate::backend::cuda::engines::bicgstab::BiEngine,
    setup: SetupTimes,
    /// Whether `Space::queue_recorded` records a CUDA graph (`tuning.record_updates`, or
    /// `set_record_updates`).
    pub(crate) record_updates: bool,
}

/// What a stencil version can do: the constants of its family's stencil object (the one
/// source of truth of `Capabilities::of_stencil`).
pub fn stencil_capabilities(version: StencilVersion) -> Capabilities {
    if version.is_fast_path() {
        FastStencil::CAPABILITIES
    } else {
        SeedStencil::CAPABILITIES
    }
}

/// Refuse launch geometry a version cannot run with (before any device work).
fn check_geometry(version: StencilVersion, g: Geometry) -> Result<()> {
    version.check_multiple(g.multiple)?;
    let max_block = version.max_coarse_block();
    if !(32..=max_block).contains(&g.coarse_block) || !g.coarse_block.is_multiple_of(32) {
        return Err(Error::invalid(
            "coarse_block",
            format!(
                "the block of the one-thread-per-site versions must be a multiple of 32 in 32..={max_block} for version {version}, got {}",
                g.coarse_block
            ),
        ));
    }
    let hints = if version == StencilVersion::V3_0 {
        crate::backend::cuda::core::version::V3_LINK_HINTS.len()
    } else {
        1
    };
    if g.link_hint >= hints {
        return Err(Error::invalid(
            "link_hint",
            format!(
                "version {version} has {hints} link hint(s) (0..{hints}), got {}",
                g.link_hint
            ),
        ));
    }
    Ok(())
}

/// Refuse, before any allocation, a lattice whose backend set-up (for `version` with its
/// default options) would not fit in the free memory of GPU `device` (Error::DeviceMemory with
/// both numbers). A run checks its whole plan before this (`app::footprint`).
pub fn check_device_memory(
    lattice: &Lattice,
    version: StencilVersion,
    device: usize,
) -> Result<()> {
    let ctx = open_context(device)?;
    let opts = CudaOptions {
        version,
        ..CudaOptions::default()
    };
    ensure_fits(
        &ctx,
        construction_bytes(lattice.volume(), &opts) as usize,
        &format!("lattice {} with version {version}", lattice.dims_string()),
    )
}

impl CudaBackend {
    pub fn new(gauge: &GaugeField, kappa: f64, opts: &CudaOptions) -> Result<Self> {
        opts.tuning.validate()?;
        let stage = StageShape::of(&opts.tuning);
        Self::new_with_link_upload(gauge, kappa, opts, LinkUpload::default(), stage)
    }

    /// `new` with version 3.0's link upload and the staging shape (`StageShape`) given instead
    /// of the default and `opts.tuning`'s (the GPU tests' knob: several chunks on a small
    /// lattice). The memory books then follow these, not `footprint::construction`.
    #[doc(hidden)]
    pub fn new_with_link_upload(
        gauge: &GaugeField,
        kappa: f64,
        opts: &CudaOptions,
        upload: LinkUpload,
        stage: StageShape,
    ) -> Result<Self> {
        // The kernels index with 32 bits: a (sub-)lattice past that is refused by name
        // (the config check says it earlier for the main job).
        let l = &gauge.lattice;
        crate::geometry::lattice::check_device_volume(l.dims, "lattice", l.global == l.dims)?;
        let chunk_values = stage.values;
        let link_chunk_values = stage.link_chunk_values(upload.for_reconstruct(opts.reconstruct));
        let version = opts.version;
        if !version.supports_reconstruct(opts.reconstruct) {
            return Err(Error::invalid(
                "reconstruct",
                format!(
                    "{}-real link compression is implemented by version 3.0 only, not {version}",
                    opts.reconstruct.reals()
                ),
            ));
        }
        let geometry = Geometry {
            multiple: opts.multiple,
            coarse_block: opts.coarse_block,
            link_hint: 0,
        };
        check_geometry(version, geometry)?;
        let lattice = gauge.lattice.clone();
        if version.is_fast_path() {
            check_even_lattice(&lattice)?;
        }
        let volume = lattice.volume();
        let mut setup = SetupTimes::default();

        // The construction's parts are steps of the time line: at 96^3x192 on four GPUs a
        // rank's construction took 23 s (validate/RESULTS.md).
        let ctx = crate::clock::timed("GPU context", || open_context(opts.device))?;
        let device_name = ctx.name().map_err(err("reading the device name"))?;
        // The set-up's own peak (the run has checked its whole plan before).
        ensure_fits(
            &ctx,
            construction_bytes_with(volume, opts, upload, link_chunk_values) as usize,
            &format!("lattice {} with version {version}", lattice.dims_string()),
        )?;

        // One stream, ordered by construction: no per-buffer event tracking.
        // SAFETY: all work of this backend goes to its single stream.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(err("creating a stream"))?;
        let mut gpu = GpuStream::new(ctx.clone(), stream.clone(), opts.tuning);

        // Kernels: compile on first use and load.
        let t = Instant::now();
        let (blas_mod, _) = load_module(&ctx, &Program::plain(&BLAS1))?;
        let (red_mod, _) = load_module(&ctx, &Program::plain(&REDUCE))?;
        let (layout_mod, _) = load_module(&ctx, &Program::plain(&LAYOUT))?;
        let (st_mod, fresh) =
            load_module(&ctx, &programs::program(version, opts.reconstruct, false))?;
        if fresh && programs::needs_li_constant(version) {
            upload_li(&st_mod, &stream)?;
        }
        let blas = BlasKernels::load(&blas_mod, &red_mod)?;
        let build_seed = function(&layout_mod, "build_seed_links")?;
        let build_move = function(&layout_mod, "build_move_table")?;
        let reorder = function(&layout_mod, "reorder_links_v16")?;
        let soa = version.link_layout() == LinkLayout::SoA;
        setup.compile_ms = t.elapsed().as_secs_f64() * 1e3;
        crate::clock::record_since("GPU modules (compiled or cached, loaded)", t);

        // Allocations.
        let t = Instant::now();
        let n_canon = volume * NDIM * 18;
        // 3.0: its link array (4 links per site, 9 or, compressed, 6 or 4 complex each) is
        // built on the host and uploaded as it is; the seed versions build theirs
        // (8 per site, 72 complex) on the device from the canonical field.
        let elems = opts.reconstruct.elems();
        let n_links = if soa {
            volume * NDIM * elems * 2
        } else {
            volume * 144
        };
        // Every allocation goes on the books with its size (backend::ledger).
        let ledger = Ledger::new();
        let mut canonical = if soa {
            None
        } else {
            let c = unsafe { stream.alloc::<f64>(n_canon) }
                .map_err(err("allocating the gauge field"))?;
            let b = ledger.book(Purpose::GaugeUpload, (n_canon * 8) as u64);
            Some((c, b))
        };
        let mut seed =
            unsafe { stream.alloc::<f64>(n_links) }.map_err(err("allocating the link buffer"))?;
        let seed_booking = ledger.book(
            Purpose::Links {
                precision: crate::linalg::Precision::Double,
                reals: if soa { 2 * elems as u8 } else { 18 },
                per_site: if soa { 4 } else { 8 },
            },
            (n_links * 8) as u64,
        );
        let mut move_table = stream
            .alloc_zeros::<i32>(if version.uses_move_table() {
                volume * 8
            } else {
                1
            })
            .map_err(err("allocating the displacement table"))?;
        let table_booking = ledger.book(Purpose::MoveTable, (move_table.len() * 4) as u64);
        let reduce = ReduceBuffers::new(&stream, &ledger, reduce_blocks(volume * 12))?;
        stream.synchronize().map_err(err("allocating"))?;
        setup.alloc_ms = t.elapsed().as_secs_f64() * 1e3;
        crate::clock::record_since("GPU allocations", t);
        let links_start = Instant::now();

        // 3.0's r18 and r12 links by default: whole sites through the pinned staging
        // buffers (or from the registered field) to a one-chunk scratch buffer, laid out
        // by the device (`link_upload`).
        let link_upload = upload.for_reconstruct(opts.reconstruct);
        if soa && link_upload != LinkUpload::Host {
            let t = Instant::now();
            let stride = link_upload
                .stride(opts.reconstruct)
                .ok_or_else(|| Error::internal("no scratch stride for a device link upload"))?;
            let n = scratch_values(volume, opts.reconstruct, link_upload, link_chunk_values);
            let mut scratch = unsafe { stream.alloc::<f64>(n) }
                .map_err(err("allocating the link upload's scratch buffer"))?;
            let scratch_booking = ledger.book(Purpose::GaugeUpload, (n * 8) as u64);
            let func = function(&layout_mod, "links_from_sites")?;
            let kernel = LayoutKernel {
                func: &func,
                lattice: &lattice,
                elems,
                stride,
            };
            let host = links_as_f64(&gauge.links);
            let times = upload_links(
                link_upload,
                &ctx,
                &stream,
                host,
                &kernel,
                stage,
                &mut scratch,
                &mut seed,
            )?;
            stream.synchronize().map_err(err("uploading the links"))?;
            drop((scratch, scratch_booking));
            let wall = 1e3 * t.elapsed().as_secs_f64();
            setup.layout_ms = times.kernel_ms;
            setup.upload_ms = wall - times.kernel_ms;
            setup.links_bytes = (n_links * 8) as u64;
            setup.links_upload_ms = wall;
            setup.links_upload = link_upload.name();
            setup.links_transfer_bytes = times.transfer_bytes;
            tracing::info!(
                upload = link_upload.name(),
                bytes = setup.links_bytes,
                transfer_bytes = times.transfer_bytes,
                wall_ms = wall,
                pin_ms = times.pin_ms,
                copy_ms = times.copy_ms,
                wait_ms = times.wait_ms,
                unpin_ms = times.unpin_ms,
                kernel_ms = times.kernel_ms,
                queue_ms = times.queue_ms,
                spread_ms = times.spread_ms,
                "3.0 links uploaded and laid out on the device"
            );
        } else {
            // Upload through two small pinned buffers, the host laying out one chunk while
            // the other is copied (`staging`): 3.0's link array in its final order (the
            // host permutation is the layout time), or the canonical field for the seed
            // versions.
            let staged_values = chunk_values;
            let times = if soa {
                let vh = volume / 2;
                let chunks = link_chunks(vh, elems, staged_values);
                let segments: Vec<_> = chunks.iter().map(|c| c.segments(vh, elems)).collect();
                crate::backend::cuda::core::staging::upload_staged(
                    &ctx,
                    &stream,
                    &mut seed,
                    &segments,
                    |k, buf| links_chunk_to_soa(gauge, elems, &chunks[k], buf),
                )?
            } else {
                let per_chunk = (staged_values / 18).max(1);
                let links = gauge.links.len();
                let segments: Vec<_> = (0..links)
                    .step_by(per_chunk)
                    .map(|first| {
                        vec![Segment {
                            dst: 18 * first,
                            len: 18 * per_chunk.min(links - first),
                        }]
                    })
                    .collect();
                let dst = match canonical.as_mut() {
                    Some((c, _)) => c,
                    None => &mut seed,
                };
                crate::backend::cuda::core::staging::upload_staged(
                    &ctx,
                    &stream,
                    dst,
                    &segments,
                    |k, buf| {
                        let first = k * per_chunk;
                        let n = buf.len() / 18;
                        buf.par_chunks_mut(18)
                            .zip(&gauge.links[first..first + n])
                            .for_each(|(b, u)| b.copy_from_slice(as_f64(u.0.as_flattened())));
                    },
                )?
            };
            // 3.0's layout is the host's share; the upload is pinning and the copies the
            // layout did not hide.
            let (layout, upload) = if soa {
                (times.fill_ms, times.pin_ms + times.wait_ms)
            } else {
                (0.0, times.pin_ms + times.fill_ms + times.wait_ms)
            };
            setup.layout_ms = layout;
            setup.upload_ms = upload;
            setup.links_bytes = times.bytes;
            setup.links_upload_ms = times.pin_ms + times.fill_ms + times.wait_ms;
            if soa {
                setup.links_upload = LinkUpload::Host.name();
                setup.links_transfer_bytes = times.bytes;
                tracing::info!(
                    upload = "host",
                    bytes = times.bytes,
                    pin_ms = times.pin_ms,
                    fill_ms = times.fill_ms,
                    wait_ms = times.wait_ms,
                    "3.0 links laid out on the host and uploaded"
                );
            }
        }

        crate::clock::record_since("GPU links (layout and upload)", links_start);
        // Build the seed versions' layout on the device.
        let t = Instant::now();
        let dims: [i32; 4] = std::array::from_fn(|mu| lattice.dims[mu] as i32);
        let [lx, ly, lz, lt] = dims;
        let vol = volume as i32;
        let mask: i32 = (0..NDIM)
            .filter(|&mu| lattice.boundary[mu] == Boundary::Antiperiodic)
            .map(|mu| 1 << mu)
            .sum();
        if let Some((canonical, canonical_booking)) = canonical.take() {
            let cfg = cfg_1d(volume * 72, BLAS_BLOCK, 0);
            launch!(
                gpu,
                Kernel::Setup("build_seed_links"),
                0,
                &build_seed,
                cfg,
                [&canonical, &mut seed, &vol, &lx, &ly, &lz, &lt, &mask]
            );
            drop((canonical, canonical_booking));
        }
        if version.uses_move_table() {
            let cfg = cfg_1d(volume * 8, BLAS_BLOCK, 0);
            launch!(
                gpu,
                Kernel::Setup("build_move_table"),
                0,
                &build_move,
                cfg,
                [&mut move_table, &vol, &lx, &ly, &lz, &lt]
            );
        }
        let links = match version.link_layout() {
            LinkLayout::Seed | LinkLayout::SoA => (seed, seed_booking),
            LinkLayout::Reordered => {
                let padded = volume.div_ceil(2) * 2;
                let mut reordered = stream
                    .alloc_zeros::<f64>(padded * 144)
                    .map_err(err("allocating the 1.6 link buffer"))?;
                let reordered_booking =
                    ledger.book(seed_booking.purpose(), (padded * 144 * 8) as u64);
                let cfg = cfg_1d(padded, 32, 0);
                let cfg = cudarc::driver::LaunchConfig {
                    block_dim: (256, 1, 1),
                    ..cfg
                };
                launch!(
                    gpu,
                    Kernel::Setup("reorder_links_v16"),
                    0,
                    &reorder,
                    cfg,
                    [&seed, &mut reordered, &vol]
                );
                drop((seed, seed_booking));
                (reordered, reordered_booking)
            }
        };
        gpu.reset()?; // the set-up launches are not the solve's books
        if !soa {
            setup.layout_ms = t.elapsed().as_secs_f64() * 1e3;
        }

        let mut bookings = vec![table_booking];
        let stencil = match programs::kind(version) {
            StencilKind::Coarse => StencilKernels::Coarse(function(&st_mod, "stencil_v1_0")?),
            StencilKind::Fine => StencilKernels::Fine(function(&st_mod, "stencil_fine")?),
            StencilKind::Projected => StencilKernels::Projected(V3Kernels::load(&st_mod)?),
            StencilKind::Split => StencilKernels::Split {
                gemm34: function(&st_mod, "xgemm34x44")?,
                gemm33: function(&st_mod, "xgemm33x34")?,
                combine: function(&st_mod, "dslash_combine")?,
                tmp1: stream
                    .alloc_zeros::<f64>(volume * 24)
                    .map_err(err("allocating 2.0's tmp1"))?,
                tmp2: stream
                    .alloc_zeros::<f64>(volume * 24)
                    .map_err(err("allocating 2.0's tmp2"))?,
            },
        };
        if let StencilKernels::Split { tmp1, tmp2, .. } = &stencil {
            for t in [tmp1, tmp2] {
                bookings.push(ledger.book(Purpose::StencilTemporaries, (t.len() * 8) as u64));
            }
        }

        let stencil: Box<dyn StencilImpl> = match stencil {
            StencilKernels::Projected(f) => Box::new(FastStencil::new(
                &blas_mod,
                &red_mod,
                &layout_mod,
                f,
                links,
                geometry,
                opts.reconstruct,
            )?),
            kernels => {
                let (links, links_booking) = links;
                bookings.push(links_booking);
                Box::new(SeedStencil {
                    version,
                    geometry,
                    kernels,
                    links,
                    move_table,
                    _bookings: bookings,
                })
            }
        };
        // What the set-up freed (the link upload's scratch, the seed versions' canonical
        // field) goes back to the device now: the pool keeps freed memory across
        // synchronisations (device::POOL_KEEP_ALL), and what is loaded later outside the
        // pool (the modules the solve's preparation loads) needs room on a nearly full GPU.
        crate::backend::cuda::core::device::trim_pool(&gpu.ctx)?;
        let caps = stencil.capabilities();
        let core = Core {
            gpu,
            lattice,
            kappa,
            device_name,
            blas,
            reduce,
            ledger,
            staging: None,
            applications: 0,
            antiperiodic_mask: mask,
            halo: None,
        };
        Ok(CudaBackend {
            core,
            stencil,
            caps,
            fused: Default::default(),
            bi: Default::default(),
            setup,
            record_updates: opts.tuning.record_updates,
        })
    }

    /// Record the reliable updates' queued part as a CUDA graph (`Space::queue_recorded`)
    /// or not, whatever `tuning.record_updates` said.
    pub fn set_record_updates(&mut self, on: bool) {
        self.record_updates = on;
    }

    pub fn version(&self) -> StencilVersion {
        self.stencil.version()
    }

    pub fn multiple(&self) -> usize {
        self.stencil.geometry().multiple
    }

    /// The launch geometry in use.
    pub fn geometry(&self) -> Geometry {
        self.stencil.geometry()
    }

    /// Change the launch geometry of this live backend (validated as at construction).
    /// Nothing on the device depends on it (links, tables and fields stay), so a tuner
    /// times candidates with this on the fields already uploaded.
    pub fn set_geometry(&mut self, g: Geometry) -> Result<()> {
        check_geometry(self.version(), g)?;
        self.stencil.set_geometry(g);
        Ok(())
    }

    /// The tune cache's kernel name of this stencil ("stencil-3.0-r12").
    pub fn tune_kernel(&self) -> String {
        self.stencil.tune_kernel()
    }

    /// The launch geometries the tuner times for this stencil.
    pub fn tune_candidates(&self) -> Vec<Geometry> {
        self.stencil.candidates()
    }

    /// The device's compute capability "major.minor".
    pub fn compute_capability(&self) -> Result<String> {
        let (a, b) = self
            .core
            .gpu
            .ctx
            .compute_capability()
            .map_err(err("reading the compute capability"))?;
        Ok(format!("{a}.{b}"))
    }

    /// Record the wall time the launch-geometry tuning took on this backend.
    pub fn set_tune_ms(&mut self, ms: f64) {
        self.setup.tune_ms = ms;
    }

    /// The stencil's own flops and bytes per site and full application.
    pub fn flops_bytes_per_site(&self) -> (u64, u64) {
        (self.stencil.flops_per_site(), self.stencil.bytes_per_site())
    }

    /// What this backend's stencil can do.
    pub fn capabilities(&self) -> Capabilities {
        self.caps
    }

    /// Threads per block of the stencil launch as configured (1.0 and 3.0: `coarse_block`).
    pub fn block_threads(&self) -> usize {
        self.stencil.block_threads()
    }

    pub fn lattice(&self) -> &Lattice {
        &self.core.lattice
    }

    pub fn device_name(&self) -> &str {
        &self.core.device_name
    }

    pub fn setup_times(&self) -> &SetupTimes {
        &self.setup
    }

    /// Version 3.0's double-precision link array read back (f64 pairs in
    /// `fast_layout`'s order); None for the seed versions. For the tests.
    #[doc(hidden)]
    pub fn download_links(&mut self) -> Result<Option<Vec<f64>>> {
        self.core.gpu.sync()?;
        match self.stencil.double_links() {
            Some(links) => self
                .core
                .gpu
                .stream
                .clone_dtoh(links)
                .map(Some)
                .map_err(err("reading the links back")),
            None => Ok(None),
        }
    }

    /// Operator applications made so far.
    pub fn applications(&self) -> u64 {
        self.core.applications
    }

    /// Per-kernel launches, event-timed milliseconds, flops and bytes since construction
    /// (or the last `reset_stats`). Synchronises the stream.
    pub fn kernel_stats(&self) -> Vec<KernelStat> {
        self.core.gpu.stats().unwrap_or_default()
    }

    /// The captured graphs' time line (each graph's third launch, else its last),
    /// logged at info level one mark a line (`tuning.timeline`, `timeline.rs`;
    /// nothing otherwise). `who` names the backend in the lines ("rank 2").
    pub fn log_timeline(&self, who: &str) {
        if !self.core.gpu.tuning.timeline {
            return;
        }
        match self.core.gpu.timeline() {
            Ok(rows) => {
                for r in rows {
                    tracing::info!(
                        who,
                        graph = r.graph,
                        stream = if r.comm { "comm" } else { "main" },
                        at_us = format!("{:.1}", r.at_us),
                        step_us = format!("{:.1}", r.step_us),
                        label = r.label,
                        "timeline"
                    );
                }
            }
            Err(e) => tracing::warn!("the graphs' time line could not be read: {e}"),
        }
    }

    /// The operator's kernels summed into one line ("stencil 1.5").
    pub fn stencil_stats(&self) -> KernelStat {
        let all = self.core.gpu.stats().unwrap_or_default();
        let mut s = KernelStat {
            name: format!("stencil {}", self.version()),
            launches: 0,
            millis: 0.0,
            timed: 0,
            flops: 0,
            bytes: 0,
        };
        for (k, st) in all.iter().enumerate() {
            if self.core.gpu.is_stencil_stat(k) {
                s.launches += st.launches;
                s.millis += st.millis;
                s.timed += st.timed;
                s.flops += st.flops;
                s.bytes += st.bytes;
            }
        }
        s
    }

    pub fn reset_stats(&mut self) -> Result<()> {
        self.core.applications = 0;
        self.core.gpu.reset()
    }

    /// Wait for all queued work.
    pub fn synchronize(&mut self) -> Result<()> {
        self.core.gpu.sync()
    }

    /// The streaming triad on this backend's device (see `triad_bandwidth`); its arrays
    /// are on the books (`Purpose::Measurement`) while it runs.
    pub fn triad_bandwidth(&mut self, bytes: usize) -> Result<f64> {
        self.core.gpu.sync()?;
        let _booking = self.core.ledger.book(
            Purpose::Measurement,
            crate::backend::cuda::backend::footprint::triad(bytes).bytes,
        );
        triad_on(&self.core.gpu.ctx, bytes)
    }

    /// The device-memory books: what this backend holds now, by purpose, and its peak.
    pub fn memory_books(&self) -> MemoryBooks {
        self.core.ledger.books()
    }

    /// Start a new peak of the books from what is held now.
    pub fn reset_memory_peak(&self) {
        self.core.ledger.reset_peak()
    }
}

/// Fill the module's `c_li` constant array with the seed's Li matrices in hop order
/// (up t, x, y, z, then down t, x, y, z), from the CPU reference.
fn upload_li(
    module: &std::sync::Arc<cudarc::driver::CudaModule>,
    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
) -> Result<()> {
    let values = li_in_hop_order();
    let mut symbol = module
        .get_global("c_li", stream)
        .map_err(err("finding the constant array c_li"))?;
    if symbol.len() != values.len() * 8 {
        return Err(Error::Cuda(format!(
            "c_li holds {} bytes, expected {}",
            symbol.len(),
            values.len() * 8
        )));
    }
    // SAFETY: the symbol is 256 doubles (checked above).
    let mut view = unsafe { symbol.transmute_mut::<f64>(values.len()) }
        .ok_or_else(|| Error::Cuda("c_li has the wrong size".into()))?;
    stream
        .memcpy_htod(&values, &mut view)
        .map_err(err("uploading the Li matrices"))?;
    stream
        .synchronize()
        .map_err(err("uploading the Li matrices"))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    /// Construction agrees with an independent probe of the machine. Without a GPU (CI)
    /// it is exactly the device probe's Error::Cuda (the same message, not merely some
    /// error), never a panic; with a GPU and libnvrtc it succeeds; with a GPU but no
    /// libnvrtc it is an Error::Cuda naming libnvrtc. (It used to accept Ok and any
    /// non-empty Err alike, so it could not fail.)
    #[test]
    fn construction_without_a_gpu_is_a_cuda_error() {
        let l = Lattice::new([2, 2, 2, 2], DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::unit(&l);
        let built = CudaBackend::new(&g, 0.1, &CudaOptions::default());
        // SAFETY: only tries to dlopen the library by its usual names.
        let nvrtc = unsafe { cudarc::nvrtc::sys::is_culib_present() };
        match (crate::backend::cuda::core::device::device_info(), built) {
            (Err(probe), Err(e)) => {
                assert!(matches!(e, Error::Cuda(_)), "expected Error::Cuda, got {e}");
                assert_eq!(e.to_string(), probe.to_string());
            }
            (Err(probe), Ok(_)) => panic!("built a backend where the device probe fails: {probe}"),
            (Ok(_), Ok(b)) => {
                assert!(nvrtc, "built a backend without libnvrtc");
                assert_eq!(b.lattice().volume(), 16);
            }
            (Ok(_), Err(e)) => {
                assert!(
                    !nvrtc,
                    "a GPU and libnvrtc are present, yet construction failed: {e}"
                );
                assert!(
                    matches!(&e, Error::Cuda(m) if m.contains("libnvrtc")),
                    "expected an Error::Cuda naming libnvrtc, got {e}"
                );
            }
        }
    }

    #[test]
    fn a_coarse_block_that_cannot_launch_is_refused_before_the_device_is_opened() {
        // 1024 threads of 1.0 ran out of registers on an H100 (validate/RESULTS.md).
        let l = Lattice::new([2, 2, 2, 2], DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::unit(&l);
        for block in [1024, 100, 0] {
            let opts = CudaOptions {
                version: StencilVersion::V1_0,
                coarse_block: block,
                ..CudaOptions::default()
            };
            match CudaBackend::new(&g, 0.1, &opts) {
                Err(Error::InvalidValue { key, .. }) => assert_eq!(key, "coarse_block"),
                Err(e) => panic!("block {block}: wrong error {e}"),
                Ok(_) => panic!("block {block} accepted"),
            }
        }
    }

    #[test]
    fn an_impossible_multiple_is_refused_before_the_device_is_opened() {
        let l = Lattice::new([2, 2, 2, 2], DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::unit(&l);
        let opts = CudaOptions {
            version: StencilVersion::V1_6,
            multiple: 64,
            ..CudaOptions::default()
        };
        match CudaBackend::new(&g, 0.1, &opts) {
            Err(Error::InvalidValue { key, message }) => {
                assert_eq!(key, "multiple");
                assert!(message.contains("1.6.1"), "{message}");
            }
            other => panic!("expected InvalidValue, got {:?}", other.err()),
        }
    }

    #[test]
    fn version_3_0_refuses_odd_extents_before_the_device_is_opened() {
        let l = Lattice::new([4, 4, 4, 3], DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::unit(&l);
        let opts = CudaOptions {
            version: StencilVersion::V3_0,
            coarse_block: 64,
            ..CudaOptions::default()
        };
        match CudaBackend::new(&g, 0.1, &opts) {
            Err(Error::InvalidValue { message, .. }) => {
                assert!(message.contains("needs even extents"), "{message}");
                assert!(message.contains("4x4x4x3"), "{message}");
            }
            other => panic!("expected InvalidValue, got {:?}", other.err()),
        }
    }

    #[test]
    fn capabilities_per_version_come_from_the_stencil_objects() {
        for &v in StencilVersion::all() {
            let c = Capabilities::of_stencil(v);
            assert_eq!(c, stencil_capabilities(v));
            if v == StencilVersion::V3_0 {
                assert_eq!(c, FastStencil::CAPABILITIES);
                assert!(c.half_lattice && c.single && c.fused_cr);
            } else {
                assert_eq!(c, SeedStencil::CAPABILITIES);
                assert!(!c.half_lattice && !c.single && !c.fused_cr);
            }
        }
    }
}
