// Scalar's dtype rule and the check that a factory's or fill's value fits its dtype.
#include "framework/scalar.h"

#include <cmath>
#include <limits>

namespace hg {

int64_t Scalar::to_i64() const {
  HG_CHECK(integral_, "Scalar::to_i64: ", d_, " is a floating scalar");
  return i_;
}

DType scalar_result_dtype(DType tensor, const Scalar& s) {
  if (is_floating(tensor)) return tensor;
  return s.is_integral() ? i64 : f32;
}

namespace {

// The largest finite magnitude of a floating dtype (f64's bounds every double; the
// non-floating dtypes do not use it).
double max_finite(DType dt) {
  return visit_dtype(dt, []<typename T>() {
    if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, bool>) return double{INFINITY};
    else return static_cast<double>(std::numeric_limits<T>::max());
  });
}

}  // namespace

bool fits_dtype(double v, DType dt) {
  if (dt == DType::b8 || dt == DType::f64) return true;
  if (dt == DType::i64) return v >= -0x1p63 && v < 0x1p63;  // false for NaN and ±inf
  return !std::isfinite(v) || std::fabs(v) <= max_finite(dt);
}

void check_fits_dtype(double v, DType dt, const char* op) {
  if (fits_dtype(v, dt)) return;
  if (dt == DType::i64)
    throw Error(detail::concat(op, ": value ", v, " cannot be converted to i64 without overflow; i64 takes finite values in "
                               "[-2^63, 2^63) (a fraction is truncated toward zero). Use a floating dtype for inf, NaN "
                               "or larger magnitudes"));
  throw Error(detail::concat(op, ": value ", v, " cannot be converted to ", dtype_name(dt), " without overflow; ",
                             dtype_name(dt), " takes finite values of magnitude up to ", max_finite(dt),
                             ", inf and NaN (pass INFINITY for an overflowed value, or use a wider dtype)"));
}

}  // namespace hg
