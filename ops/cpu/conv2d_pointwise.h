// A 1x1 convolution with few filters: a segmentation head's K <= 8 classes over C channels
// (unit stride, no padding, one group), forward and weight gradient, reading f32/f16/bf16
// where they lie (no widened copy of the activation), f32 sums.
//
// Forward (f16/bf16): eight pixels per vector, their channels gathered (a pixel's channel pair is one
// dword), each filter one chain of fused multiply-adds over c ascending from zero, then + bias,
// one rounding: the GEMM engine's and the direct tiles' chain, so the same bits as they give.
// Weight gradient: per chunk of pixels, the channels as vectors and the pixels in order (each
// (k, c) one chain over the chunk's pixels); the chunks as the other weight-gradient paths cut
// and sum them (conv2d_cpu.cpp), so results do not depend on the thread count.
// Internal, not installed.
#pragma once
#include <cstdint>

namespace hg::cpu::pointwise {

constexpr int64_t kMaxFilters = 8, kMaxForwardFilters = 4;

// Whether the kernels take this shape (false where the build has no AVX2). The forward (f16/
// bf16 only): C even (a dword gather reads a channel pair) and at most 4 filters. Measured on Zen 5 (bench/conv_wgrad, 2 threads, against the direct tiles on the
// widened copy): bf16 32->4 @128 0.69 -> 0.41 ms, 8->4 @64 0.18 -> 0.09; 8 filters lost
// (16->8 @64 0.19 -> 0.28: the gathers cost more than the widening there), and so did f32,
// which the direct tiles read in place (32->4 @128 0.43 -> 0.70). The weight gradient: any
// dtype, K <= 8, C a multiple of 8 (32->4 @128 bf16 1.50 -> 0.26 ms, f32 0.84 -> 0.18;
// 16->8 @64 bf16 0.33 -> 0.14, f32 0.10 -> 0.08).
bool forward_fits(int64_t K, int64_t C);
bool wgrad_fits(int64_t K, int64_t C);

// y[m, k] = round(sum over c of x[m, c] * w[k, c] + bias[k]) for m < M; x [M, C] and y [M, K]
// as T (half or bfloat16), w [K, C] and bias [K] (or null) widened to f32. Splits M over `threads`.
template <class T>
void forward(const T* x, int64_t M, int64_t C, const float* w, int64_t K, const float* bias, T* y, int threads);

// acc[k * C + c] = sum over pixels m in [m0, m0 + n), in order, of gy[m, k] * x[m, c]
// (gy [*, K], x [*, C] as T), f32 from zero.
template <class T>
void wgrad_chunk(const T* gy, const T* x, int64_t m0, int64_t n, int64_t K, int64_t C, float* acc);

}  // namespace hg::cpu::pointwise
