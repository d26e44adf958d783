// max_pool2d and avg_pool2d against naive f64 loops (forward and backward), the argmax
// routing of overlapping windows, f16/bf16 rounding, gradchecks and error messages.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

#include "halfgrad.h"

using namespace hg;

namespace {

struct Geo {
  int64_t N, H, W, C, R, S, sh, sw, ph, pw, P, Q;
};

Geo geo_of(const Shape& s, const Pool2dOptions& o) {
  Geo g{s[0], s[1], s[2], s[3], o.kernel[0], o.kernel[1], o.stride[0] ? o.stride[0] : o.kernel[0],
        o.stride[1] ? o.stride[1] : o.kernel[1], o.padding[0], o.padding[1], 0, 0};
  g.P = (g.H + 2 * g.ph - g.R) / g.sh + 1;
  g.Q = (g.W + 2 * g.pw - g.S) / g.sw + 1;
  return g;
}

// Visits every in-image element of every window: f(out_index, in_index, plane_index).
template <class F>
void for_each_window_element(const Geo& g, F f) {
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t p = 0; p < g.P; ++p)
      for (int64_t q = 0; q < g.Q; ++q)
        for (int64_t c = 0; c < g.C; ++c)
          for (int64_t r = 0; r < g.R; ++r)
            for (int64_t s = 0; s < g.S; ++s) {
              const int64_t h = p * g.sh - g.ph + r, w = q * g.sw - g.pw + s;
              if (h < 0 || h >= g.H || w < 0 || w >= g.W) continue;
              f(((n * g.P + p) * g.Q + q) * g.C + c, ((n * g.H + h) * g.W + w) * g.C + c, h * g.W + w);
            }
}

// Window maxima and, per output, the input element (flat NHWC index) holding it.
std::vector<double> max_ref(const Geo& g, const std::vector<double>& x, std::vector<int64_t>& arg) {
  std::vector<double> y(static_cast<size_t>(g.N * g.P * g.Q * g.C), -INFINITY);
  arg.assign(y.size(), -1);
  for_each_window_element(g, [&](int64_t o, int64_t i, int64_t) {
    if (x[i] > y[o]) {
      y[o] = x[i];
      arg[o] = i;
    }
  });
  return y;
}

std::vector<double> avg_ref(const Geo& g, const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(g.N * g.P * g.Q * g.C), 0.0);
  for_each_window_element(g, [&](int64_t o, int64_t i, int64_t) { y[o] += x[i] / double(g.R * g.S); });
  return y;
}

std::vector<double> avg_backward_ref(const Geo& g, const std::vector<double>& gy) {
  std::vector<double> gx(static_cast<size_t>(g.N * g.H * g.W * g.C), 0.0);
  for_each_window_element(g, [&](int64_t o, int64_t i, int64_t) { gx[i] += gy[o] / double(g.R * g.S); });
  return gx;
}

std::vector<double> max_backward_ref(const Geo& g, const std::vector<int64_t>& arg, const std::vector<double>& gy) {
  std::vector<double> gx(static_cast<size_t>(g.N * g.H * g.W * g.C), 0.0);
  for (size_t o = 0; o < gy.size(); ++o) gx[arg[o]] += gy[o];
  return gx;
}

// |a - b| <= atol + rtol |b| everywhere.
bool close(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol = 0) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]))) return false;
  return true;
}

// Distinct values (a shuffled ramp) so no window has ties, even after an f16 rounding.
Tensor distinct(const Shape& s, uint64_t seed, DType dt = f64) {
  std::vector<double> v(static_cast<size_t>(numel_of(s)));
  std::iota(v.begin(), v.end(), 0.0);
  std::shuffle(v.begin(), v.end(), std::mt19937_64(seed));
  for (double& e : v) e = (e - v.size() / 2.0) * 0.125;
  return from_vector(v, s, {dt});
}

Tensor random(const Shape& s, uint64_t seed, DType dt) {
  Generator gen(seed);
  return randn(s, {dt}, &gen);
}

const std::vector<Pool2dOptions> kConfigs = {
    {{2, 2}, {0, 0}, {0, 0}}, {{3, 3}, {2, 2}, {1, 1}}, {{3, 2}, {3, 2}, {0, 1}},
    {{3, 3}, {1, 1}, {1, 0}}, {{2, 3}, {3, 2}, {1, 1}},
};

}  // namespace

TEST_CASE("pool2d output sizes follow PyTorch's floor formula", "[pool2d]") {
  Tensor x = ones({2, 7, 13, 3});
  CHECK(max_pool2d(x).shape() == Shape{2, 3, 6, 3});
  CHECK(max_pool2d(x, {{3, 3}, {2, 2}, {1, 1}}).shape() == Shape{2, 4, 7, 3});
  CHECK(avg_pool2d(x, {{3, 3}, {3, 3}, {0, 0}}).shape() == Shape{2, 2, 4, 3});
  CHECK(avg_pool2d(x, {{2, 3}, {3, 2}, {1, 1}}).shape() == Shape{2, 3, 7, 3});
}

