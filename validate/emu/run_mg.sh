#!/usr/bin/env bash
# Check multigrid's kernels (kernels/mg_coarse.cu, kernels/mg_galerkin.cu) on the CPU (no
# GPU, no CUDA): compile them with g++ through cuda_emu.h and compare the restriction, the
# prolongation, the coarse operator and its Schur complement, the half-field gather, the
# BLAS-1 updates (double and single precision) and the Galerkin product of the fine
# operator (double) with the CPU reference (examples/emu_mg_dump.rs, emu_mg.cpp), on two
# lattices.
# Usage: validate/emu/run_mg.sh
set -euo pipefail
build=$(cd "$(dirname "$0")/../.." && pwd)/target/emu_mg
source "$(dirname "$0")/common.sh"
compile mg_coarse mg_coarse.cu
compile mg_galerkin mg_galerkin.cu
$cxx -I "$root/validate/emu" "$root/validate/emu/emu_mg.cpp" "${objs[@]}" -o "$build/emu_mg"
(cd "$root" && cargo build --release --example emu_mg_dump -q)
status=0
for case in "8 4 4 8 4" "4 8 4 4 3"; do
    read -r lx ly lz lt nvec <<<"$case"
    dump=$build/dump_${lx}x${ly}x${lz}x${lt}_n$nvec.bin
    "$root/target/release/examples/emu_mg_dump" "$lx" "$ly" "$lz" "$lt" "$nvec" "$dump"
    echo "-- ${lx}x${ly}x${lz}x${lt}, $nvec vectors"
    "$build/emu_mg" "$dump" || status=1
done
exit $status
