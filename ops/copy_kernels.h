// The kernel interface of copy and fill, implemented by every backend.
#pragma once
#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// dst and src are on the same device, src already broadcast (strides 0) to dst's shape.
extern DispatchStub<void(const Tensor& dst, const Tensor& src)> copy_stub;
extern DispatchStub<void(const Tensor& dst, double value)> fill_stub;
// Copies between the CPU and the device the stub is called for (either direction).
extern DispatchStub<void(const Tensor& dst, const Tensor& src)> transfer_stub;

}  // namespace hg
