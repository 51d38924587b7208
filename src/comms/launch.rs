//! Where this process stands in a multi-process launch: its rank, the number of
//! ranks, its rank on its node (which GPU it takes) and the address of the rendezvous
//! (`QCD_SOLVE_MASTER`, where rank 0 hands NCCL's unique id to the others).
//!
//! Read from the variables the usual launchers set, the first family that is present
//! winning (a torchrun inside a Slurm job sets both; torchrun's are the ones that count):
//!
//! | launcher | rank | size | local rank |
//! |---|---|---|---|
//! | torchrun (and by hand) | `RANK` | `WORLD_SIZE` | `LOCAL_RANK` |
//! | Open MPI `mpirun` | `OMPI_COMM_WORLD_RANK` | `OMPI_COMM_WORLD_SIZE` | `OMPI_COMM_WORLD_LOCAL_RANK` |
//! | Slurm `srun` | `SLURM_PROCID` | `SLURM_NTASKS` | `SLURM_LOCALID` |
//!
//! `QCD_SOLVE_MASTER=host:port` is needed when there is more than one rank: rank 0 listens
//! there, so it must be a free port on rank 0's host that every rank can reach (not
//! torchrun's `MASTER_PORT`, which torchrun's own store holds). A missing local rank
//! defaults to the rank (right on one node). `QCD_SOLVE_RENDEZVOUS_TIMEOUT` (seconds,
//! default 60) bounds the wait at the rendezvous.

use crate::{Error, Result};
use std::time::Duration;

/// The variable that names rank 0's rendezvous address.
pub const MASTER_VAR: &str = "QCD_SOLVE_MASTER";
/// The variable that sets the rendezvous timeout in seconds.
pub const TIMEOUT_VAR: &str = "QCD_SOLVE_RENDEZVOUS_TIMEOUT";
/// How long the rendezvous waits by default.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

/// The variable families, in order of precedence: (launcher, rank, size, local rank).
const FAMILIES: [(&str, &str, &str, &str); 3] = [
    ("torchrun", "RANK", "WORLD_SIZE", "LOCAL_RANK"),
    (
        "mpirun",
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
    ),
    ("srun", "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID"),
];

/// This process's place in a launch of several processes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Launch {
    pub rank: usize,
    pub size: usize,
    /// The rank among the processes of this node: the GPU ordinal it takes.
    pub local_rank: usize,
    /// `host:port` of rank 0's rendezvous (`QCD_SOLVE_MASTER`); None only when size is 1.
    pub master: Option<String>,
    /// How long the rendezvous waits for the others.
    pub timeout: Duration,
    /// The launcher whose variables were read ("torchrun", "mpirun", "srun").
    pub launcher: &'static str,
}

impl Launch {
    /// From the process environment: None when no launcher variable is set (a single
    /// process), an error naming the variable when one is malformed or inconsistent.
    pub fn from_env() -> Result<Option<Launch>> {
        Launch::from_lookup(|name| std::env::var(name).ok())
    }

