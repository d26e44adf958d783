// index_select, gather and embedding: values against hand-computed results and naive
// loops, repeated indices in the backward (summed in f32, rounded once), gradchecks,
// errors, f16/bf16 exactness (they copy values).
#include <catch2/catch.hpp>

#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

Tensor idx(std::initializer_list<double> v) { return tensor(v, {i64}); }

}  // namespace

TEST_CASE("index_select picks slices along any axis", "[index]") {
  Tensor x = arange(0, 24, 1, {f64}).view({2, 3, 4});
  CHECK(index_select(x, 0, idx({1})).to_vector<double>() ==
        std::vector<double>{12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23});
  // axis 1, repeated and reordered indices
  CHECK(index_select(x, 1, idx({2, 0, 2})).to_vector<double>() ==
        std::vector<double>{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11, 20, 21, 22, 23, 12, 13, 14, 15, 20, 21, 22, 23});
  Tensor last = index_select(x, -1, idx({3, 0}));
  CHECK(last.shape() == Shape{2, 3, 2});
  CHECK(last.to_vector<double>() == std::vector<double>{3, 0, 7, 4, 11, 8, 15, 12, 19, 16, 23, 20});
  // A non-contiguous input and a 0-d index (the axis keeps size 1, as torch.index_select).
  CHECK(index_select(x.transpose(0, 2), 0, tensor({1}, {i64}).view({})).to_vector<double>() ==
        std::vector<double>{1, 13, 5, 17, 9, 21});
  CHECK(index_select(x, 1, zeros({0}, {i64})).shape() == Shape{2, 0, 4});
}

TEST_CASE("f16 and bf16 index ops copy values exactly", "[index][numerics]") {
  for (DType dt : {f16, bf16}) {
    Generator g(3);
    Tensor x = uniform({5, 7}, -1000, 1000, {dt}, &g);
    Tensor y = index_select(x, 0, idx({4, 4, 1}));
    CHECK(y.dtype() == dt);
    const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
    for (int j = 0; j < 7; ++j) {
      CHECK(yv[j] == xv[4 * 7 + j]);
      CHECK(yv[14 + j] == xv[7 + j]);
    }
  }
}

TEST_CASE("index_select backward sums repeated indices in f32 and rounds once", "[index][autograd]") {
  // 3000 f16 gradients of 1 land on one row. Summed in f16 the total stalls at 2048
  // (2048 + 1 rounds back to 2048); in f32 it is 3000, which f16 holds exactly.
  Tensor w = zeros({3, 1}, {f16}).set_requires_grad();
  Tensor y = index_select(w, 0, full({3000}, 2, {i64}));
  y.backward(ones({3000, 1}, {f16}));
  CHECK(w.grad().to_vector<double>() == std::vector<double>{0, 0, 3000});
  // f64 finite differences on every axis.
  Generator g(1);
  Tensor x = uniform({3, 4, 2}, -2, 2, {f64}, &g).set_requires_grad();
  for (int64_t axis : {0, 1, 2})
    CHECK(gradcheck([&](const TensorList& in) { return index_select(in[0], axis, idx({1, 0, 1})); }, {x}));
}

TEST_CASE("indices modified in place after index_select are refused in backward", "[index][version]") {
  Tensor w = zeros({3, 1}, {f32}).set_requires_grad();
  Tensor i = idx({0, 2});
  Tensor y = index_select(w, 0, i);
  fill_(i, 1);  // the gradient would land on row 1 instead of rows 0 and 2
  CHECK_THROWS_WITH(y.backward(ones({2, 1})), Catch::Contains("indices") && Catch::Contains("in-place"));
}

TEST_CASE("gather follows torch.gather, including smaller indices", "[index]") {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}, {f64}).view({2, 3});
  // torch.gather(x, 1, [[2, 0], [1, 1]]) = [[3, 1], [5, 5]]
  Tensor i1 = tensor({2, 0, 1, 1}, {i64}).view({2, 2});
  CHECK(gather(x, 1, i1).to_vector<double>() == std::vector<double>{3, 1, 5, 5});
  // torch.gather(x, 0, [[1, 0, 1]]) = [[4, 2, 6]]
  CHECK(gather(x, 0, tensor({1, 0, 1}, {i64}).view({1, 3})).to_vector<double>() == std::vector<double>{4, 2, 6});
  // index [1, 2] on axis 1 reads row 0 only, columns as given
  CHECK(gather(x, 1, tensor({2, 2}, {i64}).view({1, 2})).to_vector<double>() == std::vector<double>{3, 3});
  Tensor xl = x.set_requires_grad();
  CHECK(gradcheck([&](const TensorList& in) { return gather(in[0], 1, tensor({2, 2}, {i64}).view({1, 2})); }, {xl}));
  CHECK(gradcheck([&](const TensorList& in) { return gather(in[0], 0, tensor({1, 0, 1}, {i64}).view({1, 3})); },
                  {xl}));
}

TEST_CASE("embedding looks up rows for indices of any shape", "[index]") {
  Tensor w = arange(0, 8, 1, {f32}).view({4, 2});
  Tensor e = embedding(w, tensor({3, 0, 3, 1}, {i64}).view({2, 2}));
  CHECK(e.shape() == Shape{2, 2, 2});
  CHECK(e.to_vector<double>() == std::vector<double>{6, 7, 0, 1, 6, 7, 2, 3});
  Generator g(2);
  Tensor wl = randn({5, 3}, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([&](const TensorList& in) { return embedding(in[0], tensor({4, 4, 0}, {i64}).view({3, 1})); },
                  {wl}));
}

TEST_CASE("index ops reject bad indices with clear errors", "[index][errors]") {
  Tensor x = zeros({3, 4});
  CHECK_THROWS_WITH(index_select(x, 0, idx({3})), Catch::Contains("index 3 is out of range for an axis of size 3"));
  CHECK_THROWS_WITH(index_select(x, 0, idx({-1})), Catch::Contains("negative indices are not wrapped"));
  CHECK_THROWS_WITH(index_select(x, 0, tensor({0})), Catch::Contains("indices must be an i64 tensor, got f32"));
  CHECK_THROWS_WITH(index_select(x, 2, idx({0})), Catch::Contains("axis"));
  CHECK_THROWS_WITH(index_select(x, 0, zeros({1, 1}, {i64})), Catch::Contains("0-d or 1-d"));
  CHECK_THROWS_WITH(gather(x, 0, zeros({4}, {i64})), Catch::Contains("must have the tensor's rank 2"));
  CHECK_THROWS_WITH(gather(x, 0, zeros({1, 5}, {i64})), Catch::Contains("larger than the tensor"));
  CHECK_THROWS_WITH(embedding(zeros({4}), idx({0})), Catch::Contains("[num_embeddings, embedding_dim]"));
  CHECK_THROWS_WITH(embedding(zeros({4, 2}), idx({4})), Catch::Contains("index 4 is out of range"));
}
