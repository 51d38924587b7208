//! The physics tables of the schema beyond the operator: the source (`[source]`, its
//! smearing `[source.smearing]` and the smearing of its links `[source.smearing.links]`),
//! gauge fixing (`[gauge] fix`) and the measurements (`[measure]`), with their checks.
//! The values stay plain here; `app` turns them into the library's sources, smearings
//! and contractions.

use super::LoadedConfig;
use crate::error::Result;
use crate::geometry::lattice::NDIM;
pub use crate::sources::Dilution;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// A spin or colour index of a source, or "all": every value, one right-hand side each
/// (the propagator's columns).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Index {
    One(i64),
    All,
}

impl Default for Index {
    fn default() -> Self {
        Index::One(0)
    }
}

impl Index {
    /// The values this selects out of `0..n`.
    pub fn values(self, n: usize) -> Vec<usize> {
        match self {
            Index::One(v) => vec![v as usize],
            Index::All => (0..n).collect(),
        }
    }
}

impl std::fmt::Display for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Index::One(v) => write!(f, "{v}"),
            Index::All => write!(f, "all"),
        }
    }
}

impl Serialize for Index {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            Index::One(v) => s.serialize_i64(*v),
            Index::All => s.serialize_str("all"),
        }
    }
}

impl<'de> Deserialize<'de> for Index {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = Index;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an index (an integer) or \"all\"")
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<Index, E> {
                Ok(Index::One(v))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<Index, E> {
                Ok(Index::One(i64::try_from(v).unwrap_or(i64::MAX)))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Index, E> {
                match v {
                    "all" => Ok(Index::All),
                    _ => Err(E::invalid_value(serde::de::Unexpected::Str(v), &self)),
                }
            }
        }
        d.deserialize_any(V)
    }
}

/// `[source]`: what the right-hand sides are.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum SourceConfig {
    /// A delta at one site (x, y, z, t), spin and colour ("all": one column each),
    /// optionally smeared gauge-covariantly (`[source.smearing]`).
    Point {
        #[serde(default)]
        site: [i64; NDIM],
        #[serde(default)]
        spin: Index,
        #[serde(default, alias = "color")]
        colour: Index,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        smearing: Option<QuarkSmearingConfig>,
    },
    /// 1 on every site of timeslice `t` (gauge dependent: needs `[gauge] fix`), times
    /// e^{ip.x} for the spatial `momentum` (mode numbers).
    Wall {
        #[serde(default)]
        t: i64,
        #[serde(default)]
        spin: Index,
        #[serde(default, alias = "color")]
        colour: Index,
        #[serde(default)]
        momentum: [i64; 3],
    },
    /// exp(-r^2 / r0^2) on the source's timeslice, r the shortest periodic spatial
    /// distance to `site` (gauge dependent: needs `[gauge] fix`).
    Gaussian {
        #[serde(default)]
        site: [i64; NDIM],
        r0: f64,
        #[serde(default)]
        spin: Index,
        #[serde(default, alias = "color")]
        colour: Index,
    },
    /// Z2 noise (+-1), seeded, on a timeslice or the volume, diluted.
    Z2(NoiseConfig),
    /// Z4 noise ((+-1 +-i)/sqrt 2), seeded, on a timeslice or the volume, diluted.
    Z4(NoiseConfig),
    /// Complex Gaussian noise from a seed.
    Random { seed: u64 },
    /// e^{ip.x} on spin `spin`, colour `colour`, with integer mode numbers `momentum`.
    PlaneWave {
        momentum: [i64; NDIM],
        #[serde(default)]
        spin: i64,
        #[serde(default, alias = "color")]
        colour: i64,
    },
    /// A `.npy` file (`<c16`, shape [LT, LZ, LY, LX, 4, 3]).
    File { path: PathBuf },
}

impl Default for SourceConfig {
    fn default() -> Self {
        SourceConfig::Point {
            site: [0; NDIM],
            spin: Index::One(0),
            colour: Index::One(0),
            smearing: None,
        }
    }
}

