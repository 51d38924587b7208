#!/usr/bin/env bash
# Runs ON the device machine, from the repository root, next to the binaries staged by
# validate/device.sh: nvidia-smi, the GPU tests, then cuda_check (validate every stencil
# version on 16x16x16x32, 6x6x6x10 and 12x12x12x24, and the 16x16x16x32 bench), a short
# summary last. Full logs go to $OUT when the device tool provides it.
#   MODE=validate|bench|all (default all)
set -uo pipefail
dir=$(cd "$(dirname "$0")" && pwd)
out=${OUT:-/tmp/qcd-out}
mkdir -p "$out"
mode=${MODE:-all}

# NVRTC: use the loader path, else the pip wheel of the image's Python.
if ! ldconfig -p 2>/dev/null | grep -q 'libnvrtc.so.13'; then
    lib=$(python3 -c 'import nvidia, os; print(os.path.join(list(nvidia.__path__)[0], "cu13", "lib"))' 2>/dev/null)
    [ -f "$lib/libnvrtc.so.13" ] || lib=$(dirname "$(find / -name 'libnvrtc.so.13' -print -quit 2>/dev/null)")
    export LD_LIBRARY_PATH=$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
fi
echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)  LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,clocks.max.mem --format=csv

echo "== gpu tests"
"$dir/gpu-tests" --test-threads=1 >"$out/gpu-tests.log" 2>&1
tests_rc=$?
grep -E '^test |test result' "$out/gpu-tests.log"
[ $tests_rc -eq 0 ] || tail -n 60 "$out/gpu-tests.log"

echo "== cuda_check $mode"
"$dir/cuda_check" "$mode" >"$out/cuda_check.log" 2>&1
check_rc=$?
sed -n '/==== summary ====/,$p' "$out/cuda_check.log"
[ $check_rc -eq 0 ] || grep -v '^validate\|^version' "$out/cuda_check.log" | tail -n 20
echo "gpu tests rc=$tests_rc, cuda_check rc=$check_rc"
[ $tests_rc -eq 0 ] && [ $check_rc -eq 0 ]
