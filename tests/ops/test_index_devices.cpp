// index_select, gather, embedding, sort, topk and randperm on every device (cuda:0 too, under
// the emulation or on a GPU): values against naive loops and hand-computed orders (NaN,
// ties, signed zeros, long rows), backward sums against an f64 reference and bit for bit
// against the CPU's (the CUDA scatter adds in the CPU's order), out-of-range indices.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "halfgrad.h"
#include "tests/devices.h"

using namespace hg;

namespace {

std::vector<double> host(const Tensor& t) { return t.to(Device::cpu()).to_vector<double>(); }
std::vector<int64_t> host_i64(const Tensor& t) { return t.to(Device::cpu()).to_vector<int64_t>(); }

// Values 0..10 in a scrambled order: exact in every dtype (b8 keeps whether they are 0).
Tensor scrambled(const Shape& s, DType dt, Device d) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = static_cast<double>((k * 7) % 11);
  return from_vector(v, s, {f64}).to(dt).to(d);
}

// The stable order of a line, NaN largest; `descending` puts NaN first.
std::vector<int64_t> naive_order(const std::vector<double>& line, bool descending) {
  std::vector<int64_t> order(line.size());
  std::iota(order.begin(), order.end(), int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
    const double x = line[static_cast<size_t>(a)], y = line[static_cast<size_t>(b)];
    if (descending) return !std::isnan(y) && (std::isnan(x) || x > y);
    return !std::isnan(x) && (std::isnan(y) || x < y);
  });
  return order;
}

}  // namespace

TEST_CASE("index_select, gather and embedding give the naive loop's values on every device", "[index][devices]") {
  for (Device d : test::devices()) {
    for (DType dt : {f64, f32, f16, bf16, i64, b8}) {
      INFO(test::device_label(d) << ", " << dtype_name(dt));
      const Tensor x = scrambled({3, 4, 5}, dt, d);
      const std::vector<double> xv = host(x);
      const auto at = [&](int64_t a, int64_t b, int64_t c) { return xv[static_cast<size_t>((a * 4 + b) * 5 + c)]; };
      const std::vector<int64_t> pick{3, 0, 3, 1, 2};
      const Tensor y = index_select(x, 1, tensor({3, 0, 3, 1, 2}, {i64, d}));
      CHECK(y.dtype() == dt);
      std::vector<double> want;
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t j : pick)
          for (int64_t c = 0; c < 5; ++c) want.push_back(at(a, j, c));
      CHECK(host(y) == want);
      // gather on the last axis with an index smaller than x on axis 1: y[a][b][c] = x[a][b][i[a][b][c]]
      Generator g(11);
      const Tensor gi = randint(0, 5, {3, 2, 7}, {i64, d}, &g);
      const std::vector<int64_t> iv = host_i64(gi);
      want.clear();
      for (int64_t a = 0; a < 3; ++a)
        for (int64_t b = 0; b < 2; ++b)
          for (int64_t c = 0; c < 7; ++c) want.push_back(at(a, b, iv[static_cast<size_t>((a * 2 + b) * 7 + c)]));
      CHECK(host(gather(x, 2, gi)) == want);
    }
    const Tensor w = arange(0, 8, 1, {f32}).view({4, 2}).to(d);
    const Tensor e = embedding(w, tensor({3, 0, 3, 1}, {i64, d}).view({2, 2}));
    CHECK(e.shape() == Shape{2, 2, 2});
    CHECK(host(e) == std::vector<double>{6, 7, 0, 1, 6, 7, 2, 3});
  }
}

