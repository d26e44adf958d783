// Runs cuda/mma_gemm.h's engine on strided tensors with a chosen tile config and epilogue,
// for tests/cuda/test_mma_gemm.cpp.
// claims: tensor cores (.ci/sass_check requires HMMA, what mma.sync becomes, in this file's machine code)
#include "tests/cuda/gemm_kernels.h"

#include <type_traits>

#include "cuda/mma_gemm.h"
#include "cuda/mma_sources.h"

namespace hg::test::kernels {
namespace {

using cuda::MmaMode;

// The tiles as mma_gemm_auto picks them: blocks per SM by source alignment and mode.
template <bool Large, MmaMode Mode, class T, class Out>
void run(const Tensor& a, const Tensor& b, const Out& out) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const auto& sa = a.strides();
  const auto& sb = b.strides();
  const cuda::StridedOperand<T> oa{a.data<T>(), B == 1 ? 0 : sa[0], sa[1], M, sa[2]};
  const cuda::StridedOperand<T> ob{b.data<T>(), B == 1 ? 0 : sb[0], sb[2], N, sb[1]};
  cuda::with_sources<T>(oa, ob, K, [&]<class SrcA, class SrcB>(const SrcA& src_a, const SrcB& src_b) {
    constexpr bool kAligned = cuda::source_aligned<SrcA> && cuda::source_aligned<SrcB>;
    using Tile = std::conditional_t<Large, cuda::MmaTileLarge<T, kAligned>,
                                    cuda::MmaTileSmall<T, kAligned || Mode != MmaMode::tf32x3>>;
    cuda::mma_gemm<Tile, Mode>(0, "test_mma_gemm", B, M, N, K, src_a, src_b, out);
  });
}

template <bool Large, MmaMode Mode, class T, class O>
void run_into(const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, float alpha, bool relu) {
  HG_CHECK(a.dtype() == dtype_of<T>::value && b.dtype() == dtype_of<T>::value && out.is_contiguous() &&
               out.dtype() == dtype_of<O>::value && (!bias.defined() || bias.dtype() == out.dtype()),
           "test mma_gemm: operands must be ", dtype_name(dtype_of<T>::value), ", out contiguous ", dtype_name(dtype_of<O>::value));
  const int64_t M = a.size(1), N = b.size(2);
  run<Large, Mode, T>(a, b, cuda::Epilogue<O>{out.data<O>(), M * N, N, bias.defined() ? bias.data<O>() : nullptr, alpha, relu});
}

template <bool Large>
void dispatch(GemmMode mode, const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias, float alpha,
              bool relu) {
  switch (mode) {
    case GemmMode::f16:
      if (out.dtype() == f32) return run_into<Large, MmaMode::f16, half, float>(a, b, out, bias, alpha, relu);
      if (out.dtype() == bf16) return run_into<Large, MmaMode::f16, half, bfloat16>(a, b, out, bias, alpha, relu);
      return run_into<Large, MmaMode::f16, half, half>(a, b, out, bias, alpha, relu);
    case GemmMode::bf16: return run_into<Large, MmaMode::bf16, bfloat16, bfloat16>(a, b, out, bias, alpha, relu);
    case GemmMode::tf32: return run_into<Large, MmaMode::tf32, float, float>(a, b, out, bias, alpha, relu);
    case GemmMode::tf32x3: return run_into<Large, MmaMode::tf32x3, float, float>(a, b, out, bias, alpha, relu);
  }
}

}  // namespace

void mma_gemm(GemmTile tile, GemmMode mode, const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& bias,
              float alpha, bool relu) {
  if (tile == GemmTile::small) dispatch<false>(mode, a, b, out, bias, alpha, relu);
  else dispatch<true>(mode, a, b, out, bias, alpha, relu);
}

}  // namespace hg::test::kernels
