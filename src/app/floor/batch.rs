//! `floor --batch`: the batched operator (`CudaBackend::apply_batch`, one launch over N
//! right-hand sides) against one right-hand side at a time, in one run. For N = 1, 4 and
//! 12 (`BATCH_COUNTS`), the dslash (g5 D, full fields) and the Schur operator (g5 M_ee,
//! even fields), double and single, 18 and 12 real links, Wilson and (unless `--wilson`)
//! the clover term: the time of one batched application, its time per right-hand side,
//! the batch's DRAM floor (`batch_floor`: the links and the clover arrays once a batch,
//! each right-hand side's spinors once) and the ratio to the floor, and the ratio of the
//! time per right-hand side to one `apply` of the same operator timed on the same backend
//! just before (the one-right-hand-side launch at the backend's launch geometry). The
//! target: the Wilson dslash at N = 12 in <= 0.6 of the one-right-hand-side time per
//! right-hand side (at 32^3x64). Each (operator, precision) also checks the last column
//! of its largest batch against `apply` on it (relative difference at most 1e-12 in
//! double, 1e-5 in single), so that a fast row cannot be a wrong one.

use super::model::{clover_real_bytes, clover_reals, dslash_floor, schur_floor, spinor_bytes};
use super::model::{RowKind, CLOVER_CSW};
use super::timing::{fast_backend, field_of, time_apply, time_batch, STREAM_WARM};
use crate::backend::cuda::{CudaBackend, DeviceSpinor, Reconstruct};
use crate::backend::prelude::*;
use crate::backend::{Layout, Operator, Precision, Subset};
use crate::error::{Error, Result};
use crate::field::{GaugeField, SpinorField, C64};
use crate::geometry::lattice::{Lattice, DEFAULT_BOUNDARY};
use crate::report::TRIAD_BYTES;

/// The right-hand sides of the batch rows.
pub const BATCH_COUNTS: [usize; 3] = [1, 4, 12];

/// The bound on the time per right-hand side of the Wilson dslash batched 12 at a time,
/// as a fraction of one right-hand side's time.
pub const BATCH_TARGET: f64 = 0.6;

/// One batch row.
#[derive(Clone, Debug, serde::Serialize)]
pub struct BatchRow {
    pub what: String,
    pub rhs: usize,
    /// The batch's floor, bytes per lattice site (`batch_floor`).
    pub bytes_per_site: f64,
    /// One batched application, and per right-hand side.
    pub microseconds: f64,
    pub per_rhs_microseconds: f64,
    pub floor_microseconds: f64,
    pub ratio: f64,
    /// One application of the operator to one right-hand side in the same run.
    pub single_microseconds: f64,
    /// per_rhs_microseconds / single_microseconds.
    pub ratio_to_single: f64,
    pub target: Option<f64>,
    pub note: String,
}

/// The batch's floor in bytes per lattice site: the one-right-hand-side row's links (and,
/// with `clover`, the clover arrays) once, its spinors `rhs` times. The dslash: 4 links
/// and 2 spinors (in, out) a site; the Schur operator: both halves' links and 2.5 spinors
/// (model.rs).
pub fn batch_floor(
    schur: bool,
    reconstruct: usize,
    precision: Precision,
    rhs: usize,
    clover: bool,
) -> f64 {
    let (one, spinors, kind) = if schur {
        (
            schur_floor(reconstruct, precision),
            2.5,
            RowKind::CloverSchur,
        )
    } else {
        (
            dslash_floor(reconstruct, precision),
            2.0,
            RowKind::CloverDslash,
        )
    };
    let spinor = spinors * spinor_bytes(precision);
    let site = if clover {
        clover_reals(kind, false) * clover_real_bytes(precision) as f64
    } else {
        0.0
    };
    one - spinor + site + rhs as f64 * spinor
}

/// `BATCH_TARGET` for the Wilson dslash at 12 right-hand sides, double and single, 18 and
/// 12 reals; no bound on the others.
pub fn batch_target(
    schur: bool,
    clover: bool,
    reconstruct: usize,
    precision: Precision,
    rhs: usize,
) -> Option<f64> {
    let bounded = !schur
        && !clover
        && rhs == 12
        && matches!(reconstruct, 12 | 18)
        && precision != Precision::Half;
    bounded.then_some(BATCH_TARGET)
}

