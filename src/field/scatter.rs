//! A global field's share on one rank of a split lattice, and back (`Partition`'s
//! scatter and gather of site arrays, typed): the one implementation both decomposed
//! backends and the app use.

use crate::field::spinor::SITE_LEN;
use crate::field::{GaugeField, SpinorField, C64};
use crate::geometry::lattice::NDIM;
use crate::geometry::partition::{gather_sites, Partition};
use crate::{Error, Result};

/// Rank `p`'s part of a global gauge field: its links, on its local lattice (global
/// extents and offset set, boundary conditions of the global field).
pub fn scatter_gauge(global: &GaugeField, p: &Partition) -> Result<GaugeField> {
    let l = &global.lattice;
    if l.dims != p.global || l.global != l.dims || l.offset != [0; NDIM] {
        return Err(Error::internal(format!(
            "scatter: a gauge field on {} (global {:?}, offset {:?}) is not the global lattice {:?}",
            l.dims_string(),
            l.global,
            l.offset,
            p.global
        )));
    }
    Ok(GaugeField {
        lattice: p.local_lattice(l.boundary)?,
        links: p.scatter_sites(&global.links, NDIM)?,
    })
}

/// Rank `p`'s part of a global spinor field (sites in local lexicographic order).
pub fn scatter_spinor(global: &SpinorField, p: &Partition) -> Result<SpinorField> {
    Ok(SpinorField {
        data: p.scatter_sites(&global.data, SITE_LEN)?,
    })
}

/// The global spinor field whose parts are `parts` (rank order; `partitions[r]` is rank
/// r's): the inverse of `scatter_spinor`.
pub fn gather_spinor(parts: &[SpinorField], partitions: &[Partition]) -> Result<SpinorField> {
    let slices: Vec<&[C64]> = parts.iter().map(|s| s.data.as_slice()).collect();
    Ok(SpinorField {
        data: gather_sites(&slices, partitions, SITE_LEN)?,
    })
}
