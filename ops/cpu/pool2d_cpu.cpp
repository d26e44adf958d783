// CPU kernels of max and average pooling on contiguous NHWC tensors. Forward passes
// run over N*P output rows, channels innermost; sums accumulate in f32 (f64 for f64)
// and round once. Backward passes are split so that no two threads write one element.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/cpu/vec/map8.h"
#include "ops/pool2d_kernels.h"

namespace hg::cpu {
namespace {

// One window element's channels [0, C) folded into the running maximum: a channel takes
// the value when it is larger or NaN (NaN wins, as in PyTorch). Returns the first channel
// left to the scalar loop: the vector body covers whole groups of 8.
template <class T, class Cmp>
int64_t max_step8([[maybe_unused]] const T* v, [[maybe_unused]] Cmp* best, [[maybe_unused]] int32_t* idx,
                  [[maybe_unused]] int32_t id, [[maybe_unused]] int64_t C) {
  int64_t c = 0;
#ifdef HG_VEC8
  if constexpr (vec::kVec8<T>) {
    const __m256i idv = _mm256_set1_epi32(id);
    for (; c + 8 <= C; c += 8) {
      const __m256 a = vec::load8(v + c).v, b = _mm256_loadu_ps(best + c);
      const __m256 take = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_GT_OQ), _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
      _mm256_storeu_ps(best + c, _mm256_blendv_ps(b, a, take));
      __m256i* ip = reinterpret_cast<__m256i*>(idx + c);
      _mm256_storeu_si256(ip, _mm256_blendv_epi8(_mm256_loadu_si256(ip), idv, _mm256_castps_si256(take)));
    }
  }
#endif
  return c;
}

template <class T>
void max_pool_forward(const Tensor& x, const Tensor& y, const Tensor& argmax, const Pool2dGeometry& g) {
  using Cmp = compute_t<T>;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  int64_t* ap = argmax.defined() ? argmax.data<int64_t>() : nullptr;
  const int64_t C = g.C;
  parallel_for(g.N * g.P, g.Q * g.R * g.S * C, [&](int64_t r0, int64_t r1) {
    // 32-bit indices keep the select below as wide as the float compare, so it vectorises.
    std::vector<Cmp> best(static_cast<size_t>(C));
    std::vector<int32_t> idx(static_cast<size_t>(C));
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t n = row / g.P, p = row % g.P;
      const WindowSpan hs = window_span(p, g.R, g.sh, g.ph, g.H);
      const T* xn = xp + n * g.H * g.W * C;
      for (int64_t q = 0; q < g.Q; ++q) {
        const WindowSpan ws = window_span(q, g.S, g.sw, g.pw, g.W);
        // Every window holds at least one input element (padding <= kernel / 2), which
        // wins when all are -inf.
        std::fill(best.begin(), best.end(), -std::numeric_limits<Cmp>::infinity());
        std::fill(idx.begin(), idx.end(), static_cast<int32_t>(hs.begin * g.W + ws.begin));
        for (int64_t h = hs.begin; h < hs.end; ++h) {
          for (int64_t w = ws.begin; w < ws.end; ++w) {
            const T* v = xn + (h * g.W + w) * C;
            const auto id = static_cast<int32_t>(h * g.W + w);
            for (int64_t c = max_step8(v, best.data(), idx.data(), id, C); c < C; ++c) {
              const Cmp a = load(v[c]);
              const bool take = max_pool_takes(a, best[c]);
              best[c] = take ? a : best[c];
              idx[c] = take ? id : idx[c];
            }
          }
        }
        // The maximum is copied from the input, not converted back: exact in every dtype.
        const int64_t out = (row * g.Q + q) * C;
        for (int64_t c = 0; c < C; ++c) yp[out + c] = xn[idx[c] * C + c];
        if (ap)
          for (int64_t c = 0; c < C; ++c) ap[out + c] = idx[c];
      }
    }
  });
}

// Scatters each gradient to its argmax. Disjoint windows (stride >= kernel) send at most
// one gradient to an input, which is copied (exact in every dtype) in parallel over
// output rows; overlapping windows add up per image, in f32 for f16/bf16.
template <class T>
void max_pool_backward(const Tensor& gy, const Tensor& argmax, const Tensor& gx, const Pool2dGeometry& g) {
  using A = accum_t<T>;
  const T* gyp = gy.data<T>();
  const int64_t* ap = argmax.data<int64_t>();
  T* gxp = gx.data<T>();
  const int64_t C = g.C, plane = g.H * g.W * C, out_row = g.Q * C;
  parallel_for(g.N * g.H, g.W * C, [&](int64_t r0, int64_t r1) {
    std::fill(gxp + r0 * g.W * C, gxp + r1 * g.W * C, store<T>(A(0)));
  });
  if (g.sh >= g.R && g.sw >= g.S) {
    parallel_for(g.N * g.P, out_row, [&](int64_t r0, int64_t r1) {
      for (int64_t row = r0; row < r1; ++row) {
        T* gxn = gxp + row / g.P * plane;
        for (int64_t o = row * out_row; o < (row + 1) * out_row; o += C)
          for (int64_t c = 0; c < C; ++c) gxn[ap[o + c] * C + c] = gyp[o + c];
      }
    });
    return;
  }
  parallel_for(g.N, g.P * out_row, [&](int64_t n0, int64_t n1) {
    std::vector<A> buf(std::is_same_v<T, A> ? 0 : static_cast<size_t>(plane));
    for (int64_t n = n0; n < n1; ++n) {
      A* acc = nullptr;
      if constexpr (std::is_same_v<T, A>) {
        acc = gxp + n * plane;
      } else {
        std::fill(buf.begin(), buf.end(), A(0));
        acc = buf.data();
      }
      for (int64_t o = n * g.P * out_row; o < (n + 1) * g.P * out_row; o += C)
        for (int64_t c = 0; c < C; ++c) acc[ap[o + c] * C + c] += load(gyp[o + c]);
      if constexpr (!std::is_same_v<T, A>)
        for (int64_t i = 0; i < plane; ++i) gxp[n * plane + i] = store<T>(buf[i]);
    }
  });
}

