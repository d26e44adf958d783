// The words of the report: for each run, what went wrong in its precision mode and the
// measured reason (non-finite steps, skipped steps, flushed gradients, lost updates).
#pragma once
#include "bench/segbench/run_result.h"

namespace hg::segbench {

// Fills steps_to_target and diagnosis of every run, comparing with the fp32 run if any.
void diagnose(Report& report);

}  // namespace hg::segbench
