// hopper_gemm for builds without the native sm_90a kernel (the CUDA emulation): it never
// applies, so callers always take their mma.sync path.
#include "cuda/hopper_gemm.h"

namespace hg::cuda {

const char* hopper_gemm_device_refusal(int) { return "this build has no sm_90a kernels (CUDA emulation)"; }
const char* hopper_gemm_refusal(const HopperGemm&) { return hopper_gemm_device_refusal(0); }
bool hopper_gemm(const HopperGemm&) { return false; }

}  // namespace hg::cuda
