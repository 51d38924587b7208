//! The portable vector type: `[f64; 4]` arithmetic without fused multiply-adds, for CPUs
//! without AVX2 + FMA (the kernel's pieces are the trait's defaults).

use super::kernel::Simd;
use super::lanes::{Lane, W};

/// Plain arrays; LLVM maps them onto whatever vector width the build target has.
#[derive(Clone, Copy)]
pub(super) struct Portable([f64; W]);

impl Portable {
    #[inline(always)]
    fn zip(mut self, o: Self, f: impl Fn(f64, f64) -> f64) -> Self {
        for i in 0..W {
            self.0[i] = f(self.0[i], o.0[i]);
        }
        self
    }
}

impl Simd for Portable {
    #[inline(always)]
    fn ld(p: &Lane) -> Self {
        Portable(p.0)
    }
    #[inline(always)]
    fn st(self, p: &mut Lane) {
        p.0 = self.0;
    }
    #[inline(always)]
    fn splat(x: f64) -> Self {
        Portable([x; W])
    }
    #[inline(always)]
    fn from_lanes(x: [f64; W]) -> Self {
        Portable(x)
    }
    #[inline(always)]
    fn add(self, o: Self) -> Self {
        self.zip(o, |a, b| a + b)
    }
    #[inline(always)]
    fn sub(self, o: Self) -> Self {
        self.zip(o, |a, b| a - b)
    }
    #[inline(always)]
    fn mul(self, o: Self) -> Self {
        self.zip(o, |a, b| a * b)
    }
    #[inline(always)]
    fn neg(self) -> Self {
        Portable(self.0.map(|a| -a))
    }
    #[inline(always)]
    fn flip(self, mask: Self) -> Self {
        self.zip(mask, |a, m| f64::from_bits(a.to_bits() ^ m.to_bits()))
    }
    #[inline(always)]
    fn fma(a: Self, b: Self, c: Self) -> Self {
        a.mul(b).add(c)
    }
    #[inline(always)]
    fn fnma(a: Self, b: Self, c: Self) -> Self {
        c.sub(a.mul(b))
    }
    #[inline(always)]
    fn rot_next(cur: Self, next: Self) -> Self {
        Portable([cur.0[1], cur.0[2], cur.0[3], next.0[0]])
    }
    #[inline(always)]
    fn rot_prev(prev: Self, cur: Self) -> Self {
        Portable([prev.0[3], cur.0[0], cur.0[1], cur.0[2]])
    }
}
