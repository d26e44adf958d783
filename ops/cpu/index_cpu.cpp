// CPU kernels of gather and its backward scatter_add over [outer, n, inner] views; the
// scatter accumulates in f32 (f64 for f64) so repeated indices round once, in the op.
#include <algorithm>

#include "ops/cpu/loops.h"
#include "ops/index_kernels.h"

namespace hg::cpu {
namespace {

// The index tensor's strides, and how far each axis really varies (1 where stride 0).
struct IndexView {
  const int64_t* p;
  int64_t s0, s1, s2;
  int64_t at(int64_t o, int64_t m, int64_t i) const { return p[o * s0 + m * s1 + i * s2]; }
};

IndexView index_view(const Tensor& index) {
  return {index.data<int64_t>(), index.strides()[0], index.strides()[1], index.strides()[2]};
}

// Every distinct index once (stride-0 axes are visited at position 0 only).
void check_indices(const Tensor& index, int64_t n, const char* op) {
  const IndexView iv = index_view(index);
  const Shape& s = index.shape();
  const int64_t e0 = iv.s0 ? s[0] : 1, e1 = iv.s1 ? s[1] : 1, e2 = iv.s2 ? s[2] : 1;
  for (int64_t o = 0; o < e0; ++o)
    for (int64_t m = 0; m < e1; ++m)
      for (int64_t i = 0; i < e2; ++i) {
        const int64_t j = iv.at(o, m, i);
        if (j < 0 || j >= n) index_out_of_range(op, j, n);
      }
}

template <class T>
void gather_typed(const Tensor& x, const Tensor& index, const Tensor& y) {
  const int64_t n = x.shape()[1], m_n = y.shape()[1], inner = y.shape()[2];
  const T* px = x.data<T>();
  T* py = y.data<T>();
  const IndexView iv = index_view(index);
  parallel_for(y.shape()[0] * m_n, inner, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t o = r / m_n, m = r % m_n;
      T* yrow = py + r * inner;
      const T* xo = px + o * n * inner;
      for (int64_t i = 0; i < inner; ++i) yrow[i] = xo[iv.at(o, m, i) * inner + i];
    }
  });
}

template <class T>
void scatter_add_typed(const Tensor& g, const Tensor& index, const Tensor& acc) {
  using A = accum_t<T>;
  const int64_t n = acc.shape()[1], m_n = g.shape()[1], inner = g.shape()[2];
  const T* pg = g.data<T>();
  A* pa = acc.data<A>();
  const IndexView iv = index_view(index);
  // Each outer slice owns its rows of acc: threads never write the same element, and
  // the sum over m runs in order, so the result does not depend on the thread count.
  parallel_for(g.shape()[0], m_n * inner, [&](int64_t o0, int64_t o1) {
    for (int64_t o = o0; o < o1; ++o)
      for (int64_t m = 0; m < m_n; ++m) {
        const T* grow = pg + (o * m_n + m) * inner;
        A* ao = pa + o * n * inner;
        for (int64_t i = 0; i < inner; ++i) ao[iv.at(o, m, i) * inner + i] += A(load(grow[i]));
      }
  });
}

void gather_cpu(const Tensor& x, const Tensor& index, const Tensor& y, const char* op) {
  check_indices(index, x.shape()[1], op);
  visit_dtype(x.dtype(), [&]<typename T>() { gather_typed<T>(x, index, y); });
}

void scatter_add_cpu(const Tensor& g, const Tensor& index, const Tensor& acc) {
  visit_floating(g.dtype(), "scatter_add", [&]<typename T>() { scatter_add_typed<T>(g, index, acc); });
}

}  // namespace

HG_REGISTER_KERNEL(gather_stub, cpu, gather_cpu);
HG_REGISTER_KERNEL(scatter_add_stub, cpu, scatter_add_cpu);

}  // namespace hg::cpu
