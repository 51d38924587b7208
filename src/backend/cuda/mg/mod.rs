//! Multigrid's coarse levels on the GPU: `CudaCoarseSpace`, a coarse level's vector space
//! with its operator on the device (`dirac::coarse::CoarseLevelSpace`), and the
//! transfers between levels (`transfer`: the prolongator on the device, for the fine
//! 3.0 or seed field and for coarse fields). The first coarse operator's matrices are the
//! Galerkin product of the fine operator formed on the device (`galerkin`), deeper
//! levels' on the host (`dirac::coarse::galerkin`); each is uploaded once and the cycle
//! then never leaves the device.

pub mod galerkin;
pub mod kernels;
pub mod prolongator;
pub mod stage;
pub mod transfer;

use crate::backend::ledger::Ledger;
use crate::dirac::coarse::{hop_target, CoarseLevelSpace, CoarseOp, Prolongator, HOPS};
use crate::error::{Error, Result};
use crate::field::{SpinorField, C64};
use crate::geometry::lattice::Lattice;
use crate::linalg::{layout_mismatch as mismatch, Layout, Precision, Space, Subset};
use cudarc::driver::{CudaSlice, CudaStream};
use kernels::{cfg, launch_args, Buffer, MgKernels, Reductions, MULTI_MAX};
use rayon::prelude::*;
use std::sync::Arc;
pub use transfer::DeviceTransfer;

/// A coarse field on the device: `layout.subset` sites of `dof` numbers.
pub struct CoarseDeviceField {
    pub(crate) layout: Layout,
    pub(crate) buf: Buffer,
}

/// The site tables of one domain of the coarse operator's kernel: for each output site,
/// the lattice site of its matrices and its 8 neighbours' indices in the input field.
struct Domain {
    /// None: the full lattice (site i is lattice site i).
    rows: Option<CudaSlice<i32>>,
    nb: CudaSlice<i32>,
}

/// The coarse operator on the device: X, the eight Y and (even-odd) X^-1, each matrix
/// stored transposed.
struct DeviceOp {
    site: Buffer,
    hops: Buffer,
    site_inverse: Option<Buffer>,
    full: Domain,
    /// Parity 0 and 1 (lattices with even extents).
    half: Option<[Domain; 2]>,
}

/// A coarse level's space on the GPU (module docs).
pub struct CudaCoarseSpace {
    stream: Arc<CudaStream>,
    k: Arc<MgKernels>,
    ledger: Ledger,
    reduce: Reductions,
    op: Arc<CoarseOp>,
    precision: Precision,
    dev: DeviceOp,
    /// Two odd half fields of the Schur complement (made on first use).
    tmp: Option<[CoarseDeviceField; 2]>,
}

fn upload_i32(stream: &Arc<CudaStream>, v: &[i32]) -> Result<CudaSlice<i32>> {
    stream
        .clone_htod(v)
        .map_err(|e| crate::backend::cuda::core::device::driver_err("uploading a table", e))
}

/// The site tables of the coarse operator's kernel on lattice `l`: each site's 8
/// neighbours (hop order of `dirac::coarse`), and, where every extent is even, per parity
/// the lattice site of each checkerboard index and its 8 neighbours' checkerboard indices.
#[allow(clippy::type_complexity)]
pub fn domain_tables(l: &Lattice) -> (Vec<i32>, Option<[(Vec<i32>, Vec<i32>); 2]>) {
    let v = l.volume();
    let nb_of = |x: usize| -> [usize; HOPS] { std::array::from_fn(|d| hop_target(l, x, d).0) };
    let full: Vec<i32> = (0..v).flat_map(|x| nb_of(x).map(|y| y as i32)).collect();
    if !l.dims.iter().all(|&n| n.is_multiple_of(2)) {
        return (full, None);
    }
    let half = |p: usize| {
        let sites: Vec<i32> = (0..v / 2)
            .map(|cb| l.checkerboard_site(p, cb) as i32)
            .collect();
        let nb: Vec<i32> = sites
            .iter()
            .flat_map(|&x| nb_of(x as usize).map(|y| (y / 2) as i32))
            .collect();
        (sites, nb)
    };
    (full, Some([half(0), half(1)]))
}

