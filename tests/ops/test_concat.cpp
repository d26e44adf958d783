// cat, stack, split, chunk and pad against naive index loops, their gradients (slices
// of the output gradient), dtype promotion, gradchecks and error messages.
#include <catch2/catch.hpp>

#include "halfgrad.h"
#include "tests/devices.h"
#include "tests/skip.h"

using namespace hg;

namespace {

Tensor random(const Shape& s, uint64_t seed, DType dt = f64) {
  Generator gen(seed);
  return uniform(s, -2, 2, {dt}, &gen);
}

// Row-major position of a multi-index.
int64_t flat(const Shape& s, const std::vector<int64_t>& idx) {
  int64_t f = 0;
  for (size_t d = 0; d < s.size(); ++d) f = f * s[d] + idx[d];
  return f;
}

// Calls f(index) for every multi-index of shape s, in row-major order.
template <class F>
void for_each_index(const Shape& s, F f) {
  std::vector<int64_t> idx(s.size(), 0);
  for (int64_t k = 0; k < numel_of(s); ++k) {
    f(idx);
    for (int64_t d = static_cast<int64_t>(s.size()) - 1; d >= 0; --d) {
      if (++idx[d] < s[d]) break;
      idx[d] = 0;
    }
  }
}

// The naive concatenation of xs along axis a.
std::vector<double> cat_ref(const std::vector<Tensor>& xs, int64_t a) {
  Shape out = xs[0].shape();
  out[a] = 0;
  for (const Tensor& x : xs) out[a] += x.size(a);
  std::vector<double> y(static_cast<size_t>(numel_of(out)));
  int64_t offset = 0;
  for (const Tensor& x : xs) {
    const std::vector<double> v = x.to_vector<double>();
    for_each_index(x.shape(), [&](std::vector<int64_t> idx) {
      const double value = v[flat(x.shape(), idx)];
      idx[a] += offset;
      y[flat(out, idx)] = value;
    });
    offset += x.size(a);
  }
  return y;
}

// The block of g (shape gs) starting at `start` with shape `s`.
std::vector<double> block_ref(const std::vector<double>& g, const Shape& gs, const Shape& s,
                              const std::vector<int64_t>& start) {
  std::vector<double> out;
  for_each_index(s, [&](std::vector<int64_t> idx) {
    for (size_t d = 0; d < idx.size(); ++d) idx[d] += start[d];
    out.push_back(g[flat(gs, idx)]);
  });
  return out;
}

}  // namespace

TEST_CASE("cat matches a naive copy on every axis; its gradient is the matching slice", "[concat]") {
  for (int64_t a : {0, 1, 2}) {
    INFO("axis " << a);
    Shape s0{2, 3, 5}, s1 = s0, s2 = s0;
    s1[a] = 1;
    s2[a] = 4;
    Tensor x0 = random(s0, 1).set_requires_grad(), x1 = random(s1, 2).set_requires_grad(),
           x2 = random(s2, 3).set_requires_grad();
    Tensor y = cat({x0, x1, x2}, a - 3);  // negative axes count from the end
    Shape ys = s0;
    ys[a] = s0[a] + 5;
    REQUIRE(y.shape() == ys);
    CHECK(y.to_vector<double>() == cat_ref({x0, x1, x2}, a));
    Tensor g = random(ys, 4);
    y.backward(g);
    const std::vector<double> gv = g.to_vector<double>();
    std::vector<int64_t> start(3, 0);
    CHECK(x0.grad().to_vector<double>() == block_ref(gv, ys, s0, start));
    start[a] = s0[a];
    CHECK(x1.grad().to_vector<double>() == block_ref(gv, ys, s1, start));
    start[a] = s0[a] + 1;
    CHECK(x2.grad().to_vector<double>() == block_ref(gv, ys, s2, start));
  }
  // The NHWC channel concatenation of a U-Net skip connection, with an empty part.
  Tensor a = random({2, 7, 13, 3}, 5, f32), b = random({2, 7, 13, 5}, 6, f32), e = zeros({2, 7, 13, 0});
  CHECK(cat({a, e, b}, 3).to_vector<double>() == cat_ref({a, b}, 3));
}

