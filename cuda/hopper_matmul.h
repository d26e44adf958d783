// bmm and linear on the Hopper kernel (cuda/hopper_gemm.h) when it applies: f16/bf16 on an
// sm_90 GPU, aligned operands, big enough shapes (cuda/hopper_plan.h decides, before any
// copy; a decline is said once per reason on stderr). The kernel has to earn its place: the
// first time a device would use it for a dtype, it runs small GEMMs with ragged borders and
// compares them with an f64 reference (cuda/hopper_self_check.h); if they disagree, or the
// check throws, the Hopper path is switched off for that device and dtype, with one line on
// stderr saying so, and the mma.sync kernel runs instead. The same happens when the kernel
// fails later, outside its check (the driver refuses a tensor map, a launch fails): that
// product runs on mma.sync, one line on stderr says why, and the path stays off for that
// device and dtype. Products whose mma.sync plan splits K (few output tiles, a deep K:
// cuda/gemm_plan.h) are left to mma.sync, whose split-K fills the GPU; the Hopper kernel
// has no split-K. kernel_settings' hopper_gemm_enabled() (HG_HOPPER_GEMM=off) switches it off for A/B runs.
#pragma once
#include "framework/tensor.h"

namespace hg::cuda {
class HopperVerdicts;
}

namespace hg::cuda {

// out[b] = a[b] · bm[b] (the bmm_stub contract) on the Hopper kernel; false (nothing done)
// where it does not apply or has not passed its check. The kernel reads b as it is when it
// is K-contiguous (a transposed view) or N-contiguous (row-major), with 16-byte aligned rows;
// any other b is transposed into a temporary first when the product is big enough to pay.
bool hopper_bmm(const Tensor& a, const Tensor& b, const Tensor& out);
// out = x · w^T + bias (the linear_stub contract) with the bias fused; false likewise.
bool hopper_linear(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out);

// The verdicts the two above go by (tests restore them after injecting a failure).
HopperVerdicts& hopper_matmul_verdicts();

}  // namespace hg::cuda
