// CPU kernels for copy (with IEEE conversion between any two dtypes) and fill.
#include <cstring>

#include "framework/half_convert.h"
#include "ops/copy_kernels.h"
#include "ops/cpu/loops.h"

namespace hg::cpu {
namespace {

template <class D, class S>
D convert_value(S v) {
  if constexpr (std::is_same_v<D, S>) return v;
  else return store<D>(load<S>(v));
}

// n bytes from src to dst in whole 32/16/8/4/2/1-byte moves the compiler inlines: a
// concatenation's or a channel slice's rows are a few channels long (32 bytes for 8 f32),
// where a memcpy call or an element loop with run-time strides costs more than the move.
inline void copy_run(char* dst, const char* src, int64_t n) {
  if (n > 256) {
    std::memcpy(dst, src, static_cast<size_t>(n));
    return;
  }
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) std::memcpy(dst + i, src + i, 32);
  if (n - i >= 16) std::memcpy(dst + i, src + i, 16), i += 16;
  if (n - i >= 8) std::memcpy(dst + i, src + i, 8), i += 8;
  if (n - i >= 4) std::memcpy(dst + i, src + i, 4), i += 4;
  if (n - i >= 2) std::memcpy(dst + i, src + i, 2), i += 2;
  if (n - i >= 1) dst[i] = src[i];
}

void copy_cpu(const Tensor& dst, const Tensor& src) {
  const int64_t n = dst.numel();
  if (dst.is_contiguous() && src.is_contiguous()) {
    if (dst.dtype() == src.dtype()) {
      std::memcpy(dst.data_ptr(), src.data_ptr(), static_cast<size_t>(n) * dtype_size(dst.dtype()));
      return;
    }
    // The common AMP casts use the vectorised (F16C) conversions.
    if (src.dtype() == f32 && dst.dtype() == f16)
      return convert_f32_to_f16(src.data<float>(), dst.data<half>(), static_cast<size_t>(n));
    if (src.dtype() == f16 && dst.dtype() == f32)
      return convert_f16_to_f32(src.data<half>(), dst.data<float>(), static_cast<size_t>(n));
    if (src.dtype() == f32 && dst.dtype() == bf16)
      return convert_f32_to_bf16(src.data<float>(), dst.data<bfloat16>(), static_cast<size_t>(n));
    if (src.dtype() == bf16 && dst.dtype() == f32)
      return convert_bf16_to_f32(src.data<bfloat16>(), dst.data<float>(), static_cast<size_t>(n));
  }
  visit_dtype(dst.dtype(), [&]<typename D>() {
    visit_dtype(src.dtype(), [&]<typename S>() {
      for_each_strided<2>(dst.shape(), operands<2>({&dst, &src}),
                          [](int64_t len, std::array<char*, 2> p, std::array<int64_t, 2> s) {
                            if constexpr (std::is_same_v<D, S>)
                              if (s[0] == sizeof(D) && s[1] == sizeof(S))
                                return copy_run(p[0], p[1], len * static_cast<int64_t>(sizeof(D)));
                            for (int64_t i = 0; i < len; ++i)
                              *reinterpret_cast<D*>(p[0] + i * s[0]) =
                                  convert_value<D>(*reinterpret_cast<const S*>(p[1] + i * s[1]));
                          });
    });
  });
}

void fill_cpu(const Tensor& dst, double value) {
  visit_dtype(dst.dtype(), [&]<typename T>() {
    const T v = store<T>(value);
    for_each_strided<1>(dst.shape(), operands<1>({&dst}), [v](int64_t len, std::array<char*, 1> p, std::array<int64_t, 1> s) {
      for (int64_t i = 0; i < len; ++i) *reinterpret_cast<T*>(p[0] + i * s[0]) = v;
    });
  });
}

}  // namespace

HG_REGISTER_KERNEL(copy_stub, cpu, copy_cpu);
HG_REGISTER_KERNEL(fill_stub, cpu, fill_cpu);

}  // namespace hg::cpu
