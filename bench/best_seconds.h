// The benchmarks' timer: the best wall time of a call over several runs. The best, not the
// median: on a shared machine other processes only ever add time.
#pragma once
#include <algorithm>
#include <chrono>

namespace hg::bench {

// Best time of f after 2 warm-up calls: at least 5 runs, more (up to max_runs) until
// min_seconds have passed.
template <class F>
double best_seconds(F&& f, double min_seconds = 0.3, int max_runs = 50) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 2; ++i) f();
  double best = 1e30;
  int runs = 0;
  const auto start = clock::now();
  while (runs < 5 || (runs < max_runs && std::chrono::duration<double>(clock::now() - start).count() < min_seconds)) {
    const auto t0 = clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(clock::now() - t0).count());
    ++runs;
  }
  return best;
}

}  // namespace hg::bench
