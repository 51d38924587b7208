//! `CudaBackend`'s construction as named steps: check the request, open the device and
//! check its memory, compile and load the modules, allocate, upload the links, lay them
//! out, build the stencil object; each step books its time as before.

use super::footprint::construction_bytes_with;
use super::{check_geometry, CudaBackend, SetupTimes};
use crate::backend::cuda::core::compile::{Program, BLAS1, LAYOUT, REDUCE};
use crate::backend::cuda::core::device::{
    ensure_fits, err, function, keep_pool, load_module, open_context,
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
use crate::backend::cuda::core::timing::{launch, GpuStream};
use crate::backend::cuda::core::version::{LinkLayout, StencilVersion};
use crate::backend::cuda::dirac::blas::{BlasKernels, Core, ReduceBuffers};
use crate::backend::cuda::dirac::fast::FastStencil;
use crate::backend::cuda::dirac::link_upload::chunks::{links_as_f64, scratch_values};
use crate::backend::cuda::dirac::link_upload::{upload as upload_links, LayoutKernel, LinkUpload};
use crate::backend::cuda::dirac::seed::SeedStencil;
use crate::backend::cuda::dirac::stencil_impl::{Geometry, StencilImpl};
use crate::backend::ledger::{Booking, Ledger, Purpose};
use crate::error::{Error, Result};
use crate::field::GaugeField;
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
use cudarc::driver::{CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// What a construction was asked for, checked before any device work, and what every
/// step reads of it.
struct Request<'a> {
    gauge: &'a GaugeField,
    opts: &'a CudaOptions,
    upload: LinkUpload,
    stage: StageShape,
    chunk_values: usize,
    link_chunk_values: usize,
    version: StencilVersion,
    geometry: Geometry,
    lattice: Lattice,
    volume: usize,
}

/// The modules the construction loads and the set-up kernels it takes from them.
struct Modules {
    blas_mod: Arc<CudaModule>,
    red_mod: Arc<CudaModule>,
    layout_mod: Arc<CudaModule>,
    st_mod: Arc<CudaModule>,
    blas: BlasKernels,
    build_seed: CudaFunction,
    build_move: CudaFunction,
    reorder: CudaFunction,
    /// 3.0's link layout (built on the host or by `links_from_sites`), not the seed's.
    soa: bool,
}

/// The device buffers allocated before the upload (all on `ledger`'s books).
struct Buffers {
    ledger: Ledger,
    /// The seed versions' canonical field (None for 3.0).
    canonical: Option<(CudaSlice<f64>, Booking)>,
    /// Doubles of the link array as uploaded (`allocate`'s second value): 3.0's final
    /// one, the seed versions' to be built.
    n_links: usize,
    move_table: CudaSlice<i32>,
    table_booking: Booking,
    reduce: ReduceBuffers,
}

/// What `FastStencil` leaves of the seed versions' displacement table: the table and the
/// bookings that would have gone with the stencil.
type UnusedTable = Option<(CudaSlice<i32>, Vec<Booking>)>;

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
        let req = check_request(gauge, opts, upload, stage)?;
        let mut setup = SetupTimes::default();

        // The construction's parts are steps of the time line: at 96^3x192 on four GPUs a
        // rank's construction took 23 s (validate/RESULTS.md).
        let (ctx, device_name, stream, mut gpu) = open_device(&req)?;
        let modules = load_modules(&req, &ctx, &stream, &mut setup)?;
        let (mut bufs, (mut seed, seed_booking)) =
            allocate(&req, &stream, modules.soa, &mut setup)?;
        upload_gauge_links(
            &req, &ctx, &stream, &modules, &mut bufs, &mut seed, &mut setup,
        )?;
        let links = (seed, seed_booking);
        let (links, mask) = lay_out_links(
            &req, &mut gpu, &stream, &modules, &mut bufs, links, &mut setup,
        )?;
        let Buffers {
            ledger,
            move_table,
            table_booking,
            reduce,
            ..
        } = bufs;
        // The fast stencil leaves the move table and its bookings unused: dropped at the
        // end of this function, after the pool is trimmed.
        let (stencil, _unused) = build_stencil(
            &req,
            &modules,
            &stream,
            &ledger,
            move_table,
            table_booking,
            links,
        )?;
        // What the set-up freed (the link upload's scratch, the seed versions' canonical
        // field) goes back to the device now: the pool keeps freed memory across
        // synchronisations (`[tuning] pool_keep_mib`), and what is loaded later outside the
        // pool (the modules the solve's preparation loads) needs room on a nearly full GPU.
        crate::backend::cuda::core::device::trim_pool(&gpu.ctx)?;
        let caps = stencil.capabilities();
        let core = Core {
            gpu,
            lattice: req.lattice,
            kappa,
            device_name,
            blas: modules.blas,
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
}

/// Refuse, before any device work, what the kernels cannot do: a (sub-)lattice past 32-bit
/// indices, a link compression or launch geometry the version lacks, odd extents for 3.0.
fn check_request<'a>(
    gauge: &'a GaugeField,
    opts: &'a CudaOptions,
    upload: LinkUpload,
    stage: StageShape,
) -> Result<Request<'a>> {
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
    Ok(Request {
        gauge,
        opts,
        upload,
        stage,
        chunk_values,
        link_chunk_values,
        version,
        geometry,
        lattice,
        volume,
    })
}

