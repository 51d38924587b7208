//! `qcd-solve floor --dims 16,16,16,32`: the fast path (kernel 3.0) against its DRAM
//! floors, measured as ratios in one run. B is the streaming triad on the same device,
//! the faster of one reading before the rows and one after; each row times `repeat`
//! back-to-back calls (after a warm-up: `STREAM_WARM` for the stream-launched rows) with
//! the host clock around a synchronised batch, and divides by the time the row's floor
//! bytes take at B. Floors (each field read or written once, conventions.md):
//!
//! - dslash, full lattice: 4 links + 1 input + 1 output spinor per site: 960 B/site in
//!   double with 18 reals per link, 768 with 12, 640 with 8; half that in single; in half
//!   (spinors of 24 16-bit integers and an f32 norm, 52 B, with 16-bit links) 144 + 104
//!   = 248 with 18 (float links with 8 reals; no fused CR row: half-double iterates
//!   through the generic solver);
//! - Schur operator M_ee on an even field: two half-lattice hops, each reading every link
//!   (the odd outputs need the even sites' backward links and their own forward ones),
//!   plus five half-lattice spinors (x_e, tmp_o written and read, x_e again, out);
//! - one fused CR iteration on the full lattice: a dslash plus two BLAS passes of six
//!   spinors each (xr: x, p, r, Ap read, x, r written; p: r, Ar, p, Ap read, p, Ap
//!   written): 960 + 2 * 6 * 192 = 3264 B/site in double;
//! - one fused CR iteration even-odd (the seed problem's fastest options iterate so): the
//!   Schur operator plus the same two passes over half-lattice spinors:
//!   624 + 6 * 96 = 1200 B/site (of the full lattice) in single with 12 reals;
//! - one fused BiCGStab iteration even-odd (the seed problem's fastest solve): two Schur
//!   operators and its five passes over half-lattice spinors (alpha:
//!   r0, v read; s: r, v read, r written; omega: t, r read; update: x, p, r, t, r0 read,
//!   x, r written; p: p, r, v read, p written: 18, i.e. 9 full-lattice spinors):
//!   2 * 624 + 9 * 96 = 2112 B/site in single with 12 reals.

mod batch;
mod model;
mod timing;

pub use self::batch::{batch_table, measure_batch, BatchRow, BATCH_COUNTS};
pub use self::model::{
    bicgstab_iteration_eo_floor, clover_floor, clover_reals, cr_iteration_eo_floor,
    cr_iteration_floor, dslash_floor, schur_floor, target, RowKind, CLOVER_CSW, CLOVER_MU,
};
use self::timing::{fast_backend, field_of, hint_name, time_apply, time_batch, STREAM_WARM};
use crate::backend::cuda::core::tune;
use crate::backend::cuda::{CudaBackend, CudaOptions, Reconstruct, StencilVersion};
use crate::backend::prelude::*;
use crate::backend::{CrScalars, Layout, Operator, Precision, Subset};
use crate::error::{Error, Result};
use crate::field::{GaugeField, SpinorField, C64};
use crate::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use crate::report::TRIAD_BYTES;

#[derive(Clone, Debug, serde::Serialize)]
pub struct FloorRow {
    pub what: String,
    pub bytes_per_site: f64,
    pub microseconds: f64,
    pub floor_microseconds: f64,
    pub ratio: f64,
    /// The bound on the ratio, where there is one.
    pub target: Option<f64>,
    /// What the row chose (the full dslash: its link hint), or empty.
    pub note: String,
}

