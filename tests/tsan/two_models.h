// Two models trained in two threads at once, each with its own NumericsMonitor,
// GradScaler and Fp32Fallback, while for each a third thread keeps installing and
// removing observers and monitors on it: the workload of the ThreadSanitizer job
// (tests/tsan/tsan_main.cpp) and of the [threads] unit test.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "halfgrad.h"

namespace hg::test {

struct ThreadRun {
  std::string model;                        // "mlp" or "conv"
  std::vector<std::string> module_paths;    // the model's modules (named_modules)
  std::vector<double> losses;               // one per step
  std::vector<amp::NumericsRecord> records;  // what its monitor recorded
  int64_t sampled_steps = 0;                // steps the monitor sampled
  int64_t skipped = 0;                      // steps the scaler skipped
  std::vector<std::string> weights;         // every parameter's value bits, for comparing runs
  int64_t observer_churn = 0;               // installs and removals the churn thread made
  std::string error;                        // an exception the thread caught ("" if none)
};

// Trains model `which` (0: mlp, 1: conv) for `steps` steps in the calling thread.
ThreadRun train_model(int which, int steps);

// Both models at once, in two threads.
std::array<ThreadRun, 2> train_two_models_in_two_threads(int steps);

}  // namespace hg::test
