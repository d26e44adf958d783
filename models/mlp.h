// A multilayer perceptron: Linear layers with ReLU between them (none after the last).
// Children are named fc1, fc2, ..., fc{hidden.size() + 1}, so MLP(2, {64, 64}, 1) has
// parameters fc1.weight [64, 2], fc1.bias, fc2.weight [64, 64], ..., fc3.weight [1, 64].
#pragma once
#include <memory>
#include <vector>

#include "nn/layers.h"

namespace hg {

class MLP : public nn::Module {
 public:
  MLP(int64_t in, std::vector<int64_t> hidden, int64_t out);
 protected:
  Tensor forward_impl(const Tensor& x) override;  // x [..., in] -> [..., out]

 public:
  std::string type_name() const override { return "MLP"; }

  std::vector<std::shared_ptr<nn::Linear>> layers;  // fc1, fc2, ...
};

}  // namespace hg
