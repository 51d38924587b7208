#!/usr/bin/env bash
# Build the CUDA backend's device binaries HERE (no GPU needed) and stage them in an
# ignored folder of the main checkout, which is what the device machine receives.
#   validate/device.sh [DEST]     DEST defaults to <main checkout>/.device
# Stages: qcd-solve, cuda_check (examples/cuda_check.rs), gpu-tests (tests/gpu.rs built
# with --features gpu-tests), on-device.sh; then prints the one `run` call to make.
set -euo pipefail
root=$(git rev-parse --show-toplevel)
main=$(dirname "$(cd "$root" && git rev-parse --path-format=absolute --git-common-dir)")
dest=${1:-$main/.device}
name=$(basename "$dest")
cd "$root"

# Compile-check every kernel with NVRTC before spending device time (needs libnvrtc,
# e.g. `pip install --target .nvrtc nvidia-cuda-nvrtc==13.0.88`).
nvrtc_lib=$root/.nvrtc/nvidia/cu13/lib
[ -d "$nvrtc_lib" ] && export LD_LIBRARY_PATH=$nvrtc_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

cargo build --release
cargo build --release --example cuda_check
cargo run --release -q --example cuda_check compile sm_90 >/dev/null
gpu_test=$(cargo test --release --features gpu-tests --no-run --message-format=json 2>/dev/null |
    python3 -c 'import json,sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m["target"]["name"] == "gpu" and m.get("executable"):
        print(m["executable"])')
[ -x "$gpu_test" ] || { echo "gpu test binary not found" >&2; exit 1; }

mkdir -p "$dest"
# Debug info is not needed there and the carried tree is limited to 64 MiB.
for pair in "target/release/qcd-solve:qcd-solve" "target/release/examples/cuda_check:cuda_check" "$gpu_test:gpu-tests"; do
    src=${pair%%:*}
    dst=$dest/${pair##*:}
    objcopy --strip-debug "$src" "$dst" 2>/dev/null || cp "$src" "$dst"
done
cp validate/on-device.sh "$dest/"
chmod +x "$dest"/*
git -C "$main" check-ignore -q "$dest/on-device.sh" || echo "warning: $dest is not ignored in $main" >&2
du -sh "$dest"
echo "run: command \"bash $name/on-device.sh\"  carry [\"$name\"]"
