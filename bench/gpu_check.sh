#!/usr/bin/env bash
# The GPU check: one command for a machine with an NVIDIA GPU and nvcc. Builds halfgrad
# natively (build-gpu, all cores), runs the native GPU tests, the kernel benchmark against
# cuBLAS/cuDNN (bench/gpu_kernels), segbench's gpu profile in fp32 (strict f32 and tf32)
# and amp with fewer steps, and the nccl backend (bench/nccl_allreduce, when libnccl is
# installed), then prints one combined report. Each stage has a time limit
# (the whole check is sized for ~8 minutes on an H200); a stage that runs over is reported
# as timed out and the check goes on. Exit: 0 all stages passed, 1 a stage failed or timed
# out, 2 no GPU or no nvcc here.
#   bench/gpu_check.sh            (env: HG_GPU_CHECK_OUT=folder, HG_GPU_CHECK_STEPS=N,
#                                  HG_GPU_CHECK_QUICK=1 for gpu_kernels --quick)
set -u
cd "$(dirname "$0")/.."

out=${HG_GPU_CHECK_OUT:-build-gpu/gpu-check}
steps=${HG_GPU_CHECK_STEPS:-60}
# Time limits per stage, seconds (build with an empty compiler cache is the big one).
t_build=200 t_tests=75 t_kernels=110 t_segbench=30
t_profiler=60  # builds bench/profiler_overhead (one file) and runs its short form

if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "gpu_check: nvidia-smi not found: this check needs a machine with an NVIDIA GPU and its driver" >&2
  exit 2
fi
if ! gpus=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1) || [ -z "$gpus" ]; then
  echo "gpu_check: nvidia-smi finds no usable GPU: $gpus" >&2
  exit 2
fi
if ! command -v nvcc >/dev/null 2>&1; then
  if [ -x /usr/local/cuda/bin/nvcc ]; then
    export PATH=/usr/local/cuda/bin:$PATH
  else
    echo "gpu_check: nvcc not found (not on PATH, not in /usr/local/cuda/bin): install the CUDA toolkit" >&2
    exit 2
  fi
fi
for tool in meson ninja timeout; do
  command -v "$tool" >/dev/null 2>&1 || { echo "gpu_check: $tool not found (see README's setup)" >&2; exit 2; }
done

mkdir -p "$out"
summary=()   # "| stage | status | seconds | log |" rows
failed_logs=()
failed=0

# run_stage NAME LIMIT LOG CMD...: runs CMD under `timeout`, logs its output, records a row.
run_stage() {
  local name=$1 limit=$2 log=$3
  shift 3
  local start=$SECONDS rc status
  timeout --kill-after=10 "$limit" "$@" >"$log" 2>&1
  rc=$?
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    status="TIMED OUT after ${limit} s"
    failed=1
    failed_logs+=("$log")
  elif [ $rc -ne 0 ]; then
    status="FAILED (exit $rc)"
    failed=1
    failed_logs+=("$log")
  else
    status="ok"
  fi
  summary+=("| $name | $status | $((SECONDS - start)) | $log |")
  echo "gpu_check: $name: $status ($((SECONDS - start)) s, log $log)"
  return $rc
}

echo "gpu_check: GPU: $gpus"
echo "gpu_check: nvcc: $(nvcc --version | tail -1)"

# 1. Native release build: nvcc compiles every kernel for sm_80 and sm_90a.
build_cmd="( [ -f build-gpu/build.ninja ] || meson setup build-gpu --buildtype=release -Dcuda=enabled ) &&
  ninja -C build-gpu -j$(nproc) tests/halfgrad_tests bench/gpu_kernels bench/segbench bench/nccl_allreduce"
if ! run_stage build "$t_build" "$out/build.log" bash -c "$build_cmd"; then
  tail -20 "$out/build.log"
  printf '\n%s\n' "| stage | status | seconds | log |" "|---|---|---|---|" "${summary[@]}"
  exit 1
fi

# 2. The GPU tests: every [cuda] case (op kernels against the CPU, the vendor references,
# native-only kernels) now runs on the real device instead of being skipped.
run_stage tests "$t_tests" "$out/tests.log" env OMP_NUM_THREADS=4 build-gpu/tests/halfgrad_tests "[cuda]"
# The runner's last line: "N passed, N failed, N skipped" (skips name their reason in the log).
test_line=$(grep -E "^[0-9]+ passed, [0-9]+ failed" "$out/tests.log" | tail -1)

# 3. Kernel throughput, halfgrad vs cuBLAS/cuDNN.
kernel_flags=(--out "$out/gpu_kernels.md")
[ "${HG_GPU_CHECK_QUICK:-0}" = 1 ] && kernel_flags+=(--quick)
run_stage gpu_kernels "$t_kernels" "$out/gpu_kernels.log" build-gpu/bench/gpu_kernels "${kernel_flags[@]}"

