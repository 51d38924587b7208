//! `CudaBackend`: the solver's `Backend` on one NVIDIA GPU, with the stencil version of
//! the run. At construction it opens the device, checks free memory, compiles (NVRTC) and
//! loads the kernels, uploads the canonical gauge field through a pinned host buffer and
//! builds the version's link layout (and bufMove table) on the device. In the solver loop
//! everything stays on the device; the only host-device traffic is the scalar each
//! reduction returns. Version 3.0 keeps links and spinors as parity-major structures of
//! arrays across sites (`LinkLayout::SoA`, see `fast`): its link array is built on the
//! device from the canonical field, and spinors are permuted to that order on upload and
//! back on download (BLAS-1 and reductions are element-wise, so they run unchanged). 3.0
//! alone has the fast path (`fast`): half-lattice and single-precision fields, the
//! even-odd operators, conversions and the fused (r|Ar) epilogue. `axpy` is the seed's
//! xaxpy; `xpay` is the seed's xscal then xaxpy; `dot` and `norm2` are the seed's
//! multi-pass tree reductions (deterministic).

mod fast;

use super::compile::{Program, BLAS1, LAYOUT, REDUCE};
use super::device::{driver_err, ensure_fits, function, load_module, open_context, triad_on};
use super::fused::{DeviceCrState, Fused};
use super::kernels::{li_in_hop_order, reduce_blocks, Kernel, BLAS_BLOCK};
use super::stencil::{self, cfg_1d, StencilArgs, StencilKernels, StencilKind};
use super::timing::{launch, GpuStream, KernelStat};
use super::version::{LinkLayout, StencilVersion};
use crate::backend::{
    unsupported, CrScalars, FusedCr, Layout, Operator, Prepare, Space, WilsonKernels,
};
use crate::error::{Error, Result};
use crate::field::{GaugeField, SpinorField, C64};
use crate::geometry::lattice::{Boundary, Lattice, NDIM};
use cudarc::driver::{CudaFunction, CudaSlice, DriverError, PinnedHostSlice};
use std::time::Instant;

/// How to run on the GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CudaOptions {
    /// The stencilCore version.
    pub version: StencilVersion,
    /// Sites per block of the fine-grain versions 1.2 to 1.6.1 and 2.0 (12 * multiple
    /// threads); the seed used 16 (Fermi), 8 (Kepler 3.0) and 64 (Kepler 3.5).
    pub multiple: usize,
    /// Threads per block of the coarse-grain version 1.0 (one thread per site); the seed
    /// chose 256, the autotuner sweeps 64..=512 (`StencilVersion::max_coarse_block`).
    pub coarse_block: usize,
    /// GPU ordinal.
    pub device: usize,
    /// Read 12 reals per link (rows 0 and 1; row 2 = conj(row0 x row1) rebuilt in
    /// registers) instead of 18: version 3.0 only, exact for SU(3) fields to rounding.
    pub reconstruct_12: bool,
}

impl Default for CudaOptions {
    fn default() -> Self {
        CudaOptions {
            version: StencilVersion::V1_5,
            multiple: 16,
            coarse_block: crate::backend::cuda::version::COARSE_BLOCK,
            device: 0,
            reconstruct_12: false,
        }
    }
}

/// Wall-clock times of the set-up phases, in milliseconds.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize)]
pub struct SetupTimes {
    /// NVRTC compilation and module loading (first use in the process only).
    pub compile_ms: f64,
    /// Device allocations.
    pub alloc_ms: f64,
    /// Gauge field through the pinned buffer to the device.
    pub upload_ms: f64,
    /// Building the version's link layout (and table) on the device.
    pub layout_ms: f64,
}

/// A spinor field on the device: 12 complex numbers per site of its layout's subset, (re,
/// im) pairs, in the canonical order [site][spin][colour] (seed versions: full double
/// fields only), or for version 3.0 in its parity-major order (see `fast`), in double or
/// single precision.
pub struct DeviceSpinor {
    data: DeviceData,
    layout: Layout,
}

/// A field's storage.
pub(crate) enum DeviceData {
    Double(CudaSlice<f64>),
    Single(CudaSlice<f32>),
}

