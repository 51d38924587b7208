//! The batched stencil's counts (kernels/stencil_v3.cu's batch entries, one launch over
//! several right-hand sides; `V3Batch`): its name, and its flop and byte counts. The byte
//! model reads the links (and the clover arrays) once a batch and the spinors once a
//! right-hand side: the batch's blocks that share a block's links run back to back, so all
//! but the first find them in L2.

use super::{Kernel, V3Batch, V3Mode};

impl V3Batch {
    /// The launch of one of its right-hand sides alone.
    pub fn single_rhs(&self) -> Kernel {
        Kernel::V3 {
            mode: self.mode,
            single: self.single,
            reconstruct: self.reconstruct,
            dot: false,
            half: self.half,
            site: self.site,
        }
    }

    /// "stencilCore 3.0 batch N" and the one-right-hand-side launch's tags.
    pub fn name(&self) -> String {
        self.single_rhs().name().replacen(
            "stencilCore 3.0",
            &format!("stencilCore 3.0 batch {}", self.rhs),
            1,
        )
    }

    /// Flops per written site of one right-hand side, times the right-hand sides.
    pub fn flops_per_site(&self) -> u64 {
        self.rhs as u64 * self.single_rhs().flops(1)
    }

    /// DRAM bytes per written site of one right-hand side: the links the site's hops read
    /// (4 in the full mode, 8 in a parity launch) and the site term's arrays, once, and
    /// each right-hand side's spinors (input and output; y too in the xpay form, which the
    /// full mode's y = inp does not add).
    pub fn bytes_per_site(&self) -> u64 {
        let one = self.single_rhs().bytes(1);
        let spinors = self.spinor_bytes_per_site();
        (one - spinors) + self.rhs as u64 * spinors
    }

    /// One right-hand side's spinor bytes per written site.
    fn spinor_bytes_per_site(&self) -> u64 {
        let spinor = if self.half {
            crate::linalg::half::SITE_BYTES
        } else if self.single {
            96
        } else {
            192
        };
        match self.mode {
            V3Mode::Full | V3Mode::Parity => 2 * spinor,
            V3Mode::ParityXpay => 3 * spinor,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::cuda::core::kernels::SiteEpilogue;
    use crate::backend::cuda::core::version::Reconstruct;

    fn batch(mode: V3Mode, single: bool, reconstruct: Reconstruct, rhs: u8) -> V3Batch {
        V3Batch {
            mode,
            single,
            half: false,
            reconstruct,
            site: SiteEpilogue::None,
            rhs,
        }
    }

    #[test]
    fn one_right_hand_side_is_the_single_launchs_count() {
        // A batch of one reads what the one-right-hand-side launch reads (its DRAM floor,
        // v3_bytes_per_site) and executes its flops.
        for mode in [V3Mode::Full, V3Mode::Parity, V3Mode::ParityXpay] {
            for single in [false, true] {
                for r in Reconstruct::ALL {
                    let b = batch(mode, single, r, 1);
                    assert_eq!(b.bytes_per_site(), b.single_rhs().bytes(1), "{b:?}");
                    assert_eq!(b.flops_per_site(), b.single_rhs().flops(1), "{b:?}");
                }
            }
        }
    }

    #[test]
    fn links_are_read_once_a_batch_and_spinors_once_a_right_hand_side() {
        // Full mode, double, 18 reals: 4 links of 144 B once, then 12 x (in + out) of 192
        // B: 576 + 12 x 384 = 5184 B a site, against 12 x 960 one at a time.
        let b = batch(V3Mode::Full, false, Reconstruct::R18, 12);
        assert_eq!(b.bytes_per_site(), 576 + 12 * 384);
        assert_eq!(b.flops_per_site(), 12 * (1320 + 48));
        // Single, 12 reals: 4 x 48 + 12 x 192.
        let b = batch(V3Mode::Full, true, Reconstruct::R12, 12);
        assert_eq!(b.bytes_per_site(), 192 + 12 * 192);
        // The Schur operator's xpay half: 8 links (both parities' forward links), and x_e,
        // tmp_o and the output a right-hand side: 8 x 144 + 3 x 3 x 192 for three.
        let b = batch(V3Mode::ParityXpay, false, Reconstruct::R18, 3);
        assert_eq!(b.bytes_per_site(), 8 * 144 + 3 * 576);
        // The clover arrays (72 reals a site, float in single) once a batch too.
        let mut c = batch(V3Mode::Full, true, Reconstruct::R18, 4);
        c.site = SiteEpilogue::Apply { twist: false };
        assert_eq!(c.bytes_per_site(), 4 * 72 + 72 * 4 + 4 * 192);
        assert_eq!(c.flops_per_site(), 4 * (1320 + 48 + 504));
        // Half spinors: 52 bytes each; 16-bit links.
        let mut h = batch(V3Mode::Parity, true, Reconstruct::R12, 2);
        h.half = true;
        assert_eq!(h.bytes_per_site(), 8 * 24 + 2 * 2 * 52);
    }

    #[test]
    fn the_name_says_batch_and_the_count() {
        let b = batch(V3Mode::ParityXpay, true, Reconstruct::R12, 12);
        assert_eq!(b.name(), "stencilCore 3.0 batch 12 [eo xpay, single, r12]");
        assert_eq!(
            batch(V3Mode::Full, false, Reconstruct::R18, 3).name(),
            "stencilCore 3.0 batch 3"
        );
        assert!(Kernel::V3Batch(b).is_stencil());
    }
}
