// The ThreadSanitizer job's program (.ci/tsan): two models train in two threads, each
// with its own monitor, scaler and fallback, while observers churn on them. Exit 0 when
// both trained (loss went down) without an error; TSan itself fails the run on a race.
// --planted-race runs a deliberate race instead (the job checks that TSan reports it).
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "tests/tsan/two_models.h"

namespace {
// Two threads write one plain int: the data race the job's self-test expects TSan to report.
int planted_race() {
  int counter = 0;
  std::thread a([&] { for (int i = 0; i < 1000; ++i) ++counter; });
  std::thread b([&] { for (int i = 0; i < 1000; ++i) ++counter; });
  a.join();
  b.join();
  return counter > 0 ? 0 : 1;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "--planted-race") return planted_race();
  const int steps = argc > 1 ? std::atoi(argv[1]) : 16;
  if (steps < 2) {
    std::fprintf(stderr, "usage: %s [steps >= 2]\n", argv[0]);
    return 2;
  }
  int failed = 0;
  for (const hg::test::ThreadRun& r : hg::test::train_two_models_in_two_threads(steps)) {
    if (!r.error.empty()) {
      std::printf("%s: error: %s\n", r.model.c_str(), r.error.c_str());
      ++failed;
      continue;
    }
    const bool learned = r.losses.back() < r.losses.front();
    std::printf("%s: loss %.4g -> %.4g over %d steps, %lld skipped, %zu monitor records, %lld observer changes%s\n",
                r.model.c_str(), r.losses.front(), r.losses.back(), steps, static_cast<long long>(r.skipped),
                r.records.size(), static_cast<long long>(r.observer_churn), learned ? "" : " (did not learn)");
    failed += !learned;
  }
  return failed ? 1 : 0;
}
