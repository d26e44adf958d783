#!/usr/bin/env bash
# The GPU check on a machine that can build halfgrad itself (nvcc, meson, ninja and the
# Debian -dev packages): builds natively in build-gpu (all cores; ~2.5 min on 16 cores with
# an empty compiler cache), then runs the same probe and stages as the GPU bundle's runner
# (bench/gpu_bundle/run: limits, JSON lines and logs under OUT, exit codes 0/1/2/3) on the
# binaries it built. On a machine without those packages (the usual GPU machine) use the
# bundle instead: docs/benchmark.md, "The GPU run".
#   bench/gpu_check.sh            (env: OUT=folder, default build-gpu/gpu-check; HG_BUNDLE_STEPS=N)
set -u
cd "$(dirname "$0")/.."
command -v nvcc >/dev/null 2>&1 || export PATH=/usr/local/cuda/bin:$PATH
for tool in nvcc meson ninja timeout; do
  command -v "$tool" >/dev/null 2>&1 || { echo "gpu_check: $tool not found (see README's setup)" >&2; exit 2; }
done
export OUT=${OUT:-build-gpu/gpu-check}
mkdir -p "$OUT"
# Limit 300 s: the build is not one of the runner's stages and comes on top of its 360 s.
if ! timeout 300 bash -c "( [ -f build-gpu/build.ninja ] || meson setup build-gpu --buildtype=release -Dcuda=enabled ) &&
    ninja -C build-gpu tests/halfgrad_tests bench/gpu_kernels bench/segbench bench/nccl_allreduce bench/profiler_overhead" \
    >"$OUT/build.log" 2>&1; then
  tail -20 "$OUT/build.log"
  echo "gpu_check: the native build failed or ran over 300 s (log $OUT/build.log)" >&2
  exit 1
fi
HG_BUNDLE_BUILD=$PWD/build-gpu exec bench/gpu_bundle/run
