// The vendor references in the CPU emulation build: cuBLAS and cuDNN need a GPU, so every
// call raises hg::Error saying so (natively, cublas_ops.cpp and cudnn_ops.cpp implement them).
#include "cuda/vendor/vendor_ops.h"

#include "framework/error.h"

namespace hg::cuda::vendor {
namespace {
const char* kWhy = "the cuBLAS/cuDNN references need a native CUDA build; this is the CPU emulation";
}
std::string cublas_unavailable_reason() { return kWhy; }
std::string cudnn_unavailable_reason() { return kWhy; }
void bmm(const Tensor&, const Tensor&, const Tensor&) { throw Error(std::string("vendor bmm: ") + kWhy); }
void conv2d_forward(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&) {
  throw Error(std::string("vendor conv2d: ") + kWhy);
}
void conv2d_dgrad(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&) {
  throw Error(std::string("vendor conv2d: ") + kWhy);
}
void conv2d_wgrad(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&) {
  throw Error(std::string("vendor conv2d: ") + kWhy);
}
}  // namespace hg::cuda::vendor