/// Where number k of the device's form of dof x dof matrices (each stored transposed)
/// is in the host's (row-major): matrix k / dof^2, row (k mod dof), column (k mod dof^2) / dof.
pub fn transposed_index(k: usize, dof: usize) -> usize {
    let dd = dof * dof;
    let (block, r) = (k / dd, k % dd);
    block * dd + (r % dof) * dof + r / dof
}

/// Matrices of dof x dof, row-major on the host, in the device's form (what
/// `CudaCoarseSpace::new` uploads, number by number, through `transposed_index`).
pub fn transposed(m: &[C64], dof: usize) -> Vec<C64> {
    (0..m.len())
        .into_par_iter()
        .map(|k| m[transposed_index(k, dof)])
        .collect()
}

impl CudaCoarseSpace {
    /// The level of `op` with fields and matrices in `precision` (double or single), on
    /// the stream of the level above.
    pub(crate) fn new(
        stream: &Arc<CudaStream>,
        ledger: &Ledger,
        op: Arc<CoarseOp>,
        precision: Precision,
    ) -> Result<CudaCoarseSpace> {
        if precision == Precision::Half {
            return Err(Error::invalid(
                "multigrid.precision",
                "a coarse level holds double or single fields, not half",
            ));
        }
        let k = MgKernels::load(stream)?;
        let dof = op.dof;
        let l = &op.lattice;
        let v = l.volume();
        let (full_nb, halves) = domain_tables(l);
        let full = Domain {
            rows: None,
            nb: upload_i32(stream, &full_nb)?,
        };
        let half = match halves {
            Some(h) => {
                let up = |(sites, nb): &(Vec<i32>, Vec<i32>)| -> Result<Domain> {
                    Ok(Domain {
                        rows: Some(upload_i32(stream, sites)?),
                        nb: upload_i32(stream, nb)?,
                    })
                };
                Some([up(&h[0])?, up(&h[1])?])
            }
            None => None,
        };
        let up = |m: &[C64]| {
            Buffer::upload_with(stream, ledger, precision, m.len(), |k| {
                m[transposed_index(k, dof)]
            })
        };
        let dev = DeviceOp {
            site: up(&op.site)?,
            hops: up(&op.hops)?,
            site_inverse: op.site_inverse().map(up).transpose()?,
            full,
            half,
        };
        Ok(CudaCoarseSpace {
            stream: stream.clone(),
            reduce: Reductions::new(stream, ledger, v * dof)?,
            k,
            ledger: ledger.clone(),
            op,
            precision,
            dev,
            tmp: None,
        })
    }

    fn numbers(&self, subset: Subset) -> usize {
        subset.sites(self.op.volume()) * self.op.dof
    }

    fn check(&self, layout: Layout) -> Result<()> {
        if layout.precision != self.precision {
            return Err(Error::internal(format!(
                "a {:?} field on a coarse level of {:?} fields",
                layout.precision, self.precision
            )));
        }
        if layout.subset != Subset::Full && self.dev.half.is_none() {
            return Err(Error::internal(format!(
                "a coarse lattice {:?} with an odd extent has no half fields",
                self.op.lattice.dims
            )));
        }
        Ok(())
    }

