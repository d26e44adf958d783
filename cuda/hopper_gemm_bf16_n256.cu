// The Hopper GEMM kernel for bf16 inputs and 128 x 256 tiles: its eight variants (f32 or bf16
// output; A K- or M-major; B K- or N-major). One of four units, so they compile in parallel.
// claims: wgmma
#include "cuda/hopper_gemm_kernel.h"

namespace hg::cuda::hopper {

HG_HOPPER_KERNEL_UNIT(bfloat16, 256)

}  // namespace hg::cuda::hopper
