// The report's data-parallel line: ranks, global batch, per-rank and total throughput.
#pragma once
#include <string>

#include "bench/segbench/run_result.h"

namespace hg::segbench {
// "1 process" or "2 ranks x batch 4 = global batch 8; fp32 3.1 img/s per rank, 6.2 in all; ...".
std::string scaling_line(const Report& r);
}  // namespace hg::segbench
