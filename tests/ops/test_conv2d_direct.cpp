// The direct convolution (ops/cpu/conv2d_direct.h), which the CPU forward and stride-1
// input gradient take for up to 8 or exactly 16 output channels (on AVX-512 also 32): its
// sums must be the engine's, bit for bit. A pass with 72 output channels runs on
// the engine; its first channels, with the same filters, must equal the direct pass exactly,
// for every row length (tiles overlapping at a row's end), padding, dilation, row stride,
// bias, dtype and thread count; and non-finite inputs propagate as the engine's do.
// One or two output channels take the planar tiles (8 pixels per vector, 1-12 vectors). Many
// taps (48 channels, 3x3) run in several runs of taps per row, each carrying on the sums.
// A 1x1 kernel with up to 4 (f16/bf16 forward) or 8 filters (weight gradient) takes the
// pointwise kernels (conv2d_pointwise.h), the same chains.
// The direct weight gradient (up to 8, 16, and on AVX-512 32-64 filters) likewise equals the
// outer-product driver's. On an AMX host f16/bf16 convolutions run on the tile unit (its own
// summation order: conv2d_amx.h, tested in test_conv2d_amx.cpp), so there the forward and
// input-gradient cases run on the AVX-512 path, whose direct tiles and engine are the f32
// chains compared here.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <optional>

#include "framework/cpu/isa.h"
#include "tests/thread_count.h"
#include "halfgrad.h"
#include "ops/conv2d_kernels.h"
#include "ops/cpu/conv2d_amx.h"

using namespace hg;
using hg::cpu::ForceIsa;
using hg::cpu::Isa;

namespace {

struct Case {
  int64_t N, H, W, C, R;     // x [N, H, W, C], an R x R kernel
  Conv2dOptions p;
};

const Case kCases[] = {
    {2, 9, 64, 8, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},   // the U-Net's full-resolution layer: 5 x 12 + 4
    {1, 7, 13, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},   // 12 + 1 (a 4-pixel tile overlapping the 12)
    {1, 5, 4, 1, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},    // one channel, a row of 4
    {2, 6, 23, 16, 3, {{1, 1}, {2, 2}, {2, 2}, 1}},  // dilated, padded beyond the kernel's reach
    {1, 11, 21, 8, 3, {{2, 1}, {0, 0}, {1, 1}, 1}},  // rows strided, no padding: 12 + 8 + 1
    {1, 6, 17, 16, 1, {{1, 1}, {0, 0}, {1, 1}, 1}},  // 1x1
    {1, 3, 200, 2, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},  // pixels in lanes: two 96-pixel tiles + one vector
    {2, 4, 9, 5, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},    // one vector + an overlapping one
    {2, 5, 19, 40, 1, {{1, 1}, {0, 0}, {1, 1}, 1}},  // 1x1, 5 channel vectors (pointwise: blocks + a tail block)
    {1, 3, 11, 7, 1, {{1, 1}, {0, 0}, {1, 1}, 1}},   // 1x1, odd channels (not the pointwise kernels)
    {1, 4, 30, 48, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},  // 432 taps: runs of taps whose weights fit L1
};

Tensor run_forward(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& p) {
  const int64_t P = (x.size(1) + 2 * p.padding[0] - p.dilation[0] * (w.size(1) - 1) - 1) / p.stride[0] + 1;
  const int64_t Q = (x.size(2) + 2 * p.padding[1] - p.dilation[1] * (w.size(2) - 1) - 1) / p.stride[1] + 1;
  Tensor y = empty({x.size(0), P, Q, w.size(0)}, {x.dtype()});
  conv2d_forward_stub(Device::cpu(), x, w, b, y, p);
  return y;
}

// While alive, convolutions run the f32 FMA chains: no direct tile convolution (AMX or
// vdpbf16ps), and on an AMX host the AVX-512 path.
struct ChainEngine {
  hg::cpu::amx_conv::TilesOff tiles_off;
  std::optional<ForceIsa> force;
  ChainEngine() {
    if (hg::cpu::isa() == Isa::amx) force.emplace(Isa::avx512);
  }
};

bool same_bits(const Tensor& a, const Tensor& b) {
  const std::vector<float> u = a.to(f32).to_vector<float>(), v = b.to(f32).to_vector<float>();
  if (u.size() != v.size()) return false;
  for (size_t i = 0; i < u.size(); ++i)
    if (!(u[i] == v[i] && std::signbit(u[i]) == std::signbit(v[i])) && !(std::isnan(u[i]) && std::isnan(v[i])))
      return false;
  return true;
}

}  // namespace

TEST_CASE("conv2d direct forward: 1, 2, 4, 8, 16 (and on AVX-512 32) filters equal the engine's first of 72, "
          "bit for bit",
          "[conv2d][direct]") {
  ChainEngine chain;
  for (const Case& c : kCases)
    for (DType dt : {f32, f16, bf16})
      for (bool bias : {false, true}) {
        INFO("x " << c.N << "x" << c.H << "x" << c.W << "x" << c.C << " kernel " << c.R << " stride " << c.p.stride[0]
                  << " pad " << c.p.padding[0] << " dil " << c.p.dilation[0] << " " << dtype_name(dt)
                  << (bias ? " bias" : ""));
        Generator g(41);
        const Tensor x = randn({c.N, c.H, c.W, c.C}, {dt}, &g), w72 = randn({72, c.R, c.R, c.C}, {dt}, &g);
        const Tensor b72 = bias ? randn({72}, {dt}, &g) : Tensor();
        const Tensor all = run_forward(x, w72, b72, c.p);
        for (int64_t F : {1, 2, 3, 4, 8, 16, 32}) {  // 1, 2: pixels in lanes; 3, 4: a head's classes
          INFO(F << " filters");
          const Tensor wf = w72.narrow(0, 0, F).contiguous(), bf = bias ? b72.narrow(0, 0, F).contiguous() : Tensor();
          const Tensor engine = all.narrow(3, 0, F).contiguous();
          Tensor one, two;
          {
            test::Threads t(1);
            one = run_forward(x, wf, bf, c.p);
          }
          {
            test::Threads t(2);
            two = run_forward(x, wf, bf, c.p);
          }
          CHECK(same_bits(one, engine));
          CHECK(same_bits(two, engine));
        }
      }
}

