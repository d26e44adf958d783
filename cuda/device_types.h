// Element types on the device: f16/bf16 <-> f32/f64 conversions that give the CPU's bits
// (round to nearest even, IEEE overflow, underflow and subnormals), and the per-dtype
// dev_load/dev_store pair kernels compute through, mirroring hg::load/hg::store.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/primitives/common.h"
#include "framework/dtype.h"
#include "framework/float_narrow.h"

#if defined(__CUDACC__) && !defined(HG_CUDA_EMULATION)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#endif

// Kernels use hg's own storage types (double, float, hg::half, hg::bfloat16, int64_t,
// bool): a tensor's bytes are read as what visit_dtype names, so a kernel template
// instantiated inside visit_dtype(dt, [&]<typename T>() { launch(k<T>, ...); }) is the
// whole dtype fan-out. Device code touches half/bfloat16 only through `.bits`.
namespace hg::cuda {

// Natively the conversions are the hardware's cvt.rn instructions, which round as IEEE
// says; the one thing they do differently is NaN (a canonical pattern), so NaNs take the
// CPU's integer path (the encoders: framework/float_narrow.h) and keep its payload bits.
// Under the emulation (and in host code) the CPU functions themselves run.
HG_HOST_DEVICE float f16_bits_to_f32(uint16_t h) {
#if defined(__CUDA_ARCH__)
  if ((h & 0x7fffu) > 0x7c00u)
    return __uint_as_float((uint32_t{h & 0x8000u} << 16) | 0x7fc00000u | (uint32_t{h & 0x3ffu} << 13));
  return __half2float(__ushort_as_half(h));
#else
  return half_bits_to_float(h);
#endif
}

HG_HOST_DEVICE uint16_t f32_to_f16_bits(float f) {
#if defined(__CUDA_ARCH__)
  const uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return hg::detail::narrow_float_bits<8, 23, 5, 10>(x);
  return __half_as_ushort(__float2half_rn(f));
#else
  return float_to_half_bits(f);
#endif
}

HG_HOST_DEVICE uint16_t f64_to_f16_bits(double d) {
#if defined(__CUDA_ARCH__)
  const uint64_t x = static_cast<uint64_t>(__double_as_longlong(d));
  if ((x & 0x7fffffffffffffffu) > 0x7ff0000000000000u) return hg::detail::narrow_float_bits<11, 52, 5, 10>(x);
  return __half_as_ushort(__double2half(d));
#else
  return double_to_half_bits(d);
#endif
}

HG_HOST_DEVICE float bf16_bits_to_f32(uint16_t b) {
#if defined(__CUDA_ARCH__)
  const uint32_t x = uint32_t{b} << 16;
  return __uint_as_float((x & 0x7fffffffu) > 0x7f800000u ? x | 0x400000u : x);
#else
  return hg::bf16_bits_to_float(b);
#endif
}

HG_HOST_DEVICE uint16_t f32_to_bf16_bits(float f) {
#if defined(__CUDA_ARCH__)
  const uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return hg::detail::narrow_float_bits<8, 23, 8, 7>(x);
  return __bfloat16_as_ushort(__float2bfloat16_rn(f));
#else
  return float_to_bf16_bits(f);
#endif
}

HG_HOST_DEVICE uint16_t f64_to_bf16_bits(double d) {
#if defined(__CUDA_ARCH__)
  const uint64_t x = static_cast<uint64_t>(__double_as_longlong(d));
  if ((x & 0x7fffffffffffffffu) > 0x7ff0000000000000u) return hg::detail::narrow_float_bits<11, 52, 8, 7>(x);
  return __bfloat16_as_ushort(__double2bfloat16(d));
#else
  return double_to_bf16_bits(d);
#endif
}

template <class T>
inline constexpr bool is_reduced_v = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// The value of a stored element in its compute type (compute_t: f32 for f16/bf16, i64
// for bool), as hg::load gives it on the CPU.
template <class T>
HG_HOST_DEVICE compute_t<T> dev_load(T v) {
  if constexpr (std::is_same_v<T, half>) return f16_bits_to_f32(v.bits);
  else if constexpr (std::is_same_v<T, bfloat16>) return bf16_bits_to_f32(v.bits);
  else return static_cast<compute_t<T>>(v);
}

// A computed value rounded once into T, as hg::store does: a double goes straight to
// f16/bf16 (no double rounding through f32), anything else through f32 as on the CPU.
template <class T, class C>
HG_HOST_DEVICE T dev_store(C v) {
  if constexpr (is_reduced_v<T>) {
    constexpr bool f16 = std::is_same_v<T, half>;
    T r;
    if constexpr (std::is_same_v<C, double>) r.bits = f16 ? f64_to_f16_bits(v) : f64_to_bf16_bits(v);
    else r.bits = f16 ? f32_to_f16_bits(static_cast<float>(v)) : f32_to_bf16_bits(static_cast<float>(v));
    return r;
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != C(0);
  } else if constexpr (std::is_same_v<T, int64_t> && std::is_floating_point_v<C>) {
    return saturate_to_i64(v);  // cvt.rzi would give INT64_MIN for NaN; the CPU's rule is NaN -> 0
  } else {
    return static_cast<T>(v);
  }
}

// One element converted between any two dtypes, as the CPU's copy does.
template <class D, class S>
HG_HOST_DEVICE D dev_convert(S v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else return dev_store<D>(dev_load(v));
}

}  // namespace hg::cuda
