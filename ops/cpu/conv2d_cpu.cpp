// CPU convolution: im2col + Eigen GEMM over tiles of output pixels. Each thread fills a
// tile's column buffer (widening f16/bf16 to f32 there, never inside the GEMM) right
// before multiplying it, so the tile is still in L2; f32 accumulates, outputs round once.
#include <Eigen/Core>
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "framework/half_convert.h"
#include "ops/conv2d_kernels.h"
#include "ops/cpu/loops.h"

namespace hg::cpu {
namespace {

template <class C>
using RowMat = Eigen::Matrix<C, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class C>
using MatMap = Eigen::Map<RowMat<C>, Eigen::Unaligned, Eigen::OuterStride<>>;
template <class C>
using ConstMatMap = Eigen::Map<const RowMat<C>, Eigen::Unaligned, Eigen::OuterStride<>>;

// Column tiles of about this size stay in L2 (2 MB per core here) next to Eigen's packed panels.
constexpr int64_t kTileBytes = 512 << 10;
// Below this many output pixels per thread, one thread and Eigen's own threading do better.
constexpr int64_t kMinRowsPerThread = 32;

template <class T>
constexpr bool is_native = std::is_same_v<T, compute_t<T>>;

// Exact widening of a contiguous run into the compute type.
template <class T, class C>
void widen(const T* src, C* dst, int64_t n) {
  if (n < 8) {  // short runs (few channels): a call costs more than the copy
    for (int64_t i = 0; i < n; ++i) dst[i] = load(src[i]);
  } else if constexpr (is_native<T>) {
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(C));
  } else if constexpr (std::is_same_v<T, half>) {
    convert_f16_to_f32(src, dst, static_cast<size_t>(n));
  } else {
    convert_bf16_to_f32(src, dst, static_cast<size_t>(n));
  }
}

// The one rounding of a result into the storage type.
template <class T, class C>
void narrow(const C* src, T* dst, int64_t n) {
  if constexpr (is_native<T>)
    std::memcpy(dst, src, static_cast<size_t>(n) * sizeof(C));
  else if constexpr (std::is_same_v<T, half>)
    convert_f32_to_f16(src, dst, static_cast<size_t>(n));
  else
    convert_f32_to_bf16(src, dst, static_cast<size_t>(n));
}

// Sizes of one convolution, x [N, H, W, C] -> y [N, P, Q, K], w [K, R, S, Cg].
struct Geometry {
  int64_t N, H, W, C, K, R, S, P, Q, G, Cg, Kg, RSCg;
  int64_t sh, sw, ph, pw, dh, dw;
  // A 1x1 unpadded stride-1 convolution: the input's rows already are the column rows.
  bool pointwise;
  int64_t rows() const { return N * P * Q; }
  int64_t macs() const { return rows() * Kg * RSCg; }
};

Geometry geometry(const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p) {
  Geometry g{};
  g.N = x.size(0), g.H = x.size(1), g.W = x.size(2), g.C = x.size(3);
  g.K = w.size(0), g.R = w.size(1), g.S = w.size(2), g.Cg = w.size(3);
  g.P = y.size(1), g.Q = y.size(2), g.G = p.groups, g.Kg = g.K / g.G, g.RSCg = g.R * g.S * g.Cg;
  g.sh = p.stride[0], g.sw = p.stride[1], g.ph = p.padding[0], g.pw = p.padding[1];
  g.dh = p.dilation[0], g.dw = p.dilation[1];
  g.pointwise =
      g.R == 1 && g.S == 1 && g.sh == 1 && g.sw == 1 && g.ph == 0 && g.pw == 0 && g.G == 1 && g.P == g.H && g.Q == g.W;
  return g;
}

// Output pixels per tile: a column tile of about kTileBytes.
int64_t tile_rows(int64_t row_bytes) { return std::max<int64_t>(16, kTileBytes / std::max<int64_t>(row_bytes, 1)); }

// How many contiguous ranges to split `rows` into: one per thread, fewer when rows are few,
// and one when the whole convolution (`macs` multiply-adds) is cheaper than waking a thread.
int64_t part_count(int64_t rows, int64_t min_rows, int64_t macs) {
  if (macs < (int64_t{1} << 18)) return 1;
  return std::clamp<int64_t>(rows / min_rows, 1, omp_get_max_threads());
}

// Runs f(part, begin, end) on each of `parts` ranges of [0, rows), one thread each. Inside
// a range the GEMMs run single-threaded; with a single range Eigen threads them itself.
template <class F>
void for_parts(int64_t rows, int64_t parts, F&& f) {
  parallel_for(parts, int64_t{1} << 20, [&](int64_t a, int64_t b) {
    for (int64_t i = a; i < b; ++i) f(i, rows * i / parts, rows * (i + 1) / parts);
  });
}

// Fills col [m1 - m0, RSCg] with the receptive fields of output pixels m0..m1 in group `grp`.
template <class T, class C>
void im2col(const Geometry& g, const T* x, int64_t grp, int64_t m0, int64_t m1, C* col) {
  if (g.pointwise) {
    widen(x + m0 * g.C, col, (m1 - m0) * g.C);
    return;
  }
  const int64_t cg = g.Cg, c0 = grp * cg;
  // With one group and undilated columns a kernel row reads S*C contiguous values.
  const bool runs = g.G == 1 && g.dw == 1;
  // One output row (fixed n, p) at a time, so each kernel row's bounds are checked once.
  for (int64_t m = m0; m < m1;) {
    const int64_t n = m / (g.P * g.Q), p = (m / g.Q) % g.P, q0 = m % g.Q;
    const int64_t q1 = std::min(g.Q, q0 + (m1 - m));
    C* base = col + (m - m0) * g.RSCg;
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t h = p * g.sh - g.ph + r * g.dh;
      C* dst = base + r * g.S * cg;
      if (h < 0 || h >= g.H) {
        for (int64_t q = q0; q < q1; ++q) std::fill_n(dst + (q - q0) * g.RSCg, g.S * cg, C(0));
        continue;
      }
      const T* row = x + (n * g.H + h) * g.W * g.C + c0;
      for (int64_t q = q0; q < q1; ++q) {
        C* d = dst + (q - q0) * g.RSCg;
        const int64_t w0 = q * g.sw - g.pw;
        if (runs && w0 >= 0 && w0 + g.S <= g.W) {
          widen(row + w0 * g.C, d, g.S * g.C);
          continue;
        }
        for (int64_t s = 0; s < g.S; ++s) {
          const int64_t w = w0 + s * g.dw;
          if (w < 0 || w >= g.W)
            std::fill_n(d + s * cg, cg, C(0));
          else
            widen(row + w * g.C, d + s * cg, cg);
        }
      }
    }
    m += q1 - q0;
  }
}