    /// out = a_site S in_site + a_hop sum_d Y_d in_hop over the sites of `out`: `domain`
    /// None for full fields, Some(p) for parity p (in_hop then of the other parity).
    fn stencil(
        &self,
        domain: Option<usize>,
        out: &mut CoarseDeviceField,
        site: Option<(&Buffer, &CoarseDeviceField)>,
        hop: Option<(&CoarseDeviceField, f64)>,
    ) -> Result<()> {
        let s = &self.stream;
        let dom = match (domain, &self.dev.half) {
            (None, _) => &self.dev.full,
            (Some(p), Some(h)) => &h[p],
            (Some(_), None) => return Err(Error::internal("no half domains on this level")),
        };
        let n = (out.buf.len / self.op.dof) as i32;
        let dof = self.op.dof as i32;
        let rows = dom.rows.as_ref().map_or(0, |r| kernels_ptr(r, s));
        let nb = kernels_ptr(&dom.nb, s);
        let (sm, sin) = site.map_or((0, 0), |(m, f)| (m.ptr(s), f.buf.ptr(s)));
        let (hin, a_hop) = hop.map_or((0, 0.0), |(f, a)| (f.buf.ptr(s), a));
        let hm = self.dev.hops.ptr(s);
        let o = out.buf.ptr(s);
        launch_args!(
            s,
            self.k.apply.of(self.precision),
            cfg(out.buf.len),
            [&o, &sin, &hin, &sm, &hm, &rows, &nb, &n, &dof, &a_hop]
        )
    }

    /// Half field <-> full field of parity p.
    fn pick(&self, p: usize, full: u64, half: u64, to_half: bool) -> Result<()> {
        let s = &self.stream;
        let h = self
            .dev
            .half
            .as_ref()
            .ok_or_else(|| Error::internal("no half domains on this level"))?;
        let rows = h[p].rows.as_ref().map_or(0, |r| kernels_ptr(r, s));
        let n = (self.op.volume() / 2) as i32;
        let dof = self.op.dof as i32;
        let to = to_half as i32;
        launch_args!(
            s,
            self.k.pick.of(self.precision),
            cfg(n as usize * self.op.dof),
            [&full, &half, &rows, &n, &dof, &to]
        )
    }

    fn site_matrices(&self, inverse: bool) -> Result<&Buffer> {
        if inverse {
            self.dev
                .site_inverse
                .as_ref()
                .ok_or_else(|| Error::internal("the coarse operator's site inverses were not made"))
        } else {
            Ok(&self.dev.site)
        }
    }

    fn half_field(&mut self, p: usize) -> Result<CoarseDeviceField> {
        self.alloc_layout(Layout::new(Subset::from_parity(p), self.precision))
    }

    /// The Schur temporaries, made once.
    fn take_tmp(&mut self) -> Result<[CoarseDeviceField; 2]> {
        match self.tmp.take() {
            Some(t) => Ok(t),
            None => Ok([self.half_field(1)?, self.half_field(1)?]),
        }
    }
}

impl CudaCoarseSpace {
    /// The multigrid kernels (for the fine level's transfers).
    pub(crate) fn kernels(&self) -> &MgKernels {
        &self.k
    }
}

fn kernels_ptr<T>(s: &CudaSlice<T>, stream: &CudaStream) -> u64 {
    crate::backend::cuda::core::launch::dptr(s, stream)
}

impl Space for CudaCoarseSpace {
    type Field = CoarseDeviceField;

    fn describe(&self) -> String {
        format!(
            "cuda coarse level ({} numbers a site on {:?})",
            self.op.dof, self.op.lattice.dims
        )
    }

    fn alloc_layout(&mut self, layout: Layout) -> Result<CoarseDeviceField> {
        self.check(layout)?;
        let n = self.numbers(layout.subset);
        Ok(CoarseDeviceField {
            layout,
            buf: Buffer::zeros(&self.stream, &self.ledger, layout.precision, n)?,
        })
    }

    fn layout(&self, field: &CoarseDeviceField) -> Layout {
        field.layout
    }

    fn upload(&mut self, _host: &SpinorField) -> Result<CoarseDeviceField> {
        Err(Error::internal("a coarse level holds no spinor fields"))
    }

