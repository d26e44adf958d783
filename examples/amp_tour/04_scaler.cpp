// Tour step 4 (docs/amp.md): the GradScaler's state machine with growth_interval 5. A
// gradient that overflows (here injected at steps 7 and 8) skips the step and halves
// the scale; five clean steps in a row double it. The scaler keeps probing upward
// because the largest scale that does not overflow is the one that loses the fewest
// small gradients, and a skipped step costs one batch.
#include <cmath>
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

int main() {
  Tensor w = tensor({1.0, -2.0}).set_requires_grad().set_name("w");
  optim::SGD opt({{"w", w}}, {.lr = 0.01});
  amp::GradScaler scaler({.init_scale = 1024.0, .growth_interval = 5});
  std::printf("step  scale  skipped  w[0] after     scale after  tracker\n");
  for (int step = 0; step < 16; ++step) {
    const double x = step == 7 || step == 8 ? INFINITY : 1.0;  // an overflowing batch
    Tensor loss = sum(mul(w, x));
    scaler.scale(loss).backward();
    amp::StepResult r = scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    std::printf("%4d  %5g  %7s  %-13.6g  %11g  %7g\n", step, r.scale_value(), r.skipped() ? "yes" : "no",
                w.to(f64).data<double>()[0], scaler.get_scale(),
                scaler.growth_tracker().to(f64).item<double>());
  }
  return 0;
}
