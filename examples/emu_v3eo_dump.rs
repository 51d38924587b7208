//! Writes the CPU oracle for validate/emu/emu_v3eo.cpp (version 3.0's parity-major
//! stencil family run on the CPU through cuda_emu.h): a random SU(3) gauge field, two
//! random spinors psi and phi, and from the CPU backend: D psi, g5 D psi (full), M_ee
//! psi_e and g5 M_ee psi_e (even), hop_xpay(psi_o, phi_e, c = 0.37, g5) (even) and
//! hop_xpay(psi_e, phi_o, c = -0.21, no g5) (odd), the same four operators and hops on
//! single-precision fields and on half-precision fields (inputs and outputs rounded site
//! by site, linalg::half), and (psi_e | g5 M_ee psi_e), then every link's 8-real form
//! (`Su3::pack8`, [site][mu][8]) for the reconstruct-8 kernels. Half fields are written as
//! full canonical fields (zeros on the other parity). Boundaries: antiperiodic t and x.
//! Four links of the random field are replaced by SU(3) links whose row 0 is (e^{ia}, 0,
//! 0) (unit, and a phase with an SU(2) block) so that the 8-real form's degenerate branch
//! runs too.
//!
//! Usage: emu_v3eo_dump LX LY LZ LT FILE

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::{Layout, Operator, Precision, Subset};
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY};
use std::io::Write;

fn field(
    b: &mut CpuBackend,
    host: &SpinorField,
    layout: Layout,
) -> qcd_solve::backend::cpu::CpuField {
    let full = b.upload(host).unwrap();
    let mut f = b.alloc_layout(layout).unwrap();
    b.convert(&mut f, &full).unwrap();
    f
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: emu_v3eo_dump LX LY LZ LT FILE");
        std::process::exit(2);
    }
    let dims: [usize; 4] = std::array::from_fn(|k| args[k + 1].parse().expect("dimension"));
    let mut boundary = DEFAULT_BOUNDARY;
    boundary[0] = Boundary::Antiperiodic;
    boundary[3] = Boundary::Antiperiodic;
    let lattice = Lattice::new(dims, boundary).expect("lattice");
    let kappa = 0.124;
    let mut gauge = GaugeField::random(&lattice, 17);
    // Degenerate links for reconstruct 8: U_x(0) = 1, U_t(0) = 1, and U_y(1), U_z(3) =
    // diag(e^{ia}) + e^{-ia/2} S with S = [[p, q], [-q*, p*]] in SU(2).
    {
        use qcd_solve::field::{Su3, C64};
        let zero = C64::new(0.0, 0.0);
        let block = |a: f64| {
            let (p, q) = (C64::new(0.6, 0.48), C64::new(0.0, 0.64));
            let h = C64::from_polar(1.0, -a / 2.0);
            Su3([
                [C64::from_polar(1.0, a), zero, zero],
                [zero, h * p, h * q],
                [zero, -h * q.conj(), h * p.conj()],
            ])
        };
        gauge.links[0] = Su3::identity();
        gauge.links[3] = Su3::identity();
        gauge.links[4 + 1] = block(0.7);
        gauge.links[4 * 3 + 2] = block(-2.9);
    }
    let psi = SpinorField::random(lattice.volume(), 17, 1 << 40);
    let phi = SpinorField::random(lattice.volume(), 17, 2 << 40);
    let mut cpu = CpuBackend::new(&gauge, kappa);

    let mut out: Vec<u8> = b"QCDV3EO1".to_vec();
    let put_u = |o: &mut Vec<u8>, v: u64| o.extend_from_slice(&v.to_le_bytes());
    for &l in &dims {
        put_u(&mut out, l as u64);
    }
    put_u(&mut out, 1 | (1 << 3));
    let put = |o: &mut Vec<u8>, v: f64| o.extend_from_slice(&v.to_le_bytes());
    put(&mut out, kappa);
    for u in &gauge.links {
        for z in u.0.as_flattened() {
            put(&mut out, z.re);
            put(&mut out, z.im);
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
    let mut rar = None;
    for prec in [Precision::Double, Precision::Single, Precision::Half] {
        for op in [
            Operator::D,
            Operator::G5D,
            Operator::Schur,
            Operator::G5Schur,
        ] {
            let subset = op.subset();
            let layout = Layout::new(subset, prec);
            let x = field(&mut cpu, &psi, layout);
            let mut y = cpu.alloc_layout(layout).unwrap();
            cpu.apply(op, &mut y, &x).unwrap();
            if op == Operator::G5Schur && prec == Precision::Double {
                rar = Some(cpu.dot(&x, &y).unwrap());
            }
            put_field(&mut out, &cpu.download(&y).unwrap());
        }
        for (p, c, g5) in [(Subset::Even, 0.37, true), (Subset::Odd, -0.21, false)] {
            let q = Subset::from_parity(1 - p.parity().unwrap());
            let inp = field(&mut cpu, &psi, Layout::new(q, prec));
            let y = field(&mut cpu, &phi, Layout::new(p, prec));
            let mut o = cpu.alloc_layout(Layout::new(p, prec)).unwrap();
            cpu.hop_xpay(&mut o, &inp, &y, c, g5).unwrap();
            put_field(&mut out, &cpu.download(&o).unwrap());
        }
    }
    let rar = rar.unwrap();
    put(&mut out, rar.re);
    put(&mut out, rar.im);
    for u in &gauge.links {
        for r in u.pack8() {
            put(&mut out, r);
        }
    }
    std::fs::File::create(&args[5])
        .and_then(|mut f| f.write_all(&out))
        .expect("writing the dump");
}
