//! Linear operators over a `Space`: the Wilson-Dirac forms a backend applies as one kernel
//! (`Wilson` = D, and the wrappers `Gamma5<A>` = g5 A and `Schur<A>` = the even-odd Schur
//! complement of A), and `Normal<A>` = A^dag A for a Hermitian A, composed of two applies.
//! The wrappers are types, so which forms exist is checked by the compiler: the same shape
//! as QUDA's DiracM / DiracMdagM wrappers over one Dirac object.

use super::{Space, Subset};
use crate::field::C64;
use crate::Result;
use serde::Serialize;
use std::marker::PhantomData;

/// The Wilson-Dirac forms a backend's kernels apply in one call.
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
    /// The operator an even-odd solve inverts in place of this full-lattice one. (The
    /// Schur complement of g5 D is g5 M_ee: g5 is site-diagonal.)
    pub fn schur(self) -> Operator {
        match self {
            Operator::D | Operator::Schur => Operator::Schur,
            Operator::G5D | Operator::G5Schur => Operator::G5Schur,
        }
    }

    /// g5 times this form (g5^2 = 1).
    pub fn times_gamma5(self) -> Operator {
        match self {
            Operator::D => Operator::G5D,
            Operator::G5D => Operator::D,
            Operator::Schur => Operator::G5Schur,
            Operator::G5Schur => Operator::Schur,
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

    /// The sites of the fields it acts on: the even half for the Schur forms, else all.
    pub fn subset(self) -> Subset {
        if self.is_schur() {
            Subset::Even
        } else {
            Subset::Full
        }
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

/// What a backend provides for the Wilson operator: the forms above as one kernel each,
/// and the even-odd hopping term used to prepare sources and reconstruct solutions.
pub trait WilsonKernels: Space {
    /// The hopping parameter the kernels were built with.
    fn kappa(&self) -> f64;
    /// out = A inp for the form `op` (full fields for D and g5D, even fields for the Schur
    /// forms).
    fn apply(&mut self, op: Operator, out: &mut Self::Field, inp: &Self::Field) -> Result<()>;
    /// out = [g5] (y + c H inp) on half fields: out and y of one parity, inp of the other;
    /// H is the hopping term (docs: conventions.md, Even-odd). With c = kappa this
    /// prepares the even-odd source b_e + kappa H_eo b_o and reconstructs x_o = b_o +
    /// kappa H_oe x_e.
    fn hop_xpay(
        &mut self,
        out: &mut Self::Field,
        inp: &Self::Field,
        y: &Self::Field,
        c: f64,
        gamma5: bool,
    ) -> Result<()>;
    /// out = B^dag inp for the Hermitian-looking form B = g5 D or g5 M_ee (`op.gamma5()`):
    /// the same form with the site term A replaced by A^dag. With a twist g5 D is not
    /// Hermitian and this differs from `apply`; without one it is `apply` (the default).
    fn apply_adjoint(
        &mut self,
        op: Operator,
        out: &mut Self::Field,
        inp: &Self::Field,
    ) -> Result<()> {
        self.apply(op, out, inp)
    }
    /// out_k = A inp_k for every k, the form `op` on right-hand sides of one layout: a
    /// backend with a batched operator reads the links once for all of them (kernel 3.0 on
    /// one GPU); the default applies them one after another. Either way each result has
    /// the bits of `apply` on its input alone.
    fn apply_batch(
        &mut self,
        op: Operator,
        outs: &mut [&mut Self::Field],
        inps: &[&Self::Field],
    ) -> Result<()> {
        apply_each(self, op, outs, inps)
    }
    /// Whether D = A - kappa H has a site-local A other than 1 (the clover term, a
    /// twist): the even-odd preparation and reconstruction then apply A_oo^-1
    /// (`site_inverse`), and the Schur forms are A_ee - kappa^2 H_eo A_oo^-1 H_oe.
    fn has_site_term(&self) -> bool {
        false
    }
    /// out = A^-1 inp on a half field (out of inp's layout); called only when
    /// `has_site_term`.
    fn site_inverse(&mut self, out: &mut Self::Field, inp: &Self::Field) -> Result<()> {
        let _ = (out, inp);
        Err(crate::Error::internal(
            "site_inverse: this operator has no site term",
        ))
    }
}

/// `WilsonKernels::apply_batch` one right-hand side at a time (the default, and a
/// backend's fallback where its batched operator does not run).
pub fn apply_each<S: WilsonKernels + ?Sized>(
    space: &mut S,
    op: Operator,
    outs: &mut [&mut S::Field],
    inps: &[&S::Field],
) -> Result<()> {
    if outs.len() != inps.len() {
        return Err(crate::Error::internal(format!(
            "a batched apply of {} inputs into {} outputs",
            inps.len(),
            outs.len()
        )));
    }
    for (out, inp) in outs.iter_mut().zip(inps) {
        space.apply(op, out, inp)?;
    }
    Ok(())
}

/// A linear operator A acting on fields of a space.
pub trait LinearOperator<S: Space> {
    /// out = A inp.
    fn apply(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()>;
    /// The sites its fields hold (Full, or Even for the Schur forms).
    fn domain(&self) -> Subset;
    /// Whether A = A^dag.
    fn hermitian(&self) -> bool;
    /// out = A^dag inp. The default serves a Hermitian A; the Wilson forms ask the
    /// backend, which knows whether its g5 D is Hermitian (not with a twist).
    fn apply_dagger(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()> {
        if !self.hermitian() {
            return Err(crate::Error::internal(format!(
                "{}: no adjoint for a non-Hermitian operator",
                self.name()
            )));
        }
        self.apply(space, out, inp)
    }
    /// "g5D", "Mee", "(g5D)^2".
    fn name(&self) -> String;
    /// Applications of the Wilson stencil per apply (for the reports' counts).
    fn stencil_applications(&self) -> usize {
        1
    }
    /// The single kernel form, when the backend applies this operator as one Wilson
    /// kernel: lets a backend capability (the fused CR) fuse its own epilogue into it.
    fn wilson_form(&self) -> Option<Operator> {
        None
    }
    /// out = A inp and (inp|out). Backends with a fused epilogue override this through
    /// their capability; here: apply, then dot.
    fn apply_dot(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<C64> {
        self.apply(space, out, inp)?;
        space.dot(inp, out)
    }
}

/// A borrowed operator is the operator (a solver may hold one it does not own).
impl<S: Space, A: LinearOperator<S> + ?Sized> LinearOperator<S> for &mut A {
    fn apply(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()> {
        (**self).apply(space, out, inp)
    }
    fn domain(&self) -> Subset {
        (**self).domain()
    }
    fn hermitian(&self) -> bool {
        (**self).hermitian()
    }
    fn apply_dagger(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()> {
        (**self).apply_dagger(space, out, inp)
    }
    fn name(&self) -> String {
        (**self).name()
    }
    fn stencil_applications(&self) -> usize {
        (**self).stencil_applications()
    }
    fn wilson_form(&self) -> Option<Operator> {
        (**self).wilson_form()
    }
    fn apply_dot(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<C64> {
        (**self).apply_dot(space, out, inp)
    }
}

/// An operator the Wilson kernels apply as one form.
pub trait WilsonForm {
    fn form(&self) -> Operator;
}

/// The Wilson-Dirac operator D on the full lattice.
#[derive(Clone, Copy, Debug, Default)]
pub struct Wilson;

/// g5 A.
#[derive(Clone, Copy, Debug, Default)]
pub struct Gamma5<A>(pub A);

/// The even-odd Schur complement of A, on even sites: A_ee - A_eo A_oo^{-1} A_oe (for
/// D: M_ee = 1 - kappa^2 H_eo H_oe).
#[derive(Clone, Copy, Debug, Default)]
pub struct Schur<A>(pub A);

impl WilsonForm for Wilson {
    fn form(&self) -> Operator {
        Operator::D
    }
}
impl<A: WilsonForm> WilsonForm for Gamma5<A> {
    fn form(&self) -> Operator {
        self.0.form().times_gamma5()
    }
}
impl<A: WilsonForm> WilsonForm for Schur<A> {
    fn form(&self) -> Operator {
        self.0.form().schur()
    }
}

/// Any Wilson form at run time (the config picks D or g5D, the plan picks even-odd).
#[derive(Clone, Copy, Debug)]
pub struct Form(pub Operator);

impl WilsonForm for Form {
    fn form(&self) -> Operator {
        self.0
    }
}

macro_rules! wilson_linear_operator {
    ($($t:ty $(where $a:ident)?),*) => {$(
        impl<S: WilsonKernels $(, $a: WilsonForm)?> LinearOperator<S> for $t {
            fn apply(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()> {
                space.apply(self.form(), out, inp)
            }
            fn domain(&self) -> Subset {
                self.form().subset()
            }
            fn hermitian(&self) -> bool {
                self.form().gamma5()
            }
            fn apply_dagger(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()> {
                if !self.form().gamma5() {
                    return Err(crate::Error::internal(format!(
                        "{}: the adjoint of a Wilson form is served for its g5 forms only",
                        self.form()
                    )));
                }
                space.apply_adjoint(self.form(), out, inp)
            }
            fn name(&self) -> String {
                self.form().to_string()
            }
            fn wilson_form(&self) -> Option<Operator> {
                Some(self.form())
            }
        }
    )*};
}
wilson_linear_operator!(Wilson, Form, Gamma5<A> where A, Schur<A> where A);

/// A^dag A = A A for a Hermitian A (CG on the normal equations: for A = g5 D this is
/// D^dag D, Hermitian positive definite). Two applies through one temporary.
pub struct Normal<S: Space, A> {
    pub inner: A,
    tmp: Option<S::Field>,
    _space: PhantomData<S>,
}

impl<S: Space, A: LinearOperator<S>> Normal<S, A> {
    /// Refuses a non-Hermitian A (A^dag A would need A^dag, which this is not).
    pub fn new(inner: A) -> Result<Self> {
        if !inner.hermitian() {
            return Err(crate::Error::internal(format!(
                "Normal<{}>: the operator is not Hermitian",
                inner.name()
            )));
        }
        Ok(Normal {
            inner,
            tmp: None,
            _space: PhantomData,
        })
    }
}

impl<S: Space, A: LinearOperator<S>> LinearOperator<S> for Normal<S, A> {
    fn apply(&mut self, space: &mut S, out: &mut S::Field, inp: &S::Field) -> Result<()> {
        let layout = space.layout(inp);
        let mut tmp = match self.tmp.take() {
            Some(t) if space.layout(&t) == layout => t,
            _ => space.alloc_layout(layout)?,
        };
        self.inner.apply(space, &mut tmp, inp)?;
        self.inner.apply(space, out, &tmp)?;
        self.tmp = Some(tmp);
        Ok(())
    }
    fn domain(&self) -> Subset {
        self.inner.domain()
    }
    fn hermitian(&self) -> bool {
        true
    }
    fn name(&self) -> String {
        format!("({})^2", self.inner.name())
    }
    fn stencil_applications(&self) -> usize {
        2 * self.inner.stencil_applications()
    }
}
