//! The fused CR iteration on the GPU (kernels/cr_fused.cu, kernels/cr_device.cuh): the
//! scalars live in device memory and the kernels update them themselves, so an iteration
//! needs no host read and can be recorded once as a CUDA graph and replayed.

use cudarc::driver::CudaSlice;

/// Indices into the device scalar block (the same numbers as kernels/cr_device.cuh).
pub const CR_RAR_RE: usize = 0;
pub const CR_RAR_IM: usize = 1;
pub const CR_APAP: usize = 2;
pub const CR_NR: usize = 3;
pub const CR_EPS: usize = 4;
pub const CR_ALPHA_RE: usize = 5;
pub const CR_ALPHA_IM: usize = 6;
pub const CR_BETA_RE: usize = 7;
pub const CR_BETA_IM: usize = 8;
pub const CR_ITER: usize = 9;
pub const CR_MAX_ITER: usize = 10;
pub const CR_ACTIVE: usize = 11;
pub const CR_SCALARS: usize = 12;
/// Ticket counters (kernels/cr_device.cuh CR_TICKET_*).
pub const CR_TICKET_XR: usize = 0;
pub const CR_TICKET_APPLY: usize = 1;
pub const CR_TICKET_P: usize = 2;
pub const CR_TICKETS: usize = 4;

/// The device side of one fused CR solve.
pub struct DeviceCrState {
    /// CR_SCALARS doubles.
    pub(crate) scalars: CudaSlice<f64>,
    /// nr of iterations 0..=max_iter.
    pub(crate) history: CudaSlice<f64>,
    /// Per-block partial sums (double2 as pairs), room for any launch of at least 32
    /// threads per block over the full lattice.
    pub(crate) partials: CudaSlice<f64>,
    /// CR_TICKETS counters, zero between launches.
    pub(crate) tickets: CudaSlice<u32>,
}
