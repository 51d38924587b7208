//! Writes the CPU oracle for validate/emu/emu_clover.cpp (version 3.0's CLOVER=1 builds run
//! on the CPU through cuda_emu.h): a random SU(3) gauge field, two random spinors psi and
//! phi, the action (kappa 0.124, c_sw 1.17, mu from the command line), the device clover
//! arrays of `dirac::clover_pack` (canonical order, [site][72] each: H_b and P_b), and from
//! the CPU reference (`SiteTerms`, `dirac::fast::hop`):
//!   0 D psi = A psi - kappa H psi, 1 g5 D psi (full),
//!   2 M_ee psi_e = A_ee psi_e - kappa^2 H_eo A_oo^-1 H_oe psi_e, 3 g5 M_ee psi_e (even),
//!   4 A_oo^-1 H_oe psi_e (odd), 5 A_oo^-1 (phi_o + kappa H_oe psi_e) (odd),
//!   6 A^-1 phi (full),
//! each a full canonical field (zeros off a half field's parity). D and g5 M_ee are also
//! checked here against `CpuBackend::with_action` (to 1e-13), so the oracle is the CPU
//! backend's operator. Then every link's 8-real form (`Su3::pack8`). Boundaries:
//! antiperiodic t and x.
//!
//! Usage: emu_clover_dump LX LY LZ LT MU FILE

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::{Layout, Operator};
use qcd_solve::dirac::clover::SiteTerms;
use qcd_solve::dirac::clover_pack::device_clover;
use qcd_solve::dirac::fast::hop;
use qcd_solve::dirac::{Action, Sites};
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY};
use std::io::Write;

/// a + s b on the sites of `parity` (all with None), zero elsewhere.
fn axpy(
    l: &Lattice,
    a: Option<&SpinorField>,
    s: f64,
    b: &SpinorField,
    parity: Option<usize>,
) -> SpinorField {
    let mut out = SpinorField::zeros(b.volume());
    for x in 0..b.volume() {
        if parity.is_some_and(|p| l.parity(x) != p) {
            continue;
        }
        for k in 0..12 {
            let base = a.map_or(Default::default(), |a| a.data[12 * x + k]);
            out.data[12 * x + k] = base + b.data[12 * x + k] * s;
        }
    }
    out
}

fn rel_diff(a: &SpinorField, b: &SpinorField) -> f64 {
    let (mut num, mut den) = (0.0, 0.0);
    for (x, y) in a.data.iter().zip(&b.data) {
        num += (x - y).norm_sqr();
        den += y.norm_sqr();
    }
    (num / den).sqrt()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 7 {
        eprintln!("usage: emu_clover_dump LX LY LZ LT MU FILE");
        std::process::exit(2);
    }
    let dims: [usize; 4] = std::array::from_fn(|k| args[k + 1].parse().expect("dimension"));
    let mu: f64 = args[5].parse().expect("mu");
    let mut boundary = DEFAULT_BOUNDARY;
    boundary[0] = Boundary::Antiperiodic;
    boundary[3] = Boundary::Antiperiodic;
    let lattice = Lattice::new(dims, boundary).expect("lattice");
    let action = Action {
        kappa: 0.124,
        csw: 1.17,
        mu,
    };
    let kappa = action.kappa;
    let gauge = GaugeField::random(&lattice, 23);
    let psi = SpinorField::random(lattice.volume(), 23, 1 << 40);
    let phi = SpinorField::random(lattice.volume(), 23, 2 << 40);
    let terms = SiteTerms::new(&gauge, &action).expect("site terms");
    let (clover, inverse) = device_clover(&terms).expect("device clover");
    let l = &lattice;
    let a =
        |f: &SpinorField, parity: Option<usize>, inv: bool| terms.apply(l, f, parity, inv, false);
    let h = |f: &SpinorField, sites: Sites| {
        let mut o = SpinorField::zeros(f.volume());
        hop(&gauge, f, &mut o, sites);
        o
    };
    let even = |f: &SpinorField| axpy(l, None, 1.0, f, Some(0));
    let psi_e = even(&psi);

    let d = axpy(
        l,
        Some(&a(&psi, None, false)),
        -kappa,
        &h(&psi, Sites::All),
        None,
    );
    let h_oe = h(&psi_e, Sites::Parity(1));
    let t_o = a(&h_oe, Some(1), true);
    let mee = axpy(
        l,
        Some(&a(&psi_e, Some(0), false)),
        -kappa * kappa,
        &h(&t_o, Sites::Parity(0)),
        Some(0),
    );
    let recon = a(&axpy(l, Some(&phi), kappa, &h_oe, Some(1)), Some(1), true);
    let ainv = a(&phi, None, true);
    let refs = [
        d.clone(),
        d.gamma5(),
        mee.clone(),
        mee.gamma5(),
        t_o,
        recon,
        ainv,
    ];

    // The same operators from the CPU backend.
    let mut cpu = CpuBackend::with_action(&gauge, &action).expect("backend");
    for (op, want) in [(Operator::D, &refs[0]), (Operator::G5Schur, &refs[3])] {
        let layout = Layout::new(op.subset(), qcd_solve::backend::Precision::Double);
        let full = cpu.upload(&psi).unwrap();
        let mut x = cpu.alloc_layout(layout).unwrap();
        cpu.convert(&mut x, &full).unwrap();
        let mut y = cpu.alloc_layout(layout).unwrap();
        cpu.apply(op, &mut y, &x).unwrap();
        let got = cpu.download(&y).unwrap();
        let diff = rel_diff(&got, want);
        assert!(diff < 1e-13, "{op:?}: the CPU backend differs by {diff:e}");
    }

    let mut out: Vec<u8> = b"QCDCLOV1".to_vec();
    let put_u = |o: &mut Vec<u8>, v: u64| o.extend_from_slice(&v.to_le_bytes());
    for &n in &dims {
        put_u(&mut out, n as u64);
    }
    put_u(&mut out, 1 | (1 << 3));
    let put = |o: &mut Vec<u8>, v: f64| o.extend_from_slice(&v.to_le_bytes());
    put(&mut out, kappa);
    put(&mut out, terms.twist);
    for u in &gauge.links {
        for z in u.0.as_flattened() {
            put(&mut out, z.re);
            put(&mut out, z.im);
        }
    }
    for u in &gauge.links {
        for r in u.pack8() {
            put(&mut out, r);
        }
    }
    let put_field = |o: &mut Vec<u8>, f: &SpinorField| {
        for z in &f.data {
            o.extend_from_slice(&z.re.to_le_bytes());
            o.extend_from_slice(&z.im.to_le_bytes());
        }
    };
    put_field(&mut out, &psi);
    put_field(&mut out, &phi);
    for site in clover.iter().chain(&inverse) {
        for &r in site {
            put(&mut out, r);
        }
    }
    for r in &refs {
        put_field(&mut out, r);
    }
    std::fs::File::create(&args[6])
        .and_then(|mut f| f.write_all(&out))
        .expect("writing the dump");
}
