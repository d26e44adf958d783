// The CPU's vectorised elementwise kernels against scalar references written here: every
// unary op over all 65,536 f16 and bf16 bit patterns, binary ops over edge and random
// pairs, bit for bit (NaN payloads included), plus the abs(-0) and bf16 sigmoid fixes.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "halfgrad.h"
#include "ops/elementwise_kernels.h"
#include "tests/devices.h"

using namespace hg;

namespace {

// The rounding of an f32 result into T, and the decoding of T, by the scalar conversions.
template <class T>
uint32_t bits_of(T v) {
  if constexpr (std::is_same_v<T, float>) return std::bit_cast<uint32_t>(v);
  else return v.bits;
}
template <class T>
T from_bits_of(uint32_t b) {
  if constexpr (std::is_same_v<T, float>) return std::bit_cast<float>(b);
  else return T::from_bits(static_cast<uint16_t>(b));
}
template <class T>
T round_to(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return T(v);
}
template <class T>
float widen(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return static_cast<float>(v);
}

// Every bit pattern of a 16-bit type, then 5 more so the vector loop has a tail.
template <class T>
std::vector<T> all_patterns() {
  std::vector<T> v;
  for (uint32_t b = 0; b < 0x10005; ++b) v.push_back(T::from_bits(static_cast<uint16_t>(b & 0xffff)));
  return v;
}

// f32 inputs: every bf16 pattern widened (all exponents, NaNs, subnormals) with random
// low bits, so f32 rounding in the ops is exercised too.
std::vector<float> f32_inputs() {
  std::mt19937 rng(11);
  std::vector<float> v;
  for (uint32_t b = 0; b < 0x10003; ++b) v.push_back(std::bit_cast<float>(static_cast<uint32_t>(((b & 0xffff) << 16) | (rng() & 0xffff))));
  return v;
}

struct UnaryCase {
  const char* name;
  UnaryOp op;
  double p0, p1;
  std::function<float(float, float, float)> ref;  // (x, p0, p1) in f32
};

float sign_ref(float x) { return x > 0 ? 1.0f : (x < 0 ? -1.0f : 0.0f); }
float sigmoid_ref(float x) {
  if (x < 0) {
    const float e = std::exp(x);
    return e / (1.0f + e);
  }
  return 1.0f / (1.0f + std::exp(-x));
}
float gelu_ref(float x) { return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f)); }
float gelu_grad_ref(float x) {
  const float cdf = 0.5f * (1.0f + std::erf(x * 0.70710678118654752440f));
  const float pdf = std::exp(-0.5f * x * x) * 0.39894228040143267794f;
  return cdf + x * pdf;
}

std::vector<UnaryCase> unary_cases() {
  return {
      {"neg", UnaryOp::neg, 0, 0, [](float x, float, float) { return -x; }},
      {"exp", UnaryOp::exp, 0, 0, [](float x, float, float) { return std::exp(x); }},
      {"log", UnaryOp::log, 0, 0, [](float x, float, float) { return std::log(x); }},
      {"sqrt", UnaryOp::sqrt, 0, 0, [](float x, float, float) { return std::sqrt(x); }},
      {"rsqrt", UnaryOp::rsqrt, 0, 0, [](float x, float, float) { return 1.0f / std::sqrt(x); }},
      {"abs", UnaryOp::abs, 0, 0, [](float x, float, float) { return std::fabs(x); }},
      {"sign", UnaryOp::sign, 0, 0, [](float x, float, float) { return sign_ref(x); }},
      {"square", UnaryOp::square, 0, 0, [](float x, float, float) { return x * x; }},
      {"reciprocal", UnaryOp::reciprocal, 0, 0, [](float x, float, float) { return 1.0f / x; }},
      {"relu", UnaryOp::relu, 0, 0, [](float x, float, float) { return x > 0 ? x : (std::isnan(x) ? x : 0.0f); }},
      {"sigmoid", UnaryOp::sigmoid, 0, 0, [](float x, float, float) { return sigmoid_ref(x); }},
      {"tanh", UnaryOp::tanh, 0, 0, [](float x, float, float) { return std::tanh(x); }},
      {"gelu", UnaryOp::gelu, 0, 0, [](float x, float, float) { return gelu_ref(x); }},
      {"add_scalar", UnaryOp::add_scalar, 0.3, 0, [](float x, float p, float) { return x + p; }},
      {"mul_scalar", UnaryOp::mul_scalar, -3.7, 0, [](float x, float p, float) { return x * p; }},
      {"div_scalar", UnaryOp::div_scalar, 3.0, 0, [](float x, float p, float) { return x / p; }},
      {"pow_scalar", UnaryOp::pow_scalar, 2.5, 0, [](float x, float p, float) { return std::pow(x, p); }},
      {"rsub_scalar", UnaryOp::rsub_scalar, 1.5, 0, [](float x, float p, float) { return p - x; }},
      {"rdiv_scalar", UnaryOp::rdiv_scalar, 2.0, 0, [](float x, float p, float) { return p / x; }},
      {"leaky_relu", UnaryOp::leaky_relu, 0.01, 0, [](float x, float p, float) { return x > 0 ? x : p * x; }},
      {"clamp", UnaryOp::clamp, -1.5, 2.25,
       [](float x, float lo, float hi) { return std::isnan(x) ? x : (x < lo ? lo : (x > hi ? hi : x)); }},
  };
}

