// Tour step 7 (docs/amp.md): the precision of Adam's state. With the state stored in
// f16 (the naive fp16 recipe), v = (1 - beta2) g^2 flushes to zero between steps.
// (a) A steady small gradient: each step sees only the newest g^2 under a bias correction
// that keeps growing, so the step grows like sqrt(t) instead of staying near lr.
// (b) A gradient that itself flushed to 0 in f16: v is 0 but m is not, and the step is
// lr * m / eps, thousands of times lr. The weight starts at 0 so that f16's ulp stays far
// below the steps being measured.
#include <cstdio>
#include <functional>
#include <memory>

#include "halfgrad.h"

using namespace hg;

namespace {

constexpr double kLr = 1e-6;

// Runs Adam on one f16 weight twice (state f32, state f16) with gradient grad(step);
// prints step / lr at the steps `show` accepts; returns the two final weights.
std::pair<double, double> run(int steps, const std::function<double(int)>& grad, const std::function<bool(int)>& show) {
  Tensor w[2];
  std::unique_ptr<optim::Adam> opt[2];
  for (int i = 0; i < 2; ++i) {
    w[i] = tensor({0.0}).to(f16).set_requires_grad().set_name("w");
    opt[i] = std::make_unique<optim::Adam>(optim::Params{{"w", w[i]}}, optim::AdamOptions{.lr = kLr});
    opt[i]->set_state_in_param_dtype(i == 1);
  }
  std::printf("step  gradient in f16   state f32: step / lr   state f16: step / lr\n");
  for (int step = 1; step <= steps; ++step) {
    const Tensor g = tensor({grad(step)}).to(f16);
    double ratio[2];
    for (int i = 0; i < 2; ++i) {
      const double before = w[i].to(f64).item<double>();
      w[i].set_grad(g);
      opt[i]->step();
      ratio[i] = (before - w[i].to(f64).item<double>()) / kLr;
    }
    if (show(step))
      std::printf("%4d  %16.3g   %20.3g   %20.3g\n", step, g.to(f64).item<double>(), ratio[0], ratio[1]);
  }
  return {w[0].to(f64).item<double>(), w[1].to(f64).item<double>()};
}

}  // namespace

int main() {
  std::printf("Adam lr %g, eps 1e-8, one f16 weight starting at 0: the intended step is ~lr\n", kLr);
  std::printf("(1 - beta2) g^2 for g = 1e-4 is %g; stored in f16: %g\n\n", 1e-3 * 1e-8,
              tensor({1e-3 * 1e-8}).to(f16).to(f64).item<double>());
  std::printf("(a) gradient 1e-4 at every step\n");
  auto [a32, a16] = run(1000, [](int) { return 1e-4; }, [](int s) { return s <= 3 || s == 10 || s == 100; });
  std::printf("after 1000 steps: weight %.4g (state f32), %.4g (state f16); intended about %g\n\n", a32, a16, -1000 * kLr);
  std::printf("(b) gradient 1e-4 at step 1, then 1e-8 (0 in f16: flushed)\n");
  run(4, [](int s) { return s == 1 ? 1e-4 : 1e-8; }, [](int) { return true; });
  return 0;
}
