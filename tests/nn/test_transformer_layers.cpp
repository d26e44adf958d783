// LayerNorm, Embedding, GELU and MultiheadAttention modules: parameters as PyTorch names
// them, forwards against the ops they wrap, causality, module paths under autocast.
#include <catch2/catch.hpp>

#include <vector>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("LayerNorm, Embedding and GELU modules wrap their ops", "[nn][transformer]") {
  manual_seed(1);
  nn::LayerNorm ln(6);
  REQUIRE(ln.named_parameters().size() == 2);
  CHECK(ln.named_parameters()[0].first == "weight");
  Generator g(1);
  Tensor x = randn({2, 3, 6}, {f32}, &g);
  CHECK(allclose(ln(x), layer_norm(x, {6}, ones({6}), zeros({6}))));
  CHECK(nn::LayerNorm(Shape{3, 6}, 1e-5, false).parameters().empty());
  CHECK_THROWS_WITH(nn::LayerNorm(0), Catch::Contains("positive sizes"));

  nn::Embedding emb(10, 4);
  CHECK(emb.weight.shape() == Shape{10, 4});
  Tensor ids = tensor({3, 9, 3}, {i64}).view({1, 3});
  Tensor e = emb(ids);
  CHECK(e.shape() == Shape{1, 3, 4});
  CHECK(allclose(e.select(1, 0), emb.weight.select(0, 3).unsqueeze(0)));
  CHECK_THROWS_WITH(emb(tensor({1.0})), Catch::Contains("expected i64 indices"));

  Tensor h = tensor({-1, 0.5, 2}, {f64});
  CHECK(allclose(nn::GELU()(h), gelu(h)));
  CHECK(allclose(nn::GELU(nn::GELU::Approximate::tanh)(h), gelu_tanh(h)));
}

TEST_CASE("MultiheadAttention equals per-head attention spelled out by hand", "[nn][transformer][attention]") {
  manual_seed(2);
  nn::MultiheadAttention mha(8, 2, {.causal = true});
  std::vector<std::string> names;
  for (auto& [n, p] : mha.named_parameters()) names.push_back(n);
  CHECK(names == std::vector<std::string>{"q_proj.weight", "q_proj.bias", "k_proj.weight", "k_proj.bias",
                                          "v_proj.weight", "v_proj.bias", "out_proj.weight", "out_proj.bias"});
  Generator g(3);
  Tensor x = randn({2, 5, 8}, {f64}, &g);
  mha.to(f64);
  Tensor y = mha(x);
  REQUIRE(y.shape() == Shape{2, 5, 8});
  // By hand: project, split the 8 features into two heads of 4, attend causally, join.
  Tensor q = linear(x, mha.q_proj->weight, mha.q_proj->bias), k = linear(x, mha.k_proj->weight, mha.k_proj->bias);
  Tensor v = linear(x, mha.v_proj->weight, mha.v_proj->bias);
  AttentionOptions causal;
  causal.causal = true;
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < 2; ++h)
    heads.push_back(scaled_dot_product_attention(q.narrow(2, 4 * h, 4), k.narrow(2, 4 * h, 4), v.narrow(2, 4 * h, 4),
                                                 causal));
  Tensor want = linear(cat(heads, 2), mha.out_proj->weight, mha.out_proj->bias);
  CHECK(allclose(y, want, 1e-12, 1e-12));
  // Causal: changing the last position leaves the earlier outputs unchanged.
  Tensor x2 = x.clone();
  copy_(x2.narrow(1, 4, 1), randn({2, 1, 8}, {f64}, &g));
  CHECK(allclose(mha(x2).narrow(1, 0, 4), y.narrow(1, 0, 4), 1e-12, 1e-12));
  CHECK_FALSE(allclose(mha(x2).narrow(1, 4, 1), y.narrow(1, 4, 1)));
  // Cross-attention takes keys/values of another length.
  CHECK(nn::MultiheadAttention(8, 2)(x.to(f32), randn({2, 7, 8}, {f32}, &g)).shape() == Shape{2, 5, 8});
  CHECK_THROWS_WITH(nn::MultiheadAttention(8, 3), Catch::Contains("divisible by num_heads"));
  CHECK_THROWS_WITH(mha(zeros({2, 5, 6}, {f64})), Catch::Contains("expected [batch, length, 8] inputs"));
}

