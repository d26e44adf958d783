// The standard layers: shape checks that name the layer, PyTorch's default
// initialisation, and forwards that call one op each.
#include "nn/layers.h"

#include <cmath>

#include "framework/autograd.h"
#include "nn/init.h"
#include "ops/activation.h"
#include "ops/batch_norm.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace hg::nn {

namespace {

// PyTorch's reset_parameters: kaiming_uniform(a = sqrt(5)) gives U(-1/sqrt(fan_in), 1/sqrt(fan_in)),
// and the bias is drawn from the same interval.
void default_init(const Tensor& weight, const Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(init::calculate_fan_in_and_fan_out(weight).first));
    init::uniform_(bias, -bound, bound);
  }
}

void check_channels(const char* layer, int64_t in, int64_t out, int64_t kernel, int64_t groups) {
  HG_CHECK(in > 0 && out > 0 && kernel > 0, layer, ": in_channels, out_channels and kernel must be positive, got ",
           in, ", ", out, ", ", kernel);
  HG_CHECK(groups > 0 && in % groups == 0 && out % groups == 0, layer, ": groups (", groups,
           ") must be positive and divide both in_channels (", in, ") and out_channels (", out, ")");
}

}  // namespace

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  HG_CHECK(in > 0 && out > 0, "Linear: in_features and out_features must be positive, got ", in, " and ", out);
  weight = register_parameter("weight", empty({out, in}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}

Tensor Linear::forward_impl(const Tensor& x) { return linear(x, weight, bias); }

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, Conv2dOptions o, bool with_bias)
    : in_channels(in), out_channels(out), kernel(k), options(o) {
  check_channels("Conv2d", in, out, k, o.groups);
  weight = register_parameter("weight", empty({out, k, k, in / o.groups}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}

Tensor Conv2d::forward_impl(const Tensor& x) {
  HG_CHECK(x.defined() && x.dim() == 4 && x.size(3) == in_channels, "Conv2d(", in_channels, " -> ", out_channels,
           ") at '", path(), "': expected NHWC input [N, H, W, ", in_channels, "], got ",
           x.defined() ? shape_str(x.shape()) : "undefined");
  return conv2d(x, weight, bias, options);
}

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, int64_t k, ConvTranspose2dOptions o, bool with_bias)
    : in_channels(in), out_channels(out), kernel(k), options(o) {
  check_channels("ConvTranspose2d", in, out, k, o.groups);
  weight = register_parameter("weight", empty({in, k, k, out / o.groups}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  default_init(weight, bias);
}

Tensor ConvTranspose2d::forward_impl(const Tensor& x) {
  HG_CHECK(x.defined() && x.dim() == 4 && x.size(3) == in_channels, "ConvTranspose2d(", in_channels, " -> ",
           out_channels, ") at '", path(), "': expected NHWC input [N, H, W, ", in_channels, "], got ",
           x.defined() ? shape_str(x.shape()) : "undefined");
  return conv_transpose2d(x, weight, bias, options);
}

BatchNorm2d::BatchNorm2d(int64_t c, double eps_, double momentum_, bool with_relu_)
    : channels(c), eps(eps_), momentum(momentum_), with_relu(with_relu_) {
  HG_CHECK(c > 0 && eps_ > 0 && momentum_ >= 0 && momentum_ <= 1, "BatchNorm2d: needs channels > 0, eps > 0 and ",
           "momentum in [0, 1], got ", c, ", ", eps_, ", ", momentum_);
}

Tensor BatchNorm2d::forward_impl(const Tensor& x) {
  HG_CHECK(x.defined() && x.dim() == 4 && x.size(3) == channels, "BatchNorm2d(", channels, ") at '", path(),
           "': expected NHWC input [N, H, W, ", channels, "], got ", x.defined() ? shape_str(x.shape()) : "undefined");
  if (is_training()) {
    NoGrad ng;
    copy_(num_batches_tracked, num_batches_tracked + 1.0);  // on the device: no host round trip
  }
  return (with_relu ? batch_norm_relu : batch_norm)(x, weight, bias, running_mean, running_var, is_training(), momentum,
                                               eps);
}

Tensor ReLU::forward_impl(const Tensor& x) { return relu(x); }

MaxPool2d::MaxPool2d(int64_t kernel, int64_t stride, int64_t padding)
    : options{{kernel, kernel}, {stride, stride}, {padding, padding}} {}

Tensor MaxPool2d::forward_impl(const Tensor& x) { return max_pool2d(x, options); }

Dropout::Dropout(double p_) : p(p_) {
  HG_CHECK(p_ >= 0 && p_ < 1, "Dropout: p must be in [0, 1), got ", p_);
}

Tensor Dropout::forward_impl(const Tensor& x) { return dropout(x, p, is_training()); }

Module& Sequential::operator[](size_t i) const {
  auto children = named_children();
  HG_CHECK(i < children.size(), "Sequential: index ", i, " out of range for ", children.size(), " modules");
  return *children[i].second;
}

Tensor Sequential::forward_impl(const Tensor& x) {
  Tensor h = x;
  for (auto& [name, m] : named_children()) h = (*m)(h);
  return h;
}

}  // namespace hg::nn
