//! `CudaBackend::apply_batch`: one operator applied to several right-hand sides at once
//! (kernel 3.0's batch entries, kernels/stencil_v3.cu), which reads the links (and the
//! clover arrays) from DRAM about once a batch instead of once a right-hand side, and the
//! checks of its arguments (`check_batch`).

use crate::backend::cuda::backend::CudaBackend;
use crate::backend::cuda::core::field::DeviceSpinor;
use crate::backend::cuda::core::kernels::BATCH_MAX;
use crate::backend::{Layout, Operator};
use crate::error::{Error, Result};

impl CudaBackend {
    /// out_k = op inp_k for every k, for 1 to `BATCH_MAX` (16) right-hand sides of one
    /// layout: the full D and g5 D on full fields in one launch, the Schur operator M_ee and
    /// g5 M_ee on even fields in two (the hop into one odd temporary per right-hand side,
    /// kept for the next batch, then the xpay), with the site term where one is set
    /// (`set_action`). Each right-hand side's result has the bits of `apply(op, ..)` on it
    /// alone (validate/emu/emu_batch.cpp, tests/gpu_batch.rs); the fields need not be
    /// contiguous. Double, single and half fields.
    ///
    /// Refused with a clear error, before any launch: no right-hand side or more than
    /// `BATCH_MAX`, as many outputs as inputs not given, fields of different layouts
    /// (precision or subset), fields not of the operator's subset; and by a seed stencil
    /// version (1.0-2.0) and on a decomposed lattice.
    pub fn apply_batch(
        &mut self,
        op: Operator,
        outs: &mut [&mut DeviceSpinor],
        inps: &[&DeviceSpinor],
    ) -> Result<()> {
        let ins: Vec<_> = inps.iter().map(|x| x.layout).collect();
        let os: Vec<_> = outs.iter().map(|x| x.layout).collect();
        check_batch(op, &os, &ins)?;
        self.stencil.apply_batch(&mut self.core, op, outs, inps)
    }
}

/// The checks of `apply_batch` on the layouts of its outputs and inputs.
pub fn check_batch(op: Operator, outs: &[Layout], inps: &[Layout]) -> Result<()> {
    let n = inps.len();
    if !(1..=BATCH_MAX).contains(&n) {
        return Err(Error::invalid(
            "batch",
            format!("apply_batch takes 1 to {BATCH_MAX} right-hand sides, got {n}"),
        ));
    }
    if outs.len() != n {
        return Err(Error::invalid(
            "batch",
            format!(
                "apply_batch needs one output per input: {} outputs for {n} inputs",
                outs.len()
            ),
        ));
    }
    let first = inps[0];
    for (k, (&o, &i)) in outs.iter().zip(inps).enumerate() {
        if o != first || i != first {
            return Err(Error::invalid(
                "batch",
                format!(
                    "a batch has one layout: right-hand side {k} has input {i:?} and output {o:?}, right-hand side 0's input is {first:?}"
                ),
            ));
        }
    }
    if first.subset != op.subset() {
        return Err(Error::invalid(
            "batch",
            format!(
                "operator {op} acts on {:?} fields, the batch's are {:?}",
                op.subset(),
                first.subset
            ),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::{Precision, Subset};

    fn message(r: Result<()>) -> String {
        match r {
            Err(Error::InvalidValue { key, message }) => {
                assert_eq!(key, "batch");
                message
            }
            other => panic!("expected an invalid-value error, got {other:?}"),
        }
    }

    #[test]
    fn a_batch_is_one_to_sixteen_fields_of_the_operators_layout() {
        let full = Layout::new(Subset::Full, Precision::Double);
        let even = Layout::new(Subset::Even, Precision::Single);
        // Accepted: 1 and 16 full fields for D, 12 even ones for the Schur operator.
        assert!(check_batch(Operator::D, &[full], &[full]).is_ok());
        assert!(check_batch(Operator::G5D, &[full; 16], &[full; 16]).is_ok());
        assert!(check_batch(Operator::G5Schur, &[even; 12], &[even; 12]).is_ok());
        // The count: 0 and 17 refused, naming the range and the count.
        let m = message(check_batch(Operator::D, &[], &[]));
        assert!(m.contains("1 to 16") && m.contains("got 0"), "{m}");
        let m = message(check_batch(Operator::D, &[full; 17], &[full; 17]));
        assert!(m.contains("got 17"), "{m}");
        // One output per input.
        let m = message(check_batch(Operator::D, &[full; 2], &[full; 3]));
        assert!(m.contains("2 outputs for 3 inputs"), "{m}");
        // Mixed precisions (an input or an output) refused, naming the right-hand side.
        let single = Layout::new(Subset::Full, Precision::Single);
        let m = message(check_batch(Operator::D, &[full; 3], &[full, full, single]));
        assert!(m.contains("right-hand side 2"), "{m}");
        let m = message(check_batch(Operator::D, &[full, single], &[full; 2]));
        assert!(m.contains("right-hand side 1"), "{m}");
        // Fields of the wrong subset for the operator.
        let m = message(check_batch(Operator::Schur, &[full], &[full]));
        assert!(m.contains("acts on Even fields"), "{m}");
        let m = message(check_batch(Operator::D, &[even], &[even]));
        assert!(m.contains("acts on Full fields"), "{m}");
    }
}