TEST_CASE("pool2d forward and backward match naive f64 loops", "[pool2d]") {
  // f16/bf16 maxima are copied, so exact; sums are f32 rounded once to the 16-bit grid.
  // C = 19: two groups of 8 channels take the vector path, 3 the scalar one.
  for (DType dt : {f64, f32, f16, bf16}) {
    const double tol = dt == f64 ? 1e-12 : dt == f32 ? 1e-6 : dt == f16 ? 2e-3 : 1.6e-2;
    for (int64_t C : {3, 5, 19}) {
      // A permuted NCHW tensor: the op must handle non-contiguous input.
      Tensor x = random({2, C, 7, 13}, 10 + C, dt).permute({0, 2, 3, 1});
      const std::vector<double> xv = x.to_vector<double>();
      for (const Pool2dOptions& o : kConfigs) {
        const Geo g = geo_of(x.shape(), o);
        INFO("dtype " << dtype_name(dt) << " C " << C << " kernel " << g.R << "x" << g.S << " stride " << g.sh << "x"
                      << g.sw << " padding " << g.ph << "x" << g.pw);
        Tensor gy = random({g.N, g.P, g.Q, g.C}, 99, dt);
        const std::vector<double> gyv = gy.to_vector<double>();

        Tensor xm = x.detach().set_requires_grad();
        Tensor ym = max_pool2d(xm, o);
        REQUIRE(ym.shape() == Shape{g.N, g.P, g.Q, g.C});
        std::vector<int64_t> arg;
        CHECK(ym.to_vector<double>() == max_ref(g, xv, arg));
        ym.backward(gy);
        CHECK(close(xm.grad().to_vector<double>(), max_backward_ref(g, arg, gyv), tol, tol));

        Tensor xa = x.detach().set_requires_grad();
        Tensor ya = avg_pool2d(xa, o);
        CHECK(close(ya.to_vector<double>(), avg_ref(g, xv), tol, tol));
        ya.backward(gy);
        CHECK(close(xa.grad().to_vector<double>(), avg_backward_ref(g, gyv), tol, tol));
      }
    }
  }
}

TEST_CASE("max_pool2d routes each gradient to its argmax; overlapping windows accumulate", "[pool2d]") {
  // The centre 9 is the maximum of all four overlapping 2x2 windows (stride 1).
  Tensor x = from_vector({1, 2, 3, 4, 9, 5, 6, 7, 8}, {1, 3, 3, 1}, {f64, Device::cpu(), true});
  Tensor y = max_pool2d(x, {{2, 2}, {1, 1}, {0, 0}});
  CHECK(y.to_vector<double>() == std::vector<double>{9, 9, 9, 9});
  y.backward(from_vector({1, 10, 100, 1000}, {1, 2, 2, 1}, {f64}));
  CHECK(x.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0, 1111, 0, 0, 0, 0});
  // In f16 the four gradients add up in f32: an f16 running sum would stay at 2048 (2049
  // is not an f16); 2050.5 rounds once to 2050.
  Tensor xh = x.detach().to(f16).set_requires_grad();
  max_pool2d(xh, {{2, 2}, {1, 1}, {0, 0}}).backward(from_vector({2048, 1, 1, 0.5}, {1, 2, 2, 1}, {f16}));
  CHECK(xh.grad().to_vector<double>() == std::vector<double>{0, 0, 0, 0, 2050, 0, 0, 0, 0});

  // 2x3 windows at stride 2 share a column: the 7 in it wins in both windows of channel
  // 0, while channel 1 keeps its own argmax.
  Tensor x2 = from_vector({0, 5, 1, 0, 7, 0, 2, 0, 0, 9, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0}, {1, 2, 5, 2},
                          {f64, Device::cpu(), true});
  Tensor y2 = max_pool2d(x2, {{2, 3}, {2, 2}, {0, 0}});
  REQUIRE(y2.shape() == Shape{1, 1, 2, 2});
  CHECK(y2.to_vector<double>() == std::vector<double>{7, 5, 7, 9});
  y2.backward(from_vector({1, 2, 3, 4}, {1, 1, 2, 2}, {f64}));
  CHECK(x2.grad().to_vector<double>() ==
        std::vector<double>{0, 2, 0, 0, 4, 0, 0, 0, 0, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0});
}

TEST_CASE("max_pool2d: padding never wins, NaN propagates, no-grad runs agree", "[pool2d]") {
  Tensor neg = full({1, 3, 3, 2}, -5.0);
  Tensor y = max_pool2d(neg, {{3, 3}, {1, 1}, {1, 1}});
  CHECK(y.to_vector<double>() == std::vector<double>(18, -5.0));
  Tensor ninf = full({1, 2, 2, 1}, -INFINITY, {f64, Device::cpu(), true});
  Tensor yi = max_pool2d(ninf, {{2, 2}, {1, 1}, {1, 1}});
  CHECK(yi.to_vector<double>() == std::vector<double>(9, -INFINITY));
  yi.backward(ones_like(yi));
  CHECK(sum(ninf.grad()).item<double>() == 9.0);  // every window still routes somewhere

  Tensor x = from_vector({1, NAN, 3, 4}, {1, 2, 2, 1}, {f64, Device::cpu(), true});
  Tensor yn = max_pool2d(x);
  CHECK(std::isnan(yn.item<double>()));
  yn.backward(full({1, 1, 1, 1}, 2.0, {f64}));
  CHECK(x.grad().to_vector<double>()[1] == 2.0);

  Tensor z = random({2, 7, 13, 5}, 3, f32);
  Tensor with = max_pool2d(z.detach().set_requires_grad(), {{3, 3}, {2, 2}, {1, 1}});
  NoGrad ng;
  CHECK(allclose(max_pool2d(z, {{3, 3}, {2, 2}, {1, 1}}), with.detach(), 0, 0));
}

