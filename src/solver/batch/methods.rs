//! One batched run of a method (`run`: CR, or BiCGStab on the host or through the
//! backend's fused passes, over the columns, each with its monitor), and the stencil cost
//! of an operator form.

use super::common::Column;
use super::{bicgstab, cr, fused};
use crate::linalg::engines::FusedCr;
use crate::linalg::{Form, LinearOperator, Operator, WilsonKernels};
use crate::solver::{Method, Monitor, SolveSpec, StopRules};
use crate::Result;

/// One batched run of `spec.method` from x = 0 (BiCGStab through the fused passes when
/// `spec.fused`), each column with its monitor (rules, (b|b)).
pub(super) fn run<S: FusedCr>(
    space: &mut S,
    spec: &SolveSpec,
    op: Operator,
    bs: &[S::Field],
    rules: &[StopRules],
    nbs: &[f64],
) -> Result<Vec<Column<S::Field>>> {
    let mut quiet: Vec<_> = (0..bs.len()).map(|_| |_: usize, _: f64| {}).collect();
    let mut monitors: Vec<Monitor> = quiet
        .iter_mut()
        .zip(rules.iter().cycle())
        .zip(nbs)
        .map(|((o, r), &nb)| Monitor::new(r.clone(), nb, o))
        .collect();
    match spec.method {
        Method::Cr => cr::solve(space, op, bs, &mut monitors),
        _ if spec.fused => fused::solve(
            space,
            op,
            bs,
            &mut monitors,
            spec.check_every,
            spec.bicgstab_graphs,
        ),
        _ => bicgstab::solve(space, op, bs, &mut monitors),
    }
}

/// Stencil applications per application of `op`.
pub(super) fn stencil_cost<S: WilsonKernels>(op: Operator) -> usize {
    <Form as LinearOperator<S>>::stencil_applications(&Form(op))
}
