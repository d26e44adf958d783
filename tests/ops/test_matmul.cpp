// matmul: shapes, batching, f32 accumulation for f16/bf16, gradcheck, errors.
#include <catch2/catch.hpp>

#include "halfgrad.h"

using namespace hg;

namespace {
// Reference in f64 with plain loops.
std::vector<double> naive(const std::vector<double>& a, const std::vector<double>& b, int64_t M, int64_t K, int64_t N) {
  std::vector<double> o(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j)
      for (int64_t k = 0; k < K; ++k) o[i * N + j] += a[i * K + k] * b[k * N + j];
  return o;
}
}  // namespace

TEST_CASE("matmul matches a naive f64 product on odd shapes", "[matmul]") {
  Generator g(11);
  for (auto [M, K, N] : std::vector<std::array<int64_t, 3>>{{1, 1, 1}, {7, 13, 5}, {33, 17, 65}}) {
    Tensor a = randn({M, K}, {f64}, &g), b = randn({K, N}, {f64}, &g);
    auto ref = naive(a.to_vector<double>(), b.to_vector<double>(), M, K, N);
    CHECK(allclose(matmul(a, b), from_vector(ref, {M, N}, {f64}), 1e-12, 1e-12));
    // Transposed views are read through their strides.
    Tensor at = a.transpose(0, 1).contiguous().transpose(0, 1);
    CHECK(allclose(matmul(at, b), from_vector(ref, {M, N}, {f64}), 1e-12, 1e-12));
  }
}

TEST_CASE("matmul broadcasts batch dimensions and handles vectors", "[matmul]") {
  Generator g(12);
  Tensor a = randn({2, 1, 3, 4}, {f64}, &g), b = randn({5, 4, 2}, {f64}, &g);
  Tensor y = matmul(a, b);
  CHECK(y.shape() == Shape{2, 5, 3, 2});
  CHECK(allclose(y.select(0, 1).select(0, 3), matmul(a.select(0, 1).select(0, 0), b.select(0, 3)), 1e-12, 1e-12));
  Tensor v = randn({4}, {f64}, &g);
  CHECK(matmul(a.select(0, 0).select(0, 0), v).shape() == Shape{3});
  CHECK(matmul(v, v).dim() == 0);
}

TEST_CASE("f16/bf16 matmul accumulates in f32 and rounds once", "[matmul][numerics]") {
  for (DType dt : {f16, bf16}) {
    Generator g(5);
    Tensor a = randn({9, 130}, {dt}, &g), b = randn({130, 7}, {dt}, &g);
    Tensor ref = matmul(a.to(f64), b.to(f64));
    Tensor y = matmul(a, b);
    CHECK(y.dtype() == dt);
    // One rounding of the output plus f32 accumulation error.
    double tol = dt == f16 ? 1e-3 : 8e-3;
    CHECK(allclose(y.to(f64), ref, tol, 1e-3));
  }
  // 3000 products of 30: the f32 accumulator holds 90000; rounding the output to f16 overflows.
  Tensor big = full({1, 3000}, 30.0, {f16});
  Tensor r = matmul(big, full({3000, 1}, 1.0, {f16}));
  CHECK(std::isinf(r.item<double>()));  // 90000 > 65504, though every partial sum fits in f32
}

TEST_CASE("matmul gradcheck", "[matmul][gradcheck]") {
  Generator g(9);
  Tensor a = randn({2, 3, 4}, {f64}, &g).set_requires_grad(), b = randn({4, 5}, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([](const TensorList& t) { return matmul(t[0], t[1]); }, {a, b}));
  Tensor x = randn({3, 4}, {f64}, &g).set_requires_grad(), w = randn({2, 4}, {f64}, &g).set_requires_grad(),
         bias = randn({2}, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([](const TensorList& t) { return linear(t[0], t[1], t[2]); }, {x, w, bias}));
}

TEST_CASE("matmul errors name both shapes", "[matmul][errors]") {
  CHECK_THROWS_WITH(matmul(ones({2, 3}), ones({4, 2})), Catch::Contains("[2, 3]") && Catch::Contains("[4, 2]"));
  CHECK_THROWS_WITH(matmul(ones({2, 3}, {i64}), ones({3, 2}, {i64})), Catch::Contains("floating"));
  CHECK_THROWS_WITH(linear(ones({2, 3}), ones({4, 5})), Catch::Contains("in_features"));
}

