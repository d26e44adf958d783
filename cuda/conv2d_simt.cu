// conv2d forward, input gradient and weight gradient on the cuda device as implicit GEMMs
// on the tiled SIMT kernel (cuda/simt_gemm.h), one batch entry per group; operands are
// gathered through cuda/conv2d_indexing.h, accumulated in f32 (f64 for f64), rounded once.
// The f64 and strict-f32 paths of cuda/conv2d_implicit_gemm.cu, which registers the stubs.
#include "cuda/conv2d_simt.h"

#include "cuda/contiguous_check.h"
#include "cuda/conv2d_indexing.h"
#include "cuda/device_types.h"
#include "cuda/simt_gemm.h"
#include "ops/conv2d_kernels.h"

namespace hg::cuda {
namespace {

// The im2col matrix of x for group z, [N*P*Q, R*S*Cg] (forward A, weight-gradient B).
template <class T>
struct Im2col {
  const T* x;
  ConvShape s;
  HG_DEVICE compute_t<T> operator()(int64_t z, int64_t m, int64_t kk) const {
    const int64_t off = im2col_offset(s, z, m, kk);
    return off < 0 ? compute_t<T>(0) : dev_load(x[off]);
  }
};

// Group z's weights transposed, [R*S*Cg, Kg] (forward B).
template <class T>
struct WeightColumns {
  const T* w;
  int64_t Kg, RSCg;
  HG_DEVICE compute_t<T> operator()(int64_t z, int64_t kk, int64_t k) const { return dev_load(w[(z * Kg + k) * RSCg + kk]); }
};

// The output-gradient entries each input pixel gathers, [N*H*W, R*S*Kg] (input-gradient A).
template <class T>
struct GatherGrad {
  const T* gy;
  ConvShape s;
  HG_DEVICE compute_t<T> operator()(int64_t z, int64_t m, int64_t j) const {
    const int64_t off = dgrad_gather_offset(s, z, m, j);
    return off < 0 ? compute_t<T>(0) : dev_load(gy[off]);
  }
};

// Group z's weights as [R*S*Kg, Cg] (input-gradient B).
template <class T>
struct WeightRows {
  const T* w;
  ConvShape s;
  HG_DEVICE compute_t<T> operator()(int64_t z, int64_t j, int64_t c) const { return dev_load(w[dgrad_weight_offset(s, z, j, c)]); }
};

// Group z's output-gradient channels transposed, [Kg, N*P*Q] (weight-gradient A).
template <class T>
struct GradChannels {
  const T* gy;
  int64_t K, Kg;
  HG_DEVICE compute_t<T> operator()(int64_t z, int64_t k, int64_t m) const { return dev_load(gy[m * K + z * Kg + k]); }
};

// Rounds element (row, col) of group z's result into its place: rows are output pixels of y
// or gx (group z's channels start at z * group_offset), or filters of gw (group z's block).
// The forward's (and the input gradient's) bias, one per channel, joins the sum before
// that one rounding.
template <class T>
struct GroupedOut {
  T* p;
  int64_t row_stride, group_offset;
  const T* bias = nullptr;
  HG_DEVICE void operator()(int64_t z, int64_t row, int64_t col, compute_t<T> v) const {
    if (bias) v += dev_load(bias[z * group_offset + col]);
    p[row * row_stride + z * group_offset + col] = dev_store<T>(v);
  }
};

}  // namespace

ConvShape conv_shape(const Tensor& x, const Tensor& w, const Tensor& y, const Conv2dOptions& p) {
  check_contiguous("conv2d", {&x, &w, &y});
  ConvShape s{};
  s.N = x.size(0), s.H = x.size(1), s.W = x.size(2), s.C = x.size(3);
  s.K = w.size(0), s.R = w.size(1), s.S = w.size(2), s.Cg = w.size(3);
  s.P = y.size(1), s.Q = y.size(2), s.G = p.groups, s.Kg = s.K / s.G;
  s.sh = p.stride[0], s.sw = p.stride[1], s.ph = p.padding[0], s.pw = p.padding[1];
  s.dh = p.dilation[0], s.dw = p.dilation[1];
  // The tensor-core sources divide column indices and padded positions in 32 bits
  // (cuda/conv2d_sources.h).
  constexpr int64_t kMax = int64_t{1} << 31;
  HG_CHECK(s.R * s.S * s.Cg < kMax && s.R * s.S * s.Kg < kMax && s.H + s.ph < kMax && s.W + s.pw < kMax &&
               s.sh < kMax && s.sw < kMax,
           "conv2d on ", y.device().str(), ": filters of R*S*C/groups = ", s.R * s.S * s.Cg, " and R*S*K/groups = ",
           s.R * s.S * s.Kg, " elements, input ", s.H, "x", s.W, " with padding ", s.ph, ",", s.pw,
           ": each must be below 2^31");
  return s;
}

void conv2d_forward_simt(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dOptions& p) {
  const ConvShape s = conv_shape(x, w, y, p);
  const int64_t RSCg = s.R * s.S * s.Cg;
  visit_floating(y.dtype(), "conv2d", [&]<typename T>() {
    simt_gemm<compute_t<T>>(y.device().index, "conv2d_forward_simt", s.G, s.N * s.P * s.Q, s.Kg, RSCg,
                            Im2col<T>{x.data<T>(), s}, WeightColumns<T>{w.data<T>(), s.Kg, RSCg},
                            GroupedOut<T>{y.data<T>(), s.K, s.Kg, bias.defined() ? bias.data<T>() : nullptr});
  });
}

// Every input pixel is a row of the GEMM, so positions no output reads get a sum of zeros
// (plus conv_transpose2d's bias, one per input channel, in the sum before the rounding).
void conv2d_dgrad_simt(const Tensor& gy, const Tensor& w, const Tensor& bias, const Tensor& gx, const Conv2dOptions& p) {
  const ConvShape s = conv_shape(gx, w, gy, p);
  visit_floating(gx.dtype(), "conv2d (input gradient)", [&]<typename T>() {
    simt_gemm<compute_t<T>>(gx.device().index, "conv2d_dgrad_simt", s.G, s.N * s.H * s.W, s.Cg, s.R * s.S * s.Kg,
                            GatherGrad<T>{gy.data<T>(), s}, WeightRows<T>{w.data<T>(), s},
                            GroupedOut<T>{gx.data<T>(), s.C, s.Cg, bias.defined() ? bias.data<T>() : nullptr});
  });
}

void conv2d_wgrad_simt(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dOptions& p) {
  const ConvShape s = conv_shape(x, gw, gy, p);
  const int64_t RSCg = s.R * s.S * s.Cg;
  visit_floating(gw.dtype(), "conv2d (weight gradient)", [&]<typename T>() {
    simt_gemm<compute_t<T>>(gw.device().index, "conv2d_wgrad_simt", s.G, s.Kg, RSCg, s.N * s.P * s.Q,
                            GradChannels<T>{gy.data<T>(), s.K, s.Kg}, Im2col<T>{x.data<T>(), s},
                            GroupedOut<T>{gw.data<T>(), RSCg, s.Kg * RSCg});
  });
}

}  // namespace hg::cuda
