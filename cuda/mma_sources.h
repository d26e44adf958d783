// Strided matrices as operand sources of the tensor-core GEMM engine (cuda/mma_operands.h states
// the contract): the operands of bmm and linear, any strides. Include from .cu only.
#pragma once
#include <cstdint>

#include "cuda/mma_gemm.h"
#include "cuda/operand_alignment.h"

namespace hg::cuda {

// A strided operand as an mma_gemm source: line i of batch entry z starts at
// p + z * batch_stride + i * line_stride and its elements are elem_stride apart. Only
// elem_stride 1 gives 16-byte copies; any other stride is read element by element.
// Aligned: elem_stride is 1 and every line starts 16-byte aligned (operand_slow_path said
// so on the host), so every chunk is one cp.async and the kernel carries no other path.
template <class T, bool KContiguous, bool Aligned = false>
struct StridedSource {
  using Element = T;
  using Line = const T*;
  static constexpr bool kContiguousK = KContiguous, kAligned = Aligned, kCheapLine = true;
  const T* p;
  int64_t batch_stride, line_stride, elem_stride;
  HG_DEVICE Line line(int64_t z, int64_t i) const { return p + z * batch_stride + i * line_stride; }
  HG_DEVICE Chunk<T> chunk(Line l, int64_t e, int) const {
    if constexpr (Aligned) return {l + e, ChunkKind::copy};
    else return {l + e * elem_stride, elem_stride == 1 ? ChunkKind::copy : ChunkKind::elements};
  }
  HG_DEVICE const T* element(Line l, int64_t e) const { return l + e * elem_stride; }
};

// One operand of a product as bmm sees it: rows (M for A, N for B) `sr` apart, K entries
// `sk` apart, batch entries `batch_stride` apart (0 when there is one batch entry).
template <class T>
struct StridedOperand {
  const T* p;
  int64_t batch_stride, sr, rows, sk;
};

// Calls f(src_a, src_b) with sources for operands a (M x K) and b (N x K given as its
// transpose): when both load with 16-byte copies (operand_slow_path), Aligned sources with
// lines along whichever axis is contiguous; otherwise both as K-lines read element by
// element, the slow path, whatever their layout (one kernel instead of one per layout).
template <class T, class F>
void with_sources(StridedOperand<T> a, StridedOperand<T> b, int64_t K, F&& f) {
  const auto fast = [&](const StridedOperand<T>& o) {
    return operand_slow_path(reinterpret_cast<uintptr_t>(o.p), sizeof(T), o.batch_stride, o.sr, o.rows, o.sk, K) ==
           nullptr;
  };
  for (StridedOperand<T>* o : {&a, &b}) {  // a size-1 axis is only read at index 0: any stride will do
    if (o->rows == 1) o->sr = 1;
    if (K == 1) o->sk = 1;
  }
  if (!fast(a) || !fast(b)) {
    return f(StridedSource<T, true>{a.p, a.batch_stride, a.sr, a.sk}, StridedSource<T, true>{b.p, b.batch_stride, b.sr, b.sk});
  }
  const auto with = [&](const StridedOperand<T>& o, auto&& g) {
    if (o.sk == 1) g(StridedSource<T, true, true>{o.p, o.batch_stride, o.sr, 1});
    else g(StridedSource<T, false, true>{o.p, o.batch_stride, o.sk, 1});
  };
  with(a, [&](const auto& src_a) { with(b, [&](const auto& src_b) { f(src_a, src_b); }); });
}

}  // namespace hg::cuda
