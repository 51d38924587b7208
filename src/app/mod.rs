//! The application: the commands a user runs. Everything here sits on top of the library
//! (config, geometry, fields, io, linalg, solver, backend, report); nothing below imports
//! from here.
//!
//! - `cli`: the command line and dispatch; `run`: the main job (problem, plan, solve,
//!   outputs); `plan`: which options a backend and kernel version support, checked in one
//!   place; `device`: choosing the GPU or the CPU;
//! - `tuning`: launch geometry from the tune cache or a sweep;
//! - `footprint`: the device memory a GPU plan will hold, estimated before allocating;
//! - `embed`: the jobs for a host language (the Python package), fields in memory;
//! - `ablate`, `validate`, `bench`, `floor`, `scale`, `generate`, `init`: the other commands;
//!   `chart`: their charts, drawn when they measure and again from their CSV files.

pub mod ablate;
pub mod bench;
pub mod chart;
pub mod cli;
pub mod device;
pub mod embed;
pub mod floor;
pub mod footprint;
pub mod generate;
pub mod heatbath_cache;
pub mod init;
pub mod kappa_scan;
pub mod memory;
pub mod output_set;
pub mod outputs;
pub mod parallel;
pub mod plan;
pub mod problem;
pub mod propagator;
pub mod rhs;
pub mod run;
pub mod scale;
pub mod solve;
pub mod solve_batch;
pub mod tuning;
pub mod validate;
