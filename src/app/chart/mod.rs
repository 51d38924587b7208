//! The commands' charts, drawn from their numbers: each command (ablate, scale,
//! kappa-scan, generate) calls the recipe here when it measures, and
//! `qcd-solve chart KIND CSV` calls the same recipe on the CSV the command saved, so a
//! chart is re-rendered, with no GPU, exactly as the command drew it.
//!
//! The titles' lattice, device and date come from the CSV where it records them
//! (columns `lattice`, `device`, `date`), else from `--lattice`, `--device`, `--date`.

pub mod ablate;
pub mod kappa;
pub mod plaquette;
pub mod scale;
mod table;

use crate::error::{Error, Result};
use crate::report::charts::Context;
use std::path::{Path, PathBuf};

pub use table::Table;

/// Which command's CSV `qcd-solve chart` reads, and so which charts it draws.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Kind {
    /// ablate's ablation.csv: speedup, gflops and gflops_own.
    Ablate,
    /// ablate's residuals.csv: residuals (the residual history of each version).
    Residuals,
    /// scale --gpus's scale-ranks.csv: scale-strong and scale-weak.
    ScaleRanks,
    /// scale's scale.csv (CPU threads): scale.
    Scale,
    /// kappa-scan's CSV: <stem>-iterations and <stem>-time.
    KappaScan,
    /// generate's <stem>.plaquette.csv: <stem>.plaquette.
    Plaquette,
}

/// What the command line gives beside the CSV (each `None` unless its flag is given).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Given {
    pub device: Option<String>,
    pub date: Option<String>,
    pub lattice: Option<String>,
    /// scale-ranks: the split ("t" or "zt").
    pub split: Option<String>,
    /// ablate: the CPU the speed-ups are against ("16 threads").
    pub cpu: Option<String>,
}

/// `flag`'s value, else the CSV's column `column` (the same in every row), else an error
/// that names both.
pub fn resolve(given: Option<&str>, table: &Table, column: &str, flag: &str) -> Result<String> {
    if let Some(v) = given.filter(|v| !v.trim().is_empty()) {
        return Ok(v.trim().to_string());
    }
    match table.constant(column)? {
        Some(v) => Ok(v),
        None => Err(Error::invalid(
            flag,
            format!(
                "{} records no `{column}` column: pass {flag} for the chart's title",
                table.path.display()
            ),
        )),
    }
}

/// The context of the charts of `table`: lattice, device and date from the flags or the
/// CSV (the lattice may come from `lattice` when neither has it).
pub fn context(given: &Given, table: &Table, lattice: Option<String>) -> Result<Context> {
    let lattice = match (&given.lattice, lattice) {
        (Some(l), _) => l.clone(),
        (None, Some(l)) => l,
        (None, None) => resolve(None, table, "lattice", "--lattice")?,
    };
    let date = resolve(given.date.as_deref(), table, "date", "--date")?;
    check_date(&date)?;
    Ok(Context {
        lattice,
        device: resolve(given.device.as_deref(), table, "device", "--device")?,
        date,
    })
}

/// A date as YYYY-MM-DD (what `charts::today` writes).
fn check_date(d: &str) -> Result<()> {
    let b = d.as_bytes();
    let ok = b.len() == 10
        && b[4] == b'-'
        && b[7] == b'-'
        && b.iter()
            .enumerate()
            .all(|(i, c)| i == 4 || i == 7 || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "--date",
            format!("needs YYYY-MM-DD, got {d:?}"),
        ))
    }
}

/// `qcd-solve chart KIND CSV [--out DIR]`: the charts of `csv` into `out` (default: the
/// CSV's folder); returns the files written.
pub fn run(kind: Kind, csv: &Path, out: Option<&Path>, given: &Given) -> Result<Vec<PathBuf>> {
    let table = Table::read(csv)?;
    let folder = match out {
        Some(o) => o.to_path_buf(),
        None => csv
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .map_or_else(|| PathBuf::from("."), Path::to_path_buf),
    };
    let stem = csv
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("chart")
        .to_string();
    match kind {
        Kind::Ablate => ablate::versions_from(&table, given, &folder),
        Kind::Residuals => ablate::residuals_from(&table, given, &folder),
        Kind::ScaleRanks => scale::ranks_from(&table, given, &folder),
        Kind::Scale => scale::threads_from(&table, given, &folder),
        Kind::KappaScan => kappa::from(&table, given, &folder.join(stem)),
        Kind::Plaquette => plaquette::from(&table, given, &folder.join(stem)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_checked_and_the_flag_wins_over_the_csv() {
        assert!(check_date("2026-11-23").is_ok());
        assert!(check_date("23/11/2026").is_err());
        assert!(check_date("2026-1-23").is_err());
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("t.csv");
        std::fs::write(&p, "x,device\n1,H100\n2,H100\n").unwrap();
        let t = Table::read(&p).unwrap();
        assert_eq!(resolve(None, &t, "device", "--device").unwrap(), "H100");
        assert_eq!(
            resolve(Some("H200"), &t, "device", "--device").unwrap(),
            "H200"
        );
        // No column and no flag: the error names the flag.
        let e = resolve(None, &t, "date", "--date").unwrap_err().to_string();
        assert!(e.contains("--date"), "{e}");
    }
}
