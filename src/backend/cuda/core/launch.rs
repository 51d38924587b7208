//! Launch helpers every kernel family shares: a one-dimensional launch configuration and
//! the device address of an allocation as a kernel argument.

use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, LaunchConfig};

/// The device address of an allocation (kernel pointer arguments that may be null or
/// offset, and fields of either precision). The backend's stream is its only stream and
/// event tracking is off, so no synchronisation is attached.
pub(crate) fn dptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    let (p, _sync) = s.device_ptr(stream);
    p
}

pub(crate) fn grid(n: usize, per_block: usize) -> u32 {
    n.div_ceil(per_block) as u32
}

/// A one-dimensional launch of `n` work items, `block` per block.
pub(crate) fn cfg_1d(n: usize, block: usize, shared: usize) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (grid(n, block).max(1), 1, 1),
        block_dim: (block as u32, 1, 1),
        shared_mem_bytes: shared as u32,
    }
}
