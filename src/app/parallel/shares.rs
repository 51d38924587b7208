//! The ranks' shares of the problem: the partitions, a rank's sub-problem, rank 0's
//! scatter of the shares and gather of the solution over `Comms`, and the slab reads.

use crate::backend::cpu_decomposed;
use crate::comms::Comms;
use crate::config::LoadedConfig;
use crate::field::SpinorField;
use crate::geometry::partition::Partition;
use crate::problem::Problem;
use crate::{Error, Result};

/// Every rank's partition of the global lattice, in rank order.
pub fn partitions(global: [usize; 4], grid: [usize; 4]) -> Result<Vec<Partition>> {
    let ranks: usize = grid.iter().product();
    (0..ranks)
        .map(|r| Partition::new(global, grid, r))
        .collect()
}

/// The rank's share of the problem: its sub-lattice of the gauge field and the source.
pub fn local_problem(problem: &Problem, p: &Partition) -> Result<Problem> {
    Ok(Problem {
        lattice: p.local_lattice(problem.lattice.boundary)?,
        gauge: cpu_decomposed::scatter_gauge(&problem.gauge, p)?,
        source: cpu_decomposed::scatter_spinor(&problem.source, p)?,
        gauge_description: problem.gauge_description.clone(),
        gauge_reunitarised: problem.gauge_reunitarised.clone(),
        plaquette: problem.plaquette,
        link_trace: problem.link_trace,
        kappa: problem.kappa,
        csw: problem.csw,
        mu: problem.mu,
        operator: problem.operator,
        source_description: problem.source_description.clone(),
        gauge_fixing: problem.gauge_fixing.clone(),
        setup_seconds: problem.setup_seconds,
    })
}

/// Links as reals: 18 per link (`Su3::push_reals`), 4 links per site.
pub(super) fn links_to_reals(links: &[crate::field::su3::Su3]) -> Vec<f64> {
    let mut out = Vec::with_capacity(18 * links.len());
    for u in links {
        u.push_reals(&mut out);
    }
    out
}

pub(super) fn reals_to_links(r: &[f64]) -> Vec<crate::field::su3::Su3> {
    r.chunks_exact(18)
        .map(crate::field::su3::Su3::from_reals)
        .collect()
}

fn spinor_to_reals(s: &SpinorField) -> Vec<f64> {
    s.data.iter().flat_map(|z| [z.re, z.im]).collect()
}

fn reals_to_spinor(r: &[f64]) -> SpinorField {
    SpinorField {
        data: r
            .chunks_exact(2)
            .map(|c| crate::field::C64::new(c[0], c[1]))
            .collect(),
    }
}

/// Message tags of the launched mode's set-up and gather.
/// Rank 0: every other rank's message `tag` of `reals_per_site` reals per local site, in
/// rank order (ranks 1, 2, ...).
fn receive_from_others(
    io: &mut dyn Comms,
    parts: &[Partition],
    tag: u32,
    reals_per_site: usize,
) -> Result<Vec<Vec<f64>>> {
    let mut received: Vec<Vec<f64>> = parts[1..]
        .iter()
        .map(|q| vec![0.0; q.local_dims().iter().product::<usize>() * reals_per_site])
        .collect();
    let mut recvs: Vec<crate::comms::Incoming> = received
        .iter_mut()
        .enumerate()
        .map(|(i, data)| crate::comms::Incoming {
            from: i + 1,
            tag,
            data,
        })
        .collect();
    io.exchange(&[], &mut recvs)?;
    drop(recvs);
    Ok(received)
}

const TAG_LINKS: u32 = 1 << 20;
const TAG_SOURCE: u32 = TAG_LINKS + 1;
const TAG_SOLUTION: u32 = TAG_LINKS + 2;

