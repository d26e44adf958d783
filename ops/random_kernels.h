// The kernel interface of random fills, implemented by every backend. Element i (in
// row-major order of out) uses Philox block i of `key`.
#pragma once
#include <cstdint>

#include "framework/dispatch.h"
#include "framework/generator.h"
#include "framework/tensor.h"

namespace hg {

enum class Distribution : uint8_t {
  uniform,    // p0 + (p1 - p0) * U[0, 1)
  normal,     // p0 + p1 * N(0, 1) (Box-Muller on the block's first two words)
  integer,    // in [p0, p1)
  bernoulli,  // U[0, 1) < p0
};

extern DispatchStub<void(Distribution, const Tensor& out, PhiloxKey key, double p0, double p1)> random_stub;

}  // namespace hg
