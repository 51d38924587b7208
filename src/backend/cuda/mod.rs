//! The CUDA backend (cudarc 0.19, NVRTC, dynamic loading: the binary runs without CUDA
//! installed and says so only when a GPU is asked for). It reproduces every stencilCore
//! version of the seed report (004, section IV: 1.0 to 2.0) as a selectable kernel, with
//! the seed's fine-grain BLAS-1 and multi-pass reductions around it, and adds our 3.0.
//!
//! Layers, each importing only those below it (validate/module-graph.py checks it):
//! - `core`: the GPU context, compile, device fields, stencil versions, the kernels'
//!   catalogue and launches, timing, the tuner's cache, staging, the fused CR's device
//!   scalars, the backend's options; nothing of the backend struct;
//! - `halo`: a split lattice's pack, exchange, interior and exterior (3.0);
//! - `dirac`: the Dirac operators behind `StencilImpl` (the seed versions and 3.0) and
//!   what they share (`blas::Core`: stream, BLAS-1, reductions, the halo);
//! - `engines`: the fused CR and BiCGStab iterations;
//! - `backend`: `CudaBackend` (construction, the stencil chosen once), its seam
//!   (`Space`, `WilsonKernels`, the engines' traits, `Prepare`), the split lattice's
//!   construction and the memory footprint estimate;
//! - `heatbath`: the quenched gauge update on the GPU (over `core` only);
//! - `gauge_fix`: Coulomb and Landau gauge fixing on the GPU (over `core` only).
//!
//! (`crate::app::validate` checks every version against the CPU reference.)

pub mod backend;
pub mod core;
pub mod dirac;
pub mod engines;
pub mod gauge_fix;
pub mod halo;
pub mod heatbath;
pub mod mg;

pub use self::backend::batch::check_batch;
pub use self::backend::decomposed::{
    gather_spinor, local_gauge, local_spinor, time_decomposed_apply, HaloCost,
};
pub use self::backend::{check_device_memory, stencil_capabilities, CudaBackend, SetupTimes};
pub use self::core::compile::all_sources;
pub use self::core::device::{
    device_count, device_free_memory, device_info, device_info_of, driver_version,
    host_upload_paths, stream_on, triad_bandwidth, trim_pool, upload_bandwidth, DeviceInfo,
    HostUploadPaths,
};
pub use self::core::field::DeviceSpinor;
pub use self::core::kernels::BATCH_MAX;
pub use self::core::options::CudaOptions;
pub use self::core::staging::{LinkUpload, StageShape};
pub use self::core::stencil::programs::compile_all_kernels;
pub use self::core::timing::KernelStat;
pub(crate) use self::core::timing::TIME_FIRST;
pub use self::core::tune::Geometry;
pub(crate) use self::core::version::V3_LINK_HINTS;
pub use self::core::version::{Reconstruct, StencilVersion};
pub use self::dirac::link_upload::bench::{
    bench as bench_link_upload, variant_name as link_upload_variant, UploadBenchRow,
};
pub use self::engines::fused::GRAPH_STAT;
pub use self::halo::peer::{enable_peer_access, PeerCopies};
pub use self::halo::timings::HaloTimings;

/// Open GPU `opts.device`, compile what a backend with `opts` will need for a solve in
/// `precision` (`fused`: with the fused CR; `site_term`: with the clover term or a twist)
/// and pin the staging buffers of a (local)
/// lattice of `volume` sites (`StageShape::pins` for the default link upload, shaped by
/// `opts.tuning`), on
/// background threads (`device::warm_up`): the caller overlaps this with its own work and
/// joins the handle before building the backend. None without a driver.
pub fn warm_up(
    opts: &CudaOptions,
    precision: crate::backend::Precision,
    fused: bool,
    site_term: bool,
    volume: usize,
) -> Option<std::thread::JoinHandle<()>> {
    let shape = self::core::staging::StageShape::of(&opts.tuning);
    let mode = LinkUpload::default();
    self::core::warm_up::warm_up(
        opts.device,
        self::core::stencil::programs::programs_for(
            opts.version,
            opts.reconstruct,
            precision,
            fused,
            site_term,
        ),
        shape.pins(mode, volume),
    )
}
/// `warm_up` for a rank of a split lattice on GPU `device`: the compiles only (each rank
/// pins its own staging buffers), the halo's programs included, on background threads
/// while the host builds the problem and cuts the shares (a cold start of a four-GPU run
/// spent about 40 s compiling one program after another, validate/RESULTS.md). The ranks' own compiles wait for these (`compile::program_lock`).
pub fn warm_up_split(
    device: usize,
    reconstruct: Reconstruct,
    precision: crate::backend::Precision,
    fused: bool,
    site_term: bool,
) -> Option<std::thread::JoinHandle<()>> {
    self::core::warm_up::warm_up(
        device,
        self::core::stencil::programs::programs_for_split(reconstruct, precision, fused, site_term),
        Vec::new(),
    )
}