/// The batch rows on a random field of `dims` (kappa 0.124), and the triad B (the faster
/// of one before and one after the rows).
pub fn measure_batch(
    dims: &[usize],
    repeat: usize,
    block: Option<usize>,
    clover: bool,
) -> Result<(f64, Vec<BatchRow>)> {
    if dims.len() != 4 {
        return Err(Error::invalid(
            "--dims",
            format!("needs 4 extents, got {dims:?}"),
        ));
    }
    let l = Lattice::new([dims[0], dims[1], dims[2], dims[3]], DEFAULT_BOUNDARY)?;
    let gauge = GaugeField::random(&l, 2013);
    let kappa = 0.124;
    let triad_first = crate::backend::cuda::triad_bandwidth(TRIAD_BYTES)?;
    let mut timed = Vec::new();
    for reconstruct in [Reconstruct::R18, Reconstruct::R12] {
        let mut be = fast_backend(&gauge, kappa, reconstruct, block)?;
        let columns = source_columns(&mut be, &l)?;
        let actions: &[bool] = if clover { &[false, true] } else { &[false] };
        for &with_clover in actions {
            if with_clover {
                let action = crate::dirac::Action {
                    kappa,
                    csw: CLOVER_CSW,
                    mu: 0.0,
                };
                be.set_action(&gauge, &action)?;
            }
            for prec in [Precision::Double, Precision::Single] {
                for schur in [false, true] {
                    let form = Form {
                        schur,
                        clover: with_clover,
                        reconstruct: reconstruct.reals(),
                        precision: prec,
                    };
                    form.time(&mut be, &columns, repeat, &mut timed)?;
                }
            }
        }
    }
    let triad = triad_first.max(crate::backend::cuda::triad_bandwidth(TRIAD_BYTES)?);
    let v = l.volume() as f64;
    let rows = timed.into_iter().map(|t| t.row(triad, v)).collect();
    Ok((triad, rows))
}

/// `max(BATCH_COUNTS)` full double fields on the device, each a different combination of
/// two random fields (so that no two right-hand sides are equal).
fn source_columns(be: &mut CudaBackend, l: &Lattice) -> Result<Vec<DeviceSpinor>> {
    let a = be.upload(&SpinorField::random(l.volume(), 5, 0))?;
    let b = be.upload(&SpinorField::random(l.volume(), 6, 0))?;
    let n = *BATCH_COUNTS.iter().max().unwrap_or(&1);
    (0..n)
        .map(|k| {
            let mut c = be.alloc()?;
            be.copy(&mut c, &a)?;
            be.axpy(C64::new(0.25 * k as f64, -0.5), &b, &mut c)?;
            Ok(c)
        })
        .collect()
}

/// One operator, site term, link form and precision of the batch rows.
struct Form {
    schur: bool,
    clover: bool,
    reconstruct: usize,
    precision: Precision,
}

/// A timed row before the triad is known.
struct Timed {
    what: String,
    rhs: usize,
    bytes: f64,
    secs: f64,
    single_secs: f64,
    target: Option<f64>,
    note: String,
}

impl Timed {
    fn row(self, triad: f64, volume: f64) -> BatchRow {
        let us = 1e6 * self.secs;
        let per_rhs = us / self.rhs as f64;
        let single = 1e6 * self.single_secs;
        let floor = 1e6 * self.bytes * volume / (triad * 1e9);
        BatchRow {
            what: self.what,
            rhs: self.rhs,
            bytes_per_site: self.bytes,
            microseconds: us,
            per_rhs_microseconds: per_rhs,
            floor_microseconds: floor,
            ratio: us / floor,
            single_microseconds: single,
            ratio_to_single: per_rhs / single,
            target: self.target,
            note: self.note,
        }
    }
}

impl Form {
    fn op(&self) -> Operator {
        if self.schur {
            Operator::G5Schur
        } else {
            Operator::G5D
        }
    }

    fn name(&self, rhs: usize) -> String {
        let what = if self.schur { "schur" } else { "dslash" };
        let clover = if self.clover { " clover" } else { "" };
        format!(
            "{what}{clover} batch {rhs} {:?} r{}",
            self.precision, self.reconstruct
        )
        .to_lowercase()
    }

    /// The one-right-hand-side time, then each batch's, pushed to `timed`; then the
    /// largest batch's last column checked against `apply`.
    fn time(
        &self,
        be: &mut CudaBackend,
        columns: &[DeviceSpinor],
        repeat: usize,
        timed: &mut Vec<Timed>,
    ) -> Result<()> {
        let subset = if self.schur {
            Subset::Even
        } else {
            Subset::Full
        };
        let layout = Layout::new(subset, self.precision);
        let op = self.op();
        let inps = columns
            .iter()
            .map(|c| field_of(be, c, layout))
            .collect::<Result<Vec<_>>>()?;
        let mut outs = (0..inps.len())
            .map(|_| be.alloc_layout(layout))
            .collect::<Result<Vec<_>>>()?;
        let single_secs = time_apply(be, op, &inps[0], repeat)?;
        let mut last = 0;
        for n in BATCH_COUNTS {
            let secs = time_batch(be, repeat, STREAM_WARM, &mut |be| {
                let mut o: Vec<_> = outs[..n].iter_mut().collect();
                let i: Vec<_> = inps[..n].iter().collect();
                be.apply_batch(op, &mut o, &i)
            })?;
            timed.push(Timed {
                what: self.name(n),
                rhs: n,
                bytes: batch_floor(self.schur, self.reconstruct, self.precision, n, self.clover),
                secs,
                single_secs,
                target: batch_target(self.schur, self.clover, self.reconstruct, self.precision, n),
                note: String::new(),
            });
            last = n;
        }
        let rel = self.check_column(be, &inps[last - 1], &mut outs[last - 1])?;
        if let Some(row) = timed.last_mut() {
            row.note = format!("column {} vs apply: {rel:.1e}", last - 1);
        }
        Ok(())
    }

