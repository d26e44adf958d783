// The machine's f32 FMA peak, against which the op profile rates its convolutions: every
// OpenMP thread runs independent 8-wide FMA chains (enough of them to hide the FMA latency
// on two pipes); the fastest of several bursts per thread counts, summed over threads.
#include <omp.h>

#include "framework/cpu/threads.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <chrono>

#include "bench/segbench/profile_section.h"

namespace hg::segbench {

namespace {

double measure() {
#if defined(__AVX2__) && defined(__FMA__)
  constexpr int kChains = 12, kBursts = 12;
  constexpr int64_t kIters = 100'000;
  double sum = 0;
#pragma omp parallel reduction(+ : sum) num_threads(num_threads())
  {
    __m256 chain[kChains];
    for (int c = 0; c < kChains; ++c) chain[c] = _mm256_set1_ps(1e-3f * static_cast<float>(c + 1));
    const __m256 mul = _mm256_set1_ps(0.9999f), add = _mm256_set1_ps(1e-6f);
    double fastest = 1e9;
    for (int b = 0; b < kBursts; ++b) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t i = 0; i < kIters; ++i)
        for (int c = 0; c < kChains; ++c) chain[c] = _mm256_fmadd_ps(chain[c], mul, add);
      fastest = std::min(fastest, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    // The chains' values feed the result (0 times them), so the loop cannot be dropped.
    float keep = 0;
    for (int c = 0; c < kChains; ++c) keep += _mm256_cvtss_f32(chain[c]);
    sum += 2.0 * 8 * kChains * static_cast<double>(kIters) / fastest * 1e-9 + 0.0 * keep;
  }
  return sum;
#else
  return 0;
#endif
}

}  // namespace

double fma_peak_gflops() {
  static const double peak = measure();
  return peak;
}

}  // namespace hg::segbench
