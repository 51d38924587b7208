//! `CudaBackend`: the vector space, Wilson kernels and fused-CR capability on one NVIDIA GPU, with the stencil version of
//! the run. At construction it opens the device, checks free memory, compiles (NVRTC) and
//! loads the kernels, uploads the canonical gauge field through a pinned host buffer and
//! builds the version's link layout (and bufMove table) on the device; then it chooses,
//! once, the stencil object of the version's family (`StencilImpl`: `SeedStencil` for
//! 1.0-2.0, `FastStencil` for 3.0), to which `seam`'s `Space`, `WilsonKernels` and
//! `FusedCr` delegate with no version branch. In the solver loop everything stays on the
//! device; the only host-device traffic is the scalar each reduction returns.
//! `set_geometry` changes the launch geometry of the live backend (the tuner's hook).
//! The construction's steps are in `construct`; this file holds the struct, its accessors
//! and what a version can do.

pub mod batch;
pub mod bicgstab;
mod coarsen;
mod construct;
pub mod decomposed;
pub mod footprint;
pub mod seam;

use crate::backend::cuda::backend::footprint::construction_bytes;
use crate::backend::cuda::core::device::{ensure_fits, err, open_context, triad_on};
use crate::backend::cuda::core::options::CudaOptions;
use crate::backend::cuda::core::timing::KernelStat;
use crate::backend::cuda::core::version::StencilVersion;
use crate::backend::cuda::dirac::blas::Core;
use crate::backend::cuda::dirac::fast::FastStencil;
use crate::backend::cuda::dirac::seed::SeedStencil;
use crate::backend::cuda::dirac::stencil_impl::{Geometry, StencilImpl};
use crate::backend::cuda::engines::fused::Fused;
use crate::backend::ledger::{MemoryBooks, Purpose};
use crate::backend::Capabilities;
use crate::error::{Error, Result};
use crate::geometry::lattice::Lattice;

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::field::GaugeField;
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
