// report.html: one self-contained page (inline CSS and SVG, no script, nothing fetched) so
// it opens from a CI artifact or a copied folder in any browser; samples.png beside it is
// the only other file it shows. Each run keeps its colour in every plot.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <sstream>

#include "bench/segbench/png.h"
#include "bench/segbench/profile_section.h"
#include "bench/segbench/report_parts.h"
#include "bench/segbench/svg_exponents.h"
#include "tools/svg_plot.h"

namespace hg::segbench {
namespace {

constexpr const char* kStyle = R"(
*{box-sizing:border-box}
body{margin:0;background:#f4f5f7;color:#1f2328;
  font:14px/1.5 system-ui,-apple-system,'Segoe UI',Helvetica,Arial,sans-serif}
main{max-width:1200px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:18px;margin:32px 0 10px;padding-bottom:4px;border-bottom:1px solid #d8dbe0}
h3{font-size:15px;margin:18px 0 4px}
.sub{color:#59636e;margin:0 0 12px}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:0}
dl.meta dt{font-weight:600;color:#59636e}
dl.meta dd{margin:0}
.note{background:#fff6e0;border-left:4px solid #E69F00;padding:8px 12px;margin:10px 0;border-radius:0 4px 4px 0}
.wrap{overflow-x:auto;background:#fff;border:1px solid #d8dbe0;border-radius:6px}
table{border-collapse:collapse;width:100%;font-variant-numeric:tabular-nums}
th,td{padding:6px 10px;border-bottom:1px solid #eaecef;white-space:nowrap}
th{background:#f0f2f5;font-weight:600;text-align:left;vertical-align:bottom;white-space:normal;font-size:13px}
td.n,th.n{text-align:right}
.fit{display:inline-block;max-width:100%}
.fit table{width:auto}
tr:last-child td{border-bottom:none}
td.bad{color:#b3261e;font-weight:600}
.dot{display:inline-block;width:10px;height:10px;border-radius:50%;margin-right:6px}
.plots{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:14px}
figure{margin:0;background:#fff;border:1px solid #d8dbe0;border-radius:6px;padding:8px;overflow-x:auto}
figcaption{color:#59636e;font-size:12.5px;padding:4px 6px 0}
svg{max-width:100%;height:auto;display:block}
.cols{display:grid;font-weight:600;font-size:12.5px;text-align:center;margin-bottom:4px}
.samples img{image-rendering:pixelated;display:block;max-width:100%;height:auto}
.swatch{display:inline-block;width:12px;height:12px;border:1px solid #999;vertical-align:-1px;margin:0 4px 0 12px}
article{background:#fff;border:1px solid #d8dbe0;border-radius:6px;padding:4px 14px 10px;margin:10px 0}
article p{white-space:pre-line;margin:6px 0}
pre{background:#fff;border:1px solid #d8dbe0;border-radius:6px;padding:10px;overflow-x:auto;font-size:12.5px}
code{font-size:12.5px}
footer{margin-top:32px;color:#59636e}
)";

using Html = std::ostringstream;

std::string esc(const std::string& s) { return plot::xml_escape(s); }

void table(Html& h, const TextTable& t, const std::vector<std::string>& row_colours, size_t bad_column,
           bool fit = false) {
  h << "<div class=\"wrap" << (fit ? " fit" : "") << "\"><table><thead><tr>";
  for (size_t c = 0; c < t.header.size(); ++c)
    h << "<th" << (c > 0 ? " class=\"n\"" : "") << ">" << esc(t.header[c]) << "</th>";
  h << "</tr></thead><tbody>\n";
  for (size_t r = 0; r < t.rows.size(); ++r) {
    h << "<tr>";
    for (size_t c = 0; c < t.rows[r].size(); ++c) {
      const std::string& cell = t.rows[r][c];
      const bool bad = c == bad_column && cell != "\u2013";
      h << "<td class=\"" << (c == 0 ? "" : "n") << (bad ? " bad" : "") << "\">";
      if (c == 0 && r < row_colours.size())
        h << "<span class=\"dot\" style=\"background:" << row_colours[r] << "\"></span>";
      h << esc(cell) << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</tbody></table></div>\n";
}

void figure(Html& h, const std::string& svg, const std::string& caption) {
  h << "<figure>" << svg << "<figcaption>" << esc(caption) << "</figcaption></figure>\n";
}

// The four loss/Dice curves and the loss scale, every run in its own colour.
void curve_plots(Html& h, const Report& r, bool cpu) {
  plot::LinePlot loss_step{.id = "loss-step", .title = "Training loss vs step", .x_label = "step", .y_label = "loss"};
  plot::LinePlot loss_time{.id = "loss-time", .title = "Training loss vs time", .x_label = "seconds", .y_label = "loss"};
  plot::LinePlot dice_step{.id = "dice-step", .title = "Validation Dice vs step", .x_label = "step",
                     .y_label = "mean foreground Dice", .y_min = 0, .y_max = 1};
  plot::LinePlot dice_time{.id = "dice-time", .title = "Validation Dice vs time", .x_label = "seconds",
                     .y_label = "mean foreground Dice", .y_min = 0, .y_max = 1};
  plot::LinePlot scale{.id = "loss-scale", .title = "Loss scale vs step", .x_label = "step", .y_label = "loss scale",
                 .log2_y = true};
  const plot::HLine target{r.target_dice, "target " + fixed(r.target_dice, 2)};
  dice_step.h_lines = dice_time.h_lines = {target};
  std::vector<plot::Series> unscaled;
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const RunResult& run = r.runs[i];
    const Curves& c = run.curves;
    const std::string colour = plot::series_colour(i);
    const std::vector<double> steps(c.step.begin(), c.step.end()), eval_steps(c.eval_step.begin(), c.eval_step.end());
    loss_step.series.push_back({run.precision, colour, steps, c.loss, {}});
    loss_time.series.push_back({run.precision, colour, c.seconds, c.loss, {}});
    dice_step.series.push_back({run.precision, colour, eval_steps, c.eval_dice, {}});
    dice_time.series.push_back({run.precision, colour, c.eval_seconds, c.eval_dice, {}});
    plot::Series s{run.precision, colour, steps, c.scale, {run.skipped_steps.begin(), run.skipped_steps.end()}};
    const bool scaled = std::any_of(c.scale.begin(), c.scale.end(), [](double v) { return v != 1; });
    (scaled || !run.skipped_steps.empty() ? scale.series : unscaled).push_back(std::move(s));
  }
  std::string scale_caption = "log2 of the loss scale in effect at each step; \u00d7 marks a skipped step (inf/NaN "
                              "gradient: the scale is halved and the update dropped).";
  if (scale.series.empty()) scale.series = std::move(unscaled);
  else if (!unscaled.empty()) scale_caption += " Modes without loss scaling (scale 1 throughout) are left out.";
  const std::string time_note = cpu ? " \u2020 CPU run: f16/bf16 widened to f32 for arithmetic, so times say nothing about a GPU." : "";

  h << "<div class=\"plots\">\n";
  figure(h, plot::svg_line_plot(loss_step), "Cross-entropy + Dice loss per training step; \u25b2 marks a NaN/inf loss.");
  figure(h, plot::svg_line_plot(loss_time), "The same losses against wall time since each run's start." + time_note);
  figure(h, plot::svg_line_plot(dice_step), "Mean foreground Dice of the periodic evaluations on the validation subset.");
  figure(h, plot::svg_line_plot(dice_time), "The same evaluations against wall time." + time_note);
  figure(h, plot::svg_line_plot(scale), scale_caption);
  h << "</div>\n";
}

// Per-layer share of gradient elements lost to zero in f16, one panel per mode, at each
// mode's last sampled step; layers in the model's order.
void underflow_section(Html& h, const Report& r) {
  h << "<h2>Precision per mode</h2>\n<p>" << esc(mode_legend()) << "</p>\n";
  table(h, mode_cells(r), {}, SIZE_MAX, true);
  const std::vector<ExponentPanel> panels = exponent_panels(r);
  if (!panels.empty()) figure(h, svg_exponent_histogram("Gradient exponents of the logits", panels), exponent_caption(panels));
  plot::BarChart chart{.title = "Gradient elements that are zero as stored, per layer",
                 .value_label = "exactly 0 in the stored (scaled) gradient, at each mode's last sampled step"};
  std::vector<const UnderflowSample*> last(r.runs.size(), nullptr);
  for (size_t i = 0; i < r.runs.size(); ++i) {
    if (r.runs[i].underflow.empty()) continue;
    last[i] = &r.runs[i].underflow.back();
    for (const LayerStats& l : last[i]->layers)
      if (std::find(chart.categories.begin(), chart.categories.end(), l.name) == chart.categories.end())
        chart.categories.push_back(l.name);
  }
  h << "<h2>Gradient underflow per layer</h2>\n";
  if (chart.categories.empty()) {
    h << "<p>No per-layer gradient statistics were sampled (monitor_every = 0).</p>\n";
    return;
  }
  for (size_t i = 0; i < r.runs.size(); ++i) {
    if (!last[i]) continue;
    plot::BarPanel panel{r.runs[i].precision + " (step " + std::to_string(last[i]->step) + ")", plot::series_colour(i),
                   std::vector<double>(chart.categories.size(), NAN)};
    for (const LayerStats& l : last[i]->layers) {
      const auto at = std::find(chart.categories.begin(), chart.categories.end(), l.name);
      panel.values[static_cast<size_t>(at - chart.categories.begin())] = lost_to_zero(l);
    }
    chart.panels.push_back(std::move(panel));
  }
  figure(h, plot::svg_bar_chart(chart),
         "Share of each parameter's stored gradient elements that are exactly zero: where backward computed in "
         "f16 these are flushed values (|g| <= 2^-25 before rounding), and the updates they should have made are lost.");
  const UnderflowPick pick = worst_underflow(r, 10);
  h << "<h3>Worst layers: " << esc(pick.run->precision) << "</h3>\n<p>" << esc(underflow_legend(pick)) << "</p>\n";
  table(h, underflow_cells(pick), {}, SIZE_MAX, true);
}

void samples_section(Html& h, const Report& r, const SampleGrid& g) {
  if (g.rows == 0) return;
  const int64_t cols = 2 + static_cast<int64_t>(g.runs.size()), width = cols * g.size + (cols - 1) * 2;
  const int64_t zoom = std::clamp<int64_t>(1100 / width, 1, 4);
  h << "<h2>Sample predictions</h2>\n<figure class=\"samples\" style=\"max-width:" << width * zoom + 18
    << "px\">\n<div class=\"cols\" style=\"grid-template-columns:repeat(" << cols << ",1fr);column-gap:"
    << 200.0 / static_cast<double>(width) << "%\"><span>image</span><span>truth</span>";
  for (size_t i : g.runs)
    h << "<span style=\"color:" << plot::series_colour(i) << "\">" << esc(r.runs[i].precision) << "</span>";
  h << "</div>\n<img src=\"samples.png\" width=\"" << width * zoom << "\" alt=\"sample validation images, true "
    << "labels and each mode's predicted labels\">\n<figcaption>Classes:";
  for (size_t c = 0; c < kClassPalette.size(); ++c) {
    const auto& rgb = kClassPalette[c];
    h << "<span class=\"swatch\" style=\"background:rgb(" << int{rgb[0]} << ',' << int{rgb[1]} << ',' << int{rgb[2]}
      << ")\"></span>" << esc(class_name(c));
  }
  h << "</figcaption></figure>\n";
}

void diagnosis_section(Html& h, const Report& r) {
  h << "<h2>Diagnosis</h2>\n";
  for (size_t i = 0; i < r.runs.size(); ++i) {
    const RunResult& run = r.runs[i];
    h << "<article><h3><span class=\"dot\" style=\"background:" << plot::series_colour(i) << "\"></span>"
      << esc(run.precision) << (run.description.empty() ? "" : ": " + esc(run.description)) << "</h3>\n<p>"
      << esc(run.diagnosis.empty() ? "No problem found." : run.diagnosis) << "</p>\n";
    if (run.stopped_early)
      h << "<p><b>Stopped early</b> after " << run.steps_done << " steps: " << esc(run.stop_reason) << "</p>\n";
    if (!run.nonfinite_params.empty()) {
      const auto& [step, params] = run.nonfinite_params.front();
      h << "<p>Non-finite parameters first at step " << step << ":";
      for (size_t k = 0; k < params.size() && k < 8; ++k)
        h << (k ? ", " : " ") << "<code>" << esc(params[k].first) << "</code> (" << params[k].second << ")";
      h << (params.size() > 8 ? ", \u2026" : "") << "</p>\n";
    }
    if (!run.fallback_events.empty()) {
      h << "<p>Fallback events:</p><ul>\n";
      for (const FallbackEvent& e : run.fallback_events)
        h << "<li>step " << e.step << ", <code>" << esc(e.module) << "</code>: " << esc(e.reason) << "</li>\n";
      h << "</ul>\n";
    }
    h << "</article>\n";
  }
}

}  // namespace

std::string html_report(const Report& r, const SampleGrid& samples) {
  const bool cpu = ran_on_cpu(r);
  Html h;
  h << "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
    << "<meta name=\"viewport\" content=\"width=device-width,initial-scale=1\">\n"
    << "<title>segbench report</title>\n<style>" << kStyle << "</style>\n</head>\n<body>\n<main>\n"
    << "<h1>segbench report</h1>\n<p class=\"sub\">U-Net segmentation of the procedural data set in "
    << r.runs.size() << " precision mode" << (r.runs.size() == 1 ? "" : "s") << "</p>\n<dl class=\"meta\">"
    << "<dt>Machine</dt><dd>" << esc(machine_text(r)) << "</dd><dt>Config</dt><dd>" << esc(config_text(r))
    << "</dd><dt>Validation</dt><dd>" << esc(validation_text(r)) << "</dd></dl>\n<h2>Summary</h2>\n";
  if (cpu) h << "<div class=\"note\">\u2020 <b>CPU run.</b> " << esc(kCpuNote) << "</div>\n";
  std::vector<std::string> colours;
  for (size_t i = 0; i < r.runs.size(); ++i) colours.push_back(plot::series_colour(i));
  const TextTable summary = summary_cells(r);
  table(h, summary, colours, summary.header.size() - 1);
  h << "<p>" << esc(steps_to_target_text(r)) << "</p>\n<h2>Training curves</h2>\n";
  curve_plots(h, r, cpu);
  underflow_section(h, r);
  if (has_update_ratios(r)) {
    h << "<h2>Update size over the first steps</h2>\n<p>" << esc(update_legend()) << "</p>\n";
    table(h, update_cells(r), colours, SIZE_MAX, true);
    figure(h, update_svg(r), "log2 of the update/weight ratio per step; \u00d7 marks a step the loss scaler skipped.");
  }
  samples_section(h, r, samples);
  diagnosis_section(h, r);
  h << op_profile_html(r);
  if (!r.compare_text.empty())
    h << "<h2>FP32 vs " << esc(r.config.compare.empty() ? "reduced precision" : r.config.compare)
      << " on one batch</h2>\n<pre>" << esc(r.compare_text) << "</pre>\n";
  h << "<footer>Also in this folder: <a href=\"report.md\">report.md</a> \u00b7 <a href=\"metrics.csv\">metrics.csv"
    << "</a> \u00b7 <a href=\"report.json\">report.json</a></footer>\n</main>\n</body>\n</html>\n";
  return h.str();
}

}  // namespace hg::segbench