// The column matrix of rows m0..m1: the input itself for a native pointwise conv, else im2col into buf.
template <class T, class C = compute_t<T>>
const C* columns(const Geometry& g, const T* x, int64_t grp, int64_t m0, int64_t m1, std::vector<C>& buf) {
  if constexpr (is_native<T>)
    if (g.pointwise) return x + m0 * g.C;
  buf.resize(static_cast<size_t>((m1 - m0) * g.RSCg));
  im2col(g, x, grp, m0, m1, buf.data());
  return buf.data();
}

// Adds col [m1 - m0, RSCg] back onto the input pixels each row was gathered from.
// gx points at image n_first.
template <class C>
void col2im_add(const Geometry& g, int64_t grp, int64_t m0, int64_t m1, const C* col, C* gx, int64_t n_first) {
  const int64_t cg = g.Cg, c0 = grp * cg;
  int64_t n = m0 / (g.P * g.Q), p = (m0 / g.Q) % g.P, q = m0 % g.Q;
  for (int64_t m = m0; m < m1; ++m) {
    const C* src = col + (m - m0) * g.RSCg;
    C* img = gx + (n - n_first) * g.H * g.W * g.C + c0;
    for (int64_t r = 0; r < g.R; ++r) {
      const int64_t h = p * g.sh - g.ph + r * g.dh;
      if (h < 0 || h >= g.H) continue;
      for (int64_t s = 0; s < g.S; ++s) {
        const int64_t w = q * g.sw - g.pw + s * g.dw;
        if (w < 0 || w >= g.W) continue;
        C* d = img + (h * g.W + w) * g.C;
        const C* v = src + (r * g.S + s) * cg;
        for (int64_t c = 0; c < cg; ++c) d[c] += v[c];
      }
    }
    if (++q == g.Q) {
      q = 0;
      if (++p == g.P) p = 0, ++n;
    }
  }
}

// The weight as a [K, RSCg] compute-type matrix: the tensor itself, or widened once into buf.
template <class T, class C = compute_t<T>>
const C* weight_matrix(const Tensor& w, std::vector<C>& buf) {
  if constexpr (is_native<T>) {
    return w.data<T>();
  } else {
    buf.resize(static_cast<size_t>(w.numel()));
    widen(w.data<T>(), buf.data(), w.numel());
    return buf.data();
  }
}

