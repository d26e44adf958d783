// CPU kernels of softmax and log_softmax: one line along the axis at a time (stride 1
// for the last axis, `inner` otherwise), values in f32 (f64 for f64), rounded once.
// Lines run eight lanes at a time (ops/cpu/softmax_rows.h) with the scalar operations
// in their order, so results are bitwise those of one-element-at-a-time loops.
#include <array>
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/cpu/softmax_rows.h"
#include "ops/cpu/vec/widen.h"
#include "ops/softmax_kernels.h"

namespace hg::cpu {
namespace {

// Calls body(in_lines, out_line, scratch) for every line along the axis of contiguous
// [outer, n, inner] tensors, scratch holding two rows of A. A strided line (inner > 1) is
// gathered into a contiguous copy and its result scattered back, so every line runs the
// same contiguous code. Lines of one outer index sit side by side, so walking them in
// order keeps a strided line's n cache lines hot for its neighbours.
template <class T, class A, size_t K, class Body>
void for_each_line(const Shape& s3, int64_t cost_per_element, std::array<const T*, K> in, T* out, Body&& body) {
  const int64_t n = s3[1], inner = s3[2], lines = s3[0] * inner;
  parallel_for(lines, n * cost_per_element, [&](int64_t l0, int64_t l1) {
    std::vector<A> scratch(static_cast<size_t>(2 * n));
    std::vector<T> copies(inner == 1 ? 0 : static_cast<size_t>((K + 1) * n));
    std::array<const T*, K> at;
    for (int64_t l = l0; l < l1; ++l) {
      if (inner == 1) {
        for (size_t k = 0; k < K; ++k) at[k] = in[k] + l * n;
        body(at, out + l * n, scratch.data());
        continue;
      }
      const int64_t base = (l / inner) * n * inner + l % inner;
      for (size_t k = 0; k < K; ++k) {
        T* c = copies.data() + k * n;
        for (int64_t i = 0; i < n; ++i) c[i] = in[k][base + i * inner];
        at[k] = c;
      }
      T* o = copies.data() + K * n;
      body(at, o, scratch.data());
      for (int64_t i = 0; i < n; ++i) out[base + i * inner] = o[i];
    }
  });
}

// NaN never wins the maximum's comparison; it still reaches every output through the sum,
// as IEEE propagation asks.
template <class T>
void softmax_typed(const Tensor& x, const Tensor& y, bool log) {
  using A = accum_t<T>;
  const int64_t n = x.shape()[1];
  for_each_line<T, A, 1>(x.shape(), 16, {x.data<T>()}, y.data<T>(), [&](auto in, T* yl, A* e) {
    const T* xl = in[0];
    const A m = rows::max(xl, n), sum = rows::exp_sum(xl, n, m, e);
    if (log) {
      const A log_sum = std::log(sum);
      rows::shifted(xl, n, m, e);
      rows::store_map(n, yl, [&](auto d) { return d - decltype(d)(log_sum); }, e);
    } else {
      const A inv = A(1) / sum;
      rows::store_map(n, yl, [&](auto v) { return v * decltype(v)(inv); }, e);
    }
  });
}

// gx = g - exp(y) * sum(g) (log) or y * (g - <g, y>), sums left to right.
template <class T>
void softmax_backward_typed(const Tensor& g, const Tensor& y, const Tensor& gx, bool log) {
  using A = accum_t<T>;
  const int64_t n = y.shape()[1];
  for_each_line<T, A, 2>(y.shape(), log ? 12 : 4, {g.data<T>(), y.data<T>()}, gx.data<T>(), [&](auto in, T* ol, A* e) {
    A *gv = e, *yv = e + n;
    vec::widen(in[0], gv, n);
    vec::widen(in[1], yv, n);
    if (log) {
      const A gsum = rows::sum(gv, n);
      for (int64_t i = 0; i < n; ++i) yv[i] = std::exp(yv[i]);
      rows::store_map(n, ol, [&](auto gi, auto ey) { return gi - ey * decltype(gi)(gsum); }, gv, yv);
    } else {
      A dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += gv[i] * yv[i];
      rows::store_map(n, ol, [&](auto yi, auto gi) { return yi * (gi - decltype(gi)(dot)); }, yv, gv);
    }
  });
}

void softmax_cpu(const Tensor& x, const Tensor& y, bool log) {
  visit_floating(x.dtype(), "softmax", [&]<typename T>() { softmax_typed<T>(x, y, log); });
}

void softmax_backward_cpu(const Tensor& g, const Tensor& y, const Tensor& gx, bool log) {
  visit_floating(y.dtype(), "softmax_backward", [&]<typename T>() { softmax_backward_typed<T>(g, y, gx, log); });
}

}  // namespace

HG_REGISTER_KERNEL(softmax_stub, cpu, softmax_cpu);
HG_REGISTER_KERNEL(softmax_backward_stub, cpu, softmax_backward_cpu);

}  // namespace hg::cpu
