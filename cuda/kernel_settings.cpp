// The process-wide kernel choices of cuda/kernel_settings.h, initialised from the
// environment on first use. Compiled in every build (CPU-only too), so code that sets them
// needs no #ifdef.
#include "cuda/kernel_settings.h"

#include <atomic>
#include <cstdlib>

#include "framework/error.h"

namespace hg::cuda {
namespace {

template <class T>
T from_env(const char* var, T fallback, T (*parse)(std::string_view, std::string_view)) {
  const char* v = std::getenv(var);
  return v && *v ? parse(v, var) : fallback;
}

bool parse_on_off(std::string_view s, std::string_view what) {
  if (s == "on" || s == "1") return true;
  if (s == "off" || s == "0") return false;
  throw Error(std::string(what) + ": unknown value '" + std::string(s) + "'; valid: on (default), off");
}

struct Settings {
  std::atomic<F32Matmul> f32{from_env("HG_F32_MATMUL", F32Matmul::accurate, parse_f32_matmul)};
  std::atomic<Provider> gemm{from_env("HG_GEMM", Provider::halfgrad, parse_provider)};
  std::atomic<Provider> conv{from_env("HG_CONV", Provider::halfgrad, parse_provider)};
  std::atomic<bool> hopper{from_env("HG_HOPPER_GEMM", true, parse_on_off)};
  std::atomic<int> hopper_tile_n{from_env("HG_HOPPER_TILE_N", 0, parse_hopper_tile_n)};
  std::atomic<MmaTileChoice> mma_tile{from_env("HG_MMA_TILE", MmaTileChoice::automatic, parse_mma_tile)};
  std::atomic<int> split_k{from_env("HG_SPLIT_K", 0, parse_split_k)};
};

Settings& settings() {
  static Settings s;
  return s;
}

}  // namespace

F32Matmul f32_matmul() { return settings().f32.load(std::memory_order_relaxed); }
void set_f32_matmul(F32Matmul mode) { settings().f32.store(mode, std::memory_order_relaxed); }
Provider gemm_provider() { return settings().gemm.load(std::memory_order_relaxed); }
void set_gemm_provider(Provider p) { settings().gemm.store(p, std::memory_order_relaxed); }
Provider conv_provider() { return settings().conv.load(std::memory_order_relaxed); }
void set_conv_provider(Provider p) { settings().conv.store(p, std::memory_order_relaxed); }
bool hopper_gemm_enabled() { return settings().hopper.load(std::memory_order_relaxed); }
void set_hopper_gemm_enabled(bool on) { settings().hopper.store(on, std::memory_order_relaxed); }

int forced_hopper_tile_n() { return settings().hopper_tile_n.load(std::memory_order_relaxed); }
void set_forced_hopper_tile_n(int n) {
  HG_CHECK(n == 0 || n == 128 || n == 256, "Hopper tile width: ", n, " is not valid; valid: 0 (auto), 128, 256");
  settings().hopper_tile_n.store(n, std::memory_order_relaxed);
}
MmaTileChoice forced_mma_tile() { return settings().mma_tile.load(std::memory_order_relaxed); }
void set_forced_mma_tile(MmaTileChoice t) { settings().mma_tile.store(t, std::memory_order_relaxed); }
int forced_split_k() { return settings().split_k.load(std::memory_order_relaxed); }
void set_forced_split_k(int split) {
  HG_CHECK(split >= 0 && split <= 256, "split-K count: ", split, " is not valid; valid: 0 (auto) or 1 to 256");
  settings().split_k.store(split, std::memory_order_relaxed);
}

std::string_view to_string(MmaTileChoice t) {
  switch (t) {
    case MmaTileChoice::automatic: return "auto";
    case MmaTileChoice::large: return "large";
    case MmaTileChoice::small: return "small";
    case MmaTileChoice::narrow: return "narrow";
  }
  return "?";
}

MmaTileChoice parse_mma_tile(std::string_view s, std::string_view what) {
  for (MmaTileChoice t : {MmaTileChoice::automatic, MmaTileChoice::large, MmaTileChoice::small, MmaTileChoice::narrow})
    if (s == to_string(t)) return t;
  throw Error(std::string(what) + ": unknown value '" + std::string(s) +
              "'; valid: auto (default), large (128x128), small (64x64), narrow (64x32)");
}

int parse_hopper_tile_n(std::string_view s, std::string_view what) {
  if (s == "auto") return 0;
  if (s == "128") return 128;
  if (s == "256") return 256;
  throw Error(std::string(what) + ": unknown value '" + std::string(s) + "'; valid: auto (default), 128, 256");
}

int parse_split_k(std::string_view s, std::string_view what) {
  if (s == "auto") return 0;
  int v = 0;
  bool digits = !s.empty() && s.size() <= 3;
  for (char c : s) {
    if (c < '0' || c > '9') digits = false;
    else v = v * 10 + (c - '0');
  }
  if (digits && v >= 1 && v <= 256) return v;
  throw Error(std::string(what) + ": unknown value '" + std::string(s) + "'; valid: auto (default) or a count from 1 to 256");
}

std::string_view to_string(F32Matmul mode) {
  switch (mode) {
    case F32Matmul::strict: return "strict";
    case F32Matmul::accurate: return "accurate";
    case F32Matmul::fast: return "fast";
  }
  return "?";
}

std::string_view to_string(Provider p) { return p == Provider::vendor ? "vendor" : "halfgrad"; }

F32Matmul parse_f32_matmul(std::string_view s, std::string_view what) {
  for (F32Matmul m : {F32Matmul::strict, F32Matmul::accurate, F32Matmul::fast})
    if (s == to_string(m)) return m;
  throw Error(std::string(what) + ": unknown value '" + std::string(s) +
              "'; valid: strict (SIMT f32), accurate (3xTF32, default), fast (tf32)");
}

Provider parse_provider(std::string_view s, std::string_view what) {
  for (Provider p : {Provider::halfgrad, Provider::vendor})
    if (s == to_string(p)) return p;
  throw Error(std::string(what) + ": unknown value '" + std::string(s) +
              "'; valid: halfgrad (our kernels, default), vendor (cuBLAS/cuDNN references, native builds)");
}

}  // namespace hg::cuda
