// Numbers that meet tensors: Scalar (an operand written as an integer or a floating value,
// which decides the result dtype with an integer tensor, as PyTorch's Scalar does) and the
// rule for when a value given to a factory or fill fits a dtype.
#pragma once
#include <concepts>
#include <cstdint>

#include "framework/dtype.h"

namespace hg {

class Scalar {
 public:
  template <std::floating_point F>
  Scalar(F v) : d_(static_cast<double>(v)) {}  // NOLINT: implicit, as `t * 0.5` needs
  template <std::integral I>
  Scalar(I v) : i_(static_cast<int64_t>(v)), integral_(true) {  // NOLINT: implicit, as `t + 2` needs
    if constexpr (std::is_unsigned_v<I> && sizeof(I) >= sizeof(int64_t))
      HG_CHECK(v <= static_cast<uint64_t>(INT64_MAX), "Scalar: the unsigned value ", v,
               " does not fit int64 (the largest integer a scalar holds is 2^63 - 1); pass it as a double");
  }

  // Written as an integer (bool included): keeps an integer tensor integer.
  bool is_integral() const { return integral_; }
  double to_double() const { return integral_ ? static_cast<double>(i_) : d_; }
  int64_t to_i64() const;  // integral scalars only

 private:
  double d_ = 0;
  int64_t i_ = 0;
  bool integral_ = false;
};

// The dtype `t (op) s` has, by PyTorch's rule: a floating tensor keeps its dtype; an integer
// or bool tensor with a floating scalar gives f32 (the default floating dtype), with an
// integral scalar i64. (True division always gives a floating result: see div.)
DType scalar_result_dtype(DType tensor, const Scalar& s);

// Whether a value given to a factory or fill (full, fill_, scalar_tensor, from_vector) fits
// dtype `dt`, by PyTorch's rule: i64 takes finite values in [-2^63, 2^63) (a fraction is
// truncated toward zero); f16, bf16 and f32 take inf, NaN and finite values within their
// largest finite magnitude (65504, 3.3895e38, 3.4028e38); f64 and bool take any value
// (bool: v != 0, so NaN is true).
bool fits_dtype(double v, DType dt);
// Throws hg::Error naming `op`, the value, the dtype and its valid range when it does not fit.
void check_fits_dtype(double v, DType dt, const char* op);

}  // namespace hg
