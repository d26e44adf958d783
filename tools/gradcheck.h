// gradcheck: analytic gradients against central finite differences in f64.
#pragma once
#include <functional>

#include "framework/autograd.h"

namespace hg {

struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  uint64_t seed = 1234;  // for the random projection of the output
};

// f maps the inputs (f64 leaves that require grad) to a tensor of any shape. The check
// projects the output on a fixed random tensor r and compares d<f(x), r>/dx from
// backward with the central difference of every input element. Returns true, or
// throws hg::Error naming the input, element, and both values.
bool gradcheck(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs,
               GradcheckOptions opts = {});

}  // namespace hg
