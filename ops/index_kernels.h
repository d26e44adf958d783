// The kernel interface of the index ops (index_select, gather, embedding, sort, topk),
// implemented by every backend. Tensors arrive as [outer, n, inner] views with the
// indexed axis in the middle, so one kernel covers every axis.
#pragma once
#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

// y[o, m, i] = x[o, index[o, m, i], i]. x and y contiguous, of one dtype (any); index
// i64 of y's shape with any strides (stride 0 where an index is shared, as index_select's
// is across outer and inner). Throws hg::Error naming `op` for an index outside [0, n).
extern DispatchStub<void(const Tensor& x, const Tensor& index, const Tensor& y, const char* op)> gather_stub;
// acc[o, index[o, m, i], i] += g[o, m, i]: the backward of gather. acc is contiguous
// and of g's accumulation dtype (f32 for f16/bf16/f32, f64 for f64), so repeated
// indices sum before the one rounding to g's dtype the op does afterwards. Indices were
// checked by the forward.
extern DispatchStub<void(const Tensor& g, const Tensor& index, const Tensor& acc)> scatter_add_stub;
// index[o, :, i] = the stable order that sorts x[o, :, i] (ascending, NaN last; or
// descending, NaN first, as PyTorch orders them). x contiguous, index i64 contiguous.
extern DispatchStub<void(const Tensor& x, const Tensor& index, bool descending)> argsort_stub;

// The error every backend's gather raises for index j on an axis of size n.
[[noreturn]] void index_out_of_range(const char* op, int64_t j, int64_t n);

// Raises "<op> has no CUDA kernel yet" (or the device's name) when `stub` has no kernel
// for `device`, before an op allocates anything there.
template <class Stub>
void require_kernel(const Stub& stub, Device device, const char* op) {
  HG_CHECK(stub.has(device.kind), op, " has no ", device.is_cuda() ? "CUDA" : device.str(),
           " kernel yet (tensor on ", device.str(), "); move the tensors to the CPU with .to(Device::cpu())");
}

}  // namespace hg
