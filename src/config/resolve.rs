//! The config's paths and what a gauge file says, settled once when a config is loaded or
//! the command line changes it: the one rule for relative paths (a config's keys against
//! its folder, the command line's against the current directory: docs/config.md,
//! "Paths"), the default outputs `out/<stem>.json` and `.npy` (`[output] report = false`
//! and `solution = false` write none), and the lattice's extents taken from the gauge
//! file's header where `[lattice]` leaves them out, checked against it where it gives
//! them.

use super::{GaugeConfig, LoadedConfig, SourceConfig};
use crate::error::{Error, Result};
use crate::geometry::lattice::NDIM;
use serde::{Deserializer, Serializer};
use std::path::{Path, PathBuf};

/// The keys of the extents, x y z t.
pub const DIM_KEYS: [&str; NDIM] = ["LX", "LY", "LZ", "LT"];

/// `[output] report` and `solution`: a path, or `false` for none (`true` is refused: it
/// names no file).
pub fn path_or_false<'de, D: Deserializer<'de>>(
    d: D,
) -> std::result::Result<Option<PathBuf>, D::Error> {
    struct V;
    impl serde::de::Visitor<'_> for V {
        type Value = Option<PathBuf>;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a file path, or false for none")
        }
        fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<Self::Value, E> {
            Ok(Some(PathBuf::from(v)))
        }
        fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<Self::Value, E> {
            if v {
                Err(E::custom(
                    "`true` names no file: give a path, or leave the key out for the default \
                     out/<config stem> (false: none)",
                ))
            } else {
                Ok(None)
            }
        }
    }
    d.deserialize_any(V)
}

/// The report's echo of an output: its path, or `false` when it is not written.
pub fn serialize_path_or_false<S: Serializer>(
    p: &Option<PathBuf>,
    s: S,
) -> std::result::Result<S::Ok, S::Error> {
    match p {
        Some(p) => s.serialize_str(&p.to_string_lossy()),
        None => s.serialize_bool(false),
    }
}

/// The extents a config's text writes, `None` where `[lattice]` leaves one out.
pub fn given_dims(table: &toml::Table) -> [Option<i64>; NDIM] {
    let lattice = table.get("lattice").and_then(|v| v.as_table());
    DIM_KEYS.map(|k| lattice.and_then(|l| l.get(k)).and_then(|v| v.as_integer()))
}

/// Whether the config's text has `[output] key`.
fn has_output_key(table: &toml::Table, key: &str) -> bool {
    table
        .get("output")
        .and_then(|v| v.as_table())
        .is_some_and(|o| o.contains_key(key))
}

/// The name outputs default to: a config file's stem ("run" of run.toml).
pub fn stem_of(name: &str) -> String {
    Path::new(name)
        .file_stem()
        .map_or_else(|| "qcd-solve".to_string(), |s| s.to_string_lossy().into())
}

/// The gauge file's extents and format, from its header (format detected when "auto").
pub fn gauge_file_header(path: &Path, format: &str) -> Result<([usize; NDIM], String)> {
    let fmt = crate::io::parse_format(format).map_err(|e| match e {
        Error::Format { message, .. } | Error::InvalidValue { message, .. } => {
            Error::invalid("gauge.format", message)
        }
        other => other,
    })?;
    let header = crate::io::describe(path, fmt, None)?;
    let name = match fmt {
        Some(f) => f.name().to_string(),
        None => crate::io::GaugeFormat::detect(path)?.name().to_string(),
    };
    Ok((header.dims, name))
}

fn fmt_dims(d: [usize; NDIM]) -> String {
    format!("{}x{}x{}x{}", d[0], d[1], d[2], d[3])
}

impl LoadedConfig {
    /// Record the extents the config's text writes (`given_dims`).
    pub(super) fn note_given_dims(&mut self, table: &toml::Table) {
        self.given_dims = given_dims(table);
    }

    /// `report` and `solution` where the text leaves them out: `out/<stem>.json` and
    /// `.npy` (made relative to the config's folder by `resolve_paths`).
    pub(super) fn default_outputs(&mut self, table: &toml::Table) {
        let stem = stem_of(&self.source_name);
        let o = &mut self.config.output;
        if !has_output_key(table, "report") {
            o.report = Some(PathBuf::from(format!("out/{stem}.json")));
        }
        if !has_output_key(table, "solution") {
            o.solution = Some(PathBuf::from(format!("out/{stem}.npy")));
        }
    }

