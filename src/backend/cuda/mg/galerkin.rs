//! The Galerkin product of the fine Wilson(-clover, twisted) operator on the device
//! (kernels/mg_galerkin.cu), in double: the host form's formulas
//! (`dirac::coarse::galerkin`) with the links, the site blocks and the prolongator
//! uploaded for the product and freed after it. The result comes back as the host's
//! `CoarseOp`, which the coarse level then uploads in its own form.

use super::kernels::{launch_args, Buffer};
use super::stage::{download_f64, upload_f64, upload_slice};
use super::transfer::device_order;
use crate::backend::cuda::core::compile::{Program, MG_GALERKIN};
use crate::backend::cuda::core::device::{driver_err, function, load_module};
use crate::backend::cuda::core::field::{as_f64, as_f64_mut};
use crate::backend::cuda::dirac::link_upload::chunks::links_as_f64;
use crate::backend::ledger::{Ledger, Purpose};
use crate::clock::record_since;
use crate::dirac::clover::SiteTerms;
use crate::dirac::coarse::{hop_target, Aggregation, CoarseOp, Prolongator, WilsonStencil, HOPS};
use crate::error::{Error, Result};
use crate::field::C64;
use crate::linalg::Precision;
use cudarc::driver::{CudaSlice, CudaStream, LaunchConfig};
use rayon::prelude::*;
use std::sync::Arc;
use std::time::Instant;

/// Threads a block (the kernel's GAL_BLOCK) and output numbers a thread (GAL_PER).
const GAL_BLOCK: usize = 256;
const GAL_PER: usize = 16;

/// The tables the kernel reads besides the prolongator (`transfer::device_order`): each
/// `[aggregate][member]`'s fine site, each fine site's `[aggregate][member]` slot, the hop
/// codes `[x][d] = 2 (x + e_d) + (the hop's phase is -1)` and the hops' spin matrices
/// `[d][4][4]` (`WilsonStencil::hop_spin`). The links are the gauge field's own
/// `[x][mu][row][col]`, uploaded as they are; the site blocks `[x][chirality][6][6]` (none:
/// the site term is 1) are written into the staging buffers (`site_blocks`).
pub struct GalerkinTables {
    pub site_of: Vec<i32>,
    pub slot: Vec<i32>,
    pub nb: Vec<i32>,
    pub proj: Vec<C64>,
}

/// `GalerkinTables` for the fine stencil `w` and a prolongator of `fine_dof` numbers a
/// site on the aggregates `agg` of its lattice.
pub fn galerkin_tables(
    w: &WilsonStencil<'_>,
    agg: &Aggregation,
    fine_dof: usize,
) -> Result<GalerkinTables> {
    let lattice = &w.gauge.lattice;
    if fine_dof != 12 || agg.fine.dims != lattice.dims {
        return Err(Error::internal(format!(
            "device galerkin: a prolongator of {fine_dof} numbers a site on {:?} for the Wilson operator on {:?}",
            agg.fine.dims, lattice.dims
        )));
    }
    let v = lattice.volume();
    if v.checked_mul(2 * HOPS)
        .is_none_or(|n| n > i32::MAX as usize)
    {
        return Err(Error::internal(
            "device galerkin: a lattice too large for 32-bit site tables",
        ));
    }
    let site_of: Vec<i32> = (0..agg.coarse.volume())
        .flat_map(|a| agg.members(a).iter().map(|&x| x as i32))
        .collect();
    let mut slot = vec![0i32; v];
    for (am, &x) in site_of.iter().enumerate() {
        slot[x as usize] = am as i32;
    }
    let mut nb = vec![0i32; v * HOPS];
    nb.par_chunks_mut(HOPS)
        .enumerate()
        .try_for_each(|(x, row)| {
            for (d, code) in row.iter_mut().enumerate() {
                let (y, phase) = hop_target(lattice, x, d);
                if phase.abs() != 1.0 {
                    return Err(Error::internal(format!(
                        "device galerkin: a hop phase {phase} (only +-1)"
                    )));
                }
                *code = 2 * y as i32 + i32::from(phase < 0.0);
            }
            Ok(())
        })?;
    let proj: Vec<C64> = (0..HOPS)
        .flat_map(|d| w.hop_spin(d).iter().flatten().copied())
        .collect();
    Ok(GalerkinTables {
        site_of,
        slot,
        nb,
        proj,
    })
}

/// The device's P^dag D P for the fine stencil `w` and the prolongator `p` (whose fine
/// lattice is `w`'s): the same sums as the host's, in another order.
pub(crate) fn galerkin_on_device(
    stream: &Arc<CudaStream>,
    ledger: &Ledger,
    w: &WilsonStencil<'_>,
    p: &Prolongator,
) -> Result<CoarseOp> {
    let since = Instant::now();
    let v = Buffer::upload(stream, ledger, Precision::Double, &device_order(p))?;
    record_since(&step("prolongator upload"), since);
    galerkin_with(stream, ledger, w, &p.aggregation, p.nvec, &v)
}

