// Random tensors from a counter-based generator: the same values on every device.
#pragma once
#include "framework/generator.h"
#include "framework/tensor.h"

namespace hg {

Tensor rand(const Shape& shape, TensorOptions o = {}, Generator* gen = nullptr);   // U[0, 1)
Tensor randn(const Shape& shape, TensorOptions o = {}, Generator* gen = nullptr);  // N(0, 1)
Tensor uniform(const Shape& shape, double lo, double hi, TensorOptions o = {}, Generator* gen = nullptr);
Tensor normal(const Shape& shape, double mean, double std, TensorOptions o = {}, Generator* gen = nullptr);
// Integers in [lo, hi); dtype defaults to i64.
Tensor randint(int64_t lo, int64_t hi, const Shape& shape, TensorOptions o = {i64}, Generator* gen = nullptr);
// Bool mask, true with probability p.
Tensor bernoulli(const Shape& shape, double p, Device device = Device::cpu(), Generator* gen = nullptr);

}  // namespace hg
