// The loss scaler's kernels on the cuda device, all state in device tensors so a step needs
// no host synchronisation: one multi-tensor pass that unscales every gradient and counts
// its non-finite values (per tensor, and the found-inf flag), and the scale update.
#include <vector>

#include "cuda/block_reduce.h"
#include "cuda/elementwise_loops.h"
#include "cuda/primitives/atomics.h"
#include "ops/amp_kernels.h"
#include "ops/copy_kernels.h"
#include "ops/kernel_math.h"

namespace hg::cuda {
namespace {

// A batch of gradients handed over as a kernel parameter (no table to upload, so no
// host-to-device copy that would wait): up to kBatch tensors per launch.
constexpr int kBatch = 96;
constexpr int64_t kChunk = 16384;  // elements per block
constexpr unsigned kThreads = 256;

struct GradBatch {
  void* data[kBatch];
  int64_t numel[kBatch];
  int64_t first_block[kBatch + 1];  // blocks [first_block[t], first_block[t + 1]) cover tensor t
  unsigned long long* count[kBatch];  // that tensor's slot of `counts`
  DType dtype[kBatch];
  int size;
};

template <class T>
struct alignas(16) Vec16 {
  T v[16 / sizeof(T)];
};

// Scales x in place and returns 1 when the result is not finite.
template <class T>
HG_DEVICE int64_t unscale_one(T& x, compute_t<T> s) {
  x = dev_store<T>(compute_t<T>(dev_load(x) * s));
  return !math_isfinite(static_cast<double>(dev_load(x)));
}

// Gradients are streamed once: 16-byte loads and stores wherever the range starts 16-byte
// aligned (chunks start kChunk elements apart, so they do when the tensor does), one
// element at a time for the tail and for unaligned views.
template <class T>
HG_DEVICE int64_t unscale_range(void* data, int64_t begin, int64_t end, float inv) {
  using C = compute_t<T>;
  constexpr int V = 16 / sizeof(T);
  T* p = static_cast<T*>(data);
  const C s = static_cast<C>(inv);
  int64_t bad = 0, scalar_from = begin;
  if (reinterpret_cast<uintptr_t>(p + begin) % 16 == 0) {
    scalar_from = begin + (end - begin) / V * V;
    for (int64_t k = begin + int64_t{threadIdx.x} * V; k < scalar_from; k += int64_t{blockDim.x} * V) {
      Vec16<T> w = *reinterpret_cast<const Vec16<T>*>(p + k);
#pragma unroll
      for (int j = 0; j < V; ++j) bad += unscale_one<T>(w.v[j], s);
      *reinterpret_cast<Vec16<T>*>(p + k) = w;
    }
  }
  for (int64_t k = scalar_from + threadIdx.x; k < end; k += blockDim.x) bad += unscale_one<T>(p[k], s);
  return bad;
}

__global__ void unscale_and_check_kernel(GradBatch b, const float* inv_scale, float* found_inf) {
  int t = 0;
  while (blockIdx.x >= b.first_block[t + 1]) ++t;
  const int64_t begin = (int64_t{blockIdx.x} - b.first_block[t]) * kChunk;
  const int64_t end = begin + kChunk < b.numel[t] ? begin + kChunk : b.numel[t];
  const float inv = *inv_scale;
  int64_t bad = 0;
  switch (b.dtype[t]) {
    case DType::f64: bad = unscale_range<double>(b.data[t], begin, end, inv); break;
    case DType::f32: bad = unscale_range<float>(b.data[t], begin, end, inv); break;
    case DType::f16: bad = unscale_range<half>(b.data[t], begin, end, inv); break;
    case DType::bf16: bad = unscale_range<bfloat16>(b.data[t], begin, end, inv); break;
    default: break;
  }
  bad = block_reduce(bad, [](int64_t x, int64_t y) { return x + y; }, int64_t{0});
  if (threadIdx.x == 0 && bad > 0) {
    atomic_add(b.count[t], static_cast<unsigned long long>(bad));
    atomic_exch(reinterpret_cast<uint32_t*>(found_inf), 0x3f800000u);  // 1.0f
  }
}

void unscale_and_check_cuda(const std::vector<Tensor>& grads, const Tensor& inv_scale, const Tensor& found_inf,
                            const Tensor& counts) {
  HG_CHECK(inv_scale.dtype() == f32 && found_inf.dtype() == f32 && counts.dtype() == i64 && counts.is_contiguous() &&
               counts.numel() == static_cast<int64_t>(grads.size()),
           "unscale: expects an f32 inv_scale and found_inf and a contiguous i64 counts with one slot per gradient");
  if (grads.empty()) return;
  fill_stub(counts.device(), counts, 0.0);
  auto* slots = reinterpret_cast<unsigned long long*>(counts.data<int64_t>());
  GradBatch b{};
  auto flush = [&] {
    if (b.size == 0) return;
    const int64_t blocks = b.first_block[b.size];
    if (blocks > 0)
      launch(unscale_and_check_kernel,
             {.grid = static_cast<unsigned>(blocks), .block = kThreads, .stream = current_stream(counts.device().index),
              .name = "unscale_and_check"},
             b, inv_scale.data<float>(), found_inf.data<float>());
    b = GradBatch{};
  };
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    HG_CHECK(g.is_contiguous(), "unscale: gradient ", i, " is not contiguous");
    HG_CHECK(is_floating(g.dtype()), "unscale: expected a floating dtype (f64, f32, f16, bf16), got ",
             dtype_name(g.dtype()));
    HG_CHECK(g.device() == counts.device(), "unscale: gradient ", i, " is on ", g.device().str(), ", the scaler on ",
             counts.device().str());
    const int64_t blocks = (g.numel() + kChunk - 1) / kChunk;
    if (b.size == kBatch || b.first_block[b.size] + blocks > (int64_t{1} << 30)) flush();
    b.data[b.size] = g.data_ptr();
    b.numel[b.size] = g.numel();
    b.dtype[b.size] = g.dtype();
    b.count[b.size] = slots + i;
    b.first_block[b.size + 1] = b.first_block[b.size] + blocks;
    ++b.size;
  }
  flush();
}

// PyTorch's rule with hysteresis and bounds: the CPU kernel's own function.
__global__ void update_scale_kernel(float* scale, int64_t* growth_tracker, int64_t* hysteresis_tracker,
                                    int64_t* skip_streak, const float* found_inf, ScaleUpdateParams p) {
  update_scale_rule(*scale, *growth_tracker, *hysteresis_tracker, *skip_streak, *found_inf, p);
}

void update_scale_cuda(const ScaleState& st, const Tensor& found_inf, const ScaleUpdateParams& p) {
  HG_CHECK(st.scale.dtype() == f32 && found_inf.dtype() == f32 && st.growth_tracker.dtype() == i64 &&
               st.hysteresis_tracker.dtype() == i64 && st.skip_streak.dtype() == i64,
           "update_scale: expects f32 scale and found_inf, i64 trackers");
  launch(update_scale_kernel,
         {.grid = 1, .block = 1, .stream = current_stream(st.scale.device().index), .name = "update_scale"},
         st.scale.data<float>(), st.growth_tracker.data<int64_t>(), st.hysteresis_tracker.data<int64_t>(),
         st.skip_streak.data<int64_t>(), found_inf.data<float>(), p);
}

}  // namespace

HG_REGISTER_KERNEL(unscale_and_check_stub, cuda, unscale_and_check_cuda);
HG_REGISTER_KERNEL(update_scale_stub, cuda, update_scale_cuda);

}  // namespace hg::cuda
