//! The twisted-mass operator against propagators that another code computed: tmLQCD's
//! inversions on its own 4^3x8 gauge field, from the ahmidas test suite
//! (tests/data/ahmidas/README.md gives the origin, licence, layout and conventions).
//! ahmidas's `test/dirac_operator.cpp` applies the twisted-mass operator to these
//! propagators and checks that it gives back the sources. Here our operator does the same.
//!
//! The map between the two conventions:
//! - Basis. tmLQCD uses a chiral basis with g_t = -[[0,1],[1,0]] and g_k = [[0,-i s_k],[i s_k,0]].
//!   The unitary V with V g_mu^tm V^+ = g_mu^DR (mu = x, y, z, t) takes a spinor to ours as
//!   psi_DR = (psi3, -psi2, -psi1, psi0). V takes their g5 to minus ours.
//!   `basis_map_takes_tmlqcd_gammas_to_degrand_rossi` checks both statements.
//! - Twist. Their D_tm contains + i mu g5_tm, which is - i mu g5_DR. Their u (mu = +0.01)
//!   is therefore our mu = -0.01, and their d is our mu = +0.01.
//! - Normalisation. Their D_tm = 1/(2 kappa) - H/2 + i mu g5 (mass normalisation). Ours is
//!   D = 1 - kappa H + 2 i kappa mu g5 = 2 kappa D_tm, so D prop = 2 kappa src.
//! - Boundary. ahmidas flips the sign of the t-links at t = T-1. This is our antiperiodic
//!   fermion boundary in t: both hops that cross the time edge get -1.
//!
//! Tolerance. ahmidas passes if (sum |D_tm prop - src| / 12)^2 < 1e-13, where the sum of
//! moduli (an L1 norm) runs over all 12 columns. We use the same bound column by column:
//! the L1 norm of one column's residual, in mass normalisation, squared, must stay below
//! 1e-13. We also require ||D prop - 2 kappa src|| / ||2 kappa src|| <= sqrt(1e-13) = 3.2e-7.
//! The source is a unit point source and the L2 norm is at most the L1 norm, so a column that
//! passes the first check passes this one. The relative residual does not change with the
//! normalisation factor 2 kappa. Measured values: 3.0e-9 and 3.5e-9 relative, 1.4e-7 and
//! 1.7e-7 L1 (squared: 2.1e-14 and 2.9e-14). The same columns give 4.4e-3 with the wrong sign
//! of mu and 0.30 with periodic time. Both failures are asserted to exceed the tolerance by
//! more than a factor 1000.
//!
//! Our BiCGStab solves of D x = 2 kappa src (plain and even-odd, tol 1e-10) are compared with
//! the tmLQCD propagator. The comparison uses a bound derived from both residuals and cond(D)
//! (`bicgstab_solution_matches_the_tmlqcd_propagator`). Measured: 3.7e-9 to 4.5e-9, against
//! bounds near 3e-8.

use qcd_solve::app::run::{build_problem, cpu_residual_of_d, solve_on, Problem, SolvePlan};
use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::config::{LoadedConfig, Preconditioning};
use qcd_solve::dirac::clover::SiteTerms;
use qcd_solve::dirac::{apply_reference_with, Action};
use qcd_solve::field::gamma::{gamma, matmul, SpinMatrix};
use qcd_solve::field::{SpinorField, C64};
use qcd_solve::linalg::Operator;
use qcd_solve::solver::StopReason;
use std::path::PathBuf;

const KAPPA: f64 = 0.1;
/// tmLQCD's mu of the u flavour (mass normalisation); d has -MU_TM.
const MU_TM: f64 = 0.01;
const DIMS: [usize; 4] = [4, 4, 4, 8];
/// sqrt of ahmidas's squared-residual bound 1e-13.
const TOL: f64 = 3.2e-7;
/// The spin-colour columns in tests/data/ahmidas.
const COLUMNS: [usize; 2] = [0, 7];

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/ahmidas")
        .join(name)
}

/// Our mu for a tmLQCD flavour: their g5 is minus ours, so the sign flips.
fn our_mu(flavour: char) -> f64 {
    match flavour {
        'u' => -MU_TM,
        'd' => MU_TM,
        _ => unreachable!(),
    }
}

