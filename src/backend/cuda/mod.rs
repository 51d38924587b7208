//! The CUDA backend (cudarc 0.19, NVRTC, dynamic loading: the binary runs without CUDA
//! installed and says so only when a GPU is asked for). It reproduces every stencilCore
//! version of the seed report (004, section IV: 1.0 to 2.0) as a selectable kernel, with
//! the seed's fine-grain BLAS-1 and multi-pass reductions around it.
//!
//! - `version`: `StencilVersion`, what each version is and its flop and byte counts
//!   (no CUDA dependency);
//! - `compile`: the embedded kernel sources, the NVRTC compile path and its cache,
//!   `compile_all_kernels` (the CI check; libnvrtc only, no GPU);
//! - `device`: opening the GPU, `device_info`, `triad_bandwidth`, memory checks;
//! - `stencil`: the one dispatch point from a version to its kernels;
//! - `kernels`: per-kernel flop and byte counts; `timing`: event-timed books;
//! - `backend`: `CudaBackend`: the vector space, the Wilson kernels and the fused-CR
//!   capability on the GPU;
//! - `tune`: the launch-geometry tune cache.
//!
//! (`crate::app::validate` checks every version against the CPU reference.)

mod backend;
mod compile;
mod device;
mod fused;
pub mod heatbath;
pub mod kernels;
mod stencil;
mod timing;
pub mod tune;
pub mod version;

pub use backend::{
    check_device_memory, device_bytes_needed, CudaBackend, CudaOptions, DeviceSpinor, SetupTimes,
};
pub use compile::{all_sources, compile_all_kernels};
pub use device::{
    device_free_memory, device_info, device_info_of, triad_bandwidth, upload_bandwidth, DeviceInfo,
};
pub use timing::KernelStat;
pub use version::StencilVersion;
