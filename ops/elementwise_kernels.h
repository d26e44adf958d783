// The kernel interface of elementwise ops, implemented by every backend. Operands
// arrive broadcast to the output's shape and in one dtype (the op casts first);
// reduced-precision values are computed in f32 and rounded once on store.
#pragma once
#include <cstdint>

#include "framework/dispatch.h"
#include "framework/tensor.h"
#include "ops/kernel_math.h"

namespace hg {

// Parameters p0/p1 are used by the ops that say so.
enum class UnaryOp : uint8_t {
  neg, exp, log, sqrt, rsqrt, abs, sign, square, reciprocal,
  relu, sigmoid, tanh, gelu,   // gelu: the exact erf form
  add_scalar,   // x + p0
  mul_scalar,   // x * p0
  div_scalar,   // x / p0
  pow_scalar,   // x ^ p0
  rsub_scalar,  // p0 - x
  rdiv_scalar,  // p0 / x
  leaky_relu,   // x > 0 ? x : p0 * x
  clamp,        // min(max(x, p0), p1); NaN stays NaN
  isfinite,     // 1 where finite, else 0 (output dtype bool)
};

enum class BinaryOp : uint8_t {
  add, sub, mul, div, pow, maximum, minimum,  // maximum/minimum propagate NaN
  relu_grad,        // a * (b > 0)                     (a = grad, b = output)
  leaky_relu_grad,  // a * (b > 0 ? 1 : p0)            (b = input)
  sigmoid_grad,     // a * b * (1 - b)                 (b = output)
  tanh_grad,        // a * (1 - b^2)                   (b = output)
  gelu_grad,        // a * gelu'(b)                    (b = input)
  clamp_grad,       // a * (p0 <= b <= p1)             (b = input)
  eq, ne, lt, le, gt, ge,  // output dtype bool
};

// The op names the profiler records for unary_stub / binary_stub calls ("relu", "add").
const char* op_label(UnaryOp op);
const char* op_label(BinaryOp op);

extern DispatchStub<void(UnaryOp, const Tensor& x, const Tensor& out, double p0, double p1)> unary_stub;
extern DispatchStub<void(BinaryOp, const Tensor& a, const Tensor& b, const Tensor& out, double p0, double p1)>
    binary_stub;
// out = cond ? a : b (cond bool; a, b, out one dtype).
extern DispatchStub<void(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out)> where_stub;

// GELU's exact (erf) form and its derivative in compute precision, for every backend's kernel.
template <class C>
HG_HOST_DEVICE C gelu_exact(C x) {
  return C(0.5) * x * (C(1) + math_erf(x * C(0.70710678118654752440)));
}
template <class C>
HG_HOST_DEVICE C gelu_derivative(C x) {
  const C cdf = C(0.5) * (C(1) + math_erf(x * C(0.70710678118654752440)));
  const C pdf = math_exp(C(-0.5) * x * x) * C(0.39894228040143267794);
  return cdf + x * pdf;
}

// Non-recording helpers for op implementations (forward and backward bodies): run the
// kernel into a new tensor. Binary operands must share a dtype; they are broadcast here.
Tensor run_unary(UnaryOp op, const Tensor& x, double p0 = 0, double p1 = 0);
Tensor run_binary(BinaryOp op, const Tensor& a, const Tensor& b, double p0 = 0, double p1 = 0);

}  // namespace hg
