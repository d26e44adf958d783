// The Hopper path of the cuda bmm and linear kernels: the decline decision first
// (cuda/hopper_plan.h, before any copy), then the self-check on first use
// (cuda/hopper_self_check.h), then the copies the plan asks for and the launch.
#include "cuda/hopper_matmul.h"

#include <cstdio>

#include "cuda/cuda_api.h"
#include "cuda/gemm_plan.h"
#include "cuda/hopper_gemm.h"
#include "cuda/hopper_plan.h"
#include "cuda/hopper_self_check.h"
#include "cuda/hopper_transpose.h"
#include "cuda/kernel_log.h"
#include "cuda/kernel_settings.h"

namespace hg::cuda {
namespace {

HopperVerdicts g_verdicts;

bool trusted(Device d, DType dt) {
  return g_verdicts.trusted(d.index, dt, [&] {
    const SelfCheckResult r = hopper_self_check(d, dt);
    if (!r.passed)
      std::fprintf(stderr,
                   "halfgrad: the Hopper GEMM kernel failed its self-check on %s in %s (%s); using the mma.sync "
                   "kernel instead\n",
                   d.str().c_str(), dtype_name(dt), r.why.c_str());
    return r;
  });
}

// Whether the Hopper kernel could run at all here: the setting, the dtype, the device.
bool device_ready(const Tensor& t) {
  const DType dt = t.dtype();
  return hopper_gemm_enabled() && (dt == DType::f16 || dt == DType::bf16) &&
         hopper_gemm_device_refusal(t.device().index) == nullptr;
}

// A [B, rows, K] operand whose element (z, r, k) is at strides (sz, sr, sk).
GemmOperandLayout layout(const Tensor& t, int64_t sz, int64_t sr, int64_t sk, int64_t rows, int64_t K) {
  return {t.size(0), rows, K, sz, sr, sk, reinterpret_cast<uintptr_t>(t.data_ptr())};
}

// c = A · B^T (+ bias) on the kernel. a_op is A [B, M, K] K-contiguous or, with a_m_major,
// A^T [B, K, M] M-contiguous; b_op is B^T [B, N, K] K-contiguous or, with b_n_major, B
// [B, K, N] N-contiguous. Either way the leading stride is the operand's strides()[1].
bool run(const Tensor& a_op, bool a_m_major, const Tensor& b_op, bool b_n_major, const Tensor& bias,
         const Tensor& out) {
  HopperGemm g;
  g.batches = out.size(0), g.M = out.size(1), g.N = out.size(2), g.K = a_m_major ? a_op.size(1) : a_op.size(2);
  g.ab_dtype = a_op.dtype();
  g.a = a_op.data_ptr(), g.lda = a_op.strides()[1], g.batch_stride_a = a_op.size(0) == 1 ? 0 : a_op.strides()[0];
  g.a_m_major = a_m_major;
  g.b = b_op.data_ptr(), g.ldb = b_op.strides()[1], g.batch_stride_b = b_op.size(0) == 1 ? 0 : b_op.strides()[0];
  g.b_n_major = b_n_major;
  g.c = out.data_ptr(), g.c_dtype = out.dtype(), g.ldc = g.N, g.batch_stride_c = g.M * g.N;
  g.device = out.device().index;
  if (bias.defined()) g.bias = bias.data_ptr(), g.bias_dtype = bias.dtype();
  try {
    return hopper_gemm(g);
  } catch (const std::exception& e) {
    // Outside the self-check: the product goes to mma.sync and the path is switched off for
    // this device and dtype (the line is printed once: later products do not get here).
    if (g_verdicts.set(g.device, g.ab_dtype, false, e.what()))
      std::fprintf(stderr, "halfgrad: the Hopper GEMM kernel failed on cuda:%d in %s (%s); using the mma.sync kernel "
                           "instead from now on\n", g.device, dtype_name(g.ab_dtype), e.what());
    return false;
  }
}

// Whether the mma.sync engine would split K for this product (few output tiles, deep K).
bool mma_would_split(int device, int64_t batches, int64_t M, int64_t N, int64_t K) {
  int sms = 0;
  if (cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return gemm_tile_plan_with_settings(batches, M, N, K, sms > 0 ? sms : 1, 32).split > 1;
}

}  // namespace

HopperVerdicts& hopper_matmul_verdicts() { return g_verdicts; }

bool hopper_bmm(const Tensor& a, const Tensor& b, const Tensor& out) {
  if (!device_ready(a)) return false;
  const int64_t M = a.size(1), K = a.size(2), N = b.size(2);
  // B^T (n, k) of batch z is b[z, k, n].
  const HopperPlan plan =
      plan_hopper_gemm(a.dtype(), layout(a, a.strides()[0], a.strides()[1], a.strides()[2], M, K),
                       layout(b, b.strides()[0], b.strides()[2], b.strides()[1], N, K), true);
  if (plan.decline) {
    note_slow_path("bmm (Hopper kernel declined)", plan.decline);
    return false;
  }
  if (mma_would_split(out.device().index, a.size(0), M, N, K)) return false;
  if (!trusted(a.device(), a.dtype())) return false;
  // A as it is (K-contiguous), as its M-contiguous transpose, or a K-contiguous copy.
  const Tensor a_op = plan.a_m_major ? a.transpose(1, 2) : plan.copy_a ? a.contiguous() : a;
  if (plan.copy_a) note_slow_path("bmm (Hopper kernel)", "A is neither K- nor M-contiguous with aligned rows: copied first");
  // B as it is (N-contiguous: a row-major b), as its K-contiguous transpose, or a transposed copy.
  if (plan.b_n_major) return run(a_op, plan.a_m_major, b, true, Tensor(), out);
  const Tensor bt = plan.copy_b ? transpose_k_major(b) : b.transpose(1, 2);
  if (plan.copy_b)
    note_slow_path("bmm (Hopper kernel)", "B is neither K- nor N-contiguous with aligned rows: transposed into a "
                                          "temporary first");
  return run(a_op, plan.a_m_major, bt, false, Tensor(), out);
}

bool hopper_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  if (!device_ready(x)) return false;
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  const Tensor x3 = x.unsqueeze(0), w3 = w.unsqueeze(0);
  const HopperPlan plan =
      plan_hopper_gemm(x.dtype(), layout(x3, 0, x.strides()[0], x.strides()[1], M, K),
                       layout(w3, 0, w.strides()[0], w.strides()[1], N, K), false);
  if (plan.decline) {
    note_slow_path("linear (Hopper kernel declined)", plan.decline);
    return false;
  }
  if (mma_would_split(out.device().index, 1, M, N, K)) return false;
  if (!trusted(x.device(), x.dtype())) return false;
  const Tensor a_op = plan.a_m_major ? x3.transpose(1, 2) : x3;  // x [M, K] M-contiguous: read as x^T
  const Tensor b_op = plan.b_n_major ? w3.transpose(1, 2) : w3;  // w [N, K] N-contiguous: read as w^T
  return run(a_op, plan.a_m_major, b_op, plan.b_n_major, bias, out.view({1, M, N}));
}

}  // namespace hg::cuda
