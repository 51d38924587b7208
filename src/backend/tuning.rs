//! The performance switches a user may set (`[tuning]` in the config, `--tuning KEY=VALUE`
//! on the command line): one typed struct, read once and passed down to where each
//! switch acts (`CudaOptions::tuning`, the solvers' options). Every default is the
//! measured best (validate/RESULTS.md); every value gives the same answers, only the time
//! differs. docs/tuning.md describes each key.

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// Where the decomposed operator packs its faces.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PackOn {
    /// On the communication stream, so the interior kernel does not wait for the pack.
    #[default]
    Comm,
    /// On the main stream before the interior kernel.
    Main,
}

/// Which kernel launches get timing events.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LaunchEvents {
    /// Each kernel's first launches, then one in a fixed number.
    #[default]
    Sample,
    /// Every launch (slows small operators down).
    All,
    /// None.
    None,
}

/// What the device's memory pool keeps of freed memory across synchronisations
/// (`pool_keep_mib`): everything (`"all"`, the default) or at most so many MiB (0: CUDA's
/// default, everything goes back at each synchronisation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PoolKeep {
    #[default]
    All,
    Mib(u64),
}

impl Serialize for PoolKeep {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        match self {
            PoolKeep::All => s.serialize_str("all"),
            PoolKeep::Mib(m) => s.serialize_u64(*m),
        }
    }
}

impl<'de> Deserialize<'de> for PoolKeep {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = PoolKeep;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("\"all\" or a whole number of MiB >= 0")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<PoolKeep, E> {
                Ok(PoolKeep::Mib(v))
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<PoolKeep, E> {
                u64::try_from(v)
                    .map(PoolKeep::Mib)
                    .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(v), &self))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<PoolKeep, E> {
                if v == "all" {
                    Ok(PoolKeep::All)
                } else {
                    Err(E::invalid_value(serde::de::Unexpected::Str(v), &self))
                }
            }
        }
        d.deserialize_any(Visit)
    }
}

impl PoolKeep {
    /// The pool's release threshold in bytes (`u64::MAX`: keep everything).
    pub fn bytes(self) -> u64 {
        match self {
            PoolKeep::All => u64::MAX,
            PoolKeep::Mib(m) => m.saturating_mul(1 << 20),
        }
    }
}

/// The performance switches (see docs/tuning.md). `Default` is today's behaviour.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields, default)]
pub struct TuningOptions {
    /// Programmatic dependent launch of the kernels that wait for their inputs (default
    /// true; off while `timeline` is on).
    pub pdl: bool,
    /// The decomposed operator's communication stream at the device's highest priority
    /// (default true).
    pub comm_priority: bool,
    /// Ranks as threads on several GPUs over NCCL end the fused CR's reductions with one
    /// kernel over peer memory instead of NCCL's all-gather (default true).
    pub peer_sums: bool,
    /// Where the decomposed operator packs its faces (default `comm`).
    pub pack_on: PackOn,
    /// The fused BiCGStab's launches recorded as CUDA graphs (default true).
    pub bicgstab_graphs: bool,
    /// `Space::queue_recorded` records a CUDA graph of the queued updates (default false).
    pub record_updates: bool,
    /// The graphs' time line: an event after every captured launch, logged (a diagnostic;
    /// default false).
    pub timeline: bool,
    /// Which launches get timing events (default `sample`).
    pub launch_events: LaunchEvents,
    /// MiB of each shared pinned staging buffer (1..=1024, default 64).
    pub stage_mib: usize,
    /// Shared staging buffers the transfers cycle through (2..=8, default 2).
    pub stage_buffers: usize,
    /// MiB of each worker thread's staging buffers in the link upload (1..=64, default 3).
    pub lane_mib: usize,
    /// Buffers each worker thread cycles through (2..=8, default 2).
    pub lane_buffers: usize,
    /// What the device's memory pool keeps of freed memory (default: everything).
    pub pool_keep_mib: PoolKeep,
}

impl Default for TuningOptions {
    fn default() -> Self {
        TuningOptions {
            pdl: true,
            comm_priority: true,
            peer_sums: true,
            pack_on: PackOn::Comm,
            bicgstab_graphs: true,
            record_updates: false,
            timeline: false,
            launch_events: LaunchEvents::Sample,
            stage_mib: 64,
            stage_buffers: 2,
            lane_mib: 3,
            lane_buffers: 2,
            pool_keep_mib: PoolKeep::All,
        }
    }
}

