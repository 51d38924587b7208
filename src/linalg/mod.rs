//! The seam every solver is written against: a vector `Space` (fields of a layout and
//! precision, the BLAS-1 family, reductions returning host scalars, precision conversion)
//! and `LinearOperator`s acting in it (`operator`: the Wilson forms and the wrappers
//! `Gamma5`, `Schur`, `Normal`). Backends implement `Space` and the Wilson kernels; the
//! solvers (`crate::solver`) see nothing else, so a new solver needs no backend change.
//! Communication, when the lattice is split, enters at two places only: an operator's
//! apply (halo exchange) and the space's reductions (global sums).

pub mod engines;
pub mod half;
pub mod operator;

pub use operator::{
    Form, Gamma5, LinearOperator, Normal, Operator, Schur, Wilson, WilsonForm, WilsonKernels,
};

use crate::field::{SpinorField, C64};
use crate::{Error, Result};
use serde::Serialize;

/// Which sites a field holds. Half fields (even or odd) hold V/2 sites in the checkerboard
/// order cb = lexicographic index / 2 (every extent even).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Subset {
    Full,
    Even,
    Odd,
}

impl Subset {
    /// 0 for even, 1 for odd (None for full).
    pub fn parity(self) -> Option<usize> {
        match self {
            Subset::Full => None,
            Subset::Even => Some(0),
            Subset::Odd => Some(1),
        }
    }

    pub fn from_parity(p: usize) -> Subset {
        if p == 0 {
            Subset::Even
        } else {
            Subset::Odd
        }
    }

    /// Sites of a field of this subset on a lattice of `volume` sites.
    pub fn sites(self, volume: usize) -> usize {
        match self {
            Subset::Full => volume,
            _ => volume / 2,
        }
    }
}

/// Storage precision of a field. Reductions always accumulate in double; single fields
/// store (and on the GPU compute) in IEEE binary32; half fields store each site's 24 reals
/// as 16-bit fixed point with one f32 norm per site (`half`; QUDA's half format), and on
/// the GPU compute in single precision with 16-bit links (kernels/v3_core.cuh V3_LINK16).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    Double,
    Single,
    Half,
}

impl Precision {
    /// "double", "single", "half".
    pub fn name(self) -> &'static str {
        match self {
            Precision::Double => "double",
            Precision::Single => "single",
            Precision::Half => "half",
        }
    }

    /// The value as a field of this precision stores it, element by element (single:
    /// rounded through f32). Half fields keep the f64 value here and are rounded site by
    /// site afterwards (`round_sites`), so every host backend writes a field as: store
    /// each element, then round the sites.
    #[inline]
    pub fn store(self, z: C64) -> C64 {
        match self {
            Precision::Double | Precision::Half => z,
            Precision::Single => C64::new(z.re as f32 as f64, z.im as f32 as f64),
        }
    }

    /// After an operation wrote a field's values (12 complex per site): a half field's
    /// sites are rounded as wholes (all 12 complex of a site share one norm); a no-op for
    /// the other precisions.
    pub fn round_sites(self, data: &mut [C64]) {
        if self == Precision::Half {
            half::round_sites(data);
        }
    }
}

/// What a field is: its sites and its precision.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Layout {
    pub subset: Subset,
    pub precision: Precision,
}

impl Layout {
    pub const FULL: Layout = Layout {
        subset: Subset::Full,
        precision: Precision::Double,
    };

    pub fn new(subset: Subset, precision: Precision) -> Layout {
        Layout { subset, precision }
    }

    /// The same sites in another precision.
    pub fn with_precision(self, precision: Precision) -> Layout {
        Layout { precision, ..self }
    }
}

/// A vector space of spinor fields living wherever a backend computes. Every method is
/// required but the two fused steps of the reliable update, whose defaults are written in
/// the others: a backend that cannot hold a layout says so from `alloc_layout`, by name.
pub trait Space {
    /// A spinor field of this space.
    type Field;

    /// A short description for reports ("cpu (rayon, 2 threads)", "cuda NVIDIA H100 ...").
    fn describe(&self) -> String;

    /// A zeroed full-lattice double field.
    fn alloc(&mut self) -> Result<Self::Field> {
        self.alloc_layout(Layout::FULL)
    }
    /// A zeroed field of any layout this space holds.
    fn alloc_layout(&mut self, layout: Layout) -> Result<Self::Field>;
    /// The layout of a field this space made.
    fn layout(&self, field: &Self::Field) -> Layout;

    /// A full double field from the host.
    fn upload(&mut self, host: &SpinorField) -> Result<Self::Field>;
    /// The field as a full canonical host field (zeros on the sites a half field lacks).
    fn download(&mut self, field: &Self::Field) -> Result<SpinorField>;
    /// A field's numbers on the host in its level's order (multigrid's transfers: a fine
    /// field as the canonical full double field's numbers, 12 a site). The default
    /// downloads; a coarse level's space hands its numbers over.
    fn to_host(&mut self, field: &Self::Field) -> Result<Vec<C64>> {
        Ok(self.download(field)?.data)
    }
    /// A field of `layout` from host numbers in the order `to_host` gives (full fields).
    /// The default uploads a full double field and converts it.
    fn field_from_host(&mut self, numbers: Vec<C64>, layout: Layout) -> Result<Self::Field> {
        let full = self.upload(&SpinorField { data: numbers })?;
        if layout == Layout::FULL {
            return Ok(full);
        }
        let mut out = self.alloc_layout(layout)?;
        self.convert(&mut out, &full)?;
        Ok(out)
    }
    /// x = 0 (a field reset in place: no zero field kept to copy from).
    fn set_zero(&mut self, x: &mut Self::Field) -> Result<()>;
    /// dst = src (same layout).
    fn copy(&mut self, dst: &mut Self::Field, src: &Self::Field) -> Result<()>;
    /// dst = src, converting precision (same subset), or gathering the sites of dst's
    /// parity from a full src, or scattering a half src into those sites of a full dst
    /// (the other parity of dst untouched).
    fn convert(&mut self, dst: &mut Self::Field, src: &Self::Field) -> Result<()>;