/// The noise sources' parameters.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct NoiseConfig {
    pub seed: u64,
    /// The timeslice the noise lives on; absent: the whole volume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeslice: Option<i64>,
    /// One right-hand side per spin, colour or both ("none": one).
    #[serde(default)]
    pub dilution: Dilution,
    /// Volume noise: one right-hand side per class of timeslices t mod `time_dilution`
    /// (it must divide LT).
    #[serde(default = "one")]
    pub time_dilution: i64,
    #[serde(default)]
    pub momentum: [i64; 3],
}

fn one() -> i64 {
    1
}

/// `[source.smearing]`: gauge-covariant quark smearing of the source (and of the sink
/// when `[measure] sinks` asks for "smeared"), over the spatial links smeared by `links`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum QuarkSmearingConfig {
    /// Wuppertal (Gaussian) smearing: `iterations` steps of weight `alpha`.
    Wuppertal {
        alpha: f64,
        iterations: i64,
        #[serde(default)]
        links: LinkSmearingConfig,
    },
    /// Jacobi smearing: the truncated series of (1 - kappa H)^-1, `iterations` terms.
    Jacobi {
        kappa: f64,
        iterations: i64,
        #[serde(default)]
        links: LinkSmearingConfig,
    },
}

impl QuarkSmearingConfig {
    pub fn links(&self) -> &LinkSmearingConfig {
        match self {
            QuarkSmearingConfig::Wuppertal { links, .. }
            | QuarkSmearingConfig::Jacobi { links, .. } => links,
        }
    }
}

/// `[source.smearing.links]`: the smearing of the spatial links the quark smearing uses.
#[derive(Clone, Debug, Deserialize, Serialize, Default)]
#[serde(tag = "type", rename_all = "kebab-case", deny_unknown_fields)]
pub enum LinkSmearingConfig {
    #[default]
    None,
    Ape {
        alpha: f64,
        iterations: i64,
    },
    Stout {
        rho: f64,
        iterations: i64,
    },
}

/// `[gauge] fix`: the gauge the field is fixed to before the solve.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum GaugeFixKind {
    /// Said explicitly: a gauge-dependent source is then accepted on the unfixed field.
    None,
    Coulomb,
    Landau,
}

/// `[gauge]`: the field (`type` and its keys) and its gauge fixing.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct GaugeSection {
    #[serde(flatten)]
    pub field: super::GaugeConfig,
    /// Absent: no fixing, and a gauge-dependent source is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fix: Option<GaugeFixKind>,
    /// Stop when theta = |d_mu A_mu|^2 (per site and colour) is below this and the
    /// functional's relative change is below it too.
    #[serde(default = "default_fix_tolerance")]
    pub fix_tolerance: f64,
    #[serde(default = "default_fix_max_iterations")]
    pub fix_max_iterations: i64,
    /// Overrelaxation parameter omega, 1 <= omega < 2.
    #[serde(default = "default_fix_omega")]
    pub fix_omega: f64,
}

fn default_fix_tolerance() -> f64 {
    1e-12
}
fn default_fix_max_iterations() -> i64 {
    5000
}
fn default_fix_omega() -> f64 {
    1.7
}

impl GaugeSection {
    pub fn of(field: super::GaugeConfig) -> Self {
        GaugeSection {
            field,
            fix: None,
            fix_tolerance: default_fix_tolerance(),
            fix_max_iterations: default_fix_max_iterations(),
            fix_omega: default_fix_omega(),
        }
    }

    /// The gauge the field is fixed to, if any.
    pub fn fixing(&self) -> Option<GaugeFixKind> {
        self.fix.filter(|k| *k != GaugeFixKind::None)
    }
}

/// `[measure]`: the correlators contracted from the propagator.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct MeasureConfig {
    /// Meson two-point functions.
    #[serde(default = "yes")]
    pub mesons: bool,
    /// "all" (the 16 x 16 source-sink structures) or "diagonal" (the 16 with equal
    /// source and sink, and G5 -> G4G5).
    #[serde(default)]
    pub pairs: Pairs,
    /// The proton two-point function (positive parity).
    #[serde(default)]
    pub baryons: bool,
    /// Sink momenta (mode numbers).
    #[serde(default = "zero_momentum")]
    pub momenta: Vec<[i64; 3]>,
    /// "point" and/or "smeared" (the source's smearing applied at the sink).
    #[serde(default = "point_sink")]
    pub sinks: Vec<Sink>,
}

