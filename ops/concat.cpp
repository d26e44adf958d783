// cat and stack (the `promote` class: the widest floating input decides the dtype; the
// casts are graph nodes) and split/chunk, which are narrow() views and so need no
// backward of their own.
#include "ops/concat.h"

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/copy.h"

namespace hg {

namespace {

// Checks what cat and stack share: a non-empty list of defined tensors on one device.
void check_list(const char* op, const std::vector<Tensor>& ts) {
  HG_CHECK(!ts.empty(), op, ": expected a non-empty list of tensors");
  for (size_t i = 0; i < ts.size(); ++i) {
    HG_CHECK(ts[i].defined(), op, ": tensor ", i, " is undefined");
    HG_CHECK(ts[i].device() == ts[0].device(), op, ": tensor ", i, " is on ", ts[i].device(), " but tensor 0 is on ",
             ts[0].device(), "; move them to one device first");
  }
}

}  // namespace

Tensor cat(const std::vector<Tensor>& tensors, int64_t axis) {
  check_list("cat", tensors);
  const TensorList in = autocast(PrecisionClass::promote, tensors);
  const Shape& s0 = in[0].shape();
  const int64_t rank = in[0].dim();
  HG_CHECK(rank > 0, "cat: cannot concatenate 0-d tensors (tensor 0 has shape ", shape_str(s0), "); use stack");
  const int64_t a = normalize_axis(axis, rank, "cat");
  DType dt = in[0].dtype();
  Shape out_shape = s0;
  out_shape[a] = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    const Shape& si = in[i].shape();
    HG_CHECK(in[i].dim() == rank, "cat: tensor ", i, " has shape ", shape_str(si), " (rank ", in[i].dim(),
             ") but tensor 0 has shape ", shape_str(s0), " (rank ", rank, "); all tensors need the same rank");
    for (int64_t d = 0; d < rank; ++d)
      HG_CHECK(d == a || si[d] == s0[d], "cat: tensor ", i, " has shape ", shape_str(si), " but tensor 0 has shape ",
               shape_str(s0), "; they must match on every axis except the cat axis ", a);
    out_shape[a] += si[a];
    dt = promote_types(dt, in[i].dtype());
  }
  TensorList parts;
  parts.reserve(in.size());
  for (const Tensor& t : in) parts.push_back(t.to(dt));

  Tensor y = empty(out_shape, {dt, in[0].device()});
  std::vector<int64_t> starts;
  int64_t start = 0;
  for (const Tensor& t : parts) {
    starts.push_back(start);
    copy_(y.narrow(a, start, t.size(a)), t);
    start += t.size(a);
  }
  autograd::record("cat", parts, y, [a, starts, sizes = out_shape](const Tensor& g) {
    TensorList grads;
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t end = i + 1 < starts.size() ? starts[i + 1] : sizes[a];
      grads.push_back(autograd::needs_input_grad(i) ? g.narrow(a, starts[i], end - starts[i]) : Tensor());
    }
    return grads;
  });
  return y;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t axis) {
  check_list("stack", tensors);
  const Shape& s0 = tensors[0].shape();
  for (size_t i = 1; i < tensors.size(); ++i)
    HG_CHECK(tensors[i].shape() == s0, "stack: tensor ", i, " has shape ", shape_str(tensors[i].shape()),
             " but tensor 0 has shape ", shape_str(s0), "; stacked tensors must have equal shapes");
  const int64_t a = normalize_axis(axis, tensors[0].dim() + 1, "stack");
  TensorList expanded;
  expanded.reserve(tensors.size());
  for (const Tensor& t : tensors) expanded.push_back(t.unsqueeze(a));
  return cat(expanded, a);
}

std::vector<Tensor> split(const Tensor& x, int64_t size, int64_t axis) {
  HG_CHECK(x.defined(), "split: undefined tensor");
  HG_CHECK(size > 0, "split: size must be positive, got ", size);
  HG_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  const int64_t a = normalize_axis(axis, x.dim(), "split");
  const int64_t n = x.size(a);
  if (n == 0) return {x.narrow(a, 0, 0)};
  std::vector<Tensor> pieces;
  for (int64_t start = 0; start < n; start += size) pieces.push_back(x.narrow(a, start, std::min(size, n - start)));
  return pieces;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t n, int64_t axis) {
  HG_CHECK(x.defined(), "chunk: undefined tensor");
  HG_CHECK(n > 0, "chunk: the number of chunks must be positive, got ", n);
  HG_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-d tensor");
  const int64_t a = normalize_axis(axis, x.dim(), "chunk");
  // Exactly n pieces whose sizes differ by at most one, the larger first.
  const int64_t len = x.size(a), base = len / n, extra = len % n;
  std::vector<Tensor> pieces;
  int64_t start = 0;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t size = base + (i < extra ? 1 : 0);
    pieces.push_back(x.narrow(a, start, size));
    start += size;
  }
  return pieces;
}

}  // namespace hg
