// Activations and dropout: values against f64 formulas in every floating dtype,
// gradchecks, dropout's mask statistics, determinism and gradient, errors.
#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

#include "halfgrad.h"

using namespace hg;

namespace {

Tensor leaf(const Shape& s, uint64_t seed, double lo = -3, double hi = 3) {
  Generator g(seed);
  return uniform(s, lo, hi, {f64}, &g).set_requires_grad();
}

struct Activation {
  const char* name;
  std::function<Tensor(const Tensor&)> op;
  std::function<double(double)> reference;
};

std::vector<Activation> activations() {
  return {
      {"relu", [](const Tensor& x) { return relu(x); }, [](double v) { return v > 0 ? v : 0.0; }},
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); }, [](double v) { return v > 0 ? v : 0.2 * v; }},
      {"sigmoid", [](const Tensor& x) { return sigmoid(x); }, [](double v) { return 1 / (1 + std::exp(-v)); }},
      {"tanh", [](const Tensor& x) { return tanh(x); }, [](double v) { return std::tanh(v); }},
      {"gelu", [](const Tensor& x) { return gelu(x); },
       [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }},
  };
}

}  // namespace

TEST_CASE("activations match their f64 formulas in every floating dtype", "[activation]") {
  // Per dtype: relative tolerance of one rounding plus the f32 math, and an absolute floor.
  const std::vector<std::tuple<DType, double, double>> dtypes = {
      {f64, 1e-14, 1e-15}, {f32, 1e-6, 1e-7}, {f16, 1e-3, 1e-4}, {bf16, 8e-3, 1e-3}};
  for (const Activation& a : activations()) {
    for (auto [dt, rtol, atol] : dtypes) {
      Generator g(9);
      Tensor x = uniform({7, 13}, -6.0, 6.0, {dt}, &g);
      Tensor y = a.op(x);
      INFO(a.name << " in " << dtype_name(dt));
      CHECK(y.dtype() == dt);
      std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>();
      for (size_t i = 0; i < xs.size(); ++i) {
        const double ref = a.reference(xs[i]);
        CHECK(std::abs(ys[i] - ref) <= rtol * std::abs(ref) + atol);
      }
    }
  }
}

TEST_CASE("activations pass gradcheck in f64", "[activation][gradcheck]") {
  Tensor x = leaf({3, 5}, 1);
  for (const Activation& a : activations()) {
    INFO(a.name);
    CHECK(gradcheck([&](const TensorList& t) { return a.op(t[0]); }, {x}));
  }
}

TEST_CASE("activations keep NaN and reject non-floating input", "[activation][errors]") {
  for (const Activation& a : activations()) {
    INFO(a.name);
    CHECK(std::isnan(a.op(tensor({NAN}, {f16})).item<double>()));
    CHECK_THROWS_WITH(a.op(ones({2, 3}, {i64})),
                      Catch::Contains(a.name) && Catch::Contains("floating") && Catch::Contains("i64"));
  }
  CHECK(relu(tensor({-0.0, -2.0, 3.0})).to_vector<double>() == std::vector<double>{0.0, 0.0, 3.0});
}

TEST_CASE("activation gradients in f16 follow the f64 derivative of the rounded values", "[activation]") {
  Tensor x = tensor({-2.5, -0.75, 0.5, 1.25, 3.0}, {f16, Device::cpu(), true});
  Tensor y = sigmoid(x);
  y.backward(ones_like(y));
  REQUIRE(x.grad().dtype() == f16);
  std::vector<double> xs = x.to_vector<double>(), gs = x.grad().to_vector<double>();
  for (size_t i = 0; i < xs.size(); ++i) {
    const double s = 1 / (1 + std::exp(-xs[i]));
    // y is rounded to f16 before the derivative y (1 - y) uses it: a few f16 ulps.
    CHECK(gs[i] == Approx(s * (1 - s)).epsilon(4e-3));
  }
}

TEST_CASE("dropout keeps 1-p of the elements, scaled by 1/(1-p)", "[activation]") {
  for (DType dt : {f32, f16, bf16}) {
    INFO(dtype_name(dt));
    Generator g(21), gm(22);
    Tensor x = uniform({200, 501}, 0.5, 2.0, {dt}, &g);
    const double p = 0.3;
    Tensor y = dropout(x, p, true, &gm);
    REQUIRE(y.dtype() == dt);
    std::vector<double> xs = x.to_vector<double>(), ys = y.to_vector<double>();
    int64_t kept = 0;
    bool values_ok = true;
    const double rtol = dt == f32 ? 1e-7 : (dt == f16 ? 1e-3 : 8e-3);
    for (size_t i = 0; i < xs.size(); ++i) {
      if (ys[i] == 0) continue;
      ++kept;
      values_ok = values_ok && std::abs(ys[i] - xs[i] / (1 - p)) <= rtol * xs[i] / (1 - p);
    }
    CHECK(values_ok);
    // 100200 Bernoulli(0.7) draws: the standard deviation of the kept fraction is 0.0014.
    CHECK(static_cast<double>(kept) / xs.size() == Approx(0.7).margin(0.01));
  }
}

TEST_CASE("dropout is deterministic for a seeded generator and its gradient uses the same mask", "[activation]") {
  Generator g(3);
  Tensor x = uniform({37, 11}, 1.0, 2.0, {f32, Device::cpu(), true}, &g);
  Generator a(99), b(99), c(100);
  Tensor ya = dropout(x, 0.5, true, &a), yb = dropout(x, 0.5, true, &b), yc = dropout(x, 0.5, true, &c);
  CHECK(allclose(ya, yb, 0, 0));
  CHECK_FALSE(allclose(ya, yc, 0, 0));
  ya.backward(ones_like(ya));
  std::vector<double> ys = ya.to_vector<double>(), gs = x.grad().to_vector<double>();
  for (size_t i = 0; i < ys.size(); ++i) CHECK(gs[i] == (ys[i] != 0 ? 2.0 : 0.0));

  Tensor xd = leaf({5, 7}, 4, 0.5, 2.0);
  CHECK(gradcheck([](const TensorList& t) {
    Generator gen(7);
    return dropout(t[0], 0.4, true, &gen);
  }, {xd}));
}

TEST_CASE("dropout: identity in eval mode and for p = 0, zeros for p = 1", "[activation]") {
  Tensor x = tensor({1.0, -2.0, 3.0}, {f16});
  CHECK(dropout(x, 0.5, false).is_same(x));
  CHECK(dropout(x, 0.0, true).is_same(x));
  CHECK(dropout(x, 1.0, true).to_vector<double>() == std::vector<double>{0.0, 0.0, 0.0});
  CHECK_THROWS_WITH(dropout(x, 1.5, true), Catch::Contains("dropout") && Catch::Contains("[0, 1]") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(dropout(x, -0.1, false), Catch::Contains("dropout") && Catch::Contains("-0.1"));
  CHECK_THROWS_WITH(dropout(ones({2}, {i64}), 0.5, true), Catch::Contains("dropout") && Catch::Contains("i64"));
}
