//! `DeviceSpinor`: a spinor field on the device, in the layout and precision of the
//! stencil that made it (the seed versions: full double fields in the canonical order
//! [site][spin][colour]; 3.0: every `Layout`, parity-major, see `fast`), and the raw views
//! the fused CR kernels take; and SU(3) matrices (links, a gauge transform) up and down in
//! the canonical host order the gauge kernels read (`upload_matrices`,
//! `download_matrices`).

use crate::backend::cuda::core::device::driver_err;
use crate::backend::ledger::Booking;
use crate::error::{Error, Result};
use crate::field::{Su3, C64};
use crate::linalg::Layout;
use cudarc::driver::{CudaSlice, CudaStream};
use std::sync::Arc;

/// Reals of one SU(3) matrix on the device.
const SU3_REALS: usize = 18;

/// SU(3) matrices uploaded as kernels/su3.cuh's `load_link` reads them: 18 reals each,
/// row-major, re then im (`Su3::push_reals`); `what` names them in an error.
pub(crate) fn upload_matrices(
    stream: &Arc<CudaStream>,
    m: &[Su3],
    what: &str,
) -> Result<CudaSlice<f64>> {
    let mut flat = Vec::with_capacity(m.len() * SU3_REALS);
    m.iter().for_each(|u| u.push_reals(&mut flat));
    stream
        .clone_htod(&flat)
        .map_err(|e| driver_err(&format!("uploading {what}"), e))
}

/// The matrices `upload_matrices` stored (as the kernels left them).
pub(crate) fn download_matrices(
    stream: &Arc<CudaStream>,
    d: &CudaSlice<f64>,
    what: &str,
) -> Result<Vec<Su3>> {
    let flat = stream
        .clone_dtoh(d)
        .map_err(|e| driver_err(&format!("downloading {what}"), e))?;
    Ok(flat.chunks_exact(SU3_REALS).map(Su3::from_reals).collect())
}

/// A spinor field on the device: 12 complex numbers per site of its layout's subset, (re,
/// im) pairs, in its stencil's order, in double or single precision, or in half (16-bit
/// integers in the same order and one f32 norm per site, `linalg::half`).
pub struct DeviceSpinor {
    pub(crate) data: DeviceData,
    pub(crate) layout: Layout,
    /// The allocation on the backend's books (`Purpose::Fields`), off them when dropped.
    pub(crate) _booking: Booking,
}

/// A field's storage.
pub(crate) enum DeviceData {
    Double(CudaSlice<f64>),
    Single(CudaSlice<f32>),
    /// 24 i16 per site (element k of site cb of a parity block at k*Vh + cb, as (re, im)
    /// pairs) and the sites' norms (parity blocks of Vh).
    Half {
        q: CudaSlice<i16>,
        norm: CudaSlice<f32>,
    },
}

/// A field's device data, for kernel arguments (the fused CR kernels take either).
pub(crate) enum RawField<'a> {
    Double(&'a CudaSlice<f64>),
    Single(&'a CudaSlice<f32>),
    /// The integers of a half field (the fused kernels refuse it).
    Half(&'a CudaSlice<i16>),
}

pub(crate) enum RawFieldMut<'a> {
    Double(&'a mut CudaSlice<f64>),
    Single(&'a mut CudaSlice<f32>),
    Half(&'a mut CudaSlice<i16>),
}

impl DeviceSpinor {
    pub(crate) fn raw(&self) -> RawField<'_> {
        match &self.data {
            DeviceData::Double(d) => RawField::Double(d),
            DeviceData::Single(s) => RawField::Single(s),
            DeviceData::Half { q, .. } => RawField::Half(q),
        }
    }

    pub(crate) fn raw_mut(&mut self) -> RawFieldMut<'_> {
        match &mut self.data {
            DeviceData::Double(d) => RawFieldMut::Double(d),
            DeviceData::Single(s) => RawFieldMut::Single(s),
            DeviceData::Half { q, .. } => RawFieldMut::Half(q),
        }
    }

    /// Number of complex numbers.
    pub fn len(&self) -> usize {
        match &self.data {
            DeviceData::Double(d) => d.len() / 2,
            DeviceData::Single(s) => s.len() / 2,
            DeviceData::Half { q, .. } => q.len() / 2,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The double data of a field (the seed versions' only kind).
    pub(crate) fn double(&self) -> Result<&CudaSlice<f64>> {
        match &self.data {
            DeviceData::Double(d) => Ok(d),
            _ => Err(not_double()),
        }
    }

    pub(crate) fn double_mut(&mut self) -> Result<&mut CudaSlice<f64>> {
        match &mut self.data {
            DeviceData::Double(d) => Ok(d),
            _ => Err(not_double()),
        }
    }
}

fn not_double() -> Error {
    Error::invalid(
        "backend",
        "a single- or half-precision field where a double one is needed",
    )
}

pub(crate) fn as_f64(data: &[C64]) -> &[f64] {
    // SAFETY: num_complex::Complex<f64> is #[repr(C)] { re, im }: two f64, no padding.
    unsafe { std::slice::from_raw_parts(data.as_ptr() as *const f64, data.len() * 2) }
}

pub(crate) fn as_f64_mut(data: &mut [C64]) -> &mut [f64] {
    // SAFETY: as above.
    unsafe { std::slice::from_raw_parts_mut(data.as_mut_ptr() as *mut f64, data.len() * 2) }
}
