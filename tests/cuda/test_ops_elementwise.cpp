// Elementwise kernels on cuda against the CPU kernels: every UnaryOp and BinaryOp and
// where, in f64/f32/f16/bf16 (and i64 where integers make sense), contiguous (vector path),
// odd sizes, strided and broadcast operands, NaN/inf inputs, and gradients through autograd.
#include <catch2/catch.hpp>

#include "ops/elementwise_kernels.h"
#include "tests/cuda/ops_compare.h"

using namespace hg;
using hg::test::kCuda;

namespace {
constexpr int kUnaryOps = static_cast<int>(UnaryOp::isfinite) + 1;
constexpr int kBinaryOps = static_cast<int>(BinaryOp::ge) + 1;

bool positive_domain(UnaryOp op) {
  return op == UnaryOp::log || op == UnaryOp::sqrt || op == UnaryOp::rsqrt || op == UnaryOp::pow_scalar;
}

// Random values with NaN, +inf, -inf, 0 and -0 planted at the front.
Tensor with_specials(Tensor x) {
  if (!is_floating(x.dtype())) return x;
  const double specials[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0};
  for (int i = 0; i < 5; ++i) fill_(x.flatten().narrow(0, i, 1), specials[i]);
  return x;
}

DType out_dtype(UnaryOp op, DType dt) { return op == UnaryOp::isfinite ? b8 : dt; }
DType out_dtype(BinaryOp op, DType dt) { return op >= BinaryOp::eq ? b8 : dt; }

// The CPU kernel's result and the cuda kernel's into a poisoned tensor, compared.
void check_unary(UnaryOp op, const Tensor& x, double p0, double p1) {
  Tensor cpu = empty(x.shape(), {out_dtype(op, x.dtype())});
  unary_stub(Device::cpu(), op, x, cpu, p0, p1);
  Tensor dev = test::poisoned(x.shape(), cpu.dtype());
  unary_stub(kCuda, op, x.to(kCuda), dev, p0, p1);
  test::require_same(dev, cpu);
}
}  // namespace

TEST_CASE("every unary op on cuda matches the CPU kernel", "[cuda][ops][elementwise]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes()) {
    for (int k = 0; k < kUnaryOps; ++k) {
      const auto op = static_cast<UnaryOp>(k);
      INFO(dtype_name(dt) << " unary op " << k);
      const Tensor x = positive_domain(op) ? test::random_input({37, 29}, dt, 10 + k, 0.05, 4)
                                           : with_specials(test::random_input({37, 29}, dt, 10 + k));
      const double p0 = op == UnaryOp::clamp ? -1.5 : 1.7, p1 = 0.75;
      check_unary(op, x, p0, p1);
      // A transposed (strided) input on the device, the output contiguous.
      Tensor cpu = empty({29, 37}, {out_dtype(op, dt)});
      unary_stub(Device::cpu(), op, x.transpose(0, 1), cpu, p0, p1);
      Tensor dev = test::poisoned({29, 37}, cpu.dtype());
      unary_stub(kCuda, op, x.to(kCuda).transpose(0, 1), dev, p0, p1);
      test::require_same(dev, cpu);
    }
  }
  // Integer tensors go through the same kernels in i64.
  for (UnaryOp op : {UnaryOp::neg, UnaryOp::abs, UnaryOp::sign, UnaryOp::square, UnaryOp::add_scalar,
                     UnaryOp::mul_scalar, UnaryOp::relu, UnaryOp::clamp, UnaryOp::isfinite}) {
    INFO("i64 unary op " << static_cast<int>(op));
    check_unary(op, randint(-50, 50, {1001}), -3, 7);
  }
}

