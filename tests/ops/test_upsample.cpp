// upsample (nearest, bilinear with half-pixel centres) against naive f64 loops and
// PyTorch's values, forward and backward, in f64/f32/f16/bf16, plus gradchecks and errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "halfgrad.h"

using namespace hg;

namespace {

struct Dims {
  int64_t N, H, W, C, s;
};

// The input index and weight pairs output index o reads along one axis.
std::vector<std::pair<int64_t, double>> taps(int64_t o, int64_t s, int64_t in, UpsampleMode mode) {
  if (mode == UpsampleMode::nearest) return {{o / s, 1.0}};
  const double src = std::max((o + 0.5) / double(s) - 0.5, 0.0);
  const int64_t i0 = static_cast<int64_t>(std::floor(src));
  const double l = src - double(i0);
  return {{i0, 1.0 - l}, {std::min(i0 + 1, in - 1), l}};
}

// Visits every (output, input, weight) triple of the interpolation.
template <class F>
void for_each_tap(const Dims& d, UpsampleMode mode, F f) {
  const int64_t OH = d.H * d.s, OW = d.W * d.s;
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t oh = 0; oh < OH; ++oh)
      for (int64_t ow = 0; ow < OW; ++ow)
        for (auto [h, a] : taps(oh, d.s, d.H, mode))
          for (auto [w, b] : taps(ow, d.s, d.W, mode))
            for (int64_t c = 0; c < d.C; ++c)
              f(((n * OH + oh) * OW + ow) * d.C + c, ((n * d.H + h) * d.W + w) * d.C + c, a * b);
}

std::vector<double> forward_ref(const Dims& d, UpsampleMode mode, const std::vector<double>& x) {
  std::vector<double> y(static_cast<size_t>(d.N * d.H * d.s * d.W * d.s * d.C), 0.0);
  for_each_tap(d, mode, [&](int64_t o, int64_t i, double wgt) { y[o] += wgt * x[i]; });
  return y;
}

std::vector<double> backward_ref(const Dims& d, UpsampleMode mode, const std::vector<double>& gy) {
  std::vector<double> gx(static_cast<size_t>(d.N * d.H * d.W * d.C), 0.0);
  for_each_tap(d, mode, [&](int64_t o, int64_t i, double wgt) { gx[i] += wgt * gy[o]; });
  return gx;
}

bool close(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= atol + rtol * std::abs(b[i]))) return false;
  return true;
}

Tensor random(const Shape& s, uint64_t seed, DType dt) {
  Generator gen(seed);
  return randn(s, {dt}, &gen);
}

const char* mode_name(UpsampleMode m) { return m == UpsampleMode::nearest ? "nearest" : "bilinear"; }

}  // namespace

