//! The seam between the solver and the hardware. The Conjugate Residual solver is written
//! once against `Backend`; `cpu::CpuBackend` (rayon) and `crate::cuda::CudaBackend`
//! (cudarc) implement it. A backend owns its fields, applies the operator and does the
//! BLAS-1 work and reductions; nothing else crosses the seam inside the solver loop.

pub mod cpu;

use crate::field::{SpinorField, C64};
use crate::Result;
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
}

impl std::fmt::Display for Operator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Operator::D => "D",
            Operator::G5D => "g5D",
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
}
