// CPU kernel of random fills: Philox block i gives element i, so any split of the
// work across threads gives the same tensor.
#include <cmath>

#include "ops/cpu/loops.h"
#include "ops/random_kernels.h"

namespace hg::cpu {
namespace {

void random_cpu(Distribution d, const Tensor& out, PhiloxKey key, double p0, double p1) {
  visit_dtype(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();  // fresh and contiguous
    parallel_for(out.numel(), 64, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        auto w = philox4x32(key, static_cast<uint64_t>(i));
        double v = 0;
        switch (d) {
          case Distribution::uniform:
            v = p0 + (p1 - p0) * (sizeof(T) == 8 ? uniform_f64(w[0], w[1]) : double(uniform_f32(w[0])));
            break;
          case Distribution::normal: {
            // 1 - U keeps the logarithm's argument in (0, 1].
            double u = 1.0 - uniform_f64(w[0], w[1]), t = uniform_f64(w[2], w[3]);
            v = p0 + p1 * std::sqrt(-2.0 * std::log(u)) * std::cos(6.283185307179586 * t);
            break;
          }
          case Distribution::integer: {
            uint64_t range = static_cast<uint64_t>(p1 - p0), r = (uint64_t{w[0]} << 32) | w[1];
            v = p0 + static_cast<double>(r % range);
            break;
          }
          case Distribution::bernoulli: v = uniform_f64(w[0], w[1]) < p0 ? 1.0 : 0.0; break;
        }
        o[i] = store<T>(v);
      }
    });
  });
}

}  // namespace

HG_REGISTER_KERNEL(random_stub, cpu, random_cpu);

}  // namespace hg::cpu
