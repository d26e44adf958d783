// softmax and log_softmax: values against naive f64 loops (last axis and a middle axis),
// stability of f16 at extreme logits, NaN propagation, gradchecks, errors, autocast.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

// Naive f64 softmax / log_softmax of a row-major tensor of shape [outer, n, inner] along
// the middle axis.
std::vector<double> reference(const std::vector<double>& x, int64_t outer, int64_t n, int64_t inner, bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < inner; ++j) {
      auto at = [&](int64_t i) { return static_cast<size_t>((o * n + i) * inner + j); };
      double m = -INFINITY;
      for (int64_t i = 0; i < n; ++i) m = std::max(m, x[at(i)]);
      double s = 0;
      for (int64_t i = 0; i < n; ++i) s += std::exp(x[at(i)] - m);
      for (int64_t i = 0; i < n; ++i) y[at(i)] = log ? x[at(i)] - m - std::log(s) : std::exp(x[at(i)] - m) / s;
    }
  return y;
}

// |a - b| <= atol + rtol |b| for every element.
bool close(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]))) return false;
  return true;
}

Tensor leaf(const Shape& s, uint64_t seed) {
  Generator g(seed);
  return uniform(s, -3, 3, {f64}, &g).set_requires_grad();
}

}  // namespace

TEST_CASE("softmax and log_softmax match an f64 reference on every axis", "[softmax]") {
  Generator g(11);
  Tensor x = uniform({3, 5, 7}, -4, 4, {f64}, &g);
  const std::vector<double> xv = x.to_vector<double>();
  for (bool log : {false, true}) {
    auto f = [&](const Tensor& t, int64_t axis) { return log ? log_softmax(t, axis) : softmax(t, axis); };
    CHECK(close(f(x, -1).to_vector<double>(), reference(xv, 15, 7, 1, log), 1e-14, 1e-15));
    CHECK(close(f(x, 1).to_vector<double>(), reference(xv, 3, 5, 7, log), 1e-14, 1e-15));
    CHECK(close(f(x, 0).to_vector<double>(), reference(xv, 1, 3, 35, log), 1e-14, 1e-15));
    // f32 computes in f32 and rounds once: a few ulps of f32.
    CHECK(close(f(x.to(f32), 1).to_vector<double>(), reference(xv, 3, 5, 7, log), 2e-6, 1e-7));
  }
  // A non-contiguous input is read through its strides.
  Tensor xt = x.transpose(0, 2);  // [7, 5, 3]
  CHECK(allclose(softmax(xt, 0), softmax(x, 2).transpose(0, 2), 1e-14, 1e-15));
  // A long line along a middle axis (the strided path).
  Tensor big = uniform({2, 1001, 3}, -10, 10, {f64}, &g);
  CHECK(close(log_softmax(big, 1).to_vector<double>(), reference(big.to_vector<double>(), 2, 1001, 3, true), 1e-13,
              1e-13));
}

TEST_CASE("f16 and bf16 softmax equal the f64 result of the rounded inputs within one rounding", "[softmax][numerics]") {
  for (DType dt : {f16, bf16}) {
    // One rounding of the output: 2^-11 relative for f16, 2^-8 for bf16, plus f32 noise.
    const double rtol = dt == f16 ? 1e-3 : 8e-3;
    Generator g(5);
    Tensor x = uniform({6, 9, 5}, -8, 8, {dt}, &g);
    const std::vector<double> xv = x.to_vector<double>();  // the rounded inputs
    Tensor y = softmax(x, -1), ly = log_softmax(x, 1);
    CHECK(y.dtype() == dt);
    CHECK(ly.dtype() == dt);
    CHECK(close(y.to_vector<double>(), reference(xv, 54, 5, 1, false), rtol, 1e-7));
    CHECK(close(ly.to_vector<double>(), reference(xv, 6, 9, 5, true), rtol, 1e-3));
  }
}

TEST_CASE("f16 softmax of logits as large as 20000 has no NaN and sums to 1", "[softmax][numerics]") {
  // exp(20000) overflows every float type; subtracting the maximum first keeps it finite.
  Tensor x = tensor({20000, 19984, 19990, -20000, 0, 20000, 1, 2}, {f16}).reshape({2, 4});
  Tensor y = softmax(x, -1);
  const std::vector<double> yv = y.to_vector<double>();
  const std::vector<double> ref = reference(x.to_vector<double>(), 2, 4, 1, false);
  for (double v : yv) CHECK(std::isfinite(v));
  CHECK(yv[0] + yv[1] + yv[2] + yv[3] == Approx(1.0).margin(2e-3));
  CHECK(yv[4] + yv[5] + yv[6] + yv[7] == Approx(1.0).margin(2e-3));
  CHECK(close(yv, ref, 1e-3, 1e-7));
  CHECK(yv[0] > 0.99);
  CHECK(yv[3] == 0.0);  // e^-40000 underflows to zero, as it should
}