// Rows m0..m1 of gy [M, K] as compute type: in place, or widened into buf.
template <class T, class C = compute_t<T>>
const C* gy_rows(const T* gy, int64_t K, int64_t m0, int64_t m1, std::vector<C>& buf) {
  if constexpr (is_native<T>) {
    return gy + m0 * K;
  } else {
    buf.resize(static_cast<size_t>((m1 - m0) * K));
    widen(gy + m0 * K, buf.data(), (m1 - m0) * K);
    return buf.data();
  }
}

// Runs f(x) with the input as im2col should read it. Channel runs shorter than 8 are too
// short for F16C, so a reduced-precision input with few channels per group is widened whole,
// once, instead (it is R*S times smaller than its columns; bounded so it stays a side buffer).
template <class T, class F>
void with_input(const Geometry& g, const Tensor& xt, F&& f) {
  if constexpr (!is_native<T>) {
    if (g.Cg < 8 && xt.numel() <= (int64_t{16} << 20)) {
      std::vector<float> wide(static_cast<size_t>(xt.numel()));
      widen(xt.data<T>(), wide.data(), xt.numel());
      f(static_cast<const float*>(wide.data()));
      return;
    }
  }
  f(xt.data<T>());
}

template <class T>
void forward_typed(const Tensor& xt, const Tensor& wt, const Tensor& yt, const ConvParams& prm) {
  using C = compute_t<T>;
  const Geometry g = geometry(xt, wt, yt, prm);
  T* y = yt.data<T>();
  std::vector<C> wbuf;
  const C* wc = weight_matrix<T>(wt, wbuf);
  const int64_t tile = tile_rows(g.RSCg * static_cast<int64_t>(sizeof(C)));
  with_input<T>(g, xt, [&](const auto* x) {
    for_parts(g.rows(), part_count(g.rows(), kMinRowsPerThread, g.macs()), [&](int64_t, int64_t r0, int64_t r1) {
      std::vector<C> col, out;
      for (int64_t m0 = r0; m0 < r1; m0 += tile) {
        const int64_t m1 = std::min(r1, m0 + tile), rows = m1 - m0;
        C* o;
        if constexpr (is_native<T>) {
          o = y + m0 * g.K;
        } else {
          out.resize(static_cast<size_t>(rows * g.K));
          o = out.data();
        }
        for (int64_t grp = 0; grp < g.G; ++grp) {
          const C* a = columns(g, x, grp, m0, m1, col);
          ConstMatMap<C> A(a, rows, g.RSCg, Eigen::OuterStride<>(g.RSCg));
          ConstMatMap<C> B(wc + grp * g.Kg * g.RSCg, g.Kg, g.RSCg, Eigen::OuterStride<>(g.RSCg));
          MatMap<C> O(o + grp * g.Kg, rows, g.Kg, Eigen::OuterStride<>(g.K));
          O.noalias() = A * B.transpose();
        }
        if constexpr (!is_native<T>) narrow(o, y + m0 * g.K, rows * g.K);
      }
    });
  });
}

template <class T>
void dgrad_typed(const Tensor& gyt, const Tensor& wt, const Tensor& gxt, const ConvParams& prm) {
  using C = compute_t<T>;
  const Geometry g = geometry(gxt, wt, gyt, prm);
  const T* gy = gyt.data<T>();
  T* gx = gxt.data<T>();
  std::vector<C> wbuf;
  const C* wc = weight_matrix<T>(wt, wbuf);
  const int64_t img_in = g.H * g.W * g.C, img_out = g.P * g.Q;
  const int64_t tile = tile_rows(g.RSCg * static_cast<int64_t>(sizeof(C)));
  // Threads own whole images: col2im of neighbouring output pixels adds into shared input pixels.
  for_parts(g.N, part_count(g.N, 1, g.macs()), [&](int64_t, int64_t n0, int64_t n1) {
    std::vector<C> acc_buf, gyc, colg;
    C* acc;
    if constexpr (is_native<T>) {
      acc = gx + n0 * img_in;
      if (!g.pointwise) std::fill_n(acc, (n1 - n0) * img_in, C(0));
    } else {
      acc_buf.assign(static_cast<size_t>((n1 - n0) * img_in), C(0));
      acc = acc_buf.data();
    }
    for (int64_t m0 = n0 * img_out; m0 < n1 * img_out; m0 += tile) {
      const int64_t m1 = std::min(n1 * img_out, m0 + tile), rows = m1 - m0;
      const C* gyp = gy_rows<T>(gy, g.K, m0, m1, gyc);
      for (int64_t grp = 0; grp < g.G; ++grp) {
        ConstMatMap<C> GY(gyp + grp * g.Kg, rows, g.Kg, Eigen::OuterStride<>(g.K));
        ConstMatMap<C> B(wc + grp * g.Kg * g.RSCg, g.Kg, g.RSCg, Eigen::OuterStride<>(g.RSCg));
        if (g.pointwise) {
          MatMap<C> O(acc + (m0 - n0 * img_out) * g.C, rows, g.C, Eigen::OuterStride<>(g.C));
          O.noalias() = GY * B;
        } else {
          colg.resize(static_cast<size_t>(rows * g.RSCg));
          MatMap<C> O(colg.data(), rows, g.RSCg, Eigen::OuterStride<>(g.RSCg));
          O.noalias() = GY * B;
          col2im_add(g, grp, m0, m1, colg.data(), acc, n0);
        }
      }
    }
    if constexpr (!is_native<T>) narrow(acc, gx + n0 * img_in, (n1 - n0) * img_in);
  });
}