struct BinaryCase {
  const char* name;
  BinaryOp op;
  double p0, p1;
  std::function<float(float, float, float, float)> ref;  // (a, b, p0, p1) in f32
};

std::vector<BinaryCase> binary_cases() {
  auto nan_first = [](float x, float y, bool larger) {
    if (std::isnan(x)) return x;
    if (std::isnan(y)) return y;
    return larger ? (x > y ? x : y) : (x < y ? x : y);
  };
  return {
      {"add", BinaryOp::add, 0, 0, [](float a, float b, float, float) { return a + b; }},
      {"sub", BinaryOp::sub, 0, 0, [](float a, float b, float, float) { return a - b; }},
      {"mul", BinaryOp::mul, 0, 0, [](float a, float b, float, float) { return a * b; }},
      {"div", BinaryOp::div, 0, 0, [](float a, float b, float, float) { return a / b; }},
      {"pow", BinaryOp::pow, 0, 0, [](float a, float b, float, float) { return std::pow(a, b); }},
      {"maximum", BinaryOp::maximum, 0, 0, [=](float a, float b, float, float) { return nan_first(a, b, true); }},
      {"minimum", BinaryOp::minimum, 0, 0, [=](float a, float b, float, float) { return nan_first(a, b, false); }},
      {"relu_grad", BinaryOp::relu_grad, 0, 0, [](float g, float y, float, float) { return y > 0 ? g : 0.0f; }},
      {"leaky_relu_grad", BinaryOp::leaky_relu_grad, 0.1, 0,
       [](float g, float x, float p, float) { return x > 0 ? g : g * p; }},
      {"sigmoid_grad", BinaryOp::sigmoid_grad, 0, 0, [](float g, float y, float, float) { return g * y * (1.0f - y); }},
      {"tanh_grad", BinaryOp::tanh_grad, 0, 0, [](float g, float y, float, float) { return g * (1.0f - y * y); }},
      {"gelu_grad", BinaryOp::gelu_grad, 0, 0, [](float g, float x, float, float) { return g * gelu_grad_ref(x); }},
      {"clamp_grad", BinaryOp::clamp_grad, -1.0, 1.0,
       [](float g, float x, float lo, float hi) { return x >= lo && x <= hi ? g : 0.0f; }},
  };
}

// Counts mismatches and reports the first few, so one failure does not flood the log.
struct Tally {
  int bad = 0;
  void check(bool ok, const std::string& what) {
    if (ok) return;
    if (++bad <= 8) FAIL_CHECK(what);
  }
};

std::string hex(uint32_t v) {
  char s[16];
  std::snprintf(s, sizeof s, "0x%x", v);
  return s;
}

