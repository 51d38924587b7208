//! Kernel descriptors: every kernel the CUDA backend launches knows its name and the
//! floating-point operations it executes and the global-memory bytes it moves in one
//! launch, so that every timing prints GFLOP/s and GB/s (QUDA's habit). Counts are the
//! kernels' own (what the code executes), not a model; the stencil versions' per-site
//! counts live on `StencilVersion`. The flop and byte counts themselves, and the models
//! they are built from, are in `counts`.

mod batch;
mod counts;

use crate::backend::cuda::core::version::{Reconstruct, StencilVersion};
use crate::backend::Precision;
use crate::dirac::reference::li_matrices;

/// The seed's hop order (kernels/common.cuh): hop h = 0..7 goes in direction HOP_MU[h]
/// (0..3 = x, y, z, t), forward for h < 4: up t, x, y, z, then down t, x, y, z.
pub const HOP_MU: [usize; 8] = [3, 0, 1, 2, 3, 0, 1, 2];

/// The seed's Li matrices (from the CPU reference) in hop order, each 4x4 row-major, as
/// (re, im) pairs: the contents of the kernels' `c_li` constant array.
pub fn li_in_hop_order() -> Vec<f64> {
    let li = li_matrices();
    (0..8)
        .flat_map(|h| {
            li[HOP_MU[h]][h / 4]
                .iter()
                .flatten()
                .flat_map(|z| [z.re, z.im])
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Threads per block of the reduction kernels (REDUCE_BLOCK in reduce.cu); each block
/// reduces twice as many inputs.
/// Doubles of the fused CR scalar block (kernels/cr_device.cuh; indices in `fused`).
pub const CR_SCALARS: usize = 16;

/// Threads per block of cr_xr and cr_p (dynamic shared memory: 16 bytes per thread).
pub const CR_BLOCK: usize = 256;
/// Elements per thread the grid is sized for (at least; the grid is capped).
pub const CR_PER_THREAD: usize = 8;
/// The most blocks of cr_xr and cr_p: about 8 resident blocks on each SM of an H100.
pub const CR_MAX_GRID: usize = 1024;

/// Blocks of cr_xr and cr_p over n complex numbers: a function of n only, so that the
/// reductions' trees (and so their bits) are the same on every run and every device.
pub fn cr_grid(n: usize) -> usize {
    n.div_ceil(CR_BLOCK * CR_PER_THREAD).clamp(1, CR_MAX_GRID)
}

pub const REDUCE_BLOCK: usize = 256;
/// Threads per block of the BLAS-1 and element-wise kernels.
pub const BLAS_BLOCK: usize = 256;

/// What one launch of version 3.0's stencil computes (kernels/stencil_v3.cu).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum V3Mode {
    /// Full fields, out = [g5] (inp - kappa H inp): one thread per site over V.
    Full,
    /// Half fields, out = [g5] c H inp (no y): one thread per site of one parity.
    Parity,
    /// Half fields, out = [g5] (y + c H inp).
    ParityXpay,
}

/// The site term's part of a 3.0 launch (kernels/clover.cuh): none (the Wilson
/// epilogue, out = y + c hop), out = A y + c hop, or out = A^-1 (y + c hop); `twist`: a
/// twisted mass, which the inverse applies as (H - i s c) (H^2 + c^2)^-1, reading both
/// clover arrays.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SiteEpilogue {
    #[default]
    None,
    Apply {
        twist: bool,
    },
    Inverse {
        twist: bool,
    },
}

impl SiteEpilogue {
    /// Flops a site beyond the Wilson epilogue's: a Hermitian 6x6 block product is 252,
    /// two blocks 504 (QUDA's clover count); the twist's i s c v on 24 reals, 48; the
    /// inverse with a twist two block products and the twist.
    pub fn flops(self) -> u64 {
        match self {
            SiteEpilogue::None => 0,
            SiteEpilogue::Apply { twist }
            | SiteEpilogue::Inverse {
                twist: twist @ false,
            } => 504 + if twist { 48 } else { 0 },
            SiteEpilogue::Inverse { twist: true } => 1008 + 48,
        }
    }

    /// Reals of the clover arrays read a site: one array (72 reals), both for the inverse
    /// with a twist.
    pub fn reals(self) -> u64 {
        match self {
            SiteEpilogue::None => 0,
            SiteEpilogue::Inverse { twist: true } => 144,
            _ => 72,
        }
    }
}

/// Right-hand sides one batch launch takes at most (kernels/stencil_v3.cu `V3_BATCH_MAX`,
/// the length of the pointer arrays of its `V3Batch` parameter).
pub const BATCH_MAX: usize = 16;

/// One launch of a batch entry over `rhs` right-hand sides: each right-hand side's work is
/// the one-right-hand-side launch of the same mode, precision, link form and site term
/// (`Kernel::V3` without the dot epilogue, which the batch entries do not have).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct V3Batch {
    pub mode: V3Mode,
    pub single: bool,
    /// Half-precision spinors (then `single` too).
    pub half: bool,
    pub reconstruct: Reconstruct,
    pub site: SiteEpilogue,
    pub rhs: u8,
}

