// conv2d forward, input gradient and weight gradient on the cuda device as implicit GEMMs
// on the tensor-core engine (cuda/mma_gemm.h) with the operand sources of
// cuda/conv2d_sources.h: f16/bf16 on mma.sync with f32 accumulation, f32 as kernel_settings'
// f32_matmul() says (accurate = 3xTF32, fast = tf32, strict = SIMT), f64 on the SIMT GEMM
// (cuda/conv2d_simt.cu). Provider::vendor runs cuDNN instead (cuda/vendor/vendor_ops.h).
// One rounding per output element; conv_transpose2d reaches these through ops/conv2d.cpp.
// claims: tensor cores
#include "cuda/conv2d_simt.h"
#include "cuda/conv2d_sources.h"
#include "cuda/device_types.h"
#include "cuda/mma_dispatch.h"
#include "cuda/mma_sources.h"
#include "cuda/vendor/vendor_ops.h"
#include "ops/copy.h"
#include "ops/elementwise_kernels.h"

namespace hg::cuda {
namespace {

// The bias joins the f32 sum in the epilogue (one rounding). The tensor-core epilogue's
// bias is per column of one group, so a grouped conv with a bias takes the SIMT path; cuDNN
// adds it after its own rounding.
void forward_cuda(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y, const Conv2dOptions& p) {
  if (conv_provider() == Provider::vendor) {
    vendor::conv2d_forward(x, w, y, p);
    if (bias.defined()) copy_(y, run_binary(BinaryOp::add, y, bias));
    return;
  }
  const ConvShape s = conv_shape(x, w, y, p);
  const int64_t RSCg = s.R * s.S * s.Cg;
  visit_floating(y.dtype(), "conv2d", [&]<typename T>() {
    const bool on_tensor_cores = (!bias.defined() || s.G == 1) && with_mma_mode<T>([&](auto mode) {
      mma_gemm_auto<T, decltype(mode)::value>(y.device().index, "conv2d_forward_tc", s.G, s.N * s.P * s.Q, s.Kg, RSCg,
                                              Im2colSource<T, true>{x.data<T>(), s},
                                              FilterSource<T>{w.data<T>(), s.Kg, RSCg},
                                              Epilogue<T>{y.data<T>(), s.Kg, s.K, bias.defined() ? bias.data<T>() : nullptr});
    });
    if (!on_tensor_cores) conv2d_forward_simt(x, w, bias, y, p);
  });
}

// The input gradient's epilogue with conv_transpose2d's bias (one per input channel; group
// z's start at z * Cg) added to the f32 sum before `out`'s one rounding, as Epilogue's is.
template <class T, class Out>
struct GroupBiasEpilogue {
  Out out;
  const T* bias;
  int64_t Cg;
  HG_DEVICE void operator()(int64_t z, int64_t i, int64_t j, float acc) const {
    out(z, i, j, bias ? acc + static_cast<float>(dev_load(bias[z * Cg + j])) : acc);
  }
};

// Every input pixel is a row of the GEMM, so positions no output reads get a sum of zeros
// (plus the bias). With stride > 1 each stride phase runs as its own GEMM over the taps
// that reach it (PhaseGatherSource), instead of sh * sw times the necessary products.
void dgrad_cuda(const Tensor& gy, const Tensor& w, const Tensor& bias, const Tensor& gx, const Conv2dOptions& p) {
  if (conv_provider() == Provider::vendor) {
    vendor::conv2d_dgrad(gy, w, gx, p);
    if (bias.defined()) copy_(gx, run_binary(BinaryOp::add, gx, bias));
    return;
  }
  const ConvShape s = conv_shape(gx, w, gy, p);
  const bool phased = (s.sh > 1 || s.sw > 1) && s.N * s.H * s.W < (int64_t{1} << 31);
  visit_floating(gx.dtype(), "conv2d (input gradient)", [&]<typename T>() {
    const T* bias_p = bias.defined() ? bias.data<T>() : nullptr;
    const bool on_tensor_cores = with_mma_mode<T>([&](auto mode) {
      constexpr MmaMode kMode = decltype(mode)::value;
      if (!phased) {
        mma_gemm_auto<T, kMode>(gx.device().index, "conv2d_dgrad_tc", s.G, s.N * s.H * s.W, s.Cg, s.R * s.S * s.Kg,
                                GatherSource<T>{gy.data<T>(), s}, FilterRowsSource<T>{w.data<T>(), s},
                                GroupBiasEpilogue<T, Epilogue<T>>{Epilogue<T>{gx.data<T>(), s.Cg, s.C}, bias_p, s.Cg});
        return;
      }
      for (int64_t a = 0; a < s.sh; ++a)
        for (int64_t b = 0; b < s.sw; ++b) {
          const PhaseIndex ix{s, dgrad_phase(s, a, b)};
          if (ix.ph.Hp == 0 || ix.ph.Wp == 0) continue;  // an input smaller than the stride
          mma_gemm_auto<T, kMode>(gx.device().index, "conv2d_dgrad_tc", s.G, s.N * ix.ph.Hp * ix.ph.Wp, s.Cg,
                                  ix.ph.Rp * ix.ph.Sp * s.Kg, PhaseGatherSource<T>{gy.data<T>(), ix},
                                  PhaseFilterRowsSource<T>{w.data<T>(), ix},
                                  GroupBiasEpilogue<T, PhaseEpilogue<T>>{PhaseEpilogue<T>{gx.data<T>(), ix}, bias_p, s.Cg});
        }
    });
    if (!on_tensor_cores) conv2d_dgrad_simt(gy, w, bias, gx, p);
  });
}

// gw = gy^T · im2col(x): gy^T's lines are pixels along the filters (M-contiguous), and
// im2col's lines are pixels along (r, s, c) (N-contiguous).
void wgrad_cuda(const Tensor& gy, const Tensor& x, const Tensor& gw, const Conv2dOptions& p) {
  if (conv_provider() == Provider::vendor) return vendor::conv2d_wgrad(gy, x, gw, p);
  const ConvShape s = conv_shape(x, gw, gy, p);
  const int64_t RSCg = s.R * s.S * s.Cg;
  visit_floating(gw.dtype(), "conv2d (weight gradient)", [&]<typename T>() {
    const bool on_tensor_cores = with_mma_mode<T>([&](auto mode) {
      mma_gemm_auto<T, decltype(mode)::value>(gw.device().index, "conv2d_wgrad_tc", s.G, s.Kg, RSCg,
                                              s.N * s.P * s.Q, StridedSource<T, false>{gy.data<T>(), s.Kg, s.K, 1},
                                              Im2colSource<T, false>{x.data<T>(), s},
                                              Epilogue<T>{gw.data<T>(), s.Kg * RSCg, RSCg});
    });
    if (!on_tensor_cores) conv2d_wgrad_simt(gy, x, gw, p);
  });
}

}  // namespace

HG_REGISTER_KERNEL(conv2d_forward_stub, cuda, forward_cuda);
HG_REGISTER_KERNEL(conv2d_dgrad_stub, cuda, dgrad_cuda);
HG_REGISTER_KERNEL(conv2d_wgrad_stub, cuda, wgrad_cuda);

}  // namespace hg::cuda
