//! Version 3.0's fast path on the GPU: fields of every `Layout` (full or one parity,
//! double or single precision) in the parity-major structure of arrays of
//! kernels/stencil_v3.cu, the even-odd operators, conversions, the hop_xpay of the
//! even-odd source and reconstruction, the (r|Ar) epilogue of the fused CR iteration, and
//! BLAS-1 and reductions on every layout (float fields: kernels `xaxpy_f`, `xpay_f`,
//! `norm2_partial_f`, `dot_partial_f`; reductions accumulate in double).
//!
//! Layout (Vh = V/2, cb = lexicographic index / 2, p = (x+y+z+t) % 2, every extent even):
//! a half field holds element k = spin*3 + colour of site cb at complex index k*Vh + cb;
//! a full field is [even half][odd half]: p*12*Vh + k*Vh + cb. Links: element e =
//! row*3 + col of U_mu at site (p, cb) at p*36*Vh + (mu*9 + e)*Vh + cb.

use super::{err, CudaBackend, DeviceData, DeviceSpinor};
use crate::backend::cuda::device::{function, load_module};
use crate::backend::cuda::fused::*;
use crate::backend::cuda::kernels::{reduce_blocks, Kernel, BLAS_BLOCK};
use crate::backend::cuda::stencil::{self, cfg_1d, dptr, launch_v3, V3Launch};
use crate::backend::cuda::timing::launch;
use crate::backend::cuda::version::StencilVersion;
use crate::backend::CrScalars;
use crate::backend::{layout_mismatch as mismatch, Layout, Operator, Precision, Subset};
use crate::error::{Error, Result};
use crate::field::C64;
use crate::geometry::lattice::Lattice;
use cudarc::driver::{CudaFunction, CudaSlice, CudaStream};

/// Complex index of element k (0..12) of checkerboard site cb of parity p in a full 3.0
/// field (subtract p*12*Vh, or take p = 0, for a half field).
pub(crate) fn spinor_index(vh: usize, p: usize, cb: usize, k: usize) -> usize {
    p * 12 * vh + k * vh + cb
}

/// Complex index of element e = row*3 + col of U_mu at checkerboard site cb of parity p
/// in 3.0's link array (what build_v3_links writes; the unit tests check it).
#[cfg_attr(not(test), allow(dead_code))]
pub(crate) fn link_index(vh: usize, p: usize, cb: usize, mu: usize, e: usize) -> usize {
    p * 36 * vh + (mu * 9 + e) * vh + cb
}

/// Refuse a lattice 3.0 cannot lay out by parity.
pub(crate) fn check_even_lattice(l: &Lattice) -> Result<()> {
    let parity_offset: usize = l.offset.iter().sum();
    if l.dims.iter().any(|d| !d.is_multiple_of(2)) || !parity_offset.is_multiple_of(2) {
        return Err(Error::invalid(
            "kernel",
            format!(
                "kernel 3.0 stores fields by parity and needs even extents, but the lattice is {}",
                l.dims_string()
            ),
        ));
    }
    Ok(())
}

/// Canonical [site][12 complex] (as f64 pairs) to 3.0's parity-major full field.
pub(crate) fn spinor_to_soa(l: &Lattice, canonical: &[f64], soa: &mut [f64]) {
    let vh = l.volume() / 2;
    for (site, s) in canonical.chunks_exact(24).enumerate() {
        let (p, cb) = l.checkerboard(site);
        for k in 0..12 {
            let i = spinor_index(vh, p, cb, k);
            soa[2 * i] = s[2 * k];
            soa[2 * i + 1] = s[2 * k + 1];
        }
    }
}

/// The inverse of `spinor_to_soa`; with `parity` Some(p), `soa` is a half field of parity
/// p and only those sites of `canonical` are written.
pub(crate) fn spinor_from_soa(
    l: &Lattice,
    soa: &[f64],
    canonical: &mut [f64],
    parity: Option<usize>,
) {
    let vh = l.volume() / 2;
    for (site, s) in canonical.chunks_exact_mut(24).enumerate() {
        let (p, cb) = l.checkerboard(site);
        let base = match parity {
            None => p * 12 * vh,
            Some(q) if q == p => 0,
            Some(_) => continue,
        };
        for k in 0..12 {
            let i = base + spinor_index(vh, 0, cb, k);
            s[2 * k] = soa[2 * i];
            s[2 * k + 1] = soa[2 * i + 1];
        }
    }
}