    /// As `from_env`, with `get` reading a variable (None: unset). Empty values count as
    /// unset.
    pub fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Option<Launch>> {
        let get = |name: &str| get(name).filter(|v| !v.trim().is_empty());
        let family = FAMILIES
            .iter()
            .find(|(_, rank, size, _)| get(rank).is_some() || get(size).is_some());
        let Some(&(launcher, rank_var, size_var, local_var)) = family else {
            if let Some(m) = get(MASTER_VAR) {
                return Err(Error::invalid(
                    MASTER_VAR,
                    format!(
                        "`{m}` is set but no launcher variable is (RANK and WORLD_SIZE, or \
                         those of mpirun or srun): set them, or unset {MASTER_VAR} for a \
                         single process"
                    ),
                ));
            }
            return Ok(None);
        };
        let number = |var: &str| -> Result<Option<usize>> {
            match get(var) {
                None => Ok(None),
                Some(v) => v.trim().parse::<usize>().map(Some).map_err(|_| {
                    Error::invalid(var, format!("`{v}` is not a non-negative integer"))
                }),
            }
        };
        let (rank, size) = match (number(rank_var)?, number(size_var)?) {
            (Some(r), Some(s)) => (r, s),
            (Some(_), None) => {
                return Err(Error::invalid(
                    size_var,
                    format!("{rank_var} is set but {size_var} is not"),
                ))
            }
            (None, _) => {
                return Err(Error::invalid(
                    rank_var,
                    format!("{size_var} is set but {rank_var} is not"),
                ))
            }
        };
        if size == 0 {
            return Err(Error::invalid(size_var, "must be at least 1, not 0"));
        }
        if rank >= size {
            return Err(Error::invalid(
                rank_var,
                format!("{rank} is not below {size_var}={size} (ranks are 0..{size})"),
            ));
        }
        let local_rank = number(local_var)?.unwrap_or(rank);
        if local_rank >= size {
            return Err(Error::invalid(
                local_var,
                format!("{local_rank} is not below {size_var}={size}"),
            ));
        }
        let master = match get(MASTER_VAR) {
            Some(m) => {
                check_master(&m, size)?;
                Some(m.trim().to_string())
            }
            None if size > 1 => {
                return Err(Error::invalid(
                    MASTER_VAR,
                    format!(
                        "not set, but {size_var}={size}: set it to host:port of a free port \
                         on rank 0's host that every rank can reach (not torchrun's \
                         MASTER_PORT)"
                    ),
                ))
            }
            None => None,
        };
        let timeout = match get(TIMEOUT_VAR) {
            None => DEFAULT_TIMEOUT,
            Some(v) => match v.trim().parse::<f64>() {
                Ok(s) if s.is_finite() && s > 0.0 && s <= 1e6 => Duration::from_secs_f64(s),
                _ => {
                    return Err(Error::invalid(
                        TIMEOUT_VAR,
                        format!("`{v}` is not a number of seconds above 0"),
                    ))
                }
            },
        };
        Ok(Some(Launch {
            rank,
            size,
            local_rank,
            master,
            timeout,
            launcher,
        }))
    }
}

