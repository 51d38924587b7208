//! A parsed and validated configuration: the TOML text parsed once into the schema's
//! types, every value range-checked with its key and line (or the flag that set it).

use super::*;
use crate::error::{Error, Result};
use crate::geometry::lattice::{Lattice, NDIM};
use std::path::{Path, PathBuf};

/// A parsed and validated configuration, with the text it came from (for line numbers)
/// and the folder its relative paths were resolved against (`resolve`).
#[derive(Clone, Debug)]
pub struct LoadedConfig {
    pub config: Config,
    pub source_name: String,
    /// The config file read (`None` for the embedded default): an input no output may name.
    pub config_file: Option<PathBuf>,
    /// The folder the config's relative paths were resolved against: the config file's
    /// (empty, the current directory, for the embedded default).
    pub base_dir: PathBuf,
    /// The extents the config's text writes (LX, LY, LZ, LT; `None`: absent, taken from
    /// the gauge file's header).
    pub(super) given_dims: [Option<i64>; NDIM],
    /// The embedded default config (its lattice and outputs give way to `--gauge`).
    pub(super) embedded: bool,
    pub(super) text: String,
    /// Keys set from the command line ("dirac.kappa", "--kappa"): errors about them name
    /// the flag, not the config's line.
    pub(super) flags: Vec<(String, String)>,
}

impl LoadedConfig {
    pub fn from_file(path: &Path) -> Result<Self> {
        let text = crate::io::read_config_text(path)?;
        let base = path.parent().map(Path::to_path_buf).unwrap_or_default();
        let mut loaded = Self::from_str(&text, &path.display().to_string(), base)?;
        loaded.config_file = Some(path.to_path_buf());
        crate::io::checks::record("config", path, crate::io::config_checks(text.len()));
        Ok(loaded)
    }

    /// The embedded configs/16x16x16x32.toml; its paths are relative to the current
    /// directory.
    pub fn embedded_default() -> Self {
        let mut c = Self::from_str(DEFAULT_CONFIG, DEFAULT_CONFIG_NAME, PathBuf::new())
            .expect("the embedded default config is valid");
        c.embedded = true;
        c
    }

    /// Parse `text` (named `name` in errors), resolve its relative paths against
    /// `base_dir`, fill in the default outputs and the extents a gauge file gives
    /// (`resolve`), and validate.
    pub fn from_str(text: &str, name: &str, base_dir: PathBuf) -> Result<Self> {
        let config: Config = toml::from_str(text).map_err(|e| Error::Config {
            path: name.into(),
            message: crate::io::bounded_message(e.to_string().trim_end()),
        })?;
        let table: toml::Table = text.parse().unwrap_or_default();
        let mut loaded = LoadedConfig {
            config,
            source_name: name.into(),
            config_file: None,
            base_dir,
            given_dims: [None; NDIM],
            embedded: false,
            text: text.into(),
            flags: Vec::new(),
        };
        loaded.note_given_dims(&table);
        loaded.default_outputs(&table);
        loaded.resolve_paths();
        loaded.complete_lattice()?;
        loaded.validate()?;
        Ok(loaded)
    }

    /// The line of `key` in `[section]` of the config text, for error messages.
    fn line_of(&self, section: &str, key: &str) -> Option<usize> {
        let mut current = String::new();
        for (n, line) in self.text.lines().enumerate() {
            let t = line.trim();
            if let Some(rest) = t.strip_prefix('[') {
                current = rest.trim_end_matches(']').trim().to_string();
            } else if current == section {
                if let Some((k, _)) = t.split_once('=') {
                    if k.trim() == key {
                        return Some(n + 1);
                    }
                }
            }
        }
        None
    }

    /// The line of the `[section]` header, for a key the section lacks.
    fn line_of_table(&self, section: &str) -> Option<usize> {
        self.text
            .lines()
            .position(|line| {
                line.trim()
                    .strip_prefix('[')
                    .is_some_and(|rest| rest.trim_end_matches(']').trim() == section)
            })
            .map(|n| n + 1)
    }

