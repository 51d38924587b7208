//! The propagator pipeline against truths it does not compute itself, on a gauge file
//! from another code (MILC's 4^3x8 sample, ../shared/lattices/MANIFEST.md):
//! - linearity: the solution for a wall source on the Coulomb-fixed field equals the sum
//!   of the point-source solutions over the wall's sites;
//! - the one-end trick: the pion from Z2 noise on a timeslice, diluted in spin and colour,
//!   averages to the exact sum of the point-source pions over that timeslice, within the
//!   estimate's statistical error.

use qcd_solve::app::parallel::one;
use qcd_solve::app::rhs::RightHandSides;
use qcd_solve::app::run::build_problem;
use qcd_solve::config::LoadedConfig;
use qcd_solve::field::SpinorField;
use std::path::{Path, PathBuf};

fn lattice_file() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/lattices/milc_lat.sample.l4448")
}

fn config(gauge_extra: &str, source: &str, extra: &str) -> LoadedConfig {
    let text = format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\ntype = \"file\"\npath = \"{}\"\n\
         reunitarise = true\n{gauge_extra}\n\n[dirac]\nkappa = 0.12\n\n[source]\n{source}\n\n\
         [solver]\nmethod = \"bicgstab\"\ntolerance = 1e-13\nmax_iterations = 1000\n\n\
         [backend]\ndevice = \"cpu\"\n{extra}",
        lattice_file().display()
    );
    LoadedConfig::from_str(&text, "pipeline.toml", PathBuf::from(".")).unwrap()
}

fn rel_diff(a: &SpinorField, b: &SpinorField) -> f64 {
    let d: f64 = a
        .data
        .iter()
        .zip(&b.data)
        .map(|(x, y)| (x - y).norm_sqr())
        .sum();
    (d / b.norm2()).sqrt()
}

#[test]
fn a_wall_on_the_coulomb_fixed_field_is_the_sum_of_its_points() {
    // Expected: D^-1 is linear, so D^-1 (sum over the wall of point sources) = sum of the
    // point solutions; each is solved to 1e-13, D's condition number on this field at
    // kappa 0.12 is O(10): 1e-10 leaves room.
    let cfg = config(
        "fix = \"coulomb\"\nfix_tolerance = 1e-12",
        "type = \"wall\"\nt = 2\nspin = 1\ncolour = 2",
        "",
    );
    let problem = build_problem(&cfg).unwrap();
    let fixing = problem.gauge_fixing.as_ref().expect("the field was fixed");
    assert!(fixing["theta"].as_f64().unwrap() <= 1e-12, "{fixing}");
    // `[backend] device = "cpu"`: fixed on the CPU, and the report says so.
    assert_eq!(fixing["device"], "cpu", "{fixing}");
    let lattice = &problem.lattice;
    let rhs = RightHandSides::of(&cfg, &problem.gauge, || unreachable!()).unwrap();
    let wall = rhs.make(lattice, 0);
    let mut device = one::open(&cfg, &problem, None).unwrap();
    let x_wall = device.solve(&problem, &wall).unwrap().solution;
    let mut sum = SpinorField::zeros(lattice.volume());
    let mut sources = SpinorField::zeros(lattice.volume());
    for z in 0..4 {
        for y in 0..4 {
            for x in 0..4 {
                let point = SpinorField::point(lattice, [x, y, z, 2], 1, 2);
                let s = device.solve(&problem, &point).unwrap().solution;
                for (a, b) in sum.data.iter_mut().zip(&s.data) {
                    *a += b;
                }
                for (a, b) in sources.data.iter_mut().zip(&point.data) {
                    *a += b;
                }
            }
        }
    }
    assert_eq!(
        rel_diff(&sources, &wall),
        0.0,
        "the wall is the sum of its points"
    );
    let d = rel_diff(&sum, &x_wall);
    assert!(d <= 1e-10, "|sum of points - wall| / |wall| = {d:e}");
}

#[test]
fn the_z2_pion_averages_to_the_sum_of_the_point_pions_within_its_error() {
    // Exact: sum over the 64 sites y of timeslice 1 of the point-source pion
    // C_y(t) = sum over timeslice (1 + t) of sum |S(x, y)|^2 (12 columns each). Estimate:
    // the pipeline's G5-G5 correlator from Z2 noise on timeslice 1 diluted in spin and
    // colour, whose expectation over the noise is that sum (E[eta eta^+] = 1 on the
    // timeslice); 24 seeds, the mean within 4 standard errors at every t.
    let exact = {
        let cfg = config("", "type = \"point\"", "");
        let problem = build_problem(&cfg).unwrap();
        let lattice = &problem.lattice;
        let mut device = one::open(&cfg, &problem, None).unwrap();
        let mut c = vec![0.0; 8];
        for z in 0..4 {
            for y in 0..4 {
                for x in 0..4 {
                    let cols: Vec<SpinorField> = (0..12)
                        .map(|k| {
                            let p = SpinorField::point(lattice, [x, y, z, 1], k / 3, k % 3);
                            device.solve(&problem, &p).unwrap().solution
                        })
                        .collect();
                    for (t, v) in qcd_solve::app::propagator::pion(lattice, &cols, 1)
                        .iter()
                        .enumerate()
                    {
                        c[t] += v;
                    }
                }
            }
        }
        c
    };
    let out = tempfile::tempdir().unwrap();
    let seeds = 24;
    let estimates: Vec<Vec<f64>> = (1..=seeds)
        .map(|seed| {
            let cfg = config(
                "",
                &format!("type = \"z2\"\nseed = {seed}\ntimeslice = 1\ndilution = \"spin-colour\""),
                "\n[measure]\npairs = \"diagonal\"\n",
            );
            qcd_solve::app::propagator::run(&cfg, out.path())
                .unwrap()
                .pion
        })
        .collect();
    for t in 0..8 {
        let n = seeds as f64;
        let mean = estimates.iter().map(|e| e[t]).sum::<f64>() / n;
        let var = estimates.iter().map(|e| (e[t] - mean).powi(2)).sum::<f64>() / (n - 1.0);
        let err = (var / n).sqrt();
        assert!(err > 0.0, "t = {t}: the noise estimate has no spread");
        assert!(
            (mean - exact[t]).abs() <= 4.0 * err,
            "t = {t}: estimate {mean:e} +- {err:e}, exact {:e}",
            exact[t]
        );
    }
}
