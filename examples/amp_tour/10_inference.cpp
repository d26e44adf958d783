// Tour step 10 (docs/amp.md): inference under autocast. NoGrad records no graph, so no
// Cast node keeps an f16 copy of a weight alive after the forward; eval() makes dropout
// and BatchNorm deterministic. The f16 output differs from f32 by f16 rounding.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

int main() {
  manual_seed(0);
  MLP model(16, {64, 64}, 4);
  model.eval();
  const Tensor x = randn({8, 16});
  const Tensor ref = model(x);  // f32
  for (DType dt : {f16, bf16}) {
    Tensor out;
    {
      NoGrad ng;
      amp::Autocast ac(dt);
      out = model(x);
    }
    double err = 0, amax = 0;
    const std::vector<double> a = out.to_vector<double>(), r = ref.to_vector<double>();
    for (size_t i = 0; i < a.size(); ++i) {
      err = std::max(err, std::fabs(a[i] - r[i]));
      amax = std::max(amax, std::fabs(r[i]));
    }
    std::printf("autocast %-4s: output %s, requires_grad %s, max |out - f32| / max |f32| = %.2g\n", dtype_name(dt),
                dtype_name(out.dtype()), out.requires_grad() ? "yes" : "no", err / amax);
  }
  return 0;
}
