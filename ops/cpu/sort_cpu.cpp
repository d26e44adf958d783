// CPU kernel of argsort: a stable sort of each line of an [outer, n, inner] view, with
// NaN ordered as PyTorch orders it (the largest value).
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/index_kernels.h"

namespace hg::cpu {
namespace {

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<compute_t<T>>) return std::isnan(load(v));
  else return false;
}

template <class T>
void argsort_typed(const Tensor& x, const Tensor& index, bool descending) {
  const int64_t n = x.shape()[1], inner = x.shape()[2];
  const T* px = x.data<T>();
  int64_t* pi = index.data<int64_t>();
  parallel_for(x.shape()[0] * inner, n * 16, [&](int64_t l0, int64_t l1) {
    std::vector<compute_t<T>> key(static_cast<size_t>(n));
    std::vector<bool> nan(static_cast<size_t>(n));
    std::vector<int64_t> order(static_cast<size_t>(n));
    for (int64_t l = l0; l < l1; ++l) {
      const int64_t base = (l / inner) * n * inner + l % inner;
      for (int64_t j = 0; j < n; ++j) {
        key[j] = load(px[base + j * inner]);
        nan[j] = is_nan(px[base + j * inner]);
      }
      std::iota(order.begin(), order.end(), int64_t{0});
      // NaN counts as larger than everything: last ascending, first descending.
      auto less = [&](int64_t a, int64_t b) { return !nan[a] && (nan[b] || key[a] < key[b]); };
      auto greater = [&](int64_t a, int64_t b) { return !nan[b] && (nan[a] || key[a] > key[b]); };
      if (descending) std::stable_sort(order.begin(), order.end(), greater);
      else std::stable_sort(order.begin(), order.end(), less);
      for (int64_t j = 0; j < n; ++j) pi[base + j * inner] = order[j];
    }
  });
}

void argsort_cpu(const Tensor& x, const Tensor& index, bool descending) {
  visit_dtype(x.dtype(), [&]<typename T>() { argsort_typed<T>(x, index, descending); });
}

}  // namespace

HG_REGISTER_KERNEL(argsort_stub, cpu, argsort_cpu);

}  // namespace hg::cpu
