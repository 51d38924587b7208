//! Flags that do not apply to the run as configured: each is refused (exit 2, saying what
//! to do) or warned about, never silently dropped. Checked by `LoadedConfig::apply` after
//! the overrides, before `app::plan::check` compares the options with the backends.
//!
//! - On the CPU (`device = "cpu"`) the GPU's flags (`--kernel`, `--reconstruct`,
//!   `--multiple`, `--no-tune`, `--tuning`) change nothing: a warning each.
//! - On a GPU (or `auto`), `--reconstruct 12` or `8` with a seed kernel is refused with
//!   the flag to add (`--kernel 3.0`); `--multiple` is refused where the kernel has no
//!   workgroup multiple (1.0, 1.1, 3.0) or where the autotuner would replace it
//!   (`[backend] tune = true`, the default: add `--no-tune`).
//! - Solver flags for another method or precision (`--restart` off GCR and MG,
//!   `--check-every` off CR and BiCGStab, `--reliable-delta` in double), `--read` without a
//!   split lattice, and `--accept-unchecked` without a gauge file: a warning each.
//!
//! `--threads` applies everywhere (on a GPU run it sizes the host's pool: reading,
//! the CPU check), so it is neither.

use super::{Device, GaugeConfig, LoadedConfig, Overrides, SolverPrecision};
use crate::error::Result;
use crate::solver::Method;

impl LoadedConfig {
    /// Refuse the flags of `o` that cannot apply to this config (module doc); return a
    /// warning for each one that changes nothing.
    pub fn inapplicable_flags(&self, o: &Overrides) -> Result<Vec<String>> {
        let mut warn = Vec::new();
        let c = &self.config;
        if c.backend.device == Device::Cpu {
            let gpu_flags = [
                ("--kernel", o.kernel.is_some()),
                ("--reconstruct", o.reconstruct.is_some()),
                ("--multiple", o.multiple.is_some()),
                ("--no-tune", o.no_tune),
                ("--tuning", !o.tuning.is_empty()),
            ];
            for (flag, _) in gpu_flags.iter().filter(|(_, given)| *given) {
                warn.push(format!(
                    "{flag} sets the GPU's kernel; with device cpu the CPU operator runs, so \
                     it changes nothing (drop it, or run with --device cuda or auto)"
                ));
            }
        } else {
            self.gpu_flags(o)?;
        }
        warn.extend(self.solver_flags(o));
        if o.read.is_some() && !c.parallel.is_decomposed() {
            warn.push(
                "--read says who reads a gauge file on a split lattice; the grid has one rank \
                 (no --grid), so it changes nothing"
                    .into(),
            );
        }
        if o.accept_unchecked && !matches!(c.gauge.field, GaugeConfig::File { .. }) {
            warn.push(
                "--accept-unchecked applies to gauge files; the gauge field here is generated, \
                 so it changes nothing"
                    .into(),
            );
        }
        Ok(warn)
    }

    /// The GPU's flags on a run that may use a GPU.
    fn gpu_flags(&self, o: &Overrides) -> Result<()> {
        let b = &self.config.backend;
        if let Some(r) = o.reconstruct {
            if !b.kernel.supports_reconstruct(r) {
                let kernel_from = if o.kernel.is_some() {
                    "--kernel".to_string()
                } else {
                    "backend.kernel, the config's".to_string()
                };
                return Err(self.bad(
                    "backend",
                    "reconstruct",
                    format!(
                        "{r} reals per link is kernel 3.0's link form, and the kernel is {} \
                         ({kernel_from}): add --kernel 3.0, or run on the CPU (--device cpu), \
                         which stores full links",
                        b.kernel
                    ),
                ));
            }
        }
        if o.multiple.is_some() {
            if !b.kernel.uses_multiple() {
                return Err(self.bad(
                    "backend",
                    "multiple",
                    format!(
                        "kernel {} has no workgroup multiple (versions 1.2 to 2.0 have one): \
                         drop --multiple",
                        b.kernel
                    ),
                ));
            }
            if b.tune {
                return Err(self.bad(
                    "backend",
                    "multiple",
                    "the autotuner chooses the multiple ([backend] tune = true, the default) \
                     and would replace this one: add --no-tune to run with it"
                        .into(),
                ));
            }
        }
        Ok(())
    }

