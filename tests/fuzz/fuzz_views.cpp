// Views: random chains of permute/transpose/narrow/slice/select/expand/reshape/view/
// squeeze/unsqueeze/flatten/contiguous over random shapes, dtypes and devices, checked
// against an independent strided model of the same chain; invalid arguments (axes out
// of range, bad sizes, overflowing ranges, views of 0-d tensors) must raise hg::Error.
#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>

#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {
namespace {

constexpr int64_t kHuge = std::numeric_limits<int64_t>::max();

// The reference: a strided window on a flat vector, as the library's views should be.
struct Ref {
  std::shared_ptr<std::vector<double>> data;
  Shape shape;
  std::vector<int64_t> strides;
  int64_t offset = 0;

  int64_t dim() const { return static_cast<int64_t>(shape.size()); }
  std::vector<double> values() const {
    std::vector<double> out;
    const int64_t n = numel_of(shape);
    std::vector<int64_t> idx(shape.size(), 0);
    for (int64_t k = 0; k < n; ++k) {
      int64_t at = offset;
      for (size_t d = 0; d < idx.size(); ++d) at += idx[d] * strides[d];
      out.push_back((*data)[static_cast<size_t>(at)]);
      for (int64_t d = dim() - 1; d >= 0; --d) {
        if (++idx[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
        idx[static_cast<size_t>(d)] = 0;
      }
    }
    return out;
  }
  static Ref contiguous(std::vector<double> v, Shape s) {
    Ref r{std::make_shared<std::vector<double>>(std::move(v)), s, std::vector<int64_t>(s.size()), 0};
    int64_t acc = 1;
    for (int64_t d = r.dim() - 1; d >= 0; --d) {
      r.strides[static_cast<size_t>(d)] = acc;
      acc *= std::max<int64_t>(s[static_cast<size_t>(d)], 1);
    }
    return r;
  }
};

bool axis_ok(int64_t a, int64_t ndim) { return a >= -ndim && a < ndim; }
size_t norm(int64_t a, int64_t ndim) { return static_cast<size_t>(a < 0 ? a + ndim : a); }

// An axis: usually valid, sometimes just out of range, rarely absurd.
int64_t random_axis(Rng& rng, int64_t ndim) {
  if (rng.chance(0.1)) return rng.chance(0.5) ? ndim + rng.uniform(0, 2) : -ndim - 1 - rng.uniform(0, 2);
  if (rng.chance(0.02)) return rng.chance(0.5) ? kHuge : -kHuge;
  return rng.uniform(-ndim, std::max<int64_t>(ndim - 1, -ndim));
}

// A shape with the same number of elements (or, if `wrong`, usually not), maybe one -1.
Shape random_reshape(Rng& rng, int64_t numel, bool& valid) {
  Shape s;
  int64_t left = numel;
  const int64_t rank = rng.uniform(0, 4);
  for (int64_t d = 0; d + 1 < rank; ++d) {
    std::vector<int64_t> divisors;
    for (int64_t k = 1; k <= std::min<int64_t>(left, 6); ++k)
      if (left % k == 0) divisors.push_back(k);
    const int64_t k = left == 0 ? rng.uniform(0, 3) : rng.pick(divisors);
    s.push_back(k);
    if (k != 0) left /= k;
  }
  if (rank > 0) s.push_back(left);
  valid = numel_of(s) == numel;
  if (rank > 0 && rng.chance(0.3)) {
    const size_t at = static_cast<size_t>(rng.uniform(0, rank - 1));
    int64_t known = 1;
    for (size_t d = 0; d < s.size(); ++d)
      if (d != at) known *= s[d];
    s[at] = -1;
    valid = valid && known != 0;
  }
  if (rng.chance(0.15)) {  // a wrong count, a second -1, a negative size or an overflow
    const int64_t kind = rng.uniform(0, 3);
    if (kind == 0) s = {numel + 1};
    if (kind == 1) s.push_back(-1), s.push_back(-1);
    if (kind == 2) s.push_back(-2);
    if (kind == 3) s = {kHuge, kHuge, 2};
    valid = false;
  }
  return s;
}

// One view op on both the tensor and the reference; false once an invalid op was refused.
bool step(Rng& rng, Tensor& t, Ref& r) {
  const int64_t nd = r.dim();
  const int64_t op = rng.uniform(0, 11);
  auto apply = [&](bool valid, const std::string& what, auto&& f, auto&& model) {
    if (!valid) {
      must_fail(what, [&] { f(); });
    }
    t = must_succeed(what, f);
    model();
    expect(t.shape() == r.shape, what, ": shape ", shape_text(t.shape()), ", the reference has ",
           shape_text(r.shape));
    return true;
  };
  if (op == 0) {  // permute
    std::vector<int64_t> order(static_cast<size_t>(nd));
    std::iota(order.begin(), order.end(), 0);
    for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(i) - 1))]);
    bool valid = true;
    if (rng.chance(0.1) && nd > 1) order[0] = order[1], valid = false;
    if (rng.chance(0.05)) order.push_back(nd), valid = false;
    if (valid)
      for (auto& a : order)
        if (rng.chance(0.3)) a -= nd;  // negative axes name the same dims
    return apply(valid, "permute" + shape_text(order) + " of " + shape_text(r.shape), [&] { return t.permute(order); }, [&] {
      Ref n = r;
      for (size_t i = 0; i < order.size(); ++i) {
        n.shape[i] = r.shape[norm(order[i], nd)];
        n.strides[i] = r.strides[norm(order[i], nd)];
      }
      r = n;
    });
  }
  if (op == 1 && nd > 0) {  // transpose
    const int64_t a = random_axis(rng, nd), b = random_axis(rng, nd);
    return apply(axis_ok(a, nd) && axis_ok(b, nd), detail::concat("transpose(", a, ", ", b, ") of ", shape_text(r.shape)),
                 [&] { return t.transpose(a, b); }, [&] {
                   std::swap(r.shape[norm(a, nd)], r.shape[norm(b, nd)]);
                   std::swap(r.strides[norm(a, nd)], r.strides[norm(b, nd)]);
                 });
  }
  if (op == 2 || op == 3) {  // narrow, slice (also on 0-d tensors, where they are invalid)
    const int64_t a = nd == 0 ? rng.uniform(-1, 0) : random_axis(rng, nd);
    const bool ok_axis = nd > 0 && axis_ok(a, nd);
    const int64_t n = ok_axis ? r.shape[norm(a, nd)] : 1;
    if (op == 2) {
      int64_t start = rng.uniform(0, n), length = rng.uniform(0, n - start);
      if (rng.chance(0.15)) start = rng.pick(std::vector<int64_t>{-1, n + 1, kHuge, -kHuge});
      if (rng.chance(0.15)) length = rng.pick(std::vector<int64_t>{-1, n + 1, kHuge});
      const bool valid = ok_axis && start >= 0 && length >= 0 && start <= n && length <= n - start;
      return apply(valid, detail::concat("narrow(", a, ", ", start, ", ", length, ") of ", shape_text(r.shape)),
                   [&] { return t.narrow(a, start, length); }, [&] {
                     const size_t d = norm(a, nd);
                     r.offset += start * r.strides[d];
                     r.shape[d] = length;
                   });
    }
    const int64_t start = rng.chance(0.05) ? -kHuge : rng.uniform(-2 * n - 1, 2 * n + 1);
    const int64_t end = rng.chance(0.05) ? kHuge : rng.uniform(-2 * n - 1, 2 * n + 1);
    const int64_t stride = rng.chance(0.1) ? rng.pick(std::vector<int64_t>{0, -1, kHuge}) : rng.uniform(1, 3);
    return apply(ok_axis && stride > 0, detail::concat("slice(", a, ", ", start, ", ", end, ", ", stride, ") of ", shape_text(r.shape)),
                 [&] { return t.slice(a, start, end, stride); }, [&] {
                   const size_t d = norm(a, nd);
                   // Python's rules: negative bounds count from the end, then clamp.
                   const int64_t s0 = std::clamp<int64_t>(start < 0 ? std::max(start, -n) + n : start, 0, n);
                   const int64_t e0 = std::clamp<int64_t>(end < 0 ? std::max(end, -n) + n : end, s0, n);
                   r.offset += s0 * r.strides[d];
                   r.shape[d] = e0 == s0 ? 0 : (e0 - s0 - 1) / stride + 1;
                   if (r.shape[d] > 1) r.strides[d] *= stride;  // else the stride is never used
                 });
  }
  if (op == 4) {  // select
    const int64_t a = nd == 0 ? rng.uniform(-1, 0) : random_axis(rng, nd);
    const bool ok_axis = nd > 0 && axis_ok(a, nd);
    const int64_t n = ok_axis ? r.shape[norm(a, nd)] : 1;
    const int64_t index = rng.chance(0.1) ? rng.pick(std::vector<int64_t>{n, -n - 1, kHuge, -kHuge}) : rng.uniform(-n, n - 1);
    return apply(ok_axis && index >= -n && index < n && n > 0,
                 detail::concat("select(", a, ", ", index, ") of ", shape_text(r.shape)), [&] { return t.select(a, index); },
                 [&] {
                   const size_t d = norm(a, nd);
                   r.offset += (index < 0 ? index + n : index) * r.strides[d];
                   r.shape.erase(r.shape.begin() + static_cast<int64_t>(d));
                   r.strides.erase(r.strides.begin() + static_cast<int64_t>(d));
                 });
  }
  if (op == 5) {  // expand
    const int64_t lead = rng.uniform(0, 2);
    Shape want;
    bool valid = true;
    for (int64_t i = 0; i < lead; ++i) want.push_back(rng.uniform(0, 3));
    for (int64_t d : r.shape) want.push_back(d == 1 ? rng.pick(std::vector<int64_t>{1, 0, 3, -1}) : rng.chance(0.2) ? -1 : d);
    if (rng.chance(0.15) && !want.empty()) {
      const size_t at = static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(want.size()) - 1));
      const bool is_lead = at < static_cast<size_t>(lead);
      const int64_t have = is_lead ? 0 : r.shape[at - static_cast<size_t>(lead)];
      want[at] = rng.pick(std::vector<int64_t>{-2, -5, 7});
      valid = want[at] == 7 && (is_lead || have == 1 || have == 7);
    }
    if (rng.chance(0.05)) want.insert(want.begin(), -1), valid = false;
    else if (rng.chance(0.05) && nd > 0 && lead == 0) want.pop_back(), valid = false;
    return apply(valid, "expand" + shape_text(r.shape) + " to " + shape_text(want), [&] { return t.expand(want); }, [&] {
      Ref n = r;
      n.shape.assign(want.size(), 0);
      n.strides.assign(want.size(), 0);
      for (size_t i = 0; i < want.size(); ++i) {
        if (i < static_cast<size_t>(lead)) {
          n.shape[i] = want[i];
          continue;
        }
        const size_t src = i - static_cast<size_t>(lead);
        const bool keep = want[i] == -1 || want[i] == r.shape[src];
        n.shape[i] = keep ? r.shape[src] : want[i];
        n.strides[i] = keep ? r.strides[src] : 0;
      }
      r = n;
    });
  }
  if (op == 6 || op == 7) {  // reshape; view of a contiguous tensor
    bool valid = true;
    const int64_t numel = numel_of(r.shape);
    const Shape want = random_reshape(rng, numel, valid);
    const bool as_view = op == 7;
    if (as_view) t = t.contiguous();
    return apply(valid, std::string(as_view ? "view" : "reshape") + shape_text(r.shape) + " to " + shape_text(want),
                 [&] { return as_view ? t.view(want) : t.reshape(want); }, [&] {
                   Shape s = want;
                   int64_t known = 1;
                   for (int64_t d : s)
                     if (d != -1) known *= d;
                   for (int64_t& d : s)
                     if (d == -1) d = numel / known;
                   r = Ref::contiguous(r.values(), s);
                 });
  }
  if (op == 8 && nd > 0) {  // squeeze
    const int64_t a = random_axis(rng, nd);
    const bool valid = axis_ok(a, nd) && r.shape[norm(a, nd)] == 1;
    return apply(valid, detail::concat("squeeze(", a, ") of ", shape_text(r.shape)), [&] { return t.squeeze(a); }, [&] {
      const size_t d = norm(a, nd);
      r.shape.erase(r.shape.begin() + static_cast<int64_t>(d));
      r.strides.erase(r.strides.begin() + static_cast<int64_t>(d));
    });
  }
  if (op == 9) {  // unsqueeze
    const int64_t a = random_axis(rng, nd + 1);
    return apply(axis_ok(a, nd + 1), detail::concat("unsqueeze(", a, ") of ", shape_text(r.shape)),
                 [&] { return t.unsqueeze(a); }, [&] {
                   const size_t d = norm(a, nd + 1);
                   r.shape.insert(r.shape.begin() + static_cast<int64_t>(d), 1);
                   r.strides.insert(r.strides.begin() + static_cast<int64_t>(d), 0);
                 });
  }
  if (op == 10 && nd > 0) {  // flatten
    const int64_t a = random_axis(rng, nd), b = random_axis(rng, nd);
    const bool valid = axis_ok(a, nd) && axis_ok(b, nd) && norm(a, nd) <= norm(b, nd);
    return apply(valid, detail::concat("flatten(", a, ", ", b, ") of ", shape_text(r.shape)), [&] { return t.flatten(a, b); },
                 [&] {
                   const size_t lo = norm(a, nd), hi = norm(b, nd);
                   Shape s(r.shape.begin(), r.shape.begin() + static_cast<int64_t>(lo));
                   s.push_back(numel_of(Shape(r.shape.begin() + static_cast<int64_t>(lo), r.shape.begin() + static_cast<int64_t>(hi) + 1)));
                   s.insert(s.end(), r.shape.begin() + static_cast<int64_t>(hi) + 1, r.shape.end());
                   r = Ref::contiguous(r.values(), s);
                 });
  }
  return apply(true, "contiguous of " + shape_text(r.shape), [&] { return t.contiguous(); }, [] {});
}

}  // namespace

