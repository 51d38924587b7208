//! The cache of `[gauge] type = "heatbath"` fields: a per-user folder
//! (`$XDG_CACHE_HOME/qcd-solve/heatbath`, else `~/.cache/qcd-solve/heatbath`; never the
//! current directory), one NERSC file per parameter set and beside it a record
//! (`<file>.json`) of what made it: the parameters, the lattice, the program version, the
//! plaquette and link trace of the field, and the file's length and CRC-32. An entry is
//! reused only when its record names the same parameters and lattice, the file's CRC
//! matches, and the field read back (NERSC checks: checksum, header plaquette and link
//! trace) has the recorded plaquette; anything else (another ensemble's file under the
//! name, a damaged file, a missing record) is generated again and replaced.

use crate::config::Device;
use crate::error::{Error, Result};
use crate::field::GaugeField;
use crate::gauge_gen::HeatbathParams;
use crate::geometry::lattice::Lattice;
use crate::io::checks::Check;
use crate::io::{staged, NerscWrite};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// What made a cache entry, stored beside it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CacheRecord {
    pub params: HeatbathParams,
    /// X, Y, Z, T.
    pub dims: [usize; 4],
    pub version: String,
    pub plaquette: f64,
    pub link_trace: f64,
    pub bytes: u64,
    /// CRC-32 of the NERSC file, 8 hex digits.
    pub crc32: String,
}

/// The per-user cache folder of heatbath fields: `$XDG_CACHE_HOME/qcd-solve/heatbath`
/// (an absolute `XDG_CACHE_HOME` only, as the XDG spec says), else
/// `$HOME/.cache/qcd-solve/heatbath`.
pub fn cache_dir() -> Result<PathBuf> {
    let xdg = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute());
    let home = std::env::var_os("HOME")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .map(|h| h.join(".cache"));
    xdg.or(home)
        .map(|base| base.join("qcd-solve").join("heatbath"))
        .ok_or_else(|| {
            Error::invalid(
                "gauge",
                "a heatbath field is cached per user, but neither XDG_CACHE_HOME nor HOME is \
                 an absolute path",
            )
        })
}

/// The cache file of a heatbath field, named from its parameters.
pub fn cache_path(lattice: &Lattice, p: &HeatbathParams) -> Result<PathBuf> {
    Ok(cache_dir()?.join(format!(
        "heatbath_b{}_{}_therm{}_sweeps{}_or{}_seed{}_{}.nersc",
        p.beta,
        lattice.dims_string(),
        p.therm,
        p.sweeps,
        p.overrelax,
        p.seed,
        if p.hot_start { "hot" } else { "cold" }
    )))
}

/// The record beside a cache file.
pub fn record_path(cache: &Path) -> PathBuf {
    let mut name = cache.file_name().unwrap_or_default().to_os_string();
    name.push(".json");
    cache.with_file_name(name)
}

/// The parameters that make a field (`every` only picks saved sweeps, so it is left out).
fn making(p: &HeatbathParams) -> HeatbathParams {
    HeatbathParams {
        every: 0,
        ..p.clone()
    }
}

/// The cached field when the entry is whole and made by `params` on `lattice`, or why not.
fn reuse(path: &Path, lattice: &Lattice, params: &HeatbathParams) -> Result<GaugeField> {
    let why = |m: String| Error::format(path, m);
    let text = std::fs::read(record_path(path))
        .map_err(|e| why(format!("no record of what made it ({e})")))?;
    let rec: CacheRecord = serde_json::from_slice(&text)
        .map_err(|e| why(format!("its record does not parse ({e})")))?;
    if rec.params != making(params) || rec.dims != lattice.dims {
        return Err(why(format!(
            "its record names other parameters ({:?} on {:?})",
            rec.params, rec.dims
        )));
    }
    let (bytes, crc) = crate::io::staged::file_crc32(path)?;
    if bytes != rec.bytes || format!("{crc:08x}") != rec.crc32 {
        return Err(why(format!(
            "the file ({bytes} bytes, CRC {crc:08x}) is not the one recorded ({} bytes, CRC {})",
            rec.bytes, rec.crc32
        )));
    }
    let (mut g, _) = crate::io::read_gauge_checked(
        path,
        Some(crate::io::GaugeFormat::Nersc),
        Some(lattice.dims),
        lattice.boundary,
        crate::io::ReadOptions::default(),
        false,
    )?;
    let plaq = g.plaquette().total;
    if (plaq - rec.plaquette).abs() > 1e-12 {
        return Err(why(format!(
            "its plaquette {plaq:.15} is not the recorded {:.15}",
            rec.plaquette
        )));
    }
    g.lattice = lattice.clone();
    crate::io::checks::record(
        "heatbath cache",
        path,
        vec![
            Check::new("record", "ok: same parameters and lattice"),
            Check::new("file CRC-32", format!("ok: {}", rec.crc32)),
            Check::new("plaquette", format!("ok: {plaq:.12} as recorded")),
        ],
    );
    Ok(g)
}

/// The field of a `heatbath` gauge source: reused from the cache when its entry checks
/// (module doc), otherwise generated (GPU when usable per `device`) and stored there
/// with its record (field first, record last, each renamed into place).
pub fn cached_field(
    lattice: &Lattice,
    params: &HeatbathParams,
    device: Device,
) -> Result<GaugeField> {
    let path = cache_path(lattice, params)?;
    if path.exists() {
        match reuse(&path, lattice, params) {
            Ok(g) => {
                tracing::info!(path = %path.display(), "heatbath field reused from the cache");
                return Ok(g);
            }
            Err(e) => tracing::warn!("cached heatbath field not reused ({e}); generating it again"),
        }
    }
    let mut p = params.clone();
    // Only the final field is used; no intermediate configurations.
    p.every = usize::MAX;
    tracing::info!(path = %path.display(), "generating the heatbath field (first use)");
    let (field, rep) = crate::app::generate::generate_with(lattice, &p, device, |_, _| Ok(None))?;
    let plaquette = field.plaquette().total;
    tracing::info!(
        plaquette,
        sweeps_per_second = 1.0 / rep.median_sweep_seconds,
        "heatbath field generated"
    );
    let file = crate::io::nersc::stage_nersc(&path, &field, NerscWrite::default())?;
    let (bytes, crc) = crate::io::staged::file_crc32(file.temp_path())?;
    let rec = CacheRecord {
        params: making(params),
        dims: lattice.dims,
        version: env!("CARGO_PKG_VERSION").to_string(),
        plaquette,
        link_trace: field.link_trace(),
        bytes,
        crc32: format!("{crc:08x}"),
    };
    let json = serde_json::to_vec_pretty(&rec).expect("record serialises");
    let record = staged::stage_with(&record_path(&path), |w| w.write_all(&json))?;
    file.commit()?;
    record.commit()?;
    staged::sync_folder(&staged::folder_of(&path));
    let mut field = field;
    field.lattice = lattice.clone();
    Ok(field)
}
