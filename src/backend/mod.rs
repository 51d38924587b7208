//! The seam between the solver and the hardware. The Conjugate Residual solver is written
//! once against `Backend`; `cpu::CpuBackend` (rayon) and `crate::cuda::CudaBackend`
//! (cudarc) implement it. A backend owns its fields, applies the operator and does the
//! BLAS-1 work and reductions; nothing else crosses the seam inside the solver loop.

pub mod cpu;

use crate::field::{SpinorField, C64};
use crate::{Error, Result};
use serde::Serialize;

/// Which linear operator the solver inverts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub enum Operator {
    /// The Wilson-Dirac operator D (as in the seed; not Hermitian).
    #[serde(rename = "D")]
    D,
    /// The Hermitian (indefinite) Q = g5 D.
    #[serde(rename = "g5D")]
    G5D,
    /// The even-odd Schur complement M_ee = 1 - kappa^2 H_eo H_oe on even-site fields
    /// (chosen by `[solver] preconditioning = "even-odd"`, never named in a config).
    #[serde(rename = "Mee", skip_deserializing)]
    Schur,
    /// Its Hermitian form g5 M_ee.
    #[serde(rename = "g5Mee", skip_deserializing)]
    G5Schur,
}

impl Operator {
    /// The operator an even-odd solve inverts in place of this full-lattice one.
    pub fn schur(self) -> Operator {
        match self {
            Operator::D | Operator::Schur => Operator::Schur,
            Operator::G5D | Operator::G5Schur => Operator::G5Schur,
        }
    }

    /// Whether the result is multiplied by g5 (the Hermitian forms).
    pub fn gamma5(self) -> bool {
        matches!(self, Operator::G5D | Operator::G5Schur)
    }

    /// Whether it acts on even-site (half) fields.
    pub fn is_schur(self) -> bool {
        matches!(self, Operator::Schur | Operator::G5Schur)
    }
}

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
/// store (and on the GPU compute) in IEEE binary32.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Precision {
    Double,
    Single,
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
}

/// The scalars of the fused CR iteration (solver::fused), as the host sees them. On a GPU
/// they live in device memory and are updated by the kernels themselves; the host reads
/// them (one transfer) only at convergence checks.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CrScalars {
    /// (r|Ar) of the current residual.
    pub rar: C64,
    /// (Ap|Ap).
    pub apap: f64,
    /// (r|r), the iterated residual norm squared.
    pub nr: f64,
    /// Stop when nr <= eps (tol^2 (b|b)).
    pub eps: f64,
    /// alpha = conj(rar) / apap, for the next x, r update.
    pub alpha: C64,
    /// beta = rar_new / rar_old, for the next p, Ap update.
    pub beta: C64,
    /// Iterations done (the index of nr in the history).
    pub iter: u64,
    /// No iteration starts once iter reaches this.
    pub max_iter: u64,
    /// Whether the next iteration runs: nr > eps, iter < max_iter and nr finite. Every
    /// kernel of an iteration sees the same value (it is set at the end of the iteration),
    /// so a batch of k iterations queued past convergence changes nothing.
    pub active: bool,
}

impl CrScalars {
    /// active as the kernels compute it.
    pub fn still_active(&self) -> bool {
        self.nr.is_finite() && self.nr > self.eps && self.iter < self.max_iter
    }
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operator::D => "D",
            Operator::G5D => "g5D",
            Operator::Schur => "Mee",
            Operator::G5Schur => "g5Mee",
        })
    }
}

pub trait Backend {
    /// A spinor field living wherever the backend computes.
    type Field;

    /// A short description for reports ("cpu (rayon, 2 threads)", "cuda NVIDIA H100 ...").
    fn describe(&self) -> String;

    /// A zeroed field of the lattice's volume.
    fn alloc(&mut self) -> Result<Self::Field>;
    fn upload(&mut self, host: &SpinorField) -> Result<Self::Field>;
    fn download(&mut self, field: &Self::Field) -> Result<SpinorField>;
    fn copy(&mut self, dst: &mut Self::Field, src: &Self::Field) -> Result<()>;

    /// out = A inp.
    fn apply(&mut self, op: Operator, out: &mut Self::Field, inp: &Self::Field) -> Result<()>;

    /// y = y + a x  (the seed's xaxpy).
    fn axpy(&mut self, a: C64, x: &Self::Field, y: &mut Self::Field) -> Result<()>;
    /// y = x + a y  (the seed does this as xscal then xaxpy).
    fn xpay(&mut self, x: &Self::Field, a: C64, y: &mut Self::Field) -> Result<()>;
    /// (x|y) = sum conj(x) y.
    fn dot(&mut self, x: &Self::Field, y: &Self::Field) -> Result<C64>;
    /// (x|x).
    fn norm2(&mut self, x: &Self::Field) -> Result<f64>;

    // ------------------------------------------------------------------ the fast path
    // Even-odd fields, single precision and the fused CR iteration. A backend (or a
    // kernel version) without them keeps the defaults, which refuse by name.