/// Rank 0 (`global` = the problem) sends every other rank its share of the gauge field
/// and the source; every rank returns its share (`local_problem`).
pub fn distribute(
    cfg: &LoadedConfig,
    io: &mut dyn Comms,
    parts: &[Partition],
    rank: usize,
    global: Option<&Problem>,
) -> Result<Problem> {
    let c = &cfg.config;
    let p = &parts[rank];
    if let Some(problem) = global {
        let shares: Vec<(Vec<f64>, Vec<f64>)> = parts[1..]
            .iter()
            .map(|q| {
                Ok((
                    links_to_reals(&cpu_decomposed::scatter_gauge(&problem.gauge, q)?.links),
                    spinor_to_reals(&cpu_decomposed::scatter_spinor(&problem.source, q)?),
                ))
            })
            .collect::<Result<_>>()?;
        let sends: Vec<crate::comms::Outgoing> = shares
            .iter()
            .enumerate()
            .flat_map(|(i, (links, source))| {
                [
                    crate::comms::Outgoing {
                        to: i + 1,
                        tag: TAG_LINKS,
                        data: links,
                    },
                    crate::comms::Outgoing {
                        to: i + 1,
                        tag: TAG_SOURCE,
                        data: source,
                    },
                ]
            })
            .collect();
        io.exchange(&sends, &mut [])?;
        return local_problem(problem, p);
    }
    let l = p.local_lattice(c.lattice.boundary)?;
    let mut links = vec![0.0; l.volume() * 4 * 18];
    let mut source = vec![0.0; l.volume() * 24];
    io.exchange(
        &[],
        &mut [
            crate::comms::Incoming {
                from: 0,
                tag: TAG_LINKS,
                data: &mut links,
            },
            crate::comms::Incoming {
                from: 0,
                tag: TAG_SOURCE,
                data: &mut source,
            },
        ],
    )?;
    let gauge = crate::field::GaugeField {
        lattice: l.clone(),
        links: reals_to_links(&links),
    };
    Ok(Problem {
        plaquette: gauge.plaquette(),
        link_trace: gauge.link_trace(),
        lattice: l,
        gauge,
        gauge_description: format!("rank {rank}'s share, from rank 0"),
        gauge_reunitarised: None,
        kappa: c.dirac.kappa,
        csw: c.dirac.csw,
        mu: c.dirac.mu,
        operator: c.solver.operator(),
        source: reals_to_spinor(&source),
        source_description: format!("rank {rank}'s share, from rank 0"),
        gauge_fixing: None,
        setup_seconds: 0.0,
    })
}

