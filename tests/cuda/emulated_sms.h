// Under the CUDA emulation, makes emulated cuda:0 report `sms` SMs for a test's scope, so
// the tile and split-K choices (cuda/gemm_plan.h, hopper_tile_n) are the ones a GPU of that
// size makes; restores the previous setting afterwards. On a real GPU it does nothing.
#pragma once
#include "cuda/cuda_api.h"

namespace hg::test {

#if defined(HG_CUDA_EMULATION)
class EmulatedSms {
 public:
  explicit EmulatedSms(int sms) : saved_(cuda::emu::multiprocessor_count_override(0)) {
    cuda::emu::set_multiprocessor_count(0, sms);
  }
  ~EmulatedSms() { cuda::emu::set_multiprocessor_count(0, saved_); }
  EmulatedSms(const EmulatedSms&) = delete;
  EmulatedSms& operator=(const EmulatedSms&) = delete;

 private:
  int saved_;
};
#else
struct EmulatedSms {
  explicit EmulatedSms(int) {}
};
#endif

}  // namespace hg::test
