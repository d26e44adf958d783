// CPU kernels of elementwise ops: each op a small lambda in compute precision (f32
// for f16/bf16, rounded once on store), expanded over dtypes by visit_dtype.
#include <cmath>

#include "ops/cpu/loops.h"
#include "ops/cpu/vec/map8.h"
#include "ops/cpu/vec/relu_bits.h"
#include "ops/elementwise_kernels.h"

namespace hg::cpu {
namespace {

using vec::fabs_of;
using vec::lanes;
using vec::select;
using vec::sqrt_of;

template <class T>
T* at(char* p, int64_t i, int64_t s) {
  return reinterpret_cast<T*>(p + i * s);
}

// Each op's body is a generic lambda: called with a compute-type scalar on strided or
// f64/i64 data, and with vec::F8 (eight f32 lanes) on contiguous f32/f16/bf16 data, so
// both paths perform the same IEEE operations and give the same bits.
template <class TO, class TI, class F>
void map1(const Tensor& x, const Tensor& out, F f) {
  for_each_strided<2>(out.shape(), operands<2>({&out, &x}), [&](int64_t n, std::array<char*, 2> p, std::array<int64_t, 2> s) {
#ifdef HG_VEC8
    if constexpr (std::is_same_v<TO, TI> && vec::kVec8<TO>)
      if (vec::vec8_strides<TO>(s[0], s[1])) return vec::run8(n, reinterpret_cast<TO*>(p[0]), f, vec::in8<TI>(p[1], s[1]));
#endif
    for (int64_t i = 0; i < n; ++i) *at<TO>(p[0], i, s[0]) = store<TO>(f(load(*at<TI>(p[1], i, s[1]))));
  });
}

template <class TO, class TI, class F>
void map2(const Tensor& a, const Tensor& b, const Tensor& out, F f) {
  for_each_strided<3>(out.shape(), operands<3>({&out, &a, &b}),
                      [&](int64_t n, std::array<char*, 3> p, std::array<int64_t, 3> s) {
#ifdef HG_VEC8
    if constexpr (std::is_same_v<TO, TI> && vec::kVec8<TO>)
      if (vec::vec8_strides<TO>(s[0], s[1], s[2]))
        return vec::run8(n, reinterpret_cast<TO*>(p[0]), f, vec::in8<TI>(p[1], s[1]), vec::in8<TI>(p[2], s[2]));
#endif
    for (int64_t i = 0; i < n; ++i)
      *at<TO>(p[0], i, s[0]) = store<TO>(f(load(*at<TI>(p[1], i, s[1])), load(*at<TI>(p[2], i, s[2]))));
  });
}

// ReLU and its gradient on f16/bf16 run on the bits (ops/cpu/vec/relu_bits.h): the same
// results as the f32 body, without the two conversions.
template <class T>
void relu_bits_map(const Tensor& x, const Tensor& out) {
  constexpr vec::Format16 f = vec::format16<T>();
  for_each_strided<2>(out.shape(), operands<2>({&out, &x}), [&](int64_t n, std::array<char*, 2> p, std::array<int64_t, 2> s) {
    if (s[0] == 2 && s[1] == 2)
      return vec::relu16(n, reinterpret_cast<const uint16_t*>(p[1]), reinterpret_cast<uint16_t*>(p[0]), f);
    for (int64_t i = 0; i < n; ++i) *at<uint16_t>(p[0], i, s[0]) = vec::relu_bits(*at<uint16_t>(p[1], i, s[1]), f);
  });
}

template <class T>
void relu_grad_bits_map(const Tensor& g, const Tensor& y, const Tensor& out) {
  constexpr vec::Format16 f = vec::format16<T>();
  for_each_strided<3>(out.shape(), operands<3>({&out, &g, &y}),
                      [&](int64_t n, std::array<char*, 3> p, std::array<int64_t, 3> s) {
    if (s[0] == 2 && s[1] == 2 && s[2] == 2)
      return vec::relu_grad16(n, reinterpret_cast<const uint16_t*>(p[1]), reinterpret_cast<const uint16_t*>(p[2]),
                              reinterpret_cast<uint16_t*>(p[0]), f);
    for (int64_t i = 0; i < n; ++i)
      *at<uint16_t>(p[0], i, s[0]) = vec::relu_grad_bits(*at<uint16_t>(p[1], i, s[1]), *at<uint16_t>(p[2], i, s[2]), f);
  });
}

// exp(-x) overflows for x below about -88.7 in f32 although the result (~e^x) is still
// representable there, so for x < 0 the form e^x / (1 + e^x) is used. Selects, not a
// branch (a sign that changes at random mispredicts), and only exp runs lane by lane.
template <class V>
V sigmoid_stable(V x) {
  const auto neg = x < V(0);
  const V e = lanes(select(neg, x, -x), [](auto a) { return static_cast<decltype(a)>(std::exp(a)); });
  return select(neg, e, V(1)) / (V(1) + e);
}

// NaN first, so a NaN lane never becomes a number.
template <class V>
V max_nan(V x, V y) {
  return select(x != x, x, select(y != y, y, select(x > y, x, y)));
}
template <class V>
V min_nan(V x, V y) {
  return select(x != x, x, select(y != y, y, select(x < y, x, y)));
}

template <class T>
void unary_typed(UnaryOp op, const Tensor& x, const Tensor& out, double p0d, double p1d) {
  using C = compute_t<T>;
  const C p0 = store<C>(p0d), p1 = store<C>(p1d);  // store: an i64 bound (clamp) saturates
  auto lib = [&](auto fn) { map1<T, T>(x, out, [fn](auto v) { return lanes(v, fn); }); };
  switch (op) {
    case UnaryOp::neg: return map1<T, T>(x, out, [](auto v) { return -v; });
    case UnaryOp::exp: return lib([](auto v) { return std::exp(v); });
    case UnaryOp::log: return lib([](auto v) { return std::log(v); });
    case UnaryOp::sqrt: return map1<T, T>(x, out, [](auto v) { return sqrt_of(v); });
    case UnaryOp::rsqrt: return map1<T, T>(x, out, [](auto v) { return decltype(v)(1) / sqrt_of(v); });
    case UnaryOp::abs: return map1<T, T>(x, out, [](auto v) { return fabs_of(v); });
    case UnaryOp::sign:
      return map1<T, T>(x, out, [](auto v) {
        using V = decltype(v);
        return select(v > V(0), V(1), select(v < V(0), V(-1), V(0)));
      });
    case UnaryOp::square: return map1<T, T>(x, out, [](auto v) { return v * v; });
    case UnaryOp::reciprocal: return map1<T, T>(x, out, [](auto v) { return decltype(v)(1) / v; });
    case UnaryOp::relu:
      if constexpr (vec::kBits16<T>) return relu_bits_map<T>(x, out);
      return map1<T, T>(x, out, [](auto v) {
        using V = decltype(v);
        return select(v > V(0), v, select(v != v, v, V(0)));
      });
    case UnaryOp::sigmoid: return map1<T, T>(x, out, [](auto v) { return sigmoid_stable(v); });
    case UnaryOp::tanh: return lib([](auto v) { return std::tanh(v); });
    case UnaryOp::gelu: return lib([](auto v) { return gelu_exact(v); });
    case UnaryOp::add_scalar: return map1<T, T>(x, out, [p0](auto v) { return v + decltype(v)(p0); });
    case UnaryOp::mul_scalar: return map1<T, T>(x, out, [p0](auto v) { return v * decltype(v)(p0); });
    case UnaryOp::div_scalar: return map1<T, T>(x, out, [p0](auto v) { return v / decltype(v)(p0); });
    case UnaryOp::pow_scalar: return lib([p0](auto v) { return static_cast<decltype(v)>(std::pow(v, p0)); });
    case UnaryOp::rsub_scalar: return map1<T, T>(x, out, [p0](auto v) { return decltype(v)(p0) - v; });
    case UnaryOp::rdiv_scalar: return map1<T, T>(x, out, [p0](auto v) { return decltype(v)(p0) / v; });
    case UnaryOp::leaky_relu:
      return map1<T, T>(x, out, [p0](auto v) {
        using V = decltype(v);
        return select(v > V(0), v, V(p0) * v);
      });
    case UnaryOp::clamp:
      return map1<T, T>(x, out, [p0, p1](auto v) {
        using V = decltype(v);
        return select(v != v, v, select(v < V(p0), V(p0), select(v > V(p1), V(p1), v)));
      });
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
  const C p0 = store<C>(p0d), p1 = store<C>(p1d);  // store: an i64 bound (clamp) saturates
  switch (op) {
    case BinaryOp::add: return map2<T, T>(a, b, out, [](auto x, auto y) { return x + y; });
    case BinaryOp::sub: return map2<T, T>(a, b, out, [](auto x, auto y) { return x - y; });
    case BinaryOp::mul: return map2<T, T>(a, b, out, [](auto x, auto y) { return x * y; });
    case BinaryOp::div: return map2<T, T>(a, b, out, [](auto x, auto y) { return x / y; });
    case BinaryOp::pow:
      return map2<T, T>(a, b, out, [](auto x, auto y) {
        return lanes(x, y, [](auto u, auto w) { return static_cast<decltype(u)>(std::pow(u, w)); });
      });
    case BinaryOp::maximum: return map2<T, T>(a, b, out, [](auto x, auto y) { return max_nan(x, y); });
    case BinaryOp::minimum: return map2<T, T>(a, b, out, [](auto x, auto y) { return min_nan(x, y); });
    case BinaryOp::relu_grad:
      if constexpr (vec::kBits16<T>) return relu_grad_bits_map<T>(a, b, out);
      return map2<T, T>(a, b, out, [](auto g, auto y) { return select(y > decltype(y)(0), g, decltype(g)(0)); });
    case BinaryOp::leaky_relu_grad:
      return map2<T, T>(a, b, out, [p0](auto g, auto x) { return select(x > decltype(x)(0), g, g * decltype(g)(p0)); });
    case BinaryOp::sigmoid_grad:
      return map2<T, T>(a, b, out, [](auto g, auto y) { return g * y * (decltype(y)(1) - y); });
    case BinaryOp::tanh_grad: return map2<T, T>(a, b, out, [](auto g, auto y) { return g * (decltype(y)(1) - y * y); });
    case BinaryOp::gelu_grad:
      return map2<T, T>(a, b, out, [](auto g, auto x) { return g * lanes(x, [](auto v) { return gelu_derivative(v); }); });
    case BinaryOp::clamp_grad:
      return map2<T, T>(a, b, out, [p0, p1](auto g, auto x) {
        using V = decltype(x);
        return select(x >= V(p0) && x <= V(p1), g, V(0));
      });
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
