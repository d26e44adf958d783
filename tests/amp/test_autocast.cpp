// Autocast: each precision class's output dtype, Cast nodes and their backward, the
// cast cache (and its absence under NoGrad), per-module overrides, policy strings.
#include <catch2/catch.hpp>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("under autocast each precision class gives its dtype", "[autocast]") {
  for (DType low : {f16, bf16}) {
    Generator g(1);
    Tensor x = randn({2, 6, 6, 3}, {f32}, &g), w = randn({4, 3, 3, 3}, {f32}, &g);
    Tensor a = randn({5, 7}, {f32}, &g), b = randn({7, 3}, {f32}, &g);
    Tensor h = randn({5}, {low}, &g);
    amp::Autocast ac(low);
    CHECK(conv2d(x, w).dtype() == low);                    // lower
    CHECK(matmul(a, b).dtype() == low);                    // lower
    CHECK(linear(a, b.transpose(0, 1)).dtype() == low);    // lower
    Tensor y = matmul(a, b);
    CHECK(softmax(y, -1).dtype() == f32);                  // fp32
    CHECK(log_softmax(y, -1).dtype() == f32);              // fp32
    CHECK(exp(h).dtype() == f32);                          // fp32
    CHECK(sum(h).dtype() == f32);                          // fp32
    CHECK(cross_entropy(y, tensor({0, 1, 2, 0, 1}, {i64})).dtype() == f32);  // fp32
    CHECK((h + ones({5})).dtype() == f32);                 // promote: widest input
    CHECK((h * h).dtype() == low);                         // promote: both low
    CHECK(relu(h).dtype() == low);                         // follow
    CHECK(max_pool2d(conv2d(x, w)).dtype() == low);        // follow
    CHECK(cat({h, ones({2})}, 0).dtype() == f32);          // promote
  }
}

TEST_CASE("autocast off, nested, and restored", "[autocast]") {
  Tensor a = ones({2, 2}), b = ones({2, 2});
  CHECK_FALSE(amp::is_autocast_enabled());
  {
    amp::Autocast outer(f16);
    CHECK(matmul(a, b).dtype() == f16);
    {
      amp::Autocast off(false);
      CHECK(matmul(a, b).dtype() == f32);
      amp::Autocast inner(bf16);
      CHECK(matmul(a, b).dtype() == bf16);
    }
    CHECK(matmul(a, b).dtype() == f16);
  }
  CHECK(matmul(a, b).dtype() == f32);
  CHECK_THROWS_WITH(amp::Autocast(i64), Catch::Contains("f16, bf16"));
}

TEST_CASE("Cast nodes appear in the graph and cast gradients back", "[autocast]") {
  Tensor x = randn({3, 4}).set_requires_grad();
  Tensor w = randn({2, 4}).set_requires_grad().set_name("fc.weight");
  Tensor loss;
  {
    amp::Autocast ac(f16);
    loss = sum(linear(x, w));
  }
  std::string graph = autograd::graph_to_string(loss);
  CHECK_THAT(graph, Catch::Contains("Cast -> f16[2, 4]") && Catch::Contains("matmul -> f16[3, 2]") &&
                        Catch::Contains("param fc.weight f32[2, 4]"));
  loss.backward();
  CHECK(w.grad().dtype() == f32);
  CHECK(x.grad().dtype() == f32);
  // d sum(x w^T) / dw = column sums of x, rounded through f16 once on the way.
  Tensor ref = sum(x, {0}).expand({2, 4});
  CHECK(allclose(w.grad(), ref, 2e-3, 2e-3));
}

TEST_CASE("a parameter is cast once per autocast region, never cached under NoGrad", "[autocast][cache]") {
  Tensor w = randn({4, 4}).set_requires_grad();
  Tensor x = randn({2, 4});
  int64_t h0 = amp::cast_cache_hits();
  {
    amp::Autocast ac(f16);
    Tensor y1 = matmul(x, w), y2 = matmul(x, w);
    CHECK(amp::cast_cache_hits() == h0 + 1);
    // Both products read the same Cast node.
    CHECK(y1.grad_fn()->next_edges[1].node == y2.grad_fn()->next_edges[1].node);
  }
  {
    amp::Autocast ac(f16);
    Tensor z;
    {
      NoGrad ng;
      z = matmul(x, w);  // must not leave a graph-less cast in the cache
    }
    int64_t h1 = amp::cast_cache_hits();
    Tensor y = matmul(x, w);
    CHECK(amp::cast_cache_hits() == h1);
    CHECK(y.requires_grad());
    sum(y).backward();
  }
  REQUIRE(w.grad().defined());
  CHECK(sum(abs(w.grad())).item<double>() > 0);
}

TEST_CASE("a cached cast survives a backward and can be used again", "[autocast][cache]") {
  Tensor w = randn({3, 3}).set_requires_grad();
  amp::Autocast ac(f16);
  sum(matmul(ones({1, 3}), w)).backward();
  Tensor g1 = w.grad().clone();
  sum(matmul(ones({1, 3}), w)).backward();
  CHECK(allclose(w.grad(), g1 * 2.0));
}

TEST_CASE("set_precision runs a module's ops in f32 under autocast", "[autocast][module]") {
  nn::Linear fc(4, 3);
  Tensor x = randn({2, 4});
  amp::Autocast ac(f16);
  CHECK(fc(x).dtype() == f16);
  fc.set_precision(f32);
  CHECK(fc(x).dtype() == f32);
  fc.set_precision(std::nullopt);
  CHECK(fc(x).dtype() == f16);
}

TEST_CASE("policies parse jmp's strings and name what is wrong", "[autocast][policy]") {
  amp::Policy p = amp::Policy::parse("params=f32,compute=f16,output=f32");
  CHECK(p.params == f32);
  CHECK(p.compute == f16);
  CHECK(p.output == f32);
  CHECK(p.keep_batchnorm_f32);
  CHECK(amp::Policy::parse("compute=bfloat16,batchnorm=params").compute == bf16);
  CHECK_THROWS_WITH(amp::Policy::parse("params=f32,comptue=f16"), Catch::Contains("unknown key 'comptue'"));
  CHECK_THROWS_WITH(amp::Policy::parse("compute=f8"), Catch::Contains("unknown dtype 'f8'"));
  CHECK_THROWS_WITH(amp::Policy::parse("compute"), Catch::Contains("key=value"));
  CHECK_THROWS_WITH(amp::recipe("o4"), Catch::Contains("fp32, amp, amp-master, bf16, fp16"));
  CHECK(amp::recipe("amp-master").master_weights);
  CHECK(amp::recipe("amp").loss_scaling);
  CHECK_FALSE(amp::recipe("bf16").loss_scaling);
}
