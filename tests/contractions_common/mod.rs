//! What tests/contractions.rs builds its expectations from, written independently of
//! `qcd_solve::measure`: the free Wilson propagator as a momentum sum, CPU solves of the
//! 12 columns, 12x12 dense meson traces, the nucleon's Wick contraction index by index,
//! and time-reflected and gauge-transformed fields.

use qcd_solve::backend::cpu::CpuBackend;
use qcd_solve::backend::prelude::*;
use qcd_solve::backend::Operator;
use qcd_solve::field::gamma::{gamma, matmul, SpinMatrix};
use qcd_solve::field::{GaugeField, SpinorField, Su3, C64};
use qcd_solve::geometry::lattice::{Boundary, Lattice};
use qcd_solve::solver::{conjugate_residual, CrParams, StopReason};
use std::f64::consts::PI;

pub const Z: C64 = C64::new(0.0, 0.0);
pub const ONE: C64 = C64::new(1.0, 0.0);
pub type M12 = [[C64; 12]; 12];

pub fn lattice(dims: [usize; 4], time: Boundary) -> Lattice {
    Lattice::new(
        dims,
        [
            Boundary::Periodic,
            Boundary::Periodic,
            Boundary::Periodic,
            time,
        ],
    )
    .unwrap()
}

pub fn identity4() -> SpinMatrix {
    std::array::from_fn(|i| std::array::from_fn(|j| if i == j { ONE } else { Z }))
}

pub fn g5() -> SpinMatrix {
    matmul(&matmul(&gamma(0), &gamma(1)), &matmul(&gamma(2), &gamma(3)))
}

pub fn dagger4(m: &SpinMatrix) -> SpinMatrix {
    std::array::from_fn(|i| std::array::from_fn(|j| m[j][i].conj()))
}

/// The inverse of a 4x4 complex matrix by Gauss-Jordan elimination with row pivoting.
pub fn inverse4(m: &SpinMatrix) -> SpinMatrix {
    let mut a = *m;
    let mut inv = identity4();
    for col in 0..4 {
        let piv = (col..4)
            .max_by(|&i, &j| a[i][col].norm().total_cmp(&a[j][col].norm()))
            .unwrap();
        a.swap(col, piv);
        inv.swap(col, piv);
        let d = a[col][col];
        for j in 0..4 {
            a[col][j] /= d;
            inv[col][j] /= d;
        }
        for r in 0..4 {
            if r != col {
                let f = a[r][col];
                for j in 0..4 {
                    let (ac, ic) = (a[col][j], inv[col][j]);
                    a[r][j] -= f * ac;
                    inv[r][j] -= f * ic;
                }
            }
        }
    }
    inv
}

/// The momenta of the lattice's fermion modes: `2 pi n / L` periodic, `(2 n + 1) pi / L`
/// antiperiodic, n = 0 .. L-1, per direction.
pub fn fermion_momenta(l: &Lattice) -> [Vec<f64>; 4] {
    std::array::from_fn(|mu| {
        let anti = l.boundary[mu] == Boundary::Antiperiodic;
        (0..l.dims[mu])
            .map(|n| (2 * n + anti as usize) as f64 * PI / l.dims[mu] as f64)
            .collect()
    })
}

/// D~(p) of conventions.md's operator on a plane wave e^{ipx} u (U = 1):
/// 1 - kappa sum_mu [(1 - g_mu) e^{i p_mu} + (1 + g_mu) e^{-i p_mu}], inverted.
pub fn free_momentum_propagator(kappa: f64, p: [f64; 4]) -> SpinMatrix {
    let mut d = identity4();
    for (mu, &pm) in p.iter().enumerate() {
        let g = gamma(mu);
        let (fw, bw) = (C64::from_polar(1.0, pm), C64::from_polar(1.0, -pm));
        for i in 0..4 {
            for j in 0..4 {
                let delta = if i == j { ONE } else { Z };
                d[i][j] -= ((delta - g[i][j]) * fw + (delta + g[i][j]) * bw) * kappa;
            }
        }
    }
    inverse4(&d)
}

