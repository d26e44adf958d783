// Elementwise arithmetic with NumPy broadcasting and autograd: the `promote` class
// (add, sub, mul, div, where: the widest floating input wins) and the pointwise
// math of the foundation (exp, log, pow, sqrt, ...). Activations are in activation.h.
#pragma once
#include "framework/scalar.h"
#include "framework/tensor.h"

namespace hg {

Tensor add(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& b);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);

// Tensor (op) scalar follows PyTorch's type promotion (scalar_result_dtype): a floating
// tensor keeps its dtype (the scalar is applied in compute precision); an integer or bool
// tensor with a floating scalar (`t + 0.5`, `t + 1e30`) gives f32, with an integral one
// (`t + 2`) i64, computed exactly. div and rdiv are true division: an integer or bool tensor
// gives f32. pow on an integer tensor needs a floating exponent.
Tensor add(const Tensor& a, Scalar s);
Tensor sub(const Tensor& a, Scalar s);
Tensor mul(const Tensor& a, Scalar s);
Tensor div(const Tensor& a, Scalar s);
Tensor pow(const Tensor& a, Scalar p);
Tensor rsub(const Tensor& a, Scalar s);  // s - a
Tensor rdiv(const Tensor& a, Scalar s);  // s / a

Tensor neg(const Tensor& x);
Tensor exp(const Tensor& x);
Tensor log(const Tensor& x);
Tensor sqrt(const Tensor& x);
Tensor rsqrt(const Tensor& x);
Tensor abs(const Tensor& x);
Tensor square(const Tensor& x);
Tensor sign(const Tensor& x);  // no gradient flows through sign
Tensor clamp(const Tensor& x, double lo, double hi);

// Comparisons give bool tensors (no gradient).
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, double s);
Tensor lt(const Tensor& a, double s);
Tensor isfinite(const Tensor& x);

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& x);
Tensor operator+(const Tensor& a, Scalar s);
Tensor operator+(Scalar s, const Tensor& a);
Tensor operator-(const Tensor& a, Scalar s);
Tensor operator-(Scalar s, const Tensor& a);
Tensor operator*(const Tensor& a, Scalar s);
Tensor operator*(Scalar s, const Tensor& a);
Tensor operator/(const Tensor& a, Scalar s);
Tensor operator/(Scalar s, const Tensor& a);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, double s);
Tensor operator<(const Tensor& a, double s);

}  // namespace hg
