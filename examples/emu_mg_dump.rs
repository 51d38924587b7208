//! Writes the CPU oracle for validate/emu/emu_mg.cpp (kernels/mg_coarse.cu run on the CPU
//! through cuda_emu.h): on a random gauge field with the clover term (c_sw 1.17, kappa
//! 0.124, antiperiodic t), a prolongator from random vectors (`Prolongator`, blocks 2^4)
//! and its Galerkin coarse operator (`galerkin`), the inputs and the CPU reference's
//! results of every multigrid kernel:
//!   the restriction P^dag f of a random fine field f, the prolongation P c of a random
//!   coarse field c (fine fields in version 3.0's parity-major order),
//!   the coarse operator D_c on a random full field, its even Schur complement on a random
//!   even field (`CoarseOp::apply`, `apply_schur`),
//! with the device forms the GPU code uploads (`cuda::mg::transfer::device_order`,
//! `cuda::mg::transposed`, `cuda::mg::domain_tables`); then, for the clover operator and
//! the plain Wilson one, the Galerkin product's tables (`cuda::mg::galerkin::galerkin_tables`),
//! kappa and the host's product; last the near-null vectors in 3.0's order (the
//! device's own prolongator, gathered and orthonormalised there). Every section: an i64 count, then
//! that many i64 or (re, im) f64 pairs.
//!
//! Usage: emu_mg_dump LX LY LZ LT NVEC FILE   (extents multiples of 4)

use qcd_solve::backend::cuda::mg::galerkin::{galerkin_tables, site_blocks, SITE_BLOCK_VALUES};
use qcd_solve::backend::cuda::mg::{domain_tables, transfer::device_order, transposed};
use qcd_solve::dirac::clover::SiteTerms;
use qcd_solve::dirac::coarse::{galerkin, Aggregation, Prolongator, WilsonStencil};
use qcd_solve::dirac::Action;
use qcd_solve::field::{GaugeField, SpinorField, C64};
use qcd_solve::geometry::lattice::{Boundary, Lattice, DEFAULT_BOUNDARY};
use qcd_solve::rng::Stream;
use std::io::Write;

fn gaussian(n: usize, seed: u64) -> Vec<C64> {
    let mut rng = Stream::new(seed, 7);
    (0..n)
        .map(|_| C64::new(rng.gaussian(), rng.gaussian()))
        .collect()
}

struct Out(Vec<u8>);

