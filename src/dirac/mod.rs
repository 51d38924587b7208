//! The Wilson-Dirac operator in the kappa normalisation (docs: conventions.md):
//!
//! D psi(x) = psi(x) - kappa * H psi(x),
//! H psi(x) = sum_mu [ (1 - g_mu) U_mu(x) psi(x+mu) + (1 + g_mu) U_mu(x-mu)^+ psi(x-mu) ],
//!
//! with the fermion boundary phase on hops that cross the lattice edge. `reference` is the
//! seed's formulation (per hop: a 3x4 by 4x4 spin product, then a 3x3 by 3x4 colour
//! product), kept simple as the test oracle; `fast` is the spin-projected form (1320
//! flops/site); `simd` is the same algorithm vectorised over 4 sites on a site-blocked
//! layout, which the CPU backend runs. Even-odd: D = [[1, -kappa H_eo], [-kappa H_oe, 1]]
//! where H_eo is H restricted to even output sites (it reads odd sites only).
//!
//! The clover term and the twisted mass add a site-local term A (`clover`):
//! D = A - kappa H, with A = 1 for plain Wilson (`Action`).

pub mod clover;
pub mod clover_pack;
pub mod coarse;
pub mod fast;
pub mod reference;
pub mod simd;

use crate::field::{GaugeField, SpinorField};
use crate::linalg::Operator;

/// Flops of the hopping term per site (QUDA's count: projection 96, 16 SU(3) mat-vec
/// 1056, accumulation 168).
pub const HOP_FLOPS_PER_SITE: u64 = 1320;
/// With the fused psi - kappa * H.
pub const DSLASH_FLOPS_PER_SITE: u64 = 1368;

/// The parameters of the operator: the hopping parameter, the clover coefficient c_sw
/// and the twisted mass mu (kappa normalisation; docs: conventions.md). c_sw = mu = 0 is
/// plain Wilson, run by exactly the code that runs it without these keys.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Action {
    pub kappa: f64,
    pub csw: f64,
    pub mu: f64,
}

impl Action {
    pub fn wilson(kappa: f64) -> Action {
        Action {
            kappa,
            csw: 0.0,
            mu: 0.0,
        }
    }

    /// Whether A differs from 1 (a clover term or a twist).
    pub fn has_site_term(&self) -> bool {
        self.csw != 0.0 || self.mu != 0.0
    }

    /// The twist 2 kappa mu of `D + 2 i kappa mu g5`.
    pub fn twist(&self) -> f64 {
        2.0 * self.kappa * self.mu
    }

    /// "Wilson", "Wilson-clover (c_sw = 1)", "twisted mass (mu = 0.01)", "twisted-mass
    /// clover (c_sw = 1, mu = 0.01)".
    pub fn describe(&self) -> String {
        match (self.csw != 0.0, self.mu != 0.0) {
            (false, false) => "Wilson".into(),
            (true, false) => format!("Wilson-clover (c_sw = {})", self.csw),
            (false, true) => format!("twisted mass (mu = {})", self.mu),
            (true, true) => format!(
                "twisted-mass clover (c_sw = {}, mu = {})",
                self.csw, self.mu
            ),
        }
    }
}

/// Which sites of the output a hopping term is computed on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sites {
    All,
    /// Only sites of this parity (0 even, 1 odd); the others are set to zero.
    Parity(usize),
}

/// out = A inp for A = D or g5 D, with the fast operator (epilogue fused).
pub fn apply(
    op: Operator,
    gauge: &GaugeField,
    kappa: f64,
    inp: &SpinorField,
    out: &mut SpinorField,
) {
    let gamma5 = op == Operator::G5D;
    fast::apply(
        gauge,
        inp,
        out,
        Sites::All,
        fast::Epilogue::Wilson { kappa, gamma5 },
    );
}

/// D psi with the reference operator (the test oracle).
pub fn apply_reference(
    op: Operator,
    gauge: &GaugeField,
    kappa: f64,
    inp: &SpinorField,
) -> SpinorField {
    let h = reference::hop(gauge, inp);
    let mut out = SpinorField::zeros(inp.volume());
    for k in 0..inp.data.len() {
        out.data[k] = inp.data[k] - kappa * h.data[k];
    }
    if op.gamma5() {
        out.gamma5()
    } else {
        out
    }
}

/// A psi - kappa H psi (times g5 for the Hermitian form) with the reference hopping term
/// and the site term `terms` (None: A = 1): the test oracle of the clover and
/// twisted-mass operators.
pub fn apply_reference_with(
    op: Operator,
    gauge: &GaugeField,
    kappa: f64,
    terms: Option<&clover::SiteTerms>,
    inp: &SpinorField,
) -> SpinorField {
    let Some(terms) = terms else {
        return apply_reference(op, gauge, kappa, inp);
    };
    let h = reference::hop(gauge, inp);
    let mut out = terms.apply(&gauge.lattice, inp, None, false, false);
    for (o, hv) in out.data.iter_mut().zip(&h.data) {
        *o -= kappa * *hv;
    }
    if op.gamma5() {
        out.gamma5()
    } else {
        out
    }
}

/// D^+ psi through gamma5-hermiticity: D^+ = g5 D g5.
pub fn apply_dagger(gauge: &GaugeField, kappa: f64, inp: &SpinorField) -> SpinorField {
    let mut out = SpinorField::zeros(inp.volume());
    apply(Operator::G5D, gauge, kappa, &inp.gamma5(), &mut out);
    out
}

/// H_eo psi (even output sites, odd input sites) or H_oe psi, on full-length fields.
/// Even-odd splitting needs every extent even (otherwise a hop across the boundary would
/// land on a site of the same parity): odd extents are refused by name.
pub fn hop_eo(
    gauge: &GaugeField,
    inp: &SpinorField,
    out: &mut SpinorField,
    output_parity: usize,
) -> crate::Result<()> {
    gauge.lattice.require_even("even-odd preconditioning")?;
    fast::hop(gauge, inp, out, Sites::Parity(output_parity));
    Ok(())
}
