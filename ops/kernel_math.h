// Per-element math that the CPU kernels and the CUDA kernels (native and emulated) share:
// the host/device qualifier and libm in compute precision, so one copy of a formula runs
// on every backend and a fix to it reaches them all.
#pragma once
#include <cmath>
#include <type_traits>

// Host and device under nvcc, plain inline elsewhere. cuda/primitives/common.h defines the
// same macro with the same tokens, so either header may come first.
#ifndef HG_HOST_DEVICE
#if defined(__CUDACC__)
#define HG_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define HG_HOST_DEVICE inline
#endif
#endif

namespace hg {

// The overloads std:: picks on the CPU: f32 arguments call the f32 function (expf), f64 and
// integer arguments the f64 one. These global names are the ones CUDA declares for the
// device too; natively the device's libm runs (within an ulp or two of glibc).
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
HG_KERNEL_MATH1(math_cos, cosf, cos)
#undef HG_KERNEL_MATH1

// The sign bit cleared, as std::fabs: abs(-0) is +0.
template <class C>
HG_HOST_DEVICE C math_abs(C x) {
  if constexpr (std::is_same_v<C, float>) return ::fabsf(x);
  else if constexpr (std::is_floating_point_v<C>) return ::fabs(x);
  else return x < C(0) ? C(-x) : x;
}

}  // namespace hg
