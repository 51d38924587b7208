//! The 8-real form of a link (`Su3::pack8` / `unpack8`, reconstruct = 8) on the
//! configurations of ../shared/lattices (MANIFEST.md), written by other codes, read through
//! the readers (which reunitarise 32-bit input in double). An integration test because it
//! needs `io` (the field module must not depend on it).

mod common;
use common::shared;
use qcd_solve::field::su3::Su3;
use qcd_solve::geometry::lattice::DEFAULT_BOUNDARY;

/// The round trip's bound per link (as src/field/su3.rs's tests): 8 (eps + the link's
/// unitarity deviation) (1 + 1/|U00| + 1/|U20|), the rebuilt elements being exact to about
/// eps / min(|U00|, |U20|).
fn pack8_bound(u: &Su3, eps: f64) -> f64 {
    let d = u.unitarity_deviation();
    8.0 * (eps + d) * (1.0 + 1.0 / u.0[0][0].norm() + 1.0 / u.0[2][0].norm())
}

#[test]
fn pack8_round_trips_the_real_gauge_files() {
    let files = [
        "ATB_nersc.l8t4b3360",
        "ahmidas_conf.48",
        "pyquda_weak_field.lime",
        "milc_lat.sample.l4448",
        "milc_lat.sample.l4444",
    ];
    for name in files {
        let (g, _) = qcd_solve::io::read_gauge(&shared(name), None, None, DEFAULT_BOUNDARY)
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let (mut worst_d, mut worst_s) = (0.0f64, 0.0f64);
        for u in &g.links {
            let r = u.pack8();
            let d = Su3::unpack8(&r).max_abs_diff(u);
            // The 8 reals rounded to single precision, as 3.0's single links hold them.
            let f = Su3::unpack8(&r.map(|x| x as f32 as f64)).max_abs_diff(u);
            assert!(
                d <= pack8_bound(u, 1.2e-16),
                "{name}: double {d:e} for {u:?}"
            );
            assert!(f <= pack8_bound(u, 6e-8), "{name}: single {f:e} for {u:?}");
            worst_d = worst_d.max(d);
            worst_s = worst_s.max(f);
        }
        eprintln!(
            "{name}: {} links, max error {worst_d:e} (double), {worst_s:e} (f32 reals)",
            g.links.len()
        );
    }
}