    /// y = y + a x  (the seed's xaxpy).
    fn axpy(&mut self, a: C64, x: &Self::Field, y: &mut Self::Field) -> Result<()>;
    /// y = x + a y  (the seed does this as xscal then xaxpy).
    fn xpay(&mut self, x: &Self::Field, a: C64, y: &mut Self::Field) -> Result<()>;
    /// (x|y) = sum conj(x) y, summed over the whole (global) lattice.
    fn dot(&mut self, x: &Self::Field, y: &Self::Field) -> Result<C64>;
    /// (x|x).
    fn norm2(&mut self, x: &Self::Field) -> Result<f64>;

    /// (x_j|y) for every x_j (one layout), each summed over the whole lattice. The default
    /// makes one `dot` each; a backend may read y once for all of them and wait once.
    fn dots(&mut self, xs: &[&Self::Field], y: &Self::Field) -> Result<Vec<C64>> {
        xs.iter().map(|x| self.dot(x, y)).collect()
    }

    /// y = y + sum_j a_j x_j (one layout). The default makes one `axpy` each; a backend
    /// may read y and write it once.
    fn axpys(&mut self, a: &[C64], xs: &[&Self::Field], y: &mut Self::Field) -> Result<()> {
        if a.len() != xs.len() {
            return Err(crate::Error::internal(format!(
                "axpys: {} coefficients for {} fields",
                a.len(),
                xs.len()
            )));
        }
        for (a, x) in a.iter().zip(xs) {
            self.axpy(*a, x, y)?;
        }
        Ok(())
    }

    /// The reliable update's fold (`solver::mixed`): y = y + x for an x of y's subset in
    /// another precision; `scratch` (y's layout) may be overwritten. The default converts x
    /// into scratch and adds it with axpy; a backend may do it in one pass with the same
    /// values (the widening is exact and so is 1 x, so the sum rounds once either way).
    fn add_converted(
        &mut self,
        x: &Self::Field,
        y: &mut Self::Field,
        scratch: &mut Self::Field,
    ) -> Result<()> {
        add_converted_in_steps(self, x, y, scratch)
    }

    /// The reliable update's residual: r = b - r (r holding A x on entry), then low = r
    /// converted to low's precision; returns (r|r). The default is xpay, norm2 and
    /// convert; a backend may fuse them with the same values (b - r rounds once either way,
    /// and the norm sums the same values).
    fn residual_converted(
        &mut self,
        b: &Self::Field,
        r: &mut Self::Field,
        low: &mut Self::Field,
    ) -> Result<f64> {
        residual_converted_in_steps(self, b, r, low)
    }

    /// Queue `body`'s work (it may only queue: no host reads). A backend may record the
    /// first call under `key` (a CUDA graph) and replay the record at later calls with the
    /// same key: the caller promises that equal keys mean the same work on the same
    /// fields, and calls `forget_records` before those fields are freed. The default runs
    /// `body`.
    fn queue_recorded(
        &mut self,
        key: u64,
        body: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        let _ = key;
        body(self)
    }

    /// Drop what `queue_recorded` recorded (the default records nothing).
    fn forget_records(&mut self) {}
}

/// Keys for `Space::queue_recorded` (from 2^50: apart from the solvers' graph keys).
pub fn next_record_key() -> u64 {
    static KEY: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1 << 50);
    KEY.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// `Space::add_converted` by its parts (convert, axpy): the default, and the fallback of a
/// backend that fuses only some layouts.
pub fn add_converted_in_steps<S: Space + ?Sized>(
    space: &mut S,
    x: &S::Field,
    y: &mut S::Field,
    scratch: &mut S::Field,
) -> Result<()> {
    space.convert(scratch, x)?;
    space.axpy(C64::new(1.0, 0.0), scratch, y)
}

/// `Space::residual_converted` by its parts (xpay, norm2, convert): the default, and the
/// fallback of a backend that fuses only some layouts.
pub fn residual_converted_in_steps<S: Space + ?Sized>(
    space: &mut S,
    b: &S::Field,
    r: &mut S::Field,
    low: &mut S::Field,
) -> Result<f64> {
    space.xpay(b, C64::new(-1.0, 0.0), r)?;
    let nr = space.norm2(r)?;
    space.convert(low, r)?;
    Ok(nr)
}

/// The error of an operation given fields of different layouts.
pub fn layout_mismatch(what: &str, a: Layout, b: Layout) -> Error {
    Error::internal(format!(
        "{what}: fields of different layouts ({a:?} and {b:?})"
    ))
}

/// The output parity of `WilsonKernels::hop_xpay`, checking its fields: `out` and `y` of
/// one parity and layout, `inp` of the other parity.
pub fn hop_xpay_parity(out: Layout, inp: Layout, y: Layout) -> Result<usize> {
    let p = match out.subset.parity() {
        Some(p) if inp.subset == Subset::from_parity(1 - p) => p,
        _ => return Err(layout_mismatch("hop_xpay", out, inp)),
    };
    if y != out {
        return Err(layout_mismatch("hop_xpay", out, y));
    }
    Ok(p)
}