template <class T>
void check_unary(const std::vector<T>& in) {
  Tensor x = from_data<T>(in, {static_cast<int64_t>(in.size())}, {dtype_v<T>});
  for (const UnaryCase& c : unary_cases()) {
    INFO(dtype_name(dtype_v<T>) << " " << c.name);
    Tensor y = run_unary(c.op, x, c.p0, c.p1);
    const T* out = y.data<T>();
    Tally t;
    for (size_t i = 0; i < in.size(); ++i) {
      const uint32_t want = bits_of(round_to<T>(c.ref(widen(in[i]), static_cast<float>(c.p0), static_cast<float>(c.p1))));
      t.check(bits_of(out[i]) == want, std::string(c.name) + "(" + hex(bits_of(in[i])) + ") = " +
                                           hex(bits_of(out[i])) + ", want " + hex(want));
    }
    CHECK(t.bad == 0);
  }
}

// Edge values of T: zeros, infinities, NaNs (quiet, signaling, negative), subnormals, the
// largest finite, and for f16 the operands whose product or sum crosses 65520.
template <class T>
std::vector<float> edges() {
  std::vector<float> e = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f, 0.5f, 2.0f, 3.0f, -2.5f};
  if constexpr (std::is_same_v<T, float>) {
    e.insert(e.end(), {std::ldexp(1.0f, -149), 3.4e38f, -3.4e38f, std::ldexp(1.0f, -126)});
  } else {
    std::vector<uint16_t> raw;
    if constexpr (std::is_same_v<T, half>) raw = {0x0001, 0x8001, 0x03ff, 0x0400, 0x7bff, 0xfbff, 0x7d00, 0xfe01, 0x5bf8, 0x5c04, 0x7bfe};
    else raw = {0x0001, 0x8001, 0x007f, 0x0080, 0x7f7f, 0xff7f, 0x7fa0, 0xffc1, 0x3f81};
    for (uint16_t b : raw) e.push_back(widen(T::from_bits(b)));
    if constexpr (std::is_same_v<T, half>) e.insert(e.end(), {255.0f, 257.0f, 65504.0f, 32768.0f, 32752.0f, 6.1e-5f});
  }
  return e;
}

template <class T>
T random_value(std::mt19937& rng) {
  if constexpr (std::is_same_v<T, float>) return std::bit_cast<float>(static_cast<uint32_t>(rng()));
  else return T::from_bits(static_cast<uint16_t>(rng()));
}

// a and b as columns of all edge pairs followed by random pairs (n not a multiple of 8).
template <class T>
void binary_operands(std::vector<T>& a, std::vector<T>& b) {
  const std::vector<float> e = edges<T>();
  for (float x : e)
    for (float y : e) {
      a.push_back(round_to<T>(x));
      b.push_back(round_to<T>(y));
    }
  std::mt19937 rng(5);
  for (int i = 0; i < 20003; ++i) {
    a.push_back(random_value<T>(rng));
    b.push_back(random_value<T>(rng));
  }
}

// Bit equality, except for NaN payloads: when two NaNs meet in a binary op (two NaN
// operands, or a NaN operand and one the op makes, as -inf * 0 inside gelu_grad), IEEE 754
// does not say whose payload comes out (x86 takes the first operand's, and a compiler may
// swap the operands of a commutative multiply), so a NaN result only has to be NaN. Unary
// ops, with one NaN source, are compared payload and all.
template <class T>
bool same_result(T got, uint32_t want, T a, T b) {
  if (std::isnan(widen(a)) || std::isnan(widen(b))) {
    const bool want_nan = std::isnan(widen(from_bits_of<T>(want)));
    if (want_nan) return std::isnan(widen(got));
  }
  return bits_of(got) == want;
}

