// What one wgmma.mma_async (m64nNk16, f32 += f16/bf16 x f16/bf16, both operands in shared
// memory) reads and computes, derived from the PTX ISA alone, so the emulation can run the
// Hopper GEMM and tests can check the kernel's descriptors against the ISA, not against itself.
//
// The rules implemented (PTX ISA 8.x, section "Asynchronous Warpgroup Level Matrix Shared
// Memory Layout"; T = 8 16-bit elements = 16 bytes; i runs along M for A / N for B, k along K):
//
// Descriptor ("Matrix Descriptor Format"): bits 0-13 start address, 16-29 LBO, 32-45 SBO,
// each a byte value >> 4 ("matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4"); bits 49-51 base
// offset; bits 62-63 swizzle: 0 none, 1 128B, 2 64B, 3 32B. The other bits are not fields;
// decode refuses them set (a value that spilled out of its field is a kernel bug). A nonzero
// base offset (a swizzle pattern that does not start at its 1024/512/256-byte boundary) is
// refused: the model anchors every pattern at those absolute boundaries.
//
// Canonical layouts ("Canonical Layouts", CuTe notation, element units; S = swizzle span in
// bytes, W = S / 16, the swizzle is applied to the final shared-window address):
//   K-major, none:     ((8,m),(T,2k)) : ((1T,SBO),(1,LBO))
//       an 8x8 core matrix is 8 rows of 16 contiguous bytes; SBO steps 8 rows (along M/N),
//       LBO steps the second core matrix along K.
//   K-major, swizzled: ((8,m),(T,2k)) : ((W*T,SBO),(1,T))
//       rows are S bytes apart, the 16 K elements of a row contiguous (32 bytes <= S); SBO
//       steps 8 rows. LBO is "not used, assumed to be 1" ("Leading Dimension Byte Offset",
//       K-Major, swizzled layouts): K never leaves the swizzle row, so LBO is ignored.
//   MN-major, none:    ((T,1,m),(8,k)) : ((1,T,SBO),(1T,LBO))
//       a core matrix is 8 K-rows of 8 contiguous M/N elements (16 bytes each, rows 16 bytes
//       apart); SBO steps 8 elements along M/N, LBO steps 8 rows along K.
//   MN-major, swizzled: ((T,W,m),(8,k)) : ((1,T,LBO),(W*T,SBO))
//       each K-row holds S/2 contiguous M/N elements, rows S bytes apart; LBO steps the next
//       S/2 elements along M/N, SBO the next 8 K-rows. Note the roles are swapped against
//       the no-swizzle MN-major layout (the ISA's LBO/SBO tables say the same in their
//       "normalized to 128-bit" wording: MN-major swizzled LBO = "offset from the first
//       (swizzle-byte-size/16) rows to the next", SBO = "offset from the first 8 columns to
//       the next 8 columns").
// Accumulators ("Matrix Fragments for wgmma .m64nNk16", D): thread t of the warpgroup, warp
// w = t/32, lane l, register r = 4j + q holds D[16w + l/4 + 8(q/2)][8j + 2(l%4) + q%2].
#pragma once
#include <cstdint>

#include "cuda/emu/shared_window.h"

namespace hg::cuda::emu {

struct WgmmaDescriptorFields {
  uint32_t start, lbo, sbo;  // bytes
  uint32_t base_offset;      // the 3-bit field as stored
  uint32_t swizzle_span;     // bytes: 0 (none), 32, 64 or 128
};

// The fields of a descriptor; hg::Error for bits set outside the ISA's fields.
WgmmaDescriptorFields decode_wgmma_descriptor(uint64_t desc);

// Shared-window byte address of element (i, k) of the 16-bit operand slice one wgmma reads:
// i in 0..63 (A, along M) or 0..N-1 (B, along N), k in 0..15; mn_major is the operand's
// transpose bit (imm-trans-a/b = 1). hg::Error for a nonzero base offset or i, k out of range.
uint32_t wgmma_element_address(const WgmmaDescriptorFields& d, bool mn_major, int i, int k);

enum class WgmmaInput : uint8_t { f16, bf16 };

// One wgmma.mma_async.sync.aligned.m64nNk16.f32.<type>.<type> with A and B from shared
// memory: D = A·B + (scale_d ? D : 0). acc[t] points at thread t's N/2 accumulators (layout
// above). Each product is exact, the 16 products and the old value are summed in double and
// rounded once to f32 (as the emulation's mma.sync). N a multiple of 8 in 8..256. Every
// element read goes through smem.at(), so an operand outside the window fails naming it;
// nothing is written unless all reads succeeded.
void wgmma_compute(const SharedWindow& smem, WgmmaInput type, int N, uint64_t a_desc, bool a_mn_major,
                   uint64_t b_desc, bool b_mn_major, bool scale_d, float* const acc[128]);

}  // namespace hg::cuda::emu
