// The AMX kernels' descriptors with the scalar tile model (ops/cpu/gemm/amx_model.h) in
// place of the tile unit, for tests on CPUs without AMX, and a count of their calls (so a
// test can tell the engine really took them).
#pragma once
#include <atomic>

#include "ops/cpu/gemm/amx_model.h"
#include "ops/cpu/gemm/kernel.h"

namespace hg::test_gemm {

inline std::atomic<int64_t> g_model_calls{0};
inline int64_t model_calls() { return g_model_calls.load(); }

template <int Planes>
void model_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  ++g_model_calls;
  cpu::gemm::amx::tile_kernel<cpu::gemm::amx::ModelTiles, Planes>(kc, a, b, c, ldc, first, half);
}

using cpu::gemm::Kernel;
using namespace cpu::gemm::amx;  // MR, NR, the layout functions
inline void model_begin() { begin<ModelTiles>(); }
inline void model_end() { end<ModelTiles>(); }
inline const Kernel<float> kModelBf16{"amx bf16 on the model", MR, NR, model_fn<1>, panel_bytes<1>, repack_a<1>,
                                      repack_b<1>, 1, model_begin, model_end};
inline const Kernel<float> kModelF16{"amx f16 on the model", MR, NR, model_fn<2>, panel_bytes<2>, repack_a<2>,
                                     repack_b<2>, 4, model_begin, model_end};

}  // namespace hg::test_gemm
