// Tour step 6 (docs/amp.md): why O2 keeps f32 master weights. 1000 updates of +1e-4
// (each computed in f32 and rounded once into the weight's dtype): an update below half
// an ulp of the weight rounds back to the old value every time.
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

int main() {
  const double update = 1e-4;
  std::printf("weight 1.0, 1000 updates of %g each (exact answer 1.1)\n", update);
  for (DType dt : {f32, f16, bf16}) {
    Tensor w = tensor({1.0}).to(dt);
    for (int i = 0; i < 1000; ++i) w = add(w.to(f32), update).to(dt);
    const double ulp = dt == f32 ? 0x1p-23 : dt == f16 ? 0x1p-10 : 0x1p-7;
    std::printf("%-4s weight: %-10.7g  (ulp at 1.0 = %.3g, update = %.3g ulp)\n", dtype_name(dt),
                w.to(f64).item<double>(), ulp, update / ulp);
  }
  // O2: the optimizer updates the f32 master; the f16 model copy is the master rounded once.
  Tensor master = tensor({1.0});
  for (int i = 0; i < 1000; ++i) master = add(master, update);
  std::printf("f16 model copy of the f32 master: %.7g\n", master.to(f16).to(f64).item<double>());
  return 0;
}