impl Out {
    fn ints(&mut self, v: &[i64]) {
        self.0.extend((v.len() as i64).to_le_bytes());
        v.iter().for_each(|x| self.0.extend(x.to_le_bytes()));
    }
    fn complex(&mut self, v: &[C64]) {
        self.0.extend((v.len() as i64).to_le_bytes());
        for z in v {
            self.0.extend(z.re.to_le_bytes());
            self.0.extend(z.im.to_le_bytes());
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.len() != 7 {
        eprintln!("usage: emu_mg_dump LX LY LZ LT NVEC FILE");
        std::process::exit(2);
    }
    let dims: [usize; 4] = std::array::from_fn(|k| args[k + 1].parse().expect("dimension"));
    let nvec: usize = args[5].parse().expect("nvec");
    let mut boundary = DEFAULT_BOUNDARY;
    boundary[3] = Boundary::Antiperiodic;
    let lattice = Lattice::new(dims, boundary).expect("lattice");
    let action = Action {
        kappa: 0.124,
        csw: 1.17,
        mu: 0.0,
    };
    let gauge = GaugeField::random(&lattice, 31);
    let terms = SiteTerms::new(&gauge, &action).expect("site terms");
    let stencil = WilsonStencil::new(&gauge, action.kappa, Some(&terms));
    let v = lattice.volume();
    let vectors: Vec<Vec<C64>> = (0..nvec)
        .map(|k| gaussian(v * 12, 100 + k as u64))
        .collect();
    let agg = Aggregation::new(&lattice, [2; 4], "blocks").expect("aggregation");
    let p = Prolongator::new(agg, 12, &vectors).expect("prolongator");
    let op = galerkin(&stencil, &p)
        .expect("galerkin")
        .with_site_inverse()
        .expect("site inverses");
    let coarse = &p.aggregation.coarse;
    let (vc, dof) = (coarse.volume(), op.dof);

    // Version 3.0's full-field order: element k of site x at p * 12 Vh + k Vh + x / 2.
    let vh = v / 2;
    let at = |x: usize, k: usize| lattice.parity(x) * 12 * vh + k * vh + x / 2;
    let to_device = |canonical: &[C64]| {
        let mut d = vec![C64::new(0.0, 0.0); canonical.len()];
        for x in 0..v {
            for k in 0..12 {
                d[at(x, k)] = canonical[x * 12 + k];
            }
        }
        d
    };
    let fine = SpinorField::random(v, 5, 1 << 40).data;
    let mut restricted = vec![C64::new(0.0, 0.0); vc * dof];
    p.restrict(&fine, &mut restricted);
    let c = gaussian(vc * dof, 9);
    let mut prolonged = vec![C64::new(0.0, 0.0); v * 12];
    p.prolong(&c, &mut prolonged);

    let inp = gaussian(vc * dof, 11);
    let mut out = vec![C64::new(0.0, 0.0); vc * dof];
    op.apply(&inp, &mut out);
    let in_e = gaussian(vc / 2 * dof, 13);
    let mut schur = vec![C64::new(0.0, 0.0); vc / 2 * dof];
    let mut tmp = [
        vec![C64::new(0.0, 0.0); vc / 2 * dof],
        vec![C64::new(0.0, 0.0); vc / 2 * dof],
    ];
    op.apply_schur(&in_e, &mut schur, &mut tmp).expect("schur");

    let mut o = Out(Vec::new());
    let members = p.aggregation.block_volume();
    o.ints(&[12, nvec as i64, members as i64, vc as i64, dof as i64]);
    o.complex(&device_order(&p));
    let base: Vec<i64> = (0..vc)
        .flat_map(|a| p.aggregation.members(a).to_vec())
        .map(|x| at(x, 0) as i64)
        .collect();
    o.ints(&base);
    o.ints(&[vh as i64]);
    o.complex(&to_device(&fine));
    o.complex(&restricted);
    o.complex(&c);
    o.complex(&to_device(&prolonged));
    o.complex(&transposed(&op.site, dof));
    o.complex(&transposed(&op.hops, dof));
    o.complex(&transposed(op.site_inverse().expect("inverses"), dof));
    let (full, halves) = domain_tables(coarse);
    let halves = halves.expect("even coarse extents");
    let wide = |v: &[i32]| v.iter().map(|&x| x as i64).collect::<Vec<_>>();
    o.ints(&wide(&full));
    for (sites, nb) in &halves {
        o.ints(&wide(sites));
        o.ints(&wide(nb));
    }
    o.complex(&inp);
    o.complex(&out);
    o.complex(&in_e);
    o.complex(&schur);
    // The Galerkin product on the device (kernels/mg_galerkin.cu): its tables, kappa, and
    // the host's products (row-major) with the clover term and without a site term.
    let wilson = WilsonStencil::new(&gauge, action.kappa, None);
    for (st, with_blocks) in [(&stencil, true), (&wilson, false)] {
        let t = galerkin_tables(st, &p.aggregation, p.fine_dof).expect("galerkin tables");
        o.ints(&wide(&t.site_of));
        o.ints(&wide(&t.slot));
        o.ints(&wide(&t.nb));
        o.complex(
            &st.gauge
                .links
                .iter()
                .flat_map(|u| u.0.concat())
                .collect::<Vec<_>>(),
        );
        assert_eq!(st.terms.is_some(), with_blocks);
        let mut blocks = vec![0.0; st.terms.map_or(0, |t| t.volume() * SITE_BLOCK_VALUES)];
        if let Some(terms) = st.terms {
            site_blocks(terms, 0, &mut blocks);
        }
        let blocks: Vec<C64> = blocks
            .chunks_exact(2)
            .map(|c| C64::new(c[0], c[1]))
            .collect();
        o.complex(&blocks);
        o.complex(&t.proj);
        o.complex(&[C64::new(st.kappa, 0.0)]);
        let host = galerkin(st, &p).expect("galerkin");
        o.complex(&host.site);
        o.complex(&host.hops);
    }
    // The prolongator made on the device (the end of kernels/mg_galerkin.cu): the
    // near-null vectors in 3.0's order, one after the other; the host's result is the
    // device-order prolongator written first.
    let in_order: Vec<C64> = vectors.iter().flat_map(|f| to_device(f)).collect();
    o.complex(&in_order);
    std::fs::File::create(&args[6])
        .and_then(|mut f| f.write_all(&o.0))
        .expect("writing the dump");
}