    fn download(&mut self, _field: &CoarseDeviceField) -> Result<SpinorField> {
        Err(Error::internal("a coarse level holds no spinor fields"))
    }

    fn to_host(&mut self, field: &CoarseDeviceField) -> Result<Vec<C64>> {
        field.buf.download(&self.stream)
    }

    fn field_from_host(&mut self, numbers: Vec<C64>, layout: Layout) -> Result<CoarseDeviceField> {
        self.check(layout)?;
        if numbers.len() != self.numbers(layout.subset) {
            return Err(Error::internal(format!(
                "a coarse field of {} numbers as {layout:?}",
                numbers.len()
            )));
        }
        Ok(CoarseDeviceField {
            layout,
            buf: Buffer::upload(&self.stream, &self.ledger, layout.precision, &numbers)?,
        })
    }

    fn set_zero(&mut self, x: &mut CoarseDeviceField) -> Result<()> {
        x.buf.zero(&self.stream)
    }

    fn copy(&mut self, dst: &mut CoarseDeviceField, src: &CoarseDeviceField) -> Result<()> {
        if dst.layout != src.layout {
            return Err(mismatch("copy", dst.layout, src.layout));
        }
        dst.buf.copy_from(&self.stream, &src.buf)
    }

    fn convert(&mut self, dst: &mut CoarseDeviceField, src: &CoarseDeviceField) -> Result<()> {
        let (ds, ss) = (dst.layout.subset, src.layout.subset);
        if dst.layout.precision != src.layout.precision {
            return Err(mismatch("convert", dst.layout, src.layout));
        }
        let s = self.stream.clone();
        match (ds, ss) {
            _ if ds == ss => dst.buf.copy_from(&s, &src.buf),
            (Subset::Full, half) => {
                let p = half.parity().unwrap_or(0);
                self.pick(p, dst.buf.ptr(&s), src.buf.ptr(&s), false)
            }
            (half, Subset::Full) => {
                let p = half.parity().unwrap_or(0);
                self.pick(p, src.buf.ptr(&s), dst.buf.ptr(&s), true)
            }
            _ => Err(mismatch("convert", dst.layout, src.layout)),
        }
    }

    fn axpy(&mut self, a: C64, x: &CoarseDeviceField, y: &mut CoarseDeviceField) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("axpy", x.layout, y.layout));
        }
        self.axpy_kernel(a, x, y, 0)
    }

    fn xpay(&mut self, x: &CoarseDeviceField, a: C64, y: &mut CoarseDeviceField) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("xpay", x.layout, y.layout));
        }
        self.axpy_kernel(a, x, y, 1)
    }

    fn dot(&mut self, x: &CoarseDeviceField, y: &CoarseDeviceField) -> Result<C64> {
        if x.layout != y.layout {
            return Err(mismatch("dot", x.layout, y.layout));
        }
        self.reduce.run(&self.stream, &self.k, &x.buf, Some(&y.buf))
    }

    fn norm2(&mut self, x: &CoarseDeviceField) -> Result<f64> {
        Ok(self.reduce.run(&self.stream, &self.k, &x.buf, None)?.re)
    }

    /// One pass over y for every MULTI_MAX of the x_j, one wait for all.
    fn dots(&mut self, xs: &[&CoarseDeviceField], y: &CoarseDeviceField) -> Result<Vec<C64>> {
        if let Some(x) = xs.iter().find(|x| x.layout != y.layout) {
            return Err(mismatch("dots", x.layout, y.layout));
        }
        let bufs: Vec<&Buffer> = xs.iter().map(|x| &x.buf).collect();
        self.reduce.dots(&self.stream, &self.k, &bufs, &y.buf)
    }

    /// One pass over y for every MULTI_MAX of the x_j.
    fn axpys(
        &mut self,
        a: &[C64],
        xs: &[&CoarseDeviceField],
        y: &mut CoarseDeviceField,
    ) -> Result<()> {
        if a.len() != xs.len() {
            return Err(Error::internal(format!(
                "axpys: {} coefficients for {} fields",
                a.len(),
                xs.len()
            )));
        }
        if let Some(x) = xs.iter().find(|x| x.layout != y.layout) {
            return Err(mismatch("axpys", x.layout, y.layout));
        }
        let s = &self.stream;
        let n = y.buf.len as i64;
        let yp = y.buf.ptr(s);
        for (chunk, a) in xs.chunks(MULTI_MAX).zip(a.chunks(MULTI_MAX)) {
            let m = chunk.len() as i32;
            let p: [u64; MULTI_MAX] =
                std::array::from_fn(|j| chunk.get(j).map_or(0, |x| x.buf.ptr(s)));
            let re: [f64; MULTI_MAX] = std::array::from_fn(|j| a.get(j).map_or(0.0, |z| z.re));
            let im: [f64; MULTI_MAX] = std::array::from_fn(|j| a.get(j).map_or(0.0, |z| z.im));
            launch_args!(
                s,
                self.k.axpys.of(y.layout.precision),
                cfg(y.buf.len),
                [
                    &p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &yp, &re[0], &re[1],
                    &re[2], &re[3], &re[4], &re[5], &re[6], &re[7], &im[0], &im[1], &im[2], &im[3],
                    &im[4], &im[5], &im[6], &im[7], &m, &n
                ]
            )?;
        }
        Ok(())
    }
}