    /// Solver flags that belong to another method or precision.
    fn solver_flags(&self, o: &Overrides) -> Vec<String> {
        let s = &self.config.solver;
        let mut warn = Vec::new();
        if o.restart.is_some() && !matches!(s.method, Method::Gcr | Method::Mg) {
            warn.push(format!(
                "--restart is GCR's (method gcr or mg); method {} does not restart, so it \
                 changes nothing",
                s.method
            ));
        }
        if o.check_every.is_some() && !matches!(s.method, Method::Cr | Method::Bicgstab) {
            warn.push(format!(
                "--check-every paces the fused CR and BiCGStab iterations; method {} checks \
                 every iteration, so it changes nothing",
                s.method
            ));
        }
        if o.reliable_delta.is_some() && s.precision == SolverPrecision::Double {
            warn.push(
                "--reliable-delta paces mixed precision's reliable updates; the solve is in \
                 double (no --precision single-double or half-double), so it changes nothing"
                    .into(),
            );
        }
        warn
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::{Reconstruct, StencilVersion};

    fn small(device: &str) -> LoadedConfig {
        let text = format!(
            "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 4\n\n[gauge]\ntype = \"unit\"\n\n\
             [dirac]\nkappa = 0.12\n\n[backend]\ndevice = \"{device}\"\n"
        );
        LoadedConfig::from_str(&text, "t.toml", "".into()).unwrap()
    }

    fn apply(c: &mut LoadedConfig, o: Overrides) -> Result<Vec<String>> {
        c.apply(&o)?;
        c.inapplicable_flags(&o)
    }

    #[test]
    fn gpu_flags_on_the_cpu_are_warned_about() {
        let mut c = small("cpu");
        // --reconstruct 12 with the default kernel 1.6.1: the CPU stores full links, so
        // this is a warning there, not the GPU's refusal.
        let o = Overrides {
            kernel: Some(StencilVersion::V3_0),
            multiple: Some(8),
            ..Default::default()
        };
        let w = apply(&mut c, o).unwrap();
        assert_eq!(w.len(), 2, "{w:?}");
        assert!(w[0].starts_with("--kernel") && w[1].starts_with("--multiple"));
        let mut c = small("cpu");
        let w = apply(
            &mut c,
            Overrides {
                reconstruct: Some(Reconstruct::R12),
                ..Default::default()
            },
        );
        // The plan's check (app::plan) still sees kernel 1.6.1 with 12 reals; this layer
        // only warns.
        let w = w.unwrap_or_else(|e| panic!("{e}"));
        assert!(w[0].starts_with("--reconstruct"), "{w:?}");
    }

    #[test]
    fn reconstruct_on_a_seed_kernel_says_to_add_kernel_3_0() {
        let mut c = small("cuda");
        let e = apply(
            &mut c,
            Overrides {
                reconstruct: Some(Reconstruct::R12),
                ..Default::default()
            },
        )
        .unwrap_err();
        assert_eq!(e.exit_code(), 2);
        let m = e.to_string();
        assert!(
            m.contains("--reconstruct") && m.contains("add --kernel 3.0"),
            "{m}"
        );
        let mut c = small("auto");
        let o = Overrides {
            reconstruct: Some(Reconstruct::R12),
            kernel: Some(StencilVersion::V3_0),
            ..Default::default()
        };
        assert!(apply(&mut c, o).unwrap().is_empty());
    }

    #[test]
    fn multiple_is_refused_where_nothing_would_use_it() {
        for (kernel, no_tune, said) in [
            (StencilVersion::V3_0, true, "has no workgroup multiple"),
            (StencilVersion::V1_6_1, false, "add --no-tune"),
        ] {
            let mut c = small("auto");
            let o = Overrides {
                kernel: Some(kernel),
                multiple: Some(8),
                no_tune,
                ..Default::default()
            };
            let e = apply(&mut c, o).unwrap_err();
            assert!(e.to_string().contains(said), "{e}");
        }
        let mut c = small("auto");
        let o = Overrides {
            multiple: Some(8),
            no_tune: true,
            ..Default::default()
        };
        assert!(apply(&mut c, o).unwrap().is_empty());
    }

    #[test]
    fn solver_flags_of_another_method_are_warned_about() {
        let mut c = small("cpu");
        let o = Overrides {
            restart: Some(20),
            reliable_delta: Some(0.01),
            read: Some(super::super::ReadMode::Rank0),
            ..Default::default()
        };
        let w = apply(&mut c, o).unwrap();
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w[0].starts_with("--restart") && w[1].starts_with("--reliable-delta"));
        assert!(w[2].starts_with("--read"));
        let mut c = small("cpu");
        let o = Overrides {
            restart: Some(20),
            method: Some(Method::Gcr),
            ..Default::default()
        };
        assert!(apply(&mut c, o).unwrap().is_empty());
    }
}
