// Tour step 7 (docs/amp.md): the precision of Adam's state. With the state stored in
// f16 (the naive fp16 recipe), v = (1 - beta2) g^2 flushes to zero between steps, so
// every step sees only the newest g^2 divided by a bias correction that keeps growing:
// the step grows like sqrt(t) instead of staying near lr. The weight starts at 0 so that
// f16's ulp stays far below the steps being measured.
#include <cstdio>
#include <memory>

#include "halfgrad.h"

using namespace hg;

int main() {
  const double g = 1e-4, lr = 1e-6;
  std::printf("f16 weight 0, gradient %g every step, Adam lr %g (the intended step is ~lr)\n", g, lr);
  std::printf("(1 - beta2) g^2 = %g, stored in f16: %g\n", 1e-3 * g * g,
              tensor({1e-3 * g * g}).to(f16).to(f64).item<double>());
  std::printf("step   state f32: step / lr   state f16: step / lr\n");
  Tensor w[2];
  std::unique_ptr<optim::Adam> opt[2];
  for (int i = 0; i < 2; ++i) {
    w[i] = tensor({0.0}).to(f16).set_requires_grad().set_name("w");
    opt[i] = std::make_unique<optim::Adam>(optim::Params{{"w", w[i]}}, optim::AdamOptions{.lr = lr});
    opt[i]->set_state_in_param_dtype(i == 1);
  }
  for (int step = 1; step <= 1000; ++step) {
    double ratio[2];
    for (int i = 0; i < 2; ++i) {
      const double before = w[i].to(f64).item<double>();
      w[i].set_grad(tensor({g}).to(f16));
      opt[i]->step();
      ratio[i] = (before - w[i].to(f64).item<double>()) / lr;
    }
    if (step <= 3 || step == 10 || step == 100)
      std::printf("%4d   %20.3g   %20.3g\n", step, ratio[0], ratio[1]);
  }
  std::printf("after 1000 steps: state f32 weight %.4g, state f16 weight %.4g (intended about %g)\n",
              w[0].to(f64).item<double>(), w[1].to(f64).item<double>(), -1000 * lr);
  return 0;
}
