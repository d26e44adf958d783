// CPU kernel of the numerics statistics (amp/tensor_stats.h): one pass over a
// contiguous tensor, per-thread partial sums in f64 merged at the end.
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/amp_kernels.h"

namespace hg::cpu {
namespace {

constexpr double kF16Max = 65504.0;
const double kF16MinNormal = std::ldexp(1.0, -14);
const double kF16FlushBelow = std::ldexp(1.0, -25);  // under half the smallest subnormal: rounds to 0

using Partial = std::array<double, kNumericsFields>;

void accumulate(double v, Partial& s) {
  if (std::isnan(v)) { s[10] += 1; return; }
  if (std::isinf(v)) { s[9] += 1; return; }
  const double a = std::fabs(v);
  s[3] += v * v;
  s[4] += v;
  if (a == 0.0) { s[5] += 1; return; }
  s[1] = std::max(s[1], a);
  s[2] = std::min(s[2], a);
  if (a < kF16MinNormal) s[6] += 1;
  if (a < kF16FlushBelow) s[7] += 1;
  if (a > kF16Max) s[8] += 1;
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1): floor(log2 a) = e - 1
  const int bin = std::clamp(e - 1, kNumericsHistLo, kNumericsHistHi) - kNumericsHistLo;
  s[kNumericsScalars + bin] += 1;
}

void numerics_stats_cpu(const Tensor& x, const Tensor& out) {
  HG_CHECK(x.is_contiguous(), "numerics_stats: the input must be contiguous");
  const int64_t n = x.numel();
  const int threads = n > 65536 ? omp_get_max_threads() : 1;
  std::vector<Partial> partial(static_cast<size_t>(threads));
  for (Partial& p : partial) {
    p.fill(0.0);
    p[2] = std::numeric_limits<double>::infinity();
  }
  visit_floating(x.dtype(), "numerics_stats", [&]<typename T>() {
    const T* p = x.data<T>();
#pragma omp parallel num_threads(threads)
    {
      Partial& s = partial[static_cast<size_t>(omp_get_thread_num())];
#pragma omp for schedule(static)
      for (int64_t k = 0; k < n; ++k) accumulate(static_cast<double>(load(p[k])), s);
    }
  });
  double* o = out.data<double>();
  Partial total = partial[0];
  for (size_t t = 1; t < partial.size(); ++t) {
    const Partial& s = partial[t];
    for (int f = 3; f < kNumericsFields; ++f) total[f] += s[f];
    total[1] = std::max(total[1], s[1]);
    total[2] = std::min(total[2], s[2]);
  }
  total[0] = static_cast<double>(n);
  std::copy(total.begin(), total.end(), o);
}

}  // namespace

HG_REGISTER_KERNEL(numerics_stats_stub, cpu, numerics_stats_cpu);

}  // namespace hg::cpu
