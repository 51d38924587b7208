//! Where sites are: the lattice a process holds (`lattice`: a local sub-lattice with its
//! global offset, site index, neighbours, parity, boundary phases) and how the global
//! lattice is split over processes (`partition`).

pub mod lattice;
pub mod partition;