# 4. segbench's gpu profile with fewer steps: fp32 with strict f32 and with tf32 products,
# and amp (its f16 products ignore the f32 setting).
seg_runs=("fp32 strict" "fp32 fast" "amp accurate")
for run in "${seg_runs[@]}"; do
  read -r mode f32 <<<"$run"
  run_stage "segbench $mode (HG_F32_MATMUL=$f32)" "$t_segbench" "$out/segbench-$mode-$f32.log" \
    env HG_F32_MATMUL="$f32" build-gpu/bench/segbench --profile gpu --device cuda --precision "$mode" \
    --steps "$steps" --out "$out/segbench-$mode-$f32"
done

# 5. The op profiler on the GPU: its host cost per cuda op, and a profiled step whose Total ms
# is CUDA-event device time and Host ms the launches' (docs/profiler.md, "GPU timing").
run_stage profiler "$t_profiler" "$out/profiler.log" bash -c \
  "ninja -C build-gpu -j$(nproc) bench/profiler_overhead && build-gpu/bench/profiler_overhead 3 2 16 4"

# 6. The nccl backend of dist: a DDP step over nccl (averaged gradients against
# the mean of every rank's own, replicas bit-identical) and the bus bandwidth of a 64 MiB
# all-reduce; on 2 ranks (mpirun) with 2 GPUs and an MPI build, else on 1 (a 1-rank
# communicator still runs every call). Skipped with the reason when libnccl cannot be loaded.
t_nccl=45
nccl_log="$out/nccl.log"
rm -f "$nccl_log"
if ! nccl_probe=$(build-gpu/bench/nccl_allreduce --probe 2>&1); then
  nccl_probe=${nccl_probe//|/\/}
  summary+=("| nccl | skipped: $nccl_probe | 0 | - |")
  echo "gpu_check: nccl: skipped: $nccl_probe"
else
  nccl_cmd=(build-gpu/bench/nccl_allreduce)
  ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if [ "$ngpu" -ge 2 ] && command -v mpirun >/dev/null 2>&1 && grep -q "MPI backend built" <<<"$nccl_probe"; then
    nccl_cmd=(env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 mpirun -np 2 "${nccl_cmd[@]}")
  fi
  run_stage "nccl ($nccl_probe)" "$t_nccl" "$nccl_log" "${nccl_cmd[@]}"
fi

# The combined report.
report="$out/gpu_check.md"
{
  echo "# GPU check"
  echo
  echo "GPU: $gpus; $(nvcc --version | tail -1); $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "| stage | status | seconds | log |"
  echo "|---|---|---|---|"
  printf '%s\n' "${summary[@]}"
  echo
  echo "Tests \"[cuda]\": ${test_line:-no summary line (see $out/tests.log)}"
  for log in ${failed_logs[@]+"${failed_logs[@]}"}; do
    echo
    echo "Last lines of $log:"
    echo
    tail -4 "$log" | sed 's/^/    /'
  done
  echo
  echo "## Kernels (halfgrad vs cuBLAS/cuDNN)"
  echo
  if [ -s "$out/gpu_kernels.md" ]; then
    cat "$out/gpu_kernels.md"
  else
    echo "No complete table; rows measured before it stopped:"
    echo
    grep '^|' "$out/gpu_kernels.log" || echo "(none)"
  fi
  echo
  echo "## segbench, gpu profile, $steps steps"
  echo
  echo "| mode | HG_F32_MATMUL | step ms median | step ms p90 | images/s | peak MB | val Dice (mean fg) |"
  echo "|---|---|---|---|---|---|---|"
  for run in "${seg_runs[@]}"; do
    read -r mode f32 <<<"$run"
    json="$out/segbench-$mode-$f32/report.json"
    if [ -s "$json" ] && command -v python3 >/dev/null 2>&1; then
      python3 - "$json" "$mode" "$f32" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
step = run["timing_ms"]["step"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {step['median']:.1f} | {step['p90']:.1f} | {run['images_per_s']:.0f} "
      f"| {run['peak_bytes'] / 2**20:.0f} | {run['val_dice_mean_fg']:.3f} |")
PY
    else
      echo "| $mode | $f32 | — | — | — | — | no report (see $out/segbench-$mode-$f32.log) |"
    fi
  done
  echo
  echo "Dice after $steps steps says only that training ran; the gpu profile's quality needs its full 1000 steps."
  echo
  echo "## Op profiler on cuda:0 (bench/profiler_overhead)"
  echo
  echo '```text'
  sed -n '/on cuda:0/,/^op dispatches/p' "$out/profiler.log" | grep -v '^op dispatches' || true
  echo '```'
  echo
  echo "## NCCL (dist's nccl backend)"
  echo
  if [ -s "$nccl_log" ]; then
    nccl_lines=$(grep -E "^(ddp step|all-reduce)" "$nccl_log" | awk '!seen[$0]++')
    echo "${nccl_lines:-no result lines (see $nccl_log)}"
  else
    echo "Not run: $nccl_probe"
  fi
} >"$report"

echo
cat "$report"
echo
echo "gpu_check: report written to $report"
exit $failed
