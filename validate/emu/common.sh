# Sourced by run.sh and run_v3eo.sh (set `build` first): the host compiler line and
# `compile NAME SOURCE DEFINES...`, which builds kernels/SOURCE through cuda_emu.h into
# $build/NAME.o and appends it to `objs`; `v3_entries SUFFIX`, the defines that give a
# stencil_v3.cu build's entry points their own names.
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
mkdir -p "$build"
cxx="g++ -std=c++20 -O2 -pthread -Wall -Wno-unknown-pragmas -Wno-unused-variable -Wno-unused-function -Wno-unused-but-set-variable"
inc="-include $root/validate/emu/cuda_emu.h -I $root/kernels -x c++"
objs=()
v3_entries() { # build suffix: stencil_v3.cu's entry points renamed NAME_suffix (the full
    # mode's link-hint variants too: the emulation runs the default, whose arithmetic they share;
    # and the batch entries, which emu_batch.cpp runs)
    local e
    for e in stencil_v3 stencil_v3_parity stencil_v3_full_dot stencil_v3_col stencil_v3_full_dot_col \
        stencil_v3_l1all stencil_v3_col_l1all stencil_v3_l1xy stencil_v3_col_l1xy \
        stencil_v3_batch stencil_v3_batch_col stencil_v3_batch_parity; do
        echo "-D${e}=${e}_$1"
    done
}
compile() { # name source defines...
    local name=$1 src=$2
    shift 2
    local extra=()
    for d in ${EMU_DEFINES:-}; do extra+=("-D$d"); done # EMU_DEFINES="NAME=VALUE ...": the emulation's own knob
    $cxx $inc "$@" "${extra[@]}" -c "$root/kernels/$src" -o "$build/$name.o"
    objs+=("$build/$name.o")
}
