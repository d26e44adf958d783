// How big one optimizer step was against the weights it moved (UpdateSample), on the
// optimizer's own parameters, and for Adam which elements stepped by m / eps: the numbers
// behind the fp16 diagnosis ("finite, oversized updates wrecked the weights").
#pragma once
#include <cstdint>
#include <vector>

#include "bench/segbench/run_result.h"
#include "optim/optimizer.h"

namespace hg::segbench {

// Made just before opt.step() (after unscaling and clipping: it copies the gradients the
// step reads), measured just after it. Reads every parameter to the host: for the few
// steps it is asked for, not for every step.
class UpdateProbe {
 public:
  explicit UpdateProbe(const optim::Optimizer& opt);
  // skipped: the step was not applied (the loss scaler found inf/NaN).
  UpdateSample measure(int64_t step, bool skipped) const;

 private:
  struct Before {
    std::vector<double> w, g, m, v;  // m and v empty without Adam state yet
    bool has_grad = false;
  };
  const optim::Optimizer& opt_;
  std::vector<Before> before_;
  double lr_ = 0;
};

}  // namespace hg::segbench