/// P^dag D P for the fine stencil `w` and a prolongator on the device: `v`, double, in the
/// device order (`transfer::device_order`) of `nvec` vectors on the aggregates `agg` of
/// `w`'s lattice.
pub(crate) fn galerkin_with(
    stream: &Arc<CudaStream>,
    ledger: &Ledger,
    w: &WilsonStencil<'_>,
    agg: &Aggregation,
    nvec: usize,
    v_dev: &Buffer,
) -> Result<CoarseOp> {
    let since = Instant::now();
    let t = galerkin_tables(w, agg, 12)?;
    record_since(&step("tables (host)"), since);
    let (v, members) = (w.gauge.lattice.volume(), agg.block_volume());
    if v_dev.precision() != Precision::Double || v_dev.len != v * 12 * nvec {
        return Err(Error::internal(format!(
            "device galerkin: a {:?} prolongator of {} numbers for {nvec} vectors on {v} sites",
            v_dev.precision(),
            v_dev.len
        )));
    }
    let aggregates = agg.coarse.volume();
    let cd = 2 * nvec;
    let up_c = |what: &str, z: &[C64]| -> Result<CudaSlice<f64>> {
        stream
            .clone_htod(as_f64(z))
            .map_err(|e| driver_err(&format!("uploading the Galerkin product's {what}"), e))
    };
    let up_i = |what: &str, z: &[i32]| -> Result<CudaSlice<i32>> {
        stream
            .clone_htod(z)
            .map_err(|e| driver_err(&format!("uploading the Galerkin product's {what}"), e))
    };
    let n_out = aggregates * (1 + HOPS) * cd * cd;
    let block_values = w.terms.map_or(0, |_| v * SITE_BLOCK_VALUES);
    let bytes = 16 * (v * 36 + n_out) + 8 * block_values + 4 * (2 * v + v * HOPS);
    let _booking = ledger.book(Purpose::Multigrid, bytes as u64);
    let since = Instant::now();
    let d_site_of = up_i("member sites", &t.site_of)?;
    let d_slot = up_i("site slots", &t.slot)?;
    let d_nb = up_i("neighbours", &t.nb)?;
    let what = "the Galerkin product's links";
    let d_links = upload_slice(stream, links_as_f64(&w.gauge.links), what)?;
    let d_blocks = match w.terms {
        Some(terms) => Some(upload_f64(
            stream,
            block_values,
            SITE_BLOCK_VALUES,
            "the Galerkin product's site blocks",
            |first, out| site_blocks(terms, first / SITE_BLOCK_VALUES, out),
        )?),
        None => None,
    };
    let d_proj = up_c("spin matrices", &t.proj)?;
    drop(t);
    let e = |e| driver_err("allocating the Galerkin product's output", e);
    let out_site: CudaSlice<f64> = stream.alloc_zeros(2 * aggregates * cd * cd).map_err(e)?;
    let out_hops: CudaSlice<f64> = stream
        .alloc_zeros(2 * aggregates * HOPS * cd * cd)
        .map_err(e)?;
    record_since(&step("upload"), since);

    let since = Instant::now();
    let (ctx, s) = (stream.context(), stream);
    let (module, _) = load_module(ctx, &Program::plain(&MG_GALERKIN))?;
    let f = function(&module, "mg_galerkin")?;
    let tiles = (cd * cd).div_ceil(GAL_BLOCK * GAL_PER);
    let cfg = LaunchConfig {
        grid_dim: (
            u32::try_from(aggregates * (1 + HOPS) * tiles)
                .map_err(|_| Error::internal("device galerkin: more blocks than a grid holds"))?,
            1,
            1,
        ),
        block_dim: (GAL_BLOCK as u32, 1, 1),
        shared_mem_bytes: (16 * (12 * cd + 12 * nvec)) as u32,
    };
    let ptr = |b: &CudaSlice<f64>| crate::backend::cuda::core::launch::dptr(b, s);
    let ptr_i = |b: &CudaSlice<i32>| crate::backend::cuda::core::launch::dptr(b, s);
    let args = (
        v_dev.ptr(s),
        ptr_i(&d_site_of),
        ptr_i(&d_slot),
        ptr_i(&d_nb),
        ptr(&d_links),
        d_blocks.as_ref().map_or(0, ptr),
        ptr(&d_proj),
    );
    let (kappa, members, nvec_i, tiles_i) = (w.kappa, members as i32, nvec as i32, tiles as i32);
    let (site_ptr, hops_ptr) = (ptr(&out_site), ptr(&out_hops));
    launch_args!(
        s,
        &f,
        cfg,
        [
            &args.0, &args.1, &args.2, &args.3, &args.4, &args.5, &args.6, &kappa, &members,
            &nvec_i, &tiles_i, &site_ptr, &hops_ptr
        ]
    )?;
    s.synchronize()
        .map_err(|e| driver_err("the Galerkin product's kernel", e))?;
    record_since(&step("kernel"), since);
    let since = Instant::now();
    let mut op = CoarseOp::zeros(agg.coarse.clone(), cd);
    download_f64(s, &out_site, as_f64_mut(&mut op.site))?;
    download_f64(s, &out_hops, as_f64_mut(&mut op.hops))?;
    record_since(&step("download"), since);
    Ok(op)
}

/// f64 values of a fine site's two 6x6 blocks of the site term.
pub const SITE_BLOCK_VALUES: usize = 144;

/// The site blocks of sites `first..` as the kernel reads them, `[x][chirality][6][6]`,
/// into `out` (whole sites), in parallel.
pub fn site_blocks(terms: &SiteTerms, first: usize, out: &mut [f64]) {
    out.par_chunks_mut(SITE_BLOCK_VALUES)
        .enumerate()
        .for_each(|(i, o)| {
            for half in 0..2 {
                for (r, row) in terms.block(first + i, half).iter().enumerate() {
                    let at = half * 72 + r * 12;
                    o[at..at + 12].copy_from_slice(as_f64(row));
                }
            }
        });
}

/// The name of a piece of the product in the run's steps.
fn step(piece: &str) -> String {
    format!("multigrid set-up: Galerkin product: {piece}")
}
