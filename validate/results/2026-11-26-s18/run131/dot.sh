#!/usr/bin/env bash
# Session 18, run 131 (issue 13 item 1): the full mode's dot entries (the fused CR's apply)
# with their neighbour spinors L2 evict-last as the default (V3_L2_LAST_SPINOR_DOT=1; =0 is
# the old default), and the parity launches so (V3_L2_LAST_SPINOR_PARITY=1, an
# experiment). Every GPU test target; floor at 16 (twice) and 32; the seed problem.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
export NCCL_NVLS_ENABLE=0 QCD_SOLVE_TUNE_CACHE=/tmp/seed-tune.tsv QCD_SOLVE_PTX_CACHE=/tmp/ptx
nccl_lib=$(ldconfig -p 2>/dev/null | awk '/libnccl\.so\.2/ {print $NF; exit}')
if [ -n "$nccl_lib" ]; then
    mkdir -p /tmp/nccl-link && ln -sf "$nccl_lib" /tmp/nccl-link/libnccl.so
    export LD_LIBRARY_PATH=/tmp/nccl-link${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
for t in .device/gpu*-tests; do
    echo "===== $(basename "$t")"
    timeout 300 "$t" --test-threads=1 2>&1 | grep -E "test result|panicked|FAILED|failures|^    \""
done
rows='triad|dslash full|iteration fused|schur'
for rep in 1 2; do
    for defs in "" "V3_L2_LAST_SPINOR_DOT=0" "V3_L2_LAST_SPINOR_PARITY=1"; do
        echo "===== floor 16 ${defs:-default}"
        QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims 16,16,16,32 --repeat 200 2>&1 | grep -E "$rows|rror"
    done
done
for defs in "" "V3_L2_LAST_SPINOR_DOT=0"; do
    echo "===== floor 32 ${defs:-default}"
    QCD_SOLVE_KERNEL_DEFINES="$defs" timeout 200 $q floor -q --dims 32,32,32,64 --repeat 50 2>&1 | grep -E "$rows|rror"
done
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q $base --preconditioning even-odd >/dev/null 2>&1 # the tune cache
one() { # label, count, options...: main-job solves; the solve step's seconds and the result
    local label=$1 n=$2
    shift 2
    for rep in $(seq "$n"); do
        out=$(RUST_LOG=info $q $base "$@" 2>&1)
        echo "$label solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|residual) ' | tr -s ' ' | tr '\n' ' ')"
    done
}
echo "===== seed"
for defs in "" "V3_L2_LAST_SPINOR_DOT=0" "V3_L2_LAST_SPINOR_PARITY=1"; do
    export QCD_SOLVE_KERNEL_DEFINES="$defs"
    one "eo-cr ${defs:-default}" 3 --preconditioning even-odd
    one "full-cr ${defs:-default}" 3 --preconditioning none
done
unset QCD_SOLVE_KERNEL_DEFINES
one "eo-bicgstab default" 3 --preconditioning even-odd --method bicgstab --reliable-delta 0.001
echo "===== validate"
timeout 300 $q validate configs/16x16x16x32.toml --kernel 3.0 2>&1 | grep -E "^3.0|versions pass|FAIL|fail"
date -u +%Y-%m-%dT%H:%M:%SZ
