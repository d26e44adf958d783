// Matrix products (the `lower` class: under autocast they run in the compute dtype).
// f16/bf16 inputs multiply and accumulate in f32 and round the output once, as
// tensor cores do.
#pragma once
#include "framework/tensor.h"

namespace hg {

// NumPy matmul: 1-D operands are promoted to matrices and the added axis dropped;
// batch dimensions broadcast.
Tensor matmul(const Tensor& a, const Tensor& b);
// x [..., in] · wᵀ (w [out, in]) + bias [out] (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());

}  // namespace hg
