// Batched matmul and the fused linear on the cuda device. f16/bf16 run on tensor cores
// (cuda/mma_gemm.h); f32 as kernel_settings' f32_matmul() says: strict on the SIMT GEMM,
// accurate as 3xTF32, fast as one tf32 mma; f64 on the SIMT GEMM (cuda/matmul_simt.cu).
// On an sm_90 GPU, f16/bf16 products go to the Hopper kernel first (cuda/hopper_matmul.h).
// Provider::vendor runs them on cuBLAS instead (cuda/vendor/vendor_ops.h).
// claims: tensor cores
#include "cuda/hopper_matmul.h"
#include "cuda/kernel_log.h"
#include "cuda/kernel_settings.h"
#include "cuda/matmul_simt.h"
#include "cuda/mma_dispatch.h"
#include "cuda/mma_gemm.h"
#include "cuda/mma_sources.h"
#include "cuda/operand_alignment.h"
#include "cuda/vendor/vendor_ops.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/matmul_kernels.h"

namespace hg::cuda {
namespace {

// out(z) = a(z) · b(z) through the epilogue, for a [B, M, K] and b [B, K, N] given by
// pointer and strides (batch, first axis, second axis).
template <class T, MmaMode Mode, class Out>
void tc_gemm(int device, const char* name, int64_t B, int64_t M, int64_t N, int64_t K, const T* a,
             const int64_t (&sa)[3], const T* b, const int64_t (&sb)[3], const Out& out) {
  const auto slow = [&](const T* p, int64_t bs, int64_t sr, int64_t rows, int64_t sk) {
    const char* why = operand_slow_path(reinterpret_cast<uintptr_t>(p), sizeof(T), B == 1 ? 0 : bs, sr, rows, sk, K);
    if (why) note_slow_path(name, why);
  };
  slow(a, sa[0], sa[1], M, sa[2]);
  slow(b, sb[0], sb[2], N, sb[1]);
  const StridedOperand<T> oa{a, B == 1 ? 0 : sa[0], sa[1], M, sa[2]}, ob{b, B == 1 ? 0 : sb[0], sb[2], N, sb[1]};
  with_sources<T>(oa, ob, K, [&](const auto& src_a, const auto& src_b) {
    mma_gemm_auto<T, Mode>(device, name, B, M, N, K, src_a, src_b, out);
  });
}

void bmm_cuda(const Tensor& a, const Tensor& b, const Tensor& out) {
  HG_CHECK(out.is_contiguous(), "bmm on ", out.device().str(), ": the output must be contiguous, got strides ",
           shape_str(out.strides()));
  if (gemm_provider() == Provider::vendor) return vendor::bmm(a, b, out);
  if (hopper_bmm(a, b, out)) return;  // sm_90 GPUs, f16/bf16
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  visit_floating(a.dtype(), "matmul", [&]<typename T>() {
    const bool on_tensor_cores = with_mma_mode<T>([&](auto mode) {
      const int64_t sa[3] = {a.strides()[0], a.strides()[1], a.strides()[2]};
      const int64_t sb[3] = {b.strides()[0], b.strides()[1], b.strides()[2]};
      tc_gemm<T, decltype(mode)::value>(out.device().index, "bmm_tc", B, M, N, K, a.data<T>(), sa, b.data<T>(), sb,
                                        Epilogue<T>{out.data<T>(), M * N, N});
    });
    if (!on_tensor_cores) bmm_simt(a, b, out);
  });
}

void linear_cuda(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  HG_CHECK(out.is_contiguous(), "linear on ", out.device().str(), ": the output must be contiguous, got strides ",
           shape_str(out.strides()));
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  if (gemm_provider() == Provider::vendor) {
    // cuBLAS's product, then the bias as a second rounding: a reference for the product only.
    vendor::bmm(x.unsqueeze(0), w.transpose(0, 1).unsqueeze(0), out.view({1, M, N}));
    if (bias.defined()) copy_(out, out + bias);
    return;
  }
  if (hopper_linear(x, w, bias, out)) return;  // sm_90 GPUs, f16/bf16
  visit_floating(x.dtype(), "linear", [&]<typename T>() {
    const bool on_tensor_cores = with_mma_mode<T>([&](auto mode) {
      // w^T is [K, N]: element (k, n) at w[n, k].
      const int64_t sx[3] = {0, x.strides()[0], x.strides()[1]}, sw[3] = {0, w.strides()[1], w.strides()[0]};
      const T* pb = bias.defined() ? bias.data<T>() : nullptr;
      tc_gemm<T, decltype(mode)::value>(out.device().index, "linear_tc", 1, M, N, K, x.data<T>(), sx, w.data<T>(),
                                        sw, Epilogue<T>{out.data<T>(), 0, N, pb});
    });
    if (!on_tensor_cores) linear_simt(x, w, bias, out);
  });
}

}  // namespace

HG_REGISTER_KERNEL(bmm_stub, cuda, bmm_cuda);
HG_REGISTER_KERNEL(linear_stub, cuda, linear_cuda);

}  // namespace hg::cuda