impl CudaCoarseSpace {
    fn axpy_kernel(
        &mut self,
        a: C64,
        x: &CoarseDeviceField,
        y: &mut CoarseDeviceField,
        xpay: i32,
    ) -> Result<()> {
        let s = &self.stream;
        let n = x.buf.len as i64;
        let (xp, yp) = (x.buf.ptr(s), y.buf.ptr(s));
        launch_args!(
            s,
            self.k.axpy.of(x.layout.precision),
            cfg(x.buf.len),
            [&xp, &yp, &a.re, &a.im, &n, &xpay]
        )
    }
}

impl CoarseLevelSpace for CudaCoarseSpace {
    fn op(&self) -> &Arc<CoarseOp> {
        &self.op
    }

    fn apply_coarse(
        &mut self,
        schur: bool,
        out: &mut CoarseDeviceField,
        inp: &CoarseDeviceField,
    ) -> Result<()> {
        let want = if schur { Subset::Even } else { Subset::Full };
        if inp.layout.subset != want || out.layout != inp.layout {
            return Err(mismatch("coarse apply", out.layout, inp.layout));
        }
        if !schur {
            let x = self.site_matrices(false)?;
            return self.stencil(None, out, Some((x, inp)), Some((inp, 1.0)));
        }
        // out = X_ee in - Y_eo X_oo^-1 Y_oe in.
        let [mut a, mut b] = self.take_tmp()?;
        let done = (|| {
            self.stencil(Some(1), &mut a, None, Some((inp, 1.0)))?;
            self.stencil(Some(1), &mut b, Some((self.site_matrices(true)?, &a)), None)?;
            let x = self.site_matrices(false)?;
            self.stencil(Some(0), out, Some((x, inp)), Some((&b, -1.0)))
        })();
        self.tmp = Some([a, b]);
        done
    }

    fn schur_source(
        &mut self,
        b: &CoarseDeviceField,
    ) -> Result<(CoarseDeviceField, CoarseDeviceField)> {
        let p = b.layout.precision;
        let mut b_e = self.alloc_layout(Layout::new(Subset::Even, p))?;
        let mut b_o = self.alloc_layout(Layout::new(Subset::Odd, p))?;
        self.convert(&mut b_e, b)?;
        self.convert(&mut b_o, b)?;
        // rhs = b_e - Y_eo X_oo^-1 b_o.
        let mut xb = self.alloc_layout(Layout::new(Subset::Odd, p))?;
        self.stencil(
            Some(1),
            &mut xb,
            Some((self.site_matrices(true)?, &b_o)),
            None,
        )?;
        let mut hop = self.alloc_layout(Layout::new(Subset::Even, p))?;
        self.stencil(Some(0), &mut hop, None, Some((&xb, -1.0)))?;
        self.axpy(C64::new(1.0, 0.0), &hop, &mut b_e)?;
        Ok((b_e, b_o))
    }