template <class T>
void check_binary() {
  std::vector<T> av, bv;
  binary_operands<T>(av, bv);
  const auto n = static_cast<int64_t>(av.size());
  Tensor a = from_data<T>(av, {n}, {dtype_v<T>}), b = from_data<T>(bv, {n}, {dtype_v<T>});
  // b's element 3 broadcast against all of a: the loop's broadcast operand.
  Tensor b_scalar = from_data<T>({bv[3]}, {1}, {dtype_v<T>});
  for (const BinaryCase& c : binary_cases()) {
    INFO(dtype_name(dtype_v<T>) << " " << c.name);
    const float p0 = static_cast<float>(c.p0), p1 = static_cast<float>(c.p1);
    Tensor y = run_binary(c.op, a, b, c.p0, c.p1);
    const T* out = y.data<T>();
    Tensor yb = run_binary(c.op, a, b_scalar, c.p0, c.p1);
    const T* out_b = yb.data<T>();
    Tally t;
    for (int64_t i = 0; i < n; ++i) {
      const uint32_t want = bits_of(round_to<T>(c.ref(widen(av[i]), widen(bv[i]), p0, p1)));
      t.check(same_result(out[i], want, av[i], bv[i]), std::string(c.name) + "(" + hex(bits_of(av[i])) + ", " +
                                                          hex(bits_of(bv[i])) + ") = " + hex(bits_of(out[i])) +
                                                          ", want " + hex(want));
      const uint32_t want_b = bits_of(round_to<T>(c.ref(widen(av[i]), widen(bv[3]), p0, p1)));
      t.check(same_result(out_b[i], want_b, av[i], bv[3]),
              std::string(c.name) + "(" + hex(bits_of(av[i])) + ", broadcast " + hex(bits_of(bv[3])) + ") = " +
                  hex(bits_of(out_b[i])) + ", want " + hex(want_b));
    }
    CHECK(t.bad == 0);
  }
}

}  // namespace

TEST_CASE("every unary op gives the scalar reference's bits for all 65,536 f16 and bf16 inputs", "[elementwise][bits]") {
  check_unary<half>(all_patterns<half>());
  check_unary<bfloat16>(all_patterns<bfloat16>());
}

TEST_CASE("every unary op gives the scalar reference's bits in f32", "[elementwise][bits]") {
  check_unary<float>(f32_inputs());
}

TEST_CASE("binary ops give the scalar reference's bits on edge and random pairs", "[elementwise][bits]") {
  check_binary<half>();
  check_binary<bfloat16>();
  check_binary<float>();
}

TEST_CASE("f16 results cross the overflow boundary 65520 exactly where IEEE rounding does", "[elementwise][bits]") {
  // 65519.996 rounds down to 65504, 65520 (the midpoint) goes to inf under ties-to-even.
  Tensor a = from_vector({32752.0, 32760.0, 255.0, 65504.0, 65504.0}, {5}, {f16});
  Tensor b = from_vector({2.0, 2.0, 257.0, 8.0, 16.0}, {5}, {f16});
  std::vector<double> sum = (a * b).to_vector<double>();
  CHECK(sum[0] == 65504.0);
  CHECK(std::isinf(sum[1]));  // 65520
  CHECK(std::isinf(sum[2]));  // 65535
  CHECK(((a + b).to_vector<double>()[3]) == 65504.0);  // 65512 rounds down to 65504
  CHECK(std::isinf((a + b).to_vector<double>()[4]));    // 65520
}

TEST_CASE("abs(-0) is +0 in every floating dtype and on every device", "[elementwise][bits]") {
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    for (DType dt : {f32, f16, bf16, f64}) {
      INFO(dtype_name(dt));
      Tensor y = abs(from_vector({-0.0, 0.0, -2.0}, {3}, {dt, d})).to(f64).to(Device::cpu());
      for (int i = 0; i < 2; ++i) CHECK_FALSE(std::signbit(y.data<double>()[i]));
      CHECK(y.data<double>()[2] == 2.0);
    }
  }
}

