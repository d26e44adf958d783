// What report.md and report.html share (internal to the report writers): the summary
// table as plain-text cells, the CPU-emulation note, the layers worst hit by gradient
// underflow, which runs the sample grid shows, and the two page renderers.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "bench/segbench/run_result.h"
#include "bench/segbench/svg_exponents.h"

namespace hg::segbench {

// A number with `decimals` digits, or "n/a" when it is NaN/inf.
std::string fixed(double v, int decimals);
// "bg", "blob", "texture", "curve" for the benchmark's 4 classes; "class N" beyond.
std::string class_name(size_t c);

struct TextTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows{};  // cells in header order
};
// One row per run; numbers as text, so both pages print the same digits.
TextTable summary_cells(const Report& r);

// One-line descriptions of the machine, the training config and the validation.
std::string machine_text(const Report& r);
std::string config_text(const Report& r);
std::string validation_text(const Report& r);
// "Steps to reach Dice >= target: fp32 300; fp16 not reached."
std::string steps_to_target_text(const Report& r);

// Whether the runs ran on the CPU, where f16/bf16 arithmetic is emulated in software.
bool ran_on_cpu(const Report& r);
extern const char* const kCpuNote;

// Fraction of a layer's gradient elements that are, or in f16 would be, zero.
double lost_to_zero(const LayerStats& l);

// The mode with the most underflow (mean over layers of lost_to_zero at its last sampled
// step) and its worst layers, most hit first. run is null when no run sampled layers.
struct UnderflowPick {
  const RunResult* run = nullptr;
  const UnderflowSample* sample = nullptr;
  std::vector<const LayerStats*> worst;
};
UnderflowPick worst_underflow(const Report& r, size_t count);
// The pick's layers as a table, and the sentence that explains its columns.
TextTable underflow_cells(const UnderflowPick& pick);
std::string underflow_legend(const UnderflowPick& pick);

// Per-mode precision table (report_numerics.cpp): dtypes of params / activations / grads /
// optimizer state, loss scale, flushes in the gradients as stored, the f16 counterfactual.
TextTable mode_cells(const Report& r);
std::string mode_legend();
// Mean share of flushed elements in the weight gradients backward computed in f16 (NaN: none).
double stored_f16_flushed(const RunResult& run);
// Mean share of the stored logit gradient that would flush if stored in f16 unscaled (NaN: stored in f16).
double logits_would_flush(const RunResult& run);
// The exponent-histogram figure: fp32 (unscaled f32) and amp (scaled f16) logit gradients.
std::vector<ExponentPanel> exponent_panels(const Report& r);
std::string exponent_caption(const std::vector<ExponentPanel>& panels);
// The update/weight ratio per mode over the first steps (report_updates.cpp): whether any
// run measured one, the table (one column per step, then the largest factor over fp32's),
// its legend, and the log-scale plot (report.html inline, update_ratio.svg beside report.md).
bool has_update_ratios(const Report& r);
TextTable update_cells(const Report& r);
std::string update_legend();
std::string update_svg(const Report& r);
// The measured ratio where the mode's matrix products ran in its own precision (a GPU, or
// AMX tiles for bf16 and split f16); on a CPU path that widens f16/bf16 to f32 (AVX2,
// AVX-512), "n/a (widened to f32; 0.55x measured)".
std::string speedup_cell(const RunResult& run, const RunResult* fp32);
// "CPU kernel path avx2 (f16/bf16 widened to f32 for arithmetic)", or "" off the CPU.
std::string cpu_path_text(const Report& r);

// The rows of samples.png: runs (indices) that have sample predictions, one column each,
// and how many images (at most 4) every one of them covers; rows == 0: no PNG.
struct SampleGrid {
  std::vector<size_t> runs;
  size_t rows = 0;
  int64_t size = 0;
};
SampleGrid sample_grid(const Report& r);

std::string markdown_report(const Report& r, const SampleGrid& samples);
std::string html_report(const Report& r, const SampleGrid& samples);

}  // namespace hg::segbench
