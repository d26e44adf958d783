// Batch normalisation on the cuda device for contiguous [M, C] data: per-channel sums by
// blocks of 32 channels x 8 row-strides (reads coalesced along C), in the statistics dtype
// S (f32, f64 for f64); the corrected two-pass variance; elementwise passes in S, rounded once.
#include "cuda/contiguous_check.h"
#include "cuda/device_types.h"
#include "cuda/index_loop.h"
#include "cuda/primitives/barrier.h"
#include "ops/batch_norm_kernels.h"

namespace hg::cuda {
namespace {

constexpr int kChannels = 32, kRowLanes = 8;
// A thread sums this many of its rows into a fresh accumulator before adding it to its
// running total, so the rounding error grows with M / kBlockRows, not M (as on the CPU).
constexpr int64_t kBlockRows = 64;

template <class S>
struct Pair {
  S a, b;
};

// Over rows m of the block's channel, the sums of f(m) = {a, b}, returned to every thread
// (threads whose channel is past C contribute nothing but reach the barriers). Rows are
// split across threadIdx.y and the 8 partial sums added in a fixed order: deterministic.
template <class S, class F>
HG_DEVICE Pair<S> column_sums(int64_t M, bool active, F f) {
  __shared__ S part[2][kRowLanes][kChannels];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  Pair<S> total{S(0), S(0)};
  if (active) {
    for (int64_t m0 = ty; m0 < M; m0 += kBlockRows * kRowLanes) {
      Pair<S> block{S(0), S(0)};
      for (int64_t m = m0; m < M && m < m0 + kBlockRows * kRowLanes; m += kRowLanes) {
        const Pair<S> v = f(m);
        block.a += v.a;
        block.b += v.b;
      }
      total.a += block.a;
      total.b += block.b;
    }
  }
  part[0][ty][tx] = total.a;
  part[1][ty][tx] = total.b;
  sync_threads();
  Pair<S> sum{S(0), S(0)};
  for (int y = 0; y < kRowLanes; ++y) {
    sum.a += part[0][y][tx];
    sum.b += part[1][y][tx];
  }
  sync_threads();  // the next call overwrites part
  return sum;
}

template <class T, class S>
__global__ void __launch_bounds__(kChannels * kRowLanes)
    stats_kernel(const T* x, S* mean, S* var, int64_t M, int64_t C) {
  const int64_t c = blockIdx.x * int64_t{kChannels} + threadIdx.x;
  const bool active = c < C;
  const S m_count = static_cast<S>(M);
  const Pair<S> s1 = column_sums<S>(M, active, [&](int64_t m) { return Pair<S>{dev_load(x[m * C + c]), S(0)}; });
  const S mu = s1.a / m_count;
  // Deviations from the rounded mean; their own sum corrects for its rounding.
  const Pair<S> s2 = column_sums<S>(M, active, [&](int64_t m) {
    const S d = dev_load(x[m * C + c]) - mu;
    return Pair<S>{d, d * d};
  });
  if (active && threadIdx.y == 0) {
    mean[c] = mu;
    const S v = (s2.b - s2.a * s2.a / m_count) / m_count;
    var[c] = v < S(0) ? S(0) : v;  // rounding can dip below zero for constant channels; NaN stays
  }
}

template <class T, class S>
__global__ void __launch_bounds__(kChannels * kRowLanes)
    backward_sums_kernel(const T* gy, const T* x, const S* mean, const S* invstd, S* sum_gy, S* sum_gy_xhat, int64_t M,
                         int64_t C) {
  const int64_t c = blockIdx.x * int64_t{kChannels} + threadIdx.x;
  const bool active = c < C;
  const S mu = active ? mean[c] : S(0);
  const Pair<S> s = column_sums<S>(M, active, [&](int64_t m) {
    const S g = dev_load(gy[m * C + c]);
    return Pair<S>{g, g * (dev_load(x[m * C + c]) - mu)};
  });
  if (active && threadIdx.y == 0) {
    sum_gy[c] = s.a;
    sum_gy_xhat[c] = s.b * invstd[c];
  }
}

template <class T, class S>
struct NormaliseForward {
  const T* x;
  const S *mean, *invstd, *weight, *bias;  // weight, bias: nullptr without an affine transform
  T* y;
  int64_t C;
  HG_DEVICE void operator()(int64_t i) const {
    const int64_t c = i % C;
    const S scale = invstd[c] * (weight ? weight[c] : S(1));
    const S shift = bias ? bias[c] : S(0);
    y[i] = dev_store<T>((dev_load(x[i]) - mean[c]) * scale + shift);
  }
};

// gx = k1 * gy + k2 * (x - mean) + k3 with the CPU kernel's per-channel factors.
template <class T, class S>
struct InputGradient {
  const T *gy, *x;
  const S *mean, *invstd, *weight, *sum_gy, *sum_gy_xhat;
  T* gx;
  int64_t M, C;
  bool training;
  HG_DEVICE void operator()(int64_t i) const {
    const int64_t c = i % C;
    const S k1 = invstd[c] * (weight ? weight[c] : S(1));
    const S g = dev_load(gy[i]);
    if (!training) {
      gx[i] = dev_store<T>(k1 * g);
      return;
    }
    const S inv_m = S(1) / static_cast<S>(M);
    const S k2 = -k1 * invstd[c] * sum_gy_xhat[c] * inv_m;
    const S k3 = -k1 * sum_gy[c] * inv_m;
    gx[i] = dev_store<T>(k1 * g + k2 * (dev_load(x[i]) - mean[c]) + k3);
  }
};

template <class S>
const S* optional(const Tensor& t) {
  return t.defined() ? t.data<S>() : nullptr;
}

dim3 channel_grid(int64_t C) { return dim3(static_cast<unsigned>((C + kChannels - 1) / kChannels)); }

void stats_cuda(const Tensor& x, const Tensor& mean, const Tensor& var) {
  check_contiguous("batch_norm", {&x, &mean, &var});
  const int64_t M = x.size(0), C = x.size(1);
  if (C == 0) return;
  visit_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using S = compute_t<T>;
    launch(stats_kernel<T, S>,
           {.grid = channel_grid(C), .block = dim3(kChannels, kRowLanes), .stream = current_stream(x.device().index),
            .name = "batch_norm_stats"},
           x.data<T>(), mean.data<S>(), var.data<S>(), M, C);
  });
}

