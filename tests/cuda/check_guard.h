// Sets the CUDA emulation's memory checks (cuda/emu/racecheck.h) for one test and restores
// the previous ones (the environment's, e.g. CI's HG_EMU_RACECHECK=1) when it ends.
#pragma once
#include "cuda/emu/racecheck.h"

namespace hg::test {

class CheckGuard {
 public:
  explicit CheckGuard(const cuda::emu::CheckOptions& o) { cuda::emu::set_check_options(o); }
  ~CheckGuard() { cuda::emu::set_check_options(saved_); }
  CheckGuard(const CheckGuard&) = delete;
  CheckGuard& operator=(const CheckGuard&) = delete;

 private:
  cuda::emu::CheckOptions saved_ = cuda::emu::check_options();
};

}  // namespace hg::test
