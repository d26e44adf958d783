// segbench's report writers: turn the runs' results (run_result.h) into report.json,
// metrics.csv, report.md, a self-contained report.html with SVG plots, and samples.png.
#pragma once
#include <string>

#include "bench/segbench/run_result.h"

namespace hg::segbench {

// Creates `dir` if needed and writes every report file into it, each one atomically (a
// temporary file renamed over it). Prints nothing. Throws hg::Error when a file cannot be
// written, naming the file and the reason.
void write_report(const Report& r, const std::string& dir);

// The Markdown summary table (one row per run, NVIDIA's segmentation-example layout),
// followed on a CPU run by the note that f16/bf16 speed there is emulated: what the CLI
// prints on the terminal and report.md shows.
std::string summary_table(const Report& r);

}  // namespace hg::segbench
