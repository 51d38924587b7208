//! The quenched SU(3) gauge generator for the Wilson action
//! `S = beta sum_p (1 - Re Tr U_p / 3)`: Cabibbo-Marinari heatbath (Kennedy-Pendleton /
//! Creutz in each SU(2) subgroup) plus overrelaxation, checkerboarded and parallel on the
//! CPU, with random numbers that are a pure function of (seed, sweep, site, direction,
//! subgroup, step) (see `draws` for the Philox contract that `kernels/heatbath.cu` shares).
//!
//! A compound sweep is: one heatbath pass, then `overrelax` overrelaxation passes (each
//! pass: mu = 0..3, even then odd sites), then reunitarisation of every link, then the
//! plaquette. `generate` runs `therm` thermalisation sweeps, then `sweeps` measured ones;
//! `generate_ensemble` also hands out every `every`-th field of the measured part.

pub mod draws;
pub mod stats;
pub mod su2;
pub mod update;

use crate::error::{Error, Result};
use crate::field::gauge::Plaquette;
use crate::field::GaugeField;
use crate::geometry::lattice::Lattice;
use serde::{Deserialize, Serialize};
use std::time::Instant;
use update::{update_pass, Geometry, Update};

pub use stats::{autocorrelation, AutocorrEstimate};

/// Parameters of a generator run (a TOML table may give any subset; the rest default).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeatbathParams {
    /// Inverse coupling of the Wilson action, beta = 6 / g^2.
    pub beta: f64,
    /// Measured sweeps after thermalisation.
    pub sweeps: usize,
    /// Thermalisation sweeps, not measured, never saved.
    pub therm: usize,
    /// Hand out every `every`-th field of the measured part (measured sweep n = 1, 2, ...
    /// is handed out when n % every == 0).
    pub every: usize,
    /// Overrelaxation passes per heatbath pass.
    pub overrelax: usize,
    /// The Philox key; also seeds the hot start.
    pub seed: u64,
    /// Start from a random field (`GaugeField::random(lattice, seed)`) rather than U = 1.
    pub hot_start: bool,
}

impl Default for HeatbathParams {
    fn default() -> Self {
        HeatbathParams {
            beta: 6.0,
            sweeps: 100,
            therm: 100,
            every: 10,
            overrelax: 4,
            seed: 1,
            hot_start: false,
        }
    }
}

impl HeatbathParams {
    pub fn validate(&self) -> Result<()> {
        if !(self.beta.is_finite() && self.beta >= 0.0) {
            return Err(Error::invalid(
                "beta",
                format!("must be finite and >= 0, got {}", self.beta),
            ));
        }
        if self.every == 0 {
            return Err(Error::invalid("every", "must be at least 1"));
        }
        if self.therm + self.sweeps > u32::MAX as usize {
            return Err(Error::invalid(
                "sweeps",
                "therm + sweeps must fit in 32 bits (Philox counter)",
            ));
        }
        Ok(())
    }
}

/// What every compound sweep reports.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct SweepRecord {
    /// 0-based index of the sweep, thermalisation included (the Philox sweep counter).
    pub sweep: usize,
    /// true once past thermalisation (the sweep counts towards measurements).
    pub measured: bool,
    /// Plaquette after the sweep (total, spatial, temporal; NERSC normalisation).
    pub plaquette: Plaquette,
    /// Wall time of the update (heatbath + overrelaxation + reunitarisation), seconds.
    pub update_seconds: f64,
    /// Wall time since the start of the run, seconds.
    pub elapsed_seconds: f64,
}

/// A generator that runs one compound sweep at a time (for callers that need control
/// between sweeps: checkpoints, resuming from a stored field).
pub struct Generator {
    params: HeatbathParams,
    geometry: Geometry,
    field: GaugeField,
    next_sweep: usize,
    started: Instant,
}

impl Generator {
    /// A fresh start (hot or cold per `params.hot_start`). Needs every extent even.
    pub fn new(lattice: &Lattice, params: &HeatbathParams) -> Result<Self> {
        let field = if params.hot_start {
            GaugeField::random(lattice, params.seed)
        } else {
            GaugeField::unit(lattice)
        };
        Self::from_field(field, params, 0)
    }