fn yes() -> bool {
    true
}
fn zero_momentum() -> Vec<[i64; 3]> {
    vec![[0; 3]]
}
fn point_sink() -> Vec<Sink> {
    vec![Sink::Point]
}

impl Default for MeasureConfig {
    fn default() -> Self {
        MeasureConfig {
            mesons: true,
            pairs: Pairs::default(),
            baryons: false,
            momenta: zero_momentum(),
            sinks: point_sink(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, Default)]
#[serde(rename_all = "kebab-case")]
pub enum Pairs {
    #[default]
    All,
    Diagonal,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Sink {
    Point,
    Smeared,
}

impl SourceConfig {
    /// The right-hand sides the source asks for (1 for a single solve).
    pub fn columns(&self) -> usize {
        match self {
            SourceConfig::Point { spin, colour, .. }
            | SourceConfig::Wall { spin, colour, .. }
            | SourceConfig::Gaussian { spin, colour, .. } => {
                spin.values(4).len() * colour.values(3).len()
            }
            SourceConfig::Z2(n) | SourceConfig::Z4(n) => {
                n.dilution.pieces() * n.time_dilution.max(1) as usize
            }
            _ => 1,
        }
    }

    /// Whether the source depends on the gauge (needs a fixed gauge to mean anything).
    pub fn gauge_dependent(&self) -> Option<&'static str> {
        match self {
            SourceConfig::Wall { .. } => Some("wall"),
            SourceConfig::Gaussian { .. } => Some("gaussian"),
            _ => None,
        }
    }

    /// The smearing of the source, if any.
    pub fn smearing(&self) -> Option<&QuarkSmearingConfig> {
        match self {
            SourceConfig::Point { smearing, .. } => smearing.as_ref(),
            _ => None,
        }
    }
}

impl LoadedConfig {
    /// The checks of `[source]`, `[gauge] fix` and `[measure]` (before any work).
    pub(super) fn check_physics(&self) -> Result<()> {
        self.check_source()?;
        self.check_fixing()?;
        self.check_measure()
    }

    fn check_site(&self, key: &str, site: &[i64; NDIM]) -> Result<()> {
        let dims = self.dims();
        if (0..NDIM).any(|mu| site[mu] < 0 || site[mu] as usize >= dims[mu]) {
            return Err(self.bad(
                "source",
                key,
                format!("{site:?} lies outside the {dims:?} lattice"),
            ));
        }
        Ok(())
    }

    fn check_index(&self, key: &str, v: Index, n: i64) -> Result<()> {
        match v {
            Index::One(i) if !(0..n).contains(&i) => Err(self.bad(
                "source",
                key,
                format!("must be 0..{} or \"all\", got {i}", n - 1),
            )),
            _ => Ok(()),
        }
    }

    fn check_timeslice(&self, section: &str, key: &str, t: i64) -> Result<()> {
        let lt = self.dims()[3] as i64;
        if !(0..lt).contains(&t) {
            return Err(self.bad(
                section,
                key,
                format!("timeslice {t} lies outside 0..{}", lt - 1),
            ));
        }
        Ok(())
    }

    /// A spatial momentum's mode numbers within the Brillouin zone, -L/2 < p <= L/2.
    pub(super) fn check_momentum(&self, section: &str, key: &str, p: &[i64; 3]) -> Result<()> {
        let dims = self.dims();
        for i in 0..3 {
            let l = dims[i] as i64;
            if !(p[i] > -l / 2 - (l % 2) && p[i] <= l / 2) {
                return Err(self.bad(
                    section,
                    key,
                    format!(
                        "momentum {p:?}: mode {} lies outside the lattice's {} modes along {} \
                         (-L/2 < p <= L/2 with L = {l})",
                        p[i],
                        l,
                        crate::geometry::lattice::DIR_NAMES[i]
                    ),
                ));
            }
        }
        Ok(())
    }

    fn check_source(&self) -> Result<()> {
        match &self.config.source {
            SourceConfig::Point {
                site,
                spin,
                colour,
                smearing,
            } => {
                self.check_site("site", site)?;
                self.check_index("spin", *spin, 4)?;
                self.check_index("colour", *colour, 3)?;
                if let Some(s) = smearing {
                    self.check_smearing(s)?;
                }
            }
            SourceConfig::Wall {
                t,
                spin,
                colour,
                momentum,
            } => {
                self.check_timeslice("source", "t", *t)?;
                self.check_index("spin", *spin, 4)?;
                self.check_index("colour", *colour, 3)?;
                self.check_momentum("source", "momentum", momentum)?;
            }
            SourceConfig::Gaussian {
                site,
                r0,
                spin,
                colour,
            } => {
                self.check_site("site", site)?;
                if !(r0.is_finite() && *r0 > 0.0) {
                    return Err(self.bad("source", "r0", format!("must be positive, got {r0}")));
                }
                self.check_index("spin", *spin, 4)?;
                self.check_index("colour", *colour, 3)?;
            }
            SourceConfig::Z2(n) | SourceConfig::Z4(n) => self.check_noise(n)?,
            SourceConfig::PlaneWave { spin, colour, .. } => {
                self.check_index("spin", Index::One(*spin), 4)?;
                self.check_index("colour", Index::One(*colour), 3)?;
            }
            SourceConfig::Random { .. } | SourceConfig::File { .. } => {}
        }
        Ok(())
    }

    fn check_noise(&self, n: &NoiseConfig) -> Result<()> {
        if let Some(t) = n.timeslice {
            self.check_timeslice("source", "timeslice", t)?;
            if n.time_dilution != 1 {
                return Err(self.bad(
                    "source",
                    "time_dilution",
                    format!(
                        "dilutes volume noise in time; the noise lives on timeslice {t}, \
                         got {}",
                        n.time_dilution
                    ),
                ));
            }
        }
        let lt = self.dims()[3] as i64;
        if n.time_dilution < 1 || lt % n.time_dilution != 0 {
            return Err(self.bad(
                "source",
                "time_dilution",
                format!(
                    "must be a divisor of LT = {lt} (one right-hand side per class of \
                     timeslices t mod it), got {}",
                    n.time_dilution
                ),
            ));
        }
        self.check_momentum("source", "momentum", &n.momentum)
    }

    fn check_smearing(&self, s: &QuarkSmearingConfig) -> Result<()> {
        let section = "source.smearing";
        let (key, weight, iterations) = match s {
            QuarkSmearingConfig::Wuppertal {
                alpha, iterations, ..
            } => ("alpha", *alpha, *iterations),
            QuarkSmearingConfig::Jacobi {
                kappa, iterations, ..
            } => ("kappa", *kappa, *iterations),
        };
        if !(weight.is_finite() && weight > 0.0) {
            return Err(self.bad(section, key, format!("must be positive, got {weight}")));
        }
        if !(0..=100_000).contains(&iterations) {
            return Err(self.bad(
                section,
                "iterations",
                format!("must be in 0..=100000, got {iterations}"),
            ));
        }
        let section = "source.smearing.links";
        let (key, weight, iterations) = match s.links() {
            LinkSmearingConfig::None => return Ok(()),
            LinkSmearingConfig::Ape { alpha, iterations } => ("alpha", *alpha, *iterations),
            LinkSmearingConfig::Stout { rho, iterations } => ("rho", *rho, *iterations),
        };
        if !(weight.is_finite() && weight > 0.0) {
            return Err(self.bad(section, key, format!("must be positive, got {weight}")));
        }
        if matches!(s.links(), LinkSmearingConfig::Ape { .. }) && weight > 1.0 {
            return Err(self.bad(
                section,
                key,
                format!(
                    "APE's alpha weighs the staples against the link, U' = P[(1 - alpha) U +                      alpha/4 staples]: 0 < alpha <= 1, got {weight}"
                ),
            ));
        }
        if !(0..=10_000).contains(&iterations) {
            return Err(self.bad(
                section,
                "iterations",
                format!("must be in 0..=10000, got {iterations}"),
            ));
        }
        Ok(())
    }

    fn check_fixing(&self) -> Result<()> {
        let g = &self.config.gauge;
        if let Some(kind) = self.config.source.gauge_dependent() {
            if g.fix.is_none() {
                return Err(self.bad(
                    "gauge",
                    "fix",
                    format!(
                        "a {kind} source depends on the gauge: fix it (fix = \"coulomb\" or \
                         \"landau\"), or say fix = \"none\" to use the field as it is"
                    ),
                ));
            }
        }
        if g.fixing().is_some() && self.config.parallel.read == super::ReadMode::Slab {
            return Err(self.bad(
                "gauge",
                "fix",
                "gauge fixing needs the whole field on one process: use [parallel] read = \
                 \"rank0\" (each rank then receives its share of the fixed field)"
                    .into(),
            ));
        }
        if !(g.fix_tolerance.is_finite() && g.fix_tolerance > 0.0) {
            return Err(self.bad(
                "gauge",
                "fix_tolerance",
                format!("must be positive, got {}", g.fix_tolerance),
            ));
        }
        if g.fix_max_iterations < 1 {
            return Err(self.bad(
                "gauge",
                "fix_max_iterations",
                format!("must be at least 1, got {}", g.fix_max_iterations),
            ));
        }
        if !(1.0..2.0).contains(&g.fix_omega) {
            return Err(self.bad(
                "gauge",
                "fix_omega",
                format!("must be in [1, 2), got {}", g.fix_omega),
            ));
        }
        Ok(())
    }

    fn check_measure(&self) -> Result<()> {
        let Some(m) = &self.config.measure else {
            return Ok(());
        };
        for p in &m.momenta {
            self.check_momentum("measure", "momenta", p)?;
        }
        if m.sinks.is_empty() {
            return Err(self.bad(
                "measure",
                "sinks",
                "name at least one sink: \"point\" or \"smeared\"".into(),
            ));
        }
        if m.sinks.contains(&Sink::Smeared) && self.config.source.smearing().is_none() {
            return Err(self.bad(
                "measure",
                "sinks",
                "a \"smeared\" sink applies the source's smearing, but [source] has no \
                 [source.smearing]"
                    .into(),
            ));
        }
        let src = &self.config.source;
        match src {
            SourceConfig::Z2(n) | SourceConfig::Z4(n) => {
                if n.timeslice.is_none() {
                    return Err(self.bad(
                        "source",
                        "timeslice",
                        "correlators from noise need the noise on one timeslice".into(),
                    ));
                }
                if !matches!(n.dilution, Dilution::Spin | Dilution::SpinColour) {
                    return Err(self.bad(
                        "source",
                        "dilution",
                        "correlators from noise need spin dilution (\"spin\" or \
                         \"spin-colour\"): every source Dirac structure is then exact in spin"
                            .into(),
                    ));
                }
                if m.baryons {
                    return Err(self.bad(
                        "measure",
                        "baryons",
                        "the proton needs a propagator (12 columns of a point, wall or \
                         Gaussian source), not noise"
                            .into(),
                    ));
                }
            }
            SourceConfig::Point { .. }
            | SourceConfig::Wall { .. }
            | SourceConfig::Gaussian { .. }
                if src.columns() == 12 => {}
            SourceConfig::Point { .. }
            | SourceConfig::Wall { .. }
            | SourceConfig::Gaussian { .. } => {
                return Err(self.bad(
                    "source",
                    "spin",
                    "correlators need the 12 columns of the propagator: spin = \"all\" and \
                     colour = \"all\""
                        .into(),
                ))
            }
            _ => {
                return Err(self.bad(
                    "measure",
                    "mesons",
                    "correlators are contracted from a point, wall, Gaussian or noise source"
                        .into(),
                ))
            }
        }
        Ok(())
    }
}
