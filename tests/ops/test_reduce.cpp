// Reductions: values, keepdim, f32 accumulation inside f16 ops, gradchecks, errors.
#include <catch2/catch.hpp>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("sum and mean over axes, with and without keepdim", "[reduce]") {
  Tensor t = arange(0, 24, 1, {f64}).reshape({2, 3, 4});
  CHECK(sum(t).item<double>() == 276.0);
  CHECK(sum(t, {0}).shape() == Shape{3, 4});
  CHECK(sum(t, {0}).at({1, 2}) == 6.0 + 18.0);
  CHECK(sum(t, {-1}, true).shape() == Shape{2, 3, 1});
  CHECK(sum(t, {-1}, true).at({1, 2, 0}) == 20.0 + 21 + 22 + 23);
  CHECK(sum(t, {0, 2}).to_vector<double>() == std::vector<double>{60, 92, 124});  // the general strided path
  CHECK(mean(t, {1}).at({0, 0}) == 4.0);
  CHECK(max(t, {2}).to_vector<double>() == std::vector<double>{3, 7, 11, 15, 19, 23});
  CHECK(min(t.permute({2, 1, 0}), {1}).at({3, 1}) == 15.0);
  CHECK(argmax(tensor({1, 5, 3, 5}), 0).item<int64_t>() == 1);  // the first maximum wins
  Tensor m = tensor({1, 9, 2, 8, 7, 3}).reshape({2, 3});
  CHECK(argmax(m, 1).to_vector<int64_t>() == std::vector<int64_t>{1, 0});
  CHECK(argmax(m, 0).to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1});
}

TEST_CASE("f16 sums accumulate in f32 inside the op and round once", "[reduce][numerics]") {
  // 70,000 ones: the f32 accumulator holds 70000 exactly; stored as f16 it overflows.
  Tensor ones16 = ones({70000}, {f16});
  CHECK(std::isinf(sum(ones16).item<double>()));
  CHECK(sum(ones16.to(f32)).item<double>() == 70000.0);
  // The mean divides inside the f32 accumulator, so it does not overflow.
  CHECK(mean(ones16).item<double>() == 1.0);
  // 4096 + 1 + 1 + ... in f16 would stall at 4096 if accumulated in f16 (ulp 4); in f32 it does not.
  Tensor v = ones({1025}, {f16});
  fill_(v.narrow(0, 0, 1), 4096.0);
  CHECK(sum(v).item<double>() == 5120.0);
}

TEST_CASE("reductions pass gradcheck", "[reduce][gradcheck]") {
  Generator g(3);
  Tensor x = randn({3, 4, 5}, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([](const TensorList& t) { return sum(t[0], {1}); }, {x}));
  CHECK(gradcheck([](const TensorList& t) { return mean(t[0], {0, 2}, true); }, {x}));
  CHECK(gradcheck([](const TensorList& t) { return max(t[0], {2}); }, {x}));
  CHECK(gradcheck([](const TensorList& t) { return min(t[0]); }, {x}));
  CHECK(gradcheck([](const TensorList& t) { return sum(t[0].permute({2, 0, 1}).reshape({5, 12}), {0}); }, {x}));
}

TEST_CASE("reduction errors", "[reduce][errors]") {
  Tensor t = ones({2, 3});
  CHECK_THROWS_WITH(sum(t, {2}), Catch::Contains("axis 2") && Catch::Contains("-2 to 1"));
  CHECK_THROWS_WITH(sum(t, {1, -1}), Catch::Contains("twice"));
  CHECK_THROWS_WITH(max(ones({0, 3}), {0}), Catch::Contains("empty"));
}
