// Two models trained at once in two threads, each with its own NumericsMonitor,
// GradScaler and Fp32Fallback (tests/tsan/two_models.h): both train exactly as they do
// alone, and each monitor reports its own model only. The same workload runs under
// ThreadSanitizer in .ci/tsan.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>

#include "tests/tsan/two_models.h"

using namespace hg;

TEST_CASE("two models train in two threads, each with its own monitor, scaler and fallback", "[threads][amp]") {
  constexpr int kSteps = 24;
  const std::array<test::ThreadRun, 2> runs = test::train_two_models_in_two_threads(kSteps);
  for (int i = 0; i < 2; ++i) {
    const test::ThreadRun& r = runs[static_cast<size_t>(i)];
    INFO("model " << r.model);
    // Before: clip_grad_norm_ refused on steps where the other thread's scaler had
    // scaled a loss, and observer churn crashed the forwards.
    REQUIRE(r.error.empty());
    REQUIRE(r.losses.size() == static_cast<size_t>(kSteps));
    const double first = std::accumulate(r.losses.begin(), r.losses.begin() + 4, 0.0);
    const double last = std::accumulate(r.losses.end() - 4, r.losses.end(), 0.0);
    CHECK(last < 0.5 * first);
    CHECK(r.skipped > 0);  // the first scale (1e9) overflows: the scaler backed off
    CHECK(r.observer_churn > 0);

    // Exactly the run the model makes alone in one thread.
    const test::ThreadRun alone = test::train_model(i, kSteps);
    REQUIRE(alone.error.empty());
    CHECK(alone.losses == r.losses);
    CHECK(alone.weights == r.weights);

    // Its monitor saw its own modules only: each sampled step has one activation
    // record per module of this model.
    CHECK(r.sampled_steps == kSteps / 2);
    int64_t activations = 0;
    for (const amp::NumericsRecord& rec : r.records) {
      if (rec.kind != amp::TensorKind::activation) continue;
      ++activations;
      CHECK(std::count(r.module_paths.begin(), r.module_paths.end(), rec.module) == 1);
    }
    CHECK(activations == r.sampled_steps * static_cast<int64_t>(r.module_paths.size()));
  }
  CHECK(runs[0].module_paths != runs[1].module_paths);
}