template <class T>
void avg_pool_forward(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  using A = accum_t<T>;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  const int64_t C = g.C;
  // PyTorch's floor output size keeps every window inside the padded image, so with
  // count_include_pad each divides by the full window.
  const A count = static_cast<A>(g.R * g.S);
  parallel_for(g.N * g.P, g.Q * g.R * g.S * C, [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(C));
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t n = row / g.P, p = row % g.P;
      const WindowSpan hs = window_span(p, g.R, g.sh, g.ph, g.H);
      const T* xn = xp + n * g.H * g.W * C;
      for (int64_t q = 0; q < g.Q; ++q) {
        const WindowSpan ws = window_span(q, g.S, g.sw, g.pw, g.W);
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t h = hs.begin; h < hs.end; ++h) {
          for (int64_t w = ws.begin; w < ws.end; ++w) {
            const T* v = xn + (h * g.W + w) * C;
            for (int64_t c = 0; c < C; ++c) acc[c] += load(v[c]);
          }
        }
        T* out = yp + (row * g.Q + q) * C;
        for (int64_t c = 0; c < C; ++c) out[c] = store<T>(acc[c] / count);
      }
    }
  });
}

// Gathers, over N*H input rows, the gradients of the windows covering each input.
template <class T>
void avg_pool_backward(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  using A = accum_t<T>;
  const T* gyp = gy.data<T>();
  T* gxp = gx.data<T>();
  const int64_t C = g.C;
  const A count = static_cast<A>(g.R * g.S);
  const int64_t cover = ((g.R + g.sh - 1) / g.sh) * ((g.S + g.sw - 1) / g.sw);
  parallel_for(g.N * g.H, g.W * C * cover, [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(C));
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t n = row / g.H, h = row % g.H;
      const WindowRange pr = windows_covering(h, g.R, g.sh, g.ph, g.P);
      for (int64_t w = 0; w < g.W; ++w) {
        const WindowRange qr = windows_covering(w, g.S, g.sw, g.pw, g.Q);
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t p = pr.lo; p < pr.hi; ++p) {
          for (int64_t q = qr.lo; q < qr.hi; ++q) {
            const T* gv = gyp + ((n * g.P + p) * g.Q + q) * C;
            for (int64_t c = 0; c < C; ++c) acc[c] += load(gv[c]);
          }
        }
        T* out = gxp + (row * g.W + w) * C;
        for (int64_t c = 0; c < C; ++c) out[c] = store<T>(acc[c] / count);
      }
    }
  });
}

void max_pool2d_cpu(const Tensor& x, const Tensor& y, const Tensor& argmax, const Pool2dGeometry& g) {
  visit_floating(x.dtype(), "max_pool2d", [&]<typename T>() { max_pool_forward<T>(x, y, argmax, g); });
}
void max_pool2d_backward_cpu(const Tensor& gy, const Tensor& argmax, const Tensor& gx, const Pool2dGeometry& g) {
  visit_floating(gy.dtype(), "max_pool2d backward", [&]<typename T>() { max_pool_backward<T>(gy, argmax, gx, g); });
}
void avg_pool2d_cpu(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  visit_floating(x.dtype(), "avg_pool2d", [&]<typename T>() { avg_pool_forward<T>(x, y, g); });
}
void avg_pool2d_backward_cpu(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  visit_floating(gy.dtype(), "avg_pool2d backward", [&]<typename T>() { avg_pool_backward<T>(gy, gx, g); });
}

}  // namespace

HG_REGISTER_KERNEL(max_pool2d_stub, cpu, max_pool2d_cpu);
HG_REGISTER_KERNEL(max_pool2d_backward_stub, cpu, max_pool2d_backward_cpu);
HG_REGISTER_KERNEL(avg_pool2d_stub, cpu, avg_pool2d_cpu);
HG_REGISTER_KERNEL(avg_pool2d_backward_stub, cpu, avg_pool2d_backward_cpu);

}  // namespace hg::cpu