TEST_CASE("upsample reproduces PyTorch's values on a 2x2 image", "[upsample]") {
  Tensor x = from_vector({1, 2, 3, 4}, {1, 2, 2, 1});
  // F.interpolate(x, scale_factor=2, mode='bilinear', align_corners=False)
  CHECK(upsample(x, 2, UpsampleMode::bilinear).to_vector<double>() ==
        std::vector<double>{1.0, 1.25, 1.75, 2.0, 1.5, 1.75, 2.25, 2.5, 2.5, 2.75, 3.25, 3.5, 3.0, 3.25, 3.75, 4.0});
  CHECK(upsample(x, 2).to_vector<double>() ==
        std::vector<double>{1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  CHECK(upsample(x, 1, UpsampleMode::bilinear).to_vector<double>() == std::vector<double>{1, 2, 3, 4});
}

TEST_CASE("upsample forward and backward match naive f64 loops", "[upsample]") {
  for (DType dt : {f64, f32}) {
    const double tol = dt == f64 ? 1e-12 : 1e-6;
    for (UpsampleMode mode : {UpsampleMode::nearest, UpsampleMode::bilinear}) {
      for (Dims d : {Dims{2, 7, 13, 3, 2}, Dims{1, 5, 3, 5, 3}, Dims{1, 1, 4, 3, 2}}) {
        INFO(dtype_name(dt) << " " << mode_name(mode) << " H " << d.H << " W " << d.W << " C " << d.C << " scale " << d.s);
        // A permuted NCHW tensor: the op must handle non-contiguous input.
        Tensor x = random({d.N, d.C, d.H, d.W}, 5 + d.C, dt).permute({0, 2, 3, 1}).set_requires_grad();
        Tensor y = upsample(x, d.s, mode);
        REQUIRE(y.shape() == Shape{d.N, d.H * d.s, d.W * d.s, d.C});
        CHECK(close(y.to_vector<double>(), forward_ref(d, mode, x.to_vector<double>()), tol, tol));
        Tensor gy = random(y.shape(), 77, dt);
        y.backward(gy);
        CHECK(close(x.grad().to_vector<double>(), backward_ref(d, mode, gy.to_vector<double>()), tol, tol));
      }
    }
  }
}

TEST_CASE("upsample gradcheck in f64", "[upsample][gradcheck]") {
  Generator gen(3);
  Tensor x = uniform({2, 3, 5, 3}, -1, 1, {f64}, &gen).set_requires_grad();
  for (int64_t s : {2, 3}) {
    CHECK(gradcheck([s](const TensorList& t) { return upsample(t[0], s, UpsampleMode::nearest); }, {x}));
    CHECK(gradcheck([s](const TensorList& t) { return upsample(t[0], s, UpsampleMode::bilinear); }, {x}));
  }
}

TEST_CASE("upsample in f16/bf16 computes in f32 and rounds once", "[upsample][numerics]") {
  for (DType dt : {f16, bf16}) {
    // One ulp of the output dtype, plus an absolute floor for gradient sums that cancel.
    const double ulp = dt == f16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
    for (UpsampleMode mode : {UpsampleMode::nearest, UpsampleMode::bilinear}) {
      INFO(dtype_name(dt) << " " << mode_name(mode));
      const Dims d{2, 7, 13, 5, 2};
      Tensor x = random({d.N, d.H, d.W, d.C}, 31, dt).set_requires_grad();
      Tensor y = upsample(x, d.s, mode);
      CHECK(y.dtype() == dt);
      const std::vector<double> ref = forward_ref(d, mode, x.to_vector<double>());
      if (mode == UpsampleMode::nearest) CHECK(y.to_vector<double>() == ref);
      else CHECK(close(y.to_vector<double>(), ref, ulp, ulp * 0.01));
      Tensor gy = random(y.shape(), 32, dt);
      y.backward(gy);
      CHECK(x.grad().dtype() == dt);
      CHECK(close(x.grad().to_vector<double>(), backward_ref(d, mode, gy.to_vector<double>()), ulp, ulp * 0.01));
    }
  }
  // The four gradients reaching one input: an f16 running sum would stay at 2048 (2049 is
  // not an f16), the f32 sum 2050.5 rounds once to 2050.
  Tensor x = zeros({1, 1, 1, 1}, {f16, Device::cpu(), true});
  upsample(x, 2).backward(from_vector({2048, 1, 1, 0.5}, {1, 2, 2, 1}, {f16}));
  CHECK(x.grad().item<double>() == 2050.0);
}

TEST_CASE("upsample errors name the op, the shape and what is valid", "[upsample][errors]") {
  CHECK_THROWS_WITH(upsample(ones({2, 3, 4})), Catch::Contains("upsample") && Catch::Contains("4-D") &&
                                                   Catch::Contains("[2, 3, 4]"));
  CHECK_THROWS_WITH(upsample(ones({1, 2, 2, 1}), 0), Catch::Contains("scale must be an integer >= 1, got 0"));
  CHECK_THROWS_WITH(upsample(ones({1, 2, 2, 1}, {i64})), Catch::Contains("floating") && Catch::Contains("i64"));
}
