//! The spatial staples of a link: the paths of length three from x to x + mu through the
//! spatial planes (mu, nu), nu != mu, that APE and stout smearing add to the link.

use super::matrix::add;
use crate::field::{GaugeField, Su3};

/// The spatial directions x, y, z (mu = 0, 1, 2); t (mu = 3) is never smeared.
pub const SPATIAL: usize = 3;

/// Sum over the spatial nu != mu of the forward and backward staples of U_mu(x):
/// `U_nu(x) U_mu(x+nu) U_nu(x+mu)^+ + U_nu(x-nu)^+ U_mu(x-nu) U_nu(x-nu+mu)`: four
/// matrices for a spatial mu. Links are periodic (no boundary phase).
pub fn spatial_staples(g: &GaugeField, x: usize, mu: usize) -> Su3 {
    let l = &g.lattice;
    let x_mu = l.neighbour(x, mu, true).0;
    let mut sum = Su3::zero();
    for nu in (0..SPATIAL).filter(|&nu| nu != mu) {
        let x_nu = l.neighbour(x, nu, true).0;
        let forward = g
            .link(x, nu)
            .mul(g.link(x_nu, mu))
            .mul(&g.link(x_mu, nu).dagger());
        let x_dn = l.neighbour(x, nu, false).0;
        let x_dn_mu = l.neighbour(x_dn, mu, true).0;
        let backward = g
            .link(x_dn, nu)
            .dagger()
            .mul(g.link(x_dn, mu))
            .mul(g.link(x_dn_mu, nu));
        sum = add(&add(&sum, &forward), &backward);
    }
    sum
}
