//! qcd-solve: the Wilson-Dirac equation of lattice QCD solved by Krylov methods (the seed's
//! Conjugate Residual, BiCGStab, GCR, CGNE) on NVIDIA GPUs (every historical stencil
//! version of the seed report, and our own) and on the CPU.
//!
//! Layers, each importing only from those below it (docs/architecture.md; CI's
//! validate/module-graph.py checks every depth):
//! - `app`: the commands, and `app::plan`, the one check of a run's options;
//! - `report`, `problem`: reports, tables, charts, progress; a problem and a solve's result;
//! - `config`: the TOML schema, parsed once into typed values, and the flags' overrides;
//! - `solver`: the methods and wrappers, over `linalg` only;
//! - `backend`: the CPU and CUDA implementations of `linalg`'s space, Wilson kernels and
//!   engines; the `[tuning]` options;
//! - `linalg`: the vector space, linear operators and the engines' traits; `dirac`: the
//!   CPU operators; `sources`: wall, noise and Gaussian sources, quark smearing;
//!   `measure`: meson and baryon contractions;
//! - `io`, `gauge_gen`, `smear` (APE and stout smearing of the spatial links),
//!   `gauge_fix` (Coulomb and Landau gauge fixing); `comms`; `field`; `geometry`; and the
//!   small `error`, `clock`,
//!   `rng`, `reduce`, `threads`.

pub mod app;
pub mod backend;
pub mod clock;
pub mod comms;
pub mod config;
pub mod dirac;
pub mod error;
pub mod field;
pub mod gauge_fix;
pub mod gauge_gen;
pub mod geometry;
pub mod io;
pub mod linalg;
pub mod measure;
pub mod problem;
pub mod reduce;
pub mod report;
pub mod rng;
pub mod smear;
pub mod solver;
pub mod sources;
pub mod threads;

pub use error::{Error, Result};
