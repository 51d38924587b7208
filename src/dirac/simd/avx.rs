//! AVX2 + FMA lanes: the generic kernel instantiated inside `target_feature` functions
//! so that the intrinsics inline into 256-bit code.

use super::kernel::{
    hop_x, hop_yzt, row_kernel, x_carry, Carry, Full, Hops, Kernel, LBlock, SBlock, Simd, XHops,
};
use super::lanes::{Lane, W};
use crate::dirac::fast::Epilogue;
use std::arch::x86_64::*;

#[derive(Clone, Copy)]
pub(super) struct Avx(__m256d);

// SAFETY (all methods): only reached from `row`, whose caller checked AVX2 and FMA;
// loads and stores go through `&Lane`, which is 32-byte aligned.
impl Simd for Avx {
    #[inline(always)]
    fn ld(p: &Lane) -> Self {
        unsafe { Avx(_mm256_load_pd(p.0.as_ptr())) }
    }
    #[inline(always)]
    fn st(self, p: &mut Lane) {
        unsafe { _mm256_store_pd(p.0.as_mut_ptr(), self.0) }
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        unsafe { Avx(_mm256_set1_pd(x)) }
    }
    #[inline(always)]
    fn from_lanes(x: [f64; W]) -> Self {
        unsafe { Avx(_mm256_loadu_pd(x.as_ptr())) }
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        unsafe { Avx(_mm256_add_pd(self.0, o.0)) }
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        unsafe { Avx(_mm256_sub_pd(self.0, o.0)) }
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        unsafe { Avx(_mm256_mul_pd(self.0, o.0)) }
    }
    #[inline(always)]
    fn neg(self) -> Self {
        unsafe { Avx(_mm256_xor_pd(self.0, _mm256_set1_pd(-0.0))) }
    }
    #[inline(always)]
    fn flip(self, mask: Self) -> Self {
        unsafe { Avx(_mm256_xor_pd(self.0, mask.0)) }
    }
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        unsafe { Avx(_mm256_fmadd_pd(a.0, b.0, c.0)) }
    }
    #[inline(always)]
    fn fnma(a: Self, b: Self, c: Self) -> Self {
        unsafe { Avx(_mm256_fnmadd_pd(a.0, b.0, c.0)) }
    }
    #[inline(always)]
    fn rot_next(cur: Self, next: Self) -> Self {
        unsafe {
            // t = [cur2, cur3, next0, next1]; pick cur1, t0, cur3, t2.
            let t = _mm256_permute2f128_pd::<0x21>(cur.0, next.0);
            Avx(_mm256_shuffle_pd::<0b0101>(cur.0, t))
        }
    }
    #[inline(always)]
    fn rot_prev(prev: Self, cur: Self) -> Self {
        unsafe {
            // t = [prev2, prev3, cur0, cur1]; pick t1, cur0, t3, cur2.
            let t = _mm256_permute2f128_pd::<0x21>(prev.0, cur.0);
            Avx(_mm256_shuffle_pd::<0b0101>(t, cur.0))
        }
    }

    #[inline(always)]
    fn prefetch(p: *const u8, bytes: usize) {
        // Every 64-byte line the range touches, whatever its alignment. A prefetch never
        // faults, so the address need not be valid.
        let first = (p as usize) & !63;
        let end = p as usize + bytes;
        let mut line = p.wrapping_sub(p as usize - first) as *const i8;
        while (line as usize) < end {
            unsafe { _mm_prefetch::<_MM_HINT_T0>(line) };
            line = line.wrapping_add(64);
        }
    }

    #[inline(always)]
    fn hop_yzt<const MU: usize, const INIT: bool, const S: usize, const PH: bool>(
        h: &Hops<'_>,
        acc: &mut Full<Self>,
    ) {
        unsafe { hop_yzt_avx::<MU, INIT, S, PH>(h, acc) }
    }

    #[inline(always)]
    fn hop_x<const S: usize, const WILSON: bool, const PH: bool>(
        x: &XHops<'_, Self>,
        carry: &mut Carry,
        acc: &Full<Self>,
        out: &mut SBlock,
    ) {
        unsafe { hop_x_avx::<S, WILSON, PH>(x, carry, acc, out) }
    }

    #[inline(always)]
    fn x_carry<const S: usize>(psi: &SBlock, link: &LBlock, carry: &mut Carry) {
        unsafe { x_carry_avx::<S>(psi, link, carry) }
    }
}

// Out of line on purpose: inlined into one block of ~2000 instructions, LLVM hoists
// the loads of all hops and spills hundreds of vectors; a call per direction and spin
// row keeps each piece within the 16 registers (the sum lives in memory anyway).
#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn hop_yzt_avx<const MU: usize, const INIT: bool, const S: usize, const PH: bool>(
    h: &Hops<'_>,
    acc: &mut Full<Avx>,
) {
    hop_yzt::<Avx, MU, INIT, S, PH>(h, acc)
}

#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn hop_x_avx<const S: usize, const WILSON: bool, const PH: bool>(
    x: &XHops<'_, Avx>,
    carry: &mut Carry,
    acc: &Full<Avx>,
    out: &mut SBlock,
) {
    hop_x::<Avx, S, WILSON, PH>(x, carry, acc, out)
}

#[target_feature(enable = "avx2,fma")]
#[inline(never)]
unsafe fn x_carry_avx<const S: usize>(psi: &SBlock, link: &LBlock, carry: &mut Carry) {
    x_carry::<Avx, S>(psi, link, carry)
}

/// One x row of output blocks in 256-bit code.
#[target_feature(enable = "avx2,fma")]
pub(super) unsafe fn row(k: &Kernel<'_>, row: usize, out: &mut [SBlock], epilogue: Epilogue) {
    match epilogue {
        Epilogue::Hop => row_kernel::<Avx, false>(k, row, out, 0.0, false),
        Epilogue::Wilson { kappa, gamma5 } => row_kernel::<Avx, true>(k, row, out, kappa, gamma5),
    }
}
