// Element types of tensors and the one place that switches on them: visit_dtype
// expands a generic lambda over the C++ type behind a DType (see DESIGN.md).
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <type_traits>

#include "framework/bfloat16.h"
#include "framework/error.h"
#include "framework/half.h"

namespace hg {

enum class DType : uint8_t { f64, f32, f16, bf16, i64, b8 };

inline constexpr DType f64 = DType::f64;
inline constexpr DType f32 = DType::f32;
inline constexpr DType f16 = DType::f16;
inline constexpr DType bf16 = DType::bf16;
inline constexpr DType i64 = DType::i64;
inline constexpr DType b8 = DType::b8;

const char* dtype_name(DType dt);
DType parse_dtype(const std::string& name);  // "f32", "float16", "bf16", ... ; throws on unknown
size_t dtype_size(DType dt);
bool is_floating(DType dt);
bool is_reduced(DType dt);  // f16 or bf16
// The dtype two operands meet in: the wider floating type; f16 with bf16 gives f32;
// integers and bools give way to any floating type.
DType promote_types(DType a, DType b);

template <class T> struct dtype_of;
template <> struct dtype_of<double> { static constexpr DType value = DType::f64; };
template <> struct dtype_of<float> { static constexpr DType value = DType::f32; };
template <> struct dtype_of<half> { static constexpr DType value = DType::f16; };
template <> struct dtype_of<bfloat16> { static constexpr DType value = DType::bf16; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::i64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::b8; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

// The type arithmetic on T is carried out in: f16/bf16 compute in f32 and round once.
template <class T> struct compute_type { using type = T; };
template <> struct compute_type<half> { using type = float; };
template <> struct compute_type<bfloat16> { using type = float; };
template <> struct compute_type<bool> { using type = int64_t; };
template <class T> using compute_t = typename compute_type<T>::type;

// The type sums over T accumulate in: at least f32.
template <class T> struct accum_type { using type = compute_t<T>; };
template <class T> using accum_t = typename accum_type<T>::type;

// A floating value as int64 with a defined result (C++ leaves out-of-range conversions
// undefined): truncated toward zero inside [-2^63, 2^63), saturated to INT64_MIN / INT64_MAX
// outside (±inf included), NaN -> 0. Every cast to i64 (to, copy_, kernel stores) gives
// this, on every device; constexpr, so CUDA kernels call it too.
template <class F>
constexpr int64_t saturate_to_i64(F v) {
  if (v != v) return 0;
  if (v >= F(0x1p63)) return INT64_MAX;
  if (v < F(-0x1p63)) return INT64_MIN;
  return static_cast<int64_t>(v);
}

template <class T> inline compute_t<T> load(T v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) return static_cast<float>(v);
  else return static_cast<compute_t<T>>(v);
}
template <class T, class C> inline T store(C v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>) {
    if constexpr (std::is_same_v<C, double>) return T(v);
    else return T(static_cast<float>(v));
  } else if constexpr (std::is_same_v<T, bool>) {
    return v != C(0);
  } else if constexpr (std::is_same_v<T, int64_t> && std::is_floating_point_v<C>) {
    return saturate_to_i64(v);
  } else {
    return static_cast<T>(v);
  }
}

// visit_dtype(dt, [&]<typename T>() { ... }) calls the lambda with T = the C++ type of dt.
template <class F>
decltype(auto) visit_dtype(DType dt, F&& f) {
  switch (dt) {
    case DType::f64: return f.template operator()<double>();
    case DType::f32: return f.template operator()<float>();
    case DType::f16: return f.template operator()<half>();
    case DType::bf16: return f.template operator()<bfloat16>();
    case DType::i64: return f.template operator()<int64_t>();
    case DType::b8: return f.template operator()<bool>();
  }
  throw Error("visit_dtype: invalid dtype");
}

// The floating subset; `what` names the op for the error raised on other dtypes.
template <class F>
decltype(auto) visit_floating(DType dt, const char* what, F&& f) {
  switch (dt) {
    case DType::f64: return f.template operator()<double>();
    case DType::f32: return f.template operator()<float>();
    case DType::f16: return f.template operator()<half>();
    case DType::bf16: return f.template operator()<bfloat16>();
    default: break;
  }
  throw Error(detail::concat(what, ": expected a floating dtype (f64, f32, f16, bf16), got ", dtype_name(dt)));
}

}  // namespace hg
