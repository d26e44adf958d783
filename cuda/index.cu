// gather and its backward scatter_add on the cuda device, over [outer, n, inner] views.
// gather: a thread per output; an index out of range is recorded on the device and raised
// as the CPU's hg::Error after the launch (the op's one host sync). scatter_add is
// deterministic, without atomics, and adds in the CPU's order (m ascending) so the sums are
// the CPU's bits: an index shared by all lines (index_select, embedding) is argsorted once
// (stably) and a thread per (line, run of equal indices) sums its run; any other index gets a
// thread per line walking m in order (no two lines write one element).
#include <cstdint>

#include "cuda/device_types.h"
#include "cuda/index_loop.h"
#include "cuda/primitives/atomics.h"
#include "ops/index_kernels.h"

namespace hg::cuda {
namespace {

struct IndexView {
  const int64_t* p;
  int64_t s0, s1, s2;
  HG_DEVICE int64_t at(int64_t o, int64_t m, int64_t i) const { return p[o * s0 + m * s1 + i * s2]; }
};

IndexView index_view(const Tensor& index) {
  return {index.data<int64_t>(), index.strides()[0], index.strides()[1], index.strides()[2]};
}

// bad[0] = 1 and bad[1] = the index, written by the one thread that first finds one.
template <class T>
struct Gather {
  const T* x;
  T* y;
  IndexView iv;
  int64_t n, m, inner;
  unsigned long long* bad;
  HG_DEVICE void operator()(int64_t r) const {
    const int64_t i = r % inner, om = r / inner, o = om / m;
    const int64_t j = iv.at(o, om % m, i);
    if (j < 0 || j >= n) {
      if (atomic_cas(bad, 0ull, 1ull) == 0ull) bad[1] = static_cast<unsigned long long>(j);
      return;
    }
    y[r] = x[(o * n + j) * inner + i];
  }
};

void gather_cuda(const Tensor& x, const Tensor& index, const Tensor& y, const char* op) {
  const Device dev = x.device();
  const int64_t n = x.size(1);
  const Tensor bad = zeros({2}, {i64, dev});
  auto* pb = static_cast<unsigned long long*>(bad.data_ptr());
  visit_dtype(x.dtype(), [&]<typename T>() {
    for_each_index(dev.index, "gather", y.numel(),
                   Gather<T>{x.data<T>(), y.data<T>(), index_view(index), n, y.size(1), y.size(2), pb});
  });
  const Tensor host = bad.to(Device::cpu());
  if (host.data<int64_t>()[0]) index_out_of_range(op, host.data<int64_t>()[1], n);
}

// A thread per (o, i) line: acc[o, index[o, m, i], i] += g[o, m, i] for m in order.
template <class T>
struct ScatterLines {
  const T* g;
  accum_t<T>* acc;
  IndexView iv;
  int64_t n, m, inner;
  HG_DEVICE void operator()(int64_t l) const {
    const int64_t o = l / inner, i = l % inner;
    for (int64_t k = 0; k < m; ++k) {
      accum_t<T>& a = acc[(o * n + iv.at(o, k, i)) * inner + i];
      a += accum_t<T>(dev_load(g[(o * m + k) * inner + i]));
    }
  }
};

// The shared index, contiguous: keys[k] = index[0, k, 0].
struct CopyKeys {
  IndexView iv;
  int64_t* keys;
  HG_DEVICE void operator()(int64_t k) const { keys[k] = iv.at(0, k, 0); }
};

// A thread per (o, k, i) where k starts a run of equal keys in the stable order `perm`:
// acc[o, key, i] += the run's g[o, perm[k..], i], in m order.
template <class T>
struct ScatterRuns {
  const T* g;
  accum_t<T>* acc;
  const int64_t *keys, *perm;
  int64_t n, m, inner;
  HG_DEVICE void operator()(int64_t r) const {
    const int64_t i = r % inner, ok = r / inner, k = ok % m, o = ok / m;
    const int64_t j = keys[perm[k]];
    if (k > 0 && keys[perm[k - 1]] == j) return;
    accum_t<T> s = acc[(o * n + j) * inner + i];
    for (int64_t q = k; q < m && keys[perm[q]] == j; ++q) s += accum_t<T>(dev_load(g[(o * m + perm[q]) * inner + i]));
    acc[(o * n + j) * inner + i] = s;
  }
};

void scatter_add_cuda(const Tensor& g, const Tensor& index, const Tensor& acc) {
  const Device dev = g.device();
  const int64_t n = acc.size(1), m = g.size(1), inner = g.size(2);
  const IndexView iv = index_view(index);
  visit_floating(g.dtype(), "scatter_add", [&]<typename T>() {
    using A = accum_t<T>;
    if ((iv.s0 == 0 || g.size(0) == 1) && (iv.s2 == 0 || inner == 1)) {  // one index for every line
      const Tensor keys = empty({1, m, 1}, {i64, dev}), perm = empty({1, m, 1}, {i64, dev});
      for_each_index(dev.index, "scatter_add_keys", m, CopyKeys{iv, keys.data<int64_t>()});
      argsort_stub(dev, keys, perm, false);
      for_each_index(dev.index, "scatter_add_runs", g.numel(),
                     ScatterRuns<T>{g.data<T>(), acc.data<A>(), keys.data<int64_t>(), perm.data<int64_t>(), n, m,
                                    inner});
    } else {
      for_each_index(dev.index, "scatter_add_lines", g.size(0) * inner,
                     ScatterLines<T>{g.data<T>(), acc.data<A>(), iv, n, m, inner});
    }
  });
}

}  // namespace

HG_REGISTER_KERNEL(gather_stub, cuda, gather_cuda);
HG_REGISTER_KERNEL(scatter_add_stub, cuda, scatter_add_cuda);

}  // namespace hg::cuda
