//! Multigrid's large transfers between host and device (the Galerkin product's links and
//! site blocks, its coarse matrices back, each coarse level's matrices) through the
//! pinned staging buffers of `core::staging`: the host writes (or reads) each chunk in
//! parallel while the copy engine moves the one before, instead of one pageable copy of
//! gigabytes that the driver stages on a single thread. The chunks' host sides are
//! written here by functions of an index (`fill_numbers`), so no host array in the
//! device's order or precision is made first.

use crate::backend::cuda::core::device::driver_err;
use crate::backend::cuda::core::fast_layout::Segment;
use crate::backend::cuda::core::staging::{
    download_through, upload_through, StageShape, StagingBuffers,
};
use crate::error::{Error, Result};
use crate::field::C64;
use crate::linalg::Precision;
use cudarc::driver::{CudaSlice, CudaStream, DevicePtr, DevicePtrMut};
use rayon::prelude::*;
use std::sync::Arc;

/// Values a parallel task writes or reads at once.
const TASK_VALUES: usize = 1 << 14;

/// An array of `len` values in chunks of at most `per` values (rounded down to a multiple
/// of `unit`, at least one unit), each chunk one segment, in order.
pub(crate) fn chunks(len: usize, unit: usize, per: usize) -> Vec<Vec<Segment>> {
    let unit = unit.max(1);
    let step = (per / unit).max(1) * unit;
    (0..len)
        .step_by(step)
        .map(|dst| {
            vec![Segment {
                dst,
                len: step.min(len - dst),
            }]
        })
        .collect()
}

/// Two staging buffers of the default stage's values (`StageShape`; fewer when the array
/// is smaller) from the pinned pool of `stream`'s context.
fn buffers(stream: &Arc<CudaStream>, len: usize) -> Result<StagingBuffers> {
    let values = StageShape::default().values;
    StagingBuffers::new(stream.context(), values.min(len.max(1)), 2)
}

/// A new device array of `len` f64, chunk by chunk: `fill(first, out)` writes values
/// `first..first + out.len()` (a multiple of `unit`, so that a chunk holds whole items of
/// `unit` values).
pub(crate) fn upload_f64(
    stream: &Arc<CudaStream>,
    len: usize,
    unit: usize,
    what: &str,
    fill: impl Fn(usize, &mut [f64]),
) -> Result<CudaSlice<f64>> {
    let mut dst: CudaSlice<f64> = stream
        .alloc_zeros(len)
        .map_err(|e| driver_err(&format!("allocating {what}"), e))?;
    upload_into(stream, &mut dst, len, unit, fill)?;
    Ok(dst)
}

/// `len` f64 of the device array `dst`, chunk by chunk (`upload_f64`).
fn upload_into(
    stream: &Arc<CudaStream>,
    dst: &mut impl DevicePtrMut<f64>,
    len: usize,
    unit: usize,
    fill: impl Fn(usize, &mut [f64]),
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let mut b = buffers(stream, len)?;
    let c = chunks(len, unit, b.values());
    upload_through(&mut b, stream, dst, &c, |k, out| fill(c[k][0].dst, out))?;
    Ok(())
}

/// A device array of `src.len()` f64 downloaded into `dst` (as long), each chunk copied
/// out of its staging buffer in parallel.
pub(crate) fn download_f64(
    stream: &Arc<CudaStream>,
    src: &impl DevicePtr<f64>,
    dst: &mut [f64],
) -> Result<()> {
    let len = dst.len();
    if src.len() != len {
        return Err(Error::internal(format!(
            "a staged download of {} values into {len}",
            src.len()
        )));
    }
    if len == 0 {
        return Ok(());
    }
    let mut b = buffers(stream, len)?;
    let c = chunks(len, 1, b.values());
    download_through(&mut b, stream, src, &c, |k, inp| {
        let at = c[k][0].dst;
        copy_in(&mut dst[at..at + inp.len()], inp);
    })?;
    Ok(())
}

/// `src` copied into `out` (as long), in parallel.
fn copy_in(out: &mut [f64], src: &[f64]) {
    out.par_chunks_mut(TASK_VALUES)
        .zip(src.par_chunks(TASK_VALUES))
        .for_each(|(d, s)| d.copy_from_slice(s));
}

/// A device copy of the f64 values `src`, through the staging buffers.
pub(crate) fn upload_slice(
    stream: &Arc<CudaStream>,
    src: &[f64],
    what: &str,
) -> Result<CudaSlice<f64>> {
    upload_f64(stream, src.len(), 1, what, |first, out| {
        copy_in(out, &src[first..first + out.len()])
    })
}

/// f64 slots of the device form of one complex number in `precision`: a double number is
/// two f64, a single one two f32 (one f64's bytes).
pub(crate) fn slots_per_number(precision: Precision) -> usize {
    if precision == Precision::Single {
        1
    } else {
        2
    }
}