pub fn measure(
    dims: &[usize],
    repeat: usize,
    block: Option<usize>,
    clover: bool,
) -> Result<(f64, Vec<FloorRow>)> {
    if dims.len() != 4 {
        return Err(Error::invalid(
            "--dims",
            format!("needs 4 extents, got {dims:?}"),
        ));
    }
    let l = Lattice::new([dims[0], dims[1], dims[2], dims[3]], DEFAULT_BOUNDARY)?;
    let v = l.volume() as f64;
    let gauge = GaugeField::random(&l, 2013);
    let psi = SpinorField::random(l.volume(), 5, 0);
    let kappa = 0.124;
    // The triad before and after the rows; B is the faster of the two, so that a slow
    // first reading (measured: 2513 GB/s against 2870 in the next process) cannot put
    // rows below their floor.
    let triad_first = crate::backend::cuda::triad_bandwidth(TRIAD_BYTES)?;
    // (row, floor bytes per site, seconds, target): made FloorRows once B is known.
    let mut timed = Vec::new();
    let mut push = |what: String, bytes: f64, secs: f64, target: Option<f64>, note: String| {
        timed.push((what, bytes, secs, target, note))
    };
    for (ri, reconstruct) in Reconstruct::ALL.into_iter().enumerate() {
        let mut be = fast_backend(&gauge, kappa, reconstruct, block)?;
        let rec = reconstruct.reals();
        let full = be.upload(&psi)?;
        for prec in [Precision::Double, Precision::Single, Precision::Half] {
            let lf = Layout::new(Subset::Full, prec);
            let inp = field_of(&mut be, &full, lf)?;
            let mut out = be.alloc_layout(lf)?;
            // The full dslash with its link hint chosen as the tuner chooses it on a full
            // lattice (tune::link_hint_candidates: each hint timed at this block, the
            // fastest kept), then timed in a batch of its own, so that the row is not the
            // smallest of several readings.
            let base = be.geometry();
            let mut best = (f64::INFINITY, base);
            let mut sweep = Vec::new();
            for g in std::iter::once(base).chain(tune::link_hint_candidates(
                StencilVersion::V3_0,
                base,
                true,
            )) {
                be.set_geometry(g)?;
                let t = time_batch(&mut be, repeat, STREAM_WARM, &mut |be| {
                    be.apply(Operator::G5D, &mut out, &inp)
                })?;
                sweep.push(format!("{} {:.2}", hint_name(g), 1e6 * t));
                if t < best.0 {
                    best = (t, g);
                }
            }
            be.set_geometry(best.1)?;
            let t = time_batch(&mut be, repeat, STREAM_WARM, &mut |be| {
                be.apply(Operator::G5D, &mut out, &inp)
            })?;
            be.set_geometry(base)?;
            push(
                format!("dslash full {prec:?} r{rec}").to_lowercase(),
                dslash_floor(rec, prec),
                t,
                target(RowKind::Dslash, rec, prec),
                format!(
                    "links past L1: {}; the sweep, us: {}",
                    hint_name(best.1),
                    sweep.join(", ")
                ),
            );
            let le = Layout::new(Subset::Even, prec);
            let ein = field_of(&mut be, &full, le)?;
            let t = time_apply(&mut be, Operator::G5Schur, &ein, repeat)?;
            push(
                format!("schur even-odd {prec:?} r{rec}").to_lowercase(),
                schur_floor(rec, prec),
                t,
                target(RowKind::Schur, rec, prec),
                String::new(),
            );
            if prec == Precision::Half {
                // Half-double iterates through the generic solver: no fused CR row.
                continue;
            }
            // One fused CR iteration (kept running: eps 0, no iteration limit reached),
            // on the full lattice (D) and even-odd (the Schur operator on even fields).
            for (eo, op, layout) in [(false, Operator::G5D, lf), (true, Operator::G5Schur, le)] {
                let source = field_of(&mut be, &full, layout)?;
                let key =
                    0xF100 + 4 * ri as u64 + 2 * eo as u64 + (prec == Precision::Single) as u64;
                let t = time_cr_iteration(&mut be, op, &source, key, repeat)?;
                let (what, floor, kind) = if eo {
                    (
                        "CR iteration fused even-odd",
                        cr_iteration_eo_floor(rec, prec),
                        RowKind::CrEvenOdd,
                    )
                } else {
                    (
                        "CR iteration fused",
                        cr_iteration_floor(rec, prec),
                        RowKind::CrFull,
                    )
                };
                push(
                    format!("{what} {prec:?} r{rec}").to_lowercase(),
                    floor,
                    t,
                    target(kind, rec, prec),
                    String::new(),
                );
            }
            // One fused BiCGStab iteration even-odd (on the Schur form of D, BiCGStab's).
            let source = field_of(&mut be, &full, le)?;
            let key = 0xF200 + 2 * ri as u64 + (prec == Precision::Single) as u64;
            let t = time_bicgstab_iteration(&mut be, &source, key, repeat)?;
            push(
                format!("bicgstab iteration fused even-odd {prec:?} r{rec}").to_lowercase(),
                bicgstab_iteration_eo_floor(rec, prec),
                t,
                target(RowKind::BicgstabEvenOdd, rec, prec),
                String::new(),
            );
        }
    }
    if clover {
        clover_rows(&gauge, &psi, kappa, repeat, block, &mut push)?;
    }
    let triad = triad_first.max(crate::backend::cuda::triad_bandwidth(TRIAD_BYTES)?);
    let rows = timed
        .into_iter()
        .map(|(what, bytes, secs, target, note)| {
            let floor_us = 1e6 * bytes * v / (triad * 1e9);
            FloorRow {
                what,
                bytes_per_site: bytes,
                microseconds: 1e6 * secs,
                floor_microseconds: floor_us,
                ratio: 1e6 * secs / floor_us,
                target,
                note,
            }
        })
        .collect();
    Ok((triad, rows))
}