void forward_cuda(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& bias,
                  const Tensor& y) {
  check_contiguous("batch_norm", {&x, &mean, &invstd, &weight, &bias, &y});
  visit_floating(x.dtype(), "batch_norm", [&]<typename T>() {
    using S = compute_t<T>;
    for_each_index(y.device().index, "batch_norm_forward", y.numel(),
                   NormaliseForward<T, S>{x.data<T>(), mean.data<S>(), invstd.data<S>(), optional<S>(weight),
                                          optional<S>(bias), y.data<T>(), x.size(1)});
  });
}

void backward_cuda(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                   bool training, const Tensor& gx, const Tensor& sum_gy, const Tensor& sum_gy_xhat) {
  check_contiguous("batch_norm", {&gy, &x, &mean, &invstd, &weight, &gx, &sum_gy, &sum_gy_xhat});
  const int64_t M = x.size(0), C = x.size(1);
  if (C == 0) return;
  visit_floating(x.dtype(), "batch_norm backward", [&]<typename T>() {
    using S = compute_t<T>;
    launch(backward_sums_kernel<T, S>,
           {.grid = channel_grid(C), .block = dim3(kChannels, kRowLanes), .stream = current_stream(x.device().index),
            .name = "batch_norm_backward_sums"},
           gy.data<T>(), x.data<T>(), mean.data<S>(), invstd.data<S>(), sum_gy.data<S>(), sum_gy_xhat.data<S>(), M, C);
    if (!gx.defined()) return;
    for_each_index(gx.device().index, "batch_norm_input_gradient", gx.numel(),
                   InputGradient<T, S>{gy.data<T>(), x.data<T>(), mean.data<S>(), invstd.data<S>(), optional<S>(weight),
                                       sum_gy.data<S>(), sum_gy_xhat.data<S>(), gx.data<T>(), M, C, training});
  });
}

}  // namespace

HG_REGISTER_KERNEL(batch_norm_stats_stub, cuda, stats_cuda);
HG_REGISTER_KERNEL(batch_norm_forward_stub, cuda, forward_cuda);
HG_REGISTER_KERNEL(batch_norm_backward_stub, cuda, backward_cuda);

}  // namespace hg::cuda