    /// The relative difference of a batch's column `out` (from `inp`) to `apply` on
    /// `inp` alone (a device reduction); an error beyond 1e-12 (double) or 1e-5 (single).
    fn check_column(
        &self,
        be: &mut CudaBackend,
        inp: &DeviceSpinor,
        out: &mut DeviceSpinor,
    ) -> Result<f64> {
        let mut one = be.alloc_layout(be.layout(inp))?;
        be.apply(self.op(), &mut one, inp)?;
        let norm = be.norm2(&one)?;
        be.axpy(C64::new(-1.0, 0.0), &one, out)?;
        let rel = (be.norm2(out)? / norm).sqrt();
        let tol = if self.precision == Precision::Double {
            1e-12
        } else {
            1e-5
        };
        if rel.is_nan() || rel > tol {
            return Err(Error::CheckFailed(format!(
                "{}: a batch column differs from apply by {rel:e} (more than {tol:e})",
                self.name(BATCH_COUNTS[BATCH_COUNTS.len() - 1])
            )));
        }
        Ok(rel)
    }
}

/// The batch rows as text.
pub fn batch_table(dims: &[usize], triad: f64, rows: &[BatchRow]) -> String {
    let mut s = format!(
        "the batched operator (apply_batch: N right-hand sides in one launch) on {dims:?}, triad B = {triad:.0} GB/s;\nfloor: links (and clover arrays) once a batch, spinors once a right-hand side; x single: us/rhs over one right-hand side's apply in this run\n{:<32} {:>3} {:>8} {:>10} {:>9} {:>10} {:>6} {:>9} {:>8} {}\n",
        "row", "N", "B/site", "batch us", "us/rhs", "floor us", "ratio", "single us", "x single", "target"
    );
    for r in rows {
        s.push_str(&format!(
            "{:<32} {:>3} {:>8.0} {:>10.2} {:>9.2} {:>10.2} {:>6.3} {:>9.2} {:>8.3} {}{}\n",
            r.what,
            r.rhs,
            r.bytes_per_site,
            r.microseconds,
            r.per_rhs_microseconds,
            r.floor_microseconds,
            r.ratio,
            r.single_microseconds,
            r.ratio_to_single,
            match r.target {
                Some(t) if r.ratio_to_single <= t => format!("x single <= {t}: met"),
                Some(t) => format!(
                    "x single <= {t}: MISSED by {:.0}%",
                    100.0 * (r.ratio_to_single / t - 1.0)
                ),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::floor::model::clover_floor;

    #[test]
    fn one_right_hand_side_is_the_single_rows_floor() {
        // A batch of one moves what one application moves (model.rs's floors).
        for p in [Precision::Double, Precision::Single] {
            for r in [18, 12] {
                assert_eq!(batch_floor(false, r, p, 1, false), dslash_floor(r, p));
                assert_eq!(batch_floor(true, r, p, 1, false), schur_floor(r, p));
                let d = clover_floor(dslash_floor(r, p), RowKind::CloverDslash, false, p);
                assert_eq!(batch_floor(false, r, p, 1, true), d);
                let s = clover_floor(schur_floor(r, p), RowKind::CloverSchur, false, p);
                assert_eq!(batch_floor(true, r, p, 1, true), s);
            }
        }
    }

    #[test]
    fn links_once_spinors_per_right_hand_side() {
        // Double r18 dslash: 4 x 18 x 8 = 576 B of links, then 2 x 192 B a right-hand side:
        // 576 + 12 x 384 = 5184 B a site for 12, i.e. 432 a right-hand side against 960
        // (0.45 of one at a time, the DRAM bound of the 0.6 target).
        assert_eq!(batch_floor(false, 18, Precision::Double, 12, false), 5184.0);
        // Single r12: 4 x 12 x 4 = 192, then 2 x 96: 192 + 4 x 192 for 4.
        assert_eq!(batch_floor(false, 12, Precision::Single, 4, false), 960.0);
        // The Schur operator: both halves' links (8 x 144) and 2.5 spinors a right-hand
        // side; the clover arrays (72 reals) once.
        assert_eq!(
            batch_floor(true, 18, Precision::Double, 4, true),
            1152.0 + 576.0 + 4.0 * 480.0
        );
    }

    #[test]
    fn only_the_wilson_dslash_at_twelve_is_bounded() {
        for p in [Precision::Double, Precision::Single] {
            for r in [18, 12] {
                assert_eq!(batch_target(false, false, r, p, 12), Some(0.6));
                assert_eq!(batch_target(false, false, r, p, 4), None);
                assert_eq!(batch_target(true, false, r, p, 12), None);
                assert_eq!(batch_target(false, true, r, p, 12), None);
            }
        }
        assert_eq!(batch_target(false, false, 8, Precision::Double, 12), None);
    }
}
