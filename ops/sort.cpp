// sort, argsort, topk and randperm, written over two primitives: the argsort kernel and
// gather (whose backward routes each value's gradient back to where it came from).
#include "ops/sort.h"

#include "framework/precision.h"
#include "ops/index.h"
#include "ops/index_kernels.h"
#include "ops/random.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&, bool)> argsort_stub("argsort");

Tensor argsort(const Tensor& x, int64_t axis, bool descending) {
  HG_CHECK(x.defined(), "argsort: undefined tensor");
  require_kernel(argsort_stub, x.device(), "argsort");
  if (x.dim() == 0) {
    normalize_axis(axis, 1, "argsort");
    return zeros({}, {i64, x.device()});
  }
  const size_t a = static_cast<size_t>(normalize_axis(axis, x.dim(), "argsort"));
  const Shape& s = x.shape();
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < a; ++d) outer *= s[d];
  for (size_t d = a + 1; d < s.size(); ++d) inner *= s[d];
  const Shape s3{outer, s[a], inner};
  Tensor idx = empty(s3, {i64, x.device()});
  if (idx.numel()) argsort_stub(x.device(), x.detach().contiguous().view(s3), idx, descending);
  return idx.view(s);
}

SortResult sort(const Tensor& x0, int64_t axis, bool descending) {
  HG_CHECK(x0.defined(), "sort: undefined tensor");
  const Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  Tensor idx = argsort(x, axis, descending);
  return {gather(x, axis, idx), idx};
}

SortResult topk(const Tensor& x0, int64_t k, int64_t axis, bool largest) {
  HG_CHECK(x0.defined(), "topk: undefined tensor");
  const Tensor x = autocast(PrecisionClass::follow, {x0})[0];
  const int64_t a = normalize_axis(axis, std::max<int64_t>(x.dim(), 1), "topk");
  const int64_t n = x.dim() == 0 ? 1 : x.size(a);
  HG_CHECK(k >= 0 && k <= n, "topk: k = ", k, " is out of range for an axis of size ", n, " (valid: 0 to ", n, ")");
  Tensor idx = argsort(x, a, largest);
  if (x.dim() > 0) idx = idx.narrow(a, 0, k).contiguous();
  return {gather(x, a, idx), idx};
}

Tensor randperm(int64_t n, TensorOptions o, Generator* gen) {
  HG_CHECK(n >= 0, "randperm: n must be non-negative, got ", n);
  Tensor p = argsort(rand({n}, {f64, o.device}, gen));
  return o.dtype == i64 ? p : p.to(o.dtype);
}

}  // namespace hg