/// tmLQCD's gammas for x, y, z, t, taken from ahmidas's tables (src/L0/Dirac/Gamma/Gamma.cpp:
/// (g psi)_i = sign[i] psi[perm[i]], Gamma<1..3> = x, y, z and Gamma<4> = t), and g5.
fn tmlqcd_gammas() -> ([SpinMatrix; 4], SpinMatrix) {
    let (i, one) = (C64::new(0.0, 1.0), C64::new(1.0, 0.0));
    let table = |perm: [usize; 4], sign: [C64; 4]| {
        let mut m = [[C64::new(0.0, 0.0); 4]; 4];
        for r in 0..4 {
            m[r][perm[r]] = sign[r];
        }
        m
    };
    (
        [
            table([3, 2, 1, 0], [-i, -i, i, i]),
            table([3, 2, 1, 0], [-one, one, one, -one]),
            table([2, 3, 0, 1], [-i, i, i, -i]),
            table([2, 3, 0, 1], [-one, -one, -one, -one]),
        ],
        table([0, 1, 2, 3], [one, one, -one, -one]),
    )
}

/// V of psi_DR = V psi_tm = (psi3, -psi2, -psi1, psi0) (real, so V^+ = V^T).
fn basis_map() -> SpinMatrix {
    let z = C64::new(0.0, 0.0);
    let (p, m) = (C64::new(1.0, 0.0), C64::new(-1.0, 0.0));
    [[z, z, z, p], [z, z, m, z], [z, m, z, z], [p, z, z, z]]
}

fn conjugate_by_v(g: &SpinMatrix) -> SpinMatrix {
    let v = basis_map();
    let mut vt = v;
    for r in 0..4 {
        for c in 0..4 {
            vt[r][c] = v[c][r];
        }
    }
    matmul(&matmul(&v, g), &vt)
}

#[test]
fn gauge_file_is_tmlqcds_and_verifies() {
    let path = data("conf48.0000");
    let recs = qcd_solve::io::lime::records(&path).unwrap();
    let problem =
        qcd_solve::io::lime::flag_problem(&recs).expect("ME flag clear on the last record");
    assert!(problem.contains("does not end its message"), "{problem}");
    // The library entry reads it with a warning and verifies what the file stores: both
    // SciDAC checksums and the xlf-info plaquette.
    let (_, info) = qcd_solve::io::read_gauge(
        &path,
        None,
        Some(DIMS),
        qcd_solve::geometry::lattice::DEFAULT_BOUNDARY,
    )
    .unwrap();
    let names: Vec<&str> = info.checksums.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["suma", "sumb"]);
    assert!(info.checksums.iter().all(|c| c.stored == c.computed));
    assert_eq!(info.header_plaquette, Some(0.6069403));
    assert!(
        (info.plaquette.total - 0.6069403).abs() < 1e-6,
        "{:?}",
        info.plaquette
    );
    // The program's strict reader takes it without --accept-unchecked: the flag is clear
    // on the scidac-checksum record that closes the file, after the binary data it checks.
    let strict = qcd_solve::io::read_gauge_checked(
        &path,
        None,
        Some(DIMS),
        qcd_solve::geometry::lattice::DEFAULT_BOUNDARY,
        qcd_solve::io::ReadOptions::default(),
        false,
    );
    assert!(strict.is_ok(), "{:?}", strict.err());
}

#[test]
fn basis_map_takes_tmlqcd_gammas_to_degrand_rossi() {
    let (tm, g5_tm) = tmlqcd_gammas();
    for (mu, g) in tm.iter().enumerate() {
        assert_eq!(conjugate_by_v(g), gamma(mu), "V g_{mu}^tm V^+ = g_{mu}^DR");
    }
    // tmLQCD's g5 = g_t g_x g_y g_z, and V takes it to minus ours (g1 g2 g3 g4).
    let g5_from_product = matmul(&matmul(&tm[3], &tm[0]), &matmul(&tm[1], &tm[2]));
    assert_eq!(g5_from_product, g5_tm);
    let g5_dr = matmul(&matmul(&gamma(0), &gamma(1)), &matmul(&gamma(2), &gamma(3)));
    let mapped = conjugate_by_v(&g5_tm);
    for r in 0..4 {
        for c in 0..4 {
            assert_eq!(mapped[r][c], -g5_dr[r][c], "V g5_tm V^+ = -g5_DR");
        }
    }
}

