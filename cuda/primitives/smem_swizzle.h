// The shared-memory swizzle modes that TMA writes and wgmma reads (CUDA programming guide,
// "Tensor Memory Access: swizzling"; PTX ISA, wgmma "Shared Memory Matrix Layout"): a
// function of the shared-window byte address, so writer and reader agree whatever the tile's
// base. Plain bit arithmetic: the emulation and host tests use the same definition.
#pragma once
#include <cstdint>

#include "cuda/primitives/common.h"

namespace hg::cuda {

// span_bytes is the swizzle mode's span: 0 (none), 32, 64 or 128. The 16-byte chunk bits of
// the address (bits 4 and up, log2(span / 16) of them) are XORed with as many bits from bit 7
// up (the 128-byte line index): 128B XORs bits 4-6 with bits 7-9, 64B bits 4-5 with 7-8, 32B
// bit 4 with bit 7. The pattern repeats every span * 8 bytes (1024 for 128B, 512, 256), the
// alignment a swizzled tile's base must have.
HG_HOST_DEVICE uint32_t swizzle_smem_address(uint32_t addr, uint32_t span_bytes) {
  if (span_bytes == 0) return addr;
  const uint32_t chunk_mask = span_bytes / 16 - 1;  // 7, 3 or 1
  return addr ^ (((addr >> 7) & chunk_mask) << 4);
}

}  // namespace hg::cuda
