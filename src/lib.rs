//! qcd-solve: the Wilson-Dirac equation of lattice QCD solved by Conjugate Residual on
//! NVIDIA GPUs (every historical stencil version of the seed report) and on the CPU.

pub mod backend;
pub mod dirac;
pub mod error;
pub mod field;
pub mod gauge_gen;
pub mod io;
pub mod lattice;
pub mod reduce;
pub mod rng;
pub mod solver;

pub use error::{Error, Result};