/// Open the GPU, read its name, check that the set-up's own peak fits in its free
/// memory, and make the backend's one stream.
fn open_device(req: &Request) -> Result<(Arc<CudaContext>, String, Arc<CudaStream>, GpuStream)> {
    let (opts, version, lattice) = (req.opts, req.version, &req.lattice);
    let ctx = crate::clock::timed("GPU context", || open_context(opts.device))?;
    let device_name = ctx.name().map_err(err("reading the device name"))?;
    // The pool's policy of these options (`[tuning] pool_keep_mib`; an old driver without
    // memory pools keeps CUDA's default, noted only).
    if let Err(e) = keep_pool(&ctx, opts.tuning.pool_keep_mib.bytes()) {
        tracing::warn!("GPU {}: {e}", opts.device);
    }
    // The set-up's own peak (the run has checked its whole plan before).
    ensure_fits(
        &ctx,
        construction_bytes_with(req.volume, opts, req.upload, req.link_chunk_values) as usize,
        &format!("lattice {} with version {version}", lattice.dims_string()),
    )?;

    // One stream, ordered by construction: no per-buffer event tracking.
    // SAFETY: all work of this backend goes to its single stream.
    unsafe { ctx.disable_event_tracking() };
    let stream = ctx.new_stream().map_err(err("creating a stream"))?;
    let gpu = GpuStream::new(ctx.clone(), stream.clone(), opts.tuning);
    Ok((ctx, device_name, stream, gpu))
}

/// Kernels: compile on first use and load (`setup.compile_ms`).
fn load_modules(
    req: &Request,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    setup: &mut SetupTimes,
) -> Result<Modules> {
    let (opts, version) = (req.opts, req.version);
    let t = Instant::now();
    let (blas_mod, _) = load_module(ctx, &Program::plain(&BLAS1))?;
    let (red_mod, _) = load_module(ctx, &Program::plain(&REDUCE))?;
    let (layout_mod, _) = load_module(ctx, &Program::plain(&LAYOUT))?;
    let (st_mod, fresh) = load_module(ctx, &programs::program(version, opts.reconstruct, false))?;
    if fresh && programs::needs_li_constant(version) {
        upload_li(&st_mod, stream)?;
    }
    let blas = BlasKernels::load(&blas_mod, &red_mod)?;
    let build_seed = function(&layout_mod, "build_seed_links")?;
    let build_move = function(&layout_mod, "build_move_table")?;
    let reorder = function(&layout_mod, "reorder_links_v16")?;
    let soa = version.link_layout() == LinkLayout::SoA;
    setup.compile_ms = t.elapsed().as_secs_f64() * 1e3;
    crate::clock::record_since("GPU modules (compiled or cached, loaded)", t);
    Ok(Modules {
        blas_mod,
        red_mod,
        layout_mod,
        st_mod,
        blas,
        build_seed,
        build_move,
        reorder,
        soa,
    })
}