/// Write the device form of numbers `first..` into `out` (f64 slots, `slots_per_number`
/// each): number k is `value(k)`, as (re, im) in double or narrowed to single.
pub(crate) fn fill_numbers(
    precision: Precision,
    first: usize,
    out: &mut [f64],
    value: &(impl Fn(usize) -> C64 + Sync),
) {
    const TASK: usize = TASK_VALUES / 2;
    if precision == Precision::Single {
        out.par_chunks_mut(TASK).enumerate().for_each(|(t, o)| {
            let k0 = first + t * TASK;
            for (i, slot) in o.iter_mut().enumerate() {
                let z = value(k0 + i);
                *slot = f64::from_bits(pack_single(z));
            }
        });
    } else {
        out.par_chunks_mut(2 * TASK).enumerate().for_each(|(t, o)| {
            let k0 = first + t * TASK;
            for (i, pair) in o.chunks_exact_mut(2).enumerate() {
                let z = value(k0 + i);
                pair[0] = z.re;
                pair[1] = z.im;
            }
        });
    }
}

/// A complex number narrowed to two f32 in the byte order of `[re, im]` in memory.
fn pack_single(z: C64) -> u64 {
    let (re, im) = ((z.re as f32).to_ne_bytes(), (z.im as f32).to_ne_bytes());
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&re);
    b[4..].copy_from_slice(&im);
    u64::from_ne_bytes(b)
}

/// Upload `len` complex numbers in `precision` (double or single), number k `value(k)`:
/// into `double` (2 `len` f64) or `single` (2 `len` f32), whichever `precision` names.
pub(crate) fn upload_numbers(
    stream: &Arc<CudaStream>,
    precision: Precision,
    len: usize,
    double: Option<&mut CudaSlice<f64>>,
    single: Option<&mut CudaSlice<f32>>,
    value: impl Fn(usize) -> C64 + Sync,
) -> Result<()> {
    let per = slots_per_number(precision);
    let fill = |first: usize, out: &mut [f64]| fill_numbers(precision, first / per, out, &value);
    match (precision, double, single) {
        (Precision::Single, _, Some(f)) => {
            if f.len() != 2 * len {
                return Err(Error::internal("a single buffer of the wrong length"));
            }
            // SAFETY: 2 len f32 are len f64's bytes; the slots are written as f32 pairs.
            let mut view = unsafe { f.transmute_mut::<f64>(len) }
                .ok_or_else(|| Error::internal("a single buffer viewed as f64 slots"))?;
            upload_into(stream, &mut view, len, 1, fill)
        }
        (Precision::Double, Some(d), _) => {
            if d.len() != 2 * len {
                return Err(Error::internal("a double buffer of the wrong length"));
            }
            upload_into(stream, d, 2 * len, 2, fill)
        }
        _ => Err(Error::internal(format!(
            "a staged upload of {precision:?} numbers into a buffer of another precision"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cover_the_array_in_whole_units() {
        // 1000 values in units of 144 (a site's two 6x6 blocks), at most 300 a chunk:
        // 288, 288, 288, 136.
        let c = chunks(1000, 144, 300);
        let got: Vec<(usize, usize)> = c.iter().map(|s| (s[0].dst, s[0].len)).collect();
        assert_eq!(got, vec![(0, 288), (288, 288), (576, 288), (864, 136)]);
        // A unit larger than a chunk still makes progress, one unit a chunk.
        let c = chunks(10, 4, 3);
        let got: Vec<usize> = c.iter().map(|s| s[0].len).collect();
        assert_eq!(got, vec![4, 4, 2]);
        assert!(chunks(0, 2, 8).is_empty());
    }

    /// The device form written chunk by chunk is the whole array written at once: double
    /// as (re, im) f64, single as (re, im) narrowed, for chunks that split no number.
    #[test]
    fn numbers_filled_by_chunks_are_the_device_form() {
        let n = 40_003;
        let value = |k: usize| C64::new(k as f64 + 0.25, -(k as f64) / 3.0);
        for precision in [Precision::Double, Precision::Single] {
            let per = slots_per_number(precision);
            let mut out = vec![0.0; n * per];
            for s in chunks(n * per, per, 7_000).iter().map(|c| c[0]) {
                fill_numbers(
                    precision,
                    s.dst / per,
                    &mut out[s.dst..s.dst + s.len],
                    &value,
                );
            }
            for k in [0, 1, 6_999, 7_000, 20_000, n - 1] {
                let z = value(k);
                let (re, im) = if precision == Precision::Single {
                    let b = out[k].to_bits().to_ne_bytes();
                    let re = f32::from_ne_bytes(b[..4].try_into().unwrap());
                    let im = f32::from_ne_bytes(b[4..].try_into().unwrap());
                    // Exactly the narrowed number.
                    assert_eq!((re, im), (z.re as f32, z.im as f32), "{k}");
                    (f64::from(re), f64::from(im))
                } else {
                    (out[2 * k], out[2 * k + 1])
                };
                let tol = if precision == Precision::Single {
                    1e-7 * z.norm()
                } else {
                    0.0
                };
                assert!((re - z.re).abs() <= tol && (im - z.im).abs() <= tol, "{k}");
            }
        }
    }
}
