// fill on the cuda device for contiguous tensors of any dtype: the value is converted
// on the host with IEEE rounding and replicated as a bit pattern.
#include <cstdint>
#include <cstring>

#include "cuda/runtime.h"
#include "ops/copy_kernels.h"

namespace hg::cuda {
namespace {

template <class Word>
__global__ void fill_words(Word* p, int64_t n, Word v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) p[i] = v;
}

template <class Word>
void launch_fill(void* p, int64_t n, Word v) {
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 65535));
  fill_words<<<blocks, threads>>>(static_cast<Word*>(p), n, v);
  HG_CUDA_CHECK(cudaGetLastError());
}

void fill_cuda(const Tensor& dst, double value) {
  HG_CHECK(dst.is_contiguous(), "fill on ", dst.device().str(), ": only contiguous tensors are supported so far, got strides ",
           shape_str(dst.strides()));
  visit_dtype(dst.dtype(), [&]<typename T>() {
    const T v = store<T>(value);
    if constexpr (sizeof(T) == 8) { uint64_t w; std::memcpy(&w, &v, 8); launch_fill<uint64_t>(dst.data_ptr(), dst.numel(), w); }
    else if constexpr (sizeof(T) == 4) { uint32_t w; std::memcpy(&w, &v, 4); launch_fill<uint32_t>(dst.data_ptr(), dst.numel(), w); }
    else if constexpr (sizeof(T) == 2) { uint16_t w; std::memcpy(&w, &v, 2); launch_fill<uint16_t>(dst.data_ptr(), dst.numel(), w); }
    else { uint8_t w; std::memcpy(&w, &v, 1); launch_fill<uint8_t>(dst.data_ptr(), dst.numel(), w); }
  });
}

}  // namespace

HG_REGISTER_KERNEL(fill_stub, cuda, fill_cuda);

}  // namespace hg::cuda
