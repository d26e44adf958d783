// The CUDA runtime as halfgrad sees it: device discovery, error checking with the
// runtime's own message, and the hook that makes Device::automatic() pick a GPU. Under
// -Dcuda-emulation=true the one device, cuda:0, is the CPU emulation of cuda/emu/.
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
// Throws hg::Error "<what>: <CUDA error string> (<file>:<line>)" when err is not success.
void check(int err, const char* what, const char* file, int line);

}  // namespace hg::cuda

#define HG_CUDA_CHECK(call) ::hg::cuda::check(static_cast<int>(call), #call, __FILE__, __LINE__)
