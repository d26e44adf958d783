// bmm with broadcast batch axes and scaled dot-product attention: naive f64 loops,
// causal masking, a bool mask, autocast dtypes (products lower, softmax f32), gradchecks.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

// Naive single-head attention of q [L, E], k [S, E], v [S, F] (row-major), causal with
// the diagonal offset S - L as PyTorch's is_causal with L == S.
std::vector<double> attention_ref(const std::vector<double>& q, const std::vector<double>& k,
                                  const std::vector<double>& v, int64_t L, int64_t S, int64_t E, int64_t F,
                                  bool causal) {
  std::vector<double> out(static_cast<size_t>(L * F), 0.0);
  for (int64_t i = 0; i < L; ++i) {
    std::vector<double> s(static_cast<size_t>(S));
    double m = -INFINITY;
    for (int64_t j = 0; j < S; ++j) {
      double d = 0;
      for (int64_t e = 0; e < E; ++e) d += q[i * E + e] * k[j * E + e];
      s[j] = causal && j - i > S - L ? -INFINITY : d / std::sqrt(double(E));
      m = std::max(m, s[j]);
    }
    double z = 0;
    for (int64_t j = 0; j < S; ++j) z += std::exp(s[j] - m);
    for (int64_t j = 0; j < S; ++j)
      for (int64_t f = 0; f < F; ++f) out[i * F + f] += std::exp(s[j] - m) / z * v[j * F + f];
  }
  return out;
}

}  // namespace

TEST_CASE("bmm broadcasts batch axes and checks its arguments", "[bmm]") {
  Generator g(1);
  Tensor a = randn({2, 1, 3, 4}, {f64}, &g), b = randn({3, 4, 5}, {f64}, &g);
  Tensor c = bmm(a, b);
  REQUIRE(c.shape() == Shape{2, 3, 3, 5});
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>(), cv = c.to_vector<double>();
  bool ok = true;
  for (int p = 0; p < 2; ++p)
    for (int q = 0; q < 3; ++q)
      for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 5; ++j) {
          double s = 0;
          for (int k = 0; k < 4; ++k) s += av[(p * 3 + i) * 4 + k] * bv[(q * 4 + k) * 5 + j];
          ok = ok && std::abs(cv[((p * 3 + q) * 3 + i) * 5 + j] - s) < 1e-12;
        }
  CHECK(ok);
  Tensor al = a.set_requires_grad(), bl = b.set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return bmm(in[0], in[1]); }, {al, bl}));
  CHECK_THROWS_WITH(bmm(zeros({3, 4}), zeros({4, 5})), Catch::Contains("at least 3-D"));
  CHECK_THROWS_WITH(bmm(zeros({1, 3, 4}), zeros({1, 5, 5})), Catch::Contains("inner sizes differ"));
  CHECK_THROWS_WITH(bmm(zeros({2, 3, 4}), zeros({3, 4, 5})), Catch::Contains("bmm (batch axes)"));
}

TEST_CASE("scaled dot-product attention matches a naive f64 reference", "[attention]") {
  Generator g(2);
  for (bool causal : {false, true})
    for (int64_t S : {5, 7}) {
      INFO("causal " << causal << " S " << S);
      const int64_t L = 5, E = 4, F = 3;
      Tensor q = randn({2, L, E}, {f64}, &g), k = randn({2, S, E}, {f64}, &g), v = randn({2, S, F}, {f64}, &g);
      AttentionOptions o;
      o.causal = causal;
      Tensor y = scaled_dot_product_attention(q, k, v, o);
      for (int64_t b = 0; b < 2; ++b) {
        auto row = [&](const Tensor& t) { return t.select(0, b).contiguous().to_vector<double>(); };
        const std::vector<double> want = attention_ref(row(q), row(k), row(v), L, S, E, F, causal);
        const std::vector<double> got = row(y);
        for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(1e-12));
      }
    }
  // A bool mask (true = may attend) equal to the causal one gives the causal result.
  Tensor q = randn({1, 4, 2}, {f64}, &g);
  AttentionOptions causal, masked;
  causal.causal = true;
  masked.mask = tril(ones({4, 4})).to(b8);
  CHECK(allclose(scaled_dot_product_attention(q, q, q, causal), scaled_dot_product_attention(q, q, q, masked), 1e-14,
                 1e-14));
  Tensor ql = randn({2, 3, 4}, {f64}, &g).set_requires_grad(), kl = randn({2, 3, 4}, {f64}, &g).set_requires_grad();
  Tensor vl = randn({2, 3, 2}, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([&](const TensorList& in) { return scaled_dot_product_attention(in[0], in[1], in[2], causal); },
                  {ql, kl, vl}));
  CHECK_THROWS_WITH(scaled_dot_product_attention(zeros({2, 3}), zeros({2, 4}), zeros({2, 4})),
                    Catch::Contains("expected q [..., L, E] and k [..., S, E]"));
}

TEST_CASE("under autocast attention multiplies in f16 and normalises in f32", "[attention][autocast]") {
  Generator g(3);
  Tensor q = randn({1, 4, 8}, {f32}, &g);
  amp::Autocast ac(f16);
  CHECK(attention_weights(q, q).dtype() == f32);
  CHECK(scaled_dot_product_attention(q, q, q).dtype() == f16);
}

TEST_CASE("f16 and bf16 attention stay within a few roundings of the f64 result of the rounded inputs",
          "[attention][numerics]") {
  for (DType dt : {f16, bf16}) {
    INFO(dtype_name(dt));
    Generator g(6);
    const int64_t L = 6, E = 8, F = 4;
    Tensor q = uniform({L, E}, -2, 2, {dt}, &g), k = uniform({L, E}, -2, 2, {dt}, &g), v = uniform({L, F}, -2, 2, {dt}, &g);
    AttentionOptions o;
    o.causal = true;
    Tensor y = scaled_dot_product_attention(q, k, v, o);
    CHECK(y.dtype() == dt);
    // The chain rounds four times (scaled q, logits, weights, output), each by at most
    // half an ulp: 2^-11 (f16) or 2^-8 (bf16) relative, on values of size <= ~2 -> x8 margin.
    const double u = dt == f16 ? 0x1p-11 : 0x1p-8;
    const std::vector<double> want = attention_ref(q.to_vector<double>(), k.to_vector<double>(), v.to_vector<double>(),
                                                   L, L, E, F, true);
    const std::vector<double> got = y.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).margin(8 * u * 4));
  }
}