/// The fast path's kernels and lazily built state.
pub(crate) struct FastState {
    xaxpy_f: CudaFunction,
    xpay_f: CudaFunction,
    norm2_f: CudaFunction,
    dot_f: CudaFunction,
    to_single: CudaFunction,
    to_double: CudaFunction,
    /// The double-precision stencil (the module loaded at construction).
    stencil_d: CudaFunction,
    /// The single-precision stencil and links (float2, same layout), built on first use.
    single: Option<(CudaFunction, CudaSlice<f32>)>,
    /// Odd half-field temporaries of the Schur operator, per precision, made on first use.
    tmp_d: Option<CudaSlice<f64>>,
    tmp_s: Option<CudaSlice<f32>>,
}

impl FastState {
    pub(crate) fn new(
        blas: &std::sync::Arc<cudarc::driver::CudaModule>,
        reduce: &std::sync::Arc<cudarc::driver::CudaModule>,
        layout: &std::sync::Arc<cudarc::driver::CudaModule>,
        stencil_d: CudaFunction,
    ) -> Result<Self> {
        Ok(FastState {
            xaxpy_f: function(blas, "xaxpy_f")?,
            xpay_f: function(blas, "xpay_f")?,
            norm2_f: function(reduce, "norm2_partial_f")?,
            dot_f: function(reduce, "dot_partial_f")?,
            to_single: function(layout, "to_single")?,
            to_double: function(layout, "to_double")?,
            stencil_d,
            single: None,
            tmp_d: None,
            tmp_s: None,
        })
    }
}

/// Device address of a field's data and its bytes per complex number.
fn addr(f: &DeviceSpinor, stream: &CudaStream) -> (u64, u64) {
    match &f.data {
        DeviceData::Double(d) => (dptr(d, stream), 16),
        DeviceData::Single(s) => (dptr(s, stream), 8),
    }
}

impl CudaBackend {
    pub(crate) fn is_fast(&self) -> bool {
        self.fast.is_some()
    }

    fn fast_state(&self) -> Result<&FastState> {
        self.fast
            .as_ref()
            .ok_or_else(|| crate::backend::unsupported(self, "the fast path"))
    }

    fn vh(&self) -> usize {
        self.lattice.volume() / 2
    }

    pub(crate) fn fast_alloc(&mut self, layout: Layout) -> Result<DeviceSpinor> {
        let n = layout.subset.sites(self.lattice.volume()) * 12 * 2;
        let data = match layout.precision {
            Precision::Double => DeviceData::Double(
                self.gpu
                    .stream
                    .alloc_zeros::<f64>(n)
                    .map_err(err("allocating a spinor field"))?,
            ),
            Precision::Single => DeviceData::Single(
                self.gpu
                    .stream
                    .alloc_zeros::<f32>(n)
                    .map_err(err("allocating a spinor field"))?,
            ),
        };
        Ok(DeviceSpinor { data, layout })
    }

    /// The single-precision stencil and links, built on first use from the double links.
    fn ensure_single(&mut self) -> Result<()> {
        if self.fast_state()?.single.is_some() {
            return Ok(());
        }
        let program = stencil::program(StencilVersion::V3_0, self.reconstruct_12, true);
        let (module, _) = load_module(&self.gpu.ctx, &program)?;
        let f = function(&module, "stencil_v3")?;
        let n = self.links.len() / 2;
        let mut links = self
            .gpu
            .stream
            .alloc_zeros::<f32>(2 * n)
            .map_err(err("allocating the single-precision links"))?;
        let fs = self.fast.as_ref().unwrap();
        let nn = n as i64;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        launch!(
            self.gpu,
            Kernel::Setup("to_single (links)"),
            n,
            &fs.to_single,
            cfg,
            [&self.links, &mut links, &nn]
        );
        self.fast.as_mut().unwrap().single = Some((f, links));
        Ok(())
    }

    /// The odd temporary of the Schur operator in `precision` (made on first use).
    fn ensure_tmp(&mut self, precision: Precision) -> Result<u64> {
        let n = self.vh() * 24;
        let stream = self.gpu.stream.clone();
        let fs = self.fast.as_mut().unwrap();
        Ok(match precision {
            Precision::Double => {
                if fs.tmp_d.is_none() {
                    fs.tmp_d = Some(
                        stream
                            .alloc_zeros::<f64>(n)
                            .map_err(err("allocating the Schur temporary"))?,
                    );
                }
                dptr(fs.tmp_d.as_ref().unwrap(), &stream)
            }
            Precision::Single => {
                if fs.tmp_s.is_none() {
                    fs.tmp_s = Some(
                        stream
                            .alloc_zeros::<f32>(n)
                            .map_err(err("allocating the Schur temporary"))?,
                    );
                }
                dptr(fs.tmp_s.as_ref().unwrap(), &stream)
            }
        })
    }