/// `[parallel] read = "slab"`: every rank reads and verifies its own part of the gauge
/// file (`io::read_gauge_slab`, the checks combined over `io`: a bad file is refused on
/// every rank); rank 0 gathers the links, builds the whole problem (the config's source
/// around the gathered field) and sends every rank its share of the source. Returns the
/// rank's problem and, on rank 0, the whole one.
pub fn read_slabs(
    cfg: &LoadedConfig,
    io: &mut dyn Comms,
    parts: &[Partition],
    rank: usize,
) -> Result<(Problem, Option<Problem>)> {
    let t0 = std::time::Instant::now();
    let c = &cfg.config;
    let lattice = cfg.lattice()?;
    let p = &parts[rank];
    let (path, format, opts, unchecked) = crate::app::problem::gauge_file(cfg)?;
    let (gauge, info) = crate::io::slab::read_gauge_slab_checked(
        &path,
        format,
        p,
        lattice.boundary,
        (opts, unchecked),
        io,
    )?;
    let description = format!("file {} (each rank read its slab)", path.display());
    let note = info
        .reunitarised
        .then(|| crate::app::problem::reunitarisation_note(&info));
    if rank != 0 {
        // Two exchanges, each one-directional as in `distribute` and `collect_solution`
        // (rank 0 posts the matching receives, then the sends).
        let links = links_to_reals(&gauge.links);
        io.exchange(
            &[crate::comms::Outgoing {
                to: 0,
                tag: TAG_LINKS,
                data: &links,
            }],
            &mut [],
        )?;
        drop(links);
        let mut source = vec![0.0; gauge.lattice.volume() * 24];
        io.exchange(
            &[],
            &mut [crate::comms::Incoming {
                from: 0,
                tag: TAG_SOURCE,
                data: &mut source,
            }],
        )?;
        // A NaN first value (never in a source: files and generators give finite ones)
        // marks a failure of rank 0's, whose exit code follows.
        if source[0].is_nan() {
            return Err(Error::internal(format!(
                "rank 0 could not build the problem around the gathered gauge field (exit code {}); rank 0's error says why",
                source[1]
            )));
        }
        let local = Problem {
            lattice: gauge.lattice.clone(),
            gauge,
            gauge_description: description,
            gauge_reunitarised: note,
            plaquette: info.plaquette,
            link_trace: info.link_trace,
            kappa: c.dirac.kappa,
            csw: c.dirac.csw,
            mu: c.dirac.mu,
            operator: c.solver.operator(),
            source: reals_to_spinor(&source),
            source_description: format!("rank {rank}'s share, from rank 0"),
            gauge_fixing: None,
            setup_seconds: t0.elapsed().as_secs_f64(),
        };
        return Ok((local, None));
    }
    // Rank 0: every other rank's links in, the whole field and problem built, the shares
    // of the source out.
    let received = receive_from_others(io, parts, TAG_LINKS, 4 * 18)?;
    let mut shares = vec![gauge.links];
    shares.extend(received.iter().map(|r| reals_to_links(r)));
    let links = crate::geometry::partition::gather_sites(&shares, parts, 4)?;
    drop(shares);
    let whole = crate::field::GaugeField {
        lattice: lattice.clone(),
        links,
    };
    let built = crate::app::problem::problem_with(cfg, lattice, whole, description, note, t0)
        .and_then(|problem| {
            let sources: Vec<Vec<f64>> = parts[1..]
                .iter()
                .map(|q| {
                    Ok(spinor_to_reals(&cpu_decomposed::scatter_spinor(
                        &problem.source,
                        q,
                    )?))
                })
                .collect::<Result<_>>()?;
            Ok((problem, sources))
        });
    let (problem, sources) = match built {
        Ok(b) => b,
        Err(e) => {
            // The other ranks wait for their source: tell them (see above) and fail.
            let failed: Vec<Vec<f64>> = parts[1..]
                .iter()
                .map(|q| {
                    let mut v = vec![0.0; q.local_dims().iter().product::<usize>() * 24];
                    v[0] = f64::NAN;
                    v[1] = e.exit_code() as f64;
                    v
                })
                .collect();
            let sends: Vec<crate::comms::Outgoing> = failed
                .iter()
                .enumerate()
                .map(|(i, data)| crate::comms::Outgoing {
                    to: i + 1,
                    tag: TAG_SOURCE,
                    data,
                })
                .collect();
            let _ = io.exchange(&sends, &mut []);
            return Err(e);
        }
    };
    let sends: Vec<crate::comms::Outgoing> = sources
        .iter()
        .enumerate()
        .map(|(i, data)| crate::comms::Outgoing {
            to: i + 1,
            tag: TAG_SOURCE,
            data,
        })
        .collect();
    io.exchange(&sends, &mut [])?;
    Ok((local_problem(&problem, p)?, Some(problem)))
}

