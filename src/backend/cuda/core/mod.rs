//! The bottom layer of the CUDA backend: what every kernel family and engine builds on,
//! knowing nothing of the backend struct, the Dirac operators or the solvers. The GPU
//! context and its errors (`device`), the embedded kernel sources and their NVRTC compile
//! and cache (`compile`), device fields (`field`), the stencil versions and link forms
//! (`version`), the kernels' catalogue with their flop and byte counts (`kernels`), the
//! launches of each version's kernels (`stencil`, `launch`), the timed stream and the
//! graphs' time line (`timing`, `timeline`), the autotuner's cache (`tune`), pinned staging
//! (`staging`), host-side layout maps (`fast_layout`), the fused CR's device scalars
//! (`cr_state`), the options a backend is built with (`options`) and the warm-up.

pub mod compile;
pub mod cr_state;
pub mod device;
pub mod fast_layout;
pub mod field;
pub mod kernels;
pub mod launch;
pub mod options;
pub mod staging;
pub mod stencil;
pub mod timeline;
pub mod timing;
pub mod tune;
pub mod version;
pub mod warm_up;
