// Elementwise ops on the cuda device: each op is the CPU kernel's formula in compute
// precision (f32 for f16/bf16, rounded once on store). The op is a kernel argument read in
// a per-element switch (uniform over the grid), so one kernel per dtype covers every op.
#include "cuda/elementwise_loops.h"
#include "ops/elementwise_kernels.h"
#include "ops/kernel_math.h"

namespace hg::cuda {
namespace {

template <class C>
HG_HOST_DEVICE C apply_unary(UnaryOp op, C v, C p0, C p1) {
  switch (op) {
    case UnaryOp::neg: return C(-v);
    case UnaryOp::exp: return math_exp(v);
    case UnaryOp::log: return math_log(v);
    case UnaryOp::sqrt: return math_sqrt(v);
    case UnaryOp::rsqrt: return C(1) / math_sqrt(v);
    case UnaryOp::abs: return math_abs(v);
    case UnaryOp::sign: return C((v > C(0)) - (v < C(0)));
    case UnaryOp::square: return C(v * v);
    case UnaryOp::reciprocal: return C(C(1) / v);
    case UnaryOp::relu: return v > C(0) ? v : (v != v ? v : C(0));
    case UnaryOp::sigmoid: return math_sigmoid(v);
    case UnaryOp::tanh: return math_tanh(v);
    case UnaryOp::gelu: return gelu_exact(v);
    case UnaryOp::add_scalar: return C(v + p0);
    case UnaryOp::mul_scalar: return C(v * p0);
    case UnaryOp::div_scalar: return C(v / p0);
    case UnaryOp::pow_scalar: return static_cast<C>(math_pow(v, p0));
    case UnaryOp::rsub_scalar: return C(p0 - v);
    case UnaryOp::rdiv_scalar: return C(p0 / v);
    case UnaryOp::leaky_relu: return v > C(0) ? v : C(p0 * v);
    case UnaryOp::clamp: return v != v ? v : (v < p0 ? p0 : (v > p1 ? p1 : v));
    case UnaryOp::isfinite: return C(math_isfinite(v));
  }
  return v;
}

template <class C>
HG_HOST_DEVICE C apply_binary(BinaryOp op, C x, C y, C p0, C p1) {
  switch (op) {
    case BinaryOp::add: return C(x + y);
    case BinaryOp::sub: return C(x - y);
    case BinaryOp::mul: return C(x * y);
    case BinaryOp::div: return C(x / y);
    case BinaryOp::pow: return static_cast<C>(math_pow(x, y));
    case BinaryOp::maximum: return x != x ? x : (y != y ? y : (x > y ? x : y));
    case BinaryOp::minimum: return x != x ? x : (y != y ? y : (x < y ? x : y));
    case BinaryOp::relu_grad: return y > C(0) ? x : C(0);
    case BinaryOp::leaky_relu_grad: return y > C(0) ? x : C(x * p0);
    case BinaryOp::sigmoid_grad: return C(x * y * (C(1) - y));
    case BinaryOp::tanh_grad: return C(x * (C(1) - y * y));
    case BinaryOp::gelu_grad: return C(x * gelu_derivative(y));
    case BinaryOp::clamp_grad: return (y >= p0 && y <= p1) ? x : C(0);
    case BinaryOp::eq: return C(x == y);
    case BinaryOp::ne: return C(x != y);
    case BinaryOp::lt: return C(x < y);
    case BinaryOp::le: return C(x <= y);
    case BinaryOp::gt: return C(x > y);
    case BinaryOp::ge: return C(x >= y);
  }
  return x;
}

template <class T, class TO>
struct Unary {
  UnaryOp op;
  compute_t<T> p0, p1;
  HG_DEVICE TO operator()(T v) const { return dev_store<TO>(apply_unary(op, dev_load(v), p0, p1)); }
};

template <class T, class TO>
struct Binary {
  BinaryOp op;
  compute_t<T> p0, p1;
  HG_DEVICE TO operator()(T a, T b) const { return dev_store<TO>(apply_binary(op, dev_load(a), dev_load(b), p0, p1)); }
};

template <class T>
struct Select {
  HG_DEVICE T operator()(bool c, T a, T b) const { return c ? a : b; }
};

void unary_cuda(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  visit_dtype(x.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    const C q0 = dev_store<C>(p0), q1 = dev_store<C>(p1);  // an i64 bound (clamp) saturates
    if (out.dtype() == b8 && !std::is_same_v<T, bool>) map<bool, T>("unary", out, {&x}, Unary<T, bool>{op, q0, q1});
    else map<T, T>("unary", out, {&x}, Unary<T, T>{op, q0, q1});
  });
}

void binary_cuda(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double p0, double p1) {
  visit_dtype(a.dtype(), [&]<typename T>() {
    using C = compute_t<T>;
    const C q0 = dev_store<C>(p0), q1 = dev_store<C>(p1);  // an i64 bound (clamp) saturates
    if (out.dtype() == b8 && !std::is_same_v<T, bool>)
      map<bool, T, T>("binary", out, {&a, &b}, Binary<T, bool>{op, q0, q1});
    else map<T, T, T>("binary", out, {&a, &b}, Binary<T, T>{op, q0, q1});
  });
}

void where_cuda(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_dtype(out.dtype(), [&]<typename T>() { map<T, bool, T, T>("where", out, {&cond, &a, &b}, Select<T>{}); });
}

}  // namespace

HG_REGISTER_KERNEL(unary_stub, cuda, unary_cuda);
HG_REGISTER_KERNEL(binary_stub, cuda, binary_cuda);
HG_REGISTER_KERNEL(where_stub, cuda, where_cuda);

}  // namespace hg::cuda
