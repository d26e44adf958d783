// Strided matrices as operand sources of the tensor-core GEMM engine (cuda/mma_gemm.h
// states the contract): the operands of bmm and linear, any strides. Include from .cu only.
#pragma once
#include <cstdint>

#include "cuda/mma_gemm.h"

namespace hg::cuda {

// A strided operand as an mma_gemm source: line i of batch entry z starts at
// p + z * batch_stride + i * line_stride and its elements are elem_stride apart. Only
// elem_stride 1 gives 16-byte copies; any other stride is read element by element.
template <class T, bool KContiguous>
struct StridedSource {
  using Element = T;
  using Line = const T*;
  static constexpr bool kContiguousK = KContiguous;
  const T* p;
  int64_t batch_stride, line_stride, elem_stride;
  HG_DEVICE Line line(int64_t z, int64_t i) const { return p + z * batch_stride + i * line_stride; }
  HG_DEVICE Chunk<T> chunk(Line l, int64_t e, int) const {
    return {l + e * elem_stride, elem_stride == 1 ? ChunkKind::copy : ChunkKind::elements};
  }
  HG_DEVICE const T* element(Line l, int64_t e) const { return l + e * elem_stride; }
};

// Calls f with the source of an operand whose M (or N) axis has `rows` entries `sr` apart
// and whose K axis has K entries `sk` apart: lines along whichever axis is contiguous, so
// that loads are 16-byte copies; K-contiguous, element by element, when neither is.
template <class T, class F>
void with_source(const T* p, int64_t batch_stride, int64_t sr, int64_t rows, int64_t sk, int64_t K, F&& f) {
  if (rows == 1) sr = 1;  // a size-1 axis is only read at index 0: any stride will do
  if (K == 1) sk = 1;
  if (sk == 1) f(StridedSource<T, true>{p, batch_stride, sr, 1});
  else if (sr == 1) f(StridedSource<T, false>{p, batch_stride, sk, 1});
  else f(StridedSource<T, true>{p, batch_stride, sr, sk});
}

}  // namespace hg::cuda
