// Where each element of a lane's mma fragment sits in its matrix, from the PTX ISA's
// "Matrix Fragments" tables (groupID = lane / 4, threadID_in_group = lane % 4). Kernels
// use these to load fragments without ldmatrix and to store accumulators; the emulator
// uses them to assemble the matrices of an mma.
#pragma once
#include "cuda/primitives/common.h"

namespace hg::cuda {

struct RowCol {
  int row, col;
};

// m16n8k16 f16/bf16, A (16x16, row-major): element i of 8 (register i / 2, half i % 2).
HG_HOST_DEVICE RowCol mma_m16n8k16_a(int lane, int i) {
  return {lane / 4 + (i & 2 ? 8 : 0), lane % 4 * 2 + (i & 1) + (i >= 4 ? 8 : 0)};
}
// m16n8k16 f16/bf16, B (16x8, column-major): element i of 4 (register i / 2, half i % 2).
HG_HOST_DEVICE RowCol mma_m16n8k16_b(int lane, int i) { return {lane % 4 * 2 + (i & 1) + (i >= 2 ? 8 : 0), lane / 4}; }
// m16n8k8 tf32, A (16x8): element (= register) i of 4.
HG_HOST_DEVICE RowCol mma_m16n8k8_tf32_a(int lane, int i) { return {lane / 4 + (i & 1 ? 8 : 0), lane % 4 + (i >= 2 ? 4 : 0)}; }
// m16n8k8 tf32, B (8x8): element (= register) i of 2.
HG_HOST_DEVICE RowCol mma_m16n8k8_tf32_b(int lane, int i) { return {lane % 4 + (i ? 4 : 0), lane / 4}; }
// The f32 accumulators C and D (16x8) of both shapes: element i of 4.
HG_HOST_DEVICE RowCol mma_m16n8_c(int lane, int i) { return {lane / 4 + (i >= 2 ? 8 : 0), lane % 4 * 2 + (i & 1)}; }

}  // namespace hg::cuda
