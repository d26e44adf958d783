// The CPU convolution kernels on the GEMM engine: forward, input gradient (per stride
// phase) and weight gradient (fixed chunks) against f64 loops written here with the
// f32-accumulation bound, the bias rounded once with the sum, and results that do not
// depend on the thread count.
#include <thread>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "tests/thread_count.h"
#include "halfgrad.h"
#include "ops/conv2d_kernels.h"
#include "ops/cpu/conv2d_amx.h"
#include "tests/ops/cpu/gemm/model_kernels.h"

using namespace hg;

namespace {

struct Case {
  Shape x, w;
  Conv2dOptions p;
};

Shape out_shape(const Case& c) {
  const int64_t P = (c.x[1] + 2 * c.p.padding[0] - c.p.dilation[0] * (c.w[1] - 1) - 1) / c.p.stride[0] + 1;
  const int64_t Q = (c.x[2] + 2 * c.p.padding[1] - c.p.dilation[1] * (c.w[2] - 1) - 1) / c.p.stride[1] + 1;
  return {c.x[0], P, Q, c.w[0]};
}

// Calls f(y index, x index, w index) for every product of the convolution.
template <class F>
void taps(const Case& c, F f) {
  const Shape y = out_shape(c);
  const int64_t H = c.x[1], W = c.x[2], C = c.x[3], K = c.w[0], R = c.w[1], S = c.w[2], Cg = c.w[3];
  const int64_t Kg = K / c.p.groups;
  for (int64_t n = 0; n < y[0]; ++n)
    for (int64_t p = 0; p < y[1]; ++p)
      for (int64_t q = 0; q < y[2]; ++q)
        for (int64_t k = 0; k < K; ++k)
          for (int64_t r = 0; r < R; ++r)
            for (int64_t s = 0; s < S; ++s) {
              const int64_t h = p * c.p.stride[0] - c.p.padding[0] + r * c.p.dilation[0];
              const int64_t w = q * c.p.stride[1] - c.p.padding[1] + s * c.p.dilation[1];
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              for (int64_t ci = 0; ci < Cg; ++ci)
                f(((n * y[1] + p) * y[2] + q) * K + k, ((n * H + h) * W + w) * C + (k / Kg) * Cg + ci,
                  ((k * R + r) * S + s) * Cg + ci);
            }
}

enum class Pass { forward, dgrad, wgrad };

// Checks `got` (one of the three results) against the f64 sums of the operands' values:
// |got - ref| <= u_out |ref| + (terms + 2) 2^-24 sum |products| + f16's subnormal step.
// (split: sums per product, 4 for the AMX kernel's f16 = hi + lo split.)
void check_pass(Pass pass, const Case& c, const Tensor& a, const Tensor& b, const Tensor& got, int split = 1) {
  const std::vector<double> av = a.to_vector<double>(), bv = b.to_vector<double>();
  std::vector<double> ref(static_cast<size_t>(got.numel()), 0.0), mag(ref.size(), 0.0);
  std::vector<int64_t> terms(ref.size(), 0);
  taps(c, [&](int64_t yi, int64_t xi, int64_t wi) {
    // forward: a = x, b = w; dgrad: a = gy, b = w; wgrad: a = gy, b = x.
    const int64_t o = pass == Pass::forward ? yi : pass == Pass::dgrad ? xi : wi;
    const double v = pass == Pass::forward ? av[xi] * bv[wi] : pass == Pass::dgrad ? av[yi] * bv[wi] : av[yi] * bv[xi];
    ref[o] += v, mag[o] += std::abs(v), ++terms[o];
  });
  const double u = got.dtype() == f16 ? 0x1p-11 : got.dtype() == bf16 ? 0x1p-8 : got.dtype() == f32 ? 0x1p-24 : 0x1p-53;
  const double u_acc = got.dtype() == f64 ? 0x1p-53 : 0x1p-24, tiny = got.dtype() == f16 ? 0x1p-25 : 0.0;
  const std::vector<double> gv = got.to_vector<double>();
  int64_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double bound = u * std::abs(ref[i]) + (split * terms[i] + 2) * u_acc * mag[i] + tiny;
    if (!(std::abs(gv[i] - ref[i]) <= bound) && bad++ < 5) {
      INFO("element " << i << " got " << gv[i] << " want " << ref[i] << " bound " << bound);
      CHECK(false);
    }
  }
  CHECK(bad == 0);
}

