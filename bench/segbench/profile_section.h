// segbench --profile-ops N: profiles step N of each mode with hg::Profiler, writes the
// Chrome trace next to the report, and renders the report's "Op profile" section with a
// diagnosis of why a reduced-precision mode is (not) faster than fp32, from the numbers.
#pragma once
#include <optional>
#include <string>

#include "bench/segbench/profile_data.h"
#include "bench/segbench/run_result.h"
#include "framework/profiler.h"

namespace hg::segbench {

// The summary of a stopped profiler's events (step is recorded as given).
OpProfile summarize_op_profile(const Profiler& prof, int64_t step, size_t top_rows = 12);

// How many consecutive steps --profile-ops profiles per mode (the report keeps the fastest).
inline constexpr int64_t kProfiledSteps = 3;

// Stops `prof` (the profile of `step`) and folds it into `kept`: the fastest profiled step so
// far becomes the summary, with the machine's FMA peak on the CPU, and its trace is written to
// <cfg.out>/trace_<precision>.json (when cfg.out is set); every step's op time is listed.
void finish_op_profile(Profiler& prof, const Config& cfg, const std::string& precision, int64_t step,
                       std::optional<OpProfile>& kept);

// The f32 FMA peak of this process's OpenMP threads, measured once (GFLOP/s; 0 without AVX2/FMA).
double fma_peak_gflops();

// One paragraph: where `mode`'s op time goes and, given fp32's profile, why it is (not)
// faster than fp32: the extra (or saved) time split by kind of op.
std::string op_profile_diagnosis(const std::string& mode, const OpProfile& p, const OpProfile* fp32);

// The report section, "" when no run was profiled.
std::string op_profile_markdown(const Report& r);
std::string op_profile_html(const Report& r);

}  // namespace hg::segbench
