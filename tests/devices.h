// The devices a test body runs on: the CPU always, cuda:0 when this build has a CUDA
// backend and a device (a GPU, or the CPU emulation). One body, every device:
//   for (hg::Device d : hg::test::devices()) { INFO(hg::test::device_label(d)); ... }
// Tests that need a GPU call HG_REQUIRE_CUDA() first: it skips, with the reason, where
// there is none.
#pragma once
#include <string>
#include <vector>

#include "framework/device.h"
#include "tests/skip.h"
#ifdef HG_WITH_CUDA
#include "cuda/runtime.h"
#endif

namespace hg::test {

inline bool cuda_available() {
#ifdef HG_WITH_CUDA
  return cuda::device_count() > 0;
#else
  return false;
#endif
}

// Why there is no cuda device to test on ("" when there is one).
inline std::string cuda_unavailable_reason() {
#ifdef HG_WITH_CUDA
  return cuda::device_count() > 0 ? std::string() : "no CUDA device: " + cuda::unavailable_reason();
#else
  return "this build has no CUDA backend (nvcc was not found and -Dcuda-emulation=false)";
#endif
}

inline std::vector<Device> devices() {
  std::vector<Device> d{Device::cpu()};
  if (cuda_available()) d.push_back(Device::cuda(0));
  return d;
}

// "cpu", "cuda:0 (NVIDIA H100 ...)" or "cuda:0 (halfgrad CUDA emulation ... (emulated on the CPU))".
inline std::string device_label(Device d) {
#ifdef HG_WITH_CUDA
  if (d.is_cuda()) return d.str() + " (" + cuda::device_name(d.index) + ")";
#endif
  return d.str();
}

}  // namespace hg::test

#define HG_REQUIRE_CUDA()                                                            \
  do {                                                                               \
    if (!::hg::test::cuda_available()) HG_SKIP(::hg::test::cuda_unavailable_reason()); \
  } while (0)
