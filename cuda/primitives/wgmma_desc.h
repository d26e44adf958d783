// The 64-bit shared-memory matrix descriptor that wgmma reads its A and B operands through
// (PTX ISA "Asynchronous Warpgroup Level Matrix Shared Memory Layout: Matrix Descriptor
// Format"), as plain bit arithmetic so host unit tests can check it without a GPU.
#pragma once
#include "cuda/primitives/common.h"

namespace hg::cuda {

// Bits 62-63 of the descriptor: the layout's swizzle mode.
enum class WgmmaSwizzle : uint64_t { none = 0, b128 = 1, b64 = 2, b32 = 3 };

// Fields, each in bytes as the ISA defines them; the descriptor keeps bits 4..17 of each
// (addresses and offsets are 16-byte granular, the shared window is 256 KiB):
//   bits  0-13 start address >> 4
//   bits 16-29 leading-dimension byte offset >> 4 (LBO)
//   bits 32-45 stride-dimension byte offset >> 4 (SBO)
//   bits 49-51 base offset (0 when the swizzle pattern's 1024-byte repeat is aligned)
//   bits 62-63 swizzle mode
HG_HOST_DEVICE uint64_t wgmma_descriptor(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                         WgmmaSwizzle swizzle, uint32_t base_offset = 0) {
  const auto field = [](uint32_t bytes) { return static_cast<uint64_t>((bytes & 0x3ffffu) >> 4); };
  return field(smem_addr) | field(lbo_bytes) << 16 | field(sbo_bytes) << 32 |
         static_cast<uint64_t>(base_offset & 7u) << 49 | static_cast<uint64_t>(swizzle) << 62;
}

// A K-major operand tile (rows of the M or N dimension, each row 64 16-bit elements = 128
// bytes, written by TMA with 128B swizzle): eight rows form a 1024-byte swizzle atom and the
// atoms follow each other, so SBO (the step between 8-row core-matrix groups along M/N) is
// 1024. LBO is not used by swizzled K-major layouts whose K extent (16 elements per wgmma)
// lies within one 128-byte swizzle row; it is set to 16 bytes (encoded 1), never 0. The
// k-th 16-element slice of the row starts 32 * k bytes further: the hardware applies the
// swizzle to the full address, so advancing the start address inside a 1024-byte aligned
// atom selects the slice (the tile base must be 1024-byte aligned).
HG_HOST_DEVICE uint64_t wgmma_kmajor_sw128_descriptor(uint32_t tile_smem_addr, int k_slice) {
  return wgmma_descriptor(tile_smem_addr + 32u * static_cast<uint32_t>(k_slice), 16, 1024, WgmmaSwizzle::b128);
}

// An MN-major operand tile (B stored N-contiguous: each K row holds 64 N-elements = 128 bytes,
// written by TMA with 128B swizzle, as boxes of 64 N-columns x 64 K-rows one after the other):
// for the swizzled MN-major layout the ISA's LBO is the step between 64-element blocks along
// N (here one box, mn_block_bytes) and SBO the step between groups of 8 K-rows (8 x 128 =
// 1024 bytes). The k-th 16-deep slice starts 16 rows = 2048 bytes further, a whole number of
// swizzle atoms, so the slice is itself an aligned tile.
HG_HOST_DEVICE uint64_t wgmma_mnmajor_sw128_descriptor(uint32_t tile_smem_addr, int k_slice, uint32_t mn_block_bytes) {
  return wgmma_descriptor(tile_smem_addr + 2048u * static_cast<uint32_t>(k_slice), mn_block_bytes, 1024,
                          WgmmaSwizzle::b128);
}

}  // namespace hg::cuda
