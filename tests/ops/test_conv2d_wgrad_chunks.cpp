// The CPU weight gradient sums its pixels in chunks of at least 512 (ops/cpu/conv2d_cpu.cpp);
// a second, independent check of that reduction (issue 29): through conv2d's backward, on
// shapes of 2 to 4 chunks with a short last one, by counting (all-ones operands give each
// weight the number of pixels its tap sees, exact in every dtype) and by an f64 loop.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <vector>

#include "tests/thread_count.h"
#include "halfgrad.h"
#include "tests/ops/cpu/gemm/model_kernels.h"

using namespace hg;

namespace {

struct Case {
  Shape x;     // [N, H, W, C]
  int64_t k;   // filters of a 3x3 kernel, padding 1, stride 1: P x Q = H x W pixels per image
};

// 3200 pixels (7 chunks, the last of 128), 2304 (5 chunks, the last of 256) and 7500 (15
// chunks, the last of 332).
const Case kCases[] = {{{2, 40, 40, 3}, 4}, {{1, 48, 48, 1}, 8}, {{3, 50, 50, 2}, 2}};

// w.grad of sum(conv2d(x, w) * gy), through the autograd op.
Tensor weight_grad(const Tensor& x, const Tensor& gy, int64_t k) {
  Tensor w = zeros({k, 3, 3, x.size(3)}, {x.dtype()}).set_requires_grad();
  conv2d(x, w, Tensor(), {.padding = {1, 1}}).backward(gy);
  return w.grad();
}

void check_counts(DType dt) {
  for (const Case& c : kCases) {
    const int64_t N = c.x[0], H = c.x[1], W = c.x[2], C = c.x[3];
    INFO("x " << shape_str(c.x) << " " << dtype_name(dt));
    const Tensor gw = weight_grad(ones(c.x, {dt}), ones({N, H, W, c.k}, {dt}), c.k);
    std::vector<double> want;
    for (int64_t f = 0; f < c.k; ++f)
      for (int64_t r = 0; r < 3; ++r)
        for (int64_t s = 0; s < 3; ++s)
          for (int64_t ci = 0; ci < C; ++ci)  // tap (r, s) reads inside the image at all but one row/column
            want.push_back(static_cast<double>(N * (H - std::abs(r - 1)) * (W - std::abs(s - 1))));
    // The f32 sum is exact; the result is rounded to the dtype once.
    const Tensor expect = from_vector(want, {c.k, 3, 3, C}, {f64}).to(dt).to(f64);
    CHECK(allclose(gw.to(f64), expect, 0, 0));
  }
}

}  // namespace

TEST_CASE("conv2d weight gradient over several pixel chunks counts every pixel", "[conv2d][wgrad]") {
  for (int threads : {1, 2}) {
    INFO(threads << " threads");
    test::Threads t(threads);
    for (DType dt : {f64, f32, f16, bf16}) check_counts(dt);
  }
  // f16/bf16 on the AMX kernels' tile model as well (the engine's other path).
  namespace gemm = cpu::gemm;
  {
    gemm::OverrideKernel amx(gemm::Operands::f16, test_gemm::kModelF16);
    check_counts(f16);
  }
  {
    gemm::OverrideKernel amx(gemm::Operands::bf16, test_gemm::kModelBf16);
    check_counts(bf16);
  }
}

TEST_CASE("conv2d weight gradient over several pixel chunks equals an f64 loop", "[conv2d][wgrad]") {
  for (const Case& c : kCases) {
    const int64_t N = c.x[0], H = c.x[1], W = c.x[2], C = c.x[3], K = c.k;
    Generator g(29);
    const Tensor x = randn(c.x, {f64}, &g), gy = randn({N, H, W, K}, {f64}, &g);
    const std::vector<double> xv = x.to_vector<double>(), gv = gy.to_vector<double>();
    std::vector<double> ref(static_cast<size_t>(K * 9 * C), 0.0), mag(ref.size(), 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t p = 0; p < H; ++p)
        for (int64_t q = 0; q < W; ++q)
          for (int64_t f = 0; f < K; ++f)
            for (int64_t r = 0; r < 3; ++r)
              for (int64_t s = 0; s < 3; ++s) {
                const int64_t h = p + r - 1, w = q + s - 1;
                if (h < 0 || h >= H || w < 0 || w >= W) continue;
                for (int64_t ci = 0; ci < C; ++ci) {
                  const double v = gv[static_cast<size_t>(((n * H + p) * W + q) * K + f)] *
                                   xv[static_cast<size_t>(((n * H + h) * W + w) * C + ci)];
                  const size_t o = static_cast<size_t>(((f * 3 + r) * 3 + s) * C + ci);
                  ref[o] += v;
                  mag[o] += std::abs(v);
                }
              }
    for (DType dt : {f64, f32}) {
      INFO("x " << shape_str(c.x) << " " << dtype_name(dt));
      // f32: the operands are rounded first, so the reference is only close; a lost chunk
      // moves a weight by a sizeable share of its magnitude sum, far past this bound.
      const double tol = dt == f64 ? 1e-12 : 1e-5;
      const std::vector<double> got = weight_grad(x.to(dt), gy.to(dt), K).to_vector<double>();
      int64_t bad = 0;
      for (size_t i = 0; i < ref.size(); ++i)
        if (!(std::abs(got[i] - ref[i]) <= tol * mag[i]) && bad++ < 3) {
          INFO("weight " << i << " got " << got[i] << " want " << ref[i]);
          CHECK(false);
        }
      CHECK(bad == 0);
    }
  }
}