/// Every rank's share of the solution to rank 0, which returns the whole field (the
/// others None).
pub fn collect_solution(
    io: &mut dyn Comms,
    parts: &[Partition],
    rank: usize,
    local: &SpinorField,
) -> Result<Option<SpinorField>> {
    if rank != 0 {
        let x = spinor_to_reals(local);
        io.exchange(
            &[crate::comms::Outgoing {
                to: 0,
                tag: TAG_SOLUTION,
                data: &x,
            }],
            &mut [],
        )?;
        return Ok(None);
    }
    let received = receive_from_others(io, parts, TAG_SOLUTION, 24)?;
    let mut solutions = vec![local.clone()];
    solutions.extend(received.iter().map(|r| reals_to_spinor(r)));
    Ok(Some(cpu_decomposed::gather_spinor(&solutions, parts)?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::app::problem::build_problem;
    use crate::comms::threads::run_ranks;

    #[test]
    fn rank_0_sends_every_share_and_gets_the_whole_field_back() {
        // The launched mode's data movement over ranks as threads (the same `Comms`
        // calls NCCL makes between processes): every rank's share equals the one cut
        // from the whole problem directly, and the shares gathered back are the source.
        let text = "[lattice]\nLX = 4\nLY = 4\nLZ = 4\nLT = 8\n\n[gauge]\ntype = \"random\"\nseed = 3\n\n[dirac]\nkappa = 0.12\n\n[source]\ntype = \"random\"\nseed = 4\n";
        let cfg = LoadedConfig::from_str(text, "test", ".".into()).unwrap();
        let problem = build_problem(&cfg).unwrap();
        let parts = partitions([4, 4, 4, 8], [2, 1, 1, 2]).unwrap();
        let got = run_ranks(4, |mut io| {
            let rank = io.rank();
            let global = (rank == 0).then(|| build_problem(&cfg)).transpose()?;
            let local = distribute(&cfg, &mut io, &parts, rank, global.as_ref())?;
            let whole = collect_solution(&mut io, &parts, rank, &local.source)?;
            Ok((local.gauge.links, local.source, whole))
        })
        .unwrap();
        for (rank, (links, source, whole)) in got.into_iter().enumerate() {
            let direct = local_problem(&problem, &parts[rank]).unwrap();
            assert!(links
                .iter()
                .zip(&direct.gauge.links)
                .all(|(a, b)| a.0 == b.0));
            assert_eq!(links.len(), direct.gauge.links.len());
            assert_eq!(source, direct.source);
            assert_eq!(whole.is_some(), rank == 0);
            if let Some(w) = whole {
                assert_eq!(w, problem.source);
            }
        }
    }

    fn atb_config(source: &str) -> LoadedConfig {
        let file = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../shared/lattices/ATB_nersc.l8t4b3360"
        );
        let text = format!(
            "[lattice]\nLX = 8\nLY = 8\nLZ = 8\nLT = 4\n\n[gauge]\ntype = \"file\"\npath = \"{file}\"\n\n[dirac]\nkappa = 0.12\n\n[source]\n{source}\n\n[parallel]\ngrid = [2, 1, 1, 2]\nread = \"slab\"\n"
        );
        LoadedConfig::from_str(&text, "test", ".".into()).unwrap()
    }

    #[test]
    fn slab_reads_give_every_rank_the_share_rank_0_would_send() {
        // Expected: the rank-0 path (build_problem reads the whole file; local_problem
        // cuts each share). Each rank reading its own slab must give the same bits, and
        // rank 0 the same whole problem (gathered field, same source).
        let cfg = atb_config("type = \"random\"\nseed = 4");
        let problem = build_problem(&cfg).unwrap();
        let parts = partitions([8, 8, 8, 4], [2, 1, 1, 2]).unwrap();
        let got = run_ranks(4, |mut io| {
            let rank = io.rank();
            read_slabs(&cfg, &mut io, &parts, rank)
        })
        .unwrap();
        let same = |a: &[crate::field::su3::Su3], b: &[crate::field::su3::Su3]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(u, v)| {
                    u.0.iter()
                        .flatten()
                        .zip(v.0.iter().flatten())
                        .all(|(x, y)| {
                            x.re.to_bits() == y.re.to_bits() && x.im.to_bits() == y.im.to_bits()
                        })
                })
        };
        for (rank, (local, whole)) in got.into_iter().enumerate() {
            let direct = local_problem(&problem, &parts[rank]).unwrap();
            assert!(same(&local.gauge.links, &direct.gauge.links), "rank {rank}");
            assert_eq!(local.gauge.lattice, direct.gauge.lattice);
            assert_eq!(local.source, direct.source, "rank {rank}");
            assert_eq!(whole.is_some(), rank == 0);
            if let Some(w) = whole {
                assert!(same(&w.gauge.links, &problem.gauge.links));
                assert_eq!(w.source, problem.source);
                assert_eq!(w.plaquette, problem.plaquette);
            }
        }
    }

    #[test]
    fn a_failure_of_rank_0_after_the_read_reaches_every_rank_at_once() {
        // A source file that does not exist: rank 0 fails building the problem after
        // the slabs were read; the others learn it from their source share at once
        // (they would otherwise wait 120 s for it) and fail naming rank 0.
        let cfg = atb_config("type = \"file\"\npath = \"/no/such/source.npy\"");
        let parts = partitions([8, 8, 8, 4], [2, 1, 1, 2]).unwrap();
        let t = std::time::Instant::now();
        let errs = run_ranks(4, |mut io| {
            let rank = io.rank();
            Ok(read_slabs(&cfg, &mut io, &parts, rank).err())
        })
        .unwrap();
        assert!(t.elapsed().as_secs() < 30, "the ranks waited");
        assert_eq!(errs[0].as_ref().unwrap().exit_code(), 3);
        for e in &errs[1..] {
            let e = e.as_ref().unwrap().to_string();
            assert!(e.contains("rank 0 could not build the problem"), "{e}");
        }
    }
}