void check_case(const Case& c, DType dt, uint64_t seed, int split = 1) {
  Generator g(seed);
  const Tensor x = randn(c.x, {dt}, &g), w = randn(c.w, {dt}, &g), gy = randn(out_shape(c), {dt}, &g);
  const Device cpu = Device::cpu();
  Tensor y = full(out_shape(c), NAN, {dt}), gx = full(c.x, NAN, {dt}), gw = full(c.w, NAN, {dt});
  conv2d_forward_stub(cpu, x, w, Tensor(), y, c.p);
  conv2d_dgrad_stub(cpu, gy, w, Tensor(), gx, c.p);
  conv2d_wgrad_stub(cpu, gy, x, gw, c.p);
  {
    INFO("forward");
    check_pass(Pass::forward, c, x, w, y, split);
  }
  {
    INFO("input gradient");
    check_pass(Pass::dgrad, c, gy, w, gx, split);
  }
  {
    INFO("weight gradient");
    check_pass(Pass::wgrad, c, gy, x, gw, split);
  }
}

std::vector<uint8_t> bytes(const Tensor& t) {
  const Tensor c = t.contiguous();
  const auto* p = static_cast<const uint8_t*>(c.data_ptr());
  return {p, p + c.numel() * static_cast<int64_t>(dtype_size(c.dtype()))};
}

}  // namespace

TEST_CASE("conv kernels: strided, dilated, padded and grouped passes equal f64 loops", "[conv2d][gemm]") {
  const Case cases[] = {
      {{2, 9, 11, 4}, {6, 3, 3, 2}, {{2, 3}, {1, 2}, {2, 1}, 2}},  // input gradient in 6 stride phases
      {{1, 7, 8, 3}, {4, 1, 1, 3}, {{3, 2}, {0, 0}, {1, 1}, 1}},   // phases no tap reaches get zeros
      {{2, 6, 5, 5}, {3, 4, 2, 5}, {{2, 2}, {3, 0}, {3, 2}, 1}},   // padding past the dilated kernel
      {{1, 5, 5, 20}, {17, 3, 3, 20}, {{1, 1}, {1, 1}, {1, 1}, 1}},
  };
  uint64_t seed = 40;
  for (const Case& c : cases)
    for (DType dt : {f64, f32, f16, bf16}) {
      INFO("x " << shape_str(c.x) << " w " << shape_str(c.w) << " " << dtype_name(dt));
      check_case(c, dt, ++seed);
    }
}

