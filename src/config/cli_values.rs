//! The compact command-line forms of `[source]` and `[lattice] boundary` (docs/config.md,
//! "Command line"):
//!
//! - `--source point:X,Y,Z,T[:SPIN:COLOUR]`, `wall:T[:SPIN:COLOUR]`,
//!   `gaussian:X,Y,Z,T:R0[:SPIN:COLOUR]`, `z2:SEED[:T]`, `z4:SEED[:T]`, `random:SEED`,
//!   `plane-wave:NX,NY,NZ,NT[:SPIN:COLOUR]`, `file:PATH` (a `.npy`); SPIN and COLOUR
//!   are numbers or `all`, and default to 0;
//! - `--boundary periodic` (every direction), `antiperiodic` (antiperiodic in time,
//!   periodic in space: the default), or four values for x, y, z, t, e.g.
//!   `periodic,periodic,periodic,antiperiodic` (`p` and `a` for short).

use super::physics::{Index, NoiseConfig, SourceConfig};
use crate::geometry::lattice::{Boundary, NDIM};
use std::path::PathBuf;

/// The forms `--source` takes, for its error messages.
pub const SOURCE_FORMS: &str = "point:X,Y,Z,T[:SPIN:COLOUR], wall:T[:SPIN:COLOUR], \
     gaussian:X,Y,Z,T:R0[:SPIN:COLOUR], z2:SEED[:T], z4:SEED[:T], random:SEED, \
     plane-wave:NX,NY,NZ,NT[:SPIN:COLOUR] or file:PATH";

type Parsed<T> = std::result::Result<T, String>;

fn int(s: &str, what: &str) -> Parsed<i64> {
    s.trim()
        .parse()
        .map_err(|_| format!("{what} must be a whole number, got `{s}`"))
}

fn four(s: &str, what: &str) -> Parsed<[i64; NDIM]> {
    let v: Vec<i64> = s.split(',').map(|p| int(p, what)).collect::<Parsed<_>>()?;
    <[i64; NDIM]>::try_from(v.as_slice())
        .map_err(|_| format!("{what} needs 4 numbers x,y,z,t, got `{s}`"))
}

fn index(s: &str, what: &str) -> Parsed<Index> {
    match s.trim() {
        "all" => Ok(Index::All),
        v => int(v, what).map(Index::One),
    }
}

/// The optional `:SPIN:COLOUR` tail.
fn spin_colour(rest: &[&str]) -> Parsed<(Index, Index)> {
    match rest {
        [] => Ok((Index::One(0), Index::One(0))),
        [s, c] => Ok((index(s, "the spin")?, index(c, "the colour")?)),
        _ => Err(format!(
            "after the position comes SPIN:COLOUR (both, numbers or `all`), got `{}`",
            rest.join(":")
        )),
    }
}

fn noise(rest: &[&str]) -> Parsed<NoiseConfig> {
    let (seed, timeslice) = match rest {
        [seed] => (seed, None),
        [seed, t] => (seed, Some(int(t, "the timeslice")?)),
        _ => return Err("takes SEED or SEED:T".into()),
    };
    let seed = seed
        .trim()
        .parse()
        .map_err(|_| format!("the seed must be a whole number >= 0, got `{seed}`"))?;
    Ok(NoiseConfig {
        seed,
        timeslice,
        dilution: Default::default(),
        time_dilution: 1,
        momentum: [0; 3],
    })
}

/// Parse a `--source` value (module doc). Ranges (a site on the lattice, spin 0..3) are
/// checked with the config, naming `--source`.
pub fn parse_source(s: &str) -> Parsed<SourceConfig> {
    let (kind, rest) = s.split_once(':').unwrap_or((s, ""));
    let kind = kind.trim().to_ascii_lowercase();
    if kind == "file" {
        if rest.is_empty() {
            return Err("file: needs a path, e.g. file:source.npy".into());
        }
        return Ok(SourceConfig::File {
            path: PathBuf::from(rest),
        });
    }
    let parts: Vec<&str> = if rest.is_empty() {
        Vec::new()
    } else {
        rest.split(':').collect()
    };
    let source = match (kind.as_str(), parts.as_slice()) {
        ("point", [site, tail @ ..]) => {
            let (spin, colour) = spin_colour(tail)?;
            SourceConfig::Point {
                site: four(site, "the site")?,
                spin,
                colour,
                smearing: None,
            }
        }
        ("wall", [t, tail @ ..]) => {
            let (spin, colour) = spin_colour(tail)?;
            SourceConfig::Wall {
                t: int(t, "the timeslice")?,
                spin,
                colour,
                momentum: [0; 3],
            }
        }
        ("gaussian", [site, r0, tail @ ..]) => {
            let (spin, colour) = spin_colour(tail)?;
            SourceConfig::Gaussian {
                site: four(site, "the site")?,
                r0: r0
                    .trim()
                    .parse()
                    .map_err(|_| format!("the width r0 must be a number, got `{r0}`"))?,
                spin,
                colour,
            }
        }
        ("z2", rest) => SourceConfig::Z2(noise(rest).map_err(|e| format!("z2: {e}"))?),
        ("z4", rest) => SourceConfig::Z4(noise(rest).map_err(|e| format!("z4: {e}"))?),
        ("random", [seed]) => SourceConfig::Random {
            seed: seed
                .trim()
                .parse()
                .map_err(|_| format!("the seed must be a whole number >= 0, got `{seed}`"))?,
        },
        ("plane-wave", [momentum, tail @ ..]) => {
            let (spin, colour) = spin_colour(tail)?;
            let one = |i: Index, what: &str| match i {
                Index::One(v) => Ok(v),
                Index::All => Err(format!("a plane wave takes one {what}, not `all`")),
            };
            SourceConfig::PlaneWave {
                momentum: four(momentum, "the momentum")?,
                spin: one(spin, "spin")?,
                colour: one(colour, "colour")?,
            }
        }
        _ => {
            return Err(format!(
                "`{s}` is not a source; the forms are {SOURCE_FORMS}"
            ))
        }
    };
    Ok(source)
}

