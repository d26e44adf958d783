// scaling_line: what data parallelism did in a run, for report.md and report.json
// (images_per_s of a run is per rank: steps x per-rank batch / seconds).
#include "bench/segbench/scaling.h"

#include <cstdio>

namespace hg::segbench {

std::string scaling_line(const Report& r) {
  const int n = r.machine.ranks;
  if (n <= 1) return "1 process (no data parallelism)";
  std::string s = std::to_string(n) + " ranks x batch " + std::to_string(r.config.batch) + " = global batch " +
                  std::to_string(n * r.config.batch);
  for (const RunResult& run : r.runs) {
    char buf[160];
    std::snprintf(buf, sizeof buf, "; %s %.2f img/s per rank, %.2f in all", run.precision.c_str(), run.images_per_s,
                  run.images_per_s * n);
    s += buf;
  }
  return s;
}

}  // namespace hg::segbench