    /// Continue from a given field, with the next sweep numbered `first_sweep` (so a run
    /// resumed from the field after sweep s-1 with `first_sweep = s` repeats the same draws).
    /// `params.hot_start` is ignored; sweeps with index < `params.therm` count as
    /// thermalisation.
    pub fn from_field(
        field: GaugeField,
        params: &HeatbathParams,
        first_sweep: usize,
    ) -> Result<Self> {
        params.validate()?;
        let geometry = Geometry::new(&field.lattice)?;
        Ok(Generator {
            params: params.clone(),
            geometry,
            field,
            next_sweep: first_sweep,
            started: Instant::now(),
        })
    }

    pub fn field(&self) -> &GaugeField {
        &self.field
    }

    pub fn into_field(self) -> GaugeField {
        self.field
    }

    /// The index the next sweep will have.
    pub fn next_sweep(&self) -> usize {
        self.next_sweep
    }

    /// One compound sweep: heatbath, `overrelax` overrelaxation passes, reunitarisation.
    pub fn sweep(&mut self) -> SweepRecord {
        let t0 = Instant::now();
        let sweep = self.next_sweep;
        let p = &self.params;
        let hb = Update::Heatbath {
            beta: p.beta,
            seed: p.seed,
            sweep: sweep as u32,
        };
        update_pass(&mut self.field, &self.geometry, hb);
        for _ in 0..p.overrelax {
            update_pass(&mut self.field, &self.geometry, Update::Overrelax);
        }
        self.field.reunitarise();
        let update_seconds = t0.elapsed().as_secs_f64();
        let plaquette = self.field.plaquette();
        self.next_sweep += 1;
        SweepRecord {
            sweep,
            measured: sweep >= p.therm,
            plaquette,
            update_seconds,
            elapsed_seconds: self.started.elapsed().as_secs_f64(),
        }
    }
}

/// Run `therm + sweeps` compound sweeps from a hot or cold start, calling `on_sweep` after
/// each, and return the last field.
pub fn generate(
    lattice: &Lattice,
    params: &HeatbathParams,
    on_sweep: impl FnMut(SweepRecord),
) -> Result<GaugeField> {
    generate_ensemble(lattice, params, on_sweep, |_, _| Ok(()))
}

/// As `generate`, and after measured sweep n (n = 1..sweeps) with n % every == 0 call
/// `on_config(record, field)` (the caller writes the file; an error stops the run).
pub fn generate_ensemble(
    lattice: &Lattice,
    params: &HeatbathParams,
    mut on_sweep: impl FnMut(SweepRecord),
    mut on_config: impl FnMut(&SweepRecord, &GaugeField) -> Result<()>,
) -> Result<GaugeField> {
    let mut g = Generator::new(lattice, params)?;
    for _ in 0..params.therm + params.sweeps {
        let r = g.sweep();
        on_sweep(r);
        if r.measured && (r.sweep + 1 - params.therm).is_multiple_of(params.every) {
            on_config(&r, g.field())?;
        }
    }
    Ok(g.into_field())
}

/// Mean plaquettes over the measured records, with autocorrelation-aware errors.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct PlaquetteSummary {
    pub total: AutocorrEstimate,
    pub spatial: AutocorrEstimate,
    pub temporal: AutocorrEstimate,
}

/// Summarise the records with `measured == true` (None if fewer than two).
pub fn summarise(records: &[SweepRecord]) -> Option<PlaquetteSummary> {
    let m: Vec<&SweepRecord> = records.iter().filter(|r| r.measured).collect();
    let series =
        |f: fn(&Plaquette) -> f64| -> Vec<f64> { m.iter().map(|r| f(&r.plaquette)).collect() };
    Some(PlaquetteSummary {
        total: autocorrelation(&series(|p| p.total))?,
        spatial: autocorrelation(&series(|p| p.spatial))?,
        temporal: autocorrelation(&series(|p| p.temporal))?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_from_toml_default_the_rest_and_refuse_unknown_keys() {
        let p: HeatbathParams = toml::from_str("beta = 5.7\nhot_start = true").unwrap();
        assert_eq!(p.beta, 5.7);
        assert!(p.hot_start);
        assert_eq!(p.overrelax, 4);
        assert!(toml::from_str::<HeatbathParams>("betta = 5.7").is_err());
        let bad = HeatbathParams {
            every: 0,
            ..Default::default()
        };
        assert!(bad.validate().unwrap_err().to_string().contains("every"));
    }
}
