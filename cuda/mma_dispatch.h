// How the cuda matmul and convolution kernels choose their GEMM: which tensor-core mode
// runs an element type (kernel_settings' f32_matmul() decides for f32), and which tile
// config fills the GPU. Include from .cu only.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/kernel_settings.h"
#include "cuda/mma_gemm.h"

namespace hg::cuda {

// 128 x 128 tiles only when there are enough of them to occupy every SM; otherwise 64 x 64
// tiles give four times as many blocks.
inline bool use_large_tiles(int64_t batches, int64_t M, int64_t N) {
  return (M + 127) / 128 * ((N + 127) / 128) * batches >= 96;
}

// Calls f(integral_constant<MmaMode, mode>) with the tensor-core mode that runs a product
// in T, or returns false where T runs on the SIMT GEMM (f64, strict f32).
template <class T, class F>
bool with_mma_mode(F&& f) {
  using Mode = MmaMode;
  if constexpr (std::is_same_v<T, half>) {
    f(std::integral_constant<Mode, Mode::f16>{});
    return true;
  } else if constexpr (std::is_same_v<T, bfloat16>) {
    f(std::integral_constant<Mode, Mode::bf16>{});
    return true;
  } else if constexpr (std::is_same_v<T, float>) {
    switch (f32_matmul()) {
      case F32Matmul::strict: return false;
      case F32Matmul::accurate: f(std::integral_constant<Mode, Mode::tf32x3>{}); return true;
      case F32Matmul::fast: f(std::integral_constant<Mode, Mode::tf32>{}); return true;
    }
    return false;
  } else {
    return false;
  }
}

// mma_gemm with the tile config use_large_tiles picks, with the blocks per SM that its
// sources and mode allow (MmaTileLarge, MmaTileSmall).
template <class T, MmaMode Mode, class SrcA, class SrcB, class Out>
void mma_gemm_auto(int device, const char* name, int64_t B, int64_t M, int64_t N, int64_t K, const SrcA& a,
                   const SrcB& b, const Out& out) {
  constexpr bool kAligned = source_aligned<SrcA> && source_aligned<SrcB>;
  using Large = MmaTileLarge<T, kAligned>;
  using Small = MmaTileSmall<T, kAligned || Mode != MmaMode::tf32x3>;
  if (use_large_tiles(B, M, N)) mma_gemm<Large, Mode>(device, name, B, M, N, K, a, b, out);
  else mma_gemm<Small, Mode>(device, name, B, M, N, K, a, b, out);
}

}  // namespace hg::cuda
