// softmax and log_softmax on the cuda device: a group of threads per line of the [outer, n,
// inner] view (stride 1 when the axis is last, `inner` otherwise; cuda/row_groups.h), the
// maximum and the sums in f32 (f64 for f64), each output rounded once as on the CPU.
#include <limits>

#include "cuda/device_types.h"
#include "cuda/launch.h"
#include "cuda/row_groups.h"
#include "ops/kernel_math.h"
#include "ops/softmax_kernels.h"

namespace hg::cuda {
namespace {

// Where line l of a contiguous [outer, n, inner] tensor starts, and its element stride.
struct Lines {
  RowGroups groups;  // groups.rows lines
  int64_t n, inner;
  HG_DEVICE int64_t base(int64_t l) const { return (l / inner) * n * inner + l % inner; }
};

template <class A>
struct Add {
  HG_DEVICE A operator()(A a, A b) const { return a + b; }
};

// NaN never wins (as in the CPU's `v > m ? v : m`), so the maximum is the same in any order.
template <class A>
struct Max {
  HG_DEVICE A operator()(A a, A b) const { return b > a ? b : a; }
};

template <class T>
__global__ void softmax_kernel(const T* x, T* y, Lines lines, bool log) {
  using A = accum_t<T>;
  const int64_t n = lines.n, stride = lines.inner;
  const unsigned group = lines.groups.group;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  for_each_row(lines.groups, [&](int64_t l, unsigned lane, bool active) {
    const int64_t len = active ? n : 0;
    const T* xl = x + (active ? lines.base(l) : 0);
    T* yl = y + (active ? lines.base(l) : 0);
    A m = kNegInf;
    for (int64_t i = lane; i < len; i += group) m = Max<A>{}(m, A(dev_load(xl[i * stride])));
    m = group_reduce(m, Max<A>{}, kNegInf, group);
    A sum = 0;
    for (int64_t i = lane; i < len; i += group) sum += math_exp(A(dev_load(xl[i * stride])) - m);
    sum = group_reduce(sum, Add<A>{}, A(0), group);
    if (log) {
      const A log_sum = math_log(sum);
      for (int64_t i = lane; i < len; i += group) yl[i * stride] = dev_store<T>((A(dev_load(xl[i * stride])) - m) - log_sum);
    } else {
      const A inv = A(1) / sum;
      for (int64_t i = lane; i < len; i += group)
        yl[i * stride] = dev_store<T>(A(math_exp(A(dev_load(xl[i * stride])) - m)) * inv);
    }
  });
}

template <class T>
__global__ void softmax_backward_kernel(const T* g, const T* y, T* gx, Lines lines, bool log) {
  using A = accum_t<T>;
  const int64_t n = lines.n, stride = lines.inner;
  const unsigned group = lines.groups.group;
  for_each_row(lines.groups, [&](int64_t l, unsigned lane, bool active) {
    const int64_t len = active ? n : 0, b = active ? lines.base(l) : 0;
    const T *gl = g + b, *yl = y + b;
    T* ol = gx + b;
    A s = 0;  // sum(g) for log_softmax, sum(g * y) for softmax
    for (int64_t i = lane; i < len; i += group)
      s += log ? A(dev_load(gl[i * stride])) : A(dev_load(gl[i * stride])) * A(dev_load(yl[i * stride]));
    s = group_reduce(s, Add<A>{}, A(0), group);
    for (int64_t i = lane; i < len; i += group) {
      const A gi = dev_load(gl[i * stride]), yi = dev_load(yl[i * stride]);
      ol[i * stride] = dev_store<T>(log ? gi - A(math_exp(yi)) * s : yi * (gi - s));
    }
  });
}

Lines lines_of(const Tensor& t) {
  HG_CHECK(t.dim() == 3 && t.is_contiguous(), "softmax on ", t.device().str(),
           ": the kernel takes a contiguous [outer, n, inner] tensor, got shape ", shape_str(t.shape()));
  return {row_groups(t.size(0) * t.size(2), t.size(1)), t.size(1), t.size(2)};
}

void softmax_cuda(const Tensor& x, const Tensor& y, bool log) {
  const Lines lines = lines_of(x);
  HG_CHECK(y.shape() == x.shape() && y.is_contiguous() && y.dtype() == x.dtype(),
           "softmax: the output must be a contiguous tensor of the input's shape and dtype");
  if (lines.groups.rows == 0 || lines.n == 0) return;
  visit_floating(x.dtype(), "softmax", [&]<typename T>() {
    launch(softmax_kernel<T>, row_config(lines.groups, x.device().index, "softmax"), x.data<T>(), y.data<T>(), lines, log);
  });
}

void softmax_backward_cuda(const Tensor& g, const Tensor& y, const Tensor& gx, bool log) {
  const Lines lines = lines_of(y);
  HG_CHECK(g.shape() == y.shape() && gx.shape() == y.shape() && g.is_contiguous() && gx.is_contiguous() &&
               g.dtype() == y.dtype() && gx.dtype() == y.dtype(),
           "softmax_backward: g, y and gx must be contiguous tensors of one shape and dtype");
  if (lines.groups.rows == 0 || lines.n == 0) return;
  visit_floating(y.dtype(), "softmax_backward", [&]<typename T>() {
    launch(softmax_backward_kernel<T>, row_config(lines.groups, y.device().index, "softmax_backward"), g.data<T>(), y.data<T>(),
           gx.data<T>(), lines, log);
  });
}

}  // namespace

HG_REGISTER_KERNEL(softmax_stub, cuda, softmax_cuda);
HG_REGISTER_KERNEL(softmax_backward_stub, cuda, softmax_backward_cuda);

}  // namespace hg::cuda
