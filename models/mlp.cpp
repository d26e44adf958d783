// The MLP: one Linear per pair of consecutive widths, ReLU between them.
#include "models/mlp.h"

#include "ops/activation.h"

namespace hg {

MLP::MLP(int64_t in, std::vector<int64_t> hidden, int64_t out) {
  std::vector<int64_t> widths{in};
  widths.insert(widths.end(), hidden.begin(), hidden.end());
  widths.push_back(out);
  for (size_t i = 0; i + 1 < widths.size(); ++i)
    layers.push_back(register_module("fc" + std::to_string(i + 1),
                                     std::make_shared<nn::Linear>(widths[i], widths[i + 1])));
}

Tensor MLP::forward_impl(const Tensor& x) {
  Tensor h = x;
  for (size_t i = 0; i < layers.size(); ++i) {
    h = (*layers[i])(h);
    if (i + 1 < layers.size()) h = relu(h);
  }
  return h;
}

}  // namespace hg
