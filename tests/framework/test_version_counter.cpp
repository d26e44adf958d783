// Version counters: every in-place write bumps the storage's counter, and a backward whose
// saved tensor was written since raises (PyTorch's "modified by an inplace operation").
#include <catch2/catch.hpp>

#include "halfgrad.h"

using namespace hg;

namespace {
const auto modified = Catch::Contains("modified by an in-place operation");
}

TEST_CASE("the version counter is shared by views and detach and bumped by in-place writes", "[autograd][version]") {
  Tensor x = zeros({2, 3});
  CHECK(x.version() == 0);  // a factory's own fill is not a modification
  CHECK(x.clone().version() == 0);
  CHECK(x.to(f16).version() == 0);
  Tensor v = x.narrow(0, 1, 1), d = x.detach();
  fill_(v, 1.0);
  CHECK(x.version() == 1);
  CHECK(d.version() == 1);
  copy_(d, ones({3}));
  CHECK(v.version() == 2);
  nn::init::uniform_(x.transpose(0, 1));
  CHECK(x.version() == 3);
  Tensor y = x + 1.0;  // an out-of-place op neither bumps its input nor shares its counter
  CHECK(x.version() == 3);
  CHECK(y.version() == 0);
}

TEST_CASE("backward refuses a saved input modified in place (issue 16 repro)", "[autograd][version]") {
  Tensor w = tensor({2, 3}).set_requires_grad(), x = tensor({10, 20});
  Tensor l = sum(x * w);
  fill_(x, 0.0);  // before the fix, dl/dw came out as [0, 0]
  CHECK_THROWS_WITH(l.backward(), modified && Catch::Contains("backward of mul") && Catch::Contains("input 0") &&
                                      Catch::Contains("f32[2]") && Catch::Contains("saved at version 0, now 1"));
}

TEST_CASE("backward after an optimizer step through a retained graph raises (issue 16 repro)", "[autograd][version][optim]") {
  Tensor w = tensor({2, 3}).set_requires_grad(), x = tensor({10, 20});
  optim::SGD opt({w}, {.lr = 0.1});
  Tensor loss = sum(x * w * w);
  loss.backward(ones({}), true);
  CHECK(w.grad().to_vector<double>() == std::vector<double>{40, 120});
  opt.step();  // w changes in place; the graph saved the old w
  CHECK_THROWS_WITH(loss.backward(), modified && Catch::Contains("mul") && Catch::Contains("now 1"));
}

TEST_CASE("a write to any view of a saved tensor is caught, and so is a modified output", "[autograd][version]") {
  Tensor x = tensor({1, 2, 3, 4}).set_requires_grad();
  Tensor y = exp(x);  // exp saves its output
  Tensor l = sum(y);
  fill_(y.narrow(0, 2, 1), 0.0);
  CHECK_THROWS_WITH(l.backward(), modified && Catch::Contains("backward of exp") && Catch::Contains("output 0"));

  Tensor a = tensor({1, 2, 3, 4}), w = tensor({1, 1}).set_requires_grad();
  Tensor m = sum(matmul(a.view({2, 2}), w));
  copy_(a.narrow(0, 0, 1), tensor({5}));  // a view of the saved input's storage
  CHECK_THROWS_WITH(m.backward(), modified && Catch::Contains("backward of matmul") && Catch::Contains("input 0"));
}

TEST_CASE("in-place writes that no backward depends on are allowed", "[autograd][version]") {
  Tensor w = tensor({2, 3}).set_requires_grad(), x = tensor({10, 20});
  Tensor l = sum(x + w);  // add saves nothing
  fill_(x, 0.0);
  l.backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{1, 1});

  Tensor l2 = sum(x * w);
  l2.backward();
  fill_(x, 5.0);  // after backward: the graph is released
  Tensor l3 = sum(x * w);
  w.set_grad(Tensor());
  l3.backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{5, 5});
}

TEST_CASE("the error names the module path of the node; load_state_dict counts as a write", "[autograd][version][module]") {
  Tensor w = tensor({2, 3}).set_requires_grad(), x = tensor({10, 20});
  Tensor l;
  {
    autograd::ModulePathScope scope("net.fc1");
    l = sum(x * w);
  }
  fill_(x, 0.0);
  CHECK_THROWS_WITH(l.backward(), modified && Catch::Contains("backward of mul [net.fc1]"));

  nn::Linear fc(2, 1);
  Tensor l2 = sum(fc(tensor({1, 2}).view({1, 2})));
  fc.load_state_dict(fc.state_dict());  // writes the weight in place
  CHECK_THROWS_WITH(l2.backward(), modified && Catch::Contains("input 1"));
}

TEST_CASE("gradient clipping and the loss scaler's unscale_ bump the gradients' versions", "[autograd][version][amp]") {
  Tensor w = tensor({2, 3}).set_requires_grad();
  sum(w * w).backward();
  const int64_t v0 = w.grad().version();
  optim::clip_grad_value_({w}, 1.0);
  CHECK(w.grad().version() == v0 + 1);

  optim::SGD opt({w}, {.lr = 0.1});
  amp::GradScaler scaler;
  w.set_grad(Tensor());
  scaler.scale(sum(w * w)).backward();
  const int64_t v1 = w.grad().version();
  scaler.unscale_(opt);
  CHECK(w.grad().version() == v1 + 1);
}

TEST_CASE("a second backward through a retained graph still works when nothing was written", "[autograd][version]") {
  Tensor w = tensor({2, 3}).set_requires_grad(), x = tensor({10, 20});
  Tensor l = sum(x * w);
  l.backward(ones({}), true);
  l.backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{20, 40});
}

TEST_CASE("convolution, batch norm, softmax and loss targets are checked too", "[autograd][version]") {
  Tensor x = ones({1, 3, 3, 2}), w = ones({1, 1, 1, 2}).set_requires_grad();
  Tensor c = sum(conv2d(x, w));
  fill_(x, 2.0);
  CHECK_THROWS_WITH(c.backward(), modified && Catch::Contains("backward of conv2d: its input 0"));

  Tensor h = randn({4, 3}).set_requires_grad(), gamma = ones({3}).set_requires_grad();
  Tensor bn = sum(batch_norm(h, gamma, Tensor(), Tensor(), Tensor(), true) * h);
  copy_(gamma, full({3}, 2.0));
  CHECK_THROWS_WITH(bn.backward(), modified && Catch::Contains("backward of batch_norm: its input 1"));

  Tensor logits = randn({2, 3}).set_requires_grad();
  Tensor s = sum(softmax(logits, 1) * logits);
  Tensor labels = from_data<int64_t>({0, 2}, {2});
  Tensor ce = cross_entropy(logits, labels);
  fill_(labels, 1.0);  // cross_entropy's backward reads the targets
  CHECK_THROWS_WITH(ce.backward(), modified && Catch::Contains("backward of cross_entropy: its target (i64[2])"));
  s.backward();  // softmax's own saved output was not touched
  CHECK(logits.grad().defined());
}
