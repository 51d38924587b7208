//! Config fixtures (tests/configs): every good file loads; every bad file is refused with
//! the message its first line `# expect: ...` names, and with the line number where the
//! problem is a value.

use qcd_solve::config::{LoadedConfig, Overrides};
use std::path::Path;

/// A config as the program takes it (`cli::load_config`): parsed, validated, and checked
/// by the plan against what the backends run.
fn load(p: &Path) -> qcd_solve::Result<LoadedConfig> {
    qcd_solve::app::cli::load_config(Some(&p.to_path_buf()), &Overrides::default())
}

/// Command-line overrides applied, then the plan's check (as `cli::load_config` does).
fn apply(c: &mut LoadedConfig, o: &Overrides) -> qcd_solve::Result<()> {
    c.apply(o)?;
    qcd_solve::app::plan::check(c)
}

fn dir(kind: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/configs")
        .join(kind)
}

#[test]
fn good_configs_load() {
    let mut n = 0;
    for e in std::fs::read_dir(dir("good")).unwrap() {
        let p = e.unwrap().path();
        load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        n += 1;
    }
    assert!(n >= 2);
}

#[test]
fn bad_configs_give_their_documented_error() {
    let mut n = 0;
    for e in std::fs::read_dir(dir("bad")).unwrap() {
        let p = e.unwrap().path();
        let text = std::fs::read_to_string(&p).unwrap();
        let expect = text
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("# expect: "))
            .unwrap_or_else(|| panic!("{} has no `# expect:` line", p.display()));
        let err = load(&p).expect_err(&p.display().to_string());
        let msg = err.to_string();
        assert!(
            msg.contains(expect),
            "{}: `{msg}` lacks `{expect}`",
            p.display()
        );
        assert_eq!(err.exit_code(), 2, "{}", p.display());
        // Every message points at a line of the file.
        assert!(
            msg.contains("line "),
            "{}: `{msg}` names no line",
            p.display()
        );
        n += 1;
    }
    assert!(n >= 10);
}

#[test]
fn repository_configs_load() {
    // Every shipped config parses and validates (the ones naming ../shared files are
    // only parsed here; tests/cli.rs runs them).
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs");
    for e in std::fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "toml") {
            load(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        }
    }
}

#[test]
fn embedded_default_is_the_seed_problem() {
    let c = LoadedConfig::embedded_default();
    assert_eq!(c.dims(), [16, 16, 16, 32]);
}

/// `configs/32x32x32x64.toml` resized to 96^3x192 (169869312 sites, more than one GPU's
/// kernels index: 2147483647 / 24 = 89478485), loaded and validated.
fn production_lattice() -> LoadedConfig {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("configs/32x32x32x64.toml");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("LX = 32", "LX = 96")
        .replace("LY = 32", "LY = 96")
        .replace("LZ = 32", "LZ = 96")
        .replace("LT = 64", "LT = 192");
    LoadedConfig::from_str(&text, "96x96x96x192.toml", std::env::temp_dir()).unwrap()
}

#[test]
fn a_lattice_past_one_gpu_needs_a_grid_or_the_cpu() {
    use qcd_solve::config::Device;
    // On one GPU (device "auto" or "cuda"): refused by name, at the file's LT line, exit 2.
    for device in [None, Some(Device::Cuda)] {
        let mut c = production_lattice();
        let e = apply(
            &mut c,
            &Overrides {
                device,
                ..Default::default()
            },
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("lattice.LT") && msg.contains("line 8") && msg.contains("169869312 sites"),
            "{msg}"
        );
        assert_eq!(e.exit_code(), 2);
    }
    // Split 1,1,2,2 (42467328 sites a GPU), or on the CPU: accepted.
    let mut c = production_lattice();
    apply(
        &mut c,
        &Overrides {
            device: Some(Device::Cuda),
            kernel: Some(qcd_solve::backend::cuda::StencilVersion::V3_0),
            grid: Some(vec![1, 1, 2, 2]),
            ..Default::default()
        },
    )
    .unwrap();
    let mut c = production_lattice();
    apply(
        &mut c,
        &Overrides {
            device: Some(Device::Cpu),
            ..Default::default()
        },
    )
    .unwrap();
    // A grid whose sub-lattices are still too large: 96x96x96x384 on 1,1,1,2 leaves
    // 96x96x96x192 a GPU, refused at the flag that set the grid.
    let mut c = production_lattice();
    c.config.lattice.lt = 384;
    let e = apply(
        &mut c,
        &Overrides {
            device: Some(Device::Cuda),
            kernel: Some(qcd_solve::backend::cuda::StencilVersion::V3_0),
            grid: Some(vec![1, 1, 1, 2]),
            ..Default::default()
        },
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("--grid") && msg.contains("each GPU's sub-lattice 96x96x96x192"),
        "{msg}"
    );
}