    /// The error of a bad value: the flag that set it, or the config's line.
    pub fn bad(&self, section: &str, key: &str, message: String) -> Error {
        let full = format!("{section}.{key}");
        if let Some((_, flag)) = self.flags.iter().rev().find(|(k, _)| *k == full) {
            return Error::InvalidValue {
                key: flag.clone(),
                message: format!("{message} (command line; the flag overrides {full})"),
            };
        }
        let at = match (self.line_of(section, key), self.line_of_table(section)) {
            (Some(n), _) => format!("{}, line {n}", self.source_name),
            (None, Some(n)) => format!("{}, line {n}, the [{section}] table", self.source_name),
            (None, None) => format!("{} (or the command line)", self.source_name),
        };
        Error::InvalidValue {
            key: format!("{section}.{key}"),
            message: format!("{message} ({at})"),
        }
    }

    /// Check a config changed after loading (a scan's point) as a loaded one is checked.
    pub fn revalidate(&self) -> Result<()> {
        self.validate()
    }

    pub(super) fn validate(&self) -> Result<()> {
        let c = &self.config;
        c.tuning.validate()?;
        for (key, v) in [
            ("LX", c.lattice.lx),
            ("LY", c.lattice.ly),
            ("LZ", c.lattice.lz),
            ("LT", c.lattice.lt),
        ] {
            if v < 1 {
                return Err(self.bad("lattice", key, format!("must be at least 1, got {v}")));
            }
        }
        let k = c.dirac.kappa;
        if !(k.is_finite() && k > 0.0) {
            return Err(self.bad("dirac", "kappa", format!("must be positive, got {k}")));
        }
        let csw = c.dirac.csw;
        if !(csw.is_finite() && csw >= 0.0) {
            return Err(self.bad(
                "dirac",
                "csw",
                format!("must be a finite number >= 0 (0: no clover term), got {csw}"),
            ));
        }
        let mu = c.dirac.mu;
        if !mu.is_finite() {
            return Err(self.bad(
                "dirac",
                "mu",
                format!("must be a finite number (0: no twist), got {mu}"),
            ));
        }
        let tol = c.solver.tolerance;
        let floor = crate::solver::monitor::MIN_TOLERANCE;
        if !(tol.is_finite() && tol >= floor && tol < 1.0) {
            return Err(self.bad(
                "solver",
                "tolerance",
                format!(
                    "must be in (0, 1) and at least {floor:e} (double rounding sets the \
                     floor, docs/reliability.md), got {tol:e}"
                ),
            ));
        }
        let max_iter = crate::solver::monitor::MAX_ITERATIONS;
        if !(1..=max_iter).contains(&c.solver.max_iterations) {
            return Err(self.bad(
                "solver",
                "max_iterations",
                format!(
                    "must be at least 1 and at most {max_iter} (docs/reliability.md), got {}",
                    c.solver.max_iterations
                ),
            ));
        }
        let d = c.solver.reliable_delta;
        if !(d.is_finite() && d > 0.0 && d < 1.0) {
            return Err(self.bad(
                "solver",
                "reliable_delta",
                format!("must be in (0, 1), got {d}"),
            ));
        }
        if c.solver.check_every < 1 {
            return Err(self.bad(
                "solver",
                "check_every",
                format!("must be at least 1, got {}", c.solver.check_every),
            ));
        }
        if !(1..=64).contains(&c.solver.restart) {
            return Err(self.bad(
                "solver",
                "restart",
                format!("must be in 1..=64, got {}", c.solver.restart),
            ));
        }
        if !(1..=16).contains(&c.solver.batch) {
            return Err(self.bad(
                "solver",
                "batch",
                format!("must be in 1..=16, got {}", c.solver.batch),
            ));
        }
        if c.solver.batch > 1 && !matches!(c.solver.method, Method::Cr | Method::Bicgstab) {
            return Err(self.bad(
                "solver",
                "batch",
                format!(
                    "batched solves are CR's and BiCGStab's; method = \"{}\" solves one column at a time (batch = 1)",
                    c.solver.method
                ),
            ));
        }
        let has_fused = matches!(c.solver.method, Method::Cr | Method::Bicgstab);
        if !has_fused && c.solver.iteration == Iteration::Fused {
            return Err(self.bad(
                "solver",
                "iteration",
                format!(
                    "the fused iterations are CR's and BiCGStab's; method = \"{}\" runs with iteration = \"auto\"",
                    c.solver.method
                ),
            ));
        }
        let half = c.solver.precision == SolverPrecision::HalfDouble;
        if half && c.solver.iteration == Iteration::Fused {
            return Err(self.bad(
                "solver",
                "iteration",
                "half-double runs on the generic iteration (the fused CR has no half-precision \
                 kernels); set iteration = \"auto\" or \"seed\""
                    .to_string(),
            ));
        }
        let fast = c.solver.preconditioning != Preconditioning::None
            || c.solver.precision != SolverPrecision::Double;
        if fast && !half && c.solver.method == Method::Cr && c.solver.iteration == Iteration::Seed {
            return Err(self.bad(
                "solver",
                "iteration",
                "even-odd preconditioning and single-double run on the fused iteration; \
                 set iteration = \"fused\" or \"auto\""
                    .to_string(),
            ));
        }
        if c.solver.preconditioning == Preconditioning::EvenOdd {
            for (key, v) in [
                ("LX", c.lattice.lx),
                ("LY", c.lattice.ly),
                ("LZ", c.lattice.lz),
                ("LT", c.lattice.lt),
            ] {
                if v % 2 != 0 {
                    return Err(self.bad(
                        "lattice",
                        key,
                        format!(
                            "even-odd preconditioning needs every extent even, got {key} = {v}"
                        ),
                    ));
                }
            }
        }
        if !(1..=1024).contains(&c.backend.multiple) {
            return Err(self.bad(
                "backend",
                "multiple",
                format!("must be in 1..=1024, got {}", c.backend.multiple),
            ));
        }
        if let Err(e) = crate::threads::check(c.backend.threads, "backend.threads") {
            return Err(self.bad("backend", "threads", e.value_message()));
        }
        self.check_parallel()?;
        self.check_physics()?;
        self.check_multigrid()?;
        self.check_mg_method()?;
        Ok(())
    }

