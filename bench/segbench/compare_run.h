// segbench --compare MODE: the FP32-vs-MODE comparison (amp::compare) of the freshly
// initialised U-Net on the first training batch, with the benchmark's loss.
#pragma once
#include <string>

#include "amp/compare.h"
#include "bench/segbench/run_result.h"
#include "framework/device.h"

namespace hg::segbench {

amp::Comparison compare_run(const Config& cfg, const std::string& mode, Device device);

}  // namespace hg::segbench
