// The report's update-size piece shared by report.md and report.html: the update/weight
// ratio of every mode over the first steps, as a table and as a log-scale plot, so an
// update a thousand times fp32's stands out next to the steps that were normal.
#include <cmath>
#include <cstdio>
#include <set>
#include <string>

#include "bench/segbench/report_parts.h"
#include "tools/svg_plot.h"
#include "bench/segbench/update_compare.h"

namespace hg::segbench {
namespace {

// Two significant digits, without an exponent from 100 on (a ratio of 340, not 3.4e+02).
std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 100 ? "%.0f" : "%.2g", v);
  return buf;
}

std::string factor(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, v >= 10 ? "%.0f" : "%.2f", v);
  return buf;
}

// The first steps any run measured, in order.
std::vector<int64_t> first_steps(const Report& r) {
  std::set<int64_t> steps;
  for (const RunResult& run : r.runs)
    for (const UpdateSample& u : run.updates)
      if (u.step < kFirstUpdateSteps) steps.insert(u.step);
  return {steps.begin(), steps.end()};
}

std::string ratio_cell(const RunResult& run, int64_t step) {
  for (const UpdateSample& u : run.updates)
    if (u.step == step) return u.skipped ? "skipped" : std::isfinite(u.ratio) ? sci(u.ratio) : "n/a";
  return "\u2013";
}

}  // namespace

bool has_update_ratios(const Report& r) { return !first_steps(r).empty(); }

TextTable update_cells(const Report& r) {
  const std::vector<int64_t> steps = first_steps(r);
  TextTable t{.header = {"mode", "optimizer state"}};
  for (int64_t s : steps) t.header.push_back("step " + std::to_string(s));
  t.header.push_back("largest \u00d7 fp32 (step, layer ratio)");
  for (const RunResult& run : r.runs) {
    std::vector<std::string> row{run.precision, run.optimizer_state_dtype};
    for (int64_t s : steps) row.push_back(ratio_cell(run, s));
    const RunResult* ref = update_reference(r, run);
    const UpdateJump j = ref ? update_jump(run, *ref, kFirstUpdateSteps) : UpdateJump{};
    std::string vs = run.precision == "fp32" || run.precision == "fp32-sgd" ? "\u2013 (reference)" : "\u2013";
    if (j.largest)
      vs = factor(j.max_factor) + "\u00d7 (step " + std::to_string(j.largest->step) + ", " + j.largest->max_layer + " " +
           sci(j.largest->max_layer_ratio) + ")";
    row.push_back(vs);
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string update_legend() {
  return "The update/weight ratio \u2016w_after \u2212 w_before\u2016 / \u2016w_before\u2016 of each optimizer step, "
         "over all parameters, measured on the weights the optimizer stores (f16 for fp16, the f32 masters for "
         "amp-master). Adam's first steps move every weight by about lr, so fp32's ratio is small and steady; a "
         "ratio many times fp32's at the same step is an update that wrecks the weights even while every number "
         "stays finite. The last column compares with the fp32 run of the same optimizer (fp32-sgd for the SGD "
         "modes) at the step where the factor is largest, with that step's largest per-layer ratio.";
}

std::string update_svg(const Report& r) {
  plot::LinePlot plot{.id = "update-ratio", .title = "Update/weight ratio over the first steps", .x_label = "step",
                .y_label = "\u2016\u0394w\u2016 / \u2016w\u2016", .log2_y = true};
  plot.marker_label = "skipped step";
  for (size_t i = 0; i < r.runs.size(); ++i) {
    plot::Series s{r.runs[i].precision, plot::series_colour(i), {}, {}, {}};
    for (const UpdateSample& u : r.runs[i].updates) {
      if (u.step >= kFirstUpdateSteps) continue;
      if (u.skipped) {
        s.marker_x.push_back(static_cast<double>(u.step));
        continue;
      }
      s.x.push_back(static_cast<double>(u.step));
      s.y.push_back(u.ratio);
    }
    if (!s.x.empty() || !s.marker_x.empty()) plot.series.push_back(std::move(s));
  }
  return plot::svg_line_plot(plot);
}

}  // namespace hg::segbench