TEST_CASE("sigmoid keeps its tiny results where exp(-x) overflows f32 (x in [-103, -88.7])", "[elementwise][bits]") {
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    const std::vector<double> xs = {-88.0, -89.0, -92.0, -96.0, -100.0, -103.0};
    for (DType dt : {f32, bf16}) {
      INFO(dtype_name(dt));
      // The inputs are exact in bf16; the reference is e^x / (1 + e^x) in f64, rounded once.
      std::vector<double> y = sigmoid(from_vector(xs, {6}, {dt, d})).to(f64).to(Device::cpu()).to_vector<double>();
      for (size_t i = 0; i < xs.size(); ++i) {
        INFO("x = " << xs[i]);
        const double e = std::exp(xs[i]);
        const double ref = from_vector({e / (1 + e)}, {1}, {dt}).to(f64).item<double>();
        if (xs[i] >= -92.0) CHECK(y[i] > 0);  // bf16's smallest subnormal, 2^-133, is e^-92.2
        // f32's e^x is subnormal here, with fewer significant bits than f64's: one bf16
        // ulp (or the f32 subnormal spacing, 2^-149) of difference is allowed.
        CHECK(std::fabs(y[i] - ref) <= std::max(std::ldexp(1.0, -149), ref * (dt == bf16 ? 1.0 / 128 : 1e-5)));
      }
    }
  }
}

namespace {

// Edge values then random ones, cycling, as n values of T.
template <class T>
std::vector<T> mixed_values(int64_t n, std::mt19937& rng) {
  const std::vector<float> e = edges<T>();
  std::vector<T> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(i % 3 == 0 ? random_value<T>(rng) : round_to<T>(e[static_cast<size_t>(i) % e.size()]));
  return v;
}

// a [3, n] contiguous; b a transposed [n, 3] (a strided operand: the scalar loop); c a [n]
// row broadcast over a's rows (the vector loop's rows of n, with every tail length).
template <class T>
void check_shapes() {
  std::mt19937 rng(7);
  for (int64_t n = 0; n <= 17; ++n) {
    INFO(dtype_name(dtype_v<T>) << ", n " << n);
    const std::vector<T> av = mixed_values<T>(3 * n, rng), bv = mixed_values<T>(3 * n, rng), cv = mixed_values<T>(n, rng);
    const Tensor a = from_data<T>(av, {3, n}, {dtype_v<T>});
    const Tensor b = from_data<T>(bv, {n, 3}, {dtype_v<T>}).permute({1, 0});
    const Tensor c = from_data<T>(cv, {n}, {dtype_v<T>});
    Tally t;
    for (const BinaryCase& k : binary_cases()) {
      const float p0 = static_cast<float>(k.p0), p1 = static_cast<float>(k.p1);
      const Tensor ys = run_binary(k.op, a, b, k.p0, k.p1).contiguous(), yc = run_binary(k.op, a, c, k.p0, k.p1).contiguous();
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const T x = av[i * n + j], s = bv[j * 3 + i], r = cv[j];
          const uint32_t want_s = bits_of(round_to<T>(k.ref(widen(x), widen(s), p0, p1)));
          const uint32_t want_c = bits_of(round_to<T>(k.ref(widen(x), widen(r), p0, p1)));
          t.check(same_result(ys.data<T>()[i * n + j], want_s, x, s), std::string(k.name) + " strided, " + hex(bits_of(x)) + ", " + hex(bits_of(s)));
          t.check(same_result(yc.data<T>()[i * n + j], want_c, x, r), std::string(k.name) + " broadcast row, " + hex(bits_of(x)) + ", " + hex(bits_of(r)));
        }
    }
    for (const UnaryCase& k : unary_cases()) {
      const Tensor y = run_unary(k.op, b, k.p0, k.p1).contiguous();
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < n; ++j) {
          const T s = bv[j * 3 + i];
          const uint32_t want = bits_of(round_to<T>(k.ref(widen(s), static_cast<float>(k.p0), static_cast<float>(k.p1))));
          t.check(bits_of(y.data<T>()[i * n + j]) == want, std::string(k.name) + " strided, " + hex(bits_of(s)));
        }
    }
    CHECK(t.bad == 0);
  }
}

}  // namespace

TEST_CASE("elementwise ops give the reference's bits for rows of every length 0..17, strided and broadcast operands",
          "[elementwise][bits]") {
  check_shapes<half>();
  check_shapes<bfloat16>();
  check_shapes<float>();
}
