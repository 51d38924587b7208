//! Field addresses and views for 3.0's launches: the data of any precision, a single
//! field's floats, a half field's integers and norms at a parity offset, and the lazily
//! made state's accessor.

use crate::backend::cuda::core::field::{DeviceData, DeviceSpinor};
use crate::backend::cuda::core::launch::dptr;
use crate::backend::cuda::dirac::blas::Core;
use crate::error::{Error, Result};
use crate::linalg::Layout;
use cudarc::driver::{CudaSlice, CudaStream};

/// The error of a `precision` kernel given a field of another layout's storage.
pub(super) fn wrong_field(layout: Layout, precision: &str) -> Error {
    Error::internal(format!(
        "a {precision}-precision kernel was given a {layout:?} field"
    ))
}

/// Device addresses of a half field's integers and norms, offset to the parity block at
/// complex index `off` (a multiple of 12 Vh).
pub(super) fn half_addr(f: &DeviceSpinor, stream: &CudaStream, off: usize) -> Result<(u64, u64)> {
    match &f.data {
        DeviceData::Half { q, norm } => Ok((
            dptr(q, stream) + 4 * off as u64,
            dptr(norm, stream) + 4 * (off / 12) as u64,
        )),
        _ => Err(wrong_field(f.layout, "half")),
    }
}

/// A single field's floats.
pub(super) fn single(f: &DeviceSpinor) -> Result<&CudaSlice<f32>> {
    match &f.data {
        DeviceData::Single(s) => Ok(s),
        _ => Err(wrong_field(f.layout, "single")),
    }
}

pub(super) fn single_mut(f: &mut DeviceSpinor) -> Result<&mut CudaSlice<f32>> {
    let layout = f.layout;
    match &mut f.data {
        DeviceData::Single(s) => Ok(s),
        _ => Err(wrong_field(layout, "single")),
    }
}

/// The value an `ensure_*` call has just made, or an internal error naming it.
pub(super) fn made<'a, T>(v: &'a Option<T>, what: &str) -> Result<&'a T> {
    v.as_ref()
        .ok_or_else(|| Error::internal(format!("{what} was not made on first use")))
}

/// Device address of a field's data and its bytes per complex number.
pub(super) fn addr(f: &DeviceSpinor, stream: &CudaStream) -> (u64, u64) {
    match &f.data {
        DeviceData::Double(d) => (dptr(d, stream), 16),
        DeviceData::Single(s) => (dptr(s, stream), 8),
        // Half fields: the integers (4 bytes a complex); the norms from `half_addr`.
        DeviceData::Half { q, .. } => (dptr(q, stream), 4),
    }
}

pub(super) fn vh(core: &Core) -> usize {
    core.lattice.volume() / 2
}
