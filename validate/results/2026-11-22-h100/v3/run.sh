#!/usr/bin/env bash
# Device run for version 3.0 (branch v3): GPU tests, validate, main job, ablate.
set -uo pipefail
d=$PWD/.device-v3
out=${OUT:-/tmp/v3out}; mkdir -p "$out"
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc.so.13'; then
    lib=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null)
    [ -f "$lib/libnvrtc.so.13" ] || lib=$(dirname "$(find / -name 'libnvrtc.so.13' -print -quit 2>/dev/null)")
    export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
export QCD_SOLVE_TUNE_CACHE=/tmp/tune.tsv RUST_LOG=warn
date -u +%Y-%m-%dT%H:%M:%SZ
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,clocks.max.mem --format=csv,noheader
echo "== gpu tests"
timeout 80 "$d/gpu-tests" --test-threads=1 >"$out/gpu-tests.log" 2>&1; echo "gpu-tests rc=$?"
grep -E '^test |test result|3\.0' "$out/gpu-tests.log" | grep -v "version 1\.\|version 2\." | head -40
echo "== validate"
timeout 30 "$d/qcd-solve" -q validate configs/16x16x16x32.toml --kernel 1.6.1,3.0 2>&1 | tail -6
timeout 15 "$d/qcd-solve" -q validate configs/6x6x6x10.toml --kernel 3.0 2>&1 | tail -4
echo "== ablate R=18"
timeout 45 "$d/qcd-solve" -q ablate configs/16x16x16x32.toml --kernels 1.6.1,3.0 --repeat 5 --out "$out/a18" 2>&1 | tail -12
echo "== ablate R=12"
timeout 25 "$d/qcd-solve" -q ablate configs/16x16x16x32.toml --kernel 3.0 --reconstruct 12 --kernels 3.0 --repeat 5 --out "$out/a12" 2>&1 | tail -8
echo "== tune cache"; cat /tmp/tune.tsv 2>/dev/null | cut -f3,4,8,9,10
echo "== main job 3.0"
timeout 20 "$d/qcd-solve" -q configs/16x16x16x32.toml --device cuda --kernel 3.0 --output /tmp/m 2>&1 | tail -15