    /// The grid: positive entries, dividing the lattice into sub-lattices with even
    /// local extents in every split direction, and as many ranks as `gpus` says.
    fn check_parallel(&self) -> Result<()> {
        let p = &self.config.parallel;
        if let Some(g) = p.grid.iter().find(|&&g| g < 1) {
            return Err(self.bad(
                "parallel",
                "grid",
                format!("every entry must be at least 1, got {g} in {:?}", p.grid),
            ));
        }
        if let Some(n) = p.gpus {
            if n != p.ranks() as i64 {
                return Err(self.bad(
                    "parallel",
                    "gpus",
                    format!(
                        "must equal the number of ranks of grid {:?} ({}), got {n}",
                        p.grid,
                        p.ranks()
                    ),
                ));
            }
        }
        if p.read == ReadMode::Slab && !matches!(self.config.gauge.field, GaugeConfig::File { .. })
        {
            return Err(self.bad(
                "parallel",
                "read",
                "\"slab\" has each rank read its part of a gauge file, but [gauge] is not a \
                 file (type = \"file\")"
                    .into(),
            ));
        }
        if let Err(e) = crate::geometry::partition::Partition::new(self.dims(), p.grid(), 0) {
            return Err(self.bad("parallel", "grid", e.value_message()));
        }
        Ok(())
    }

    pub fn dims(&self) -> [usize; NDIM] {
        let l = &self.config.lattice;
        [l.lx as usize, l.ly as usize, l.lz as usize, l.lt as usize]
    }

    pub fn lattice(&self) -> Result<Lattice> {
        Lattice::new(self.dims(), self.config.lattice.boundary)
    }

    /// An input path of the config as the program opens it: the config's paths are
    /// resolved when it is loaded (relative to its folder) and the command line's are
    /// relative to the current directory, so this is the path itself.
    pub fn input_path(&self, p: &Path) -> PathBuf {
        p.to_path_buf()
    }
}
