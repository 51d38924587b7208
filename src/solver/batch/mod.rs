//! Batched solves: N systems D x_k = b_k of one operator, each its own Krylov recurrence
//! (`cr`: CR in Algorithm 1's order; `bicgstab`: BiCGStab with its breakdown restarts;
//! host scalars, a check every iteration), sharing every operator application: the live
//! columns' fields go to one `WilsonKernels::apply_batch`, which on kernel 3.0 reads the
//! links once for all of them. A column that stops (converged, or any other stop rule)
//! leaves the batch at once; the others go on.
//!
//! - BiCGStab with `SolveSpec::fused` runs through the backend's fused passes (`fused`:
//!   scalars on the device, the host reading them after runs of iterations, graphs);
//!   CR always keeps its scalars on the host (its fused form needs the operator's dot
//!   epilogue, which the batched operator does not have).
//! - Even-odd (`SolveSpec::even_odd`): each column's source is prepared (`eo::prepare`),
//!   the Schur systems are solved as one batch, each solution reconstructed.
//! - In the right-hand sides' precision each column's iterates are the bits of its own
//!   host-scalar solve by the same method (tests/batched_solves.rs).
//! - Mixed precision (`SolveSpec::precision` below the right-hand sides'): defect
//!   correction. The batch is solved in the low precision to a relative `delta` (or to
//!   what the target still needs), each correction added to x_k in full precision, the
//!   true residuals b_k - D x_k made in full precision with one batched application, and
//!   the columns not yet converged solved again from their residuals. Each restart is a
//!   new Krylov space (more iterations than a reliable-update solve, which keeps one);
//!   convergence is judged on the true residual only.

mod bicgstab;
mod common;
mod cr;
mod fused;
mod methods;
mod mixed;

use common::reason;
use methods::{run, stencil_cost};
use mixed::defect_correction;

use super::{eo, Method, SolveOutcome, SolveSpec, SolveStats};
use crate::linalg::engines::FusedCr;
use crate::linalg::Operator;
use crate::{Error, Result};

/// Whether `method` has a batched form.
pub fn batched(method: Method) -> bool {
    matches!(method, Method::Cr | Method::Bicgstab)
}

/// Solve D x_k = source_k for every k (full fields) through the form `form` as `spec`
/// says, as one batch. `bs`: the sources for an even-odd solve; for a full-lattice one the
/// form's right-hand sides (the sources with g5 applied when the form has it). The
/// outcomes in the order of `bs`; never fails on non-convergence (each outcome says why
/// it stopped).
pub fn solve_batch<S: FusedCr>(
    space: &mut S,
    spec: &SolveSpec,
    form: Operator,
    bs: Vec<S::Field>,
) -> Result<Vec<SolveOutcome<S::Field>>> {
    if !batched(spec.method) {
        return Err(Error::invalid(
            "solver.method",
            format!(
                "{} has no batched form; batched solves take cr or bicgstab",
                spec.method
            ),
        ));
    }
    let form = spec.method.iterated_form(form);
    if !spec.even_odd {
        return system(space, spec, form, &bs);
    }
    let mut rhs_e = Vec::with_capacity(bs.len());
    let mut b_o = Vec::with_capacity(bs.len());
    for source in bs {
        let (e, o) = eo::prepare(space, &source, form.gamma5())?;
        drop(source);
        rhs_e.push(e);
        b_o.push(o);
    }
    let mut outs = system(space, spec, form.schur(), &rhs_e)?;
    drop(rhs_e);
    for (out, b_o) in outs.iter_mut().zip(&b_o) {
        out.x = eo::reconstruct(space, &out.x, b_o)?;
    }
    Ok(outs)
}

/// The batch of systems `op` x_k = b_k, plain or by defect correction.
fn system<S: FusedCr>(
    space: &mut S,
    spec: &SolveSpec,
    op: Operator,
    bs: &[S::Field],
) -> Result<Vec<SolveOutcome<S::Field>>> {
    let Some(first) = bs.first() else {
        return Ok(Vec::new());
    };
    if spec.precision != space.layout(first).precision {
        return defect_correction(space, spec, op, bs);
    }
    let nbs = bs
        .iter()
        .map(|b| space.norm2(b))
        .collect::<Result<Vec<_>>>()?;
    let cols = run(space, spec, op, bs, std::slice::from_ref(&spec.rules), &nbs)?;
    let cost = stencil_cost::<S>(op);
    Ok(cols
        .into_iter()
        .zip(&nbs)
        .map(|(c, &nb)| SolveOutcome {
            x: c.x,
            iterations: c.ended.iter,
            reason: reason(c.ended.verdict),
            history: c.history.iter().map(|v| (v / nb).sqrt()).collect(),
            operator_applications: c.applications * cost,
            stats: SolveStats {
                checks: c.ended.iter + 1,
                ..Default::default()
            },
        })
        .collect())
}
