// The CUDA runtime as halfgrad sees it: device discovery, error checking with the
// runtime's own message, and the hook that makes Device::automatic() pick a GPU. Under
// -Dcuda-emulation=true the devices (cuda:0 and cuda:1) are the CPU emulation of cuda/emu/.
#pragma once
#include <string>

namespace hg::cuda {

// Number of usable devices (0 when the driver or GPU is missing).
int device_count();
// Why no device is usable ("" when one is): the CUDA runtime's message.
std::string unavailable_reason();
// True in a build whose cuda device is the CPU emulation (no GPU is ever used).
bool is_emulated();
// The device's name as the runtime reports it, "(emulated on the CPU)" appended under
// the emulation. Throws hg::Error for a device that does not exist.
std::string device_name(int device = 0);
// Makes `device` the calling thread's current CUDA device for the guard's lifetime, then
// restores the one that was current (no runtime call when they are the same). Every call
// that acts on "the current device" (launches, the legacy default stream, stream and event
// creation, cudaMalloc) runs under one, so work lands on the device its tensors live on.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();  // never throws: a failure to switch back is reported on stderr
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;  // -1: nothing to restore
};

// Throws hg::Error "<what>: <CUDA error string> (<file>:<line>)" when err is not success.
void check(int err, const char* what, const char* file, int line);

}  // namespace hg::cuda

#define HG_CUDA_CHECK(call) ::hg::cuda::check(static_cast<int>(call), #call, __FILE__, __LINE__)
