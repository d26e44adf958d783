// The cuda device's elementwise loop, shared by copy, fill, unary/binary ops and where:
// out[i] = f(in0[i], in1[i], ...) over operands broadcast to one shape. Contiguous,
// 16-byte aligned operands move in 16-byte vectors; anything else goes through the
// strided index map of cuda/tensor_indexing.h. Include from .cu files only.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <utility>

#include "cuda/device_types.h"
#include "cuda/launch.h"
#include "cuda/tensor_indexing.h"

namespace hg::cuda {

// Raw bytes moved as one access: B = 16 becomes a 128-bit load or store natively.
template <size_t B>
struct alignas(B) Bytes {
  unsigned char b[B];
};

template <int N>
struct MapArgs {
  char* ptr[N];  // operand 0 is the output
  StridedLayout<N> layout;
  int64_t n;
  bool vector;  // every operand contiguous and aligned to its vector's size
};

template <class... T>
inline constexpr size_t widest_v = std::max({sizeof(T)...});

// Elements per thread and step on the vector path: 16 bytes of the widest operand.
template <class TO, class... TI>
inline constexpr int vector_width_v = static_cast<int>(16 / widest_v<TO, TI...>);

template <int V, class TO, class F, class... TI, size_t... K>
HG_DEVICE void map_vector(char* const* ptr, int64_t i, const F& f, std::index_sequence<K...>) {
  [[maybe_unused]] constexpr size_t in_bytes[] = {V * sizeof(TI)..., 1};
  [[maybe_unused]] alignas(16) unsigned char in[sizeof...(TI) + 1][16];
  ((*reinterpret_cast<Bytes<in_bytes[K]>*>(in[K]) =
        *reinterpret_cast<const Bytes<in_bytes[K]>*>(ptr[K + 1] + i * static_cast<int64_t>(sizeof(TI)))),
   ...);
  alignas(16) TO out[V];
  for (int j = 0; j < V; ++j) out[j] = f(reinterpret_cast<const TI*>(in[K])[j]...);
  *reinterpret_cast<Bytes<V * sizeof(TO)>*>(ptr[0] + i * static_cast<int64_t>(sizeof(TO))) =
      *reinterpret_cast<const Bytes<V * sizeof(TO)>*>(out);
}

template <class TO, class F, class... TI, size_t... K>
HG_DEVICE void map_one(char* const* ptr, const int64_t* off, const F& f, std::index_sequence<K...>) {
  *reinterpret_cast<TO*>(ptr[0] + off[0] * static_cast<int64_t>(sizeof(TO))) =
      f(*reinterpret_cast<const TI*>(ptr[K + 1] + off[K + 1] * static_cast<int64_t>(sizeof(TI)))...);
}

// F: a trivially copyable functor with HG_DEVICE TO operator()(TI...) const on stored values.
template <class TO, class F, class... TI>
__global__ void map_kernel(MapArgs<sizeof...(TI) + 1> a, F f) {
  constexpr int N = sizeof...(TI) + 1;
  using Seq = std::make_index_sequence<sizeof...(TI)>;
  const int64_t step = int64_t{gridDim.x} * blockDim.x;
  const int64_t tid = int64_t{blockIdx.x} * blockDim.x + threadIdx.x;
  if (a.vector) {
    constexpr int V = vector_width_v<TO, TI...>;
    const int64_t nv = a.n / V;
    for (int64_t v = tid; v < nv; v += step) map_vector<V, TO, F, TI...>(a.ptr, v * V, f, Seq{});
    for (int64_t i = nv * V + tid; i < a.n; i += step) {
      int64_t off[N];
      for (int k = 0; k < N; ++k) off[k] = i;
      map_one<TO, F, TI...>(a.ptr, off, f, Seq{});
    }
    return;
  }
  for (int64_t i = tid; i < a.n; i += step) {
    const Offsets<N> o = element_offsets(a.layout, i);
    map_one<TO, F, TI...>(a.ptr, o.v, f, Seq{});
  }
}

// Threads per block of the elementwise kernels, and a grid cap: with a grid-stride loop
// 1024 blocks of 256 threads fill a GPU, and keep the emulation's fiber count bounded.
inline constexpr unsigned kMapThreads = 256;
inline constexpr int64_t kMapMaxBlocks = 1024;

inline unsigned map_blocks(int64_t work) {
  return static_cast<unsigned>(std::clamp<int64_t>((work + kMapThreads - 1) / kMapThreads, 1, kMapMaxBlocks));
}

// Runs out = f(ins...) on out's device; TO/TI... are the operands' stored types (checked
// against their dtypes), every input already has out's shape (broadcast views allowed).
template <class TO, class... TI, class F>
void map(const char* name, const Tensor& out, const std::array<const Tensor*, sizeof...(TI)>& ins, F f) {
  constexpr int N = sizeof...(TI) + 1;
  const int64_t n = out.numel();
  if (n == 0) return;
  std::array<const Tensor*, N> all;
  all[0] = &out;
  for (size_t k = 0; k < ins.size(); ++k) all[k + 1] = ins[k];
  constexpr DType dtypes[] = {dtype_v<TO>, dtype_v<TI>...};
  constexpr size_t sizes[] = {sizeof(TO), sizeof(TI)...};
  constexpr int V = vector_width_v<TO, TI...>;
  MapArgs<N> a{};
  a.layout = strided_layout<N>(all);
  a.n = n;
  a.vector = true;
  for (int k = 0; k < N; ++k) {
    HG_CHECK(all[k]->dtype() == dtypes[k], name, ": operand ", k, " is ", dtype_name(all[k]->dtype()), ", expected ",
             dtype_name(dtypes[k]));
    HG_CHECK(all[k]->device() == out.device(), name, ": operand ", k, " is on ", all[k]->device().str(),
             ", the output on ", out.device().str());
    a.ptr[k] = static_cast<char*>(all[k]->data_ptr());
    a.vector = a.vector && all[k]->is_contiguous() &&
               reinterpret_cast<uintptr_t>(a.ptr[k]) % (V * sizes[k]) == 0;
  }
  const int64_t work = a.vector ? (n + V - 1) / V : n;
  launch(map_kernel<TO, F, TI...>,
         {.grid = map_blocks(work), .block = kMapThreads, .stream = current_stream(out.device().index), .name = name},
         a, f);
}

}  // namespace hg::cuda