/// Mode index n = (n0, n1, n2, n3) of the flat list `k` (x fastest).
pub fn mode(l: &Lattice, k: usize) -> [usize; 4] {
    l.coords(k)
}

/// The free propagator's 12 columns for a point source at `x0`, as a momentum sum:
/// S(x, x0) = (1/V) sum_p e^{i p.(x - x0)} S~(p) (x1) 1_colour.
pub fn closed_form_propagator(l: &Lattice, kappa: f64, x0: [usize; 4]) -> Vec<SpinorField> {
    let pm = fermion_momenta(l);
    let v = l.volume();
    let modes: Vec<([f64; 4], SpinMatrix)> = (0..v)
        .map(|k| {
            let n = mode(l, k);
            let p = std::array::from_fn(|mu| pm[mu][n[mu]]);
            (p, free_momentum_propagator(kappa, p))
        })
        .collect();
    let mut cols = vec![SpinorField::zeros(v); 12];
    for x in 0..v {
        let c = l.coords(x);
        let mut s = [[Z; 4]; 4];
        for (p, sp) in &modes {
            let phase: f64 = (0..4)
                .map(|mu| p[mu] * (c[mu] as f64 - x0[mu] as f64))
                .sum();
            let e = C64::from_polar(1.0 / v as f64, phase);
            for i in 0..4 {
                for j in 0..4 {
                    s[i][j] += sp[i][j] * e;
                }
            }
        }
        for sp in 0..4 {
            for cp in 0..3 {
                for si in 0..4 {
                    cols[3 * sp + cp].data[12 * x + 3 * si + cp] = s[si][sp];
                }
            }
        }
    }
    cols
}

/// The 12 columns D^-1 eta for the unit sources at `x0`: CR on g5 D (g5 D x = g5 eta) on
/// the CPU backend, to a relative residual of 1e-12.
pub fn solve_columns(gauge: &GaugeField, kappa: f64, x0: [usize; 4]) -> Vec<SpinorField> {
    let l = &gauge.lattice;
    let mut be = CpuBackend::new(gauge, kappa);
    (0..12)
        .map(|j| {
            let src = SpinorField::point(l, x0, j / 3, j % 3);
            let rhs = be.upload(&src.gamma5()).unwrap();
            let out = conjugate_residual(&mut be, Operator::G5D, &rhs, &CrParams::new(1e-12, 5000))
                .unwrap();
            assert_eq!(out.reason, StopReason::Converged, "column {j}");
            be.download(&out.x).unwrap()
        })
        .collect()
}

/// The propagator at a site as S[s c][s' c'].
pub fn site(prop: &[SpinorField], x: usize) -> M12 {
    std::array::from_fn(|r| std::array::from_fn(|j| prop[j].data[12 * x + r]))
}

pub fn mul12(a: &M12, b: &M12) -> M12 {
    let mut c = [[Z; 12]; 12];
    for i in 0..12 {
        for k in 0..12 {
            if a[i][k] != Z {
                for j in 0..12 {
                    c[i][j] += a[i][k] * b[k][j];
                }
            }
        }
    }
    c
}

/// g (x) 1_colour.
pub fn spin12(g: &SpinMatrix) -> M12 {
    std::array::from_fn(|r| {
        std::array::from_fn(|j| if r % 3 == j % 3 { g[r / 3][j / 3] } else { Z })
    })
}

/// e^{-i p.(x - origin)} for the mode numbers n (p_j = 2 pi n_j / L_j).
pub fn sink_phase(l: &Lattice, x: usize, n: [i64; 3], origin: [usize; 3]) -> C64 {
    let c = l.coords(x);
    let ph: f64 = (0..3)
        .map(|j| 2.0 * PI * n[j] as f64 * (c[j] as f64 - origin[j] as f64) / l.dims[j] as f64)
        .sum();
    C64::from_polar(1.0, -ph)
}