TEST_CASE("pool2d gradcheck in f64", "[pool2d][gradcheck]") {
  Tensor x = distinct({2, 7, 5, 3}, 5).set_requires_grad();
  for (const Pool2dOptions& o : {Pool2dOptions{{3, 3}, {2, 2}, {1, 1}}, Pool2dOptions{{2, 3}, {3, 2}, {1, 0}}}) {
    CHECK(gradcheck([&](const TensorList& t) { return max_pool2d(t[0], o); }, {x}));
    CHECK(gradcheck([&](const TensorList& t) { return avg_pool2d(t[0], o); }, {x}));
  }
}

TEST_CASE("pool2d in f16/bf16: max is exact, avg sums in f32 and rounds once", "[pool2d][numerics]") {
  // Overlapping windows (gradients add up in f32) and disjoint ones (each is copied).
  for (const Pool2dOptions& o : {Pool2dOptions{{3, 3}, {2, 2}, {1, 1}}, Pool2dOptions{{2, 3}, {3, 3}, {1, 0}}}) {
    for (DType dt : {f16, bf16}) {
      // One ulp of the output dtype: the f32 sum and division round once more than the f64 reference.
      const double tol = dt == f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
      INFO("dtype " << dtype_name(dt) << " kernel " << o.kernel[0] << "x" << o.kernel[1]);
      Tensor x = random({2, 7, 13, 5}, 21, dt).set_requires_grad();
      const std::vector<double> xv = x.to_vector<double>();  // the rounded inputs, exactly
      const Geo g = geo_of(x.shape(), o);
      Tensor gy = random({g.N, g.P, g.Q, g.C}, 22, dt);
      const std::vector<double> gyv = gy.to_vector<double>();

      Tensor ym = max_pool2d(x, o);
      CHECK(ym.dtype() == dt);
      std::vector<int64_t> arg;
      CHECK(ym.to_vector<double>() == max_ref(g, xv, arg));
      ym.backward(gy);
      CHECK(close(x.grad().to_vector<double>(), max_backward_ref(g, arg, gyv), tol));

      Tensor xa = x.detach().set_requires_grad();
      Tensor ya = avg_pool2d(xa, o);
      CHECK(ya.dtype() == dt);
      CHECK(close(ya.to_vector<double>(), avg_ref(g, xv), tol));
      ya.backward(gy);
      CHECK(close(xa.grad().to_vector<double>(), avg_backward_ref(g, gyv), tol));
    }
  }
  // 2048 + 8 * 1 over a 3x3 window: an f16 running sum would stay at 2048 (2049 is not an
  // f16), giving 2048/9 -> 227.5; the f32 sum 2056/9 = 228.44 rounds once to 228.5.
  std::vector<double> v(9, 1.0);
  v[4] = 2048;
  CHECK(avg_pool2d(from_vector(v, {1, 3, 3, 1}, {f16}), {{3, 3}}).item<double>() == 228.5);
}

TEST_CASE("pool2d errors name the op, the shapes and what is valid", "[pool2d][errors]") {
  CHECK_THROWS_WITH(max_pool2d(ones({2, 3, 4})), Catch::Contains("max_pool2d") && Catch::Contains("4-D") &&
                                                     Catch::Contains("[2, 3, 4]"));
  CHECK_THROWS_WITH(avg_pool2d(ones({1, 2, 2, 1}), {{5, 5}, {1, 1}, {1, 1}}),
                    Catch::Contains("avg_pool2d") && Catch::Contains("kernel 5x5 is larger than the padded input 4x4") &&
                        Catch::Contains("[1, 2, 2, 1]"));
  CHECK_THROWS_WITH(max_pool2d(ones({1, 8, 8, 1}), {{3, 3}, {1, 1}, {2, 0}}),
                    Catch::Contains("padding 2x0") && Catch::Contains("at most half the kernel 3x3"));
  CHECK_THROWS_WITH(max_pool2d(ones({1, 8, 8, 1}), {{0, 2}}), Catch::Contains("kernel must be positive, got 0x2"));
  CHECK_THROWS_WITH(avg_pool2d(ones({1, 8, 8, 1}), {{2, 2}, {-1, 1}}),
                    Catch::Contains("stride must be positive") && Catch::Contains("-1x1"));
  CHECK_THROWS_WITH(max_pool2d(ones({1, 4, 4, 1}, {i64})), Catch::Contains("floating") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(max_pool2d(ones({1, 0, 4, 1})), Catch::Contains("empty spatial axis"));
}
