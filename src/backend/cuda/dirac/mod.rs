//! The Dirac operators on the GPU behind one trait (`stencil_impl::StencilImpl`) with one
//! dispatch: the seed versions 1.0-2.0 (`seed`) and our 3.0 (`fast`, its links laid out by
//! `link_upload`), over what every stencil shares (`blas`: the stream, BLAS-1 and
//! reductions, and on a split lattice the halo).

pub mod blas;
pub mod fast;
pub mod link_upload;
pub mod seed;
pub mod stencil_impl;