/// Allocations, every one on the books with its size (`setup.alloc_ms`); the link array
/// apart, with its booking.
fn allocate(
    req: &Request,
    stream: &Arc<CudaStream>,
    soa: bool,
    setup: &mut SetupTimes,
) -> Result<(Buffers, (CudaSlice<f64>, Booking))> {
    let (opts, version, volume) = (req.opts, req.version, req.volume);
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
    let canonical = if soa {
        None
    } else {
        let c =
            unsafe { stream.alloc::<f64>(n_canon) }.map_err(err("allocating the gauge field"))?;
        let b = ledger.book(Purpose::GaugeUpload, (n_canon * 8) as u64);
        Some((c, b))
    };
    let seed =
        unsafe { stream.alloc::<f64>(n_links) }.map_err(err("allocating the link buffer"))?;
    let seed_booking = ledger.book(
        Purpose::Links {
            precision: crate::linalg::Precision::Double,
            reals: if soa { 2 * elems as u8 } else { 18 },
            per_site: if soa { 4 } else { 8 },
        },
        (n_links * 8) as u64,
    );
    let move_table = stream
        .alloc_zeros::<i32>(if version.uses_move_table() {
            volume * 8
        } else {
            1
        })
        .map_err(err("allocating the displacement table"))?;
    let table_booking = ledger.book(Purpose::MoveTable, (move_table.len() * 4) as u64);
    let reduce = ReduceBuffers::new(stream, &ledger, reduce_blocks(volume * 12))?;
    stream.synchronize().map_err(err("allocating"))?;
    setup.alloc_ms = t.elapsed().as_secs_f64() * 1e3;
    crate::clock::record_since("GPU allocations", t);
    let buffers = Buffers {
        ledger,
        canonical,
        n_links,
        move_table,
        table_booking,
        reduce,
    };
    Ok((buffers, (seed, seed_booking)))
}

/// The gauge field to the device (the `GPU links` step of the time line): 3.0's r18 and
/// r12 links by default whole sites through the pinned staging buffers (or from the
/// registered field) to a one-chunk scratch buffer, laid out by the device
/// (`link_upload`); else through the staging buffers as laid out by the host.
fn upload_gauge_links(
    req: &Request,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    modules: &Modules,
    bufs: &mut Buffers,
    seed: &mut CudaSlice<f64>,
    setup: &mut SetupTimes,
) -> Result<()> {
    let links_start = Instant::now();
    let link_upload = req.upload.for_reconstruct(req.opts.reconstruct);
    if modules.soa && link_upload != LinkUpload::Host {
        upload_laid_out_on_device(req, ctx, stream, modules, bufs, seed, setup)?;
    } else {
        upload_laid_out_on_host(req, ctx, stream, modules.soa, bufs, seed, setup)?;
    }
    crate::clock::record_since("GPU links (layout and upload)", links_start);
    Ok(())
}

