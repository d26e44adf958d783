// Binary ops over random broadcasting pairs, layouts, dtype pairs and devices, and matmul
// over random (batched, 1-D, empty) shapes: each checked against an f64 computation on
// the same rounded inputs, rounded to the promoted dtype, within that dtype's rounding.
#include <algorithm>
#include <functional>

#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {
namespace {

// NumPy broadcasting of two shapes; ok = false if they do not broadcast.
Shape broadcast(const Shape& a, const Shape& b, bool& ok) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  ok = true;
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    ok = ok && (da == db || da == 1 || db == 1);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

// Row-major index of `out_index` in a (right-aligned, broadcast) operand of shape s.
int64_t source_index(const std::vector<int64_t>& out_index, const Shape& s) {
  int64_t at = 0;
  const size_t lead = out_index.size() - s.size();
  for (size_t d = 0; d < s.size(); ++d) at = at * s[d] + (s[d] == 1 ? 0 : out_index[lead + d]);
  return at;
}

void next_index(std::vector<int64_t>& idx, const Shape& s) {
  for (size_t d = idx.size(); d-- > 0;) {
    if (++idx[d] < s[d]) return;
    idx[d] = 0;
  }
}

// A tensor of `shape` in a random memory layout: contiguous, transposed, or a strided
// window of a larger tensor. The values are whatever it holds; callers read them back.
Tensor random_layout(Rng& rng, const Shape& shape, DType dt) {
  const int64_t kind = shape.empty() ? 0 : rng.uniform(0, 2);
  if (kind == 1) {
    Shape rev(shape.rbegin(), shape.rend());
    std::vector<int64_t> order(shape.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int64_t>(order.size() - 1 - i);
    return random_tensor(rng, rev, dt).permute(order);
  }
  if (kind == 2) {
    Shape wide = shape;
    wide.push_back(2);
    return random_tensor(rng, wide, dt).select(-1, 1);
  }
  return random_tensor(rng, shape, dt);
}

Tensor place(const Tensor& t, Device dev, const char* what) {
  if (dev.is_cuda() && !cuda_usable()) must_fail(std::string(what) + " on " + dev.str() + " without a GPU", [&] { t.to(dev); });
  return t.to(dev);
}

// Per-element tolerance of a result rounded to dt from an exact value `want`, after
// intermediate rounding of `terms` products (magnitudes summed in `mag`) in f32 or f64.
double tolerance(DType dt, double want, double mag, int64_t terms) {
  const double acc = dt == f64 ? 0x1p-53 : 0x1p-24;
  return 2 * unit_roundoff(dt) * std::abs(want) + (static_cast<double>(terms) + 2) * acc * mag +
         2 * smallest_subnormal(dt);
}

struct BinaryOp {
  const char* name;
  std::function<Tensor(const Tensor&, const Tensor&)> lib;
  std::function<double(double, double)> ref;
};

const std::vector<BinaryOp>& binary_ops() {
  static const std::vector<BinaryOp> ops = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }, [](double a, double b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }, [](double a, double b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }, [](double a, double b) { return a * b; }},
      {"div", [](const Tensor& a, const Tensor& b) { return a / b; }, [](double a, double b) { return a / b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }, [](double a, double b) { return std::max(a, b); }},
      {"minimum", [](const Tensor& a, const Tensor& b) { return minimum(a, b); }, [](double a, double b) { return std::min(a, b); }},
  };
  return ops;
}

}  // namespace

void fuzz_binary(Rng& rng) {
  Shape out;
  for (int64_t d = rng.uniform(0, 4); d > 0; --d) out.push_back(rng.chance(0.05) ? 0 : rng.uniform(1, 4));
  auto operand_shape = [&] {
    Shape s(out.end() - rng.uniform(0, static_cast<int64_t>(out.size())), out.end());
    for (int64_t& d : s)
      if (rng.chance(0.3)) d = 1;
    if (!s.empty() && rng.chance(0.1)) s[static_cast<size_t>(rng.uniform(0, static_cast<int64_t>(s.size()) - 1))] = rng.uniform(2, 5);
    return s;
  };
  const Shape sa = operand_shape(), sb = operand_shape();
  const DType da = rng.pick(kFloatTypes), db = rng.pick(kFloatTypes);
  const BinaryOp& op = rng.pick(binary_ops());
  const std::string what = detail::concat(op.name, " of ", shape_text(sa), " ", dtype_name(da), " and ", shape_text(sb),
                                          " ", dtype_name(db));
  note(what);
  Tensor a = place(random_layout(rng, sa, da), random_device(rng), "an operand");
  Tensor b = place(random_layout(rng, sb, db), random_device(rng), "an operand");
  bool ok = true;
  const Shape shape = broadcast(sa, sb, ok);
  if (!ok || a.device() != b.device()) must_fail(what, [&] { op.lib(a, b); });

  const Tensor y = must_succeed(what, [&] { return op.lib(a, b); });
  const DType dt = promote_types(da, db);
  expect(y.dtype() == dt, what, ": result dtype ", dtype_name(y.dtype()), ", expected ", dtype_name(dt));
  expect(y.shape() == shape, what, ": result shape ", shape_text(y.shape()), ", expected ", shape_text(shape));
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  std::vector<double> want, atol;
  std::vector<int64_t> idx(shape.size(), 0);
  for (int64_t k = 0, n = numel_of(shape); k < n; ++k, next_index(idx, shape)) {
    const double x = va[static_cast<size_t>(source_index(idx, sa))], z = vb[static_cast<size_t>(source_index(idx, sb))];
    want.push_back(op.ref(x, z));
  }
  want = rounded(want, dt);
  for (double w : want) atol.push_back(tolerance(dt, w, 0, 0));
  expect_close(what, y.to_vector<double>(), want, atol);
}

