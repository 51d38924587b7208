//! `qcd-solve init [--gauge FILE] [--out PATH]`: a commented config to start from. With a
//! gauge file, its extents and format are read from its header and written in; without
//! one, a quick 8^4 problem on a random field. The file is created, never replaced (an
//! existing PATH is refused, exit 3).

use crate::error::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};

/// What `init` knows about a gauge file: its absolute path, extents and format.
pub struct GaugeFacts {
    pub path: PathBuf,
    pub dims: [usize; 4],
    pub format: String,
}

/// The facts of `file` from its header (format detected).
pub fn gauge_facts(file: &Path) -> Result<GaugeFacts> {
    let (dims, format) = crate::config::resolve::gauge_file_header(file, "auto")?;
    let path = file.canonicalize().map_err(|e| Error::io(file, e))?;
    Ok(GaugeFacts { path, dims, format })
}

/// The `[lattice]` and `[gauge]` tables: the file's, or the random field's.
fn field_tables(gauge: Option<&GaugeFacts>) -> String {
    match gauge {
        Some(g) => format!(
            "# The extents are the gauge file's (from its header); leaving them out takes them\n\
             # from the file, giving them checks them against it.\n\
             [lattice]\n\
             LX = {}\nLY = {}\nLZ = {}\nLT = {}\n\
             boundary = [\"periodic\", \"periodic\", \"periodic\", \"antiperiodic\"]   # fermions, x y z t\n\
             \n\
             [gauge]\n\
             type = \"file\"\n\
             path = {}\n\
             format = \"{}\"        # detected from the file; \"auto\" detects it on every run\n\
             # reunitarise = true   # project links off SU(3) beyond the file's precision\n",
            g.dims[0],
            g.dims[1],
            g.dims[2],
            g.dims[3],
            toml::Value::String(g.path.display().to_string()),
            g.format
        ),
        None => "[lattice]\n\
             LX = 8\nLY = 8\nLZ = 8\nLT = 8\n\
             boundary = [\"periodic\", \"periodic\", \"periodic\", \"antiperiodic\"]   # fermions, x y z t\n\
             \n\
             [gauge]\n\
             type = \"random\"      # a seeded random SU(3) field; for your own file:\n\
             seed = 2013          # type = \"file\", path = \"...\", format = \"auto\"\n"
            .to_string(),
    }
}

/// The commented config (module doc).
pub fn template(gauge: Option<&GaugeFacts>) -> String {
    format!(
        "# A qcd-solve config (docs/config.md lists every key). Relative paths in this file\n\
         # are relative to its folder; paths on the command line to the current directory.\n\
         # Run it with: qcd-solve THIS_FILE   (flags override keys: --kappa, --device, ...)\n\
         \n\
         {}\
         \n\
         [dirac]\n\
         kappa = 0.12\n\
         # csw = 1.0            # clover coefficient c_sw; 0 = plain Wilson\n\
         # mu = 0.01            # twisted mass (not with method = \"cr\")\n\
         \n\
         [source]\n\
         type = \"point\"         # or wall, gaussian, z2, z4, random, plane-wave, file\n\
         site = [0, 0, 0, 0]    # x, y, z, t\n\
         spin = 0               # 0..3, or \"all\" (a propagator: every column)\n\
         colour = 0             # 0..2, or \"all\"\n\
         \n\
         [solver]\n\
         method = \"bicgstab\"    # cr | bicgstab | gcr | cgne | mg\n\
         tolerance = 1e-10      # on ||r|| / ||b||\n\
         max_iterations = 2000\n\
         # preconditioning = \"even-odd\"\n\
         # precision = \"single-double\"\n\
         \n\
         [backend]\n\
         device = \"auto\"        # auto | cpu | cuda\n\
         # kernel = \"3.0\"       # the GPU kernel with every option\n\
         \n\
         [output]\n\
         # Left out, the report and the solution go to out/<this file's stem>.json and\n\
         # .npy beside this file; false writes none.\n\
         # report = \"out/run.json\"\n\
         # solution = \"out/run.npy\"\n\
         # gauge = \"out/gauge.nersc\"   # the field used, as NERSC\n",
        field_tables(gauge)
    )
}

/// Write the template to `out`, which must not exist; returns what was written.
pub fn run(gauge: Option<&Path>, out: &Path) -> Result<String> {
    let facts = gauge.map(gauge_facts).transpose()?;
    let text = template(facts.as_ref());
    if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    }
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(out)
        .map_err(|e| {
            let why = if e.kind() == std::io::ErrorKind::AlreadyExists {
                "exists; init never replaces a file (give another --out)".to_string()
            } else {
                e.to_string()
            };
            Error::io(out, std::io::Error::new(e.kind(), why))
        })?;
    f.write_all(text.as_bytes())
        .map_err(|e| Error::io(out, e))?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_without_a_file_loads() {
        let c =
            crate::config::LoadedConfig::from_str(&template(None), "run.toml", "".into()).unwrap();
        assert_eq!(c.dims(), [8, 8, 8, 8]);
        assert_eq!(c.config.dirac.kappa, 0.12);
    }
}