TEST_CASE("f16 log_softmax over a spread of 30000 stays finite", "[softmax][numerics]") {
  Tensor x = tensor({15000, -15000, 0, 7, -3, 14992}, {f16});
  Tensor y = log_softmax(x, 0);
  const std::vector<double> yv = y.to_vector<double>();
  for (double v : yv) CHECK(std::isfinite(v));
  // f16 spacing at 30000 is 16, so the reference tolerance is one rounding (2^-11 relative).
  CHECK(close(yv, reference(x.to_vector<double>(), 1, 6, 1, true), 1e-3, 1e-3));
  CHECK(yv[1] == Approx(-30000.0).margin(16));
}

TEST_CASE("NaN in the logits reaches exactly its own row", "[softmax][numerics]") {
  Tensor x = tensor({1, NAN, 2, 3, 1, 2}).reshape({2, 3});
  for (const Tensor& y : {softmax(x, 1), log_softmax(x, 1)}) {
    const std::vector<double> v = y.to_vector<double>();
    CHECK((std::isnan(v[0]) && std::isnan(v[1]) && std::isnan(v[2])));
    CHECK((std::isfinite(v[3]) && std::isfinite(v[4]) && std::isfinite(v[5])));
  }
  Tensor col = softmax(x, 0);  // the NaN is in column 1 only
  CHECK(std::isnan(col.at({0, 1})));
  CHECK(std::isfinite(col.at({0, 0})));
}

TEST_CASE("softmax and log_softmax pass gradcheck in f64", "[softmax][gradcheck]") {
  Tensor a = leaf({3, 5}, 1), b = leaf({3, 5, 7}, 2);
  CHECK(gradcheck([](const TensorList& t) { return softmax(t[0], -1); }, {a}));
  CHECK(gradcheck([](const TensorList& t) { return log_softmax(t[0], -1); }, {a}));
  CHECK(gradcheck([](const TensorList& t) { return softmax(t[0], 1); }, {b}));
  CHECK(gradcheck([](const TensorList& t) { return log_softmax(t[0], 1); }, {b}));
  CHECK(gradcheck([](const TensorList& t) { return softmax(t[0].transpose(0, 2), 2); }, {b}));
}

TEST_CASE("f16 softmax backward matches the f64 formula on the rounded output", "[softmax][numerics]") {
  Generator gen(9);
  Tensor x = uniform({4, 7}, -3, 3, {f16}, &gen).set_requires_grad();
  Tensor g = uniform({4, 7}, -1, 1, {f16}, &gen);
  for (bool log : {false, true}) {
    Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    const TensorList gx = autograd::grad({y}, {x}, {g});
    CHECK(gx[0].dtype() == f16);
    const std::vector<double> yv = y.to_vector<double>(), gv = g.to_vector<double>();
    std::vector<double> ref(yv.size());
    for (size_t r = 0; r < 4; ++r) {
      double s = 0;
      for (size_t i = r * 7; i < r * 7 + 7; ++i) s += log ? gv[i] : gv[i] * yv[i];
      for (size_t i = r * 7; i < r * 7 + 7; ++i) ref[i] = log ? gv[i] - std::exp(yv[i]) * s : yv[i] * (gv[i] - s);
    }
    CHECK(close(gx[0].to_vector<double>(), ref, 2e-3, 2e-4));
  }
}

TEST_CASE("softmax runs in f32 under autocast and rejects bad arguments", "[softmax][errors]") {
  autocast_state().dtype = f16;
  Tensor y = softmax(ones({2, 3}, {f16}), 1);
  autocast_state().dtype.reset();
  CHECK(y.dtype() == f32);
  CHECK(y.at({1, 2}) == Approx(1.0 / 3.0));
  CHECK_THROWS_WITH(softmax(ones({2, 3}), 2), Catch::Contains("softmax") && Catch::Contains("-2 to 1"));
  CHECK_THROWS_WITH(log_softmax(ones({2}, {i64}), 0),
                    Catch::Contains("log_softmax") && Catch::Contains("floating") && Catch::Contains("i64"));
  CHECK(softmax(scalar_tensor(5.0), 0).item<double>() == 1.0);
  CHECK(softmax(ones({0, 3}), 1).shape() == Shape{0, 3});
}
