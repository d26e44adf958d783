// What segbench checks on the machine before it trains: output folders it can write
// into, and memory enough for the run. A refusal here costs seconds, not a lost run.
#pragma once
#include <cstdint>
#include <string>

#include "bench/segbench/run_result.h"

namespace hg::segbench {

// Makes `dir` (and its parents) and proves it writable with a probe file; throws hg::Error
// naming `flag`, the folder and the reason. An existing folder that holds files is
// refused unless `may_hold_files`.
void prepare_output_dir(const std::string& dir, const char* flag, bool may_hold_files);

// runs/<timestamp>, with -2, -3, ... appended if that folder exists already.
std::string default_out_dir();

// An estimate of the bytes a run takes at its peak (the largest precision mode's
// activations, weights and optimizer state, the validation set, the data in flight).
int64_t estimate_run_bytes(const Config& cfg);
// MemAvailable from /proc/meminfo, or -1 where it cannot be read.
int64_t available_memory_bytes();
// Refuses (hg::Error saying both amounts) a CPU run whose estimate exceeds `available`;
// available < 0 (unknown) passes.
void check_memory(const Config& cfg, int64_t available);

}  // namespace hg::segbench