/// The clover rows (`clover_floor`), 18 and 12 real links, every precision: the dslash and
/// Schur operator with the clover term (c_sw `CLOVER_CSW`) and with the twisted clover
/// (mu `CLOVER_MU` as well), and, with the clover term, the fused CR and BiCGStab
/// iterations even-odd (double and single). At the backend's default launch geometry.
fn clover_rows(
    gauge: &GaugeField,
    psi: &SpinorField,
    kappa: f64,
    repeat: usize,
    block: Option<usize>,
    push: &mut dyn FnMut(String, f64, f64, Option<f64>, String),
) -> Result<()> {
    for (ri, reconstruct) in [Reconstruct::R18, Reconstruct::R12].into_iter().enumerate() {
        let mut be = fast_backend(gauge, kappa, reconstruct, block)?;
        let rec = reconstruct.reals();
        let full = be.upload(psi)?;
        for mu in [0.0, CLOVER_MU] {
            let action = crate::dirac::Action {
                kappa,
                csw: CLOVER_CSW,
                mu,
            };
            be.set_action(gauge, &action)?;
            let twist = mu != 0.0;
            let name = if twist { "twisted-clover" } else { "clover" };
            for prec in [Precision::Double, Precision::Single, Precision::Half] {
                let inp = field_of(&mut be, &full, Layout::new(Subset::Full, prec))?;
                let t = time_apply(&mut be, Operator::G5D, &inp, repeat)?;
                let kinds = if twist {
                    (None, None)
                } else {
                    (
                        target(RowKind::CloverDslash, rec, prec),
                        target(RowKind::CloverSchur, rec, prec),
                    )
                };
                let wilson = dslash_floor(rec, prec);
                push(
                    format!("dslash {name} full {prec:?} r{rec}").to_lowercase(),
                    clover_floor(wilson, RowKind::CloverDslash, twist, prec),
                    t,
                    kinds.0,
                    String::new(),
                );
                let ein = field_of(&mut be, &full, Layout::new(Subset::Even, prec))?;
                let t = time_apply(&mut be, Operator::G5Schur, &ein, repeat)?;
                let wilson = schur_floor(rec, prec);
                push(
                    format!("schur {name} even-odd {prec:?} r{rec}").to_lowercase(),
                    clover_floor(wilson, RowKind::CloverSchur, twist, prec),
                    t,
                    kinds.1,
                    String::new(),
                );
                if twist || prec == Precision::Half {
                    continue;
                }
                let single = (prec == Precision::Single) as u64;
                let key = 0xF300 + 2 * ri as u64 + single;
                let t = time_cr_iteration(&mut be, Operator::G5Schur, &ein, key, repeat)?;
                push(
                    format!("CR iteration fused even-odd {name} {prec:?} r{rec}").to_lowercase(),
                    clover_floor(
                        cr_iteration_eo_floor(rec, prec),
                        RowKind::CrEvenOdd,
                        twist,
                        prec,
                    ),
                    t,
                    None,
                    String::new(),
                );
                let key = 0xF400 + 2 * ri as u64 + single;
                let t = time_bicgstab_iteration(&mut be, &ein, key, repeat)?;
                push(
                    format!("bicgstab iteration fused even-odd {name} {prec:?} r{rec}")
                        .to_lowercase(),
                    clover_floor(
                        bicgstab_iteration_eo_floor(rec, prec),
                        RowKind::BicgstabEvenOdd,
                        twist,
                        prec,
                    ),
                    t,
                    None,
                    String::new(),
                );
            }
        }
    }
    Ok(())
}

