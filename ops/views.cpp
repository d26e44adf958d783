// Views (the `follow` class): new shapes and strides over the same storage, each with
// its backward; plus contiguous/clone and the dtype/device conversions (Cast nodes).
#include <algorithm>
#include <numeric>

#include "framework/autograd.h"
#include "ops/copy.h"
#include "ops/reduce.h"

namespace hg {

namespace {

Tensor alias(const Tensor& t, Shape shape, Strides strides, int64_t offset) {
  return make_tensor(t.storage(), std::move(shape), std::move(strides), offset, t.dtype());
}

// Resolves one -1 and checks the element count (without overflow: a zero size makes any
// other sizes fine, else a product past 2^63 is an error).
Shape infer_shape(const Shape& want, int64_t numel, const Shape& from, const char* op) {
  Shape s = want;
  int64_t known = 1, infer = -1;
  bool zero = false, overflow = false;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      HG_CHECK(infer < 0, op, ": only one size may be -1, got ", shape_str(want));
      infer = static_cast<int64_t>(i);
    } else {
      HG_CHECK(s[i] >= 0, op, ": invalid size ", s[i], " in ", shape_str(want));
      zero |= s[i] == 0;
      overflow |= __builtin_mul_overflow(known, s[i], &known);
    }
  }
  if (zero) known = 0;
  HG_CHECK(zero || !overflow, op, ": shape ", shape_str(want), " has more than 2^63 elements");
  if (infer >= 0) {
    HG_CHECK(known != 0 && numel % known == 0, op, ": cannot infer the -1 in ", shape_str(want), " for ",
             shape_str(from), " (", numel, " elements)");
    s[static_cast<size_t>(infer)] = numel / known;
  }
  const int64_t total = infer >= 0 ? known * s[static_cast<size_t>(infer)] : known;
  HG_CHECK(total == numel, op, ": shape ", shape_str(want), " has ", total, " elements but the tensor of shape ",
           shape_str(from), " has ", numel);
  return s;
}

// normalize_axis accepts 0 and -1 for a 0-d tensor (unsqueeze needs that), but ops that
// index an existing axis have none to index there.
int64_t existing_axis(const Tensor& t, int64_t axis, const char* op) {
  HG_CHECK(t.dim() > 0, op, ": a 0-d tensor has no axis ", axis);
  return normalize_axis(axis, t.dim(), op);
}