TEST_CASE("cat promotes to the widest floating input; gradients return in each input's dtype", "[concat]") {
  Tensor h = random({2, 3}, 1, f16).set_requires_grad(), f = random({1, 3}, 2, f32).set_requires_grad();
  Tensor y = cat({h, f}, 0);
  CHECK(y.dtype() == f32);
  CHECK(y.to_vector<double>() == cat_ref({h, f}, 0));  // f16 values are exact in f32
  y.backward(full({3, 3}, 0.1));
  CHECK(h.grad().dtype() == f16);
  CHECK(f.grad().dtype() == f32);
  CHECK(h.grad().to_vector<double>() == std::vector<double>(6, double(half(0.1f))));
  CHECK(cat({h, random({2, 3}, 3, bf16)}, 0).dtype() == f32);
  CHECK(cat({h, h}, 1).dtype() == f16);
  CHECK(cat({ones({2}, {i64}), ones({2}, {i64})}, 0).dtype() == i64);
}

TEST_CASE("stack inserts a new axis", "[concat]") {
  Tensor a = random({3, 5}, 1), b = random({3, 5}, 2);
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  Tensor y = stack({a, b}, 1);
  REQUIRE(y.shape() == Shape{3, 2, 5});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t j = 0; j < 5; ++j) {
      CHECK(y.at({i, 0, j}) == av[i * 5 + j]);
      CHECK(y.at({i, 1, j}) == bv[i * 5 + j]);
    }
  CHECK(stack({a, b}, -1).shape() == Shape{3, 5, 2});
  CHECK(stack({a}, 0).shape() == Shape{1, 3, 5});
}

TEST_CASE("split and chunk give views of the input", "[concat]") {
  Tensor x = random({4, 7, 3}, 1);
  std::vector<Tensor> p = split(x, 3, 1);
  REQUIRE(p.size() == 3);
  CHECK(p[0].shape() == Shape{4, 3, 3});
  CHECK(p[2].shape() == Shape{4, 1, 3});
  CHECK(p[1].storage() == x.storage());
  CHECK(p[1].to_vector<double>() == block_ref(x.to_vector<double>(), x.shape(), {4, 3, 3}, {0, 3, 0}));
  CHECK(split(x, 10, 1).size() == 1);
  CHECK(split(x, 2, -1).back().shape() == Shape{4, 7, 1});

  auto sizes = [](const std::vector<Tensor>& ts, int64_t a) {
    std::vector<int64_t> s;
    for (const Tensor& t : ts) s.push_back(t.size(a));
    return s;
  };
  CHECK(sizes(chunk(x, 3, 1), 1) == std::vector<int64_t>{3, 2, 2});
  CHECK(sizes(chunk(x, 2, 0), 0) == std::vector<int64_t>{2, 2});
  CHECK(sizes(chunk(x, 5, 2), 2) == std::vector<int64_t>{1, 1, 1, 0, 0});
  std::vector<Tensor> c = chunk(x, 3, 1);
  CHECK(c[2].to_vector<double>() == block_ref(x.to_vector<double>(), x.shape(), {4, 2, 3}, {0, 5, 0}));
}

TEST_CASE("pad fills the border with the value and copies the interior", "[concat]") {
  Tensor x = random({2, 3, 5, 3}, 1).set_requires_grad();
  const std::vector<int64_t> before{0, 1, 2, 0}, after{0, 2, 1, 1};
  Tensor y = pad(x, before, after, -1.5);
  REQUIRE(y.shape() == Shape{2, 6, 8, 4});
  const std::vector<double> xv = x.to_vector<double>(), yv = y.to_vector<double>();
  for_each_index(y.shape(), [&](const std::vector<int64_t>& idx) {
    std::vector<int64_t> in(4);
    bool inside = true;
    for (size_t d = 0; d < 4; ++d) {
      in[d] = idx[d] - before[d];
      inside = inside && in[d] >= 0 && in[d] < x.size(static_cast<int64_t>(d));
    }
    CHECK(yv[flat(y.shape(), idx)] == (inside ? xv[flat(x.shape(), in)] : -1.5));
  });
  Tensor g = random(y.shape(), 2);
  y.backward(g);
  CHECK(x.grad().to_vector<double>() == block_ref(g.to_vector<double>(), y.shape(), x.shape(), before));
  Tensor h = pad(ones({3}, {f16}), {1}, {0}, 65504.0);
  CHECK(h.dtype() == f16);
  CHECK(h.to_vector<double>() == std::vector<double>{65504, 1, 1, 1});
}