TEST_CASE("every binary op on cuda matches the CPU kernel, with broadcast operands", "[cuda][ops][elementwise]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes()) {
    for (int k = 0; k < kBinaryOps; ++k) {
      const auto op = static_cast<BinaryOp>(k);
      INFO(dtype_name(dt) << " binary op " << k);
      const bool pow = op == BinaryOp::pow;
      const Tensor a = pow ? test::random_input({23, 45}, dt, 100 + k, 0.1, 3) : with_specials(test::random_input({23, 45}, dt, 100 + k));
      Tensor b = test::random_input({23, 45}, dt, 200 + k, pow ? -2 : -3, 3);
      if (op >= BinaryOp::eq) b = where(bernoulli({23, 45}, 0.3), a, b);  // ties for the comparisons
      const Tensor row = test::random_input({1, 45}, dt, 300 + k, 0.5, 2);
      const double p0 = op == BinaryOp::clamp_grad ? -1.0 : 0.3, p1 = 1.25;
      for (int variant = 0; variant < 3; ++variant) {
        INFO("variant " << variant << " (0 contiguous, 1 broadcast row, 2 transposed)");
        const Tensor x = variant == 2 ? a.transpose(0, 1).contiguous().transpose(0, 1) : a;
        const Tensor y = variant == 1 ? row.expand({23, 45}) : b;
        Tensor cpu = empty({23, 45}, {out_dtype(op, dt)});
        binary_stub(Device::cpu(), op, x, y, cpu, p0, p1);
        Tensor dev = test::poisoned({23, 45}, cpu.dtype());
        const Tensor xd = variant == 2 ? a.transpose(0, 1).to(kCuda).contiguous().transpose(0, 1) : a.to(kCuda);
        const Tensor yd = variant == 1 ? row.to(kCuda).expand({23, 45}) : b.to(kCuda);
        if (variant == 2) REQUIRE_FALSE(xd.is_contiguous());
        binary_stub(kCuda, op, xd, yd, dev, p0, p1);
        test::require_same(dev, cpu);
      }
    }
  }
  const Tensor i = randint(-20, 20, {777}), j = randint(-20, 20, {777});
  for (BinaryOp op : {BinaryOp::add, BinaryOp::sub, BinaryOp::mul, BinaryOp::maximum, BinaryOp::lt, BinaryOp::eq}) {
    INFO("i64 binary op " << static_cast<int>(op));
    Tensor cpu = empty({777}, {out_dtype(op, i64)});
    binary_stub(Device::cpu(), op, i, j, cpu, 0, 0);
    Tensor dev = test::poisoned({777}, cpu.dtype());
    binary_stub(kCuda, op, i.to(kCuda), j.to(kCuda), dev, 0, 0);
    REQUIRE(dev.to(Device::cpu()).to_vector<int64_t>() == cpu.to_vector<int64_t>());
  }
}

TEST_CASE("where on cuda matches the CPU with broadcast operands", "[cuda][ops][elementwise]") {
  HG_REQUIRE_CUDA();
  for (DType dt : {f64, f32, f16, bf16, i64}) {
    INFO(dtype_name(dt));
    const Tensor c = bernoulli({31, 17}, 0.4);
    const Tensor a = is_floating(dt) ? test::random_input({31, 17}, dt, 1) : randint(-9, 9, {31, 17});
    const Tensor b = is_floating(dt) ? test::random_input({17}, dt, 2) : randint(-9, 9, {17});
    const Tensor cpu = where(c, a, b);
    const Tensor dev = where(c.to(kCuda), a.to(kCuda), b.to(kCuda));
    REQUIRE(dev.to(Device::cpu()).to_vector<double>() == cpu.to_vector<double>());
  }
}

TEST_CASE("elementwise gradients on cuda match the CPU's", "[cuda][ops][elementwise][autograd]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes()) {
    INFO(dtype_name(dt));
    const Tensor x0 = test::random_input({19, 33}, dt, 41), y0 = test::random_input({19, 33}, dt, 42, 0.5, 2);
    const Tensor g0 = test::random_input({19, 33}, dt, 43);
    auto run = [&](Device d) {
      Tensor x = x0.to(d).detach().set_requires_grad(), y = y0.to(d).detach().set_requires_grad();
      Tensor z = gelu(x) * sigmoid(y) + tanh(x) / y - relu(x) + leaky_relu(x, 0.1) * exp(y) +
                 clamp(x, -1, 1) + pow(y, 1.5) + square(x) - sqrt(y) + maximum(x, y) + log(y) * abs(x);
      z.backward(g0.to(d));
      return std::pair{x.grad(), y.grad()};
    };
    const auto [gx_cpu, gy_cpu] = run(Device::cpu());
    const auto [gx_dev, gy_dev] = run(kCuda);
    test::require_same(gx_dev, gx_cpu, 1.0);
    test::require_same(gy_dev, gy_cpu, 1.0);
  }
}
