#!/usr/bin/env bash
# Session 20, run 146 (nvidia-h100-x1): issue 13's items 2-5 again with edd4ce5's binaries
# (item 1 is run 145), before the issue is said resolved:
#   item 2: gpu_half (half against the CPU, half-double solves), validate --kernel 3.0
#           (its r8 and half-double rows);
#   item 3: gpu_memory, then 64^3x128 and 48^3x96 with every option (estimate and books);
#   item 4: the 48^3x96 whole process (random field, solve, solution written), twice, and
#           the link upload against the pinned bandwidth of `ablate --upload-dims`;
#   item 5: the seed problem's best options (fused BiCGStab, reliable delta 0.001), five
#           processes, and the fused CR beside it.
q=.device/qcd-solve
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
lscpu | grep -E "Model name|^CPU\(s\)"
export QCD_SOLVE_TUNE_CACHE=/tmp/tune.tsv
for t in gpu-half gpu-memory; do
    echo "===== $t"
    timeout 300 .device/$t-tests --test-threads=1 2>&1 | grep -E "^test |test result|panicked|FAILED"
done
echo "===== validate 3.0"
timeout 300 $q validate configs/16x16x16x32.toml --kernel 3.0 2>&1 | grep -E "^3.0|pass|FAIL|fail" | tee $OUT/validate.txt
base="configs/16x16x16x32.toml --device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12 --output /tmp/seed"
$q -q $base --method bicgstab --reliable-delta 0.001 >/dev/null 2>&1 # the tune cache
one() { # label, count, options...: main-job solves; the solve step's seconds and the result
    local label=$1 n=$2
    shift 2
    for rep in $(seq "$n"); do
        out=$(RUST_LOG=info $q $base "$@" 2>&1)
        echo "$label solve_s=$(echo "$out" | grep -o "step: solve start=[0-9.e-]* seconds=[0-9.e-]*" | sed 's/.*seconds=//') $(echo "$out" | grep -E '^(result|residual) ' | tr -s ' ' | tr '\n' ' ')"
    done
}
echo "===== seed (item 5)"
one bicgstab 5 --method bicgstab --reliable-delta 0.001 | tee $OUT/seed.txt
one cr 2 | tee -a $OUT/seed.txt
resize() { local l=(${2//x/ }); sed -e "s/^LX = .*/LX = ${l[0]}/; s/^LY = .*/LY = ${l[1]}/; s/^LZ = .*/LZ = ${l[2]}/; s/^LT = .*/LT = ${l[3]}/" "$1"; }
fast="--device cuda --kernel 3.0 --preconditioning even-odd --precision single-double --reconstruct 12"
echo "===== 48^3x96 whole process (item 4)"
resize configs/32x32x32x64.toml 48x48x48x96 >/tmp/48.toml
rm -f /tmp/tune-48.tsv
for i in 1 2; do
    QCD_SOLVE_TUNE_CACHE=/tmp/tune-48.tsv RUST_LOG=info timeout 150 /usr/bin/time -f "process wall %e s" $q /tmp/48.toml $fast --output /tmp/whole-$i 2>&1 |
        grep -E "links uploaded|^time |process wall|^result|^residual" | sed -e 's/^.*INFO //' | cut -c1-300 | tee -a $OUT/whole.txt
    ls -la /tmp/whole-$i | tail -n +2 | awk '{print $5, $9}'
    rm -rf /tmp/whole-$i
done
echo "===== ablate 3.0 with the 48^3x96 upload (item 4's pinned bandwidth)"
timeout 200 $q -q ablate configs/16x16x16x32.toml --kernels 3.0 --repeat 3 --upload-dims 48,48,48,96 --out /tmp/abl 2>&1 | grep -iE "pinned|upload" | head -12 | tee $OUT/upload.txt
echo "===== memory (item 3)"
for d in 64x64x64x128 48x48x48x96; do
    resize configs/32x32x32x64.toml $d | sed -e '/^solution = /d' >/tmp/$d.toml
    RUST_LOG=info timeout 280 $q /tmp/$d.toml $fast --output /tmp/mem-$d 2>&1 | grep -E "device memory|at the peak|^time|^result|^residual|needs|step: solve" | sed -e 's/^.*INFO //' | cut -c1-300 | tee -a $OUT/memory.txt
done
date -u +%Y-%m-%dT%H:%M:%SZ
