// A step is compared only where both runs applied it and both ratios are finite: a
// skipped step moved nothing, and a zero-norm weight has no ratio.
#include "bench/segbench/update_compare.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace hg::segbench {

const RunResult* update_reference(const Report& report, const RunResult& run) {
  const std::string name = run.optimizer_name == "SGD" ? "fp32-sgd" : "fp32";
  for (const RunResult& r : report.runs)
    if (r.precision == name && &r != &run) return &r;
  return nullptr;
}

const UpdateSample* update_at(const RunResult& run, int64_t step) {
  for (const UpdateSample& u : run.updates)
    if (u.step == step && !u.skipped && std::isfinite(u.ratio)) return &u;
  return nullptr;
}

UpdateJump update_jump(const RunResult& run, const RunResult& ref, int64_t until) {
  UpdateJump j;
  for (const UpdateSample& u : run.updates) {
    if (u.step >= until) break;
    const UpdateSample* a = update_at(run, u.step);
    const UpdateSample* b = update_at(ref, u.step);
    if (!a || !b || b->ratio <= 0) continue;
    const double f = a->ratio / b->ratio;
    if (f > j.max_factor) {
      j.max_factor = f;
      j.largest = a;
    }
    if (f < kOversizedFactor) continue;
    if (j.first < 0) j.first = u.step;
    j.last = u.step;
    ++j.count;
    if (f > j.factor) {
      j.factor = f;
      j.worst = a;
      j.ref = b;
    }
  }
  return j;
}

}  // namespace hg::segbench
