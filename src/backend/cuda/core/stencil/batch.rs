//! One launch of 3.0's batch entries (kernels/stencil_v3.cu `stencil_v3_batch`,
//! `stencil_v3_batch_col`, `stencil_v3_batch_parity`): the operator of a `V3Launch` applied
//! to up to `BATCH_MAX` right-hand sides at once, their fields' addresses passed by value
//! in the launch's parameters (`V3Rhs`, the kernel's `V3Batch`), and `launch_v3_batch`.

use crate::backend::cuda::core::kernels::{Kernel, V3Batch, BATCH_MAX};
use crate::backend::cuda::core::stencil::v3::{launch_shape, V3Kernels, V3Launch};
use crate::backend::cuda::core::timing::{launch_values, GpuStream};
use crate::error::{Error, Result};

/// The right-hand sides' device addresses (kernels/stencil_v3.cu `struct V3Batch`, the
/// same layout: six arrays of `BATCH_MAX` pointers): entry k of each array is right-hand
/// side k's input, y (0: none, out = [g5] c H inp), output, and, for half fields, their
/// norms (0 otherwise). Entries past the launch's count are not read.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct V3Rhs {
    pub inp: [u64; BATCH_MAX],
    pub y: [u64; BATCH_MAX],
    pub out: [u64; BATCH_MAX],
    pub inp_norm: [u64; BATCH_MAX],
    pub y_norm: [u64; BATCH_MAX],
    pub out_norm: [u64; BATCH_MAX],
}

/// Check a batch launch's count and form: 1..=`BATCH_MAX` right-hand sides, no dot
/// epilogue, fused-CR gate or split (the batch entries have none), and a y for every
/// right-hand side or for none (one launch is one form). Returns whether it has y.
fn check(a: &V3Launch, rhs: &V3Rhs, nrhs: usize) -> Result<bool> {
    if !(1..=BATCH_MAX).contains(&nrhs) {
        return Err(Error::internal(format!(
            "a batch launch of {nrhs} right-hand sides (1 to {BATCH_MAX})"
        )));
    }
    if a.partials != 0 || a.s != 0 || a.split_mask != 0 {
        return Err(Error::internal(
            "a batch launch with the dot epilogue, the fused-CR gate or a split lattice",
        ));
    }
    let with_y = rhs.y[0] != 0;
    if rhs.y[..nrhs].iter().any(|&y| (y != 0) != with_y) {
        return Err(Error::internal(
            "a batch launch with y for some right-hand sides only",
        ));
    }
    Ok(with_y)
}