TEST_CASE("cat, stack, split, chunk and pad pass gradcheck in f64", "[concat][gradcheck]") {
  Tensor a = random({3, 2, 5}, 1).set_requires_grad(), b = random({3, 3, 5}, 2).set_requires_grad(),
         c = random({3, 2, 5}, 3).set_requires_grad();
  CHECK(gradcheck([](const TensorList& t) { return cat({t[0], t[1], t[2]}, 1); }, {a, b, c}));
  CHECK(gradcheck([](const TensorList& t) { return cat({t[0] * t[0], t[0], t[1]}, 1); }, {a, b}));
  CHECK(gradcheck([](const TensorList& t) { return stack({t[0], t[1] * 2.0}, 2); }, {a, c}));
  CHECK(gradcheck([](const TensorList& t) {
    std::vector<Tensor> p = split(t[0], 2, 1);
    return cat({p[2] * 3.0, p[0], p[1] * p[1]}, 1);
  }, {random({3, 5, 3}, 4).set_requires_grad()}));
  CHECK(gradcheck([](const TensorList& t) {
    std::vector<Tensor> p = chunk(t[0], 3, 0);
    return p[0] * p[1] + p[2];
  }, {random({6, 3}, 5).set_requires_grad()}));
  CHECK(gradcheck([](const TensorList& t) { return pad(t[0] * t[0], {1, 0, 2}, {0, 3, 1}, 0.5); }, {a}));
}

TEST_CASE("cat, stack, split, chunk and pad errors name the op and what is valid", "[concat][errors]") {
  CHECK_THROWS_WITH(cat({}, 0), Catch::Contains("cat") && Catch::Contains("non-empty list"));
  CHECK_THROWS_WITH(cat({ones({2, 3}), ones({2, 3, 1})}, 0),
                    Catch::Contains("tensor 1") && Catch::Contains("[2, 3, 1]") && Catch::Contains("[2, 3]") &&
                        Catch::Contains("same rank"));
  CHECK_THROWS_WITH(cat({ones({2, 3}), ones({2, 3}), ones({4, 4})}, 1),
                    Catch::Contains("tensor 2 has shape [4, 4] but tensor 0 has shape [2, 3]") &&
                        Catch::Contains("every axis except the cat axis 1"));
  CHECK_THROWS_WITH(cat({ones({2, 3})}, 2), Catch::Contains("cat"));
  CHECK_THROWS_WITH(stack({ones({2, 3}), ones({3, 2})}, 0),
                    Catch::Contains("stack: tensor 1 has shape [3, 2] but tensor 0 has shape [2, 3]"));
  CHECK_THROWS_WITH(stack({}, 0), Catch::Contains("stack") && Catch::Contains("non-empty"));
  CHECK_THROWS_WITH(split(ones({4}), 0, 0), Catch::Contains("split: size must be positive, got 0"));
  CHECK_THROWS_WITH(chunk(ones({4}), -2, 0), Catch::Contains("chunk: the number of chunks must be positive, got -2"));
  CHECK_THROWS_WITH(pad(ones({2, 3}), {1, -1}, {0, 0}),
                    Catch::Contains("pad: amounts must be non-negative") && Catch::Contains("before[1] = -1"));
  CHECK_THROWS_WITH(pad(ones({2, 3}), {1}, {0, 0}),
                    Catch::Contains("one entry per axis") && Catch::Contains("[2, 3]") && Catch::Contains("1 before"));
}

TEST_CASE("cat of tensors on different devices is an error", "[concat][errors]") {
  HG_REQUIRE_CUDA();
  CHECK_THROWS_WITH(cat({ones({2}), ones({2}, {f32, Device::cuda()})}, 0),
                    Catch::Contains("tensor 1 is on cuda:0 but tensor 0 is on cpu"));
}
