// Each run's update/weight ratios against the fp32 run with the same optimizer, step by
// step: what the fp16 diagnosis and the report's update table both read.
#pragma once
#include <cstdint>

#include "bench/segbench/run_result.h"

namespace hg::segbench {

// An update this many times fp32's at the same step is "oversized".
constexpr double kOversizedFactor = 10.0;

// The fp32 run with run's optimizer (fp32 for Adam, fp32-sgd for SGD); null when the
// report has none, or for that run itself.
const RunResult* update_reference(const Report& report, const RunResult& run);

// The sample of `step` (applied, finite ratio), or null.
const UpdateSample* update_at(const RunResult& run, int64_t step);

// The steps below `until` at which run's ratio was at least kOversizedFactor x ref's, and
// the step where the factor was largest (worst null: none oversized).
struct UpdateJump {
  int64_t first = -1, last = -1, count = 0;
  const UpdateSample* worst = nullptr;
  const UpdateSample* ref = nullptr;  // ref's sample at worst's step
  double factor = 0;                  // worst->ratio / ref->ratio
  double max_factor = 0;              // over every compared step, oversized or not (0: none compared)
  const UpdateSample* largest = nullptr;  // run's sample at the step of max_factor
};
UpdateJump update_jump(const RunResult& run, const RunResult& ref, int64_t until);

}  // namespace hg::segbench