    /// Every relative path of the config (gauge file, source file, outputs) joined to the
    /// config's folder, so that from here on every path is the one the program opens.
    pub(super) fn resolve_paths(&mut self) {
        let base = self.base_dir.clone();
        let join = |p: &mut PathBuf| {
            if p.is_relative() && !base.as_os_str().is_empty() {
                *p = base.join(&*p);
            }
        };
        let c = &mut self.config;
        if let GaugeConfig::File { path, .. } = &mut c.gauge.field {
            join(path);
        }
        if let SourceConfig::File { path } = &mut c.source {
            join(path);
        }
        for p in [
            &mut c.output.report,
            &mut c.output.solution,
            &mut c.output.gauge,
        ]
        .into_iter()
        .flatten()
        {
            join(p);
        }
    }

    /// The embedded default's outputs renamed after a gauge file given on the command
    /// line (`out/<file name>.json`, `.npy`): its own names describe its 16x16x16x32
    /// random field.
    pub(super) fn outputs_named_after(&mut self, gauge: &Path) {
        let name = gauge
            .file_name()
            .map_or_else(|| "gauge".to_string(), |n| n.to_string_lossy().into());
        let o = &mut self.config.output;
        for (p, ext) in [(&mut o.report, "json"), (&mut o.solution, "npy")] {
            if let Some(p) = p {
                *p = p.with_file_name(format!("{name}.{ext}"));
            }
        }
    }

    /// The lattice's extents: each one `[lattice]` leaves out taken from the gauge file's
    /// header, each one it gives checked against the header (a mismatch is a bad value,
    /// exit 2, naming the key and the file); without a gauge file every extent is needed.
    pub(super) fn complete_lattice(&mut self) -> Result<()> {
        let given = self.given_dims;
        let GaugeConfig::File { path, format, .. } = &self.config.gauge.field else {
            let missing: Vec<&str> = (0..NDIM)
                .filter(|&mu| given[mu].is_none())
                .map(|mu| DIM_KEYS[mu])
                .collect();
            if let Some(first) = missing.first() {
                let verb = if missing.len() == 1 { "is" } else { "are" };
                return Err(self.bad(
                    "lattice",
                    first,
                    format!(
                        "{} {verb} missing: give LX, LY, LZ and LT, or a gauge file ([gauge] \
                         type = \"file\" or --gauge FILE) whose header has them",
                        missing.join(", ")
                    ),
                ));
            }
            self.set_dims(given.map(|v| v.unwrap_or(0)));
            return Ok(());
        };
        let (path, format) = (path.clone(), format.clone());
        let (file_dims, _) = gauge_file_header(&path, &format)?;
        for mu in 0..NDIM {
            if let Some(v) = given[mu] {
                if v >= 1 && v as usize != file_dims[mu] {
                    return Err(self.mismatch(mu, v, &path, file_dims));
                }
            }
        }
        self.set_dims(std::array::from_fn(|mu| {
            given[mu].unwrap_or(file_dims[mu] as i64)
        }));
        Ok(())
    }

    fn set_dims(&mut self, d: [i64; NDIM]) {
        let l = &mut self.config.lattice;
        [l.lx, l.ly, l.lz, l.lt] = d;
    }

    /// `[lattice]` against the gauge file: the key (with its line) and the file.
    fn mismatch(&self, mu: usize, v: i64, path: &Path, file_dims: [usize; NDIM]) -> Error {
        let key = DIM_KEYS[mu];
        let gauge_from = match self.flags.iter().any(|(k, _)| k == "gauge.path") {
            true => " (--gauge)",
            false => "",
        };
        self.bad(
            "lattice",
            key,
            format!(
                "[lattice] says {key} = {v}, but the gauge file {}{gauge_from} is {} (X x Y x Z \
                 x T, from its header): leave the extents out of [lattice] to take the \
                 file's, or give the file of this lattice",
                path.display(),
                fmt_dims(file_dims)
            ),
        )
    }
}