TEST_CASE("index backward sums repeated indices in f32, in the CPU's order, on every device",
          "[index][autograd][devices]") {
  Generator g(5);
  const Tensor tokens = randint(0, 50, {40, 100}, {i64}, &g);
  const Tensor gy = randn({40, 100, 8}, {f64}, &g);
  const Tensor gather_index = randint(0, 6, {3, 9, 4}, {i64}, &g);
  const Tensor gg = randn({3, 9, 4}, {f64}, &g);
  // f64 references: each row of the embedding's gradient sums the rows its tokens picked.
  std::vector<double> emb_want(50 * 8, 0.0), gat_want(3 * 6 * 4, 0.0);
  const std::vector<int64_t> tv = tokens.to_vector<int64_t>(), giv = gather_index.to_vector<int64_t>();
  const std::vector<double> gyv = gy.to_vector<double>(), ggv = gg.to_vector<double>();
  for (size_t t = 0; t < tv.size(); ++t)
    for (size_t c = 0; c < 8; ++c) emb_want[static_cast<size_t>(tv[t]) * 8 + c] += gyv[t * 8 + c];
  for (size_t a = 0; a < 3; ++a)
    for (size_t m = 0; m < 9; ++m)
      for (size_t c = 0; c < 4; ++c) {
        const size_t k = (a * 9 + m) * 4 + c;
        gat_want[(a * 6 + static_cast<size_t>(giv[k])) * 4 + c] += ggv[k];
      }
  for (DType dt : {f32, f64, bf16}) {
    std::vector<double> emb_cpu, gat_cpu;
    for (Device d : test::devices()) {
      INFO(test::device_label(d) << ", " << dtype_name(dt));
      Tensor w = zeros({50, 8}, {dt, d}).set_requires_grad();
      embedding(w, tokens.to(d)).backward(gy.to(dt).to(d));
      Tensor x = zeros({3, 6, 4}, {dt, d}).set_requires_grad();
      gather(x, 1, gather_index.to(d)).backward(gg.to(dt).to(d));
      const std::vector<double> emb = host(w.grad()), gat = host(x.grad());
      const double tol = dt == bf16 ? 2e-2 : 1e-5;  // the inputs are rounded to dt, the sum once
      for (size_t k = 0; k < emb.size(); ++k) CHECK(emb[k] == Approx(emb_want[k]).margin(tol * 10).epsilon(tol));
      for (size_t k = 0; k < gat.size(); ++k) CHECK(gat[k] == Approx(gat_want[k]).margin(tol * 10).epsilon(tol));
      if (d.is_cpu()) {
        emb_cpu = emb;
        gat_cpu = gat;
      } else {
        CHECK(emb == emb_cpu);
        CHECK(gat == gat_cpu);
      }
    }
  }
  // index_select on a middle axis (one index shared by every line) against f64 sums.
  const Tensor pick = randint(0, 5, {30}, {i64}, &g), gs = randn({4, 30, 3}, {f64}, &g);
  std::vector<double> sel_want(4 * 5 * 3, 0.0);
  const std::vector<int64_t> pv = pick.to_vector<int64_t>();
  const std::vector<double> gsv = gs.to_vector<double>();
  for (size_t a = 0; a < 4; ++a)
    for (size_t m = 0; m < 30; ++m)
      for (size_t c = 0; c < 3; ++c)
        sel_want[(a * 5 + static_cast<size_t>(pv[m])) * 3 + c] += gsv[(a * 30 + m) * 3 + c];
  std::vector<double> sel_cpu;
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    Tensor x = zeros({4, 5, 3}, {f32, d}).set_requires_grad();
    index_select(x, 1, pick.to(d)).backward(gs.to(f32).to(d));
    const std::vector<double> sel = host(x.grad());
    for (size_t k = 0; k < sel.size(); ++k) CHECK(sel[k] == Approx(sel_want[k]).margin(1e-5));
    if (d.is_cpu()) sel_cpu = sel;
    else CHECK(sel == sel_cpu);
  }
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    // 3000 f16 ones on one row: 3000 in f32 (an f16 running sum would stall at 2048).
    Tensor w = zeros({3, 1}, {f16, d}).set_requires_grad();
    embedding(w, full({3000}, 2, {i64, d})).backward(ones({3000, 1}, {f16, d}));
    CHECK(host(w.grad()) == std::vector<double>{0, 0, 3000});
  }
}

TEST_CASE("index and sort ops pass gradcheck in f64 on every device", "[index][sort][autograd][devices]") {
  // gradcheck takes CPU leaves: each function moves its input to d and its result back.
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    Generator g(6);
    const Tensor x = uniform({3, 5, 2}, -2, 2, {f64}, &g).set_requires_grad();
    const Tensor pick = tensor({4, 0, 4, 2}, {i64, d}), where = randint(0, 5, {3, 7, 2}, {i64}, &g).to(d);
    const Device cpu = Device::cpu();
    CHECK(gradcheck([&](const TensorList& in) { return index_select(in[0].to(d), 1, pick).to(cpu); }, {x}));
    CHECK(gradcheck([&](const TensorList& in) { return gather(in[0].to(d), 1, where).to(cpu); }, {x}));
    CHECK(gradcheck(
        [&](const TensorList& in) { return embedding(in[0].to(d).view({15, 2}), pick.view({2, 2})).to(cpu); }, {x}));
    CHECK(gradcheck([&](const TensorList& in) { return topk(in[0].to(d), 3, 1).values.to(cpu); }, {x}));
    CHECK(gradcheck([&](const TensorList& in) { return sort(in[0].to(d), 1, true).values.to(cpu); }, {x}));
  }
}