/// Iterations per timed batch of the fused BiCGStab row; each batch starts afresh from
/// the source (its start pass, 5 half-lattice spinors and a sum, adds under 3% to the
/// batch's 10 x 18 spinors and 20 Schur operators), so that no batch runs into a
/// breakdown or the rounding floor.
const BI_BATCH: usize = 10;

/// Seconds per fused BiCGStab iteration of the Schur form of D from `source`, in graphs
/// of `BI_BATCH` iterations under `key`, each batch from the start (eps 0).
fn time_bicgstab_iteration(
    be: &mut CudaBackend,
    source: &crate::backend::cuda::DeviceSpinor,
    key: u64,
    repeat: usize,
) -> Result<f64> {
    use crate::backend::BiScalars;
    let layout = be.layout(source);
    let mut f = (0..6)
        .map(|_| be.alloc_layout(layout))
        .collect::<Result<Vec<_>>>()?;
    let [x, r, r0, p, v, t] = &mut f[..] else {
        unreachable!("six fields")
    };
    let s = BiScalars {
        nr: be.norm2(source)?,
        eps: 0.0,
        max_iter: (BI_BATCH * (repeat.div_ceil(BI_BATCH) + 2)) as u64,
        active: true,
        ..Default::default()
    };
    let mut st = be.bi_state(&s)?;
    let op = Operator::Schur;
    let secs = time_batch(be, repeat.div_ceil(BI_BATCH), 1, &mut |be| {
        be.bi_set(&mut st, &s)?;
        be.bi_start(&mut st, source, x, r, r0, p)?;
        be.repeat(key, BI_BATCH, &mut |be: &mut CudaBackend| {
            let fields = [&mut *x, &mut *r, &mut *r0, &mut *p, &mut *v, &mut *t];
            crate::solver::bicgstab::iteration(be, op, &mut st, fields)
        })
    })? / BI_BATCH as f64;
    be.forget_graphs();
    let done = be.bi_get(&st)?;
    if !done.active || done.iter != BI_BATCH as u64 {
        return Err(Error::CheckFailed(format!(
            "the timed BiCGStab iterations stopped early (iteration {}, nr {:e}, broken {})",
            done.iter, done.nr, done.broken
        )));
    }
    Ok(secs)
}

/// The most CR iterations a row times: one recurrence runs them all (a restart per graph
/// would add an operator application to every 10 iterations timed), and on the random
/// test field its residual underflowed to NaN after 390 (`--repeat 400`, 32^3x64, H200).
const CR_TIMED_MAX: usize = 200;

/// Seconds per fused CR iteration of `op` from `source` (its layout), timed in graphs of
/// 10 iterations under `key`, kept running (eps 0, no iteration limit reached): `repeat`
/// iterations, at most `CR_TIMED_MAX`.
fn time_cr_iteration(
    be: &mut CudaBackend,
    op: Operator,
    source: &crate::backend::cuda::DeviceSpinor,
    key: u64,
    repeat: usize,
) -> Result<f64> {
    let repeat = repeat.min(CR_TIMED_MAX);
    let layout = be.layout(source);
    let mut x = be.alloc_layout(layout)?;
    let mut r = be.alloc_layout(layout)?;
    be.copy(&mut r, source)?;
    let mut p = be.alloc_layout(layout)?;
    be.copy(&mut p, source)?;
    let mut ap = be.alloc_layout(layout)?;
    be.apply(op, &mut ap, &p)?;
    let mut ar = be.alloc_layout(layout)?;
    let nr = be.norm2(&r)?;
    let apap = be.norm2(&ap)?;
    let rar = be.dot(&r, &ap)?;
    let s = CrScalars {
        rar,
        apap,
        nr,
        eps: 0.0,
        alpha: rar.conj() / apap,
        beta: C64::new(0.0, 0.0),
        iter: 0,
        max_iter: (4 * repeat + 8) as u64,
        active: true,
    };
    let mut st = be.cr_state(&s)?;
    let k = 10;
    let t = time_batch(be, repeat.div_ceil(k), 1, &mut |be| {
        be.repeat(key, k, &mut |be: &mut CudaBackend| {
            be.cr_update_xr(&mut st, &p, &ap, &mut x, &mut r)?;
            be.cr_apply_dot(op, &mut st, &r, &mut ar)?;
            be.cr_update_p(&mut st, &r, &ar, &mut p, &mut ap)
        })
    })? / k as f64;
    be.forget_graphs();
    let done = be.cr_get(&st)?;
    if !done.active {
        return Err(Error::CheckFailed(format!(
            "the timed CR iterations stopped early (iteration {}, nr {:e})",
            done.iter, done.nr
        )));
    }
    Ok(t)
}

