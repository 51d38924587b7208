//! Krylov solvers, written once over `crate::backend::Backend`.

pub mod cr;
pub mod fused;

pub use cr::{conjugate_residual, conjugate_residual_observed, CrParams, SolveOutcome, StopReason};
pub use fused::{fused_cr, FusedParams, FusedStats};

use crate::backend::{Backend, Operator};
use crate::field::C64;
use crate::Result;

/// ||b - A x|| / ||b|| computed from scratch (not the iterated residual).
pub fn true_residual<B: Backend>(
    backend: &mut B,
    op: Operator,
    b: &B::Field,
    x: &B::Field,
) -> Result<f64> {
    let mut ax = backend.alloc()?;
    backend.apply(op, &mut ax, x)?;
    // ax = b - ax
    backend.xpay(b, C64::new(-1.0, 0.0), &mut ax)?;
    let nr = backend.norm2(&ax)?;
    let nb = backend.norm2(b)?;
    Ok((nr / nb).sqrt())
}
