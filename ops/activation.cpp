// Activations and dropout: thin ops over the elementwise kernels, each recording its
// backward next to its forward. All are of the `follow` class: they run in x's dtype.
#include "ops/activation.h"

#include <cmath>

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/copy.h"
#include "ops/elementwise_kernels.h"
#include "ops/random.h"

namespace hg {

namespace {

Tensor follow_input(const char* op, const Tensor& x0) {
  HG_CHECK(x0.defined(), op, ": x is undefined");
  HG_CHECK(is_floating(x0.dtype()), op, ": expected a floating tensor (f64, f32, f16, bf16), got ",
           dtype_name(x0.dtype()), shape_str(x0.shape()));
  return autocast(PrecisionClass::follow, {x0})[0];
}

}  // namespace

Tensor relu(const Tensor& x0) {
  const Tensor x = follow_input("relu", x0);
  Tensor y = run_unary(UnaryOp::relu, x);
  autograd::record("relu", {x}, y, [y_saved = SavedTensor::output(y)](const Tensor& g) {
    return TensorList{run_binary(BinaryOp::relu_grad, g, y_saved.unpack())};
  });
  return y;
}

Tensor leaky_relu(const Tensor& x0, double negative_slope) {
  const Tensor x = follow_input("leaky_relu", x0);
  HG_CHECK(std::isfinite(negative_slope), "leaky_relu: negative_slope must be finite, got ", negative_slope);
  Tensor y = run_unary(UnaryOp::leaky_relu, x, negative_slope);
  autograd::record("leaky_relu", {x}, y, [x_saved = SavedTensor::input(x, 0), negative_slope](const Tensor& g) {
    return TensorList{run_binary(BinaryOp::leaky_relu_grad, g, x_saved.unpack(), negative_slope)};
  });
  return y;
}

Tensor sigmoid(const Tensor& x0) {
  const Tensor x = follow_input("sigmoid", x0);
  Tensor y = run_unary(UnaryOp::sigmoid, x);
  autograd::record("sigmoid", {x}, y, [y_saved = SavedTensor::output(y)](const Tensor& g) {
    return TensorList{run_binary(BinaryOp::sigmoid_grad, g, y_saved.unpack())};
  });
  return y;
}

Tensor tanh(const Tensor& x0) {
  const Tensor x = follow_input("tanh", x0);
  Tensor y = run_unary(UnaryOp::tanh, x);
  autograd::record("tanh", {x}, y, [y_saved = SavedTensor::output(y)](const Tensor& g) {
    return TensorList{run_binary(BinaryOp::tanh_grad, g, y_saved.unpack())};
  });
  return y;
}

Tensor gelu(const Tensor& x0) {
  const Tensor x = follow_input("gelu", x0);
  Tensor y = run_unary(UnaryOp::gelu, x);
  autograd::record("gelu", {x}, y, [x_saved = SavedTensor::input(x, 0)](const Tensor& g) {
    return TensorList{run_binary(BinaryOp::gelu_grad, g, x_saved.unpack())};
  });
  return y;
}

// y = (x * mask) * scale: x * mask is exact (x or a signed zero; NaN * 0 stays NaN, as in
// PyTorch), so the scale, applied in compute precision, is the only rounding.
Tensor dropout(const Tensor& x0, double p, bool training, Generator* gen) {
  const Tensor x = follow_input("dropout", x0);
  HG_CHECK(p >= 0 && p <= 1, "dropout: p must be in [0, 1], got ", p);
  if (!training || p == 0 || x.numel() == 0) return x;
  const double scale = p == 1 ? 0.0 : 1.0 / (1.0 - p);
  Tensor mask = empty(x.shape(), {x.dtype(), x.device()});
  copy_(mask, bernoulli(x.shape(), 1.0 - p, x.device(), gen));
  Tensor y = run_unary(UnaryOp::mul_scalar, run_binary(BinaryOp::mul, x, mask), scale);
  autograd::record("dropout", {x}, y, [mask, scale](const Tensor& g) {
    return TensorList{run_unary(UnaryOp::mul_scalar, run_binary(BinaryOp::mul, g, mask), scale)};
  });
  return y;
}

}  // namespace hg
