//! Writes the CPU oracle's data for validate/emu (the kernels run on the CPU through a
//! host C++ emulation of the CUDA built-ins): a random gauge field and spinor, the
//! reference D psi and g5 D psi from `dirac::apply_reference`, the seed's Li matrices in
//! hop order, and the CPU's (psi|psi) and (psi|D psi).
//!
//! Usage: emu_dump LX LY LZ LT FILE

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::cuda::core::kernels::li_in_hop_order;
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::Operator;
use qcd_solve::dirac::apply_reference;
use qcd_solve::field::{GaugeField, SpinorField};
use qcd_solve::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use std::io::Write;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 6 {
        eprintln!("usage: emu_dump LX LY LZ LT FILE");
        std::process::exit(2);
    }
    let dims: [usize; 4] = std::array::from_fn(|k| args[k + 1].parse().expect("dimension"));
    let lattice = Lattice::new(dims, DEFAULT_BOUNDARY).expect("lattice");
    let kappa = 0.124;
    let gauge = GaugeField::random(&lattice, 7);
    let psi = SpinorField::random(lattice.volume(), 7, 1 << 40);
    let d = apply_reference(Operator::D, &gauge, kappa, &psi);
    let g5d = apply_reference(Operator::G5D, &gauge, kappa, &psi);
    let mut cpu = CpuBackend::new(&gauge, kappa);
    let (cpsi, cd) = (cpu.upload(&psi).unwrap(), cpu.upload(&d).unwrap());
    let n2 = cpu.norm2(&cpsi).unwrap();
    let dot = cpu.dot(&cpsi, &cd).unwrap();

    let mut out: Vec<u8> = b"QCDEMU01".to_vec();
    let put_u = |o: &mut Vec<u8>, v: u64| o.extend_from_slice(&v.to_le_bytes());
    for &l in &dims {
        put_u(&mut out, l as u64);
    }
    put_u(&mut out, 1 << 3); // antiperiodic in t
    let put = |o: &mut Vec<u8>, v: f64| o.extend_from_slice(&v.to_le_bytes());
    put(&mut out, kappa);
    for v in li_in_hop_order() {
        put(&mut out, v);
    }
    for u in &gauge.links {
        for z in u.0.as_flattened() {
            put(&mut out, z.re);
            put(&mut out, z.im);
        }
    }
    for f in [&psi, &d, &g5d] {
        for z in &f.data {
            put(&mut out, z.re);
            put(&mut out, z.im);
        }
    }
    put(&mut out, n2);
    put(&mut out, dot.re);
    put(&mut out, dot.im);
    std::fs::File::create(&args[5])
        .and_then(|mut f| f.write_all(&out))
        .expect("writing the dump");
}