/// The meson correlator tr[G_snk S G_src g5 S^+ g5] summed with the sink phase, by dense
/// 12x12 products, t counted from t0.
pub fn dense_meson(
    l: &Lattice,
    prop: &[SpinorField],
    t0: usize,
    src: &SpinMatrix,
    snk: &SpinMatrix,
    n: [i64; 3],
    origin: [usize; 3],
) -> Vec<C64> {
    let lt = l.dims[3];
    let (gsnk, gsrc, g5) = (spin12(snk), spin12(src), spin12(&g5()));
    let mut c = vec![Z; lt];
    for x in 0..l.volume() {
        let s = site(prop, x);
        let sd: M12 = std::array::from_fn(|i| std::array::from_fn(|j| s[j][i].conj()));
        let a = mul12(&mul12(&gsnk, &s), &gsrc);
        let b = mul12(&mul12(&g5, &sd), &g5);
        let tr: C64 = (0..12)
            .map(|i| (0..12).map(|k| a[i][k] * b[k][i]).sum::<C64>())
            .sum();
        let t = (l.coords(x)[3] + lt - t0) % lt;
        c[t] += tr * sink_phase(l, x, n, origin);
    }
    c
}

/// C(t, p) of the free meson as a momentum sum: 3 / (V3 T^2) sum_k sum_{k4, q4}
/// e^{i (k4 - q4) t} tr[G_snk S~(k) G_src g5 S~(q)^+ g5], q = (k - p, q4) (origin at the
/// source).
pub fn free_meson_momentum_sum(
    l: &Lattice,
    kappa: f64,
    src: &SpinMatrix,
    snk: &SpinMatrix,
    n: [i64; 3],
) -> Vec<C64> {
    let pm = fermion_momenta(l);
    let (lt, d) = (l.dims[3], l.dims);
    let v3 = d[0] * d[1] * d[2];
    let g5m = g5();
    let stilde = |k3: [usize; 3], k4: usize| {
        free_momentum_propagator(kappa, [pm[0][k3[0]], pm[1][k3[1]], pm[2][k3[2]], pm[3][k4]])
    };
    let mut c = vec![Z; lt];
    for k in 0..v3 {
        let k3 = [k % d[0], k / d[0] % d[1], k / (d[0] * d[1])];
        let q3: [usize; 3] =
            std::array::from_fn(|j| (k3[j] as i64 - n[j]).rem_euclid(d[j] as i64) as usize);
        for (t, ct) in c.iter_mut().enumerate() {
            // A_t = sum_k4 e^{i k4 t} S~(k); B_t = sum_q4 e^{-i q4 t} g5 S~(q)^+ g5.
            let mut a = [[Z; 4]; 4];
            let mut b = [[Z; 4]; 4];
            for k4 in 0..lt {
                let sk = stilde(k3, k4);
                let sq = matmul(&matmul(&g5m, &dagger4(&stilde(q3, k4))), &g5m);
                let (ea, eb) = (
                    C64::from_polar(1.0, pm[3][k4] * t as f64),
                    C64::from_polar(1.0, -pm[3][k4] * t as f64),
                );
                for i in 0..4 {
                    for j in 0..4 {
                        a[i][j] += sk[i][j] * ea;
                        b[i][j] += sq[i][j] * eb;
                    }
                }
            }
            let m = matmul(&matmul(&matmul(snk, &a), src), &b);
            *ct += (0..4).map(|i| m[i][i]).sum::<C64>() * (3.0 / (v3 * lt * lt) as f64);
        }
    }
    c
}

/// The permutations of three colours with their signs.
pub const EPS: [([usize; 3], f64); 6] = [
    ([0, 1, 2], 1.0),
    ([1, 2, 0], 1.0),
    ([2, 0, 1], 1.0),
    ([1, 0, 2], -1.0),
    ([0, 2, 1], -1.0),
    ([2, 1, 0], -1.0),
];

