// The kernel interface of reductions, implemented by every backend.
#pragma once
#include <cstdint>

#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

enum class ReduceOp : uint8_t { sum, mean, max, min };
const char* op_label(ReduceOp op);  // the profiler's name for a reduce_stub call ("sum")

// out has x's rank with the reduced dimensions of size 1; NaN propagates through max/min.
extern DispatchStub<void(ReduceOp, const Tensor& x, const Tensor& out)> reduce_stub;
// out (i64) holds the index along `axis` of the first maximum; out has size 1 there.
extern DispatchStub<void(const Tensor& x, int64_t axis, const Tensor& out)> argmax_stub;

}  // namespace hg
