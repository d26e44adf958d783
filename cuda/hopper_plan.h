// Whether a bmm/linear goes to the Hopper kernel, decided from shapes, strides and addresses
// alone, before any copy is made or any HopperGemm described: a host function, so that the
// decline paths (matrix-vector products, expanded inputs, unaligned rows) are tested without a GPU.
#pragma once
#include <cstdint>

#include "framework/dtype.h"

namespace hg::cuda {

// One GEMM operand as rows x K per batch entry: element (z, r, k) sits at
// address + (z * batch_stride + r * row_stride + k * k_stride) * element size. A is M x K;
// B is given transposed, N x K. `batches` is the size of its batch axis: 1 when it is shared
// by every batch entry of the product (its batch stride then does not matter).
struct GemmOperandLayout {
  int64_t batches = 1, rows = 0, K = 0;
  int64_t batch_stride = 0, row_stride = 0, k_stride = 1;
  uintptr_t address = 0;
};

// The verdict: decline is the reason the kernel does not take the product (a sentence,
// static storage, so a caller can report each reason once), nullptr when it does; copy_a /
// copy_b say that the operand must first be made K-contiguous (then row stride K);
// a_m_major / b_n_major that it is read as it is, M- / N-contiguous (A the transpose of a
// row-major K x M matrix, B a row-major K x N one), by wgmma's transpose modes.
struct HopperPlan {
  const char* decline = nullptr;
  bool copy_a = false, copy_b = false, a_m_major = false, b_n_major = false;
};

// Products smaller than this many output elements are declined rather than pay for a copy.
inline constexpr int64_t kHopperMinCopiedOutput = int64_t{256} * 256;

// The plan for C = A · B^T in dtype dt. allow_copies: an operand that TMA cannot read as it
// is (not K-contiguous, overlapping rows as in an expanded view, unaligned) may be copied
// into a K-contiguous temporary when the product is big enough; otherwise it is declined.
HopperPlan plan_hopper_gemm(DType dt, const GemmOperandLayout& a, const GemmOperandLayout& bt, bool allow_copies);

// Whether TMA can read the operand as it is: K-contiguous, rows at least K apart, the start
// 16-byte aligned and the row and batch strides multiples of 16 bytes (8 elements).
bool hopper_operand_readable(const GemmOperandLayout& op);
// Whether TMA can read it MN-contiguous instead: rows (M or N) contiguous, K steps at least
// `rows` elements apart, the same alignment rules for the K and batch strides.
bool hopper_operand_readable_mn_major(const GemmOperandLayout& op);

}  // namespace hg::cuda
