//! The fused solver engines, optional capabilities of the backend
//! (`crate::linalg::engines`): the CR iteration (`fused`) and BiCGStab (`bicgstab`) with
//! their scalars on the device and their iterations recorded as CUDA graphs.

pub mod bicgstab;
pub mod fused;
