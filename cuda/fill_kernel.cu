// fill on the cuda device for contiguous tensors of any dtype: the value is converted
// on the host with IEEE rounding and replicated as a bit pattern.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "cuda/launch.h"
#include "ops/copy_kernels.h"

namespace hg::cuda {
namespace {

template <class Word>
__global__ void fill_words(Word* p, int64_t n, Word v) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) p[i] = v;
}

// The grid-stride loop lets a capped grid cover any size: 1024 blocks of 256 threads fill
// a GPU, and keep the emulation's fiber count bounded.
template <class Word>
void launch_fill(int device, void* p, int64_t n, Word v) {
  const unsigned threads = 256;
  const auto blocks = static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 1024));
  launch(fill_words<Word>, {.grid = blocks, .block = threads, .stream = current_stream(device), .name = "fill_words"},
         static_cast<Word*>(p), n, v);
}

void fill_cuda(const Tensor& dst, double value) {
  HG_CHECK(dst.is_contiguous(), "fill on ", dst.device().str(), ": only contiguous tensors are supported so far, got strides ",
           shape_str(dst.strides()));
  const int dev = dst.device().index;
  visit_dtype(dst.dtype(), [&]<typename T>() {
    const T v = store<T>(value);
    if constexpr (sizeof(T) == 8) { uint64_t w; std::memcpy(&w, &v, 8); launch_fill<uint64_t>(dev, dst.data_ptr(), dst.numel(), w); }
    else if constexpr (sizeof(T) == 4) { uint32_t w; std::memcpy(&w, &v, 4); launch_fill<uint32_t>(dev, dst.data_ptr(), dst.numel(), w); }
    else if constexpr (sizeof(T) == 2) { uint16_t w; std::memcpy(&w, &v, 2); launch_fill<uint16_t>(dev, dst.data_ptr(), dst.numel(), w); }
    else { uint8_t w; std::memcpy(&w, &v, 1); launch_fill<uint8_t>(dev, dst.data_ptr(), dst.numel(), w); }
  });
}

}  // namespace

HG_REGISTER_KERNEL(fill_stub, cuda, fill_cuda);

}  // namespace hg::cuda
