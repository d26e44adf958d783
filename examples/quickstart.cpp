// The smallest halfgrad program: fit y = 3x - 1 by gradient descent with autograd,
// in f32 and with f16 inputs (computed in f32, rounded once, as IEEE says).
#include <cmath>
#include <cstdio>

#include "halfgrad.h"

int main() {
  using namespace hg;
  manual_seed(0);
  Tensor x = randn({256, 1});
  Tensor y = x * 3.0 - 1.0;
  Tensor w = zeros({1}, {f32, Device::cpu(), true}), b = zeros({1}, {f32, Device::cpu(), true});
  for (int step = 0; step < 200; ++step) {
    Tensor loss = mean(square(x * w + b - y));
    loss.backward();
    NoGrad ng;
    copy_(w, w - w.grad() * 0.1);
    copy_(b, b - b.grad() * 0.1);
    w.set_grad(Tensor());
    b.set_grad(Tensor());
  }
  std::printf("w = %.4f (want 3), b = %.4f (want -1)\n", w.item<double>(), b.item<double>());
  std::printf("in f16, 300 * 300 = %g\n", (full({1}, 300.0, {f16}) * 300.0).item<double>());
  return std::abs(w.item<double>() - 3.0) < 1e-3 && std::abs(b.item<double>() + 1.0) < 1e-3 ? 0 : 1;
}