TEST_CASE("conv2d direct input gradient: 1, 2, 8, 16 (and on AVX-512 32) input channels equal the engine's "
          "first of 72, bit for bit",
          "[conv2d][direct]") {
  ChainEngine chain;
  for (const Case& c : kCases) {
    if (c.p.stride[0] != 1) continue;  // the direct input gradient is stride 1 only
    for (DType dt : {f32, f16, bf16}) {
      INFO("gx " << c.N << "x" << c.H << "x" << c.W << " kernel " << c.R << " pad " << c.p.padding[0] << " dil "
                 << c.p.dilation[0] << " " << dtype_name(dt));
      Generator g(43);
      const int64_t K = c.C;  // the forward's filters: the input gradient's input channels
      const Tensor w72 = randn({K, c.R, c.R, 72}, {dt}, &g);
      const Tensor y = run_forward(zeros({c.N, c.H, c.W, 72}, {dt}), w72, Tensor(), c.p);
      const Tensor gy = randn(y.shape(), {dt}, &g);
      Tensor gx72 = empty({c.N, c.H, c.W, 72}, {dt});
      conv2d_dgrad_stub(Device::cpu(), gy, w72, Tensor(), gx72, c.p);
      for (int64_t F : {1, 2, 8, 16, 32}) {  // 1: the image's one channel, 2: pixels in lanes too
        INFO(F << " input channels");
        Tensor gxf = empty({c.N, c.H, c.W, F}, {dt});
        conv2d_dgrad_stub(Device::cpu(), gy, w72.narrow(3, 0, F).contiguous(), Tensor(), gxf, c.p);
        CHECK(same_bits(gxf, gx72.narrow(3, 0, F).contiguous()));
      }
    }
  }
}

TEST_CASE("conv2d direct forward: inf and NaN inputs give what the engine gives", "[conv2d][direct]") {
  Generator g(47);
  Tensor x = randn({1, 5, 30, 8}, {f32}, &g);
  std::vector<float> xv = x.to_vector<float>();
  xv[3 * 8 + 2] = std::numeric_limits<float>::infinity();         // pixel (0, 3)
  xv[(2 * 30 + 17) * 8 + 5] = std::numeric_limits<float>::quiet_NaN();  // pixel (2, 17)
  x = from_vector(std::vector<double>(xv.begin(), xv.end()), {1, 5, 30, 8}, {f32});
  const Tensor w72 = randn({24, 3, 3, 8}, {f32}, &g);
  const Conv2dOptions p{{1, 1}, {1, 1}, {1, 1}, 1};
  const Tensor direct = run_forward(x, w72.narrow(0, 0, 8).contiguous(), Tensor(), p);
  CHECK(same_bits(direct, run_forward(x, w72, Tensor(), p).narrow(3, 0, 8).contiguous()));
  CHECK(std::isnan(direct.to_vector<float>()[(2 * 30 + 17) * 8]));  // a NaN tap poisons its neighbours' sums
}

TEST_CASE("conv2d direct weight gradient: 4, 8, 16 (and on AVX-512 32, 48, 64) filters equal the outer-product "
          "driver's first of 72, bit for bit",
          "[conv2d][direct][wgrad]") {
  // 72 filters always take the outer-product driver; at 1 thread (one chunk per thread) the
  // AVX-512 path takes the direct tiles for 32-64 filters, at 2 the outer driver again.
  for (const Case& c : kCases)
    for (DType dt : {f32, f16, bf16}) {
      INFO("x " << c.N << "x" << c.H << "x" << c.W << "x" << c.C << " kernel " << c.R << " stride " << c.p.stride[0]
                << " pad " << c.p.padding[0] << " dil " << c.p.dilation[0] << " " << dtype_name(dt));
      Generator g(53);
      const Tensor x = randn({c.N, c.H, c.W, c.C}, {dt}, &g);
      const Tensor y = run_forward(x, zeros({72, c.R, c.R, c.C}, {dt}), Tensor(), c.p);
      const Tensor gy72 = randn(y.shape(), {dt}, &g);
      Tensor gw72 = empty({72, c.R, c.R, c.C}, {dt});
      conv2d_wgrad_stub(Device::cpu(), gy72, x, gw72, c.p);
      for (int64_t F : {1, 3, 4, 8, 16, 32, 48, 64}) {  // 1-8 on 1x1: the pointwise kernel
        INFO(F << " filters");
        const Tensor gy = gy72.narrow(3, 0, F).contiguous();
        Tensor one = empty({F, c.R, c.R, c.C}, {dt}), two = one.clone();
        {
          test::Threads t(1);
          conv2d_wgrad_stub(Device::cpu(), gy, x, one, c.p);
        }
        {
          test::Threads t(2);
          conv2d_wgrad_stub(Device::cpu(), gy, x, two, c.p);
        }
        CHECK(same_bits(one, gw72.narrow(0, 0, F).contiguous()));
        CHECK(same_bits(two, one));
      }
    }
}
