// The kernel interface of reductions, implemented by every backend.
#pragma once
#include <cstdint>
#include <limits>

#include "framework/dispatch.h"
#include "framework/tensor.h"

namespace hg {

enum class ReduceOp : uint8_t { sum, mean, max, min };
const char* op_label(ReduceOp op);  // the profiler's name for a reduce_stub call ("sum")

// out has x's rank with the reduced dimensions of size 1; NaN propagates through max/min.
extern DispatchStub<void(ReduceOp, const Tensor& x, const Tensor& out)> reduce_stub;
// out (i64) holds the index along `axis` of the first maximum; out has size 1 there.
extern DispatchStub<void(const Tensor& x, int64_t axis, const Tensor& out)> argmax_stub;

// The accumulation step of every backend's reductions, in the accumulator type A (constexpr,
// so CUDA kernels call it too). max/min propagate NaN: once acc or v is NaN, the result is
// the first NaN seen.
template <class A>
struct ReduceCombine {
  ReduceOp op;
  constexpr A identity() const {
    using L = std::numeric_limits<A>;
    if (op == ReduceOp::max) return L::has_infinity ? -L::infinity() : L::lowest();
    if (op == ReduceOp::min) return L::has_infinity ? L::infinity() : L::max();
    return A(0);
  }
  constexpr A operator()(A acc, A v) const {
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::mean: return acc + v;
      case ReduceOp::max: return (v != v || acc != acc) ? (acc != acc ? acc : v) : (v > acc ? v : acc);
      case ReduceOp::min: return (v != v || acc != acc) ? (acc != acc ? acc : v) : (v < acc ? v : acc);
    }
    return acc;
  }
};

// One step of argmax's scan along a line: v is element i, (best_v, best) the first maximum so
// far. NaN is the maximum, as in NumPy: the first NaN wins, and once best_v is NaN the step
// returns false to end the scan.
template <class V>
constexpr bool argmax_step(V& best_v, int64_t& best, V v, int64_t i) {
  if (best_v != best_v) return false;
  if (v > best_v || v != v) {
    best_v = v;
    best = i;
  }
  return true;
}

}  // namespace hg
