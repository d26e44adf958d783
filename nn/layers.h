// The standard layers as Modules over the ops in ops/: Linear, Conv2d, ConvTranspose2d,
// BatchNorm2d, ReLU, MaxPool2d, Dropout and Sequential. Images are NHWC; weights are
// initialised as PyTorch's layers initialise theirs (see init.h).
#pragma once
#include <cstdint>
#include <memory>
#include <string>

#include "nn/module.h"
#include "ops/conv2d.h"
#include "ops/pool2d.h"

namespace hg::nn {

// y = x wᵀ + b: weight [out, in], bias [out]; both U(-1/sqrt(in), 1/sqrt(in)).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "Linear"; }

  const int64_t in_features, out_features;
  Tensor weight, bias;  // bias undefined when built without one
};

// weight [out, kernel, kernel, in/groups], bias [out]; both U(-1/sqrt(fan_in), ...) with
// fan_in = kernel² · in/groups.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel, Conv2dOptions options = {}, bool bias = true);
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "Conv2d"; }

  const int64_t in_channels, out_channels, kernel;
  const Conv2dOptions options;
  Tensor weight, bias;
};

// weight [in, kernel, kernel, out/groups], bias [out]; fan_in = kernel² · out/groups, as
// PyTorch computes it for its transposed convolutions.
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel, ConvTranspose2dOptions options = {},
                  bool bias = true);
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "ConvTranspose2d"; }

  const int64_t in_channels, out_channels, kernel;
  const ConvTranspose2dOptions options;
  Tensor weight, bias;
};

// Normalises the last (channel) axis of NHWC input. Parameters weight (ones) and bias
// (zeros); buffers running_mean (zeros), running_var (ones) and num_batches_tracked
// (i64, counts training forwards). With with_relu, its output is relu(batch_norm(x)) from one op
// (batch_norm_relu: the same bits, no ReLU pass); observers then see the ReLU's output.
class BatchNorm2d : public Module {
 public:
  explicit BatchNorm2d(int64_t channels, double eps = 1e-5, double momentum = 0.1, bool with_relu = false);
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "BatchNorm2d"; }

  const int64_t channels;
  const double eps, momentum;
  const bool with_relu;
  HG_PARAM(weight, ones({channels}));
  HG_PARAM(bias, zeros({channels}));
  HG_BUFFER(running_mean, zeros({channels}));
  HG_BUFFER(running_var, ones({channels}));
  HG_BUFFER(num_batches_tracked, zeros({}, {i64}));
};

class ReLU : public Module {
 public:
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "ReLU"; }
};

// stride 0 means stride = kernel.
class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel, int64_t stride = 0, int64_t padding = 0);
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "MaxPool2d"; }

  const Pool2dOptions options;
};

// Zeroes elements with probability p in training (scaling the rest by 1/(1-p)); the
// identity in eval mode.
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "Dropout"; }

  const double p;
};

// Runs its children in order; they are named "0", "1", ...
class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... M>
  explicit Sequential(std::shared_ptr<M>... modules) {
    (push_back(std::move(modules)), ...);
  }
  template <class M>
  std::shared_ptr<M> push_back(std::shared_ptr<M> m) {
    return register_module(std::to_string(size()), std::move(m));
  }
  size_t size() const { return named_children().size(); }
  Module& operator[](size_t i) const;
 protected:
  Tensor forward_impl(const Tensor& x) override;

 public:
  std::string type_name() const override { return "Sequential"; }
};

}  // namespace hg::nn
