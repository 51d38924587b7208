#!/usr/bin/env bash
# Check the CUDA kernels' logic on the CPU (no GPU, no CUDA): compile kernels/*.cu with
# g++ through cuda_emu.h, one object per define set (as src/backend/cuda/stencil.rs compiles them),
# and compare every version with the Rust oracle on awkward lattice sizes; check the fused
# CR kernels (cr_check.cpp) against a host computation; the fused BiCGStab's on a
# decomposed lattice against one GPU's (bi_check.cpp); 3.0 in every mode and precision
# (run_v3eo.sh), on decomposed lattices (run_halo.sh), with the clover term and twisted
# mass (run_clover.sh), and its batch entries over several right-hand sides against their
# one-right-hand-side entries, bit for bit (run_batch.sh); the gauge fixing kernels against
# a sequential reference (run_gauge_fix.sh); multigrid's coarse-level kernels against the
# CPU's coarse operator and prolongator (run_mg.sh).
# Usage: validate/emu/run.sh [LX LY LZ LT ...]   (default: 3 5 7 9 and 4 4 4 6)
set -euo pipefail
build=$(cd "$(dirname "$0")/../.." && pwd)/target/emu
source "$(dirname "$0")/common.sh"
compile layout layout.cu
compile blas1 blas1.cu
compile reduce reduce.cu
compile coarse stencil_coarse.cu
compile split stencil_split.cu
fine() { # tag LI_SPARSE NEIGHBOUR_FROM_COORDS FEWER_BARRIERS U_REORDERED U_IN_SHARED
    compile "fine_$1" stencil_fine.cu -Dstencil_fine=stencil_fine_$1 -Dc_li=c_li_$1 \
        -DLI_SPARSE=$2 -DNEIGHBOUR_FROM_COORDS=$3 -DFEWER_BARRIERS=$4 -DU_REORDERED=$5 -DU_IN_SHARED=$6
}
fine v11 0 0 0 0 0
fine v13 1 0 0 0 0
fine v14 1 1 0 0 0
fine v15 1 1 1 0 0
fine v16 1 1 1 1 1
fine v161 1 1 1 1 0
$cxx -I "$root/validate/emu" "$root/validate/emu/emu_check.cpp" "${objs[@]}" -o "$build/emu_check"
# The fused CR kernels (their own check, no oracle dump needed).
$cxx $inc -c "$root/kernels/cr_fused.cu" -o "$build/cr_fused.o"
$cxx -include "$root/validate/emu/cuda_emu.h" -I "$root/kernels" "$root/validate/emu/cr_check.cpp" "$build/cr_fused.o" -o "$build/cr_check"
# The fused BiCGStab kernels on one and on several ranks (bi_check.cpp).
$cxx -ffp-contract=off -include "$root/validate/emu/cuda_emu.h" -I "$root/kernels" "$root/validate/emu/bi_check.cpp" -o "$build/bi_check"
(cd "$root" && cargo build --release --example emu_dump -q)
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(3 5 7 9 4 4 4 6)
status=0
"$build/cr_check" || status=1
"$build/bi_check" || status=1
for ((k = 0; k < ${#sizes[@]}; k += 4)); do
    dump=$build/dump_${sizes[k]}x${sizes[k+1]}x${sizes[k+2]}x${sizes[k+3]}.bin
    "$root/target/release/examples/emu_dump" "${sizes[@]:k:4}" "$dump"
    "$build/emu_check" "$dump" || status=1
done
bash "$root/validate/emu/run_v3eo.sh" || status=1
bash "$root/validate/emu/run_halo.sh" || status=1
bash "$root/validate/emu/run_clover.sh" || status=1
bash "$root/validate/emu/run_batch.sh" || status=1
bash "$root/validate/emu/run_gauge_fix.sh" || status=1
bash "$root/validate/emu/run_mg.sh" || status=1
exit $status
