// CPU kernels of nearest and bilinear upsampling on contiguous NHWC tensors. The
// forward runs over N*OH output rows. The backward applies the transposed
// interpolation one axis at a time, each pass a gather over rows, so threads never
// write the same element and sums stay in f32 (f64 for f64) until one rounding.
#include <algorithm>
#include <memory>
#include <type_traits>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/cpu/vec/widen.h"
#include "ops/upsample_kernels.h"

namespace hg::cpu {
namespace {

template <class F>
std::vector<LinearTap<F>> linear_taps(int64_t in_size, int64_t scale) {
  std::vector<LinearTap<F>> taps(static_cast<size_t>(in_size * scale));
  for (int64_t o = 0; o < in_size * scale; ++o) taps[o] = linear_tap<F>(o, scale, in_size);
  return taps;
}

// One axis of the interpolation, transposed: for input index i, the output indices
// that read it and with what weight (entries begin[i] .. begin[i+1]).
template <class F>
struct Transposed {
  struct Entry {
    int64_t o;
    F w;
  };
  std::vector<int64_t> begin;
  std::vector<Entry> entries;
};

template <class F>
Transposed<F> transposed_axis(int64_t in_size, int64_t scale, UpsampleMode mode) {
  std::vector<std::vector<typename Transposed<F>::Entry>> per(static_cast<size_t>(in_size));
  if (mode == UpsampleMode::nearest) {
    for (int64_t o = 0; o < in_size * scale; ++o) per[o / scale].push_back({o, F(1)});
  } else {
    for (int64_t o = 0; o < in_size * scale; ++o) {
      const LinearTap<F> t = linear_tap<F>(o, scale, in_size);
      // At the clamped edge both taps read the same input: its weight is their sum.
      if (t.i0 == t.i1) {
        per[t.i0].push_back({o, t.w0 + t.w1});
      } else {
        per[t.i0].push_back({o, t.w0});
        per[t.i1].push_back({o, t.w1});
      }
    }
  }
  Transposed<F> tr;
  tr.begin.push_back(0);
  for (auto& list : per) {
    tr.entries.insert(tr.entries.end(), list.begin(), list.end());
    tr.begin.push_back(static_cast<int64_t>(tr.entries.size()));
  }
  return tr;
}

template <class T>
void nearest_forward(const Tensor& x, const Tensor& y, int64_t s) {
  const int64_t N = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3), OH = H * s, OW = W * s;
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_for(N * OH, OW * C, [&](int64_t r0, int64_t r1) {
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t n = row / OH, h = row % OH / s;
      const T* src = xp + (n * H + h) * W * C;
      T* dst = yp + row * OW * C;
      for (int64_t w = 0; w < W; ++w)
        for (int64_t k = 0; k < s; ++k, dst += C) std::copy(src + w * C, src + (w + 1) * C, dst);
    }
  });
}

template <class T>
void bilinear_forward(const Tensor& x, const Tensor& y, int64_t s) {
  using Cmp = compute_t<T>;
  const int64_t N = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3), OH = H * s, OW = W * s;
  const auto ht = linear_taps<Cmp>(H, s), wt = linear_taps<Cmp>(W, s);
  const T* xp = x.data<T>();
  T* yp = y.data<T>();
  parallel_for(N * OH, OW * C * 4, [&](int64_t r0, int64_t r1) {
    std::vector<Cmp> top_buf, bottom_buf;
    vec::RowOut<T, Cmp> out;
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t n = row / OH;
      const LinearTap<Cmp>& th = ht[row % OH];
      const Cmp* top = vec::as_compute<Cmp>(xp + (n * H + th.i0) * W * C, W * C, top_buf);
      const Cmp* bottom = vec::as_compute<Cmp>(xp + (n * H + th.i1) * W * C, W * C, bottom_buf);
      Cmp* dst = out.target(yp + row * OW * C, OW * C);
      for (int64_t ow = 0; ow < OW; ++ow, dst += C) {
        const LinearTap<Cmp>& tw = wt[ow];
        const Cmp *a = top + tw.i0 * C, *b = top + tw.i1 * C, *c = bottom + tw.i0 * C, *d = bottom + tw.i1 * C;
        for (int64_t k = 0; k < C; ++k) {
          const Cmp upper = tw.w0 * a[k] + tw.w1 * b[k];
          const Cmp lower = tw.w0 * c[k] + tw.w1 * d[k];
          dst[k] = th.w0 * upper + th.w1 * lower;
        }
      }
      out.finish(yp + row * OW * C, OW * C);
    }
  });
}