    /// A zeroed field of any layout (`alloc` is `Layout::FULL`).
    fn alloc_layout(&mut self, layout: Layout) -> Result<Self::Field> {
        if layout == Layout::FULL {
            self.alloc()
        } else {
            Err(unsupported(self, "half-lattice or single-precision fields"))
        }
    }

    /// The layout of a field this backend made.
    fn layout(&self, field: &Self::Field) -> Layout;

    /// dst = src, converting precision (same subset), or gathering the sites of dst's
    /// parity from a full src, or scattering a half src into those sites of a full dst
    /// (the other parity of dst untouched).
    fn convert(&mut self, _dst: &mut Self::Field, _src: &Self::Field) -> Result<()> {
        Err(unsupported(self, "field conversions"))
    }

    /// out = [g5] (y + c H inp) on half fields: out and y of one parity, inp of the other;
    /// H is the hopping term (docs: conventions.md, Even-odd). With c = kappa this
    /// prepares the even-odd source b_e + kappa H_eo b_o and reconstructs x_o = b_o +
    /// kappa H_oe x_e.
    fn hop_xpay(
        &mut self,
        _out: &mut Self::Field,
        _inp: &Self::Field,
        _y: &Self::Field,
        _c: f64,
        _gamma5: bool,
    ) -> Result<()> {
        Err(unsupported(self, "even-odd hopping terms"))
    }

    /// Scalars living where the backend computes.
    type CrState;

    /// A new scalar block holding `s` (history room for s.max_iter + 1 entries).
    fn cr_state(&mut self, _s: &CrScalars) -> Result<Self::CrState> {
        Err(unsupported(self, "the fused CR iteration"))
    }
    /// Overwrite the scalars (and the history entry of s.iter) from the host.
    fn cr_set(&mut self, _state: &mut Self::CrState, _s: &CrScalars) -> Result<()> {
        Err(unsupported(self, "the fused CR iteration"))
    }
    /// Read the scalars: the solve's one host read per convergence check.
    fn cr_get(&mut self, _state: &Self::CrState) -> Result<CrScalars> {
        Err(unsupported(self, "the fused CR iteration"))
    }
    /// nr of iterations 0..=iter (as recorded by the iteration).
    fn cr_history(&mut self, _state: &Self::CrState) -> Result<Vec<f64>> {
        Err(unsupported(self, "the fused CR iteration"))
    }

    /// If active: x += alpha p, r -= alpha Ap; nr = (r|r); iter += 1 and history[iter] = nr.
    fn cr_update_xr(
        &mut self,
        _state: &mut Self::CrState,
        _p: &Self::Field,
        _ap: &Self::Field,
        _x: &mut Self::Field,
        _r: &mut Self::Field,
    ) -> Result<()> {
        Err(unsupported(self, "the fused CR iteration"))
    }
    /// If active: ar = A r with rar_new = (r|Ar) fused; beta = rar_new / rar; rar = rar_new.
    fn cr_apply_dot(
        &mut self,
        _op: Operator,
        _state: &mut Self::CrState,
        _r: &Self::Field,
        _ar: &mut Self::Field,
    ) -> Result<()> {
        Err(unsupported(self, "the fused CR iteration"))
    }
    /// If active: p = r + beta p, Ap = Ar + beta Ap; apap = (Ap|Ap); alpha =
    /// conj(rar)/apap; then active = nr > eps && iter < max_iter && nr finite.
    fn cr_update_p(
        &mut self,
        _state: &mut Self::CrState,
        _r: &Self::Field,
        _ar: &Self::Field,
        _p: &mut Self::Field,
        _ap: &mut Self::Field,
    ) -> Result<()> {
        Err(unsupported(self, "the fused CR iteration"))
    }

    /// Run `body` `times` times. A GPU backend may record the first call's launches as a
    /// graph under `key` and replay it: the caller promises that equal keys mean the same
    /// launches on the same fields (only device-resident scalars change between calls).
    fn repeat(
        &mut self,
        _key: u64,
        times: usize,
        body: &mut dyn FnMut(&mut Self) -> Result<()>,
    ) -> Result<()>
    where
        Self: Sized,
    {
        for _ in 0..times {
            body(self)?;
        }
        Ok(())
    }
    /// Forget recorded graphs (the fields they name are about to be freed).
    fn forget_graphs(&mut self) {}

    /// Compile, load and build ahead whatever a solve with fields of `precision` and (if
    /// `fused`) the fused iteration will need, so that the solve's time does not include
    /// first-use set-up (and no set-up happens during a graph capture).
    fn prepare(&mut self, _precision: Precision, _fused: bool) -> Result<()> {
        Ok(())
    }
}

/// The error of an operation given fields of different layouts.
pub fn layout_mismatch(what: &str, a: Layout, b: Layout) -> Error {
    Error::invalid(
        "backend",
        format!("{what}: fields of different layouts ({a:?} and {b:?})"),
    )
}

/// The error of a capability this backend does not have.
pub fn unsupported<B: Backend + ?Sized>(backend: &B, what: &str) -> Error {
    Error::invalid(
        "backend",
        format!(
            "{what}: this needs the fast path (kernel = \"3.0\", or the CPU), which {} does not have",
            backend.describe()
        ),
    )
}