TEST_CASE("MultiheadAttention under autocast: f16 projections, f32 softmax, named nodes", "[nn][transformer][autocast]") {
  manual_seed(4);
  nn::MultiheadAttention mha(8, 2, {.causal = true});
  Generator g(5);
  Tensor x = randn({1, 4, 8}, {f32}, &g);
  amp::Autocast ac(f16);
  Tensor y = mha(x);
  CHECK(y.dtype() == f16);
  const std::string graph = autograd::graph_to_string(y);
  CHECK(graph.find("softmax") != std::string::npos);
}

TEST_CASE("ModuleList, Flatten, Dropout2d and AdaptiveAvgPool2d", "[nn][layers]") {
  nn::ModuleList list(std::make_shared<nn::Linear>(2, 3), std::make_shared<nn::ReLU>());
  list.push_back(std::make_shared<nn::Linear>(3, 1));
  CHECK(list.size() == 3);
  CHECK(list.at<nn::Linear>(2).out_features == 1);
  CHECK(list.named_parameters()[2].first == "2.weight");
  CHECK_THROWS_WITH(list.at<nn::Linear>(1), Catch::Contains("module 1 is a ReLU"));
  CHECK_THROWS_WITH(list[3], Catch::Contains("index 3 out of range"));
  CHECK_THROWS_WITH(list(zeros({1, 2})), Catch::Contains("has no single-input forward"));

  CHECK(nn::Flatten()(zeros({2, 3, 4, 5})).shape() == Shape{2, 60});

  // Dropout2d zeroes whole channels per sample and scales the rest by 1/(1-p).
  manual_seed(6);
  nn::Dropout2d drop(0.5);
  Tensor y = drop(ones({4, 3, 3, 8}));
  const std::vector<double> yv = y.to_vector<double>();
  bool whole_channels = true;
  int zeros_seen = 0;
  for (int n = 0; n < 4; ++n)
    for (int c = 0; c < 8; ++c) {
      const double first = yv[(n * 9) * 8 + c];
      zeros_seen += first == 0;
      for (int p = 0; p < 9; ++p) whole_channels = whole_channels && yv[(n * 9 + p) * 8 + c] == first;
      whole_channels = whole_channels && (first == 0 || first == 2);
    }
  CHECK(whole_channels);
  CHECK(zeros_seen > 4);
  CHECK(zeros_seen < 28);
  drop.eval();
  CHECK(allclose(drop(ones({1, 2, 2, 3})), ones({1, 2, 2, 3})));

  // AdaptiveAvgPool2d: 5 rows into 3 cells cover rows {0,1}, {1,2,3}, {3,4}.
  Tensor img = arange(0, 10, 1, {f64}).view({1, 5, 2, 1});  // value = 2*row + col
  Tensor p = nn::AdaptiveAvgPool2d(3, 1)(img);
  CHECK(p.shape() == Shape{1, 3, 1, 1});
  CHECK(p.to_vector<double>() == std::vector<double>{1.5, 4.5, 7.5});
  CHECK(allclose(nn::AdaptiveAvgPool2d(1)(img), mean(img, {1, 2}, true)));
  Tensor il = img.set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return nn::AdaptiveAvgPool2d(3, 2)(in[0]); }, {il}));
  CHECK_THROWS_WITH(nn::AdaptiveAvgPool2d(2)(zeros({4, 4})), Catch::Contains("expected NHWC input"));
}

TEST_CASE("MultiheadAttention passes gradcheck through its input", "[nn][transformer][autograd]") {
  manual_seed(7);
  nn::MultiheadAttention mha(4, 2, {.causal = true});
  mha.to(f64);
  Generator g(8);
  Tensor x = randn({1, 3, 4}, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([&](const TensorList& in) { return mha(in[0]); }, {x}));
}

TEST_CASE("MultiheadAttention drops attention weights in training only", "[nn][transformer]") {
  manual_seed(9);
  nn::MultiheadAttention drop(8, 2, {.causal = true, .dropout = 0.5});
  manual_seed(9);
  nn::MultiheadAttention plain(8, 2, {.causal = true});
  Generator g(10);
  Tensor x = randn({2, 5, 8}, {f32}, &g);
  CHECK_FALSE(allclose(drop(x), plain(x)));
  drop.eval();
  CHECK(allclose(drop(x), plain(x)));
  CHECK_THROWS_WITH(nn::MultiheadAttention(8, 2, {.dropout = 1.0}), Catch::Contains("dropout must be in [0, 1)"));
}