impl TuningOptions {
    /// The numbers' bounds: an error naming the key (`tuning.KEY`) and its value.
    pub fn validate(&self) -> Result<()> {
        let bounded = [
            ("stage_mib", self.stage_mib, 1..=1024),
            ("stage_buffers", self.stage_buffers, 2..=8),
            ("lane_mib", self.lane_mib, 1..=64),
            ("lane_buffers", self.lane_buffers, 2..=8),
        ];
        for (key, value, range) in bounded {
            if !range.contains(&value) {
                return Err(Error::invalid(
                    format!("tuning.{key}"),
                    format!(
                        "must be a whole number from {} to {}; got {value}",
                        range.start(),
                        range.end()
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Programmatic dependent launch as taken: off while the time line is recorded (its
    /// event nodes sit between the kernels).
    pub fn pdl_on(&self) -> bool {
        self.pdl && !self.timeline
    }

    /// `self` with one `KEY=VALUE` setting applied (the command line's `--tuning`): the
    /// value is read as TOML (a bare word is taken as a string), through the same serde
    /// path as the config's `[tuning]` table, so a wrong key or value is named.
    pub fn with_setting(&self, setting: &str) -> Result<Self> {
        let bad = |m: String| Error::invalid("--tuning", m);
        let (key, value) = setting
            .split_once('=')
            .ok_or_else(|| bad(format!("expected KEY=VALUE, got {setting:?}")))?;
        let (key, value) = (key.trim(), value.trim());
        let mut table = toml::Table::try_from(self).map_err(|e| bad(e.to_string()))?;
        let parsed = format!("v = {value}")
            .parse::<toml::Table>()
            .ok()
            .and_then(|mut t| t.remove("v"))
            .unwrap_or_else(|| toml::Value::String(value.to_string()));
        table.insert(key.to_string(), parsed);
        let out: TuningOptions = table
            .try_into()
            .map_err(|e: toml::de::Error| bad(format!("{key}={value}: {}", e.message())))?;
        out.validate()?;
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_round_trip_and_validate() {
        let d = TuningOptions::default();
        d.validate().unwrap();
        let text = toml::to_string(&d).unwrap();
        assert_eq!(toml::from_str::<TuningOptions>(&text).unwrap(), d);
        assert_eq!(toml::from_str::<TuningOptions>("").unwrap(), d);
        assert!(d.pdl_on());
    }

    #[test]
    fn settings_parse_through_serde() {
        let d = TuningOptions::default();
        let t = d.with_setting("pdl=false").unwrap();
        assert!(!t.pdl && !t.pdl_on());
        let t = d.with_setting("pack_on=main").unwrap();
        assert_eq!(t.pack_on, PackOn::Main);
        let t = d.with_setting("launch_events = \"all\"").unwrap();
        assert_eq!(t.launch_events, LaunchEvents::All);
        assert_eq!(d.with_setting("stage_mib=16").unwrap().stage_mib, 16);
        assert!(!d.with_setting("timeline=true").unwrap().pdl_on());
        assert_eq!(d.pool_keep_mib.bytes(), u64::MAX);
        let t = d.with_setting("pool_keep_mib=1024").unwrap();
        assert_eq!(t.pool_keep_mib.bytes(), 1 << 30);
        assert_eq!(
            d.with_setting("pool_keep_mib=0")
                .unwrap()
                .pool_keep_mib
                .bytes(),
            0
        );
        // Saturates instead of wrapping.
        assert_eq!(PoolKeep::Mib(u64::MAX).bytes(), u64::MAX);
        let t = t.with_setting("pool_keep_mib=all").unwrap();
        assert_eq!(t.pool_keep_mib, PoolKeep::All);
        // The table form the report records reads back as the same options.
        let text = toml::to_string(&t.with_setting("pool_keep_mib=7").unwrap()).unwrap();
        assert!(text.contains("pool_keep_mib = 7"), "{text}");
        assert!(toml::to_string(&d)
            .unwrap()
            .contains("pool_keep_mib = \"all\""));
    }

    #[test]
    fn bad_settings_are_named() {
        let d = TuningOptions::default();
        let msg = |s: &str| d.with_setting(s).unwrap_err().to_string();
        assert!(
            msg("no_such_key=1").contains("no_such_key"),
            "{}",
            msg("no_such_key=1")
        );
        assert!(
            msg("pack_on=side").contains("side"),
            "{}",
            msg("pack_on=side")
        );
        assert!(msg("pdl=maybe").contains("pdl"), "{}", msg("pdl=maybe"));
        assert!(msg("pdl").contains("KEY=VALUE"));
        let m = msg("stage_mib=0");
        assert!(m.contains("tuning.stage_mib") && m.contains("got 0"), "{m}");
        for bad in [
            "pool_keep_mib=-1",
            "pool_keep_mib=lots",
            "pool_keep_mib=1.5",
        ] {
            let m = msg(bad);
            assert!(m.contains("pool_keep_mib"), "{bad}: {m}");
        }
        let m = msg("lane_buffers=9");
        assert!(
            m.contains("tuning.lane_buffers") && m.contains("got 9"),
            "{m}"
        );
    }
}
