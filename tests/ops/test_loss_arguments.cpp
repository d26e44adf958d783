// Loss arguments that make no loss (issue 17, item 9): class weights that are NaN,
// negative or all zero, and binary targets outside [0, 1], are refused by name.
#include <catch2/catch.hpp>

#include <cmath>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("cross_entropy refuses NaN, negative, infinite and all-zero class weights", "[loss][errors]") {
  const Tensor x = tensor({1, 2, 3, 4, 5, 6}).reshape({2, 3});
  const Tensor t = from_data<int64_t>({0, 2}, {2}, {i64});
  CHECK_THROWS_WITH(cross_entropy(x, t, {.weight = tensor({1, NAN, 1})}),
                    Catch::Contains("class weight 1 is nan") && Catch::Contains("finite and >= 0"));
  CHECK_THROWS_WITH(cross_entropy(x, t, {.weight = tensor({1, 1, -0.5})}), Catch::Contains("class weight 2 is -0.5"));
  CHECK_THROWS_WITH(cross_entropy(x, t, {.weight = tensor({INFINITY, 1, 1})}), Catch::Contains("class weight 0 is inf"));
  CHECK_THROWS_WITH(cross_entropy(x, t, {.weight = zeros({3})}), Catch::Contains("every class weight is 0"));
  CHECK_THROWS_WITH(cross_entropy(x, t, {.weight = zeros({3}, {f16})}), Catch::Contains("every class weight is 0"));
  // Zero for some classes is fine: PyTorch's weighted mean, by hand.
  const double l0 = std::log(std::exp(1) + std::exp(2) + std::exp(3)) - 1;
  const double l1 = std::log(std::exp(4) + std::exp(5) + std::exp(6)) - 6;
  CHECK(cross_entropy(x, t, {.weight = tensor({2, 0, 1})}).item<double>() == Approx((2 * l0 + l1) / 3).epsilon(1e-6));
}

TEST_CASE("bce_with_logits refuses targets outside [0, 1] and NaN targets", "[loss][errors]") {
  const Tensor x = tensor({0.5, -1, 2});
  CHECK_THROWS_WITH(bce_with_logits(x, tensor({0, 1, 1.5})),
                    Catch::Contains("bce_with_logits") && Catch::Contains("[0, 1]") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(bce_with_logits(x, tensor({-0.25, 0, 1})), Catch::Contains("-0.25"));
  CHECK_THROWS_WITH(bce_with_logits(x, tensor({0, NAN, 1})), Catch::Contains("[0, 1]"));
  CHECK_THROWS_WITH(bce_with_logits(x.to(f16), tensor({0, 1, 2}, {f16})), Catch::Contains("[0, 1]"));
  // The bounds themselves and an empty target are valid.
  const double want = (std::log1p(std::exp(-0.5)) + std::log1p(std::exp(-1.0)) + std::log1p(std::exp(-2.0))) / 3;
  CHECK(bce_with_logits(x, tensor({1, 0, 1})).item<double>() == Approx(want).epsilon(1e-6));
  CHECK_NOTHROW(bce_with_logits(zeros({0}), zeros({0})));
}
