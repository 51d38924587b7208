//! qcd-solve: the Wilson-Dirac equation of lattice QCD solved by Conjugate Residual on
//! NVIDIA GPUs (every historical stencil version of the seed report) and on the CPU.

pub mod ablate;
pub mod backend;
pub mod bench;
pub mod charts;
pub mod cli;
pub mod config;
pub mod cuda;
pub mod dirac;
pub mod error;
pub mod field;
pub mod floor;
pub mod gauge_gen;
pub mod generate;
pub mod io;
pub mod lattice;
pub mod linalg;
pub mod memory;
pub mod progress;
pub mod reduce;
pub mod report;
pub mod rng;
pub mod run;
pub mod scale;
pub mod solver;
pub mod threads;
pub mod tune;

pub use error::{Error, Result};
