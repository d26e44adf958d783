// CPU kernels of elementwise ops: each op a small lambda in compute precision (f32
// for f16/bf16, rounded once on store), expanded over dtypes by visit_dtype.
#include <cmath>

#include "ops/cpu/loops.h"
#include "ops/elementwise_kernels.h"

namespace hg::cpu {
namespace {

template <class T>
T* at(char* p, int64_t i, int64_t s) {
  return reinterpret_cast<T*>(p + i * s);
}

template <class TO, class TI, class F>
void map1(const Tensor& x, const Tensor& out, F f) {
  for_each_strided<2>(out.shape(), operands<2>({&out, &x}), [&](int64_t n, std::array<char*, 2> p, std::array<int64_t, 2> s) {
    if (s[0] == sizeof(TO) && s[1] == sizeof(TI)) {
      TO* o = reinterpret_cast<TO*>(p[0]);
      const TI* a = reinterpret_cast<const TI*>(p[1]);
      for (int64_t i = 0; i < n; ++i) o[i] = store<TO>(f(load(a[i])));
    } else {
      for (int64_t i = 0; i < n; ++i) *at<TO>(p[0], i, s[0]) = store<TO>(f(load(*at<TI>(p[1], i, s[1]))));
    }
  });
}

template <class TO, class TI, class F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  for_each_strided<3>(out.shape(), operands<3>({&out, &a, &b}),
                      [&](int64_t n, std::array<char*, 3> p, std::array<int64_t, 3> s) {
    if (s[0] == sizeof(TO) && s[1] == sizeof(TI) && s[2] == sizeof(TI)) {
      TO* o = reinterpret_cast<TO*>(p[0]);
      const TI* x = reinterpret_cast<const TI*>(p[1]);
      const TI* y = reinterpret_cast<const TI*>(p[2]);
      for (int64_t i = 0; i < n; ++i) o[i] = store<TO>(f(load(x[i]), load(y[i])));
    } else if (s[0] == sizeof(TO) && s[1] == sizeof(TI) && s[2] == 0) {
      TO* o = reinterpret_cast<TO*>(p[0]);
      const TI* x = reinterpret_cast<const TI*>(p[1]);
      const auto y = load(*reinterpret_cast<const TI*>(p[2]));
      for (int64_t i = 0; i < n; ++i) o[i] = store<TO>(f(load(x[i]), y));
    } else {
      for (int64_t i = 0; i < n; ++i)
        *at<TO>(p[0], i, s[0]) = store<TO>(f(load(*at<TI>(p[1], i, s[1])), load(*at<TI>(p[2], i, s[2]))));
    }
  });
}

template <class C>
C gelu_exact(C x) {
  return C(0.5) * x * (C(1) + std::erf(x * C(0.70710678118654752440)));
}
template <class C>
C gelu_derivative(C x) {
  const C cdf = C(0.5) * (C(1) + std::erf(x * C(0.70710678118654752440)));
  const C pdf = std::exp(C(-0.5) * x * x) * C(0.39894228040143267794);
  return cdf + x * pdf;
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& x, const Tensor& out, double p0d, double p1d) {
  using C = compute_t<T>;
  const C p0 = static_cast<C>(p0d), p1 = static_cast<C>(p1d);
  switch (op) {
    case UnaryOp::neg: return map1<T, T>(x, out, [](C v) { return C(-v); });
    case UnaryOp::exp: return map1<T, T>(x, out, [](C v) { return std::exp(v); });
    case UnaryOp::log: return map1<T, T>(x, out, [](C v) { return std::log(v); });
    case UnaryOp::sqrt: return map1<T, T>(x, out, [](C v) { return std::sqrt(v); });
    case UnaryOp::rsqrt: return map1<T, T>(x, out, [](C v) { return C(1) / std::sqrt(v); });
    case UnaryOp::abs: return map1<T, T>(x, out, [](C v) { return v < C(0) ? C(-v) : v; });
    case UnaryOp::sign: return map1<T, T>(x, out, [](C v) { return C((v > C(0)) - (v < C(0))); });
    case UnaryOp::square: return map1<T, T>(x, out, [](C v) { return C(v * v); });
    case UnaryOp::reciprocal: return map1<T, T>(x, out, [](C v) { return C(C(1) / v); });
    case UnaryOp::relu: return map1<T, T>(x, out, [](C v) { return v > C(0) ? v : (v != v ? v : C(0)); });
    case UnaryOp::sigmoid: return map1<T, T>(x, out, [](C v) { return C(C(1) / (C(1) + std::exp(-v))); });
    case UnaryOp::tanh: return map1<T, T>(x, out, [](C v) { return std::tanh(v); });
    case UnaryOp::gelu: return map1<T, T>(x, out, [](C v) { return gelu_exact(v); });
    case UnaryOp::add_scalar: return map1<T, T>(x, out, [p0](C v) { return C(v + p0); });
    case UnaryOp::mul_scalar: return map1<T, T>(x, out, [p0](C v) { return C(v * p0); });
    case UnaryOp::div_scalar: return map1<T, T>(x, out, [p0](C v) { return C(v / p0); });
    case UnaryOp::pow_scalar: return map1<T, T>(x, out, [p0](C v) { return static_cast<C>(std::pow(v, p0)); });
    case UnaryOp::rsub_scalar: return map1<T, T>(x, out, [p0](C v) { return C(p0 - v); });
    case UnaryOp::rdiv_scalar: return map1<T, T>(x, out, [p0](C v) { return C(p0 / v); });
    case UnaryOp::leaky_relu: return map1<T, T>(x, out, [p0](C v) { return v > C(0) ? v : C(p0 * v); });
    case UnaryOp::clamp:
      return map1<T, T>(x, out, [p0, p1](C v) { return v != v ? v : (v < p0 ? p0 : (v > p1 ? p1 : v)); });
    case UnaryOp::isfinite:
      return map1<bool, T>(x, out, [](C v) {
        if constexpr (std::is_floating_point_v<C>) return std::isfinite(v);
        else return true;
      });
  }
}

template <class T>
void binary_typed(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double p0d, double p1d) {
  using C = compute_t<T>;
  const C p0 = static_cast<C>(p0d), p1 = static_cast<C>(p1d);
  switch (op) {
    case BinaryOp::add: return map2<T, T>(a, b, out, [](C x, C y) { return C(x + y); });
    case BinaryOp::sub: return map2<T, T>(a, b, out, [](C x, C y) { return C(x - y); });
    case BinaryOp::mul: return map2<T, T>(a, b, out, [](C x, C y) { return C(x * y); });
    case BinaryOp::div: return map2<T, T>(a, b, out, [](C x, C y) { return C(x / y); });
    case BinaryOp::pow: return map2<T, T>(a, b, out, [](C x, C y) { return static_cast<C>(std::pow(x, y)); });
    case BinaryOp::maximum:
      return map2<T, T>(a, b, out, [](C x, C y) { return x != x ? x : (y != y ? y : (x > y ? x : y)); });
    case BinaryOp::minimum:
      return map2<T, T>(a, b, out, [](C x, C y) { return x != x ? x : (y != y ? y : (x < y ? x : y)); });
    case BinaryOp::relu_grad: return map2<T, T>(a, b, out, [](C g, C y) { return y > C(0) ? g : C(0); });
    case BinaryOp::leaky_relu_grad:
      return map2<T, T>(a, b, out, [p0](C g, C x) { return x > C(0) ? g : C(g * p0); });
    case BinaryOp::sigmoid_grad: return map2<T, T>(a, b, out, [](C g, C y) { return C(g * y * (C(1) - y)); });
    case BinaryOp::tanh_grad: return map2<T, T>(a, b, out, [](C g, C y) { return C(g * (C(1) - y * y)); });
    case BinaryOp::gelu_grad: return map2<T, T>(a, b, out, [](C g, C x) { return C(g * gelu_derivative(x)); });
    case BinaryOp::clamp_grad:
      return map2<T, T>(a, b, out, [p0, p1](C g, C x) { return (x >= p0 && x <= p1) ? g : C(0); });
    case BinaryOp::eq: return map2<bool, T>(a, b, out, [](C x, C y) { return x == y; });
    case BinaryOp::ne: return map2<bool, T>(a, b, out, [](C x, C y) { return x != y; });
    case BinaryOp::lt: return map2<bool, T>(a, b, out, [](C x, C y) { return x < y; });
    case BinaryOp::le: return map2<bool, T>(a, b, out, [](C x, C y) { return x <= y; });
    case BinaryOp::gt: return map2<bool, T>(a, b, out, [](C x, C y) { return x > y; });
    case BinaryOp::ge: return map2<bool, T>(a, b, out, [](C x, C y) { return x >= y; });
  }
}

void unary_cpu(UnaryOp op, const Tensor& x, const Tensor& out, double p0, double p1) {
  visit_dtype(x.dtype(), [&]<typename T>() { unary_typed<T>(op, x, out, p0, p1); });
}

void binary_cpu(BinaryOp op, const Tensor& a, const Tensor& b, const Tensor& out, double p0, double p1) {
  visit_dtype(a.dtype(), [&]<typename T>() { binary_typed<T>(op, a, b, out, p0, p1); });
}

void where_cpu(const Tensor& cond, const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_dtype(out.dtype(), [&]<typename T>() {
    for_each_strided<4>(out.shape(), operands<4>({&out, &cond, &a, &b}),
                        [](int64_t n, std::array<char*, 4> p, std::array<int64_t, 4> s) {
                          for (int64_t i = 0; i < n; ++i)
                            *at<T>(p[0], i, s[0]) = *at<bool>(p[1], i, s[1]) ? *at<T>(p[2], i, s[2]) : *at<T>(p[3], i, s[3]);
                        });
  });
}

}  // namespace

HG_REGISTER_KERNEL(unary_stub, cpu, unary_cpu);
HG_REGISTER_KERNEL(binary_stub, cpu, binary_cpu);
HG_REGISTER_KERNEL(where_stub, cpu, where_cpu);

}  // namespace hg::cpu
