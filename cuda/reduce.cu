// Reductions on the cuda device: x is viewed with its kept dimensions first and its
// reduced ones last, so output r reduces the row r * len ... (r + 1) * len - 1 of that
// view; one block per row accumulates in f32 (f64 for f64, i64 for integers) and combines
// with warp shuffles. argmax scans each line along the axis in one thread, as the CPU does.
#include <limits>
#include <vector>

#include "cuda/block_reduce.h"
#include "cuda/elementwise_loops.h"
#include "ops/reduce_kernels.h"

namespace hg::cuda {
namespace {

template <class T>
__global__ void reduce_rows(TensorArg x, T* out, int64_t rows, int64_t len, ReduceOp op) {
  using A = accum_t<T>;
  const ReduceCombine<A> red{op};
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    A acc = red.identity();
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) acc = red(acc, A(dev_load(*element_ptr<const T>(x, r * len + j))));
    acc = block_reduce(acc, red, red.identity());
    if (threadIdx.x == 0) out[r] = dev_store<T>(op == ReduceOp::mean ? acc / static_cast<A>(len) : acc);
  }
}

// One thread per line; the line is x's `axis`, moved last by the view.
template <class T>
__global__ void argmax_lines(TensorArg x, TensorArg out, int64_t lines, int64_t len) {
  for (int64_t r = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; r < lines; r += int64_t{gridDim.x} * blockDim.x) {
    int64_t best = 0;
    auto bv = dev_load(*element_ptr<const T>(x, r * len));
    for (int64_t i = 1; i < len; ++i)
      if (!argmax_step(bv, best, dev_load(*element_ptr<const T>(x, r * len + i)), i)) break;
    *element_ptr<int64_t>(out, r) = best;
  }
}

// The permutation that puts kept dimensions first and reduced ones (or `axis`) last.
std::vector<int64_t> kept_then_reduced(const Tensor& x, const Tensor& out) {
  std::vector<int64_t> kept, reduced;
  for (int64_t d = 0; d < x.dim(); ++d)
    (out.shape()[static_cast<size_t>(d)] == 1 && x.shape()[static_cast<size_t>(d)] != 1 ? reduced : kept).push_back(d);
  kept.insert(kept.end(), reduced.begin(), reduced.end());
  return kept;
}

unsigned row_threads(int64_t len) {
  unsigned t = 32;
  while (t < 256 && t < len) t *= 2;
  return t;
}

void reduce_cuda(ReduceOp op, const Tensor& x, const Tensor& out) {
  HG_CHECK(out.is_contiguous(), "reduce: the output must be contiguous");
  const int64_t rows = out.numel(), len = rows ? x.numel() / rows : 0;
  if (rows == 0) return;
  const TensorArg xa = tensor_arg(x.permute(kept_then_reduced(x, out)));
  visit_dtype(x.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("reduce: bool tensors cannot be reduced; cast to i64 first");
    } else {
      launch(reduce_rows<T>,
             {.grid = static_cast<unsigned>(std::min<int64_t>(rows, 4096)), .block = row_threads(len),
              .stream = current_stream(x.device().index), .name = "reduce_rows"},
             xa, out.data<T>(), rows, len, op);
    }
  });
}

void argmax_cuda(const Tensor& x, int64_t axis, const Tensor& out) {
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != axis) order.push_back(d);
  order.push_back(axis);
  const int64_t len = x.shape()[static_cast<size_t>(axis)], lines = len ? x.numel() / len : 0;
  if (lines == 0) return;
  const TensorArg xa = tensor_arg(x.permute(order)), oa = tensor_arg(out.permute(order));
  visit_dtype(x.dtype(), [&]<typename T>() {
    launch(argmax_lines<T>,
           {.grid = map_blocks(lines), .block = kMapThreads, .stream = current_stream(x.device().index),
            .name = "argmax_lines"},
           xa, oa, lines, len);
  });
}

}  // namespace

HG_REGISTER_KERNEL(reduce_stub, cuda, reduce_cuda);
HG_REGISTER_KERNEL(argmax_stub, cuda, argmax_cuda);

}  // namespace hg::cuda
