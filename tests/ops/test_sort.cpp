// sort, argsort, topk and randperm: hand-computed orders, stability, NaN placement as in
// PyTorch, a naive reference on random data along a middle axis, gradients, errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("sort and argsort order values stably, NaN as the largest", "[sort]") {
  const double nan = std::nan("");
  Tensor x = tensor({3, 1, nan, 2, 1, -5}, {f32});
  SortResult up = sort(x);
  CHECK(up.indices.to_vector<int64_t>() == std::vector<int64_t>{5, 1, 4, 3, 0, 2});  // the two 1s keep their order
  std::vector<double> v = up.values.to_vector<double>();
  CHECK(std::vector<double>(v.begin(), v.end() - 1) == std::vector<double>{-5, 1, 1, 2, 3});
  CHECK(std::isnan(v.back()));
  SortResult down = sort(x, 0, true);
  CHECK(down.indices.to_vector<int64_t>() == std::vector<int64_t>{2, 0, 3, 1, 4, 5});
  CHECK(argsort(tensor({2, 0, 1}, {i64})).to_vector<int64_t>() == std::vector<int64_t>{1, 2, 0});
}

TEST_CASE("sort along a middle axis matches a naive sort of each line", "[sort]") {
  for (DType dt : {f64, f32, f16, bf16}) {
    INFO(dtype_name(dt));
    Generator g(4);
    Tensor x = uniform({3, 17, 4}, -50, 50, {dt}, &g);
    SortResult r = sort(x, 1, true);
    CHECK(r.values.dtype() == dt);
    const std::vector<double> xv = x.to_vector<double>(), sv = r.values.to_vector<double>();
    const std::vector<int64_t> iv = r.indices.to_vector<int64_t>();
    bool ok = true;
    for (int o = 0; o < 3; ++o)
      for (int i = 0; i < 4; ++i) {
        std::vector<double> line;
        for (int j = 0; j < 17; ++j) line.push_back(xv[(o * 17 + j) * 4 + i]);
        std::vector<double> want = line;
        std::stable_sort(want.begin(), want.end(), std::greater<>());
        for (int j = 0; j < 17; ++j) {
          const size_t at = static_cast<size_t>((o * 17 + j) * 4 + i);
          ok = ok && sv[at] == want[j] && line[static_cast<size_t>(iv[at])] == want[j];
        }
      }
    CHECK(ok);
  }
}

TEST_CASE("topk returns the k largest or smallest in order, with gradients", "[sort][topk]") {
  Tensor x = tensor({4, 9, 1, 7, 9, 2}, {f64}).view({2, 3});
  SortResult big = topk(x, 2);
  CHECK(big.values.to_vector<double>() == std::vector<double>{9, 4, 9, 7});
  CHECK(big.indices.to_vector<int64_t>() == std::vector<int64_t>{1, 0, 1, 0});
  SortResult small = topk(x, 1, 0, false);
  CHECK(small.values.to_vector<double>() == std::vector<double>{4, 9, 1});
  CHECK(topk(x, 0).values.shape() == Shape{2, 0});
  Generator g(5);
  Tensor xl = uniform({3, 5}, -1, 1, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return topk(in[0], 3, 1).values; }, {xl}));
  CHECK(gradcheck([](const TensorList& in) { return sort(in[0], 0).values; }, {xl}));
  CHECK_THROWS_WITH(topk(x, 4), Catch::Contains("k = 4 is out of range for an axis of size 3"));
  CHECK_THROWS_WITH(sort(x, 2), Catch::Contains("axis"));
}

TEST_CASE("randperm is a permutation, deterministic by seed", "[sort][randperm]") {
  Generator a(7), b(7), c(8);
  Tensor p = randperm(1000, {i64}, &a);
  std::vector<int64_t> v = p.to_vector<int64_t>();
  std::vector<int64_t> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(1000);
  std::iota(iota.begin(), iota.end(), 0);
  CHECK(sorted == iota);
  CHECK(v != iota);
  CHECK(randperm(1000, {i64}, &b).to_vector<int64_t>() == v);
  CHECK(randperm(1000, {i64}, &c).to_vector<int64_t>() != v);
  CHECK(randperm(0).numel() == 0);
  CHECK(randperm(5, {f32}).dtype() == f32);
  CHECK_THROWS_WITH(randperm(-1), Catch::Contains("non-negative"));
}