TEST_CASE("sort and argsort on every device: NaN last, ties stable, -0 equal to +0", "[sort][devices]") {
  const double nan = std::nan("");
  for (Device d : test::devices()) {
    for (DType dt : {f64, f32, f16, bf16}) {
      INFO(test::device_label(d) << ", " << dtype_name(dt));
      const Tensor x = tensor({3, 1, nan, 2, 1, -5, -0.0, 0.0, nan}, {dt, d});
      CHECK(host_i64(argsort(x)) == std::vector<int64_t>{5, 6, 7, 1, 4, 3, 0, 2, 8});
      CHECK(host_i64(argsort(x, 0, true)) == std::vector<int64_t>{2, 8, 0, 3, 1, 4, 6, 7, 5});
      const std::vector<double> v = host(sort(x).values);
      CHECK(std::vector<double>(v.begin(), v.begin() + 7) == std::vector<double>{-5, -0.0, 0, 1, 1, 2, 3});
      CHECK((std::isnan(v[7]) && std::isnan(v[8])));
    }
    INFO(test::device_label(d));
    const Tensor xi = tensor({5, -3, 5, 0, -3}, {i64, d});
    CHECK(host_i64(argsort(xi)) == std::vector<int64_t>{1, 4, 3, 0, 2});
    CHECK(host_i64(argsort(xi, 0, true)) == std::vector<int64_t>{0, 2, 3, 1, 4});
    const Tensor xb = tensor({1, 0, 1, 0}, {b8, d});
    CHECK(host_i64(argsort(xb)) == std::vector<int64_t>{1, 3, 0, 2});
    CHECK(host_i64(argsort(xb, 0, true)) == std::vector<int64_t>{0, 2, 1, 3});
    CHECK(host_i64(argsort(tensor({4}, {f32, d}))) == std::vector<int64_t>{0});
    CHECK(argsort(zeros({2, 0}, {f32, d}), 1).shape() == Shape{2, 0});
  }
}

TEST_CASE("long rows along a middle axis sort as a naive stable sort on every device", "[sort][devices]") {
  // Not powers of two; 40 distinct values make long runs of ties. On cuda 1500 takes the
  // one-block shared-memory sort, 3000 the multi-pass one.
  for (int64_t n : {1500, 3000}) {
    Generator g(9);
    const Tensor base = randint(0, 40, {2, n, 3}, {i64}, &g).to(f32);
    const std::vector<double> xv = base.to_vector<double>();
    for (Device d : test::devices()) {
      for (bool descending : {false, true}) {
        INFO(test::device_label(d) << ", n " << n << (descending ? ", descending" : ", ascending"));
        const std::vector<int64_t> got = host_i64(argsort(base.to(d), 1, descending));
        bool ok = true;
        for (int64_t o = 0; o < 2; ++o)
          for (int64_t i = 0; i < 3; ++i) {
            std::vector<double> line;
            for (int64_t j = 0; j < n; ++j) line.push_back(xv[static_cast<size_t>((o * n + j) * 3 + i)]);
            const std::vector<int64_t> want = naive_order(line, descending);
            for (int64_t j = 0; j < n; ++j) ok = ok && got[static_cast<size_t>((o * n + j) * 3 + i)] == want[j];
          }
        CHECK(ok);
      }
    }
  }
}

TEST_CASE("topk on every device returns the k largest or smallest with their gradient", "[sort][topk][devices]") {
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    const Tensor x = tensor({4, 9, 1, 7, 9, 2}, {f32, d}).view({2, 3}).set_requires_grad();
    const SortResult big = topk(x, 2);
    CHECK(host(big.values) == std::vector<double>{9, 4, 9, 7});
    CHECK(host_i64(big.indices) == std::vector<int64_t>{1, 0, 1, 0});
    CHECK(host(topk(x, 1, 0, false).values) == std::vector<double>{4, 9, 1});
    big.values.backward(tensor({1, 2, 3, 4}, {f32, d}).view({2, 2}));
    CHECK(host(x.grad()) == std::vector<double>{2, 1, 0, 4, 3, 0});
  }
}

TEST_CASE("randperm gives one permutation per seed on every device", "[sort][randperm][devices]") {
  Generator c(7);
  const std::vector<int64_t> cpu = randperm(3000, {i64}, &c).to_vector<int64_t>();
  std::vector<int64_t> sorted = cpu;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(3000);
  std::iota(iota.begin(), iota.end(), int64_t{0});
  CHECK(sorted == iota);
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    Generator g(7);
    const Tensor p = randperm(3000, {i64, d}, &g);
    CHECK(p.device() == d);
    CHECK(host_i64(p) == cpu);
  }
}

TEST_CASE("index ops on every device reject out-of-range indices with hg::Error", "[index][errors][devices]") {
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    const Tensor x = scrambled({3, 4}, f32, d);
    CHECK_THROWS_WITH(index_select(x, 0, tensor({0, 3}, {i64, d})),
                      Catch::Contains("index_select: index 3 is out of range for an axis of size 3"));
    CHECK_THROWS_WITH(index_select(x, 1, tensor({-1}, {i64, d})), Catch::Contains("negative indices are not wrapped"));
    CHECK_THROWS_WITH(gather(x, 1, tensor({0, 1, 4}, {i64, d}).view({1, 3})),
                      Catch::Contains("gather: index 4 is out of range for an axis of size 4"));
    CHECK_THROWS_WITH(embedding(x, tensor({1, 1000000000000}, {i64, d})),
                      Catch::Contains("index 1000000000000 is out of range"));
    if (d.is_cuda())
      CHECK_THROWS_WITH(index_select(x, 0, zeros({1}, {i64})), Catch::Contains("but the indices are on cpu"));
    // The device is still usable after the error.
    CHECK(host(index_select(x, 0, tensor({2}, {i64, d}))) == std::vector<double>{1, 8, 4, 0});
  }
}