    fn schur_reconstruct(
        &mut self,
        x_e: &CoarseDeviceField,
        b_o: &CoarseDeviceField,
    ) -> Result<CoarseDeviceField> {
        let p = x_e.layout.precision;
        // x_o = X_oo^-1 (b_o - Y_oe x_e).
        let mut r = self.alloc_layout(Layout::new(Subset::Odd, p))?;
        self.stencil(Some(1), &mut r, None, Some((x_e, -1.0)))?;
        self.axpy(C64::new(1.0, 0.0), b_o, &mut r)?;
        let mut x_o = self.alloc_layout(Layout::new(Subset::Odd, p))?;
        self.stencil(
            Some(1),
            &mut x_o,
            Some((self.site_matrices(true)?, &r)),
            None,
        )?;
        let mut x = self.alloc_layout(Layout::new(Subset::Full, p))?;
        self.convert(&mut x, x_e)?;
        self.convert(&mut x, &x_o)?;
        Ok(x)
    }
}

impl crate::dirac::coarse::Coarsen for CudaCoarseSpace {
    type Coarse = CudaCoarseSpace;
    type Transfer = DeviceTransfer;

    fn coarse_space(&mut self, op: Arc<CoarseOp>, precision: Precision) -> Result<CudaCoarseSpace> {
        CudaCoarseSpace::new(&self.stream, &self.ledger, op, precision)
    }

    fn transfer(&mut self, p: &Prolongator, precision: Precision) -> Result<DeviceTransfer> {
        // A coarse field's number k of site x is at x * dof + k.
        let dof = p.fine_dof;
        DeviceTransfer::new(
            &self.stream,
            &self.ledger,
            p,
            precision,
            |x| (x * dof) as i64,
            1,
        )
    }

    fn restrict(
        &mut self,
        t: &DeviceTransfer,
        fine: &CoarseDeviceField,
        _coarse: &mut CudaCoarseSpace,
        out: &mut CoarseDeviceField,
    ) -> Result<()> {
        t.restrict(
            &self.stream,
            &self.k,
            fine.buf.ptr(&self.stream),
            &mut out.buf,
        )
    }

    fn prolong(
        &mut self,
        t: &DeviceTransfer,
        _coarse: &mut CudaCoarseSpace,
        inp: &CoarseDeviceField,
        fine: &mut CoarseDeviceField,
    ) -> Result<()> {
        t.prolong(&self.stream, &self.k, &inp.buf, fine.buf.ptr(&self.stream))
    }
}

#[cfg(test)]
mod tests {
    use super::transposed_index;

    /// The device's element (j, i) of matrix b, at b dof^2 + j dof + i, is the host's
    /// element (i, j), at b dof^2 + i dof + j: every index of 3 matrices of 5 x 5 and 2
    /// of 48 x 48 (24 vectors), and each host number used once.
    #[test]
    fn the_device_form_is_each_matrix_transposed() {
        for (dof, count) in [(5, 3), (48, 2)] {
            let dd = dof * dof;
            let mut seen = vec![false; count * dd];
            for b in 0..count {
                for j in 0..dof {
                    for i in 0..dof {
                        let host = transposed_index(b * dd + j * dof + i, dof);
                        assert_eq!(host, b * dd + i * dof + j, "dof {dof}: ({b}, {j}, {i})");
                        seen[host] = true;
                    }
                }
            }
            assert!(seen.iter().all(|&s| s), "dof {dof}");
        }
    }
}
