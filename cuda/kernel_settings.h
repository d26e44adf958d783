// Which kernels the cuda device's matrix products and convolutions run, chosen per process:
//   - f32 matmul/conv precision: `strict` (SIMT f32 FMA, the reference path), `accurate`
//     (3xTF32 on tensor cores: big*big + big*small + small*big, f32-level error; the
//     default), `fast` (one tf32 mma: 10-bit mantissa inputs, ~3e-4 relative error).
//     f16/bf16 always run on tensor cores with f32 accumulation; f64 always runs SIMT.
//   - provider of GEMM and convolution: `halfgrad` (our kernels, the default) or `vendor`
//     (cuBLAS / cuDNN, references for A/B runs; native builds only, never the emulation).
//   - the Hopper GEMM (cuda/hopper_gemm.h): on an sm_90 GPU, f16/bf16 matmul and linear run
//     on the wgmma/TMA kernel when it applies (default on); off forces the mma.sync kernel.
// Environment variables set the initial values (read once, at first use):
//   HG_F32_MATMUL=strict|accurate|fast   HG_GEMM=halfgrad|vendor   HG_CONV=halfgrad|vendor
//   HG_HOPPER_GEMM=on|off
// A bad value raises hg::Error naming the valid ones. The CPU backend ignores these
// settings (it has no tf32): its f32 products are always strict f32.
#pragma once
#include <string>
#include <string_view>

namespace hg::cuda {

enum class F32Matmul { strict, accurate, fast };
enum class Provider { halfgrad, vendor };

F32Matmul f32_matmul();
void set_f32_matmul(F32Matmul mode);
Provider gemm_provider();
void set_gemm_provider(Provider p);
Provider conv_provider();
void set_conv_provider(Provider p);
bool hopper_gemm_enabled();
void set_hopper_gemm_enabled(bool on);

// "strict" / "accurate" / "fast", "halfgrad" / "vendor", and their inverses (hg::Error on
// anything else, naming `what` and the valid spellings).
std::string_view to_string(F32Matmul mode);
std::string_view to_string(Provider p);
F32Matmul parse_f32_matmul(std::string_view s, std::string_view what = "f32 matmul precision");
Provider parse_provider(std::string_view s, std::string_view what = "kernel provider");

// Sets a setting for the lifetime of a scope and restores the previous value (tests, A/B).
template <class T, T (*Get)(), void (*Set)(T)>
class ScopedSetting {
 public:
  explicit ScopedSetting(T value) : saved_(Get()) { Set(value); }
  ~ScopedSetting() { Set(saved_); }
  ScopedSetting(const ScopedSetting&) = delete;
  ScopedSetting& operator=(const ScopedSetting&) = delete;

 private:
  T saved_;
};
using ScopedF32Matmul = ScopedSetting<F32Matmul, f32_matmul, set_f32_matmul>;
using ScopedGemmProvider = ScopedSetting<Provider, gemm_provider, set_gemm_provider>;
using ScopedConvProvider = ScopedSetting<Provider, conv_provider, set_conv_provider>;
using ScopedHopperGemm = ScopedSetting<bool, hopper_gemm_enabled, set_hopper_gemm_enabled>;

}  // namespace hg::cuda