/// Run `a`'s launch for the `nrhs` right-hand sides of `rhs` in one batch launch on `gpu`
/// (its own fields `inp`, `y`, `out` and norms are not read), booking it as
/// `Kernel::V3Batch`: `nrhs` times the blocks of one right-hand side's launch
/// (`launch_shape`), under the bound of the one-right-hand-side entry of the same mode.
pub(crate) fn launch_v3_batch(
    gpu: &mut GpuStream,
    k: &V3Kernels,
    a: &V3Launch,
    rhs: &V3Rhs,
    nrhs: usize,
) -> Result<()> {
    let with_y = check(a, rhs, nrhs)?;
    let clover = k.clover_inv.is_some();
    if !clover && a.site.clover != 0 {
        return Err(Error::internal(
            "a site-term batch launch of a Wilson build of 3.0",
        ));
    }
    let (column, mut cfg, parity) = launch_shape(a);
    cfg.grid_dim.0 = cfg
        .grid_dim
        .0
        .checked_mul(nrhs as u32)
        .filter(|&g| g < i32::MAX as u32)
        .ok_or_else(|| {
            Error::internal(format!(
                "a batch launch of {nrhs} x {} blocks",
                cfg.grid_dim.0
            ))
        })?;
    let f = match (a.parity, column > 1) {
        (None, false) => &k.batch[0],
        (None, true) => &k.batch[1],
        (Some(_), _) => &k.batch[2],
    };
    let mut form = *a;
    form.y = with_y as u64;
    let Kernel::V3 {
        mode,
        single,
        reconstruct,
        half,
        site,
        ..
    } = form.kernel()
    else {
        return Err(Error::internal("a 3.0 launch that is not a stencil launch"));
    };
    let kernel = Kernel::V3Batch(V3Batch {
        mode,
        single,
        half,
        reconstruct,
        site,
        rhs: nrhs as u8,
    });
    let nrhs_i = nrhs as i32;
    let g5 = a.g5 as i32;
    let volume = a.volume as i32;
    let [lx, ly, lz, lt] = a.dims;
    let s = &a.site;
    macro_rules! arg {
        ($x:expr) => {
            $x as *const _ as *mut std::ffi::c_void
        };
    }
    // kernels/stencil_v3.cu V3_BATCH_ARGS, then a CLOVER build's four more.
    let mut params = [
        arg!(rhs),
        arg!(&nrhs_i),
        arg!(&a.links),
        arg!(&a.c),
        arg!(&g5),
        arg!(&parity),
        arg!(&volume),
        arg!(&lx),
        arg!(&ly),
        arg!(&lz),
        arg!(&lt),
        arg!(&a.split_mask),
        arg!(&a.anti_lo),
        arg!(&a.anti_hi),
        arg!(&s.clover),
        arg!(&s.inv),
        arg!(&s.twist),
        arg!(&s.inverse),
    ];
    let count = if clover {
        params.len()
    } else {
        params.len() - 4
    };
    launch_values!(@params gpu, kernel, a.sites(), f, cfg, &mut params[..count]);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::core::stencil::v3::SiteArgs;
    use crate::backend::cuda::core::version::Reconstruct;

    const SRC: &str = include_str!("../../../../../kernels/stencil_v3.cu");

    #[test]
    fn the_table_is_the_kernels_v3batch() {
        // kernels/stencil_v3.cu: V3_BATCH_MAX is BATCH_MAX, and struct V3Batch is six
        // arrays of that many pointers in V3Rhs's order (the kernel reads the launch's
        // parameter bytes as that struct).
        let line = SRC
            .lines()
            .find(|l| l.starts_with("#define V3_BATCH_MAX "))
            .expect("stencil_v3.cu defines V3_BATCH_MAX");
        let value: usize = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(value, BATCH_MAX);
        let start = SRC.find("struct V3Batch {").expect("struct V3Batch");
        let body = &SRC[start..start + SRC[start..].find("};").unwrap()];
        let fields: Vec<&str> = body
            .lines()
            .filter(|l| l.contains("[V3_BATCH_MAX];"))
            .map(|l| {
                let name = l.trim().trim_end_matches("[V3_BATCH_MAX];");
                name.rsplit(['*', ' ']).next().unwrap()
            })
            .collect();
        assert_eq!(
            fields,
            ["inp", "y", "out", "inp_norm", "y_norm", "out_norm"]
        );
        assert_eq!(std::mem::size_of::<V3Rhs>(), 6 * 8 * BATCH_MAX);
        // The entries take the table first, then nrhs (V3_BATCH_ARGS).
        assert!(SRC.contains("const V3Batch rhs, int nrhs, const v3_link *__restrict__ links, double c, int g5, int parity,"));
        for name in V3Kernels::BATCH_NAMES {
            assert!(
                SRC.contains(&format!(") {name}(V3_BATCH_ARGS)")),
                "no entry {name}"
            );
        }
    }

    fn launch(parity: Option<usize>) -> V3Launch {
        V3Launch {
            parity,
            single: false,
            half: false,
            reconstruct: Reconstruct::R18,
            inp: 0,
            y: 0,
            out: 0,
            links: 0,
            c: 0.0,
            g5: false,
            dims: [4, 4, 4, 8],
            volume: 512,
            block: 64,
            link_hint: 0,
            split_mask: 0,
            anti_lo: 8,
            anti_hi: 8,
            s: 0,
            partials: 0,
            ticket: 0,
            inp_norm: 0,
            y_norm: 0,
            out_norm: 0,
            site: SiteArgs::default(),
        }
    }

    #[test]
    fn a_batch_launch_checks_its_count_and_form() {
        let a = launch(Some(0));
        let mut rhs = V3Rhs::default();
        // No y anywhere: the hop form; y everywhere: the xpay form.
        assert!(!check(&a, &rhs, 3).unwrap());
        rhs.y[..3].copy_from_slice(&[8, 16, 24]);
        assert!(check(&a, &rhs, 3).unwrap());
        // Entries past the count are not looked at.
        assert!(check(&a, &rhs, 2).unwrap());
        // y for some only, and counts out of range, are refused.
        rhs.y[1] = 0;
        assert!(check(&a, &rhs, 3).is_err());
        for n in [0, BATCH_MAX + 1] {
            assert!(check(&a, &V3Rhs::default(), n).is_err(), "{n}");
        }
        let mut dot = launch(None);
        dot.partials = 64;
        assert!(check(&dot, &V3Rhs::default(), 1).is_err());
    }
}
