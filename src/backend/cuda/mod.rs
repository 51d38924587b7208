//! The CUDA backend (cudarc 0.19, NVRTC, dynamic loading: the binary runs without CUDA
//! installed and says so only when a GPU is asked for). It reproduces every stencilCore
//! version of the seed report (004, section IV: 1.0 to 2.0) as a selectable kernel, with
//! the seed's fine-grain BLAS-1 and multi-pass reductions around it, and adds our 3.0.
//!
//! Modules, each importing only those listed before it (no cycles):
//! - `version`: `StencilVersion`, what each version is and its flop and byte counts
//!   (no CUDA dependency); `tune`: the launch-geometry tune cache (no CUDA either);
//! - `compile`: the embedded kernel sources and the NVRTC compile path and its cache;
//! - `device`: opening the GPU, `device_info`, `triad_bandwidth`, memory checks;
//! - `link_upload`: 3.0's links uploaded as whole sites and laid out on the device
//!   (`LinkUpload`), its scratch buffer's size (read by `footprint`);
//! - `kernels`: per-kernel flop and byte counts; `timing`: event-timed books;
//! - `field`: `DeviceSpinor`; `stencil`: the version -> kernel-program dispatch, the launch
//!   of each version's kernels, `compile_all_kernels` (the CI check; libnvrtc only);
//! - `fused`: the fused CR's device scalars and CUDA graphs;
//! - `halo`: 3.0 on a decomposed lattice: pack, exchange (a communication stream), interior,
//!   exterior; `PeerCopies`, the one-GPU `DeviceExchange`; `HaloTimings`;
//! - `footprint`: what a backend allocates, by purpose (`backend::ledger`), as functions of
//!   the lattice and options, without a GPU (the estimate made before allocating);
//! - `core`: what every stencil shares (stream, seed BLAS-1, multi-pass reductions);
//! - `stencil_impl`: the `StencilImpl` trait, implemented by `seed` (1.0-2.0) and `fast`
//!   (3.0; host-side layout maps in `fast_layout`);
//! - `backend`: `CudaBackend` (construction, the stencil object chosen once, launch
//!   geometry for the tuner); `seam`: its `Space`, `WilsonKernels`, `FusedCr`, `Prepare`;
//!   `decomposed`: `CudaBackend::new_decomposed`, the halo books, local fields of a rank,
//!   `time_decomposed_apply` (decomposed vs undecomposed cost).
//!
//! (`crate::app::validate` checks every version against the CPU reference.)

mod backend;
mod bicgstab;
mod compile;
mod core;
mod decomposed;
mod device;
mod fast;
mod fast_layout;
mod field;
pub mod footprint;
mod fused;
mod halo;
pub mod heatbath;
pub mod kernels;
mod link_upload;
mod seam;
mod seed;
mod staging;
mod stencil;
mod stencil_impl;
mod timeline;
mod timing;
pub mod tune;
pub mod version;

pub use backend::{
    check_device_memory, stencil_capabilities, CudaBackend, CudaOptions, SetupTimes,
};
pub use compile::all_sources;
pub use decomposed::{gather_spinor, local_gauge, local_spinor, time_decomposed_apply, HaloCost};
pub use device::{
    device_count, device_free_memory, device_info, device_info_of, driver_version,
    host_upload_paths, stream_on, triad_bandwidth, trim_pool, upload_bandwidth, DeviceInfo,
    HostUploadPaths,
};
pub use field::DeviceSpinor;
pub(crate) use stencil::V3_LINK_HINTS;

/// Open GPU `opts.device`, compile what a backend with `opts` will need for a solve in
/// `precision` (`fused`: with the fused CR) and pin the staging buffers of a (local)
/// lattice of `volume` sites (`StageShape::pins` for the default link upload, shaped by
/// `opts.tuning`), on
/// background threads (`device::warm_up`): the caller overlaps this with its own work and
/// joins the handle before building the backend. None without a driver.
pub fn warm_up(
    opts: &CudaOptions,
    precision: crate::backend::Precision,
    fused: bool,
    volume: usize,
) -> Option<std::thread::JoinHandle<()>> {
    let shape = staging::StageShape::of(&opts.tuning);
    let mode = LinkUpload::default();
    device::warm_up(
        opts.device,
        stencil::programs_for(opts.version, opts.reconstruct, precision, fused),
        shape.pins(mode, volume),
    )
}
/// `warm_up` for a rank of a split lattice on GPU `device`: the compiles only (each rank
/// pins its own staging buffers), the halo's programs included, on background threads
/// while the host builds the problem and cuts the shares (a cold start of a four-GPU run
/// spent about 40 s compiling one program after another, validate/RESULTS.md runs
/// 160-161). The ranks' own compiles wait for these (`compile::program_lock`).
pub fn warm_up_split(
    device: usize,
    reconstruct: Reconstruct,
    precision: crate::backend::Precision,
    fused: bool,
) -> Option<std::thread::JoinHandle<()>> {
    device::warm_up(
        device,
        stencil::programs_for_split(reconstruct, precision, fused),
        Vec::new(),
    )
}
pub use fused::GRAPH_STAT;
pub use halo::{enable_peer_access, HaloTimings, PeerCopies};
pub use link_upload::{
    bench as bench_link_upload, variant_name as link_upload_variant, LinkUpload, UploadBenchRow,
};
pub use staging::StageShape;
pub use stencil::compile_all_kernels;
pub use stencil_impl::Geometry;
pub use timing::KernelStat;
pub(crate) use timing::TIME_FIRST;
pub use version::{Reconstruct, StencilVersion};
