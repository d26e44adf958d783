// Per-element math that the CPU kernels and the CUDA kernels (native and emulated) share:
// libm in compute precision with the overloads std:: picks on the CPU, so one copy of a
// formula runs on every backend and a fix to it reaches them all.
#pragma once
#include <cmath>
#include <type_traits>

#include "framework/host_device.h"

namespace hg {

// f32 arguments call the f32 function (expf), f64 and integer arguments the f64 one. These
// global names are the ones CUDA declares for the device too: natively the device's libm
// runs (within an ulp or two of glibc); on the CPU and under the emulation, glibc's.
#define HG_KERNEL_MATH1(name, f32_fn, f64_fn)                   \
  template <class C>                                            \
  HG_HOST_DEVICE auto name(C x) {                               \
    if constexpr (std::is_same_v<C, float>) return ::f32_fn(x); \
    else return ::f64_fn(static_cast<double>(x));               \
  }
HG_KERNEL_MATH1(math_exp, expf, exp)
HG_KERNEL_MATH1(math_log, logf, log)
HG_KERNEL_MATH1(math_log1p, log1pf, log1p)
HG_KERNEL_MATH1(math_sqrt, sqrtf, sqrt)
HG_KERNEL_MATH1(math_tanh, tanhf, tanh)
HG_KERNEL_MATH1(math_erf, erff, erf)
HG_KERNEL_MATH1(math_cos, cosf, cos)
#undef HG_KERNEL_MATH1

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

// 1 / (1 + e^-x), as e^x / (1 + e^x) for x < 0: exp(-x) would overflow below about -88.7
// in f32 while the result is still representable. (The CPU's vectorised elementwise kernel
// writes the same two forms with selects.)
template <class C>
HG_HOST_DEVICE C math_sigmoid(C x) {
  if (x < C(0)) {
    const C e = math_exp(x);
    return C(e / (C(1) + e));
  }
  return C(C(1) / (C(1) + math_exp(-x)));
}

}  // namespace hg
