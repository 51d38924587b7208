//! The seam between multigrid and the backends: what a space must do to be a level of the
//! hierarchy. `CoarseLevelSpace` is a coarse level's vector space with its operator
//! (applied in full or as the even Schur complement, with the even-odd pieces of a
//! solve); `Coarsen` is a space whose fields restrict to and prolong from a coarse space
//! through a prolongator in the backend's own form. The host implements both with
//! `crate::backend::coarse::CoarseSpace`; the CUDA backend with device fields, so that a
//! cycle never leaves the GPU. `CoarseOperator` is the coarse operator as a
//! `LinearOperator` of any such space, so the Krylov solvers run on every level.

use super::{galerkin, Aggregation, CoarseOp, Prolongator, Stencil};
use crate::clock::timed;
use crate::linalg::{LinearOperator, Precision, Space, Subset};
use crate::Result;
use std::sync::Arc;

/// A coarse level's space: fields of `op().dof` numbers a site (full, or one parity in
/// checkerboard order), and its operator.
pub trait CoarseLevelSpace: Space {
    /// The operator on the host (its lattice, dof, bytes; the source of the device copy).
    fn op(&self) -> &Arc<CoarseOp>;
    /// out = D_c inp on full fields, or (`schur`) the even Schur complement
    /// X_ee - Y_eo X_oo^-1 Y_oe on even fields.
    fn apply_coarse(&mut self, schur: bool, out: &mut Self::Field, inp: &Self::Field)
        -> Result<()>;
    /// The even-odd pieces of D_c x = b for a full b: the even right-hand side
    /// b_e - Y_eo X_oo^-1 b_o and the odd half b_o.
    fn schur_source(&mut self, b: &Self::Field) -> Result<(Self::Field, Self::Field)>;
    /// The full solution from the even one and the odd source:
    /// x_o = X_oo^-1 (b_o - Y_oe x_e).
    fn schur_reconstruct(&mut self, x_e: &Self::Field, b_o: &Self::Field) -> Result<Self::Field>;
}

/// A space whose fields a multigrid level restricts and prolongs.
pub trait Coarsen: Space {
    /// The next level's space (on the same device).
    type Coarse: CoarseLevelSpace + Coarsen<Coarse = Self::Coarse>;
    /// A prolongator in the form this space applies it.
    type Transfer;
    /// The space of the level below, with operator `op`, fields of `precision`.
    fn coarse_space(&mut self, op: Arc<CoarseOp>, precision: Precision) -> Result<Self::Coarse>;
    /// The next level's operator P^dag A P for this level's operator `fine` (as a
    /// stencil) and `p`: by default the host's product; a backend may form it itself.
    fn galerkin(&mut self, fine: &dyn Stencil, p: &Prolongator) -> Result<CoarseOp> {
        galerkin(fine, p)
    }
    /// `p` for this space's fields, applied in `precision` (that of the cycle's fields).
    fn transfer(&mut self, p: &Prolongator, precision: Precision) -> Result<Self::Transfer>;
    /// The next level from this level's near-null vectors `fields` (full fields): the
    /// prolongator on the aggregates `agg` (`Prolongator::new`'s orthonormalisation), the
    /// Galerkin product of `fine` with it, and it in this space's form for fields of
    /// `precision`. By default through the host (`host_coarsen`); a backend whose vectors
    /// and product live on a device may keep the prolongator there.
    fn coarsen(
        &mut self,
        fine: &dyn Stencil,
        agg: Aggregation,
        fields: &[&Self::Field],
        precision: Precision,
    ) -> Result<(CoarseOp, Self::Transfer)> {
        host_coarsen(self, fine, agg, fields, precision)
    }
    /// out = P^dag fine (out: a full field of `coarse`).
    fn restrict(
        &mut self,
        t: &Self::Transfer,
        fine: &Self::Field,
        coarse: &mut Self::Coarse,
        out: &mut <Self::Coarse as Space>::Field,
    ) -> Result<()>;
    /// fine = P inp (fine: a full field).
    fn prolong(
        &mut self,
        t: &Self::Transfer,
        coarse: &mut Self::Coarse,
        inp: &<Self::Coarse as Space>::Field,
        fine: &mut Self::Field,
    ) -> Result<()>;
}

/// `Coarsen::coarsen` through the host: the vectors downloaded, `Prolongator::new`, then
/// the space's `galerkin` and `transfer`; each a step of the run's report.
pub fn host_coarsen<S: Coarsen + ?Sized>(
    space: &mut S,
    fine: &dyn Stencil,
    agg: Aggregation,
    fields: &[&S::Field],
    precision: Precision,
) -> Result<(CoarseOp, S::Transfer)> {
    let vectors = timed("multigrid set-up: vectors to the host", || {
        fields
            .iter()
            .map(|f| space.to_host(f))
            .collect::<Result<Vec<_>>>()
    })?;
    let p = timed("multigrid set-up: prolongator (host)", || {
        Prolongator::new(agg, fine.dof(), &vectors)
    })?;
    drop(vectors);
    let op = timed("multigrid set-up: Galerkin product", || {
        space.galerkin(fine, &p)
    })?;
    let t = timed("multigrid set-up: prolongator to the level's space", || {
        space.transfer(&p, precision)
    })?;
    Ok((op, t))
}

/// A coarse level's space whose own coarse levels are of its kind (every coarse space).
pub trait LevelSpace: CoarseLevelSpace + Coarsen<Coarse = Self> {}
impl<C: CoarseLevelSpace + Coarsen<Coarse = C>> LevelSpace for C {}

/// The coarse operator on full fields, or its even Schur complement on even fields.
#[derive(Clone, Copy, Debug)]
pub struct CoarseOperator {
    pub schur: bool,
}

impl CoarseOperator {
    pub fn full() -> CoarseOperator {
        CoarseOperator { schur: false }
    }
    pub fn schur() -> CoarseOperator {
        CoarseOperator { schur: true }
    }
}

impl<C: CoarseLevelSpace> LinearOperator<C> for CoarseOperator {
    fn apply(&mut self, space: &mut C, out: &mut C::Field, inp: &C::Field) -> Result<()> {
        space.apply_coarse(self.schur, out, inp)
    }
    fn domain(&self) -> Subset {
        if self.schur {
            Subset::Even
        } else {
            Subset::Full
        }
    }
    fn hermitian(&self) -> bool {
        false
    }
    fn name(&self) -> String {
        if self.schur { "coarse Mee" } else { "coarse D" }.into()
    }
}