/// 3.0's links as whole sites to a scratch buffer, laid out by `links_from_sites`.
fn upload_laid_out_on_device(
    req: &Request,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    modules: &Modules,
    bufs: &mut Buffers,
    seed: &mut CudaSlice<f64>,
    setup: &mut SetupTimes,
) -> Result<()> {
    let (gauge, opts, stage, lattice) = (req.gauge, req.opts, req.stage, &req.lattice);
    let (volume, link_chunk_values) = (req.volume, req.link_chunk_values);
    let link_upload = req.upload.for_reconstruct(opts.reconstruct);
    let (ledger, n_links) = (&bufs.ledger, bufs.n_links);
    let layout_mod = &modules.layout_mod;
    let elems = opts.reconstruct.elems();
    let t = Instant::now();
    let stride = link_upload
        .stride(opts.reconstruct)
        .ok_or_else(|| Error::internal("no scratch stride for a device link upload"))?;
    let n = scratch_values(volume, opts.reconstruct, link_upload, link_chunk_values);
    let mut scratch = unsafe { stream.alloc::<f64>(n) }
        .map_err(err("allocating the link upload's scratch buffer"))?;
    let scratch_booking = ledger.book(Purpose::GaugeUpload, (n * 8) as u64);
    let func = function(layout_mod, "links_from_sites")?;
    let kernel = LayoutKernel {
        func: &func,
        lattice,
        elems,
        stride,
    };
    let host = links_as_f64(&gauge.links);
    let times = upload_links(
        link_upload,
        ctx,
        stream,
        host,
        &kernel,
        stage,
        &mut scratch,
        seed,
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
    Ok(())
}

/// Upload through two small pinned buffers, the host laying out one chunk while
/// the other is copied (`staging`): 3.0's link array in its final order (the
/// host permutation is the layout time), or the canonical field for the seed
/// versions.
fn upload_laid_out_on_host(
    req: &Request,
    ctx: &Arc<CudaContext>,
    stream: &Arc<CudaStream>,
    soa: bool,
    bufs: &mut Buffers,
    seed: &mut CudaSlice<f64>,
    setup: &mut SetupTimes,
) -> Result<()> {
    let (gauge, chunk_values, volume) = (req.gauge, req.chunk_values, req.volume);
    let elems = req.opts.reconstruct.elems();
    let canonical = &mut bufs.canonical;
    let staged_values = chunk_values;
    let times = if soa {
        let vh = volume / 2;
        let chunks = link_chunks(vh, elems, staged_values);
        let segments: Vec<_> = chunks.iter().map(|c| c.segments(vh, elems)).collect();
        crate::backend::cuda::core::staging::upload_staged(
            ctx,
            stream,
            seed,
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
            None => seed,
        };
        crate::backend::cuda::core::staging::upload_staged(
            ctx,
            stream,
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
    Ok(())
}

/// Lay the links out on the device: the seed versions' 8 links a site from the canonical
/// field, the displacement table, 1.6's reordered array (`setup.layout_ms` for the seed
/// versions). Returns the links as the stencil takes them and the antiperiodic mask.
fn lay_out_links(
    req: &Request,
    gpu: &mut GpuStream,
    stream: &Arc<CudaStream>,
    modules: &Modules,
    bufs: &mut Buffers,
    seed: (CudaSlice<f64>, Booking),
    setup: &mut SetupTimes,
) -> Result<((CudaSlice<f64>, Booking), i32)> {
    let (lattice, volume, version, soa) = (&req.lattice, req.volume, req.version, modules.soa);
    let (build_seed, build_move, reorder) =
        (&modules.build_seed, &modules.build_move, &modules.reorder);
    let (ledger, canonical, move_table) = (&bufs.ledger, &mut bufs.canonical, &mut bufs.move_table);
    let (mut seed, seed_booking) = seed;
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
            build_seed,
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
            build_move,
            cfg,
            [move_table, &vol, &lx, &ly, &lz, &lt]
        );
    }
    let links = match version.link_layout() {
        LinkLayout::Seed | LinkLayout::SoA => (seed, seed_booking),
        LinkLayout::Reordered => {
            let padded = volume.div_ceil(2) * 2;
            let mut reordered = stream
                .alloc_zeros::<f64>(padded * 144)
                .map_err(err("allocating the 1.6 link buffer"))?;
            let reordered_booking = ledger.book(seed_booking.purpose(), (padded * 144 * 8) as u64);
            let cfg = cfg_1d(padded, 32, 0);
            let cfg = cudarc::driver::LaunchConfig {
                block_dim: (256, 1, 1),
                ..cfg
            };
            launch!(
                gpu,
                Kernel::Setup("reorder_links_v16"),
                0,
                reorder,
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
    Ok((links, mask))
}

/// The stencil object of the version's family (`StencilImpl`), chosen once: 3.0's
/// `FastStencil`, else a `SeedStencil` with its kernels, links and displacement table.
/// `FastStencil` takes neither the table nor its booking: they come back, for the caller
/// to drop.
fn build_stencil(
    req: &Request,
    modules: &Modules,
    stream: &Arc<CudaStream>,
    ledger: &Ledger,
    move_table: CudaSlice<i32>,
    table_booking: Booking,
    links: (CudaSlice<f64>, Booking),
) -> Result<(Box<dyn StencilImpl>, UnusedTable)> {
    let (opts, version, volume, geometry) = (req.opts, req.version, req.volume, req.geometry);
    let mut bookings = vec![table_booking];
    let stencil = match programs::kind(version) {
        StencilKind::Coarse => StencilKernels::Coarse(function(&modules.st_mod, "stencil_v1_0")?),
        StencilKind::Fine => StencilKernels::Fine(function(&modules.st_mod, "stencil_fine")?),
        StencilKind::Projected => StencilKernels::Projected(V3Kernels::load(&modules.st_mod)?),
        StencilKind::Split => StencilKernels::Split {
            gemm34: function(&modules.st_mod, "xgemm34x44")?,
            gemm33: function(&modules.st_mod, "xgemm33x34")?,
            combine: function(&modules.st_mod, "dslash_combine")?,
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

    Ok(match stencil {
        StencilKernels::Projected(f) => (
            Box::new(FastStencil::new(
                &modules.blas_mod,
                &modules.red_mod,
                &modules.layout_mod,
                f,
                links,
                geometry,
                opts.reconstruct,
            )?),
            Some((move_table, bookings)),
        ),
        kernels => {
            let (links, links_booking) = links;
            bookings.push(links_booking);
            (
                Box::new(SeedStencil {
                    version,
                    geometry,
                    kernels,
                    links,
                    move_table,
                    _bookings: bookings,
                }),
                None,
            )
        }
    })
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