    /// Build now what the fast path otherwise makes on first use for `precision` (the
    /// single-precision links and stencil module, the Schur temporary), so that no
    /// allocation or set-up launch happens later, e.g. inside a recorded CUDA graph. A
    /// no-op for the seed versions.
    pub fn prepare_fast_path(&mut self, precision: Precision) -> Result<()> {
        if !self.is_fast() {
            return Ok(());
        }
        if precision == Precision::Single {
            self.ensure_single()?;
        }
        self.ensure_tmp(precision)?;
        Ok(())
    }

    /// The stencil function and link address of a precision (single built if needed).
    fn stencil_for(&mut self, precision: Precision) -> Result<(CudaFunction, u64)> {
        let stream = self.gpu.stream.clone();
        match precision {
            Precision::Double => Ok((
                self.fast_state()?.stencil_d.clone(),
                dptr(&self.links, &stream),
            )),
            Precision::Single => {
                self.ensure_single()?;
                let (f, l) = self.fast_state()?.single.as_ref().unwrap();
                Ok((f.clone(), dptr(l, &stream)))
            }
        }
    }

    fn v3_launch(&self, links: u64, single: bool) -> V3Launch {
        V3Launch {
            parity: None,
            single,
            reconstruct_12: self.reconstruct_12,
            inp: 0,
            y: 0,
            out: 0,
            links,
            c: 0.0,
            g5: false,
            dims: std::array::from_fn(|mu| self.lattice.dims[mu] as i32),
            volume: self.lattice.volume(),
            block: self.coarse_block,
            antiperiodic_mask: self.antiperiodic_mask,
            s: 0,
            partials: 0,
            ticket: 0,
        }
    }

    /// out = A inp for every operator (D, G5D on full fields; Schur, G5Schur on even
    /// ones). With `cr`: gated on the iteration's `active`, and the last launch reduces
    /// (inp|out) into the scalar block (rar, beta).
    pub(crate) fn fast_apply(
        &mut self,
        op: Operator,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        cr: Option<&mut DeviceCrState>,
    ) -> Result<()> {
        if out.layout != inp.layout {
            return Err(mismatch("apply", out.layout, inp.layout));
        }
        let want = if op.is_schur() {
            Subset::Even
        } else {
            Subset::Full
        };
        if inp.layout.subset != want {
            return Err(Error::invalid(
                "backend",
                if op.is_schur() {
                    format!(
                        "operator {op} acts on even-site fields, not {:?} ones",
                        inp.layout.subset
                    )
                } else {
                    format!(
                        "operator {op} acts on full-lattice fields, not {:?} ones",
                        inp.layout.subset
                    )
                },
            ));
        }
        let precision = inp.layout.precision;
        let single = precision == Precision::Single;
        let (f, links) = self.stencil_for(precision)?;
        let stream = self.gpu.stream.clone();
        let (x, _) = addr(inp, &stream);
        let (o, _) = addr(out, &stream);
        let (s, partials, ticket) = match &cr {
            Some(st) => (
                dptr(&st.scalars, &stream),
                dptr(&st.partials, &stream),
                dptr(&st.tickets, &stream) + 4 * CR_TICKET_APPLY as u64,
            ),
            None => (0, 0, 0),
        };
        let mut l = self.v3_launch(links, single);
        l.s = s;
        if op.is_schur() {
            let tmp = self.ensure_tmp(precision)?;
            // tmp_o = H_oe x_e
            l.parity = Some(1);
            l.inp = x;
            l.out = tmp;
            l.c = 1.0;
            launch_v3(&mut self.gpu, &f, &l)?;
            // out_e = [g5] (x_e - kappa^2 H_eo tmp_o)
            l.parity = Some(0);
            l.inp = tmp;
            l.y = x;
            l.c = -self.kappa * self.kappa;
        } else {
            l.inp = x;
            l.y = x;
            l.c = -self.kappa;
        }
        l.out = o;
        l.g5 = op.gamma5();
        l.partials = partials;
        l.ticket = ticket;
        launch_v3(&mut self.gpu, &f, &l)?;
        self.applications += 1;
        Ok(())
    }

