// The shared-memory window as the async instructions of the emulation see it (TMA, wgmma,
// mbarrier take 32-bit shared-window addresses, not pointers): a block's dynamic shared
// memory occupies window addresses [base, base + bytes); at() maps an address range back to
// the host bytes and refuses one that leaves the window, as the hardware faults on it.
#pragma once
#include <cstdint>
#include <string>

#include "framework/error.h"

namespace hg::cuda::emu {

struct SharedWindow {
  unsigned char* host = nullptr;  // the byte at window address `base`
  uint32_t base = 0, bytes = 0;

  unsigned char* at(uint32_t addr, uint32_t n, const char* what) const {
    if (addr < base || addr - base > bytes || n > bytes - (addr - base))
      throw Error(detail::concat(what, ": shared-memory access [", addr, ", ", uint64_t{addr} + n,
                                 ") is outside the block's shared memory [", base, ", ", uint64_t{base} + bytes, ")"));
    return host + (addr - base);
  }
};

}  // namespace hg::cuda::emu
