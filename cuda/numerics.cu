// The numerics statistics of amp/tensor_stats.h on the cuda device, in f64 as on the CPU:
// each block folds a grid-stride share of the tensor into one row of partial fields (counts
// and the log2 histogram as integers, sums, amax, min non-zero), and one block merges the
// rows in a fixed order into `out`. Nothing is read back.
#include <algorithm>
#include <limits>

#include "cuda/block_reduce.h"
#include "cuda/device_types.h"
#include "cuda/launch.h"
#include "cuda/primitives/atomics.h"
#include "ops/amp_kernels.h"
#include "ops/kernel_math.h"

namespace hg::cuda {
namespace {

constexpr unsigned kThreads = 256;
constexpr int kCounts = 6;  // fields 5..10: zeros, subnormal, flush, overflow, inf, nan
// The f16 bands before rounding, as ops/cpu/numerics_cpu.cpp: flush |x| <= 2^-25,
// subnormal (2^-25, 2^-14), overflow |x| >= 65520 (rounds to inf).
constexpr double kF16FlushMax = 0x1p-25;
constexpr double kF16MinNormal = 0x1p-14;
constexpr double kF16OverflowMin = 65520.0;

struct Add {
  HG_DEVICE double operator()(double a, double b) const { return a + b; }
};
struct Max {
  HG_DEVICE double operator()(double a, double b) const { return b > a ? b : a; }
};
struct Min {
  HG_DEVICE double operator()(double a, double b) const { return b < a ? b : a; }
};

template <class T>
__global__ void numerics_partial(const T* x, int64_t n, double* part) {
  __shared__ unsigned long long hist[kNumericsBins];
  __shared__ unsigned long long counts[kCounts];
  for (unsigned f = threadIdx.x; f < kNumericsBins; f += blockDim.x) hist[f] = 0;
  if (threadIdx.x < kCounts) counts[threadIdx.x] = 0;
  sync_threads();
  long long c[kCounts] = {};
  double amax = 0, min_nonzero = std::numeric_limits<double>::infinity(), sum_sq = 0, sum = 0;
  for (int64_t k = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; k < n; k += int64_t{gridDim.x} * blockDim.x) {
    const double v = static_cast<double>(dev_load(x[k]));
    if (math_isnan(v)) {
      ++c[5];
      continue;
    }
    if (!math_isfinite(v)) {
      ++c[4];
      continue;
    }
    const double a = v < 0 ? -v : v;
    sum_sq += v * v;
    sum += v;
    if (a == 0.0) {
      ++c[0];
      continue;
    }
    amax = a > amax ? a : amax;
    min_nonzero = a < min_nonzero ? a : min_nonzero;
    c[1] += a > kF16FlushMax && a < kF16MinNormal;
    c[2] += a <= kF16FlushMax;
    c[3] += a >= kF16OverflowMin;
    int e = 0;
    ::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1): floor(log2 a) = e - 1
    const int bin = (e - 1 < kNumericsHistLo ? kNumericsHistLo : e - 1 > kNumericsHistHi ? kNumericsHistHi : e - 1);
    atomic_add(&hist[bin - kNumericsHistLo], 1ull);
  }
  for (int i = 0; i < kCounts; ++i)
    if (c[i]) atomic_add(&counts[i], static_cast<unsigned long long>(c[i]));
  amax = block_reduce(amax, Max{}, 0.0);
  min_nonzero = block_reduce(min_nonzero, Min{}, std::numeric_limits<double>::infinity());
  sum_sq = block_reduce(sum_sq, Add{}, 0.0);
  sum = block_reduce(sum, Add{}, 0.0);  // its barriers also order the shared atomics before the reads below
  double* row = part + int64_t{blockIdx.x} * kNumericsFields;
  if (threadIdx.x == 0) {
    row[0] = 0;
    row[1] = amax;
    row[2] = min_nonzero;
    row[3] = sum_sq;
    row[4] = sum;
  }
  if (threadIdx.x < kCounts) row[5 + threadIdx.x] = static_cast<double>(counts[threadIdx.x]);
  for (unsigned f = threadIdx.x; f < kNumericsBins; f += blockDim.x)
    row[kNumericsScalars + f] = static_cast<double>(hist[f]);
}

// One thread per field, adding (or taking the max / min of) the blocks' rows in order.
__global__ void numerics_merge(const double* part, int64_t blocks, int64_t n, double* out) {
  for (int f = static_cast<int>(threadIdx.x); f < kNumericsFields; f += static_cast<int>(blockDim.x)) {
    double acc = part[f];
    for (int64_t b = 1; b < blocks; ++b) {
      const double v = part[b * kNumericsFields + f];
      acc = f == 1 ? Max{}(acc, v) : f == 2 ? Min{}(acc, v) : acc + v;
    }
    out[f] = f == 0 ? static_cast<double>(n) : acc;
  }
}

void numerics_stats_cuda(const Tensor& x, const Tensor& out) {
  HG_CHECK(x.is_contiguous(), "numerics_stats: the input must be contiguous");
  HG_CHECK(out.dtype() == f64 && out.is_contiguous() && out.numel() == kNumericsFields && out.device() == x.device(),
           "numerics_stats: the output must be a contiguous f64 tensor of ", kNumericsFields, " values on ",
           x.device().str());
  const int64_t n = x.numel();
  // Enough blocks to fill a GPU, fixed by n so that the sums' order is too.
  const int64_t blocks = std::clamp<int64_t>((n + kThreads * 16 - 1) / (kThreads * 16), 1, 512);
  const Tensor part = empty({blocks, kNumericsFields}, {f64, x.device()});
  const int dev = x.device().index;
  visit_floating(x.dtype(), "numerics_stats", [&]<typename T>() {
    launch(numerics_partial<T>,
           {.grid = static_cast<unsigned>(blocks), .block = kThreads, .stream = current_stream(dev),
            .name = "numerics_partial"},
           x.data<T>(), n, part.data<double>());
  });
  launch(numerics_merge, {.grid = 1, .block = 128, .stream = current_stream(dev), .name = "numerics_merge"},
         part.data<double>(), blocks, n, out.data<double>());
}

}  // namespace

HG_REGISTER_KERNEL(numerics_stats_stub, cuda, numerics_stats_cuda);

}  // namespace hg::cuda