    /// out = [g5] (y + c H inp) on half fields (out, y of one parity; inp the other).
    pub(crate) fn fast_hop_xpay(
        &mut self,
        out: &mut DeviceSpinor,
        inp: &DeviceSpinor,
        y: &DeviceSpinor,
        c: f64,
        gamma5: bool,
    ) -> Result<()> {
        let p = match out.layout.subset.parity() {
            Some(p)
                if inp.layout.subset == Subset::from_parity(1 - p)
                    && inp.layout.precision == out.layout.precision =>
            {
                p
            }
            _ => return Err(mismatch("hop_xpay", out.layout, inp.layout)),
        };
        if y.layout != out.layout {
            return Err(mismatch("hop_xpay", out.layout, y.layout));
        }
        let precision = out.layout.precision;
        let (f, links) = self.stencil_for(precision)?;
        let stream = self.gpu.stream.clone();
        let mut l = self.v3_launch(links, precision == Precision::Single);
        l.parity = Some(p);
        l.inp = addr(inp, &stream).0;
        l.y = addr(y, &stream).0;
        l.out = addr(out, &stream).0;
        l.c = c;
        l.g5 = gamma5;
        launch_v3(&mut self.gpu, &f, &l)
    }

    /// Convert n complex numbers between addresses (precisions given by the sizes).
    fn convert_raw(
        &mut self,
        src: u64,
        src_size: u64,
        dst: u64,
        dst_size: u64,
        n: usize,
    ) -> Result<()> {
        let nn = n as i64;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        if src_size == dst_size {
            let p = self.gpu.begin()?;
            // SAFETY: both ranges lie inside live allocations of this context (the callers
            // check the layouts), on the backend's one stream.
            unsafe {
                cudarc::driver::result::memcpy_dtod_async(
                    dst,
                    src,
                    n * src_size as usize,
                    self.gpu.stream.cu_stream(),
                )
            }
            .map_err(err("copying a field"))?;
            let k = if src_size == 16 {
                Kernel::Copy
            } else {
                Kernel::CopySingle
            };
            return self.gpu.end(p, k, n);
        }
        let fs = self.fast.as_ref().unwrap();
        if dst_size == 8 {
            launch!(
                self.gpu,
                Kernel::Convert { to_single: true },
                n,
                &fs.to_single,
                cfg,
                [&src, &dst, &nn]
            );
        } else {
            launch!(
                self.gpu,
                Kernel::Convert { to_single: false },
                n,
                &fs.to_double,
                cfg,
                [&src, &dst, &nn]
            );
        }
        Ok(())
    }

    /// dst = src across precisions, gathering a parity from a full field or scattering a
    /// half field into a full one (with the parity-major layout these are offset copies).
    pub(crate) fn fast_convert(
        &mut self,
        dst: &mut DeviceSpinor,
        src: &DeviceSpinor,
    ) -> Result<()> {
        let (ds, ss) = (dst.layout.subset, src.layout.subset);
        let half = self.vh() * 12;
        let (src_off, dst_off, n) = match (ds.parity(), ss.parity()) {
            (None, None) => (0, 0, 2 * half),
            (Some(p), Some(q)) if p == q => (0, 0, half),
            (Some(p), None) => (p * half, 0, half),
            (None, Some(q)) => (0, q * half, half),
            _ => return Err(mismatch("convert", dst.layout, src.layout)),
        };
        let stream = self.gpu.stream.clone();
        let (s, s_size) = addr(src, &stream);
        let (d, d_size) = addr(dst, &stream);
        self.convert_raw(
            s + src_off as u64 * s_size,
            s_size,
            d + dst_off as u64 * d_size,
            d_size,
            n,
        )
    }

    pub(crate) fn fast_copy(&mut self, dst: &mut DeviceSpinor, src: &DeviceSpinor) -> Result<()> {
        if dst.layout != src.layout {
            return Err(mismatch("copy", dst.layout, src.layout));
        }
        self.fast_convert(dst, src)
    }

