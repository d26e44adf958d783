// The autograd engine: accumulation, hooks, retain_grad, release, errors, deep chains.
#include <catch2/catch.hpp>

#include "halfgrad.h"

using namespace hg;

TEST_CASE("backward accumulates into leaves through a shared subexpression", "[autograd]") {
  Tensor x = tensor({2.0, -3.0}, {f64, Device::cpu(), true});
  Tensor y = x * x + x * 3.0;  // dy/dx = 2x + 3
  sum(y).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{7.0, -3.0});
  sum(x * 2.0).backward();  // accumulates
  CHECK(x.grad().to_vector<double>() == std::vector<double>{9.0, -1.0});
}

TEST_CASE("a second backward through a released graph is an error", "[autograd][errors]") {
  Tensor x = tensor({1.0, 2.0}, {f64, Device::cpu(), true});
  Tensor y = sum(exp(x));
  y.backward();
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("already released") && Catch::Contains("retain_graph"));
  Tensor z = sum(exp(x));
  z.backward(ones_like(z), true);
  CHECK_NOTHROW(z.backward());
}

TEST_CASE("the released-graph message names calls that exist, and they keep the graph", "[autograd][errors]") {
  Tensor x = tensor({1.0, 2.0}, {f64, Device::cpu(), true});
  Tensor y = sum(exp(x));
  y.backward();
  std::string message;
  try {
    y.backward();
  } catch (const Error& e) {
    message = e.what();
  }
  // The advice is the very call below (a scalar's backward, no gradient to pass), and the
  // form with a gradient.
  CHECK_THAT(message, Catch::Contains("y.backward({.retain_graph = true})") &&
                          Catch::Contains("y.backward(grad, {.retain_graph = true})"));
  const std::vector<double> once = x.grad().to_vector<double>();  // e^x
  x.set_grad(Tensor());
  Tensor z = sum(exp(x));
  z.backward({.retain_graph = true});
  z.backward({.retain_graph = true});
  z.backward(ones_like(z), {.retain_graph = true});
  z.backward();  // releases it
  CHECK_THROWS_WITH(z.backward(), Catch::Contains("already released"));
  const std::vector<double> got = x.grad().to_vector<double>();
  for (size_t i = 0; i < got.size(); ++i) CHECK(got[i] == Approx(4 * once[i]).epsilon(1e-14));
}

TEST_CASE("backward of a tensor that does not require grad is an error", "[autograd][errors]") {
  Tensor x = tensor({1.0, 2.0});
  CHECK_THROWS_WITH(sum(x).backward(), Catch::Contains("does not require grad"));
  Tensor w = tensor({1.0}, {f32, Device::cpu(), true});
  Tensor y;
  {
    NoGrad ng;
    y = w * 2.0;
  }
  CHECK_FALSE(y.requires_grad());
  CHECK_THROWS_WITH(y.backward(), Catch::Contains("NoGrad"));
  CHECK_THROWS_WITH(tensor({1.0, 2.0}, {f32, Device::cpu(), true}).backward(), Catch::Contains("one-element"));
}

TEST_CASE("retain_grad keeps a non-leaf gradient; detach cuts the graph", "[autograd]") {
  Tensor x = tensor({1.0, 2.0, 3.0}, {f64, Device::cpu(), true});
  Tensor h = x * 2.0;
  h.retain_grad();
  Tensor d = h.detach();
  CHECK_FALSE(d.requires_grad());
  CHECK(d.storage() == h.storage());
  sum(h * h).backward();
  CHECK(h.grad().to_vector<double>() == std::vector<double>{4.0, 8.0, 12.0});
  CHECK(x.grad().to_vector<double>() == std::vector<double>{8.0, 16.0, 24.0});
}

TEST_CASE("hooks see and may replace gradients", "[autograd][hooks]") {
  Tensor x = tensor({1.0, 2.0}, {f64, Device::cpu(), true});
  double seen = 0;
  int64_t id = x.register_hook([&](const Tensor& g) {
    seen = sum(g).item<double>();
    return g * 10.0;
  });
  Tensor h = x * 3.0;
  h.register_hook([](const Tensor& g) { return g + 1.0; });
  sum(h).backward();
  CHECK(seen == 12.0);  // (1 + 1) * 3 per element
  CHECK(x.grad().to_vector<double>() == std::vector<double>{60.0, 60.0});
  x.remove_hook(id);
  x.set_grad(Tensor());
  sum(x * 3.0).backward();
  CHECK(x.grad().to_vector<double>() == std::vector<double>{3.0, 3.0});
}

TEST_CASE("a 100,000-op chain runs backward and is destroyed without recursion", "[autograd][deep]") {
  Tensor x = tensor({1.0}, {f32, Device::cpu(), true});
  Tensor y = x;
  for (int i = 0; i < 100000; ++i) y = y * 1.0;
  y.backward();
  CHECK(x.grad().item<double>() == 1.0);
  Tensor z = x;
  for (int i = 0; i < 100000; ++i) z = z + 0.0;
  z = Tensor();  // the graph is destroyed here without its backward having run
  CHECK_FALSE(z.defined());
}

TEST_CASE("gradients of broadcast operands are summed to their shapes", "[autograd][broadcast]") {
  Tensor a = randn({3, 1}, {f64}).set_requires_grad();
  Tensor b = randn({4}, {f64}).set_requires_grad();
  Tensor y = a * b;
  CHECK(y.shape() == Shape{3, 4});
  sum(y).backward();
  CHECK(a.grad().shape() == Shape{3, 1});
  CHECK(b.grad().shape() == Shape{4});
  CHECK(allclose(a.grad(), sum(b).expand({3, 1})));
}

TEST_CASE("gradients flow back through casts in their source dtype", "[autograd][cast]") {
  Tensor x = tensor({0.5, 1.5}, {f32, Device::cpu(), true});
  Tensor h = x.to(f16);
  CHECK(h.grad_fn()->name() == "Cast");
  sum(h * h).backward();
  CHECK(x.grad().dtype() == f32);
  CHECK(x.grad().to_vector<double>() == std::vector<double>{1.0, 3.0});
  std::string g = autograd::graph_to_string(sum(x.to(f16) * 2.0));
  CHECK_THAT(g, Catch::Contains("Cast -> f16[2]") && Catch::Contains("sum -> f16[]"));
}

TEST_CASE("gradcheck catches a wrong derivative", "[autograd][gradcheck]") {
  Tensor x = randn({5}, {f64}).set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return exp(in[0]) * in[0]; }, {x}));
  // A function whose recorded backward is deliberately wrong must fail the check.
  auto wrong = [](const TensorList& in) {
    Tensor y = exp(in[0].detach());
    autograd::record("wrong_exp", {in[0]}, y, [](const Tensor& g) { return TensorList{g * 2.0}; });
    return y;
  };
  CHECK_THROWS_WITH(gradcheck(wrong, {x}), Catch::Contains("finite difference"));
}
