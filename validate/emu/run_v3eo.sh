#!/usr/bin/env bash
# Check version 3.0's parity-major stencil family on the CPU (no GPU, no CUDA): compile
# kernels/stencil_v3.cu with g++ through cuda_emu.h in its six define sets (double or
# single, 18, 12 or 8 reals per link, as src/backend/cuda/stencil.rs compiles them), the half
# build (V3_HALF, 18 and 12), layout.cu and blas1.cu (the half conversions and site-wise
# BLAS), and compare with the CPU backend (examples/emu_v3eo_dump.rs) on even lattices.
# Usage: validate/emu/run_v3eo.sh [LX LY LZ LT ...]   (default: 4 4 4 8 and 6 4 8 4)
set -euo pipefail
build=$(cd "$(dirname "$0")/../.." && pwd)/target/emu_v3eo
source "$(dirname "$0")/common.sh"
compile layout layout.cu
for v in "d 0 0 0" "d12 1 0 0" "d8 0 1 0" "s 0 0 1" "s12 1 0 1" "s8 0 1 1"; do
    read -r name r12 r8 single <<<"$v"
    compile "v3_$name" stencil_v3.cu -DRECONSTRUCT_12=$r12 -DRECONSTRUCT_8=$r8 -DV3_SINGLE=$single $(v3_entries "$name")
done
for v in "h 0" "h12 1"; do
    read -r name r12 <<<"$v"
    compile "v3_$name" stencil_v3.cu -DRECONSTRUCT_12=$r12 -DV3_HALF=1 $(v3_entries "$name")
done
compile blas blas1.cu
$cxx -I "$root/validate/emu" -I "$root/kernels" "$root/validate/emu/emu_v3eo.cpp" "${objs[@]}" -o "$build/emu_v3eo"
(cd "$root" && cargo build --release --example emu_v3eo_dump -q)
sizes=("$@")
[ ${#sizes[@]} -eq 0 ] && sizes=(4 4 4 8 6 4 8 4)
status=0
for ((k = 0; k < ${#sizes[@]}; k += 4)); do
    dump=$build/dump_${sizes[k]}x${sizes[k+1]}x${sizes[k+2]}x${sizes[k+3]}.bin
    "$root/target/release/examples/emu_v3eo_dump" "${sizes[@]:k:4}" "$dump"
    "$build/emu_v3eo" "$dump" || status=1
done
exit $status
