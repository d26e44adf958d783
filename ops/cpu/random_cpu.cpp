// CPU kernel of random fills: Philox block i gives element i, so any split of the
// work across threads gives the same tensor.
#include "ops/cpu/loops.h"
#include "ops/random_kernels.h"

namespace hg::cpu {
namespace {

void random_cpu(Distribution d, const Tensor& out, PhiloxKey key, double p0, double p1) {
  visit_dtype(out.dtype(), [&]<typename T>() {
    T* o = out.data<T>();  // fresh and contiguous
    parallel_for(out.numel(), 64, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        const std::array<uint32_t, 4> w = philox4x32(key, static_cast<uint64_t>(i));
        o[i] = store<T>(philox_value(d, w, sizeof(T) == 8, p0, p1));
      }
    });
  });
}

}  // namespace

HG_REGISTER_KERNEL(random_stub, cpu, random_cpu);

}  // namespace hg::cpu
