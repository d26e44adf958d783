// gradcheck's finite differences: each input element is nudged in place by ±eps.
#include "tools/gradcheck.h"

#include <cmath>

#include "ops/elementwise.h"
#include "ops/random.h"
#include "ops/reduce.h"

namespace hg {

bool gradcheck(const std::function<Tensor(const TensorList&)>& f, const TensorList& inputs, GradcheckOptions opts) {
  for (size_t i = 0; i < inputs.size(); ++i)
    HG_CHECK(inputs[i].dtype() == f64 && inputs[i].requires_grad() && inputs[i].is_leaf() &&
                 inputs[i].is_contiguous() && inputs[i].device().is_cpu(),
             "gradcheck: input ", i, " must be a contiguous f64 CPU leaf that requires grad");
  Tensor out = f(inputs);
  HG_CHECK(out.requires_grad(), "gradcheck: the output does not depend on any input");
  Generator gen(opts.seed);
  Tensor r = randn(out.shape(), {f64}, &gen);
  TensorList analytic = autograd::grad({out}, inputs, {r});
  auto projected = [&]() {
    NoGrad ng;
    return sum(f(inputs).to(f64) * r).item<double>();
  };
  for (size_t i = 0; i < inputs.size(); ++i) {
    double* p = inputs[i].data<double>();
    std::vector<double> a = analytic[i].to_vector<double>();
    for (int64_t k = 0; k < inputs[i].numel(); ++k) {
      const double x0 = p[k];
      p[k] = x0 + opts.eps;
      const double up = projected();
      p[k] = x0 - opts.eps;
      const double down = projected();
      p[k] = x0;
      const double numeric = (up - down) / (2 * opts.eps);
      const double an = a[static_cast<size_t>(k)];
      HG_CHECK(std::abs(numeric - an) <= opts.atol + opts.rtol * std::abs(numeric), "gradcheck: input ", i, " (shape ",
               shape_str(inputs[i].shape()), ") element ", k, ": analytic gradient ", an, " but finite difference ",
               numeric, " (eps ", opts.eps, ")");
    }
  }
  return true;
}

}  // namespace hg
