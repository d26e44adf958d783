// Every Tensor method on an undefined tensor throws hg::Error naming the method (issue
// 17, item 4): a default-constructed Tensor, or a parameter's grad before any backward.
#include <catch2/catch.hpp>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {
using Call = std::function<void(Tensor&)>;

// The method as the message names it, and a call of it.
std::vector<std::pair<std::string, Call>> methods() {
  const Tensor other = ones({2});
  return {
      {"shape", [](Tensor& t) { (void)t.shape(); }},
      {"size", [](Tensor& t) { (void)t.size(0); }},
      {"strides", [](Tensor& t) { (void)t.strides(); }},
      {"offset", [](Tensor& t) { (void)t.offset(); }},
      {"dim", [](Tensor& t) { (void)t.dim(); }},
      {"numel", [](Tensor& t) { (void)t.numel(); }},
      {"dtype", [](Tensor& t) { (void)t.dtype(); }},
      {"device", [](Tensor& t) { (void)t.device(); }},
      {"is_contiguous", [](Tensor& t) { (void)t.is_contiguous(); }},
      {"storage", [](Tensor& t) { (void)t.storage(); }},
      {"data_ptr", [](Tensor& t) { (void)t.data_ptr(); }},
      {"data_ptr", [](Tensor& t) { (void)t.data<float>(); }},
      {"item", [](Tensor& t) { (void)t.item<float>(); }},
      {"to_vector", [](Tensor& t) { (void)t.to_vector<double>(); }},
      {"at", [](Tensor& t) { (void)t.at({0}); }},
      {"view", [](Tensor& t) { (void)t.view({1}); }},
      {"reshape", [](Tensor& t) { (void)t.reshape({1}); }},
      {"permute", [](Tensor& t) { (void)t.permute({0}); }},
      {"transpose", [](Tensor& t) { (void)t.transpose(0, 1); }},
      {"narrow", [](Tensor& t) { (void)t.narrow(0, 0, 1); }},
      {"slice", [](Tensor& t) { (void)t.slice(0, 0, 1); }},
      {"select", [](Tensor& t) { (void)t.select(0, 0); }},
      {"expand", [](Tensor& t) { (void)t.expand({2}); }},
      {"squeeze", [](Tensor& t) { (void)t.squeeze(0); }},
      {"unsqueeze", [](Tensor& t) { (void)t.unsqueeze(0); }},
      {"flatten", [](Tensor& t) { (void)t.flatten(); }},
      {"contiguous", [](Tensor& t) { (void)t.contiguous(); }},
      {"clone", [](Tensor& t) { (void)t.clone(); }},
      {"to", [](Tensor& t) { (void)t.to(f16); }},
      {"to", [](Tensor& t) { (void)t.to(Device::cpu()); }},
      {"to", [](Tensor& t) { (void)t.to(Device::cpu(), f64); }},
      {"requires_grad", [](Tensor& t) { (void)t.requires_grad(); }},
      {"set_requires_grad", [](Tensor& t) { (void)t.set_requires_grad(true); }},
      {"is_leaf", [](Tensor& t) { (void)t.is_leaf(); }},
      {"grad", [](Tensor& t) { (void)t.grad(); }},
      {"mutable_grad", [](Tensor& t) { (void)t.mutable_grad(); }},
      {"set_grad", [other](Tensor& t) { t.set_grad(other); }},
      {"grad_fn", [](Tensor& t) { (void)t.grad_fn(); }},
      {"detach", [](Tensor& t) { (void)t.detach(); }},
      {"set_data", [other](Tensor& t) { t.set_data(other); }},
      {"retain_grad", [](Tensor& t) { t.retain_grad(); }},
      {"register_hook", [](Tensor& t) { (void)t.register_hook([](const Tensor& g) { return g; }); }},
      {"remove_hook", [](Tensor& t) { t.remove_hook(1); }},
      {"backward", [](Tensor& t) { t.backward(); }},
      {"backward", [other](Tensor& t) { t.backward(other); }},
      {"name", [](Tensor& t) { (void)t.name(); }},
      {"set_name", [](Tensor& t) { (void)t.set_name("x"); }},
  };
}
}  // namespace

TEST_CASE("every Tensor method on a default-constructed tensor throws hg::Error", "[tensor][errors]") {
  for (auto& [name, call] : methods()) {
    INFO(name);
    Tensor t;
    CHECK_THROWS_WITH(call(t), Catch::Contains(name + "() on an undefined tensor"));
  }
}

TEST_CASE("a parameter's grad before backward is undefined and says so", "[tensor][errors]") {
  Tensor w = ones({3}, {.requires_grad = true});
  Tensor g = w.grad();
  CHECK_FALSE(g.defined());
  CHECK_THROWS_WITH(g.is_contiguous(), Catch::Contains("is_contiguous() on an undefined tensor"));
  CHECK_THROWS_WITH(g.data_ptr(), Catch::Contains("data_ptr() on an undefined tensor"));
  CHECK_THROWS_WITH(g.contiguous(), Catch::Contains("undefined"));
  // A defined tensor is unaffected; an undefined source is refused by set_data too.
  CHECK(w.is_contiguous());
  CHECK_THROWS_WITH(w.set_data(Tensor()), Catch::Contains("set_data: the source tensor is undefined"));
  CHECK(w.to_vector<double>() == std::vector<double>{1, 1, 1});
}
