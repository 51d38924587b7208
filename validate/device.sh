#!/usr/bin/env bash
# Build HERE (no GPU needed), compile-check every kernel with NVRTC, and stage the device
# binaries in .device/ (ignored), which the device machine receives with `carry`.
#   bash validate/device.sh        then:  run  command "bash validate/on-device.sh"  carry [".device"]
# Stages: qcd-solve (release, debug info stripped) and the GPU test binaries gpu-tests,
# gpu-decomposed-tests, gpu-nccl-tests, gpu-fast-tests, gpu-fused-tests,
# gpu-memory-tests, gpu-solvers-tests, gpu-half-tests, gpu-clover-tests, gpu-batch-tests,
# gpu-gauge-fix-tests, gpu-multigrid-tests (tests/gpu*.rs,
# --features gpu-tests). TARGETS="gpu_clover gpu_fast" stages only those test targets (a
# device call carries at most 64 MiB; the others are removed from .device/).
# PYTHON=1 also stages the Python package (pip's build of ./python, its native module
# stripped) in .device/py, for PYTHONPATH=.device/py python3 -m pytest python/tests_gpu, and
# the two shared lattices those tests read in .device/lattices (the device machine has no
# ../shared; validate/python-pool-smoother.sh puts them there).
# BASE=<a checkout with target/release/qcd-solve built> also stages that binary as the
# baseline .device/base/qcd-solve of MODE=regression (kept from an earlier staging when
# BASE is not set); .device/commit and .device/base/commit name the commits.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
dest=$root/.device

nvrtc_lib=$root/.nvrtc/nvidia/cu13/lib
if [ ! -e "$nvrtc_lib/libnvrtc.so.13" ]; then
    python3 -m pip install --quiet --disable-pip-version-check --target .nvrtc nvidia-cuda-nvrtc==13.0.88
fi

cargo build --release
LD_LIBRARY_PATH=$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ./target/release/qcd-solve kernels --check --arch sm_90 | tail -1
# The GPU test targets: tests/gpu.rs (seed versions), gpu_fast.rs (3.0's layouts and
# operators), gpu_fused.rs (the fused CR kernels and graphs), gpu_solvers.rs (the four
# Krylov methods against the CPU), gpu_memory.rs (the device-memory books against the
# estimate and the free-memory drop), gpu_half.rs (half precision against the CPU, half-double
# solves), gpu_clover.rs (the clover term and twisted mass against the CPU, their solves),
# gpu_gauge_fix.rs (Landau and Coulomb gauge fixing against the CPU's), gpu_multigrid.rs
# (multigrid with the fine level on the GPU against the CPU's).
# With TARGETS, only those test targets are built (the others take minutes of the build).
only=()
for t in ${TARGETS:-}; do only+=(--test "$t"); done
cargo test --release --features gpu-tests --no-run "${only[@]}" --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] in ("gpu", "gpu_fast", "gpu_fused", "gpu_solvers", "gpu_decomposed", "gpu_nccl", "gpu_memory", "gpu_half", "gpu_clover", "gpu_batch", "gpu_gauge_fix", "gpu_multigrid") and m.get("executable"):
        print(m["target"]["name"], m["executable"])' >"$root/target/gpu-tests.list"
[ -n "${TARGETS:-}" ] || grep -q '^gpu ' "$root/target/gpu-tests.list" || { echo "gpu test binary not found" >&2; exit 1; }

mkdir -p "$dest"
if [ -n "${TARGETS:-}" ]; then
    rm -f "$dest"/*-tests
    grep -E "^($(echo $TARGETS | tr ' ' '|')) " "$root/target/gpu-tests.list" >"$root/target/gpu-tests.pick"
    mv "$root/target/gpu-tests.pick" "$root/target/gpu-tests.list"
fi
objcopy --strip-debug target/release/qcd-solve "$dest/qcd-solve"
while read -r name exe; do
    objcopy --strip-debug "$exe" "$dest/${name//_/-}-tests"
done <"$root/target/gpu-tests.list"
git describe --always --dirty >"$dest/commit"
if [ -n "${BASE:-}" ]; then
    mkdir -p "$dest/base"
    objcopy --strip-debug "$BASE/target/release/qcd-solve" "$dest/base/qcd-solve"
    chmod +x "$dest/base/qcd-solve"
    git -C "$BASE" describe --always --dirty >"$dest/base/commit" 2>/dev/null || echo "$BASE" >"$dest/base/commit"
fi
if [ -n "${PYTHON:-}" ]; then
    rm -rf "$root/target/py-stage" "$dest/py"
    CARGO_TARGET_DIR="$root/target" python3 -m pip install --quiet --disable-pip-version-check \
        --no-deps --target "$root/target/py-stage" ./python
    mkdir -p "$dest/py"
    cp -r "$root/target/py-stage/qcd_solve" "$dest/py/"
    find "$dest/py" -name '*.so' -exec objcopy --strip-debug {} \;
    mkdir -p "$dest/lattices"
    cp "$root/../shared/lattices/pyquda_weak_field.lime" "$root/../shared/lattices/ATB_nersc.l8t4b3360" "$dest/lattices/"
fi
chmod +x "$dest"/*-tests "$dest/qcd-solve"
git check-ignore -q "$dest/qcd-solve" || { echo "$dest is not git-ignored" >&2; exit 1; }
du -sh "$dest"
size=$(du -sm "$dest" | cut -f1)
[ "$size" -lt 60 ] || echo "warning: $dest holds $size MiB; a device call carries at most 64 MiB with the working tree" >&2
echo 'run: command "bash validate/on-device.sh"  carry [".device"]'
