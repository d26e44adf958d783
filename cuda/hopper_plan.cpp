// The Hopper kernel's decline logic (cuda/hopper_plan.h): the same rules as
// hopper_gemm_refusal, applied to the operands as they are and as a copy would make them.
#include "cuda/hopper_plan.h"

namespace hg::cuda {

bool hopper_operand_readable(const GemmOperandLayout& op) {
  const int64_t batch_stride = op.batches == 1 ? 0 : op.batch_stride;
  return (op.k_stride == 1 || op.K == 1) && op.row_stride >= op.K && op.row_stride % 8 == 0 && batch_stride >= 0 &&
         batch_stride % 8 == 0 && op.address % 16 == 0;
}

bool hopper_operand_readable_mn_major(const GemmOperandLayout& op) {
  const int64_t batch_stride = op.batches == 1 ? 0 : op.batch_stride;
  return (op.row_stride == 1 || op.rows == 1) && op.k_stride >= op.rows && op.k_stride % 8 == 0 && batch_stride >= 0 &&
         batch_stride % 8 == 0 && op.address % 16 == 0;
}

HopperPlan plan_hopper_gemm(DType dt, const GemmOperandLayout& a, const GemmOperandLayout& bt, bool allow_copies) {
  if (dt != DType::f16 && dt != DType::bf16) return {"A and B must be f16 or bf16"};
  if (bt.rows < 64) return {"N < 64 (matrix-vector and narrow products run on mma.sync)"};
  if (a.rows < 64) return {"M < 64 (short products run on mma.sync)"};
  if (a.K < 64) return {"K < 64 (shallow products run on mma.sync)"};
  constexpr int64_t kMax = int64_t{1} << 31;
  if (a.rows >= kMax || bt.rows >= kMax || a.K >= kMax || a.batches >= kMax || bt.batches >= kMax)
    return {"a size is 2^31 or more"};
  HopperPlan plan;
  plan.copy_a = !hopper_operand_readable(a);
  plan.copy_b = !hopper_operand_readable(bt);
  if (plan.copy_a && hopper_operand_readable_mn_major(a)) {
    plan.copy_a = false;
    plan.a_m_major = true;
  }
  if (plan.copy_b && hopper_operand_readable_mn_major(bt)) {
    plan.copy_b = false;
    plan.b_n_major = true;
  }
  if (!plan.copy_a && !plan.copy_b) return plan;
  // A copy is K-contiguous with rows K apart from a 512-byte aligned block: TMA still needs
  // those rows to be whole multiples of 16 bytes.
  if (a.K % 8 != 0) return {"K is not a multiple of 8 and an operand is not K-contiguous with 16-byte aligned rows"};
  if (!allow_copies)
    return {plan.copy_b ? "the weight is neither K- nor N-contiguous with 16-byte aligned rows"
                        : "the input is neither K- nor M-contiguous with 16-byte aligned rows"};
  if (a.rows * bt.rows < kHopperMinCopiedOutput)
    return {"an operand is neither K- nor M/N-contiguous with 16-byte aligned rows (an expanded, strided or "
            "unaligned view) and the product is too small to pay for a copy"};
  return plan;
}

}  // namespace hg::cuda