TEST_CASE("conv kernels: the U-Net's first layer (1 channel), its 1x1 head and its 2x2 stride-2 upsampling",
          "[conv2d][gemm]") {
  const Case cases[] = {
      {{2, 16, 16, 1}, {8, 3, 3, 1}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {{2, 16, 16, 8}, {2, 1, 1, 8}, {{1, 1}, {0, 0}, {1, 1}, 1}},
      {{2, 16, 16, 8}, {16, 2, 2, 8}, {{2, 2}, {0, 0}, {1, 1}, 1}},  // conv_transpose2d's kernels, swapped
      {{4, 48, 48, 3}, {16, 3, 3, 3}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // a weight gradient in several chunks
  };
  uint64_t seed = 60;
  for (const Case& c : cases)
    for (DType dt : {f32, f16, bf16}) {
      INFO("x " << shape_str(c.x) << " w " << shape_str(c.w) << " " << dtype_name(dt));
      check_case(c, dt, ++seed);
    }
}

TEST_CASE("conv kernels of f16/bf16 tensors on the AMX kernels (tile model) equal f64 loops", "[conv2d][gemm][amx]") {
  const Case cases[] = {
      {{2, 9, 11, 4}, {6, 3, 3, 2}, {{2, 3}, {1, 2}, {2, 1}, 2}},
      {{2, 16, 16, 1}, {8, 3, 3, 1}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {{1, 12, 12, 40}, {33, 3, 3, 40}, {{1, 1}, {1, 1}, {1, 1}, 1}},  // K past one 32-wide step
      // Weight gradients on the unit (from 64 filters a group in bf16, 128 in f16), in chunks
      {{3, 20, 20, 2}, {130, 3, 3, 2}, {{1, 1}, {1, 1}, {1, 1}, 1}},
      {{2, 9, 11, 4}, {128, 3, 3, 2}, {{2, 1}, {1, 1}, {1, 2}, 2}},  // strided, dilated, 2 groups of 64
  };
  uint64_t seed = 80;
  cpu::amx_conv::TilesOff engine_only;  // not the direct tile convolution (AMX or vdpbf16ps)
  for (DType dt : {f16, bf16}) {
    const bool split = dt == f16;
    cpu::gemm::OverrideKernel use(split ? cpu::gemm::Operands::f16 : cpu::gemm::Operands::bf16,
                                  split ? test_gemm::kModelF16 : test_gemm::kModelBf16);
    const int64_t calls = test_gemm::model_calls();
    for (const Case& c : cases) {
      INFO("x " << shape_str(c.x) << " w " << shape_str(c.w) << " " << dtype_name(dt));
      check_case(c, dt, ++seed, split ? 4 : 1);
    }
    CHECK(test_gemm::model_calls() > calls);
  }
}

TEST_CASE("conv2d adds its bias in the f32 sum and rounds once", "[conv2d][numerics]") {
  // 1024 + 0.25 is no f16 (rounds to 1024); summed in f32 with the bias -1024 it is 0.25.
  const Tensor x = from_vector({1024, 0.25}, {1, 1, 1, 2}, {f16}), w = from_vector({1, 1}, {1, 1, 1, 2}, {f16});
  const Tensor b = from_vector({-1024}, {1}, {f16});
  CHECK(conv2d(x, w, b).item<double>() == 0.25);
  const Tensor xb = from_vector({256, 0.5}, {1, 1, 1, 2}, {bf16}), wb = from_vector({1, 1}, {1, 1, 1, 2}, {bf16});
  CHECK(conv2d(xb, wb, from_vector({-256}, {1}, {bf16})).item<double>() == 0.5);
  // Two groups: each group's filters take their own bias.
  const Tensor xg = from_vector({1024, 0.25, 1024, 0.25}, {1, 1, 1, 4}, {f16});
  const Tensor wg = from_vector({1, 1, 1, 1}, {2, 1, 1, 2}, {f16});
  const Tensor y = conv2d(xg, wg, from_vector({-1024, -1023}, {2}, {f16}), {{1, 1}, {0, 0}, {1, 1}, 2});
  CHECK(y.to_vector<double>() == std::vector<double>{0.25, 1.25});
}

TEST_CASE("conv kernels give bitwise the same results on 1 and 2 threads", "[conv2d][determinism]") {
  // 6400 output pixels: the weight gradient sums 4 chunks. 128 filters: on an AMX host the
  // f16/bf16 weight gradient runs on the tile unit.
  for (const Case& c : {Case{{4, 40, 40, 8}, {16, 3, 3, 8}, {{1, 1}, {1, 1}, {1, 1}, 1}},
                        Case{{2, 30, 30, 8}, {128, 3, 3, 8}, {{1, 1}, {1, 1}, {1, 1}, 1}}})
  for (DType dt : {f32, f16, bf16}) {
    INFO(dtype_name(dt) << " " << c.w[0] << " filters");
    Generator g(7);
    const Tensor x = randn(c.x, {dt}, &g), w = randn(c.w, {dt}, &g), gy = randn(out_shape(c), {dt}, &g);
    std::vector<uint8_t> runs[2][3];
    for (int t : {1, 2}) {
      test::Threads threads(t);
      Tensor y = empty(out_shape(c), {dt}), gx = empty(c.x, {dt}), gw = empty(c.w, {dt});
      conv2d_forward_stub(Device::cpu(), x, w, Tensor(), y, c.p);
      conv2d_dgrad_stub(Device::cpu(), gy, w, Tensor(), gx, c.p);
      conv2d_wgrad_stub(Device::cpu(), gy, x, gw, c.p);
      runs[t - 1][0] = bytes(y), runs[t - 1][1] = bytes(gx), runs[t - 1][2] = bytes(gw);
    }
    CHECK(runs[0][0] == runs[1][0]);
    CHECK(runs[0][1] == runs[1][1]);
    CHECK(runs[0][2] == runs[1][2]);
  }
}
