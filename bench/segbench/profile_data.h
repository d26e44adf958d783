// What segbench's --profile-ops keeps of one mode's profiled step (a summary of the
// hg::Profiler events), for the report's "Op profile" section (profile_section.cpp).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace hg::segbench {

struct OpProfileRow {
  std::string name, phase, dtype, kernel;
  int64_t calls = 0;
  double ms = 0, gflops_per_s = 0;  // gflops_per_s 0: not a matrix product or convolution
};

// Op time of the profiled step, split three ways (each split sums to op_ms).
struct OpProfile {
  int64_t step = -1;
  std::string device;  // "cpu" or "cuda", from the kernel paths recorded
  double wall_ms = 0, op_ms = 0;
  // By the op's dtype: f16/bf16 ops, f32 ops, casts between dtypes, the rest (f64, ints).
  double reduced_ms = 0, f32_ms = 0, cast_ms = 0, other_dtype_ms = 0;
  // By kind: matrix products and convolutions, elementwise ops and copies, casts, the rest
  // (normalisation, pooling, resampling, reductions, losses, the optimizer).
  double gemm_ms = 0, elementwise_ms = 0, other_kind_ms = 0;
  double reduced_elementwise_ms = 0;  // elementwise ops whose dtype is f16 or bf16
  double conv_gflop = 0, conv_ms = 0;  // all conv2d kernels, forward and gradients
  double peak_gflops = 0;              // the f32 FMA peak of the threads used (0: unknown)
  std::vector<OpProfileRow> top;       // the ops that took the most time, largest first
  std::string trace_file;              // "trace_<mode>.json" in the report folder, or ""
  // op_ms of every profiled step, in step order; this summary is the fastest of them (on a
  // shared machine a preempted op only gets slower, so the fastest step is the least disturbed).
  std::vector<int64_t> profiled_steps;
  std::vector<double> profiled_op_ms;
};

}  // namespace hg::segbench