    pub(crate) fn fast_axpy(
        &mut self,
        a: C64,
        x: &DeviceSpinor,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("axpy", x.layout, y.layout));
        }
        let n = x.len();
        let ni = n as i32;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        match (&x.data, &mut y.data) {
            (DeviceData::Double(xd), DeviceData::Double(yd)) => launch!(
                self.gpu,
                Kernel::Xaxpy,
                n,
                &self.blas.xaxpy,
                cfg,
                [xd, yd, &a.re, &a.im, &ni]
            ),
            (DeviceData::Single(xs), DeviceData::Single(ys)) => launch!(
                self.gpu,
                Kernel::XaxpyF,
                n,
                &self.fast.as_ref().unwrap().xaxpy_f,
                cfg,
                [xs, ys, &a.re, &a.im, &ni]
            ),
            _ => return Err(mismatch("axpy", x.layout, y.layout)),
        }
        Ok(())
    }

    pub(crate) fn fast_xpay(
        &mut self,
        x: &DeviceSpinor,
        a: C64,
        y: &mut DeviceSpinor,
    ) -> Result<()> {
        if x.layout != y.layout {
            return Err(mismatch("xpay", x.layout, y.layout));
        }
        let n = x.len();
        let ni = n as i32;
        let cfg = cfg_1d(n, BLAS_BLOCK, 0);
        match (&x.data, &mut y.data) {
            (DeviceData::Double(xd), DeviceData::Double(yd)) => {
                // The seed's way, as for full fields: y = a y, then y = y + x.
                super::seed_xpay(&mut self.gpu, &self.blas, xd, a, yd, n)?
            }
            (DeviceData::Single(xs), DeviceData::Single(ys)) => launch!(
                self.gpu,
                Kernel::XpayF,
                n,
                &self.fast.as_ref().unwrap().xpay_f,
                cfg,
                [xs, ys, &a.re, &a.im, &ni]
            ),
            _ => return Err(mismatch("xpay", x.layout, y.layout)),
        }
        Ok(())
    }

    pub(crate) fn fast_dot(&mut self, x: &DeviceSpinor, y: &DeviceSpinor) -> Result<C64> {
        if x.layout != y.layout {
            return Err(mismatch("dot", x.layout, y.layout));
        }
        let n = x.len();
        let ni = n as i32;
        let cfg = Self::reduce_cfg(n);
        match (&x.data, &y.data) {
            (DeviceData::Double(xd), DeviceData::Double(yd)) => launch!(
                self.gpu,
                Kernel::DotPartial,
                n,
                &self.blas.dot_partial,
                cfg,
                [xd, yd, &ni, &mut self.partial[0]]
            ),
            (DeviceData::Single(xs), DeviceData::Single(ys)) => launch!(
                self.gpu,
                Kernel::DotPartialF,
                n,
                &self.fast.as_ref().unwrap().dot_f,
                cfg,
                [xs, ys, &ni, &mut self.partial[0]]
            ),
            _ => return Err(mismatch("dot", x.layout, y.layout)),
        }
        let (re, im) = self.finish_reduction(reduce_blocks(n), true)?;
        Ok(C64::new(re, im))
    }

    pub(crate) fn fast_norm2(&mut self, x: &DeviceSpinor) -> Result<f64> {
        let n = x.len();
        let ni = n as i32;
        let cfg = Self::reduce_cfg(n);
        match &x.data {
            DeviceData::Double(xd) => launch!(
                self.gpu,
                Kernel::Norm2Partial,
                n,
                &self.blas.norm2_partial,
                cfg,
                [xd, &ni, &mut self.partial[0]]
            ),
            DeviceData::Single(xs) => launch!(
                self.gpu,
                Kernel::Norm2PartialF,
                n,
                &self.fast.as_ref().unwrap().norm2_f,
                cfg,
                [xs, &ni, &mut self.partial[0]]
            ),
        }
        Ok(self.finish_reduction(reduce_blocks(n), false)?.0)
    }

    /// Read a scalar block and check that every ticket counter is back at zero (tests).
    #[doc(hidden)]
    pub fn fast_test_cr_read(&mut self, state: &DeviceCrState) -> Result<CrScalars> {
        let stream = self.gpu.stream.clone();
        let t = stream
            .clone_dtoh(&state.tickets)
            .map_err(err("reading the CR tickets"))?;
        stream
            .synchronize()
            .map_err(err("reading the CR tickets"))?;
        if t.iter().any(|&k| k != 0) {
            return Err(Error::Cuda(format!("CR tickets not back to zero: {t:?}")));
        }
        <Self as crate::backend::FusedCr>::cr_get(self, state)
    }

    /// A field's values as f64 pairs in its own (3.0) order.
    pub(crate) fn read_raw(&mut self, f: &DeviceSpinor) -> Result<Vec<f64>> {
        let stream = self.gpu.stream.clone();
        let v = match &f.data {
            DeviceData::Double(d) => stream
                .clone_dtoh(d)
                .map_err(err("downloading a spinor field"))?,
            DeviceData::Single(s) => stream
                .clone_dtoh(s)
                .map_err(err("downloading a spinor field"))?
                .into_iter()
                .map(f64::from)
                .collect(),
        };
        stream
            .synchronize()
            .map_err(err("downloading a spinor field"))?;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::geometry::lattice::DEFAULT_BOUNDARY;

    fn lat(d: [usize; 4]) -> Lattice {
        Lattice::new(d, DEFAULT_BOUNDARY).unwrap()
    }

    /// The site build_v3_links and stencil_v3 compute for (p, cb), written as in the kernels.
    fn kernel_site(l: &Lattice, p: usize, cb: usize) -> usize {
        let s0 = 2 * cb;
        let c = l.coords(s0);
        s0 + ((c[0] + c[1] + c[2] + c[3] + p) & 1)
    }

    #[test]
    fn checkerboard_maps_are_bijections_and_match_the_kernels() {
        for d in [[4, 4, 4, 8], [6, 4, 8, 4], [2, 2, 2, 2], [2, 4, 6, 2]] {
            let l = lat(d);
            let v = l.volume();
            let vh = v / 2;
            let mut seen = vec![false; v * 12];
            let mut seen_links = vec![false; v * 36];
            for s in 0..v {
                let (p, cb) = l.checkerboard(s);
                assert!(cb < vh);
                assert_eq!(kernel_site(&l, p, cb), s, "{d:?} site {s}");
                for k in 0..12 {
                    let i = spinor_index(vh, p, cb, k);
                    assert!(!seen[i]);
                    seen[i] = true;
                }
                for mu in 0..4 {
                    for e in 0..9 {
                        let i = link_index(vh, p, cb, mu, e);
                        assert!(!seen_links[i]);
                        seen_links[i] = true;
                        // build_v3_links' thread for output i reads canonical s*36 + mu*9 + e.
                        let (pp, r) = (i / (36 * vh), i % (36 * vh));
                        assert_eq!(
                            kernel_site(&l, pp, r % vh) * 36 + r / vh,
                            s * 36 + mu * 9 + e
                        );
                    }
                }
            }
            assert!(seen.iter().all(|&b| b) && seen_links.iter().all(|&b| b));
            // A full field is two half fields: even sites first.
            assert_eq!(spinor_index(vh, 1, 0, 0), 12 * vh);
        }
    }

    #[test]
    fn parity_major_spinor_order_round_trips() {
        let l = lat([4, 2, 2, 6]);
        let v = l.volume();
        let canonical: Vec<f64> = (0..v * 24).map(|k| k as f64).collect();
        let mut soa = vec![0.0; v * 24];
        spinor_to_soa(&l, &canonical, &mut soa);
        // element k = 7 of site 3 (parity 1, cb 1) sits at 12*Vh + 7*Vh + 1.
        let vh = v / 2;
        assert_eq!(l.parity(3), 1);
        assert_eq!(soa[2 * (12 * vh + 7 * vh + 1)], canonical[3 * 24 + 14]);
        let mut back = vec![0.0; v * 24];
        spinor_from_soa(&l, &soa, &mut back, None);
        assert_eq!(back, canonical);
        // The odd half alone fills the odd sites and leaves the even ones.
        let mut odd_only = vec![-1.0; v * 24];
        spinor_from_soa(&l, &soa[24 * vh..], &mut odd_only, Some(1));
        for s in 0..v {
            let got = &odd_only[24 * s..24 * s + 24];
            if l.parity(s) == 1 {
                assert_eq!(got, &canonical[24 * s..24 * s + 24]);
            } else {
                assert!(got.iter().all(|&x| x == -1.0));
            }
        }
    }

    #[test]
    fn odd_extents_are_refused_with_the_dims() {
        let l = lat([4, 3, 4, 4]);
        match check_even_lattice(&l) {
            Err(Error::InvalidValue { message, .. }) => {
                assert!(message.contains("even extents"), "{message}");
                assert!(message.contains("4x3x4x4"), "{message}");
            }
            other => panic!("expected InvalidValue, got {other:?}"),
        }
        assert!(check_even_lattice(&lat([4, 4, 4, 8])).is_ok());
    }
}