void fuzz_matmul(Rng& rng) {
  const int64_t m = rng.uniform(0, 5), k = rng.uniform(0, 6), n = rng.uniform(0, 5);
  Shape batch;
  for (int64_t d = rng.uniform(0, 2); d > 0; --d) batch.push_back(rng.uniform(1, 3));
  auto batch_of = [&] {
    Shape s(batch.end() - rng.uniform(0, static_cast<int64_t>(batch.size())), batch.end());
    for (int64_t& d : s)
      if (rng.chance(0.3)) d = 1;
    return s;
  };
  const bool a_vec = rng.chance(0.15), b_vec = rng.chance(0.15);
  Shape sa = a_vec ? Shape{k} : batch_of(), sb = b_vec ? Shape{k} : batch_of();
  if (!a_vec) sa.insert(sa.end(), {m, k});
  if (!b_vec) sb.insert(sb.end(), {k, n});
  bool valid = true;
  if (rng.chance(0.1)) sb[sb.size() - (b_vec ? 1 : 2)] = k + 1, valid = false;
  if (rng.chance(0.05)) sa = {}, valid = false;
  const DType da = rng.pick(kFloatTypes), db = rng.chance(0.2) ? rng.pick(kFloatTypes) : da;
  const std::string what = detail::concat("matmul of ", shape_text(sa), " ", dtype_name(da), " and ", shape_text(sb), " ",
                                          dtype_name(db));
  note(what);
  const Tensor a = random_layout(rng, sa, da), b = random_layout(rng, sb, db);
  if (!valid) must_fail(what, [&] { matmul(a, b); });
  if (da != db) must_fail(what, [&] { matmul(a, b); });  // no silent promotion outside autocast

  // The reference: both operands as batched matrices, batch dims broadcast.
  const Shape ba(sa.begin(), sa.end() - (a_vec ? 1 : 2)), bb(sb.begin(), sb.end() - (b_vec ? 1 : 2));
  bool ok = true;
  const Shape bs = broadcast(ba, bb, ok);
  if (!ok) must_fail(what, [&] { matmul(a, b); });
  const Tensor y = must_succeed(what, [&] { return matmul(a, b); });
  Shape shape = bs;
  if (!a_vec) shape.push_back(m);
  if (!b_vec) shape.push_back(n);
  const DType dt = da;
  expect(y.shape() == shape, what, ": result shape ", shape_text(y.shape()), ", expected ", shape_text(shape));
  expect(y.dtype() == dt, what, ": result dtype ", dtype_name(y.dtype()), ", expected ", dtype_name(dt));
  const std::vector<double> va = a.to_vector<double>(), vb = b.to_vector<double>();
  const int64_t rows = a_vec ? 1 : m, cols = b_vec ? 1 : n;
  std::vector<double> want, mag;
  std::vector<int64_t> idx(bs.size(), 0);
  for (int64_t t = 0, nb = numel_of(bs); t < nb; ++t, next_index(idx, bs)) {
    const int64_t oa = source_index(idx, ba) * rows * k, ob = source_index(idx, bb) * k * cols;
    for (int64_t i = 0; i < rows; ++i)
      for (int64_t j = 0; j < cols; ++j) {
        double s = 0, s_abs = 0;
        for (int64_t p = 0; p < k; ++p) {
          const double prod = va[static_cast<size_t>(oa + i * k + p)] * vb[static_cast<size_t>(ob + p * cols + j)];
          s += prod;
          s_abs += std::abs(prod);
        }
        want.push_back(s);
        mag.push_back(s_abs);
      }
  }
  want = rounded(want, dt);
  std::vector<double> atol;
  for (size_t i = 0; i < want.size(); ++i) atol.push_back(tolerance(dt, want[i], mag[i], k));
  expect_close(what, y.to_vector<double>(), want, atol);
}

}  // namespace hg::fuzz
