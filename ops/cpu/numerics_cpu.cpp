// CPU kernel of the numerics statistics (amp/tensor_stats.h): one pass over a
// contiguous tensor in chunks fixed by its size (so the f64 sums do not depend on the
// thread count), f16/bf16 widened a block at a time, each chunk's partials merged in order.
#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/amp_kernels.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec/widen.h"

namespace hg::cpu {
namespace {

constexpr double kF16Max = 65504.0;
const double kF16MinNormal = std::ldexp(1.0, -14);
const double kF16FlushMax = std::ldexp(1.0, -25);  // at most half the smallest subnormal: rounds to 0 (the tie to even 0)

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
  if (a <= kF16FlushMax) s[7] += 1;
  if (a > kF16Max) s[8] += 1;
  // floor(log2 a): the unbiased exponent of a normal double (every f32/f16/bf16 value
  // widens to one); frexp only for f64 subnormals.
  int log2a = static_cast<int>(std::bit_cast<uint64_t>(a) >> 52) - 1023;
  if (log2a == -1023) {
    int e = 0;
    std::frexp(a, &e);  // a = m * 2^e with m in [0.5, 1)
    log2a = e - 1;
  }
  const int bin = std::clamp(log2a, kNumericsHistLo, kNumericsHistHi) - kNumericsHistLo;
  s[kNumericsScalars + bin] += 1;
}

constexpr int64_t kChunk = 32768;
constexpr int64_t kBlock = 1024;

template <class T>
void accumulate_chunk(const T* p, int64_t n, Partial& s) {
  using A = compute_t<T>;
  std::vector<A> buf;
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t m = std::min(kBlock, n - i0);
    const A* v = vec::as_compute<A>(p + i0, m, buf);
    for (int64_t i = 0; i < m; ++i) accumulate(static_cast<double>(v[i]), s);
  }
}

void numerics_stats_cpu(const Tensor& x, const Tensor& out) {
  HG_CHECK(x.is_contiguous(), "numerics_stats: the input must be contiguous");
  const int64_t n = x.numel();
  const int64_t chunks = std::max<int64_t>(1, (n + kChunk - 1) / kChunk);
  std::vector<Partial> partial(static_cast<size_t>(chunks));
  for (Partial& p : partial) {
    p.fill(0.0);
    p[2] = std::numeric_limits<double>::infinity();
  }
  visit_floating(x.dtype(), "numerics_stats", [&]<typename T>() {
    const T* p = x.data<T>();
    parallel_for(chunks, kChunk * 8, [&](int64_t c0, int64_t c1) {
      for (int64_t c = c0; c < c1; ++c)
        accumulate_chunk(p + c * kChunk, std::min(kChunk, n - c * kChunk), partial[static_cast<size_t>(c)]);
    });
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