/// A field's device data, for kernel arguments (the fused CR kernels take either).
pub(crate) enum RawField<'a> {
    Double(&'a CudaSlice<f64>),
    Single(&'a CudaSlice<f32>),
}

pub(crate) enum RawFieldMut<'a> {
    Double(&'a mut CudaSlice<f64>),
    Single(&'a mut CudaSlice<f32>),
}

impl DeviceSpinor {
    pub(crate) fn raw(&self) -> RawField<'_> {
        match &self.data {
            DeviceData::Double(d) => RawField::Double(d),
            DeviceData::Single(s) => RawField::Single(s),
        }
    }

    pub(crate) fn raw_mut(&mut self) -> RawFieldMut<'_> {
        match &mut self.data {
            DeviceData::Double(d) => RawFieldMut::Double(d),
            DeviceData::Single(s) => RawFieldMut::Single(s),
        }
    }

    /// Number of complex numbers.
    pub fn len(&self) -> usize {
        match &self.data {
            DeviceData::Double(d) => d.len() / 2,
            DeviceData::Single(s) => s.len() / 2,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The double data of a full field (the seed versions' only kind).
    fn double(&self) -> Result<&CudaSlice<f64>> {
        match &self.data {
            DeviceData::Double(d) => Ok(d),
            DeviceData::Single(_) => Err(Error::invalid(
                "backend",
                "a single-precision field where a double one is needed",
            )),
        }
    }

    fn double_mut(&mut self) -> Result<&mut CudaSlice<f64>> {
        match &mut self.data {
            DeviceData::Double(d) => Ok(d),
            DeviceData::Single(_) => Err(Error::invalid(
                "backend",
                "a single-precision field where a double one is needed",
            )),
        }
    }
}

struct BlasKernels {
    xscal: CudaFunction,
    xaxpy: CudaFunction,
    norm2_partial: CudaFunction,
    dot_partial: CudaFunction,
    sum_partial: CudaFunction,
    sum2_partial: CudaFunction,
}

pub struct CudaBackend {
    gpu: GpuStream,
    lattice: Lattice,
    kappa: f64,
    version: StencilVersion,
    multiple: usize,
    coarse_block: usize,
    device_name: String,
    blas: BlasKernels,
    stencil: StencilKernels,
    links: CudaSlice<f64>,
    move_table: CudaSlice<i32>,
    /// Bit mu: fermions antiperiodic in direction mu (applied in-kernel by 3.0).
    antiperiodic_mask: i32,
    /// Ping-pong buffers of the reductions' partial sums (room for complex ones).
    partial: [CudaSlice<f64>; 2],
    /// Pinned host staging for spinor uploads and downloads (allocated on first use).
    staging: Option<PinnedHostSlice<f64>>,
    setup: SetupTimes,
    applications: u64,
    /// The fused CR iteration's kernels (loaded on first use) and recorded graphs.
    fused: Fused,
    /// 3.0 was built with two-row link compression.
    reconstruct_12: bool,
    /// 3.0's fast path (None for the seed versions).
    fast: Option<fast::FastState>,
}

fn as_f64(data: &[C64]) -> &[f64] {
    // SAFETY: num_complex::Complex<f64> is #[repr(C)] { re, im }: two f64, no padding.
    unsafe { std::slice::from_raw_parts(data.as_ptr() as *const f64, data.len() * 2) }
}

fn as_f64_mut(data: &mut [C64]) -> &mut [f64] {
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr() as *mut f64, data.len() * 2) }
}

fn err(what: &'static str) -> impl Fn(DriverError) -> Error {
    move |e| driver_err(what, e)
}

/// Bytes of device memory a backend needs: links (and the set-up copies), table,
/// version buffers, reduction partials, and 8 spinor fields for the solver (CR's five,
/// the source, and two for checks). For 3.0 also what the fast path may add: the
/// single-precision links and the odd Schur temporaries in both precisions.
pub fn device_bytes_needed(lattice: &Lattice, version: StencilVersion) -> usize {
    let v = lattice.volume();
    let spinor = v * 12 * 16;
    let canonical = v * NDIM * 9 * 16;
    let links = if version.link_layout() == LinkLayout::SoA {
        v * NDIM * 9 * 16
    } else {
        v * 72 * 16
    };
    let mut need = canonical + links + 8 * spinor + 4 * reduce_blocks(v * 12) * 16;
    if version.uses_move_table() {
        need += v * 8 * 4;
    }
    if version.link_layout() == LinkLayout::Reordered {
        need += v.div_ceil(2) * 2 * 72 * 16;
    }
    if stencil::kind(version) == StencilKind::Split {
        need += 2 * spinor;
    }
    if stencil::kind(version) == StencilKind::Projected {
        need += v * NDIM * 9 * 8; // float2 links
        need += spinor / 2 + spinor / 4; // odd temporaries, double and single
    }
    need
}

/// Refuse, before any allocation, a lattice whose backend would not fit in the free
/// memory of GPU `device` (Error::DeviceMemory with both numbers).
pub fn check_device_memory(
    lattice: &Lattice,
    version: StencilVersion,
    device: usize,
) -> Result<()> {
    let ctx = open_context(device)?;
    ensure_fits(
        &ctx,
        device_bytes_needed(lattice, version),
        &format!("lattice {} with version {version}", lattice.dims_string()),
    )
}

impl CudaBackend {
    pub fn new(gauge: &GaugeField, kappa: f64, opts: &CudaOptions) -> Result<Self> {
        let version = opts.version;
        version.check_multiple(opts.multiple)?;
        if opts.reconstruct_12 && !version.supports_reconstruct_12() {
            return Err(Error::invalid(
                "reconstruct",
                format!(
                    "two-row link compression is implemented by version 3.0 only, not {version}"
                ),
            ));
        }
        let max_block = version.max_coarse_block();
        if !(32..=max_block).contains(&opts.coarse_block) || !opts.coarse_block.is_multiple_of(32) {
            return Err(Error::invalid(
                "coarse_block",
                format!(
                    "the block of the one-thread-per-site versions must be a multiple of 32 in 32..={max_block} for version {version}, got {}",
                    opts.coarse_block
                ),
            ));
        }
        let lattice = gauge.lattice.clone();
        if version == StencilVersion::V3_0 {
            fast::check_even_lattice(&lattice)?;
        }
        let volume = lattice.volume();
        let mut setup = SetupTimes::default();

        let ctx = open_context(opts.device)?;
        let device_name = ctx.name().map_err(err("reading the device name"))?;
        ensure_fits(
            &ctx,
            device_bytes_needed(&lattice, version),
            &format!("lattice {} with version {version}", lattice.dims_string()),
        )?;

        // One stream, ordered by construction: no per-buffer event tracking.
        // SAFETY: all work of this backend goes to its single stream.
        unsafe { ctx.disable_event_tracking() };
        let stream = ctx.new_stream().map_err(err("creating a stream"))?;
        let mut gpu = GpuStream::new(ctx.clone(), stream.clone());

        // Kernels: compile on first use and load.
        let t = Instant::now();
        let (blas_mod, _) = load_module(&ctx, &Program::plain(&BLAS1))?;
        let (red_mod, _) = load_module(&ctx, &Program::plain(&REDUCE))?;
        let (layout_mod, _) = load_module(&ctx, &Program::plain(&LAYOUT))?;
        let (st_mod, fresh) =
            load_module(&ctx, &stencil::program(version, opts.reconstruct_12, false))?;
        if fresh && stencil::needs_li_constant(version) {
            upload_li(&st_mod, &stream)?;
        }
        let blas = BlasKernels {
            xscal: function(&blas_mod, "xscal")?,
            xaxpy: function(&blas_mod, "xaxpy")?,
            norm2_partial: function(&red_mod, "norm2_partial")?,
            dot_partial: function(&red_mod, "dot_partial")?,
            sum_partial: function(&red_mod, "sum_partial")?,
            sum2_partial: function(&red_mod, "sum2_partial")?,
        };
        let build_seed = function(&layout_mod, "build_seed_links")?;
        let build_move = function(&layout_mod, "build_move_table")?;
        let reorder = function(&layout_mod, "reorder_links_v16")?;
        let build_v3 = function(&layout_mod, "build_v3_links")?;
        let soa = version.link_layout() == LinkLayout::SoA;
        setup.compile_ms = t.elapsed().as_secs_f64() * 1e3;

        // Allocations.
        let t = Instant::now();
        let n_canon = volume * NDIM * 18;
        let mut canonical =
            unsafe { stream.alloc::<f64>(n_canon) }.map_err(err("allocating the gauge field"))?;
        // 3.0 keeps 4 links per site (36 complex); the others the seed's 8 (72 complex).
        let mut seed = unsafe { stream.alloc::<f64>(volume * if soa { 72 } else { 144 }) }
            .map_err(err("allocating the link buffer"))?;
        let mut move_table = stream
            .alloc_zeros::<i32>(if version.uses_move_table() {
                volume * 8
            } else {
                1
            })
            .map_err(err("allocating the displacement table"))?;
        let nblocks = reduce_blocks(volume * 12);
        let partial = [
            stream
                .alloc_zeros::<f64>(2 * nblocks)
                .map_err(err("allocating reduction buffers"))?,
            stream
                .alloc_zeros::<f64>(2 * nblocks)
                .map_err(err("allocating reduction buffers"))?,
        ];
        stream.synchronize().map_err(err("allocating"))?;
        setup.alloc_ms = t.elapsed().as_secs_f64() * 1e3;

        // Upload the canonical field through pinned memory.
        let t = Instant::now();
        {
            // SAFETY: filled completely below before use.
            let mut pinned = unsafe { ctx.alloc_pinned::<f64>(n_canon) }
                .map_err(err("allocating pinned memory"))?;
            let host = pinned.as_mut_slice().map_err(err("pinned memory"))?;
            for (k, u) in gauge.links.iter().enumerate() {
                host[k * 18..k * 18 + 18].copy_from_slice(as_f64(u.0.as_flattened()));
            }
            stream
                .memcpy_htod(&pinned, &mut canonical)
                .map_err(err("uploading the gauge field"))?;
            stream
                .synchronize()
                .map_err(err("uploading the gauge field"))?;
        }
        setup.upload_ms = t.elapsed().as_secs_f64() * 1e3;

        // Build the version's layout on the device.
        let t = Instant::now();
        let dims: [i32; 4] = std::array::from_fn(|mu| lattice.dims[mu] as i32);
        let [lx, ly, lz, lt] = dims;
        let vol = volume as i32;
        let mask: i32 = (0..NDIM)
            .filter(|&mu| lattice.boundary[mu] == Boundary::Antiperiodic)
            .map(|mu| 1 << mu)
            .sum();
        if soa {
            let cfg = cfg_1d(volume * 36, BLAS_BLOCK, 0);
            launch!(
                gpu,
                Kernel::Setup("build_v3_links"),
                0,
                &build_v3,
                cfg,
                [&canonical, &mut seed, &vol, &lx, &ly, &lz, &lt]
            );
        } else {
            let cfg = cfg_1d(volume * 72, BLAS_BLOCK, 0);
            launch!(
                gpu,
                Kernel::Setup("build_seed_links"),
                0,
                &build_seed,
                cfg,
                [&canonical, &mut seed, &vol, &lx, &ly, &lz, &lt, &mask]
            );
        }
        drop(canonical);
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
            LinkLayout::Seed | LinkLayout::SoA => seed,
            LinkLayout::Reordered => {
                let padded = volume.div_ceil(2) * 2;
                let mut reordered = stream
                    .alloc_zeros::<f64>(padded * 144)
                    .map_err(err("allocating the 1.6 link buffer"))?;
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
                drop(seed);
                reordered
            }
        };
        gpu.reset()?; // the set-up launches are not the solve's books
        setup.layout_ms = t.elapsed().as_secs_f64() * 1e3;

        let stencil = match stencil::kind(version) {
            StencilKind::Coarse => StencilKernels::Coarse(function(&st_mod, "stencil_v1_0")?),
            StencilKind::Fine => StencilKernels::Fine(function(&st_mod, "stencil_fine")?),
            StencilKind::Projected => StencilKernels::Projected(function(&st_mod, "stencil_v3")?),
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

        let fast = match &stencil {
            StencilKernels::Projected(f) => Some(fast::FastState::new(
                &blas_mod,
                &red_mod,
                &layout_mod,
                f.clone(),
            )?),
            _ => None,
        };

        Ok(CudaBackend {
            gpu,
            lattice,
            kappa,
            version,
            multiple: opts.multiple,
            coarse_block: opts.coarse_block,
            device_name,
            blas,
            stencil,
            links,
            move_table,
            antiperiodic_mask: mask,
            partial,
            staging: None,
            setup,
            applications: 0,
            fused: Default::default(),
            reconstruct_12: opts.reconstruct_12,
            fast,
        })
    }

    pub fn version(&self) -> StencilVersion {
        self.version
    }

    pub fn multiple(&self) -> usize {
        self.multiple
    }

    /// Threads per block of the stencil launch as configured (1.0 and 3.0: `coarse_block`).
    pub fn block_threads(&self) -> usize {
        match self.version {
            v if v.uses_coarse_block() => self.coarse_block,
            v => v.block_threads(self.multiple),
        }
    }

    pub fn lattice(&self) -> &Lattice {
        &self.lattice
    }

    pub fn device_name(&self) -> &str {
        &self.device_name
    }

    pub fn setup_times(&self) -> &SetupTimes {
        &self.setup
    }

    /// Operator applications made so far.
    pub fn applications(&self) -> u64 {
        self.applications
    }

    /// Per-kernel launches, event-timed milliseconds, flops and bytes since construction
    /// (or the last `reset_stats`). Synchronises the stream.
    pub fn kernel_stats(&self) -> Vec<KernelStat> {
        self.gpu.stats().unwrap_or_default()
    }

    /// The operator's kernels summed into one line ("stencil 1.5").
    pub fn stencil_stats(&self) -> KernelStat {
        let all = self.gpu.stats().unwrap_or_default();
        let mut s = KernelStat {
            name: format!("stencil {}", self.version),
            launches: 0,
            millis: 0.0,
            flops: 0,
            bytes: 0,
        };
        for (k, st) in all.iter().enumerate() {
            if self.gpu.is_stencil_stat(k) {
                s.launches += st.launches;
                s.millis += st.millis;
                s.flops += st.flops;
                s.bytes += st.bytes;
            }
        }
        s
    }

    pub fn reset_stats(&mut self) -> Result<()> {
        self.applications = 0;
        self.gpu.reset()
    }

    /// Wait for all queued work.
    pub fn synchronize(&mut self) -> Result<()> {
        self.gpu.sync()
    }

    /// The streaming triad on this backend's device (see `triad_bandwidth`).
    pub fn triad_bandwidth(&mut self, bytes: usize) -> Result<f64> {
        self.gpu.sync()?;
        triad_on(&self.gpu.ctx, bytes)
    }

    fn n_complex(&self) -> usize {
        self.lattice.volume() * 12
    }

    fn staging(&mut self) -> Result<&mut PinnedHostSlice<f64>> {
        if self.staging.is_none() {
            let n = self.n_complex() * 2;
            // SAFETY: the contents are written before being read. Flags 0: cached, so
            // that downloads can be read back quickly.
            let p = unsafe { self.gpu.ctx.alloc_pinned_with_flags::<f64>(n, 0) }
                .map_err(err("allocating pinned memory"))?;
            self.staging = Some(p);
        }
        Ok(self.staging.as_mut().unwrap())
    }

    fn check_len(&self, n: usize, what: &str) -> Result<()> {
        if n != self.n_complex() {
            return Err(Error::invalid(
                what,
                format!(
                    "field of {} complex numbers on a lattice that needs {}",
                    n,
                    self.n_complex()
                ),
            ));
        }
        Ok(())
    }

    /// Launch the first reduction pass, then sum the partials until one value is left,
    /// and read it. `complex` selects the double2 passes. Returns (re, im).
    fn finish_reduction(&mut self, first_blocks: usize, complex: bool) -> Result<(f64, f64)> {
        let mut len = first_blocks;
        let mut src = 0usize;
        while len > 1 {
            let blocks = reduce_blocks(len);
            let n = len as i32;
            let cfg = cfg_1d(len, 2 * super::kernels::REDUCE_BLOCK, 0);
            let cfg = cudarc::driver::LaunchConfig {
                block_dim: (super::kernels::REDUCE_BLOCK as u32, 1, 1),
                ..cfg
            };
            let (a, b) = self.partial.split_at_mut(1);
            let (from, to) = if src == 0 {
                (&a[0], &mut b[0])
            } else {
                (&b[0], &mut a[0])
            };
            if complex {
                launch!(
                    self.gpu,
                    Kernel::Sum2Partial,
                    len,
                    &self.blas.sum2_partial,
                    cfg,
                    [from, &n, to]
                );
            } else {
                launch!(
                    self.gpu,
                    Kernel::SumPartial,
                    len,
                    &self.blas.sum_partial,
                    cfg,
                    [from, &n, to]
                );
            }
            len = blocks;
            src = 1 - src;
        }
        let mut out = [0.0f64; 2];
        let view = self.partial[src].slice(0..2);
        self.gpu
            .stream
            .memcpy_dtoh(&view, &mut out)
            .map_err(err("reading a reduction result"))?;
        self.gpu
            .stream
            .synchronize()
            .map_err(err("reading a reduction result"))?;
        // The stream is idle now: read the timing events of everything before.
        self.gpu.collect()?;
        Ok((out[0], if complex { out[1] } else { 0.0 }))
    }

    fn reduce_cfg(n: usize) -> cudarc::driver::LaunchConfig {
        cudarc::driver::LaunchConfig {
            grid_dim: (reduce_blocks(n) as u32, 1, 1),
            block_dim: (super::kernels::REDUCE_BLOCK as u32, 1, 1),
            shared_mem_bytes: 0,
        }
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

/// y = x + a y over n complex numbers the seed's way: y = a y (xscal), then y = y + 1 x
/// (xaxpy). Shared by the seed versions and 3.0's double fields.
fn seed_xpay(
    gpu: &mut GpuStream,
    blas: &BlasKernels,
    x: &CudaSlice<f64>,
    a: C64,
    y: &mut CudaSlice<f64>,
    n: usize,
) -> Result<()> {
    let ni = n as i32;
    let cfg = cfg_1d(n, BLAS_BLOCK, 0);
    launch!(
        gpu,
        Kernel::Xscal,
        n,
        &blas.xscal,
        cfg,
        [&mut *y, &a.re, &a.im, &ni]
    );
    let (one, zero) = (1.0f64, 0.0f64);
    launch!(
        gpu,
        Kernel::Xaxpy,
        n,
        &blas.xaxpy,
        cfg,
        [x, y, &one, &zero, &ni]
    );
    Ok(())
}

impl Space for CudaBackend {
    type Field = DeviceSpinor;

    fn describe(&self) -> String {
        format!(
            "cuda {} (stencilCore {}, multiple {})",
            self.device_name, self.version, self.multiple
        )
    }

    fn alloc_layout(&mut self, layout: Layout) -> Result<DeviceSpinor> {
        if self.is_fast() {
            self.fast_alloc(layout)
        } else if layout == Layout::FULL {
            self.seed_alloc()
        } else {
            Err(unsupported(self, "half-lattice or single-precision fields"))
        }
    }

    fn layout(&self, field: &DeviceSpinor) -> Layout {
        field.layout
    }

    fn upload(&mut self, host: &SpinorField) -> Result<DeviceSpinor> {
        self.check_len(host.data.len(), "source")?;
        let mut field = self.alloc()?;
        let stream = self.gpu.stream.clone();
        let soa = self.version.link_layout() == LinkLayout::SoA;
        let lattice = self.lattice.clone();
        let pinned = self.staging()?;
        let dst = pinned.as_mut_slice().map_err(err("pinned memory"))?;
        if soa {
            fast::spinor_to_soa(&lattice, as_f64(&host.data), dst);
        } else {
            dst.copy_from_slice(as_f64(&host.data));
        }
        stream
            .memcpy_htod(&*pinned, field.double_mut()?)
            .map_err(err("uploading a spinor field"))?;
        // The staging buffer is reused: wait until the copy has read it.
        stream
            .synchronize()
            .map_err(err("uploading a spinor field"))?;
        Ok(field)
    }

    fn download(&mut self, field: &DeviceSpinor) -> Result<SpinorField> {
        let mut host = SpinorField::zeros(self.lattice.volume());
        if field.layout != Layout::FULL {
            // 3.0's other layouts: widened to double, the sites a half field lacks zero.
            let raw = self.read_raw(field)?;
            let parity = field.layout.subset.parity();
            fast::spinor_from_soa(&self.lattice, &raw, as_f64_mut(&mut host.data), parity);
            return Ok(host);
        }
        self.check_len(field.len(), "field")?;
        let stream = self.gpu.stream.clone();
        let pinned = self.staging()?;
        stream
            .memcpy_dtoh(field.double()?, &mut *pinned)
            .map_err(err("downloading a spinor field"))?;
        stream
            .synchronize()
            .map_err(err("downloading a spinor field"))?;
        let soa = self.version.link_layout() == LinkLayout::SoA;
        let lattice = self.lattice.clone();
        let pinned = self.staging()?;
        let src = pinned.as_slice().map_err(err("pinned memory"))?;
        if soa {
            fast::spinor_from_soa(&lattice, src, as_f64_mut(&mut host.data), None);
        } else {
            as_f64_mut(&mut host.data).copy_from_slice(src);
        }
        Ok(host)
    }

    fn copy(&mut self, dst: &mut DeviceSpinor, src: &DeviceSpinor) -> Result<()> {
        if self.is_fast() {
            return self.fast_copy(dst, src);
        }
        let p = self.gpu.begin()?;
        self.gpu
            .stream
            .memcpy_dtod(src.double()?, dst.double_mut()?)
            .map_err(err("copying a field"))?;
        self.gpu.end(p, Kernel::Copy, self.n_complex())
    }

    fn convert(&mut self, dst: &mut DeviceSpinor, src: &DeviceSpinor) -> Result<()> {
        if !self.is_fast() {
            return Err(unsupported(self, "field conversions"));
        }
        self.fast_convert(dst, src)
    }

    fn axpy(&mut self, a: C64, x: &DeviceSpinor, y: &mut DeviceSpinor) -> Result<()> {
        if self.is_fast() {
            return self.fast_axpy(a, x, y);
        }
        let n = self.n_complex();
        let ni = n as i32;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        launch!(
            self.gpu,
            Kernel::Xaxpy,
            n,
            &self.blas.xaxpy,
            cfg,
            [x.double()?, y.double_mut()?, &a.re, &a.im, &ni]
        );
        Ok(())
    }

    fn xpay(&mut self, x: &DeviceSpinor, a: C64, y: &mut DeviceSpinor) -> Result<()> {
        if self.is_fast() {
            return self.fast_xpay(x, a, y);
        }
        let n = self.n_complex();
        seed_xpay(
            &mut self.gpu,
            &self.blas,
            x.double()?,
            a,
            y.double_mut()?,
            n,
        )
    }

    fn dot(&mut self, x: &DeviceSpinor, y: &DeviceSpinor) -> Result<C64> {
        if self.is_fast() {
            return self.fast_dot(x, y);
        }
        let n = self.n_complex();
        let ni = n as i32;
        let cfg = Self::reduce_cfg(n);
        launch!(
            self.gpu,
            Kernel::DotPartial,
            n,
            &self.blas.dot_partial,
            cfg,
            [x.double()?, y.double()?, &ni, &mut self.partial[0]]
        );
        let (re, im) = self.finish_reduction(reduce_blocks(n), true)?;
        Ok(C64::new(re, im))
    }

    fn norm2(&mut self, x: &DeviceSpinor) -> Result<f64> {
        if self.is_fast() {
            return self.fast_norm2(x);
        }
        let n = self.n_complex();
        let ni = n as i32;
        let cfg = Self::reduce_cfg(n);
        launch!(
            self.gpu,
            Kernel::Norm2Partial,
            n,
            &self.blas.norm2_partial,
            cfg,
            [x.double()?, &ni, &mut self.partial[0]]
        );
        Ok(self.finish_reduction(reduce_blocks(n), false)?.0)
    }
}

impl WilsonKernels for CudaBackend {
    fn kappa(&self) -> f64 {
        self.kappa
    }

    fn apply(&mut self, op: Operator, out: &mut DeviceSpinor, inp: &DeviceSpinor) -> Result<()> {
        if self.is_fast() {
            return self.fast_apply(op, out, inp, None);
        }
        if op.is_schur() {
            return Err(unsupported(self, "the even-odd Schur operator"));
        }
        let args = StencilArgs {
            version: self.version,
            multiple: self.multiple,
            coarse_block: self.coarse_block,
            dims: std::array::from_fn(|mu| self.lattice.dims[mu] as i32),
            volume: self.lattice.volume(),
            links: &self.links,
            move_table: &self.move_table,
            kappa: self.kappa,
            g5: op.gamma5(),
            antiperiodic_mask: self.antiperiodic_mask,
            reconstruct_12: self.reconstruct_12,
        };
        self.stencil
            .launch(&mut self.gpu, &args, inp.double()?, out.double_mut()?)?;
        self.applications += 1;
        Ok(())
    }

    fn hop_xpay(
        &mut self,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        y: &DeviceSpinor,
        c: f64,
        gamma5: bool,
    ) -> Result<()> {
        if !self.is_fast() {
            return Err(unsupported(self, "even-odd hopping terms"));
        }
        self.fast_hop_xpay(out, inp, y, c, gamma5)
    }
}

impl FusedCr for CudaBackend {
    type CrState = DeviceCrState;

    fn fused_cr_available(&self) -> bool {
        self.fast_path().is_ok()
    }

    fn cr_state(&mut self, s: &CrScalars) -> Result<DeviceCrState> {
        self.fast_path()?;
        self.fused
            .new_state(&mut self.gpu, self.lattice.volume(), s)
    }

    fn cr_set(&mut self, state: &mut DeviceCrState, s: &CrScalars) -> Result<()> {
        self.fast_path()?;
        Fused::set(&mut self.gpu, state, s)
    }

    fn cr_get(&mut self, state: &DeviceCrState) -> Result<CrScalars> {
        self.fast_path()?;
        Fused::get(&mut self.gpu, state)
    }

    fn cr_history(&mut self, state: &DeviceCrState) -> Result<Vec<f64>> {
        self.fast_path()?;
        Fused::history(&mut self.gpu, state)
    }

    fn cr_update_xr(
        &mut self,
        state: &mut DeviceCrState,
        p: &DeviceSpinor,
        ap: &DeviceSpinor,
        x: &mut DeviceSpinor,
        r: &mut DeviceSpinor,
    ) -> Result<()> {
        self.fast_path()?;
        let (p, ap, x, r) = (p.raw(), ap.raw(), x.raw_mut(), r.raw_mut());
        self.fused.update_xr(&mut self.gpu, state, p, ap, x, r)
    }

    fn cr_apply_dot(
        &mut self,
        op: Operator,
        state: &mut Self::CrState,
        r: &DeviceSpinor,
        ar: &mut DeviceSpinor,
    ) -> Result<()> {
        if !self.is_fast() {
            return Err(unsupported(self, "the fused CR iteration"));
        }
        self.fast_apply(op, ar, r, Some(state))
    }

    fn cr_update_p(
        &mut self,
        state: &mut DeviceCrState,
        r: &DeviceSpinor,
        ar: &DeviceSpinor,
        p: &mut DeviceSpinor,
        ap: &mut DeviceSpinor,
    ) -> Result<()> {
        self.fast_path()?;
        let (r, ar, p, ap) = (r.raw(), ar.raw(), p.raw_mut(), ap.raw_mut());
        self.fused.update_p(&mut self.gpu, state, r, ar, p, ap)
    }

    fn repeat(
        &mut self,
        key: u64,
        times: usize,
        body: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()> {
        if self.fast_path().is_err() {
            return (0..times).try_for_each(|_| body(self));
        }
        super::fused::repeat(self, |b| (&mut b.gpu, &mut b.fused), key, times, body)
    }

    fn forget_graphs(&mut self) {
        self.fused.forget_graphs();
    }
}

impl Prepare for CudaBackend {
    fn prepare(&mut self, precision: crate::backend::Precision, fused: bool) -> Result<()> {
        if self.fast_path().is_err() {
            return Ok(());
        }
        self.prepare_fast_path(precision)?;
        if fused {
            // Loads the fused-CR module (its first use compiles it).
            let s = CrScalars::default();
            drop(self.cr_state(&s)?);
        }
        Ok(())
    }
}

impl CudaBackend {
    /// A full double field in the seed versions' layout.
    fn seed_alloc(&mut self) -> Result<DeviceSpinor> {
        let n = self.n_complex() * 2;
        let data = self
            .gpu
            .stream
            .alloc_zeros::<f64>(n)
            .map_err(err("allocating a spinor field"))?;
        Ok(DeviceSpinor {
            data: DeviceData::Double(data),
            layout: Layout::FULL,
        })
    }
}

impl CudaBackend {
    /// The fast path (fused CR, graphs) is version 3.0's; others refuse by name.
    fn fast_path(&self) -> Result<()> {
        if self.version == StencilVersion::V3_0 {
            Ok(())
        } else {
            Err(crate::backend::unsupported(self, "the fused CR iteration"))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    /// Construction agrees with an independent probe of the machine. Without a GPU (CI)
    /// it is exactly the device probe's Error::Cuda (the same message, not merely some
    /// error), never a panic; with a GPU and libnvrtc it succeeds; with a GPU but no
    /// libnvrtc it is an Error::Cuda naming libnvrtc. (It used to accept Ok and any
    /// non-empty Err alike, so it could not fail: issue 10.)
    #[test]
    fn construction_without_a_gpu_is_a_cuda_error() {
        let l = Lattice::new([2, 2, 2, 2], DEFAULT_BOUNDARY).unwrap();
        let g = GaugeField::unit(&l);
        let built = CudaBackend::new(&g, 0.1, &CudaOptions::default());
        // SAFETY: only tries to dlopen the library by its usual names.
        let nvrtc = unsafe { cudarc::nvrtc::sys::is_culib_present() };
        match (super::super::device::device_info(), built) {
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
    fn memory_need_grows_with_the_version_buffers() {
        let l = Lattice::new([4, 4, 4, 4], DEFAULT_BOUNDARY).unwrap();
        let base = device_bytes_needed(&l, StencilVersion::V1_4);
        assert!(device_bytes_needed(&l, StencilVersion::V1_0) > base); // bufMove table
        assert!(device_bytes_needed(&l, StencilVersion::V1_6) > base); // reordered copy
        assert!(device_bytes_needed(&l, StencilVersion::V2_0) > base); // tmp1, tmp2
        assert!(device_bytes_needed(&l, StencilVersion::V3_0) < base); // 4 links, not 8
    }
}