/// `host:port` (`[v6addr]:port` for an IPv6 address) with a port in 1..=65535.
fn check_master(m: &str, size: usize) -> Result<()> {
    let m = m.trim();
    let bad = |why: &str| Error::invalid(MASTER_VAR, format!("`{m}` {why} (expected host:port)"));
    let (host, port) = m.rsplit_once(':').ok_or_else(|| bad("has no port"))?;
    if host.is_empty() || host == "[]" {
        return Err(bad("has no host"));
    }
    if host.contains(':') && !(host.starts_with('[') && host.ends_with(']')) {
        return Err(bad("has an IPv6 address outside brackets"));
    }
    let port: u16 = port
        .parse()
        .map_err(|_| bad("has a port that is not a number in 1..65535"))?;
    if port == 0 && size > 1 {
        return Err(bad("has port 0, which the other ranks cannot reach"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch(vars: &[(&str, &str)]) -> Result<Option<Launch>> {
        Launch::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        })
    }

    fn refusal(vars: &[(&str, &str)]) -> (String, String) {
        match launch(vars) {
            Err(Error::InvalidValue { key, message }) => (key, message),
            other => panic!("expected a refusal for {vars:?}, got {other:?}"),
        }
    }

    #[test]
    fn no_launcher_variables_is_a_single_process() {
        assert_eq!(launch(&[]).unwrap(), None);
        assert_eq!(launch(&[("RANK", ""), ("HOME", "/root")]).unwrap(), None);
    }

    #[test]
    fn torchrun_variables() {
        let l = launch(&[
            ("RANK", "3"),
            ("WORLD_SIZE", "8"),
            ("LOCAL_RANK", "1"),
            ("QCD_SOLVE_MASTER", "node0:29600"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            l,
            Launch {
                rank: 3,
                size: 8,
                local_rank: 1,
                master: Some("node0:29600".into()),
                timeout: DEFAULT_TIMEOUT,
                launcher: "torchrun",
            }
        );
    }

    #[test]
    fn mpirun_and_srun_are_fallbacks_and_torchrun_wins() {
        let l = launch(&[
            ("OMPI_COMM_WORLD_RANK", "1"),
            ("OMPI_COMM_WORLD_SIZE", "2"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "1"),
            ("QCD_SOLVE_MASTER", "[::1]:5000"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(
            (l.rank, l.size, l.local_rank, l.launcher),
            (1, 2, 1, "mpirun")
        );
        let srun = [
            ("SLURM_PROCID", "5"),
            ("SLURM_NTASKS", "6"),
            ("SLURM_LOCALID", "1"),
            ("QCD_SOLVE_MASTER", "10.0.0.1:5000"),
        ];
        let l = launch(&srun).unwrap().unwrap();
        assert_eq!(
            (l.rank, l.size, l.local_rank, l.launcher),
            (5, 6, 1, "srun")
        );
        // torchrun inside a Slurm job: torchrun's variables count.
        let mut both = srun.to_vec();
        both.extend([("RANK", "0"), ("WORLD_SIZE", "4"), ("LOCAL_RANK", "0")]);
        let l = launch(&both).unwrap().unwrap();
        assert_eq!(
            (l.rank, l.size, l.local_rank, l.launcher),
            (0, 4, 0, "torchrun")
        );
    }

    #[test]
    fn one_rank_needs_no_master_and_local_rank_defaults_to_rank() {
        let l = launch(&[("RANK", "0"), ("WORLD_SIZE", "1")])
            .unwrap()
            .unwrap();
        assert_eq!((l.rank, l.size, l.local_rank, l.master), (0, 1, 0, None));
        let l = launch(&[
            ("RANK", "2"),
            ("WORLD_SIZE", "4"),
            ("QCD_SOLVE_MASTER", "h:1"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(l.local_rank, 2);
    }

    #[test]
    fn timeout_variable() {
        let l = launch(&[
            ("RANK", "0"),
            ("WORLD_SIZE", "1"),
            ("QCD_SOLVE_RENDEZVOUS_TIMEOUT", "2.5"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(l.timeout, Duration::from_millis(2500));
        for v in ["0", "-1", "soon", "nan"] {
            let (key, _) = refusal(&[
                ("RANK", "0"),
                ("WORLD_SIZE", "1"),
                ("QCD_SOLVE_RENDEZVOUS_TIMEOUT", v),
            ]);
            assert_eq!(key, TIMEOUT_VAR);
        }
    }

    /// Variables, the variable a refusal names, words of its message.
    type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);

    #[test]
    fn malformed_and_inconsistent_values_name_their_variable() {
        let m = ("QCD_SOLVE_MASTER", "host:1234");
        let cases: &[Case] = &[
            (
                &[("RANK", "x"), ("WORLD_SIZE", "2"), m],
                "RANK",
                "not a non-negative integer",
            ),
            (&[("RANK", "-1"), ("WORLD_SIZE", "2"), m], "RANK", "`-1`"),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "two"), m],
                "WORLD_SIZE",
                "`two`",
            ),
            (
                &[("RANK", "2"), ("WORLD_SIZE", "2"), m],
                "RANK",
                "2 is not below WORLD_SIZE=2",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "0"), m],
                "WORLD_SIZE",
                "at least 1",
            ),
            (
                &[("RANK", "0"), m],
                "WORLD_SIZE",
                "RANK is set but WORLD_SIZE is not",
            ),
            (
                &[("WORLD_SIZE", "2"), m],
                "RANK",
                "WORLD_SIZE is set but RANK is not",
            ),
            (
                &[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_RANK", "2"), m],
                "LOCAL_RANK",
                "2 is not below WORLD_SIZE=2",
            ),
            (
                &[("SLURM_PROCID", "4"), ("SLURM_NTASKS", "4"), m],
                "SLURM_PROCID",
                "not below SLURM_NTASKS=4",
            ),
            (
                &[("RANK", "1"), ("WORLD_SIZE", "2")],
                "QCD_SOLVE_MASTER",
                "not set, but WORLD_SIZE=2",
            ),
            (
                &[("QCD_SOLVE_MASTER", "h:1")],
                "QCD_SOLVE_MASTER",
                "no launcher variable",
            ),
        ];
        for (vars, key, words) in cases {
            let (k, message) = refusal(vars);
            assert_eq!(&k, key, "{vars:?}: {message}");
            assert!(message.contains(words), "{vars:?}: {message}");
        }
    }

    #[test]
    fn master_addresses() {
        let with = |m: &str| launch(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("QCD_SOLVE_MASTER", m)]);
        for good in [
            "localhost:29600",
            "10.1.2.3:1",
            "[fe80::1]:65535",
            " node-7:80 ",
        ] {
            assert!(with(good).is_ok(), "{good}");
        }
        for (bad, words) in [
            ("localhost", "has no port"),
            (":29600", "has no host"),
            ("host:http", "not a number"),
            ("host:65536", "not a number"),
            ("host:0", "port 0"),
            ("fe80::1:80", "IPv6"),
        ] {
            match with(bad) {
                Err(Error::InvalidValue { key, message }) => {
                    assert_eq!(key, MASTER_VAR);
                    assert!(message.contains(words), "{bad}: {message}");
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}
