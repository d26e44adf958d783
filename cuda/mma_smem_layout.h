// Where the tensor-core GEMM engine (cuda/mma_gemm.h) keeps an operand tile in shared
// memory, and which rows each lane hands to ldmatrix. Lines run along the operand's
// contiguous axis and are padded (16 bytes; 32 for f32 lines along M/N) so that each
// ldmatrix phase and each f32 fragment read hits 32 distinct banks: a padding, not a
// swizzle. Host and device functions, so host tests check that claim.
#pragma once
#include "cuda/primitives/common.h"
#include "cuda/primitives/mma_layout.h"

namespace hg::cuda {

// A Rows x BK tile (Rows along M for A, along N for B) of ElemBytes-byte elements, kept
// as lines along K (KContiguous: one line per row) or along M / N (one line per k).
template <int ElemBytes, bool KContiguous, int Rows, int BK>
struct MmaSmemOperand {
  static constexpr bool kK = KContiguous;
  static constexpr int V = 16 / ElemBytes;  // elements per 16-byte chunk
  static constexpr int kLines = kK ? Rows : BK, kLineLen = kK ? BK : Rows;
  static constexpr int kPitch = kLineLen + (!kK && ElemBytes == 4 ? 8 : V);
  static constexpr int kElems = kLines * kPitch;
  static constexpr int kChunks = kLines * kLineLen / V;
  static_assert(kLineLen % V == 0 && kPitch * ElemBytes % 16 == 0, "lines must be whole 16-byte chunks");
  // Offset, in elements, of element (r, k): r along M or N within the tile, k along K.
  HG_HOST_DEVICE static constexpr int at(int r, int k) { return kK ? r * kPitch + k : k * kPitch + r; }
};

// The element (row = offset along M, col = offset along K) of a 16 x 16 A fragment whose
// address `lane` gives ldmatrix_x4: matrices are rows 0-7 / 8-15 (bit 0 of lane / 8) by
// k 0-7 / 8-15 (bit 1); each lane names one 16-byte row of its matrix: a row of M when
// lines run along K (plain ldmatrix), a row of K when they run along M (.trans).
HG_HOST_DEVICE RowCol ldmatrix_a_element(int lane, bool k_contiguous) {
  const int mat = lane / 8, r8 = lane % 8;
  return k_contiguous ? RowCol{(mat & 1) * 8 + r8, (mat >> 1) * 8} : RowCol{(mat & 1) * 8, (mat >> 1) * 8 + r8};
}

// The same for the B fragments of two adjacent n8 blocks (row = offset along N): matrices
// are k 0-7 / 8-15 (bit 0) by n 0-7 / 8-15 (bit 1), so registers {0, 1} feed the first
// block's mma and {2, 3} the second's.
HG_HOST_DEVICE RowCol ldmatrix_b_element(int lane, bool k_contiguous) {
  const int mat = lane / 8, r8 = lane % 8;
  return k_contiguous ? RowCol{(mat >> 1) * 8 + r8, (mat & 1) * 8} : RowCol{(mat >> 1) * 8, (mat & 1) * 8 + r8};
}

}  // namespace hg::cuda