/// The nucleon correlator from the Wick contraction of N = eps (u_a^T G d_b) u_c with
/// Nbar = eps (dbar_b' G' ubar_a'^T) ubar_c', G = C g5, C = g2 g4, G' = g4 G^+ g4^T,
/// index by index:
/// G_{al al'} = eps eps' G_{be ga} G'_{be' ga'} S^{bb'}_{ga be'}
///              [S^{aa'}_{be ga'} S^{cc'}_{al al'} - S^{ac'}_{be al'} S^{ca'}_{al ga'}]
/// (the second term the exchange of the two u quarks, Fermi sign -1), then tr[P G],
/// with the timeslices past the edge multiplied by `wrap`.
pub fn wick_nucleon(
    l: &Lattice,
    prop: &[SpinorField],
    t0: usize,
    n: [i64; 3],
    origin: [usize; 3],
    proj: &SpinMatrix,
    wrap: f64,
) -> Vec<C64> {
    let lt = l.dims[3];
    let cg5 = matmul(&matmul(&gamma(1), &gamma(3)), &g5());
    let g4 = gamma(3);
    let g4t: SpinMatrix = std::array::from_fn(|i| std::array::from_fn(|j| g4[j][i]));
    let cbar = matmul(&matmul(&g4, &dagger4(&cg5)), &g4t);
    let mut c = vec![Z; lt];
    for x in 0..l.volume() {
        let s = site(prop, x);
        let sm = |a: usize, ap: usize, i: usize, j: usize| s[3 * i + a][3 * j + ap];
        let mut g = [[Z; 4]; 4];
        for &([a, b, cc], e1) in &EPS {
            for &([ap, bp, cp], e2) in &EPS {
                for be in 0..4 {
                    for ga in 0..4 {
                        if cg5[be][ga] == Z {
                            continue;
                        }
                        for bep in 0..4 {
                            for gap in 0..4 {
                                if cbar[bep][gap] == Z {
                                    continue;
                                }
                                let w =
                                    cg5[be][ga] * cbar[bep][gap] * sm(b, bp, ga, bep) * (e1 * e2);
                                for al in 0..4 {
                                    for alp in 0..4 {
                                        g[al][alp] += w
                                            * (sm(a, ap, be, gap) * sm(cc, cp, al, alp)
                                                - sm(a, cp, be, alp) * sm(cc, ap, al, gap));
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        let tr: C64 = (0..4)
            .map(|i| (0..4).map(|j| proj[i][j] * g[j][i]).sum::<C64>())
            .sum();
        let xt = l.coords(x)[3];
        let t = (xt + lt - t0) % lt;
        let sign = if xt < t0 { wrap } else { 1.0 };
        c[t] += tr * sink_phase(l, x, n, origin) * sign;
    }
    c
}

/// Per timeslice from t0, sum over its sites of |S(x)|_F^p: the magnitude that bounds a
/// meson (p = 2: the pion itself) or a nucleon (p = 3) correlator.
pub fn magnitude(l: &Lattice, prop: &[SpinorField], t0: usize, p: i32) -> Vec<f64> {
    let lt = l.dims[3];
    let mut m = vec![0.0; lt];
    for x in 0..l.volume() {
        let f: f64 = prop
            .iter()
            .map(|c| (0..12).map(|r| c.data[12 * x + r].norm_sqr()).sum::<f64>())
            .sum();
        m[(l.coords(x)[3] + lt - t0) % lt] += f.sqrt().powi(p);
    }
    m
}

/// The field reflected in time about timeslice t0, t -> r(t) = (2 t0 - t) mod LT:
/// U'_i(x, t) = U_i(x, r(t)), U'_4(x, t) = U_4(x, r(t) - 1)^+.
pub fn time_reflected(u: &GaugeField, t0: usize) -> GaugeField {
    let l = &u.lattice;
    let lt = l.dims[3];
    let mut out = u.clone();
    for x in 0..l.volume() {
        let mut c = l.coords(x);
        let r = (2 * t0 + 2 * lt - c[3]) % lt;
        c[3] = r;
        let xr = l.index(c);
        c[3] = (r + lt - 1) % lt;
        let xrm = l.index(c);
        for mu in 0..3 {
            out.links[4 * x + mu] = *u.link(xr, mu);
        }
        out.links[4 * x + 3] = u.link(xrm, 3).dagger();
    }
    out
}

/// A random gauge transformation, one SU(3) matrix a site from its own stream.
pub fn random_transformation(l: &Lattice, seed: u64) -> Vec<Su3> {
    (0..l.volume())
        .map(|x| Su3::random(&mut qcd_solve::rng::Stream::new(seed, x as u64)))
        .collect()
}
