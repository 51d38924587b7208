#!/usr/bin/env bash
# Check version 3.0 on a decomposed lattice on the CPU (no GPU, no CUDA): compile
# kernels/stencil_v3.cu and kernels/halo.cu with g++ through cuda_emu.h in their six
# define sets (double or single, 18, 12 or 8 reals per link) and layout.cu, then emulate the
# ranks of several process grids (emu_halo.cpp: pack, host copy of the faces, interior,
# exterior) and compare the gathered result with the undecomposed kernel and the CPU
# backend (examples/emu_v3eo_dump.rs).
# Usage: validate/emu/run_halo.sh
set -euo pipefail
build=$(cd "$(dirname "$0")/../.." && pwd)/target/emu_halo
source "$(dirname "$0")/common.sh"
compile layout layout.cu
for v in "d 0 0 0" "d12 1 0 0" "d8 0 1 0" "s 0 0 1" "s12 1 0 1" "s8 0 1 1"; do
    read -r name r12 r8 single <<<"$v"
    defs=(-DRECONSTRUCT_12=$r12 -DRECONSTRUCT_8=$r8 -DV3_SINGLE=$single)
    compile "v3_$name" stencil_v3.cu "${defs[@]}" $(v3_entries "$name")
    compile "halo_$name" halo.cu "${defs[@]}" -Dhalo_pack=halo_pack_$name -Dhalo_exterior=halo_exterior_$name
done
$cxx -I "$root/validate/emu" -I "$root/kernels" "$root/validate/emu/emu_halo.cpp" "${objs[@]}" -o "$build/emu_halo"
(cd "$root" && cargo build --release --example emu_v3eo_dump -q)
status=0
# lattice, then process grids (gx gy gz gt ...): t, x+t, 4 ranks in t (local t = 2),
# x+y; 3 ranks (forward and backward neighbours differ), x+t, y, z+t (6 ranks).
run() { # LX LY LZ LT GRIDS...
    local dump=$build/dump_$1x$2x$3x$4.bin
    "$root/target/release/examples/emu_v3eo_dump" "$1" "$2" "$3" "$4" "$dump"
    "$build/emu_halo" "$dump" "${@:5}" || status=1
}
run 4 4 4 8 1 1 1 2 2 1 1 2 1 1 1 4 2 2 1 1
run 4 6 4 12 1 1 1 3 2 1 1 3 1 3 1 1 1 1 2 3
exit $status
