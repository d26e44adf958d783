// The choice of micro-kernel per operand format on the current path, and the safety net:
// the AVX-512 and AMX kernels have run on one CPU model each (CI machines have neither), so
// on first use in a process each one is compared with the AVX2 kernel on a small product
// and, if it disagrees, replaced by it with one warning.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <vector>

#include "framework/cpu/isa.h"
#include "ops/cpu/gemm/sources.h"

namespace hg::cpu::gemm {
namespace {

std::atomic<const Kernel<float>*> g_override[3];
// The last verdict per operand format and tile width (14x32 or 8x48), read without the lock:
// candidate -> kernel to use.
std::atomic<const Kernel<float>*> g_last_candidate[6], g_last_use[6];
std::atomic<int> g_failures{0};

// First-use verdicts: kernel -> passed. Few kernels exist, so a short list.
struct Verdict {
  const Kernel<float>* k;
  bool ok;
};
std::mutex g_mutex;
std::vector<Verdict> g_verdicts;

const Kernel<float>& candidate(Operands ops) {
  if (const Kernel<float>* k = g_override[static_cast<int>(ops)].load()) return *k;
  switch (isa()) {
    case Isa::amx:
      if (ops == Operands::bf16) return amx_bf16_kernel();
      if (ops == Operands::f16) return amx_f16_kernel();
      return avx512_kernel();
    case Isa::avx512:
      if (ops == Operands::bf16 && bf16_pairs_pay()) return avx512_bf16_kernel();
      return avx512_kernel();
    case Isa::avx2: break;
  }
  return avx2_kernel();
}

// Deterministic test operands of format T: mostly O(1) values; row 0 large enough that
// an f16 output overflows to inf; row 1 all tiny (f16 and f32 subnormals; bf16 near the
// bottom of AMX's exact range), so a kernel that flushes them misses its whole sum; and
// in rows from 32 on (AMX's second panel) every 97th column below AMX's exact range (those
// tiles take the exact fallback, the first panel's run on the tiles).
template <class T>
std::vector<T> operand(int64_t rows, int64_t cols, uint32_t seed) {
  const double tiny = std::is_same_v<T, half> ? 0x1p-20 : std::is_same_v<T, bfloat16> ? 0x1p-50 : 0x1p-130;
  std::vector<T> v(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < cols; ++k) {
      seed = seed * 1664525u + 1013904223u;
      const double u = static_cast<double>(seed >> 8) / 16777216.0 - 0.5;
      double x = 4.0 * u;
      if (i == 0) x = 300.0;
      if (i == 1) x = tiny * std::round(8.0 * u);
      if (i >= 32 && k % 97 == 5) x = std::is_same_v<T, half> ? 0x1p-24 : 0x1p-70;
      v[static_cast<size_t>(i * cols + k)] = store<T>(x);
    }
  return v;
}

template <class T>
bool check_with(const Kernel<float>& k) {
  constexpr int64_t M = 37, N = 45, K = 300;  // odd; past one k block; a half column panel
  const std::vector<T> a = operand<T>(M, K, 7), b = operand<T>(N, K, 11);
  const Matrix<T> sa{a.data(), K, 1}, sb{b.data(), K, 1};
  std::vector<float> want(M * N), got(M * N);
  std::vector<half> want16(M * N), got16(M * N);
  auto run_into = [&](void* out, DType dt, const Kernel<float>& kn) {
    run<float>(M, N, K, sa, sb, Output{out, dt, 1, M, 0, 0, N, 1}, Epilogue<float>{}, 1, &kn);
  };
  run_into(want.data(), DType::f32, avx2_kernel());
  run_into(got.data(), DType::f32, k);
  run_into(want16.data(), DType::f16, avx2_kernel());
  run_into(got16.data(), DType::f16, k);
  const double bound = (k.terms * K + 2) * 0x1p-24 * 2.0;  // each side's chain, relative to sum |a||b|
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double mag = 0;
      for (int64_t q = 0; q < K; ++q)
        mag += std::fabs(static_cast<double>(load(a[i * K + q])) * static_cast<double>(load(b[j * K + q])));
      const double x = want[i * N + j], y = got[i * N + j];
      const float x16 = static_cast<float>(want16[i * N + j]), y16 = static_cast<float>(got16[i * N + j]);
      const bool inf_agrees = std::isinf(x16) == std::isinf(y16) && (!std::isinf(x16) || x16 == y16);
      if (!(std::fabs(x - y) <= bound * mag) || !inf_agrees) {
        std::fprintf(stderr,
                     "halfgrad: the %s GEMM kernel disagrees with the AVX2 kernel in its self-check at (%lld, %lld): "
                     "%.9g (f16 %g) vs %.9g (f16 %g); using the AVX2 kernel instead\n",
                     k.name, static_cast<long long>(i), static_cast<long long>(j), y, y16, x, x16);
        return false;
      }
    }
  return true;
}

}  // namespace

// The bf16 pair kernel gives the same bits as the f32 kernels; it is chosen only where it is
// faster: where vdpbf16ps does at least 1.3x the multiply-adds of the f32 FMA (the probe's
// one measurement per process; Sapphire Rapids issues it on one port, half the FMA rate, and loses).
bool bf16_pairs_pay() {
  static const bool pays = features().avx512_bf16 && avx512_bf16_dot_vs_fma() >= 1.3;
  return pays;
}

bool self_check(const Kernel<float>& k, Operands ops) {
  switch (ops) {
    case Operands::f16: return check_with<half>(k);
    case Operands::bf16: return check_with<bfloat16>(k);
    case Operands::f32: break;
  }
  return check_with<float>(k);
}

