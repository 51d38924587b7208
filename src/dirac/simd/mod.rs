//! The Wilson hopping term vectorised over W = 4 sites (1320 flops/site, the same
//! spin-projected algorithm as `fast`), on a site-blocked AoSoA layout, plus the layout's
//! conversions to and from the canonical `SpinorField` / `GaugeField`.
//!
//! Layout. Block b holds the sites 4b .. 4b+3 of `Lattice::index` (x fastest), one site per
//! lane; every real number of a site is one lane of a `Lane = [f64; 4]`:
//! - spinor block: 24 lanes, `[spin][colour][re, im]` (`spinor_slot`), 768 bytes;
//! - link block: 4 directions x 18 lanes, `[link_pos(mu)][row][col][re, im]` (`link_slot`),
//!   the directions in the order the kernel reads them (y, z, t, x).
//!
//! The kernel needs LX % 4 == 0 (`supported`): then a block is 4 consecutive x in one row,
//! every hop in y, z, t lands on a whole block with one boundary phase, and the hops in x
//! are a lane rotation across the current and the neighbouring block of the row (with the
//! x phase on the one lane that wraps). For other LX the layout still exists (the last
//! block zero-padded when the volume is not a multiple of 4) but `LaneGauge::new` returns
//! None and `apply_lanes` falls back to the scalar `fast` operator through the canonical
//! layout. Each output block is written by one task with a fixed operation order, so the
//! result is bitwise the same for any thread count.
//!
//! Work per block: for y, z, t and each of the two half-spinor rows, one out-of-line piece
//! projects both neighbours, multiplies by U and U^+ and adds f + b to the upper and
//! i^-k (b - f) to the lower spin; x last, where the backward product U_x(y)^+ P+ psi(y) is
//! computed once per block and carried to the next block of the row, and the epilogue
//! psi - kappa H psi (x g5) is written directly. The flop count is the model's 1320 per
//! site plus one x-backward product per row (1/(LX/4) of a hop per block) to start the
//! carry. The output block, the t+1 spinor and the t-1 link are prefetched 4 blocks ahead.
//!
//! Instruction sets: AVX2 + FMA (`std::arch`, chosen at run time with
//! `is_x86_feature_detected!`, no `-C target-cpu` needed) or a portable `[f64; 4]` path
//! without fused multiply-adds. The two agree to rounding, not bitwise.
//!
//! Files: `lanes` (the layout's units and slots), `layout` (the blocked fields), `kernel`
//! (the `Simd` trait and the row kernel), `portable` and `avx` (the vector types); here
//! the instruction-set choice and the entry points.

#[cfg(target_arch = "x86_64")]
mod avx;
mod kernel;
pub mod lanes;
pub mod layout;
mod portable;

use super::fast::{self, Epilogue};
use super::Sites;
use crate::field::{GaugeField, SpinorField};
use crate::linalg::Operator;
use kernel::{row_kernel, Geom, Kernel, SBlock};
use lanes::{LINK_LANES, SPINOR_LANES};
use layout::{LaneGauge, LaneSpinor};
use portable::Portable;
use rayon::prelude::*;

/// Sites each rayon task gets at least (a few KiB of output, so task overhead is noise).
const MIN_SITES_PER_TASK: usize = 512;

/// Which code the kernel runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Isa {
    /// 256-bit AVX2 with fused multiply-add.
    Avx2Fma,
    /// `[f64; 4]` arithmetic, no FMA (whatever the compiler's baseline target gives).
    Portable,
}

impl Isa {
    /// The best one this CPU runs.
    pub fn detect() -> Isa {
        #[cfg(target_arch = "x86_64")]
        {
            if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
                return Isa::Avx2Fma;
            }
        }
        Isa::Portable
    }

    pub fn name(self) -> &'static str {
        match self {
            Isa::Avx2Fma => "avx2+fma",
            Isa::Portable => "portable",
        }
    }
}

/// out = A inp for A = D or g5 D on blocked fields: the vectorised kernel when `gauge` has
/// a blocked copy, else the scalar `fast` operator through the canonical layout (two
/// conversions per call; only small or odd lattices take that path).
pub fn apply_lanes(
    op: Operator,
    gauge: &GaugeField,
    blocked: Option<&LaneGauge>,
    kappa: f64,
    inp: &LaneSpinor,
    out: &mut LaneSpinor,
) {
    let epilogue = Epilogue::Wilson {
        kappa,
        gamma5: op == Operator::G5D,
    };
    match blocked {
        Some(lg) => apply(Isa::detect(), lg, inp, out, epilogue),
        None => {
            let mut o = SpinorField::zeros(inp.volume());
            fast::apply(gauge, &inp.to_canonical(), &mut o, Sites::All, epilogue);
            out.assign_canonical(&o);
        }
    }
}

/// out = A inp on canonical fields through the blocked layout (converts the gauge field
/// each call: for tests and one-off use, not for solver loops).
pub fn apply_canonical(
    op: Operator,
    gauge: &GaugeField,
    kappa: f64,
    inp: &SpinorField,
    out: &mut SpinorField,
) {
    let lg = LaneGauge::new(gauge);
    let mut o = LaneSpinor::zeros(inp.volume());
    apply_lanes(
        op,
        gauge,
        lg.as_ref(),
        kappa,
        &LaneSpinor::from_canonical(inp),
        &mut o,
    );
    o.write_canonical(out);
}

/// The hopping term with its epilogue on every site, vectorised with `isa` (which must be
/// one the CPU runs: `Isa::detect()` or `Isa::Portable`).
pub fn apply(
    isa: Isa,
    gauge: &LaneGauge,
    psi: &LaneSpinor,
    out: &mut LaneSpinor,
    epilogue: Epilogue,
) {
    let l = &gauge.lattice;
    assert_eq!(psi.volume, l.volume(), "input volume mismatch");
    assert_eq!(out.volume, l.volume(), "output volume mismatch");
    let k = Kernel {
        geom: Geom::new(l),
        links: gauge.data.as_chunks::<LINK_LANES>().0,
        psi: psi.data.as_chunks::<SPINOR_LANES>().0,
        out: out.data.as_ptr() as *const SBlock,
    };
    let nbx = k.geom.nbx;
    let min_rows = (MIN_SITES_PER_TASK / l.dims[0]).max(1);
    let rows = out
        .data
        .as_chunks_mut::<SPINOR_LANES>()
        .0
        .par_chunks_mut(nbx)
        .with_min_len(min_rows)
        .enumerate();
    match isa {
        #[cfg(target_arch = "x86_64")]
        Isa::Avx2Fma => {
            assert!(Isa::detect() == Isa::Avx2Fma, "this CPU lacks AVX2/FMA");
            // SAFETY: the CPU was just checked to have AVX2 and FMA.
            rows.for_each(|(row, o)| unsafe { avx::row(&k, row, o, epilogue) });
        }
        #[cfg(not(target_arch = "x86_64"))]
        Isa::Avx2Fma => panic!("AVX2 is an x86_64 instruction set"),
        Isa::Portable => rows.for_each(|(row, o)| match epilogue {
            Epilogue::Hop => row_kernel::<Portable, false>(&k, row, o, 0.0, false),
            Epilogue::Wilson { kappa, gamma5 } => {
                row_kernel::<Portable, true>(&k, row, o, kappa, gamma5)
            }
        }),
    }
}
