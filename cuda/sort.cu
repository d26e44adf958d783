// argsort on the cuda device: each line of the [outer, n, inner] view becomes (key, position)
// pairs, the key a u64 whose unsigned order is the CPU's order (NaN largest, -0 equal to +0,
// inverted for descending), and a bitonic network sorts them: a block per line in shared
// memory for lines of up to kBlockWidth, else in global memory with a launch per step (any
// length). Equal keys fall back to the position, so the order is the CPU's stable one.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "cuda/device_types.h"
#include "cuda/index_loop.h"
#include "cuda/primitives/barrier.h"
#include "cuda/primitives/shared_memory.h"
#include "ops/index_kernels.h"

namespace hg::cuda {
namespace {

constexpr uint64_t kPadKey = ~uint64_t{0};
constexpr int64_t kBlockWidth = 2048;  // 32 KiB of (key, position) pairs in shared memory
constexpr unsigned kBlockThreads = 256;

// A key whose unsigned order is the order the CPU sorts by (compute_t<T>'s <, NaN after
// everything): floats are widened to f64 (exact), -0 becomes +0 and every NaN one NaN, then
// the sign-magnitude bits are mapped to an unsigned order; integers flip the sign bit.
template <class T>
HG_DEVICE uint64_t order_key(T v, bool descending) {
  uint64_t k;
  if constexpr (std::is_same_v<T, bool>) {
    k = v ? 1 : 0;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    k = static_cast<uint64_t>(v) ^ (uint64_t{1} << 63);
  } else {
    const double d = static_cast<double>(dev_load(v));
    uint64_t b = 0x7ff8000000000000u;  // every NaN
    if (d == d) {
      const double z = d == 0 ? 0.0 : d;
      __builtin_memcpy(&b, &z, sizeof b);
    }
    k = (b >> 63) ? ~b : b | (uint64_t{1} << 63);
  }
  return descending ? ~k : k;
}

// Where element p of line l of a contiguous [outer, n, inner] tensor is.
struct Lines {
  int64_t n, inner;
  HG_DEVICE int64_t at(int64_t l, int64_t p) const { return (l / inner) * n * inner + l % inner + p * inner; }
};

// Pairs of line l at [l * width, (l + 1) * width); positions past n get the largest key,
// and their position (>= n) sorts them after every real element with that key.
template <class T>
struct LoadPairs {
  const T* x;
  uint64_t* key;
  int64_t* pos;
  Lines lines;
  int64_t width;
  bool descending;
  HG_DEVICE void operator()(int64_t e) const {
    const int64_t l = e / width, p = e % width;
    key[e] = p < lines.n ? order_key(x[lines.at(l, p)], descending) : kPadKey;
    pos[e] = p;
  }
};

// Pair h of one step (k, j) of the bitonic network over one line's pairs: elements a and
// a + j, ordered ascending where the size-k block containing a sorts ascending.
HG_DEVICE void bitonic_compare(uint64_t* key, int64_t* pos, int64_t k, int64_t j, int64_t h) {
  const int64_t a = 2 * j * (h / j) + h % j, b = a + j;
  const bool up = (a & k) == 0;
  const uint64_t ka = key[a], kb = key[b];
  const int64_t pa = pos[a], pb = pos[b];
  const bool a_after_b = ka > kb || (ka == kb && pa > pb);
  if (a_after_b == up) {
    key[a] = kb;
    key[b] = ka;
    pos[a] = pb;
    pos[b] = pa;
  }
}

// One step over every line's pairs in global memory.
struct BitonicStep {
  uint64_t* key;
  int64_t* pos;
  int64_t width, k, j;
  HG_DEVICE void operator()(int64_t t) const {
    const int64_t half = width / 2, l = t / half;
    bitonic_compare(key + l * width, pos + l * width, k, j, t % half);
  }
};

// The whole network for lines of up to kBlockWidth: a block per line, pairs in shared memory.
template <class T>
__global__ void argsort_block(const T* x, int64_t* index, Lines lines, int64_t count, int64_t width, bool descending) {
  uint64_t* key = dynamic_shared_memory<uint64_t>();
  int64_t* pos = reinterpret_cast<int64_t*>(key + width);
  for (int64_t l = blockIdx.x; l < count; l += gridDim.x) {
    for (int64_t p = threadIdx.x; p < width; p += blockDim.x) {
      key[p] = p < lines.n ? order_key(x[lines.at(l, p)], descending) : kPadKey;
      pos[p] = p;
    }
    sync_threads();
    for (int64_t k = 2; k <= width; k *= 2)
      for (int64_t j = k / 2; j >= 1; j /= 2) {
        for (int64_t h = threadIdx.x; h < width / 2; h += blockDim.x) bitonic_compare(key, pos, k, j, h);
        sync_threads();
      }
    for (int64_t p = threadIdx.x; p < lines.n; p += blockDim.x) index[lines.at(l, p)] = pos[p];
    sync_threads();  // the next line reuses the shared pairs
  }
}

struct StoreOrder {
  const int64_t* pos;
  int64_t* index;
  Lines lines;
  int64_t width;
  HG_DEVICE void operator()(int64_t e) const {
    const int64_t l = e / lines.n, p = e % lines.n;
    index[lines.at(l, p)] = pos[l * width + p];
  }
};

void argsort_cuda(const Tensor& x, const Tensor& index, bool descending) {
  HG_CHECK(x.dim() == 3 && x.is_contiguous() && index.is_contiguous() && index.shape() == x.shape() &&
               index.dtype() == i64,
           "argsort on ", x.device().str(), ": the kernel takes a contiguous [outer, n, inner] tensor and an i64 index "
           "of its shape, got ", shape_str(x.shape()), " and ", shape_str(index.shape()));
  const Lines lines{x.size(1), x.size(2)};
  const int64_t count = x.size(0) * x.size(2);
  if (count == 0 || lines.n == 0) return;
  int64_t width = 1;
  while (width < lines.n) width *= 2;
  const Device dev = x.device();
  if (width <= kBlockWidth) {
    const unsigned threads = static_cast<unsigned>(std::clamp<int64_t>(width / 2, 32, kBlockThreads));
    visit_dtype(x.dtype(), [&]<typename T>() {
      launch(argsort_block<T>,
             {.grid = static_cast<unsigned>(std::min<int64_t>(count, 65535)),
              .block = threads,
              .shared_bytes = static_cast<size_t>(width) * 16,
              .stream = current_stream(dev.index),
              .name = "argsort_block"},
             x.data<T>(), index.data<int64_t>(), lines, count, width, descending);
    });
    return;
  }
  const Tensor key = empty({count * width}, {i64, dev}), pos = empty({count * width}, {i64, dev});
  auto* k = static_cast<uint64_t*>(key.data_ptr());
  int64_t* p = pos.data<int64_t>();
  visit_dtype(x.dtype(), [&]<typename T>() {
    for_each_index(dev.index, "argsort_load", count * width, LoadPairs<T>{x.data<T>(), k, p, lines, width, descending});
  });
  for (int64_t size = 2; size <= width; size *= 2)
    for (int64_t j = size / 2; j >= 1; j /= 2)
      for_each_index(dev.index, "argsort_bitonic_step", count * width / 2, BitonicStep{k, p, width, size, j});
  for_each_index(dev.index, "argsort_store", count * lines.n, StoreOrder{p, index.data<int64_t>(), lines, width});
}

}  // namespace

HG_REGISTER_KERNEL(argsort_stub, cuda, argsort_cuda);

}  // namespace hg::cuda