fn boundary(s: &str) -> Parsed<Boundary> {
    match s.trim().to_ascii_lowercase().as_str() {
        "periodic" | "p" => Ok(Boundary::Periodic),
        "antiperiodic" | "a" => Ok(Boundary::Antiperiodic),
        other => Err(format!(
            "`{other}` is not a boundary condition (periodic or antiperiodic)"
        )),
    }
}

/// Parse a `--boundary` value (module doc).
pub fn parse_boundary(s: &str) -> Parsed<[Boundary; NDIM]> {
    use Boundary::{Antiperiodic, Periodic};
    match s.trim().to_ascii_lowercase().as_str() {
        "periodic" => return Ok([Periodic; NDIM]),
        "antiperiodic" => return Ok([Periodic, Periodic, Periodic, Antiperiodic]),
        _ => {}
    }
    let v: Vec<Boundary> = s.split(',').map(boundary).collect::<Parsed<_>>()?;
    <[Boundary; NDIM]>::try_from(v.as_slice()).map_err(|_| {
        format!("takes `periodic`, `antiperiodic` (in time) or four values for x,y,z,t, got `{s}`")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use Boundary::{Antiperiodic as A, Periodic as P};

    #[test]
    fn point_sources_with_and_without_spin_and_colour() {
        match parse_source("point:1,2,3,4").unwrap() {
            SourceConfig::Point {
                site, spin, colour, ..
            } => {
                assert_eq!(site, [1, 2, 3, 4]);
                assert_eq!((spin, colour), (Index::One(0), Index::One(0)));
            }
            other => panic!("{other:?}"),
        }
        match parse_source("point:0,0,0,0:3:all").unwrap() {
            SourceConfig::Point { spin, colour, .. } => {
                assert_eq!((spin, colour), (Index::One(3), Index::All))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_other_source_forms() {
        assert!(matches!(
            parse_source("wall:5").unwrap(),
            SourceConfig::Wall { t: 5, .. }
        ));
        match parse_source("gaussian:1,1,1,2:2.5:1:2").unwrap() {
            SourceConfig::Gaussian {
                site,
                r0,
                spin,
                colour,
            } => {
                assert_eq!(site, [1, 1, 1, 2]);
                assert_eq!(r0, 2.5);
                assert_eq!((spin, colour), (Index::One(1), Index::One(2)));
            }
            other => panic!("{other:?}"),
        }
        match parse_source("z2:7:3").unwrap() {
            SourceConfig::Z2(n) => assert_eq!((n.seed, n.timeslice), (7, Some(3))),
            other => panic!("{other:?}"),
        }
        assert!(matches!(
            parse_source("z4:9").unwrap(),
            SourceConfig::Z4(NoiseConfig {
                seed: 9,
                timeslice: None,
                ..
            })
        ));
        assert!(matches!(
            parse_source("random:11").unwrap(),
            SourceConfig::Random { seed: 11 }
        ));
        assert!(matches!(
            parse_source("plane-wave:1,0,0,0:2:1").unwrap(),
            SourceConfig::PlaneWave {
                momentum: [1, 0, 0, 0],
                spin: 2,
                colour: 1
            }
        ));
        // A path keeps its colons.
        match parse_source("file:a:b.npy").unwrap() {
            SourceConfig::File { path } => assert_eq!(path, PathBuf::from("a:b.npy")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn malformed_sources_say_what_was_expected() {
        for (bad, said) in [
            ("point:1,2,3", "needs 4 numbers"),
            ("point:0,0,0,0:1", "SPIN:COLOUR"),
            ("point:0,0,x,0", "whole number"),
            ("wall", "the forms are"),
            ("delta:0,0,0,0", "the forms are"),
            ("z2:-1", "seed"),
            ("plane-wave:1,0,0,0:all:0", "not `all`"),
            ("file:", "needs a path"),
        ] {
            let e = parse_source(bad).unwrap_err();
            assert!(e.contains(said), "{bad}: {e}");
        }
    }

    #[test]
    fn boundaries_in_words_and_per_direction() {
        assert_eq!(parse_boundary("periodic").unwrap(), [P, P, P, P]);
        assert_eq!(parse_boundary("antiperiodic").unwrap(), [P, P, P, A]);
        assert_eq!(
            parse_boundary("a,periodic,p,antiperiodic").unwrap(),
            [A, P, P, A]
        );
        assert!(parse_boundary("p,p,p").unwrap_err().contains("four values"));
        assert!(parse_boundary("twisted").unwrap_err().contains("`twisted`"));
    }
}
