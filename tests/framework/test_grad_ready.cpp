// The "grad ready" hook DDP starts its bucket all-reduces from: called once per backward
// per leaf, after .grad holds the whole gradient (a parameter used twice included), and
// never again once removed; and the GradScaler's found-inf reducer deciding the skip.
#include <catch2/catch.hpp>

#include "framework/grad_ready.h"
#include "halfgrad.h"

using namespace hg;

TEST_CASE("grad ready hook: after accumulation, once per backward, removable", "[autograd][dist]") {
  Tensor w = tensor({1.0, 2.0}).set_requires_grad();
  Tensor v = tensor({3.0}).set_requires_grad();
  std::vector<std::vector<double>> seen;
  int64_t h = autograd::add_grad_ready_hook(w, [&](const Tensor& leaf) { seen.push_back(leaf.grad().to_vector<double>()); });
  // w is used twice: d/dw sum(w*w + 3w) = 2w + 3 = {5, 7}; the hook sees the sum, once.
  sum(w * w + w * 3.0 + v).backward();
  REQUIRE(seen.size() == 1);
  CHECK(seen[0] == std::vector<double>{5, 7});
  // A second backward accumulates into .grad: the hook sees the accumulated {10, 14}.
  sum(w * w + w * 3.0).backward();
  REQUIRE(seen.size() == 2);
  CHECK(seen[1] == std::vector<double>{10, 14});
  autograd::remove_grad_ready_hook(h);
  sum(w).backward();
  CHECK(seen.size() == 2);
  CHECK_THROWS_WITH(autograd::add_grad_ready_hook(tensor({1.0}), [](const Tensor&) {}),
                    Catch::Contains("leaf that requires grad"));
}

TEST_CASE("GradScaler found-inf reducer: runs once per unscale and its result decides the skip", "[amp][dist]") {
  Tensor p = tensor({1.0, 2.0}).set_requires_grad();
  optim::SGD opt({p}, optim::SGDOptions{.lr = 1.0});
  amp::GradScaler scaler;
  int calls = 0;
  // Another rank overflowed: the reduced flag says so although this rank's gradients are finite.
  scaler.set_found_inf_reducer([&](Tensor& found) {
    ++calls;
    CHECK(found.item<double>() == 0.0);
    fill_(found, 1.0);
  });
  scaler.scale(sum(p)).backward();
  amp::StepResult r = scaler.step(opt);
  CHECK(calls == 1);
  CHECK(r.skipped());
  CHECK(p.to_vector<double>() == std::vector<double>{1, 2});  // not stepped
  scaler.update();
  CHECK(scaler.get_scale() == 32768.0);  // backed off as for an overflow
}
