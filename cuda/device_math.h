// Math for kernels in compute precision, with the overloads std:: picks on the CPU: f32
// arguments call the f32 function (expf), f64 and integer arguments the f64 one. Natively
// the device's libm runs (within an ulp or two of glibc); under the emulation, glibc's.
#pragma once
#include <cmath>
#include <type_traits>

#include "cuda/primitives/common.h"

namespace hg::cuda {

#define HG_DEVICE_MATH1(name, f32_fn, f64_fn)                          \
  template <class C>                                                   \
  HG_HOST_DEVICE auto name(C x) {                                      \
    if constexpr (std::is_same_v<C, float>) return ::f32_fn(x);        \
    else return ::f64_fn(static_cast<double>(x));                      \
  }
HG_DEVICE_MATH1(math_exp, expf, exp)
HG_DEVICE_MATH1(math_log, logf, log)
HG_DEVICE_MATH1(math_log1p, log1pf, log1p)
HG_DEVICE_MATH1(math_sqrt, sqrtf, sqrt)
HG_DEVICE_MATH1(math_tanh, tanhf, tanh)
HG_DEVICE_MATH1(math_erf, erff, erf)
HG_DEVICE_MATH1(math_cos, cosf, cos)
#undef HG_DEVICE_MATH1

template <class C>
HG_HOST_DEVICE auto math_pow(C x, C y) {
  if constexpr (std::is_same_v<C, float>) return ::powf(x, y);
  else return ::pow(static_cast<double>(x), static_cast<double>(y));
}

// The sign bit cleared, as std::fabs: abs(-0) is +0.
template <class C>
HG_HOST_DEVICE C math_abs(C x) {
  if constexpr (std::is_same_v<C, float>) return ::fabsf(x);
  else if constexpr (std::is_floating_point_v<C>) return ::fabs(x);
  else return x < C(0) ? C(-x) : x;
}

// x - x is 0 exactly for finite x and NaN for inf and NaN; integers are always finite.
template <class C>
HG_HOST_DEVICE bool math_isfinite(C x) {
  if constexpr (std::is_floating_point_v<C>) return x - x == C(0);
  else return true;
}

template <class C>
HG_HOST_DEVICE bool math_isnan(C x) {
  return x != x;
}

}  // namespace hg::cuda
