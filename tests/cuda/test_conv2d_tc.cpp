// conv2d's three kernels on the tensor cores of cuda:0 against an f64 convolution of the
// same rounded inputs: channel counts that are multiples of 8 (16-byte copies and zero
// chunks in the padding), ones that are not (chunks straddling two filter taps, unaligned
// group offsets: element by element), stride, dilation, groups, 1x1; f16, bf16 and f32 in
// each precision mode (3xTF32 must be far more accurate than tf32). Errors are relative to
// the largest reference entry.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "cuda/kernel_settings.h"
#include "ops/conv2d_kernels.h"
#include "tests/cuda/conv_cases.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

namespace {

const test::ConvCase kTcCases[] = {
    {{2, 10, 9, 16}, {24, 3, 3, 16}, {{1, 1}, {1, 1}, {1, 1}, 1}, "3x3 same, C 16 (copies, several k steps)"},
    {{1, 13, 11, 8}, {16, 3, 3, 8}, {{2, 2}, {2, 2}, {2, 2}, 1}, "stride 2, dilation 2, C 8"},
    {{1, 8, 8, 16}, {16, 3, 3, 8}, {{1, 1}, {1, 1}, {1, 1}, 2}, "2 groups of 8"},
    {{2, 7, 7, 32}, {40, 1, 1, 32}, {{1, 1}, {0, 0}, {1, 1}, 1}, "1x1, C 32"},
    {{1, 9, 9, 12}, {8, 3, 3, 12}, {{1, 1}, {1, 1}, {1, 1}, 1}, "C 12: chunks straddle taps"},
    {{1, 8, 7, 20}, {6, 3, 3, 10}, {{1, 1}, {1, 1}, {1, 1}, 2}, "2 groups of 10: unaligned"},
};

// conv2d's forward stub without a bias, called as the gradient stubs are.
void forward_no_bias(Device d, const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p) {
  conv2d_forward_stub(d, x, w, Tensor(), y, p);
}
void dgrad_no_bias(Device d, const Tensor& gy, const Tensor& w, const Tensor& gx, const Conv2dOptions& p) {
  conv2d_dgrad_stub(d, gy, w, Tensor(), gx, p);
}

// max |got - f64 result| / max |f64 result| of `stub` on a and b (already rounded to their
// dtype), got computed on cuda:0 into a poisoned output; a NaN left behind fails.
template <class F>
double stub_error(const F& stub, const Tensor& a, const Tensor& b, const Shape& out, const Conv2dOptions& p) {
  Tensor want = empty(out, {f64, Device::cpu()});
  stub(Device::cpu(), a.to(f64), b.to(f64), want, p);
  Tensor got = test::poisoned(out, a.dtype(), kCuda);
  stub(kCuda, a.to(kCuda), b.to(kCuda), got, p);
  const Tensor g = got.to(Device::cpu()).to(f64).contiguous();
  const double* pg = g.data<double>();
  const double* pw = want.data<double>();
  double scale = 0, err = 0;
  for (int64_t i = 0; i < want.numel(); ++i) scale = std::max(scale, std::abs(pw[i]));
  for (int64_t i = 0; i < want.numel(); ++i) {
    REQUIRE(std::isfinite(pg[i]));
    err = std::max(err, std::abs(pg[i] - pw[i]));
  }
  REQUIRE(scale > 0);
  return err / scale;
}

struct Errors {
  double forward, dgrad, wgrad;
  double worst() const { return std::max({forward, dgrad, wgrad}); }
};

Errors case_errors(const test::ConvCase& c, DType dt, uint64_t seed) {
  const Shape ys = test::output_shape(c);
  const Tensor x = test::random_cpu(c.x, dt, seed), w = test::random_cpu(c.w, dt, seed + 1);
  const Tensor gy = test::random_cpu(ys, dt, seed + 2);
  return {stub_error(forward_no_bias, x, w, ys, c.p), stub_error(dgrad_no_bias, gy, w, c.x, c.p),
          stub_error(conv2d_wgrad_stub, gy, x, c.w, c.p)};
}

}  // namespace

TEST_CASE("cuda conv2d on tensor cores: f16 and bf16 match an f64 convolution", "[cuda][ops][conv2d][tensor_cores]") {
  HG_REQUIRE_CUDA();
  uint64_t seed = 500;
  for (const test::ConvCase& c : kTcCases)
    for (DType dt : {f16, bf16}) {
      INFO(c.what << " " << dtype_name(dt));
      const Errors e = case_errors(c, dt, seed += 3);
      INFO("forward " << e.forward << ", dgrad " << e.dgrad << ", wgrad " << e.wgrad);
      // One rounding of the output (2^-11 resp. 2^-8 relative) dominates; f32 accumulation
      // adds far less.
      CHECK(e.worst() <= (dt == f16 ? 1e-3 : 8e-3));
    }
}

TEST_CASE("cuda conv2d in f32: 3xTF32 is f32-accurate, tf32 is not, strict is SIMT f32",
          "[cuda][ops][conv2d][tensor_cores]") {
  HG_REQUIRE_CUDA();
  uint64_t seed = 900;
  for (const test::ConvCase& c : kTcCases) {
    INFO(c.what);
    seed += 3;
    Errors fast, accurate, strict;
    {
      cuda::ScopedF32Matmul mode(cuda::F32Matmul::fast);
      fast = case_errors(c, f32, seed);
    }
    {
      cuda::ScopedF32Matmul mode(cuda::F32Matmul::accurate);
      accurate = case_errors(c, f32, seed);
    }
    {
      cuda::ScopedF32Matmul mode(cuda::F32Matmul::strict);
      strict = case_errors(c, f32, seed);
    }
    INFO("fast " << fast.worst() << ", accurate " << accurate.worst() << ", strict " << strict.worst());
    CHECK(fast.worst() <= 3e-3);      // inputs rounded to 10 fraction bits
    CHECK(fast.worst() >= 1e-5);      // ... which shows: this really ran in tf32
    CHECK(accurate.worst() <= 2e-6);  // f32-level
    CHECK(strict.worst() <= 2e-6);
    CHECK(accurate.worst() * 20 <= fast.worst());
  }
}

TEST_CASE("cuda conv_transpose2d and conv2d gradients on tensor cores equal the CPU's through autograd",
          "[cuda][ops][conv2d][tensor_cores]") {
  HG_REQUIRE_CUDA();
  for (DType dt : {f16, bf16}) {
    INFO(dtype_name(dt));
    const Tensor x = test::random_cpu({2, 6, 5, 16}, dt, 71), w = test::random_cpu({16, 3, 3, 8}, dt, 72);
    ConvTranspose2dOptions o;
    o.stride = {2, 2};
    o.padding = {1, 1};
    // conv_transpose2d's forward is dgrad; its backward runs forward and wgrad.
    const auto run = [&](Device d) {
      Tensor xd = x.to(d).detach().set_requires_grad(), wd = w.to(d).detach().set_requires_grad();
      Tensor y = conv_transpose2d(xd, wd, Tensor(), o);
      sum(y * y).backward();
      return std::tuple{y, xd.grad(), wd.grad()};
    };
    const auto [y_cpu, gx_cpu, gw_cpu] = run(Device::cpu());
    const auto [y_gpu, gx_gpu, gw_gpu] = run(kCuda);
    test::require_close(y_gpu, y_cpu);
    test::require_close(gx_gpu, gx_cpu, 2.0);
    test::require_close(gw_gpu, gw_cpu, 2.0);
  }
}
