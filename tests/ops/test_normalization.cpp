// layer_norm and gelu_tanh: values against naive f64 references (f16/bf16 from the same
// rounded inputs, one rounding of tolerance), gradchecks, autocast classes, errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

Tensor as_tensor(const std::vector<double>& v, const Shape& s) { return from_vector(v, s, {f64}); }

// Naive f64 layer norm of rows of length n, with weight and bias per position.
std::vector<double> layer_norm_ref(const std::vector<double>& x, int64_t n, const std::vector<double>& w,
                                   const std::vector<double>& b, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / n; ++r) {
    double m = 0, v = 0;
    for (int64_t i = 0; i < n; ++i) m += x[r * n + i];
    m /= n;
    for (int64_t i = 0; i < n; ++i) v += (x[r * n + i] - m) * (x[r * n + i] - m);
    v /= n;
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = (x[r * n + i] - m) / std::sqrt(v + eps) * w[i] + b[i];
  }
  return y;
}

}  // namespace

TEST_CASE("layer_norm matches an f64 reference; f16/bf16 keep f32 statistics", "[layer_norm]") {
  Generator g(3);
  // A large common offset: naive f16 statistics would lose the spread entirely.
  Tensor x = uniform({4, 6, 10}, 990, 1010, {f64}, &g);
  Tensor w = uniform({6, 10}, 0.5, 2, {f64}, &g), b = uniform({6, 10}, -1, 1, {f64}, &g);
  const std::vector<double> ref = layer_norm_ref(x.to_vector<double>(), 60, w.to_vector<double>(),
                                                 b.to_vector<double>(), 1e-5);
  CHECK(allclose(layer_norm(x, {6, 10}, w, b), as_tensor(ref, x.shape()), 1e-12, 1e-12));
  for (DType dt : {f32, f16, bf16}) {
    INFO(dtype_name(dt));
    Tensor xr = x.to(dt);  // the rounded inputs are the reference's inputs
    const std::vector<double> ref_r = layer_norm_ref(xr.to_vector<double>(), 60, w.to(dt).to_vector<double>(),
                                                     b.to(dt).to_vector<double>(), 1e-5);
    Tensor y = layer_norm(xr, {6, 10}, w.to(dt), b.to(dt));
    CHECK(y.dtype() == dt);
    // One rounding of |y| <= ~4 for f16/bf16. f32: the centring of values near 1000
    // (ulp 6e-5) against a spread of ~6 costs ~1e-5 relative before the final rounding.
    const double tol = dt == f16 ? 1e-3 : dt == bf16 ? 8e-3 : 5e-5;
    CHECK(allclose(y, as_tensor(ref_r, x.shape()), tol, tol));
  }
  // Without weight and bias, over the last axis only.
  Tensor y1 = layer_norm(x, {10});
  CHECK(allclose(y1, as_tensor(layer_norm_ref(x.to_vector<double>(), 10, std::vector<double>(10, 1.0),
                                              std::vector<double>(10, 0.0), 1e-5), x.shape()), 1e-12, 1e-12));
}

TEST_CASE("layer_norm gradients and autocast class", "[layer_norm][autograd]") {
  Generator g(4);
  Tensor x = uniform({3, 5}, -2, 2, {f64}, &g).set_requires_grad();
  Tensor w = uniform({5}, 0.5, 2, {f64}, &g).set_requires_grad();
  Tensor b = uniform({5}, -1, 1, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return layer_norm(in[0], {5}, in[1], in[2]); }, {x, w, b}));
  {
    amp::Autocast ac(f16);
    CHECK(layer_norm(x.detach().to(f16), {5}).dtype() == f32);  // the fp32 class
  }
  CHECK_THROWS_WITH(layer_norm(x, {4}), Catch::Contains("must be non-empty and equal the last axes"));
  CHECK_THROWS_WITH(layer_norm(x, {5}, ones({4})), Catch::Contains("weight must be a floating tensor of shape [5]"));
  CHECK_THROWS_WITH(layer_norm(zeros({2}, {i64}), {2}), Catch::Contains("expected a floating tensor"));
}

TEST_CASE("gelu_tanh matches the tanh formula and rounds once", "[gelu]") {
  Generator g(5);
  Tensor x = uniform({200}, -6, 6, {f64}, &g);
  auto ref = [](double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); };
  std::vector<double> want;
  for (double v : x.to_vector<double>()) want.push_back(ref(v));
  CHECK(allclose(gelu_tanh(x), as_tensor(want, x.shape()), 1e-14, 1e-15));
  // Hand values: gelu_tanh(1) = 0.8411919906, gelu_tanh(-2) = -0.0454023059.
  CHECK(gelu_tanh(tensor({1, -2}, {f64})).to_vector<double>()[0] == Approx(0.8411919906082768).epsilon(1e-12));
  CHECK(gelu_tanh(tensor({1, -2}, {f64})).to_vector<double>()[1] == Approx(-0.04540230591222).epsilon(1e-10));
  for (DType dt : {f16, bf16}) {
    Tensor xr = x.to(dt);
    std::vector<double> want_r;
    for (double v : xr.to_vector<double>()) want_r.push_back(ref(v));
    Tensor y = gelu_tanh(xr);
    CHECK(y.dtype() == dt);
    CHECK(allclose(y, as_tensor(want_r, x.shape()), dt == f16 ? 1e-3 : 8e-3, 1e-6));
  }
  Tensor xl = x.narrow(0, 0, 20).set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return gelu_tanh(in[0]); }, {xl.detach().set_requires_grad()}));
}
