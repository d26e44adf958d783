// The Hopper path of the cuda bmm and linear kernels, behind a self-check on first use
// (cuda/hopper_matmul.h says why).
#include "cuda/hopper_matmul.h"

#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>

#include "cuda/hopper_gemm.h"
#include "cuda/kernel_settings.h"
#include "framework/generator.h"
#include "ops/copy.h"
#include "ops/matmul_kernels.h"
#include "ops/random.h"

namespace hg::cuda {
namespace {

HopperGemm describe(const Tensor& a, int64_t B, int64_t M, int64_t N, int64_t K, const Tensor& bt, const Tensor& out) {
  // bt holds B^T: element (n, k) of batch z at bt[z * s0 + n * s1 + k].
  HopperGemm g;
  g.batches = B, g.M = M, g.N = N, g.K = K, g.ab_dtype = a.dtype();
  g.a = a.data_ptr(), g.lda = a.strides()[1], g.batch_stride_a = a.size(0) == 1 ? 0 : a.strides()[0];
  g.b = bt.data_ptr(), g.ldb = bt.strides()[1], g.batch_stride_b = bt.size(0) == 1 ? 0 : bt.strides()[0];
  g.c = out.data_ptr(), g.c_dtype = out.dtype(), g.ldc = N, g.batch_stride_c = M * N;
  g.device = out.device().index;
  return g;
}

// Runs c = a · bt^T (+ bias) on the kernel if it applies; a [B, M, K] and bt [B, N, K] must
// be K-contiguous.
bool run(const Tensor& a, const Tensor& bt, const Tensor& bias, const Tensor& out) {
  HopperGemm g = describe(a, out.size(0), a.size(1), bt.size(1), a.size(2), bt, out);
  if (bias.defined()) g.bias = bias.data_ptr(), g.bias_dtype = bias.dtype();
  return hopper_gemm(g);
}

// 0 not checked yet, 1 passed, -1 failed; per device and per A/B dtype (f16, bf16).
std::array<std::array<std::atomic<int>, 2>, 16> g_state{};

// A 2 x 200 x 136 x 200 product (ragged M, N and K tiles, a K tail) on the kernel against
// the CPU's bmm of the same inputs; true when every element agrees within 1% of the row's
// scale (f32 sums of f16/bf16 products, one rounding of the output).
bool self_check(Device d, DType dt) {
  Generator gen(20261129);
  const Tensor a = randn({2, 200, 200}, {dt, Device::cpu()}, &gen), b = randn({2, 136, 200}, {dt, Device::cpu()}, &gen);
  const Tensor want = empty({2, 200, 136}, {f32, Device::cpu()});
  bmm_stub(Device::cpu(), a.to(f32), b.to(f32).transpose(1, 2), want);
  Tensor got = full({2, 200, 136}, std::nan(""), {f32, d});
  if (!run(a.to(d), b.to(d), Tensor(), got)) return false;
  const Tensor host = got.to(Device::cpu()).contiguous();
  const float* pg = host.data<float>();
  const float* pw = want.data<float>();
  for (int64_t i = 0; i < want.numel(); ++i)
    if (!(std::abs(pg[i] - pw[i]) <= 0.01f * std::sqrt(200.0f))) return false;
  return true;
}

bool trusted(Device d, DType dt) {
  if (!hopper_gemm_enabled() || d.index < 0 || d.index >= static_cast<int>(g_state.size())) return false;
  if (hopper_gemm_device_refusal(d.index) != nullptr) return false;
  std::atomic<int>& s = g_state[d.index][dt == DType::bf16 ? 1 : 0];
  if (s.load() == 0) {
    const bool ok = self_check(d, dt);
    s.store(ok ? 1 : -1);
    if (!ok)
      std::fprintf(stderr,
                   "halfgrad: the Hopper GEMM kernel failed its self-check on %s in %s; using the mma.sync kernel "
                   "instead\n",
                   d.str().c_str(), dtype_name(dt));
  }
  return s.load() == 1;
}

bool applies(const Tensor& a, int64_t M) {
  return (a.dtype() == DType::f16 || a.dtype() == DType::bf16) && M >= 64 && trusted(a.device(), a.dtype());
}

}  // namespace

bool hopper_bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!applies(a, a.size(1))) return false;
  // The kernel reads A and B^T K-contiguous; other layouts are copied once, worth it only
  // when the product is big next to the copy.
  const bool a_ok = a.strides()[2] == 1, b_ok = b.strides()[1] == 1;
  if ((!a_ok || !b_ok) && a.size(1) * b.size(2) < 256 * 256) return false;
  const Tensor a_k = a_ok ? a : a.contiguous();
  const Tensor bt = b_ok ? b.transpose(1, 2) : b.transpose(1, 2).contiguous();
  return run(a_k, bt, Tensor(), out);
}

bool hopper_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  if (!applies(x, x.size(0)) || x.strides()[1] != 1 || w.strides()[1] != 1) return false;
  return run(x.unsqueeze(0), w.unsqueeze(0), bias, out.view({1, out.size(0), out.size(1)}));
}

}  // namespace hg::cuda