template <class T>
void wgrad_typed(const Tensor& gyt, const Tensor& xt, const Tensor& gwt, const ConvParams& prm) {
  using C = compute_t<T>;
  const Geometry g = geometry(xt, gwt, gyt, prm);
  const T* gy = gyt.data<T>();
  const int64_t tile = tile_rows(g.RSCg * static_cast<int64_t>(sizeof(C)));
  const int64_t wsize = g.K * g.RSCg;
  // One partial gradient per range, summed at the end.
  const int64_t parts = part_count(g.rows(), kMinRowsPerThread, g.macs());
  std::vector<std::vector<C>> partial(static_cast<size_t>(parts));
  with_input<T>(g, xt, [&](const auto* x) {
    for_parts(g.rows(), parts, [&](int64_t part, int64_t r0, int64_t r1) {
      std::vector<C>& acc = partial[static_cast<size_t>(part)];
      acc.assign(static_cast<size_t>(wsize), C(0));
      std::vector<C> gyc, col;
      for (int64_t m0 = r0; m0 < r1; m0 += tile) {
        const int64_t m1 = std::min(r1, m0 + tile), rows = m1 - m0;
        const C* gyp = gy_rows<T>(gy, g.K, m0, m1, gyc);
        for (int64_t grp = 0; grp < g.G; ++grp) {
          const C* a = columns(g, x, grp, m0, m1, col);
          ConstMatMap<C> GY(gyp + grp * g.Kg, rows, g.Kg, Eigen::OuterStride<>(g.K));
          ConstMatMap<C> A(a, rows, g.RSCg, Eigen::OuterStride<>(g.RSCg));
          MatMap<C> GW(acc.data() + grp * g.Kg * g.RSCg, g.Kg, g.RSCg, Eigen::OuterStride<>(g.RSCg));
          GW.noalias() += GY.transpose() * A;
        }
      }
    });
  });
  for (size_t i = 1; i < partial.size(); ++i)
    for (int64_t k = 0; k < wsize; ++k) partial[0][k] += partial[i][k];
  narrow(partial[0].data(), gwt.data<T>(), wsize);
}

void conv2d_forward_cpu(const Tensor& x, const Tensor& w, const Tensor& y, const ConvParams& p) {
  visit_floating(y.dtype(), "conv2d", [&]<typename T>() { forward_typed<T>(x, w, y, p); });
}
void conv2d_dgrad_cpu(const Tensor& gy, const Tensor& w, const Tensor& gx, const ConvParams& p) {
  visit_floating(gx.dtype(), "conv2d (input gradient)", [&]<typename T>() { dgrad_typed<T>(gy, w, gx, p); });
}
void conv2d_wgrad_cpu(const Tensor& gy, const Tensor& x, const Tensor& gw, const ConvParams& p) {
  visit_floating(gw.dtype(), "conv2d (weight gradient)", [&]<typename T>() { wgrad_typed<T>(gy, x, gw, p); });
}

}  // namespace

HG_REGISTER_KERNEL(conv2d_forward_stub, cpu, conv2d_forward_cpu);
HG_REGISTER_KERNEL(conv2d_dgrad_stub, cpu, conv2d_dgrad_cpu);
HG_REGISTER_KERNEL(conv2d_wgrad_stub, cpu, conv2d_wgrad_cpu);

}  // namespace hg::cpu