int self_check_failures() { return g_failures.load(); }

bool wide_tile_pays(int64_t n) {
  static const bool intel = features().intel;
  return intel && n >= 96;
}

const Kernel<float>& kernel_for(Operands ops, int64_t n) {
  const Kernel<float>* cand = &candidate(ops);
  if (cand == &avx512_kernel() && wide_tile_pays(n)) cand = &avx512_wide_kernel();
  const Kernel<float>& k = *cand;
  if (&k == &avx2_kernel()) return k;
  const int slot = 2 * static_cast<int>(ops) + (&k == &avx512_wide_kernel() ? 1 : 0);
  if (g_last_candidate[slot].load(std::memory_order_acquire) == &k) return *g_last_use[slot].load();
  std::lock_guard<std::mutex> lock(g_mutex);
  bool known = false, ok = false;
  for (const Verdict& v : g_verdicts)
    if (v.k == &k) known = true, ok = v.ok;
  if (!known) {
    ok = self_check(k, ops);
    if (!ok) ++g_failures;
    g_verdicts.push_back({&k, ok});
  }
  const Kernel<float>& use = ok ? k : avx2_kernel();
  g_last_use[slot].store(&use);
  g_last_candidate[slot].store(&k, std::memory_order_release);
  return use;
}

bool outer_self_check(const OuterKernel<float>& k) {
  // Two k blocks (the second continuing the first's sums), ordinary values, f32 subnormals
  // (a kernel run with DAZ/FTZ would flush them) and an overflow to inf.
  const int64_t mr = k.mr, nr = k.nr, kc = 37, ldc = nr + 3;
  std::vector<float> a(static_cast<size_t>(2 * kc * mr)), b(static_cast<size_t>(2 * kc * nr));
  uint32_t seed = 12345;
  auto next = [&] {
    seed = seed * 1664525u + 1013904223u;
    return static_cast<float>(static_cast<double>(seed >> 8) / 16777216.0 - 0.5);
  };
  for (float& x : a) x = 4 * next();
  for (float& x : b) x = 4 * next();
  for (int64_t q = 0; q < 2 * kc; ++q) a[static_cast<size_t>(q * mr + 1)] = 0x1p-140f * std::round(64 * next());
  a[0] = 3e38f, b[0] = 4.0f;
  std::vector<float> want(static_cast<size_t>(mr * ldc), 7.0f), got = want;
  for (int blk = 0; blk < 2; ++blk) {
    outer_tile<float>(mr, nr, kc, a.data() + blk * kc * mr, b.data() + blk * kc * nr, want.data(), ldc, blk == 0);
    k.fn(kc, a.data() + blk * kc * mr, b.data() + blk * kc * nr, got.data(), ldc, blk == 0);
  }
  for (size_t e = 0; e < want.size(); ++e)
    if (std::memcmp(&want[e], &got[e], sizeof(float)) != 0) {
      std::fprintf(stderr,
                   "halfgrad: the %s kernel differs from the portable chain in its self-check at (%lld, %lld): "
                   "%.9g vs %.9g; using the AVX2 outer kernels instead\n",
                   k.name, static_cast<long long>(static_cast<int64_t>(e) / ldc),
                   static_cast<long long>(static_cast<int64_t>(e) % ldc), got[e], want[e]);
      return false;
    }
  return true;
}

namespace {

const OuterKernel<float>& least_padding(const std::vector<const OuterKernel<float>*>& list, int64_t M, int64_t N) {
  const OuterKernel<float>* best = list.front();
  int64_t best_area = -1;
  for (const OuterKernel<float>* k : list) {  // widest last: it wins a tie
    const int64_t area = ceil_div(M, k->mr) * k->mr * ceil_div(N, k->nr) * k->nr;
    if (best_area < 0 || area <= best_area) best = k, best_area = area;
  }
  return *best;
}

std::vector<std::pair<const OuterKernel<float>*, bool>> g_outer_verdicts;

}  // namespace

const OuterKernel<float>& outer_kernel_for(int64_t M, int64_t N) {
  if (static_cast<int>(isa()) < static_cast<int>(Isa::avx512)) return least_padding(avx2_outer_kernels(), M, N);
  const OuterKernel<float>& k = least_padding(avx512_outer_kernels(), M, N);
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    auto it = std::find_if(g_outer_verdicts.begin(), g_outer_verdicts.end(), [&](auto& v) { return v.first == &k; });
    if (it == g_outer_verdicts.end()) {
      const bool ok = outer_self_check(k);
      if (!ok) ++g_failures;
      it = g_outer_verdicts.insert(g_outer_verdicts.end(), {&k, ok});
    }
    if (it->second) return k;
  }
  return least_padding(avx2_outer_kernels(), M, N);
}

OverrideKernel::OverrideKernel(Operands ops, const Kernel<float>& k) : ops_(ops) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::erase_if(g_verdicts, [&](const Verdict& v) { return v.k == &k; });
  for (int w = 0; w < 2; ++w) g_last_candidate[2 * static_cast<int>(ops) + w].store(nullptr);
  g_override[static_cast<int>(ops)].store(&k);
}

OverrideKernel::~OverrideKernel() {
  std::lock_guard<std::mutex> lock(g_mutex);
  for (int w = 0; w < 2; ++w) g_last_candidate[2 * static_cast<int>(ops_) + w].store(nullptr);
  g_override[static_cast<int>(ops_)].store(nullptr);
}

}  // namespace hg::cpu::gemm
