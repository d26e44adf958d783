// Under the CUDA emulation, makes emulated cuda:0 an sm_90 model for a test's scope, so the
// Hopper kernel (wgmma, TMA, mbarrier) runs on it; restores what it was afterwards. On a real
// GPU it does nothing: the device is what it is.
#pragma once
#include "cuda/cuda_api.h"

namespace hg::test {

#if defined(HG_CUDA_EMULATION)
class EmulatedSm90 {
 public:
  EmulatedSm90() {
    cudaDeviceProp p{};
    cudaGetDeviceProperties(&p, 0);
    major_ = p.major, minor_ = p.minor;
    cuda::emu::set_compute_capability(0, 9, 0);
  }
  ~EmulatedSm90() { cuda::emu::set_compute_capability(0, major_, minor_); }
  EmulatedSm90(const EmulatedSm90&) = delete;
  EmulatedSm90& operator=(const EmulatedSm90&) = delete;

 private:
  int major_ = 0, minor_ = 0;
};
#else
struct EmulatedSm90 {
  EmulatedSm90() {}  // user-provided: a scope guard, not an unused variable
};
#endif

}  // namespace hg::test
