//! One batched run of a method (`run`: CR or BiCGStab over the columns, each with its
//! monitor), and the stencil cost of an operator form.

use super::common::Column;
use super::{bicgstab, cr};
use crate::linalg::{Form, LinearOperator, Operator, WilsonKernels};
use crate::solver::{Method, Monitor, StopRules};
use crate::Result;

/// One batched run of `method` from x = 0, each column with its monitor (rules, (b|b)).
pub(super) fn run<S: WilsonKernels>(
    space: &mut S,
    method: Method,
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
    match method {
        Method::Cr => cr::solve(space, op, bs, &mut monitors),
        _ => bicgstab::solve(space, op, bs, &mut monitors),
    }
}

/// Stencil applications per application of `op`.
pub(super) fn stencil_cost<S: WilsonKernels>(op: Operator) -> usize {
    <Form as LinearOperator<S>>::stencil_applications(&Form(op))
}