/// The decomposition's cost on this one GPU: the full double D split in two
/// along t (both halves on the GPU as threads, faces by device copies), against the
/// undecomposed operator in the same run, r18 and r12; target <= 1.10. Needs an even
/// half t extent.
pub fn halo_rows(
    dims: &[usize],
    repeat: usize,
) -> Result<Vec<(bool, crate::backend::cuda::HaloCost)>> {
    if dims.len() != 4 || !dims[3].is_multiple_of(4) {
        return Err(Error::invalid(
            "--dims",
            format!("the halo cost splits t in two halves of even extent: {dims:?}"),
        ));
    }
    let global = [dims[0], dims[1], dims[2], dims[3]];
    [false, true]
        .into_iter()
        .map(|r12| {
            let opts = CudaOptions {
                version: StencilVersion::V3_0,
                reconstruct: if r12 {
                    Reconstruct::R12
                } else {
                    Reconstruct::R18
                },
                ..CudaOptions::default()
            };
            crate::backend::cuda::time_decomposed_apply(global, [1, 1, 1, 2], &opts, repeat)
                .map(|c| (r12, c))
        })
        .collect()
}

/// The halo cost rows as text.
pub fn halo_table(dims: &[usize], rows: &[(bool, crate::backend::cuda::HaloCost)]) -> String {
    let mut s = format!(
        "decomposition on one GPU, {dims:?} split in 2 along t (full D, double): decomposed / undecomposed time\n{:<30} {:>10} {:>10} {:>7} {}\n",
        "row", "whole us", "split us", "ratio", "target"
    );
    for (r12, c) in rows {
        let target = 1.10;
        s.push_str(&format!(
            "{:<30} {:>10.2} {:>10.2} {:>7.3} {}\n",
            format!("halo cost r{}", if *r12 { 12 } else { 18 }),
            1e3 * c.undecomposed_ms,
            1e3 * c.decomposed_ms,
            c.ratio,
            if c.ratio <= target {
                format!("<= {target}: met")
            } else {
                format!(
                    "<= {target}: MISSED by {:.0}%",
                    100.0 * (c.ratio / target - 1.0)
                )
            }
        ));
    }
    // Rank 0's phases per application (events; the ranks share the GPU).
    for (r12, c) in rows {
        let h = &c.rank0;
        let per = |ms: f64| 1e3 * ms / h.applications.max(1) as f64;
        s.push_str(&format!(
            "  r{}: rank 0 per application, us: pack {:.1}, exchange {:.1}, interior {:.1}, wait {:.1}, exterior {:.1}\n",
            if *r12 { 12 } else { 18 },
            per(h.pack_ms),
            per(h.exchange_ms),
            per(h.interior_ms),
            per(h.wait_ms),
            per(h.exterior_ms)
        ));
    }
    s
}

pub fn table(dims: &[usize], triad: f64, rows: &[FloorRow]) -> String {
    let mut s = format!(
        "kernel 3.0 against its DRAM floors on {dims:?}, triad B = {triad:.0} GB/s (the faster of a triad before and after the rows)\n{:<40} {:>8} {:>10} {:>10} {:>7} {}\n",
        "row", "B/site", "us", "floor us", "ratio", "target"
    );
    for r in rows {
        s.push_str(&format!(
            "{:<40} {:>8.0} {:>10.2} {:>10.2} {:>7.3} {}{}\n",
            r.what,
            r.bytes_per_site,
            r.microseconds,
            r.floor_microseconds,
            r.ratio,
            match r.target {
                Some(t) if r.ratio <= t => format!("<= {t}: met"),
                Some(t) => format!("<= {t}: MISSED by {:.0}%", 100.0 * (r.ratio / t - 1.0)),
                None => String::new(),
            },
            if r.note.is_empty() {
                String::new()
            } else {
                format!(" ({})", r.note)
            }
        ));
    }
    s
}