/// A spinor field from a tmLQCD/ahmidas propagator file (one spin-colour column), in
/// tmLQCD's basis: big-endian doubles, [t][z][y][x][spin][colour], x fastest. This is our
/// site order (`Lattice::index`) and our [spin][colour] order within a site.
fn read_tm_column(name: &str) -> SpinorField {
    let path = data(name);
    let recs = qcd_solve::io::lime::records(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let record = |ty: &str| {
        let r = recs
            .iter()
            .find(|r| r.type_name == ty)
            .unwrap_or_else(|| panic!("{name}: no {ty} record"));
        &bytes[r.data_offset as usize..(r.data_offset + r.data_len) as usize]
    };
    assert_eq!(record("propagator-type"), b"DiracFermion_Sink", "{name}");
    let format = String::from_utf8_lossy(record("etmc-propagator-format"));
    for tag in [
        "<precision>64</precision>",
        "<flavours>1</flavours>",
        "<lx>4</lx>",
        "<ly>4</ly>",
        "<lz>4</lz>",
        "<lt>8</lt>",
    ] {
        assert!(format.contains(tag), "{name}: {tag} missing from {format}");
    }
    let payload = record("scidac-binary-data");
    let volume: usize = DIMS.iter().product();
    assert_eq!(payload.len(), volume * 12 * 16, "{name}: payload size");
    let f = |k: usize| f64::from_be_bytes(payload[8 * k..8 * k + 8].try_into().unwrap());
    SpinorField {
        data: (0..volume * 12)
            .map(|k| C64::new(f(2 * k), f(2 * k + 1)))
            .collect(),
    }
}

/// psi_DR = (psi3, -psi2, -psi1, psi0) site by site, colour by colour.
fn to_degrand_rossi(tm: &SpinorField) -> SpinorField {
    let mut out = tm.clone();
    for (o, s) in out.data.chunks_exact_mut(12).zip(tm.data.chunks_exact(12)) {
        for c in 0..3 {
            o[c] = s[9 + c];
            o[3 + c] = -s[6 + c];
            o[6 + c] = -s[3 + c];
            o[9 + c] = s[c];
        }
    }
    out
}

/// The source of column `col` (checked to be tmLQCD's unit point source at the origin in
/// spin col / 3, colour col % 3) and the u or d propagator, both in our basis.
fn column(col: usize, flavour: char) -> (SpinorField, SpinorField) {
    let src = read_tm_column(&format!("source48.{col:02}"));
    let nonzero: Vec<usize> = (0..src.data.len())
        .filter(|&k| src.data[k] != C64::new(0.0, 0.0))
        .collect();
    assert_eq!(
        nonzero,
        vec![col],
        "source48.{col:02}: a point source at site 0"
    );
    assert_eq!(src.data[col], C64::new(1.0, 0.0));
    let prop = read_tm_column(&format!("source48_{flavour}.{col:02}.inverted"));
    (to_degrand_rossi(&src), to_degrand_rossi(&prop))
}

fn config_text(boundary_t: &str, mu: f64, pre: &str) -> String {
    format!(
        "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\
         boundary = [\"periodic\", \"periodic\", \"periodic\", \"{boundary_t}\"]\n\
         [gauge]\ntype = \"file\"\npath = {:?}\nformat = \"ildg\"\n\
         [dirac]\nkappa = {KAPPA}\nmu = {mu}\n\
         [source]\ntype = \"point\"\nsite = [0, 0, 0, 0]\nspin = 0\ncolour = 0\n\
         [solver]\nmethod = \"bicgstab\"\ntolerance = 1e-10\nmax_iterations = 1000\n\
         preconditioning = \"{pre}\"\n[backend]\ndevice = \"cpu\"\n[output]\n",
        data("conf48.0000").display().to_string()
    )
}

/// tmLQCD's gauge field through our ILDG reader on a lattice with the given fermion
/// boundary in t, read by the program's strict reader (the open message-end flag of the
/// file's closing checksum record is accepted with a warning:
/// `gauge_file_is_tmlqcds_and_verifies`).
fn problem(boundary_t: &str, mu: f64, pre: &str) -> (LoadedConfig, Problem) {
    let cfg = LoadedConfig::from_str(
        &config_text(boundary_t, mu, pre),
        "test",
        PathBuf::from("."),
    )
    .unwrap();
    let p = build_problem(&cfg).unwrap();
    (cfg, p)
}

/// D psi with the CPU backend's operator for this action (what the solvers run).
fn apply_d(problem: &Problem, mu: f64, psi: &SpinorField) -> SpinorField {
    let action = Action {
        kappa: KAPPA,
        csw: 0.0,
        mu,
    };
    let mut be = CpuBackend::with_action(&problem.gauge, &action).unwrap();
    let x = be.upload(psi).unwrap();
    let mut y = be.alloc().unwrap();
    be.apply(Operator::D, &mut y, &x).unwrap();
    let out = be.download(&y).unwrap();
    // The reference oracle agrees with the backend's operator.
    let terms = SiteTerms::new(&problem.gauge, &action).unwrap();
    let oracle = apply_reference_with(Operator::D, &problem.gauge, KAPPA, Some(&terms), psi);
    assert!(
        out.rel_diff(&oracle) < 1e-14,
        "backend vs reference operator"
    );
    out
}

fn scaled(f: &SpinorField, a: f64) -> SpinorField {
    SpinorField {
        data: f.data.iter().map(|z| *z * a).collect(),
    }
}

/// (||D prop - 2 kappa src|| / ||2 kappa src||, L1 norm of D_tm prop - src in mass
/// normalisation: ahmidas's quantity for one column).
fn residuals(problem: &Problem, mu: f64, src: &SpinorField, prop: &SpinorField) -> (f64, f64) {
    let b = scaled(src, 2.0 * KAPPA);
    let dp = apply_d(problem, mu, prop);
    let l1: f64 = dp
        .data
        .iter()
        .zip(&b.data)
        .map(|(x, y)| (x - y).norm())
        .sum::<f64>()
        / (2.0 * KAPPA);
    (dp.rel_diff(&b), l1)
}

#[test]
fn twisted_mass_operator_reproduces_tmlqcd_sources_from_its_propagators() {
    let (_, antiperiodic) = problem("antiperiodic", 0.0, "none");
    let (_, periodic) = problem("periodic", 0.0, "none");
    for col in COLUMNS {
        for flavour in ['u', 'd'] {
            let (src, prop) = column(col, flavour);
            let mu = our_mu(flavour);
            let (rel, l1) = residuals(&antiperiodic, mu, &src, &prop);
            let (wrong_sign, _) = residuals(&antiperiodic, -mu, &src, &prop);
            let (wrong_boundary, _) = residuals(&periodic, mu, &src, &prop);
            eprintln!(
                "column {col:02} {flavour} (our mu = {mu}): relative residual {rel:.3e}, \
                 ahmidas L1 {l1:.3e} (squared {:.2e}); mu = {}: {wrong_sign:.3e}; \
                 periodic t: {wrong_boundary:.3e}",
                l1 * l1,
                -mu
            );
            assert!(
                l1 * l1 < 1e-13,
                "{col:02} {flavour}: ahmidas criterion (L1)^2 = {:.3e}",
                l1 * l1
            );
            assert!(
                rel <= TOL,
                "{col:02} {flavour}: relative residual {rel:.3e}"
            );
            assert!(
                wrong_sign > 1e3 * TOL,
                "{col:02} {flavour}: the wrong sign of mu must fail: {wrong_sign:.3e}"
            );
            assert!(
                wrong_boundary > 1e3 * TOL,
                "{col:02} {flavour}: periodic time must fail: {wrong_boundary:.3e}"
            );
        }
    }
}

#[test]
fn bicgstab_solution_matches_the_tmlqcd_propagator() {
    // ||x - x_tm|| / ||x_tm|| <= cond(D) (eps_tm + eps_x) / (1 - eps_tm), with eps the
    // relative residuals of the two solutions in our D. ||H|| <= 8 (each direction's pair of
    // hops has norm 2: (1 -+ g)/2 are complementary projectors that commute with the
    // links and shifts), so the singular values of D = 1 - kappa H + 2 i kappa mu g5 lie in
    // [1 - 8 kappa - 2 kappa |mu|, 1 + 8 kappa + 2 kappa |mu|] and cond(D) <= 9.1.
    let twist = 2.0 * KAPPA * MU_TM;
    let cond = (1.0 + 8.0 * KAPPA + twist) / (1.0 - 8.0 * KAPPA - twist);
    for (pre, pre_name) in [
        (Preconditioning::None, "none"),
        (Preconditioning::EvenOdd, "even-odd"),
    ] {
        for flavour in ['u', 'd'] {
            let mu = our_mu(flavour);
            let (cfg, mut problem) = problem("antiperiodic", mu, pre_name);
            assert_eq!(problem.action().mu, mu);
            for col in COLUMNS {
                let (src, prop) = column(col, flavour);
                problem.source = scaled(&src, 2.0 * KAPPA);
                problem.operator = Operator::D;
                let plan = SolvePlan::from_config(&cfg.config, false);
                assert_eq!(plan.preconditioning, pre);
                let mut be = CpuBackend::with_action(&problem.gauge, &problem.action()).unwrap();
                let r = solve_on(&mut be, &problem, &plan).unwrap();
                let label = format!("{col:02} {flavour} {pre_name}");
                assert_eq!(r.reason, StopReason::Converged, "{label}");
                let eps_x = cpu_residual_of_d(&problem, &r.solution);
                let eps_tm = cpu_residual_of_d(&problem, &prop);
                let bound = cond * (eps_tm + eps_x) / (1.0 - eps_tm);
                let err = r.solution.rel_diff(&prop);
                eprintln!(
                    "{label}: {} iterations, residual {eps_x:.2e} (tmLQCD's {eps_tm:.2e}), \
                     |x - x_tm| / |x_tm| = {err:.3e}, bound {bound:.3e}",
                    r.iterations
                );
                assert!(eps_x <= 1e-10, "{label}: true residual {eps_x:.3e}");
                assert!(eps_tm <= TOL, "{label}: tmLQCD's residual {eps_tm:.3e}");
                assert!(err <= bound, "{label}: {err:.3e} > {bound:.3e}");
            }
        }
    }
}
