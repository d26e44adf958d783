// The CUDA runtime as halfgrad sees it: device discovery, error checking with the
// runtime's own message, and the hook that makes Device::automatic() pick a GPU.
#pragma once
#include <string>

namespace hg::cuda {

// Number of usable devices (0 when the driver or GPU is missing).
int device_count();
// Why no device is usable ("" when one is): the CUDA runtime's message.
std::string unavailable_reason();
// Throws hg::Error "<what>: <CUDA error string> (<file>:<line>)" when err is not success.
void check(int err, const char* what, const char* file, int line);

}  // namespace hg::cuda

#define HG_CUDA_CHECK(call) ::hg::cuda::check(static_cast<int>(call), #call, __FILE__, __LINE__)
