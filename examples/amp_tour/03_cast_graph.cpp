// Tour step 3 (docs/amp.md): where the f16 gradients live in O1. Autocast inserts Cast
// nodes; each Cast's backward casts the gradient back to its source's dtype, so the f32
// parameter receives an f32 gradient while the matmul's gradients flow in f16.
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

int main() {
  manual_seed(0);
  nn::Linear fc(4, 2, /*bias=*/false);
  fc.weight.set_name("fc.weight");
  Tensor x = randn({3, 4});
  Tensor h, loss;
  {
    amp::Autocast ac(f16);
    h = fc(x);            // lower: x and the weight are cast to f16, the matmul runs in f16
    loss = sum(h);        // fp32: h is cast back to f32 before the sum
  }
  h.retain_grad();
  std::printf("%s", autograd::graph_to_string(loss).c_str());
  loss.backward();
  std::printf("h (matmul output): %s, its gradient: %s\n", dtype_name(h.dtype()), dtype_name(h.grad().dtype()));
  std::printf("fc.weight: %s, its gradient: %s\n", dtype_name(fc.weight.dtype()), dtype_name(fc.weight.grad().dtype()));
  return 0;
}
