// How the cuda matmul and convolution kernels choose their GEMM: which tensor-core mode
// runs an element type (kernel_settings' f32_matmul() decides for f32), and which tile
// config fills the GPU. Include from .cu only.
#pragma once
#include <cstdint>
#include <type_traits>

#include "cuda/cuda_api.h"
#include "cuda/gemm_plan.h"
#include "cuda/kernel_settings.h"
#include "cuda/mma_gemm.h"
#include "cuda/runtime.h"

namespace hg::cuda {

// The SM count the tile and split rule (cuda/gemm_plan.h) plans for.
inline int device_sm_count(int device) {
  int sms = 0;
  HG_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms > 0 ? sms : 1;
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

// mma_gemm with the tile and split-K that gemm_tile_plan picks for this device's SM count
// (and kernel_settings' forcing knobs), with the blocks per SM that its sources and mode
// allow (MmaTileLarge, MmaTileSmall, MmaTileNarrow).
template <class T, MmaMode Mode, class SrcA, class SrcB, class Out>
void mma_gemm_auto(int device, const char* name, int64_t B, int64_t M, int64_t N, int64_t K, const SrcA& a,
                   const SrcB& b, const Out& out) {
  constexpr bool kAligned = source_aligned<SrcA> && source_aligned<SrcB>;
  using Large = MmaTileLarge<T, kAligned>;
  using Small = MmaTileSmall<T, kAligned || Mode != MmaMode::tf32x3>;
  using Narrow = MmaTileNarrow<T, kAligned || Mode != MmaMode::tf32x3>;
  static_assert(Large::BK == Small::BK && Small::BK == Narrow::BK, "the plan assumes one k-step for every tile");
  const GemmTilePlan plan = gemm_tile_plan_with_settings(B, M, N, K, device_sm_count(device), Small::BK);
  switch (plan.tile) {
    case MmaTileChoice::large: return mma_gemm<Large, Mode>(device, name, B, M, N, K, a, b, out);  // never split
    case MmaTileChoice::narrow: return mma_gemm_split<Narrow, Mode>(device, name, plan, B, M, N, K, a, b, out);
    default: return mma_gemm_split<Small, Mode>(device, name, plan, B, M, N, K, a, b, out);
  }
}

}  // namespace hg::cuda
