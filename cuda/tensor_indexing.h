// How a kernel finds element i (row-major) of a strided tensor: operand descriptors with
// up to kMaxDims sizes and strides, built on the host with size-1 dimensions dropped and
// mergeable dimensions merged, and the linear-index -> element-offset map they share.
#pragma once
#include <array>
#include <cstdint>

#include "cuda/primitives/common.h"
#include "framework/error.h"
#include "framework/tensor.h"

namespace hg::cuda {

inline constexpr int kMaxDims = 8;

// One tensor as a kernel sees it (passed by value as a kernel parameter). `data` points at
// element 0 (the storage offset applied); strides are in elements, 0 where broadcast.
struct TensorArg {
  void* data = nullptr;
  DType dtype = DType::f32;
  int32_t dim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[kMaxDims] = {};
};

// The offset in elements of the element whose row-major index over `sizes` is `linear`.
HG_HOST_DEVICE int64_t element_offset(const int64_t* sizes, const int64_t* strides, int32_t dim, int64_t linear) {
  int64_t off = 0;
  for (int32_t d = dim - 1; d >= 0; --d) {
    const int64_t s = sizes[d];
    const int64_t q = linear / s;
    off += (linear - q * s) * strides[d];
    linear = q;
  }
  return off;
}

HG_HOST_DEVICE int64_t element_offset(const TensorArg& t, int64_t linear) {
  return element_offset(t.sizes, t.strides, t.dim, linear);
}

template <class T>
HG_HOST_DEVICE T* element_ptr(const TensorArg& t, int64_t linear) {
  return static_cast<T*>(t.data) + element_offset(t, linear);
}

// N operands broadcast to one shape (operand 0 usually the output): the index is split
// into coordinates once and each operand's offset taken from the same coordinates.
template <int N>
struct StridedLayout {
  int32_t dim = 0;
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
};

template <int N>
struct Offsets {
  int64_t v[N];
};

template <int N>
HG_HOST_DEVICE Offsets<N> element_offsets(const StridedLayout<N>& l, int64_t linear) {
  Offsets<N> o{};
  for (int32_t d = l.dim - 1; d >= 0; --d) {
    const int64_t s = l.sizes[d];
    const int64_t q = linear / s;
    const int64_t c = linear - q * s;
    for (int k = 0; k < N; ++k) o.v[k] += c * l.strides[k][d];
    linear = q;
  }
  return o;
}

// Host side. The layout of N operands that all have `shape` (broadcast views have
// stride 0): size-1 dimensions dropped, and a dimension merged into the next where every
// operand steps through both as one. hg::Error when more than kMaxDims remain.
template <int N>
StridedLayout<N> strided_layout(const Shape& shape, const std::array<const Strides*, N>& strides) {
  StridedLayout<N> l;
  int64_t merged_sizes[64];
  int64_t merged_strides[N][64];
  int32_t nd = 0;
  HG_CHECK(shape.size() <= 64, "cuda kernels: tensors of rank ", shape.size(), " are not supported (at most 64)");
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (nd > 0) {
      bool merge = true;
      for (int k = 0; k < N; ++k) merge = merge && merged_strides[k][nd - 1] == (*strides[k])[d] * shape[d];
      if (merge) {
        merged_sizes[nd - 1] *= shape[d];
        for (int k = 0; k < N; ++k) merged_strides[k][nd - 1] = (*strides[k])[d];
        continue;
      }
    }
    merged_sizes[nd] = shape[d];
    for (int k = 0; k < N; ++k) merged_strides[k][nd] = (*strides[k])[d];
    ++nd;
  }
  HG_CHECK(nd <= kMaxDims, "cuda kernels: the operands of shape ", shape_str(shape), " keep ", nd,
           " dimensions after merging, more than the ", kMaxDims, " a kernel indexes; make them contiguous first");
  l.dim = nd;
  for (int32_t d = 0; d < nd; ++d) {
    l.sizes[d] = merged_sizes[d];
    for (int k = 0; k < N; ++k) l.strides[k][d] = merged_strides[k][d];
  }
  return l;
}

template <int N>
StridedLayout<N> strided_layout(const std::array<const Tensor*, N>& ts) {
  std::array<const Strides*, N> st;
  for (int k = 0; k < N; ++k) {
    HG_CHECK(ts[k]->shape() == ts[0]->shape(), "cuda kernels: operand ", k, " has shape ", shape_str(ts[k]->shape()),
             ", expected ", shape_str(ts[0]->shape()));
    st[k] = &ts[k]->strides();
  }
  return strided_layout<N>(ts[0]->shape(), st);
}

// One tensor's descriptor, its dimensions merged where its own strides allow.
inline TensorArg tensor_arg(const Tensor& t) {
  const StridedLayout<1> l = strided_layout<1>({&t});
  TensorArg a;
  a.data = t.data_ptr();
  a.dtype = t.dtype();
  a.dim = l.dim;
  for (int32_t d = 0; d < l.dim; ++d) {
    a.sizes[d] = l.sizes[d];
    a.strides[d] = l.strides[0][d];
  }
  return a;
}

}  // namespace hg::cuda
