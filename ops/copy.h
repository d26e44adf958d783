// In-place data movement: fill and copy with dtype conversion (IEEE rounding) between
// tensors of any strides, and across devices. Not recorded by autograd, but each bumps the
// destination's version, so a backward that saved it raises instead of using new values.
#pragma once
#include "framework/tensor.h"

namespace hg {

// The value must fit t's dtype (fits_dtype: i64 refuses inf, NaN and |v| >= 2^63, f16
// refuses finite values beyond 65504, ...), else hg::Error.
void fill_(const Tensor& t, double value);
// dst = src converted to dst's dtype; src broadcasts to dst's shape. Unchecked, as in PyTorch:
// into i64 a fraction truncates toward zero, values beyond the range saturate (±inf too) and
// NaN gives 0; into f16/bf16/f32 overflow rounds to ±inf; into bool, v != 0 (NaN is true).
void copy_(const Tensor& dst, const Tensor& src);

namespace detail {
// The same without the version bump, for the first values of a tensor made a moment ago
// that nothing can have saved (factories, clone, to): it starts at version 0, as in PyTorch.
void fill_new(const Tensor& t, double value);
void copy_into_new(const Tensor& dst, const Tensor& src);
}  // namespace detail

}  // namespace hg
