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