TEST_CASE("linear adds its bias in the f32 sum and rounds once", "[matmul][numerics]") {
  // 1024 + 0.25 is no f16 (it rounds to 1024); summed in f32 with the bias -1024 it is 0.25.
  // 2048 + 0.5 - 1024 = 1024.5 is rounded once, a tie, to the even 1024.
  const Tensor x = from_vector({1024, 0.25, 2048, 0.5}, {2, 2}, {f16}), w = from_vector({1, 1}, {1, 2}, {f16});
  CHECK(linear(x, w, from_vector({-1024}, {1}, {f16})).to_vector<double>() == std::vector<double>{0.25, 1024});
  const Tensor xb = from_vector({256, 0.5}, {1, 2}, {bf16}), wb = from_vector({1, 1}, {1, 2}, {bf16});
  CHECK(linear(xb, wb, from_vector({-256}, {1}, {bf16})).item<double>() == 0.5);
}

TEST_CASE("linear adds the bias before the one rounding for 1-D, 2-D and 3-D inputs", "[matmul][linear][numerics]") {
  // x·w = 1024 + 0.25 = 1024.25 in f32; rounded first it is 1024 (the spacing there is 1 in
  // f16, 8 in bf16), and 1024 + (-1024) = 0. Added before the rounding, the bias leaves 0.25.
  const double want = 0.25;
  for (DType dt : {f16, bf16}) {
    Tensor w = from_vector({1, 1}, {1, 2}, {dt}), bias = from_vector({-1024}, {1}, {dt});
    Tensor x1 = from_vector({1024, 0.25}, {2}, {dt});
    Tensor y1 = linear(x1, w, bias);
    CHECK(y1.shape() == Shape{1});
    CHECK(y1.item<double>() == want);
    CHECK(linear(x1.view({1, 2}), w, bias).item<double>() == want);
    Tensor y3 = linear(x1.view({1, 1, 2}).expand({2, 3, 2}), w, bias);
    CHECK(y3.shape() == Shape{2, 3, 1});
    CHECK(y3.to_vector<double>() == std::vector<double>(6, want));
  }
}

TEST_CASE("linear gradcheck on 1-D and 3-D inputs", "[matmul][linear][gradcheck]") {
  Generator g(10);
  Tensor w = randn({2, 4}, {f64}, &g).set_requires_grad(), bias = randn({2}, {f64}, &g).set_requires_grad();
  for (Shape s : {Shape{4}, Shape{2, 3, 4}}) {
    Tensor x = randn(s, {f64}, &g).set_requires_grad();
    CHECK(gradcheck([](const TensorList& t) { return linear(t[0], t[1], t[2]); }, {x, w, bias}));
    CHECK(gradcheck([](const TensorList& t) { return linear(t[0], t[1]); }, {x, w}));
  }
}

TEST_CASE("matmul and linear refuse mixed dtypes outside autocast and follow the policy inside", "[matmul][dtype]") {
  const auto same_dtype = Catch::Contains("expected both operands to have the same dtype, got f16 and f32");
  CHECK_THROWS_WITH(matmul(ones({2, 3}, {f16}), ones({3, 2})), same_dtype && Catch::Contains("matmul"));
  CHECK_THROWS_WITH(matmul(ones({3}, {f16}), ones({3, 2}, {bf16})), Catch::Contains("got f16 and bf16"));
  CHECK_THROWS_WITH(linear(ones({2, 3}, {f16}), ones({4, 3})), same_dtype && Catch::Contains("linear"));
  CHECK_THROWS_WITH(linear(ones({3}, {f16}), ones({4, 3}, {f16}), zeros({4})),
                    Catch::Contains("linear: expected all operands to have the same dtype, got f16, f16 and f32") &&
                        Catch::Contains("bias f32[4]"));
  {
    amp::Autocast ac(f16);
    CHECK(matmul(ones({2, 3}, {f16}), ones({3, 2})).dtype() == f16);
    CHECK(linear(ones({2, 3}), ones({4, 3}, {f16}), zeros({4})).dtype() == f16);
  }
}
