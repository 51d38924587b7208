//! The blocked layout's units: W sites per `Lane`, the lane slots of a spinor and a link
//! in a block, the order of the directions, and which lattices the kernel handles.

use crate::geometry::lattice::{Lattice, NDIM};

/// Sites per block (lanes of a vector).
pub const W: usize = 4;
/// Lanes of one spinor block: 4 spins x 3 colours x (re, im).
pub const SPINOR_LANES: usize = 24;
/// Lanes of one link in a block: 3 x 3 x (re, im).
pub const LINK_LANES: usize = 18;

/// One real component of W consecutive sites; 32-byte aligned so that a vector load never
/// splits a cache line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
#[repr(C, align(32))]
pub struct Lane(pub [f64; W]);

/// Lane of the real part of (spin, colour) in a spinor block; the imaginary part follows.
#[inline(always)]
pub const fn spinor_slot(spin: usize, colour: usize) -> usize {
    2 * (3 * spin + colour)
}

/// Lane of Re U[row][col] in one direction's link block; Im follows.
#[inline(always)]
pub const fn link_slot(row: usize, col: usize) -> usize {
    2 * (3 * row + col)
}

/// Where direction mu sits among a block's four links: in the order the kernel uses
/// them (y, z, t, x), so that the link stream, the largest, is read front to back; read
/// out of order, the hardware prefetchers miss it and a core streams it at half speed.
#[inline(always)]
pub const fn link_pos(mu: usize) -> usize {
    (mu + NDIM - 1) % NDIM
}

/// Whether the vectorised kernel handles this lattice (LX a multiple of W).
pub fn supported(l: &Lattice) -> bool {
    l.dims[0].is_multiple_of(W)
}
