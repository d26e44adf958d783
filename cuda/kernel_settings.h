// Which kernels the cuda device's matrix products and convolutions run, chosen per process:
//   - f32 matmul/conv precision: `strict` (SIMT f32 FMA, the reference path), `accurate`
//     (3xTF32 on tensor cores: big*big + big*small + small*big, f32-level error; the
//     default), `fast` (one tf32 mma: 10-bit mantissa inputs, ~3e-4 relative error).
//     f16/bf16 always run on tensor cores with f32 accumulation; f64 always runs SIMT.
//   - provider of GEMM and convolution: `halfgrad` (our kernels, the default) or `vendor`
//     (cuBLAS / cuDNN, references for A/B runs; native builds only, never the emulation).
//   - the Hopper GEMM (cuda/hopper_gemm.h): on an sm_90 GPU, f16/bf16 matmul and linear run
//     on the wgmma/TMA kernel when it applies (default on); off forces the mma.sync kernel.
//   - forcing knobs for the choices the heuristics make from the shape and the SM count
//     (cuda/gemm_plan.h), so tests and the self-check reach every path a big GPU takes at
//     small sizes: the Hopper GEMM's tile width (auto, 128 or 256), the mma.sync engine's
//     tile (auto, large 128x128, small 64x64, narrow 64x32) and its split-K factor (auto, or
//     a fixed count >= 1; capped at the number of k-steps). A forced choice the kernel
//     cannot take (a 256 tile for N < 256) falls back to what auto picks.
// Environment variables set the initial values (read once, at first use):
//   HG_F32_MATMUL=strict|accurate|fast   HG_GEMM=halfgrad|vendor   HG_CONV=halfgrad|vendor
//   HG_HOPPER_GEMM=on|off   HG_HOPPER_TILE_N=auto|128|256   HG_MMA_TILE=auto|large|small|narrow
//   HG_SPLIT_K=auto|<count>
// A bad value raises hg::Error naming the valid ones. The CPU backend ignores these
// settings (it has no tf32): its f32 products are always strict f32.
#pragma once
#include <string>
#include <string_view>

namespace hg::cuda {

enum class F32Matmul { strict, accurate, fast };
enum class Provider { halfgrad, vendor };
enum class MmaTileChoice { automatic, large, small, narrow };

F32Matmul f32_matmul();
void set_f32_matmul(F32Matmul mode);
Provider gemm_provider();
void set_gemm_provider(Provider p);
Provider conv_provider();
void set_conv_provider(Provider p);
bool hopper_gemm_enabled();
void set_hopper_gemm_enabled(bool on);
// 0 = auto, else 128 or 256.
int forced_hopper_tile_n();
void set_forced_hopper_tile_n(int n);
MmaTileChoice forced_mma_tile();
void set_forced_mma_tile(MmaTileChoice t);
// 0 = auto (the rule of cuda/gemm_plan.h), else the split count (>= 1; 1 = never split).
int forced_split_k();
void set_forced_split_k(int split);

// "strict" / "accurate" / "fast", "halfgrad" / "vendor", and their inverses (hg::Error on
// anything else, naming `what` and the valid spellings).
std::string_view to_string(F32Matmul mode);
std::string_view to_string(Provider p);
F32Matmul parse_f32_matmul(std::string_view s, std::string_view what = "f32 matmul precision");
Provider parse_provider(std::string_view s, std::string_view what = "kernel provider");
std::string_view to_string(MmaTileChoice t);
MmaTileChoice parse_mma_tile(std::string_view s, std::string_view what = "mma tile");
// "auto" -> 0, "128" / "256" -> themselves (hg::Error otherwise).
int parse_hopper_tile_n(std::string_view s, std::string_view what = "Hopper tile width");
// "auto" -> 0, a count from 1 to 256 -> itself (hg::Error otherwise).
int parse_split_k(std::string_view s, std::string_view what = "split-K count");

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
using ScopedHopperTileN = ScopedSetting<int, forced_hopper_tile_n, set_forced_hopper_tile_n>;
using ScopedMmaTile = ScopedSetting<MmaTileChoice, forced_mma_tile, set_forced_mma_tile>;
using ScopedSplitK = ScopedSetting<int, forced_split_k, set_forced_split_k>;

}  // namespace hg::cuda