// Strides for viewing `t` as `shape` without copying, if the memory allows (empty if not).
Strides view_strides(const Tensor& t, const Shape& shape) {
  // An empty tensor's strides address nothing (and may be anything: they are not
  // bounds-checked, and the walk below would multiply them).
  if (t.is_contiguous() || t.numel() == 0) return contiguous_strides(shape);
  // Walk groups of old dims that are contiguous among themselves and map new dims onto them.
  const Shape& os = t.shape();
  const Strides& ost = t.strides();
  Strides ns(shape.size());
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base = ost.empty() ? 1 : ost.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(os.size()) - 1; d >= 0; --d) {
    tensor_numel *= os[d];
    if (d == 0 || (os[d - 1] != 1 && ost[d - 1] != tensor_numel * chunk_base)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        ns[view_d] = view_numel * chunk_base;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return {};
      if (d > 0) {
        chunk_base = ost[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return {};
  return ns;
}

}  // namespace

Tensor Tensor::view(const Shape& want) const {
  live("view");
  Shape s = infer_shape(want, numel(), shape(), "view");
  Strides st = view_strides(*this, s);
  HG_CHECK(!st.empty() || s.empty() || numel() == 0, "view: a tensor of shape ", shape_str(shape()),
           " and strides ", shape_str(strides()), " cannot be viewed as ", shape_str(s),
           " without a copy (its memory is not laid out compatibly); use reshape() or contiguous() first");
  if (st.empty()) st = contiguous_strides(s);
  Tensor y = alias(*this, s, st, offset());
  autograd::record("view", {*this}, y, [src = shape()](const Tensor& g) { return TensorList{g.reshape(src)}; });
  return y;
}

Tensor Tensor::reshape(const Shape& want) const {
  live("reshape");
  Shape s = infer_shape(want, numel(), shape(), "reshape");
  if (!view_strides(*this, s).empty() || s.empty() || numel() == 0) return view(s);
  return contiguous().view(s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  live("flatten");
  if (dim() == 0) return reshape({1});
  int64_t a = normalize_axis(start, dim(), "flatten"), b = normalize_axis(end, dim(), "flatten");
  HG_CHECK(a <= b, "flatten: start axis ", start, " comes after end axis ", end);
  Shape s(shape().begin(), shape().begin() + a);
  s.push_back(std::accumulate(shape().begin() + a, shape().begin() + b + 1, int64_t{1}, std::multiplies<>()));
  s.insert(s.end(), shape().begin() + b + 1, shape().end());
  return reshape(s);
}

Tensor Tensor::permute(const std::vector<int64_t>& order) const {
  live("permute");
  HG_CHECK(static_cast<int64_t>(order.size()) == dim(), "permute: order has ", order.size(),
           " axes but the tensor of shape ", shape_str(shape()), " has ", dim());
  std::vector<int64_t> ord(order.size()), inv(order.size());
  std::vector<bool> seen(order.size(), false);
  Shape s(order.size());
  Strides st(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    int64_t a = normalize_axis(order[i], dim(), "permute");
    HG_CHECK(!seen[a], "permute: axis ", a, " appears twice in the order");
    seen[a] = true;
    ord[i] = a;
    inv[a] = static_cast<int64_t>(i);
    s[i] = shape()[a];
    st[i] = strides()[a];
  }
  Tensor y = alias(*this, s, st, offset());
  autograd::record("permute", {*this}, y, [inv](const Tensor& g) { return TensorList{g.permute(inv)}; });
  return y;
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  live("transpose");
  std::vector<int64_t> order(static_cast<size_t>(dim()));
  std::iota(order.begin(), order.end(), 0);
  std::swap(order[existing_axis(*this, a, "transpose")], order[existing_axis(*this, b, "transpose")]);
  return permute(order);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t end, int64_t step) const {
  live("slice");
  int64_t a = existing_axis(*this, axis, "slice");
  HG_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = shape()[a];
  if (start < 0) start += n;
  if (end < 0) end += n;
  start = std::clamp<int64_t>(start, 0, n);
  end = std::clamp<int64_t>(end, start, n);
  Shape s = shape();
  Strides st = strides();
  // Written so that a huge step cannot overflow: a stride only matters for sizes > 1.
  s[a] = end == start ? 0 : (end - start - 1) / step + 1;
  // A result with elements lies inside the storage, so its offset and stride fit in int64.
  // An empty one keeps both: its strides were never bounds-checked (they can be anything,
  // as can a size-1 axis' stride), and start may be n, where n * stride need not fit.
  const bool empty = s[a] == 0 || numel() == 0;
  if (s[a] > 1 && !empty) st[a] *= step;
  Tensor y = alias(*this, s, st, empty ? offset() : offset() + start * strides()[a]);
  autograd::record("slice", {*this}, y, [src = shape(), a, start, end, step](const Tensor& g) {
    Tensor gx = zeros(src, {g.dtype(), g.device()});
    copy_(gx.slice(a, start, end, step), g);
    return TensorList{gx};
  });
  return y;
}

Tensor Tensor::narrow(int64_t axis, int64_t start, int64_t length) const {
  live("narrow");
  int64_t a = existing_axis(*this, axis, "narrow");
  HG_CHECK(start >= 0 && length >= 0 && start <= shape()[a] && length <= shape()[a] - start, "narrow: start ", start,
           " and length ", length, " are outside axis ", axis, " of size ", shape()[a], " (shape ", shape_str(shape()),
           ")");
  return slice(a, start, start + length);
}

Tensor Tensor::select(int64_t axis, int64_t index) const {
  live("select");
  int64_t a = existing_axis(*this, axis, "select");
  const int64_t n = shape()[a];
  HG_CHECK(index >= -n && index < n, "select: index ", index, " is out of range for axis ", axis, " of size ", n);
  if (index < 0) index += n;
  return slice(a, index, index + 1).squeeze(a);
}

Tensor Tensor::expand(const Shape& want) const {
  live("expand");
  HG_CHECK(static_cast<int64_t>(want.size()) >= dim(), "expand: cannot expand shape ", shape_str(shape()),
           " to fewer dimensions ", shape_str(want));
  if (want == shape()) return *this;
  const size_t lead = want.size() - shape().size();
  Shape s = want;
  Strides st(want.size(), 0);
  for (size_t i = 0; i < want.size(); ++i) {
    if (i < lead) {
      HG_CHECK(want[i] >= 0, "expand: invalid size in ", shape_str(want));
      continue;
    }
    int64_t have = shape()[i - lead];
    HG_CHECK(want[i] >= -1, "expand: invalid size ", want[i], " in ", shape_str(want), " (sizes are >= 0, or -1 to keep one)");
    if (want[i] == -1 || want[i] == have) {
      s[i] = have;
      st[i] = strides()[i - lead];
    } else {
      HG_CHECK(have == 1, "expand: shape ", shape_str(shape()), " cannot be expanded to ", shape_str(want),
               " (only size-1 dimensions can grow)");
    }
  }
  Tensor y = alias(*this, s, st, offset());
  autograd::record("expand", {*this}, y, [src = shape()](const Tensor& g) { return TensorList{sum_to(g, src)}; });
  return y;
}

Tensor Tensor::squeeze(int64_t axis) const {
  live("squeeze");
  int64_t a = existing_axis(*this, axis, "squeeze");
  HG_CHECK(shape()[a] == 1, "squeeze: axis ", axis, " of shape ", shape_str(shape()), " has size ", shape()[a],
           ", not 1");
  Shape s = shape();
  Strides st = strides();
  s.erase(s.begin() + a);
  st.erase(st.begin() + a);
  Tensor y = alias(*this, s, st, offset());
  autograd::record("squeeze", {*this}, y, [src = shape()](const Tensor& g) { return TensorList{g.reshape(src)}; });
  return y;
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  live("unsqueeze");
  int64_t a = normalize_axis(axis, dim() + 1, "unsqueeze");
  Shape s = shape();
  Strides st = strides();
  s.insert(s.begin() + a, 1);
  // The new axis' stride is never used to step; the usual value unless it overflows
  // (a size-1 axis may carry any stride).
  int64_t outer = 1;
  if (a < dim() && __builtin_mul_overflow(st[a], shape()[a], &outer)) outer = 1;
  st.insert(st.begin() + a, outer);
  Tensor y = alias(*this, s, st, offset());
  autograd::record("unsqueeze", {*this}, y, [src = shape()](const Tensor& g) { return TensorList{g.reshape(src)}; });
  return y;
}

Tensor Tensor::contiguous() const {
  live("contiguous");
  if (is_contiguous()) return *this;
  return clone();
}

Tensor Tensor::clone() const {
  live("clone");
  Tensor y = empty(shape(), {dtype(), device()});
  detail::copy_into_new(y, *this);
  autograd::record("clone", {*this}, y, [](const Tensor& g) { return TensorList{g}; });
  return y;
}

Tensor Tensor::to(DType dt) const {
  live("to");
  return to(device(), dt);
}
Tensor Tensor::to(Device d) const {
  live("to");
  return to(d, dtype());
}

Tensor Tensor::to(Device d, DType dt) const {
  live("to");
  if (d == device() && dt == dtype()) return *this;
  HG_CHECK(!requires_grad() || is_floating(dt), "to: cannot cast a tensor that requires grad to ", dtype_name(dt));
  Tensor y = empty(shape(), {dt, d});
  detail::copy_into_new(y, *this);
  // The Cast node: its backward brings the gradient back to the source dtype and device.
  autograd::record(
      "Cast", {*this}, y, [sd = dtype(), sdev = device()](const Tensor& g) { return TensorList{g.to(sdev, sd)}; },
      /*saves_tensors=*/false);
  return y;
}

}  // namespace hg
