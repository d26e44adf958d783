// Output observers belong to the module they are installed on: a model's observer sees
// its own subtree's forwards only, handles remove them (RAII), and outlive modules safely.
#include <catch2/catch.hpp>

#include "halfgrad.h"
#include "tests/nn/module_models.h"

using namespace hg;
using test::Outer;

TEST_CASE("output observers belong to the model they are installed on", "[module][observers]") {
  // Before, the list was global: every observer saw every model's forwards, and one
  // thread installing or removing one while another ran any forward crashed.
  Outer a, b;
  std::vector<std::string> seen_a, seen_enc;
  std::vector<const nn::Module*> who_a;
  nn::ObserverHandle ha = a.add_output_observer([&](nn::Module& mod, const Tensor& y) {
    seen_a.push_back(mod.path());
    who_a.push_back(&mod);
    CHECK(y.shape().back() == (mod.path().rfind("enc", 0) == 0 ? 4 : 2));
  });
  nn::ObserverHandle he = b.enc->add_output_observer([&](nn::Module& mod, const Tensor&) { seen_enc.push_back(mod.path()); });
  a(ones({2, 3}));
  b(ones({2, 3}));
  // a's observer saw a's modules only, in the order their forwards finished.
  CHECK(seen_a == std::vector<std::string>{"enc.fc", "enc", "head.0", "head.1", "head", ""});
  for (const nn::Module* m : who_a) CHECK(&m->root() == &a);
  // One installed on a child sees that subtree only.
  CHECK(seen_enc == std::vector<std::string>{"enc.fc", "enc"});

  // Moving a handle keeps one installation; resetting it removes it.
  nn::ObserverHandle moved = std::move(ha);
  a(ones({2, 3}));
  CHECK(seen_a.size() == 12);
  moved.reset();
  a(ones({2, 3}));
  CHECK(seen_a.size() == 12);

  // A handle that outlives its module removes nothing and does not crash.
  nn::ObserverHandle orphan;
  {
    Outer c;
    orphan = c.add_output_observer([](nn::Module&, const Tensor&) {});
  }
  orphan.reset();
  CHECK_THROWS_WITH((void)a.add_output_observer(nullptr), Catch::Contains("observer of Outer is empty"));
}
