//! qcd-solve: the Wilson-Dirac equation of lattice QCD solved by Krylov methods (the seed's
//! Conjugate Residual, BiCGStab, GCR, CGNE) on NVIDIA GPUs (every historical stencil
//! version of the seed report, and our own) and on the CPU.
//!
//! Layers, each importing only from those below it:
//! - `app`: the commands (main job, ablate, validate, bench, floor, scale, generate);
//! - `report`: reports, tables, charts, progress; `problem`: a problem and a solve's result;
//! - `config`: the TOML schema;
//! - `solver`: the methods and wrappers, over `linalg`;
//! - `backend`: the CPU and CUDA implementations of `linalg`'s space and Wilson kernels;
//! - `linalg`: the vector space and linear operators; `dirac`: the CPU operators;
//! - `io`, `gauge_gen`, `field`, `geometry`, and the small `rng`, `reduce`,
//!   `threads`, `error`, `clock` (the process clock and timed steps).

pub mod app;
pub mod backend;
pub mod clock;
pub mod comms;
pub mod config;
pub mod dirac;
pub mod error;
pub mod field;
pub mod gauge_gen;
pub mod geometry;
pub mod io;
pub mod linalg;
pub mod problem;
pub mod reduce;
pub mod report;
pub mod rng;
pub mod solver;
pub mod threads;

pub use error::{Error, Result};
