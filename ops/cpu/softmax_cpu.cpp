// CPU kernels of softmax and log_softmax: one line along the axis at a time (stride 1
// for the last axis, `inner` otherwise), values in f32 (f64 for f64), rounded once.
#include <cmath>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/softmax_kernels.h"

namespace hg::cpu {
namespace {

using Unit = std::integral_constant<int64_t, 1>;

// Calls line(base, stride, scratch) for every line of a contiguous [outer, n, inner]
// tensor; the last-axis case gets a compile-time stride of 1 so its loops vectorise.
// Lines of one outer index that sit side by side share cache lines, so walking them in
// order keeps a strided line's n cache lines hot for its neighbours.
template <class A, class Line>
void for_each_line(const Shape& s3, int64_t cost_per_element, Line&& line) {
  const int64_t n = s3[1], inner = s3[2], lines = s3[0] * inner;
  parallel_for(lines, n * cost_per_element, [&](int64_t l0, int64_t l1) {
    std::vector<A> scratch(static_cast<size_t>(n));
    for (int64_t l = l0; l < l1; ++l) {
      if (inner == 1) line(l * n, Unit{}, scratch.data());
      else line((l / inner) * n * inner + l % inner, inner, scratch.data());
    }
  });
}

template <class T>
void softmax_typed(const Tensor& x, const Tensor& y, bool log) {
  using A = accum_t<T>;
  const T* px = x.data<T>();
  T* py = y.data<T>();
  const int64_t n = x.shape()[1];
  for_each_line<A>(x.shape(), 16, [&](int64_t base, auto stride, A* e) {
    const T* xl = px + base;
    T* yl = py + base;
    // NaN never wins the comparison, so it is not the maximum; it still reaches every
    // output through the sum below, as IEEE propagation asks.
    A m = -std::numeric_limits<A>::infinity();
    for (int64_t i = 0; i < n; ++i) {
      const A v = load(xl[i * stride]);
      m = v > m ? v : m;
    }
    A sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      e[i] = std::exp(A(load(xl[i * stride])) - m);
      sum += e[i];
    }
    if (log) {
      const A log_sum = std::log(sum);
      for (int64_t i = 0; i < n; ++i) yl[i * stride] = store<T>((A(load(xl[i * stride])) - m) - log_sum);
    } else {
      const A inv = A(1) / sum;
      for (int64_t i = 0; i < n; ++i) yl[i * stride] = store<T>(e[i] * inv);
    }
  });
}

template <class T>
void softmax_backward_typed(const Tensor& g, const Tensor& y, const Tensor& gx, bool log) {
  using A = accum_t<T>;
  const T* pg = g.data<T>();
  const T* py = y.data<T>();
  T* pgx = gx.data<T>();
  const int64_t n = y.shape()[1];
  for_each_line<A>(y.shape(), log ? 12 : 4, [&](int64_t base, auto stride, A*) {
    const T* gl = pg + base;
    const T* yl = py + base;
    T* ol = pgx + base;
    if (log) {
      A gsum = 0;
      for (int64_t i = 0; i < n; ++i) gsum += load(gl[i * stride]);
      for (int64_t i = 0; i < n; ++i) {
        const A gi = load(gl[i * stride]);
        ol[i * stride] = store<T>(gi - std::exp(A(load(yl[i * stride]))) * gsum);
      }
    } else {
      A dot = 0;
      for (int64_t i = 0; i < n; ++i) dot += A(load(gl[i * stride])) * A(load(yl[i * stride]));
      for (int64_t i = 0; i < n; ++i) {
        const A yi = load(yl[i * stride]);
        ol[i * stride] = store<T>(yi * (A(load(gl[i * stride])) - dot));
      }
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