// Pass 1 sums each grad_y row over the output columns that read each input column
// (into tmp [N, OH, W, C]); pass 2 sums tmp over the output rows that read each input row.
template <class T>
void upsample_backward(const Tensor& gy, const Tensor& gx, int64_t s, UpsampleMode mode) {
  using A = accum_t<T>;
  const int64_t N = gx.size(0), H = gx.size(1), W = gx.size(2), C = gx.size(3), OH = H * s, OW = W * s;
  const Transposed<A> rows = transposed_axis<A>(H, s, mode), cols = transposed_axis<A>(W, s, mode);
  const T* gyp = gy.data<T>();
  T* gxp = gx.data<T>();
  const auto tmp = std::make_unique_for_overwrite<A[]>(static_cast<size_t>(N * OH * W * C));
  const int64_t taps = mode == UpsampleMode::nearest ? 1 : 2;
  parallel_for(N * OH, OW * C * taps, [&](int64_t r0, int64_t r1) {
    std::vector<A> buf;
    for (int64_t row = r0; row < r1; ++row) {
      const A* g = vec::as_compute<A>(gyp + row * OW * C, OW * C, buf);
      A* t = tmp.get() + row * W * C;
      for (int64_t w = 0; w < W; ++w, t += C) {
        std::fill(t, t + C, A(0));
        for (int64_t j = cols.begin[w]; j < cols.begin[w + 1]; ++j) {
          const A wgt = cols.entries[j].w;
          const A* gv = g + cols.entries[j].o * C;
          for (int64_t k = 0; k < C; ++k) t[k] += wgt * gv[k];
        }
      }
    }
  });
  parallel_for(N * H, W * C * s * taps, [&](int64_t r0, int64_t r1) {
    std::vector<A> acc(static_cast<size_t>(W * C));
    for (int64_t row = r0; row < r1; ++row) {
      const int64_t n = row / H, h = row % H;
      std::fill(acc.begin(), acc.end(), A(0));
      for (int64_t i = rows.begin[h]; i < rows.begin[h + 1]; ++i) {
        const A wgt = rows.entries[i].w;
        const A* t = tmp.get() + (n * OH + rows.entries[i].o) * W * C;
        for (int64_t k = 0; k < W * C; ++k) acc[k] += wgt * t[k];
      }
      vec::narrow(acc.data(), gxp + row * W * C, W * C);
    }
  });
}

void upsample_cpu(const Tensor& x, const Tensor& y, int64_t scale, UpsampleMode mode) {
  visit_floating(x.dtype(), "upsample", [&]<typename T>() {
    if (mode == UpsampleMode::nearest) nearest_forward<T>(x, y, scale);
    else bilinear_forward<T>(x, y, scale);
  });
}

void upsample_backward_cpu(const Tensor& gy, const Tensor& gx, int64_t scale, UpsampleMode mode) {
  visit_floating(gy.dtype(), "upsample backward", [&]<typename T>() { upsample_backward<T>(gy, gx, scale, mode); });
}

}  // namespace

HG_REGISTER_KERNEL(upsample_stub, cpu, upsample_cpu);
HG_REGISTER_KERNEL(upsample_backward_stub, cpu, upsample_backward_cpu);

}  // namespace hg::cpu