/// Bytes per complex number of a field of this precision.
pub fn complex_bytes(single: bool) -> u64 {
    if single {
        8
    } else {
        16
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kernel {
    /// y = a y, complex (seed: xMult).
    Xscal,
    /// y = y + a x, complex (seed: xMultAdd).
    Xaxpy,
    /// Device-to-device copy of a field.
    Copy,
    /// (x|x) over n complex inputs in one launch: the first pass and the climb of the
    /// partial sums (kernels/reduce.cu).
    Norm2Partial,
    /// (x|y) over n complex input pairs, first pass and climb.
    DotPartial,
    /// A fused stencilCore (versions 1.0 to 1.6.1) over n sites.
    Stencil(StencilVersion),
    /// Version 2.0's spin product of one hop over n sites.
    Xgemm34x44,
    /// Version 2.0's colour product of one hop over n sites (writing on the first hop).
    Xgemm33x34 {
        accumulate: bool,
    },
    /// Version 2.0's out = psi - kappa tmp2 over n sites.
    DslashCombine,
    /// The fused CR iteration's x += alpha p, r -= alpha Ap with nr = (r|r) and the
    /// scalar update, over n complex numbers of fields of this precision.
    CrXr(Precision),
    /// The fused CR iteration's p = r + beta p, Ap = Ar + beta Ap with apap = (Ap|Ap) and
    /// the scalar update, over n complex numbers.
    CrP(Precision),
    /// The start of a fused CR run's fields over n complex numbers: r = rhs, x = p = Ap
    /// = 0 (cr_load).
    CrLoad(Precision),
    /// The end of a fused CR reduction on a decomposed lattice: n ranks' sums added in
    /// rank order and the scalar update (one thread).
    CrGlobal,
    /// `CrGlobal` with its own all-gather over peer memory (kernels/cr_fused.cu
    /// cr_peer_sum, n ranks: threads of one process on their own GPUs).
    CrPeerSum,
    /// The fused BiCGStab (kernels/bicgstab_fused.cu) over n complex numbers: the start
    /// (r = r0 = p = rhs, x = 0, rho = (rhs|rhs)), alpha = rho / (r0|v), s = r - alpha v,
    /// omega = (t|s) / (t|t), the x and r update with (r|r) and (r0|r), and the p update.
    BiStart(Precision),
    BiAlpha(Precision),
    BiS(Precision),
    BiOmega(Precision),
    BiUpdate(Precision),
    BiP(Precision),
    /// The end of a fused BiCGStab reduction on a decomposed lattice: n ranks' sums added
    /// in rank order and the scalar update (bi_global, one thread).
    BiGlobal,
    /// A set-up kernel (layout building); not booked in the solve's statistics.
    Setup(&'static str),
    /// Version 3.0's stencil over n written sites: full or parity mode, single precision
    /// (float2 fields and links), compressed links, fused (y|out) epilogue.
    V3 {
        mode: V3Mode,
        single: bool,
        reconstruct: Reconstruct,
        dot: bool,
        /// Half-precision spinors (then `single` too: float arithmetic and links).
        half: bool,
        /// The clover term's and twist's epilogue (CLOVER builds).
        site: SiteEpilogue,
    },
    /// Version 3.0's batch entries over several right-hand sides, n written sites each
    /// (`V3Batch`: the links and site terms read once a batch).
    V3Batch(V3Batch),
    /// The CLOVER builds' site kernel out = A^-1 inp over n sites (stencil_v3_clover_inv):
    /// float arithmetic and arrays when `single` (single and half fields), half spinors,
    /// and whether a twist makes it read both clover arrays.
    CloverInv {
        single: bool,
        half: bool,
        twist: bool,
    },
    /// A site-wise kernel on half-precision fields (kernels/half.cuh) over n sites.
    Half(HalfOp),
    /// y = y + a x on float2 fields.
    XaxpyF,
    /// y = x + a y on float2 fields (one pass).
    XpayF,
    /// (x|x) over n float2 inputs (double sums), first pass and climb.
    Norm2PartialF,
    /// (x|y) over n float2 input pairs (double sums), first pass and climb.
    DotPartialF,
    /// y = y + (double) x over n complex numbers, a float2 x and a double2 y (the reliable
    /// update's fold, blas1.cu add_widened).
    AddWidened,
    /// r = b - r, low = (float) r and (r|r) over n complex numbers in one launch (the
    /// reliable update's residual, reduce.cu residual_norm2: first pass and climb).
    ResidualNorm2,
    /// Precision conversion of n complex numbers (to float2, or to double2).
    Convert {
        to_single: bool,
    },
    /// Device-to-device copy of n float2 numbers.
    CopySingle,
    /// A field of n complex numbers set to zero (a memset).
    Zero {
        single: bool,
    },
    /// 3.0 on a decomposed lattice: the spin-projected faces of one split direction, n
    /// face sites (kernels/halo.cu halo_pack).
    HaloPack {
        single: bool,
    },
    /// The hops from the received faces added to n face sites of the output
    /// (halo_exterior); `dot`: with its part of the fused CR's (y|out).
    HaloExterior {
        single: bool,
        reconstruct: Reconstruct,
        dot: bool,
    },
}

/// Threads per block of the halo kernels (kernels/halo.cu, launched so by halo.rs).
pub(crate) const HALO_BLOCK: usize = 128;

/// Inputs a reduction pass loads in its blocks' second halves, and its block count.
fn reduce_shape(n: usize) -> (u64, u64) {
    let chunk = 2 * REDUCE_BLOCK;
    let blocks = n.div_ceil(chunk);
    let full = n / chunk;
    let rest = n % chunk;
    let second = full * REDUCE_BLOCK + rest.saturating_sub(REDUCE_BLOCK);
    (second as u64, blocks as u64)
}

/// Blocks of a reduction pass over n inputs.
pub fn reduce_blocks(n: usize) -> usize {
    n.div_ceil(2 * REDUCE_BLOCK)
}

/// Values of the levels above a first pass of `blocks` blocks (kernels/reduce.cu `climb`:
/// level 1 has reduce_blocks(blocks) values, and so on up to the one value of the top);
/// also the number of its tickets (one per group, a group making one value).
pub fn climb_len(blocks: usize) -> usize {
    let (mut len, mut total) = (blocks, 0);
    while len > 1 {
        len = reduce_blocks(len);
        total += len;
    }
    total
}

/// Bytes of the reduction buffers for first passes of at most `blocks` blocks (core.rs
/// `ReduceBuffers`): the first pass's double2 partials, the climb's levels (double2) and
/// tickets (u32), and the result (a double2).
pub fn reduce_buffer_bytes(blocks: usize) -> u64 {
    let upper = climb_len(blocks).max(1);
    (8 * (2 * blocks.max(1) + 2 * upper + 2) + 4 * upper) as u64
}

impl Kernel {
    pub fn name(&self) -> String {
        match self {
            Kernel::Xscal => "xscal".into(),
            Kernel::Xaxpy => "xaxpy".into(),
            Kernel::Copy => "copy".into(),
            Kernel::Norm2Partial => "norm2_partial".into(),
            Kernel::DotPartial => "dot_partial".into(),
            Kernel::Stencil(v) => format!("stencilCore {v}"),
            Kernel::Xgemm34x44 => "xgemm34x44 (2.0)".into(),
            Kernel::Xgemm33x34 { .. } => "xgemm33x34 (2.0)".into(),
            Kernel::DslashCombine => "dslash_combine (2.0)".into(),
            Kernel::CrXr(p) => format!("cr_xr ({})", precision_name(*p)),
            Kernel::CrP(p) => format!("cr_p ({})", precision_name(*p)),
            Kernel::CrLoad(p) => format!("cr_load ({})", precision_name(*p)),
            Kernel::CrGlobal => "cr_global".into(),
            Kernel::CrPeerSum => "cr_peer_sum".into(),
            Kernel::BiStart(p) => format!("bi_start ({})", precision_name(*p)),
            Kernel::BiAlpha(p) => format!("bi_alpha ({})", precision_name(*p)),
            Kernel::BiS(p) => format!("bi_s ({})", precision_name(*p)),
            Kernel::BiOmega(p) => format!("bi_omega ({})", precision_name(*p)),
            Kernel::BiUpdate(p) => format!("bi_update ({})", precision_name(*p)),
            Kernel::BiP(p) => format!("bi_p ({})", precision_name(*p)),
            Kernel::BiGlobal => "bi_global".into(),
            Kernel::Setup(name) => (*name).into(),
            Kernel::V3 {
                mode,
                single,
                reconstruct,
                dot,
                half,
                site,
            } => {
                let mut tags = Vec::new();
                match mode {
                    V3Mode::Full => {}
                    V3Mode::Parity => tags.push("eo"),
                    V3Mode::ParityXpay => tags.push("eo xpay"),
                }
                if *half {
                    tags.push("half");
                } else if *single {
                    tags.push("single");
                }
                if reconstruct.compressed() {
                    tags.push(reconstruct.label());
                }
                if *dot {
                    tags.push("dot");
                }
                match site {
                    SiteEpilogue::None => {}
                    SiteEpilogue::Apply { twist: false } => tags.push("clover"),
                    SiteEpilogue::Apply { twist: true } => tags.push("clover, twist"),
                    SiteEpilogue::Inverse { twist: false } => tags.push("clover inverse"),
                    SiteEpilogue::Inverse { twist: true } => tags.push("clover inverse, twist"),
                }
                if tags.is_empty() {
                    "stencilCore 3.0".into()
                } else {
                    format!("stencilCore 3.0 [{}]", tags.join(", "))
                }
            }
            Kernel::V3Batch(b) => b.name(),
            Kernel::CloverInv {
                single,
                half,
                twist,
            } => {
                let p = if *half {
                    "half"
                } else if *single {
                    "single"
                } else {
                    "double"
                };
                let t = if *twist { ", twist" } else { "" };
                format!("clover inverse [{p}{t}]")
            }
            Kernel::Half(op) => format!("{} (half)", op.name()),
            Kernel::XaxpyF => "xaxpy (single)".into(),
            Kernel::XpayF => "xpay (single)".into(),
            Kernel::Norm2PartialF => "norm2_partial (single)".into(),
            Kernel::DotPartialF => "dot_partial (single)".into(),
            Kernel::AddWidened => "add_widened".into(),
            Kernel::ResidualNorm2 => "residual_norm2".into(),
            Kernel::Convert { to_single: true } => "to_single".into(),
            Kernel::Convert { to_single: false } => "to_double".into(),
            Kernel::CopySingle => "copy (single)".into(),
            Kernel::Zero { single: false } => "zero".into(),
            Kernel::Zero { single: true } => "zero (single)".into(),
            Kernel::HaloPack { single } => {
                format!("halo pack{}", if *single { " [single]" } else { "" })
            }
            Kernel::HaloExterior {
                single,
                reconstruct,
                dot,
            } => {
                let tags: Vec<&str> = [
                    (*single, "single"),
                    (reconstruct.compressed(), reconstruct.label()),
                    (*dot, "dot"),
                ]
                .iter()
                .filter(|t| t.0)
                .map(|t| t.1)
                .collect();
                if tags.is_empty() {
                    "halo exterior".into()
                } else {
                    format!("halo exterior [{}]", tags.join(", "))
                }
            }
        }
    }

    /// Part of the operator application (the stencil), as opposed to BLAS-1 and reductions.
    pub fn is_stencil(&self) -> bool {
        matches!(
            self,
            Kernel::Stencil(_)
                | Kernel::V3 { .. }
                | Kernel::V3Batch(_)
                | Kernel::CloverInv { .. }
                | Kernel::Xgemm34x44
                | Kernel::Xgemm33x34 { .. }
                | Kernel::DslashCombine
                | Kernel::HaloPack { .. }
                | Kernel::HaloExterior { .. }
        )
    }
}

/// The site-wise kernels on half fields: one thread per site (12 complex numbers sharing
/// one norm), counted per site. Arithmetic per complex as the float kernels'; the
/// rounding to 16 bits (a max over 24 reals, a scale, a rint per real) not counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HalfOp {
    /// y = y + a x (xaxpy_h).
    Axpy,
    /// y = x + a y (xpay_h).
    Xpay,
    /// (x|x) (norm2_partial_h): one site per input, double sums; first pass and climb.
    Norm2Partial,
    /// (x|y) (dot_partial_h), first pass and climb.
    DotPartial,
    /// From a double field (to_half).
    FromDouble,
    /// To a double field (from_half).
    ToDouble,
    /// Device-to-device copy (integers and norms).
    Copy,
    /// Set to zero (memsets of the integers and the norms).
    Zero,
}

impl HalfOp {
    pub fn name(self) -> &'static str {
        match self {
            HalfOp::Axpy => "xaxpy",
            HalfOp::Xpay => "xpay",
            HalfOp::Norm2Partial => "norm2_partial",
            HalfOp::DotPartial => "dot_partial",
            HalfOp::FromDouble => "to_half",
            HalfOp::ToDouble => "from_half",
            HalfOp::Copy => "copy",
            HalfOp::Zero => "zero",
        }
    }
}

/// `v3_bytes_per_site` for half spinors (52 bytes a site, `linalg::half`) with the links
/// of the half build (`half_link_real_bytes`).
pub fn v3_half_bytes_per_site(mode: V3Mode, reconstruct: Reconstruct) -> u64 {
    let link = reconstruct.reals() as u64 * half_link_real_bytes(reconstruct);
    let spinor = crate::linalg::half::SITE_BYTES;
    match mode {
        V3Mode::Full => 4 * link + 2 * spinor,
        V3Mode::Parity => 8 * link + 2 * spinor,
        V3Mode::ParityXpay => 8 * link + 3 * spinor,
    }
}

/// Bytes of a link real in the half build (kernels/v3_core.cuh V3_LINK16): 16-bit
/// integers with 18 or 12 reals a link, floats in the 8-real form.
pub fn half_link_real_bytes(reconstruct: Reconstruct) -> u64 {
    if reconstruct == Reconstruct::R8 {
        4
    } else {
        2
    }
}

fn precision_name(p: Precision) -> &'static str {
    p.name()
}

/// Version 3.0's DRAM floor per written site (each array read once, conventions.md): the
/// links (18, 12 or 8 reals each) and the spinors in the launch's precision. Full mode: 4
/// links, the input (which is also y) and the output. Parity mode: the half lattice's
/// sites read the links of both parities (8 per written site), the input half field, y
/// (xpay only) and the output. The dot epilogue's per-block partials are not counted.
pub fn v3_bytes_per_site(mode: V3Mode, single: bool, reconstruct: Reconstruct) -> u64 {
    let real = if single { 4 } else { 8 };
    let link = reconstruct.reals() as u64 * real;
    let spinor = 24 * real;
    match mode {
        V3Mode::Full => 4 * link + 2 * spinor,
        V3Mode::Parity => 8 * link + 2 * spinor,
        V3Mode::ParityXpay => 8 * link + 3 * spinor,
    }
}

pub const BI_SCALARS: usize = 19;