void fuzz_views(Rng& rng) {
  Shape shape;
  for (int64_t d = rng.uniform(0, 4); d > 0; --d) shape.push_back(rng.chance(0.08) ? 0 : rng.uniform(1, 4));
  const DType dt = rng.pick(kFloatTypes);
  const Device dev = random_device(rng);
  std::vector<double> v(static_cast<size_t>(numel_of(shape)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<double>(i) - 7.5;  // distinct while the dtype is exact
  Tensor t = from_vector(v, shape, {dt});
  v = rounded(v, dt);
  if (!dev.is_cpu()) {
    if (!cuda_usable()) must_fail("a tensor on " + dev.str() + " without a usable GPU", [&] { t.to(dev); });
    t = t.to(dev);
  }
  Ref r = Ref::contiguous(v, shape);
  for (int64_t k = rng.uniform(1, 5); k > 0; --k) {
    step(rng, t, r);
    const int64_t n = numel_of(r.shape);
    if (n > 4096) return;  // a wide expand: the shapes were checked, the values would only cost time
  }
  const std::vector<double> want = r.values();
  expect_close("values after the view chain", t.to_vector<double>(), want, std::vector<double>(want.size(), 0.0));
  // An op reading the strided view: doubling is exact in every dtype (or overflows alike).
  std::vector<double> twice(want.size());
  for (size_t i = 0; i < want.size(); ++i) twice[i] = 2 * want[i];
  expect_close("2 * view", (t * 2.0).to_vector<double>(), rounded(twice, dt), std::vector<double>(want.size(), 0.0));
}

}  // namespace hg::fuzz
