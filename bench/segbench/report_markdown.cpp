// report.md and the summary table the CLI prints, plus the pieces report.html shares with
// them (table cells, CPU note, underflow ranking, sample-grid columns), so both pages
// always show the same numbers.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "bench/segbench/modes.h"
#include "bench/segbench/report.h"
#include "bench/segbench/profile_section.h"
#include "bench/segbench/report_parts.h"
#include "bench/segbench/scaling.h"

namespace hg::segbench {

const char* const kCpuNote =
    "On the AVX2 and AVX-512 paths f16 and bf16 are mostly storage formats: kernels widen them to f32 (F16C for f16), multiply and "
    "accumulate in f32 and round each result once, which gives the rounding, overflow and underflow of f16/bf16 "
    "exactly, but at the speed of f32 arithmetic plus conversions. So the speed-up column says n/a for those "
    "modes (the measured ratio is in parentheses) and none of these timings predicts a GPU. The AMX path "
    "multiplies natively (bf16, and f16 as exact bf16 hi + lo pairs, in nearly every convolution; its "
    "tile unit sums in an order of its own, within f32 accumulation's bound), and so "
    "does AVX-512 for bf16 where the machine line says vdpbf16ps was chosen (it is where it outpaces the f32 "
    "FMA: matmul's pair kernel gives the f32 kernels' bits, the convolutions on AMX-style tiles sum in their own "
    "order within the same bound): there the column shows the measured ratio. What carries over to a GPU is the range behaviour (overflow, underflow, "
    "flushing: the failures these modes show); the last bits of sums do not exactly (tensor cores do not "
    "accumulate with IEEE round-to-nearest f32), and the speed does not.";

std::string fixed(double v, int decimals) {
  if (!std::isfinite(v)) return "n/a";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string class_name(size_t c) {
  static const char* const kNames[] = {"bg", "blob", "texture", "curve"};
  return c < std::size(kNames) ? kNames[c] : "class " + std::to_string(c);
}

bool ran_on_cpu(const Report& r) {
  if (r.runs.empty()) return r.config.device == "cpu";
  return std::any_of(r.runs.begin(), r.runs.end(), [](const RunResult& run) { return run.device == "cpu"; });
}

TextTable summary_cells(const Report& r) {
  const bool cpu = ran_on_cpu(r);
  const std::string mark = cpu ? " \u2020" : "";  // dagger: see the CPU note
  TextTable t;
  std::string classes;
  const size_t n_classes = r.runs.empty() ? 4 : r.runs[0].val_dice.size();
  for (size_t c = 0; c < n_classes; ++c) classes += (c ? " / " : "") + class_name(c);
  t.header = {"mode", "val Dice (mean fg)", "per-class Dice (" + classes + ")", "IoU (mean fg)",
              "time to train (s)", "throughput (img/s)" + mark, "speed-up vs fp32" + mark,
              "step ms (median / p90)" + mark, "peak memory (MB)", "skipped steps", "first non-finite step"};
  const auto fp32 =
      std::find_if(r.runs.begin(), r.runs.end(), [](const RunResult& x) { return x.precision == "fp32"; });
  for (const RunResult& run : r.runs) {
    std::string per_class;
    for (size_t c = 0; c < run.val_dice.size(); ++c) per_class += (c ? " / " : "") + fixed(run.val_dice[c], 3);
    const bool comparable = fp32 != r.runs.end() && fp32->images_per_s > 0 && run.images_per_s > 0;
    std::string nonfinite = run.first_nonfinite_step ? std::to_string(*run.first_nonfinite_step) : "\u2013";
    if (run.stopped_early)
      nonfinite =
          run.first_nonfinite_step ? nonfinite + " (run stopped)" : "stopped at " + std::to_string(run.steps_done);
    t.rows.push_back({run.precision, fixed(run.val_dice_mean_fg, 3), per_class.empty() ? "\u2013" : per_class,
                      fixed(run.val_iou_mean_fg, 3), fixed(run.total_seconds, 1), fixed(run.images_per_s, 1),
                      speedup_cell(run, comparable ? &*fp32 : nullptr),
                      fixed(run.step.median_ms, 1) + " / " + fixed(run.step.p90_ms, 1),
                      run.peak_bytes > 0 ? fixed(static_cast<double>(run.peak_bytes) / (1 << 20), 1) : "\u2013",
                      std::to_string(run.skipped_steps.size()), nonfinite});
  }
  return t;
}

double lost_to_zero(const LayerStats& l) { return l.grad_zero_fraction; }

UnderflowPick worst_underflow(const Report& r, size_t count) {
  UnderflowPick pick;
  double most = -1;
  for (const RunResult& run : r.runs) {
    if (run.underflow.empty() || run.underflow.back().layers.empty()) continue;
    const UnderflowSample& s = run.underflow.back();
    double sum = 0;
    for (const LayerStats& l : s.layers) sum += lost_to_zero(l);
    if (sum / static_cast<double>(s.layers.size()) > most) {
      most = sum / static_cast<double>(s.layers.size());
      pick.run = &run;
      pick.sample = &s;
    }
  }
  if (!pick.run) return pick;
  for (const LayerStats& l : pick.sample->layers) pick.worst.push_back(&l);
  std::stable_sort(pick.worst.begin(), pick.worst.end(),
                   [](const LayerStats* a, const LayerStats* b) { return lost_to_zero(*a) > lost_to_zero(*b); });
  if (pick.worst.size() > count) pick.worst.resize(count);
  return pick;
}

TextTable underflow_cells(const UnderflowPick& pick) {
  auto pct = [](double v) { return fixed(100 * v, 1) + "%"; };
  auto sci = [](double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.3g", v);
    return std::string(buf);
  };
  TextTable t{.header = {"layer", "stored as", "zero as stored", "would flush unscaled", "subnormal as stored",
                         "update lost", "max |g|", "\u2016g\u2016"}};
  for (const LayerStats* l : pick.worst)
    t.rows.push_back({l->name, l->grad_dtype, pct(l->grad_zero_fraction),
                      l->grad_underflow_fraction < 0 ? "\u2013 (f16)" : pct(l->grad_underflow_fraction),
                      pct(l->grad_subnormal_fraction), pct(l->update_lost_fraction), sci(l->grad_amax),
                      sci(l->grad_norm)});
  return t;
}

std::string underflow_legend(const UnderflowPick& pick) {
  if (!pick.run) return "";
  return "The " + std::to_string(pick.worst.size()) + " layers of " + pick.run->precision + " (the mode whose " +
         "stored gradients hold the most zeros, mean over layers) with the largest share of zeros, at step " +
         std::to_string(pick.sample->step) + ", on the gradients as stored (scaled, before unscaling). zero as " +
         "stored: exactly 0 (flushed, where backward computed in f16); would flush unscaled: for gradients stored " +
         "wider than f16, non-zero with |g / scale| <= 2^-25, so 0 if stored in f16 without a loss scale; " +
         "subnormal: in (2^-25, 2^-14); update lost: a non-zero update rounded away by the weight; max |g| and " +
         "\u2016g\u2016 unscaled.";
}

std::string machine_text(const Report& r) {
  const Machine& m = r.machine;
  const std::string path = cpu_path_text(r);
  return (m.cpu_model.empty() ? "unknown CPU" : m.cpu_model) + ", " + std::to_string(m.threads) +
         " threads" + (path.empty() ? "" : ", " + path) + "; GPU: " + (m.gpu.empty() ? "none" : m.gpu) + "; " +
         m.compiler + ", " + m.build_type + " build";
}

std::string config_text(const Report& r) {
  const Config& c = r.config;
  std::ostringstream os;
  os << "profile " << c.profile << ", device " << c.device << ", " << c.steps << " steps, batch " << c.batch << ", "
     << c.size << "\u00d7" << c.size << " images, U-Net width " << c.width << " depth " << c.depth << ", seed "
     << c.seed << ", Adam lr " << c.lr << " (SGD ablations: " << c.lr * kSgdLrFactor << ", momentum " << kSgdMomentum
     << "; cosine), clip " << c.clip << ", growth interval " << c.growth_interval;
  return os.str();
}

std::string validation_text(const Report& r) {
  const Config& c = r.config;
  std::string s = std::to_string(c.val_images) + " images at the end";
  if (c.eval_every > 0)
    s += "; every " + std::to_string(c.eval_every) + " steps on " + std::to_string(c.eval_subset) + " of them";
  return s + "; target mean foreground Dice " + fixed(r.target_dice, 2);
}

std::string steps_to_target_text(const Report& r) {
  std::string s = "Steps to reach Dice \u2265 " + fixed(r.target_dice, 2) + ":";
  for (size_t i = 0; i < r.runs.size(); ++i)
    s += (i ? "; " : " ") + r.runs[i].precision + " " +
         (r.runs[i].steps_to_target ? std::to_string(*r.runs[i].steps_to_target) : "not reached");
  return s + ".";
}

SampleGrid sample_grid(const Report& r) {
  SampleGrid g;
  g.rows = std::min<size_t>({4, r.sample_images.size(), r.sample_truths.size()});
  for (size_t i = 0; i < r.runs.size(); ++i)
    if (!r.runs[i].sample_predictions.empty()) {
      g.runs.push_back(i);
      g.rows = std::min(g.rows, r.runs[i].sample_predictions.size());
    }
  if (g.runs.empty() || g.rows == 0) return {};
  g.size = std::llround(std::sqrt(static_cast<double>(r.sample_images[0].size())));
  return g;
}

namespace {

std::string md_cell(const std::string& s) {
  std::string out;
  for (const char c : s) {
    if (c == '|') out += '\\';
    out += c == '\n' ? ' ' : c;
  }
  return out;
}

std::string md_row(const std::vector<std::string>& cells) {
  std::string line = "|";
  for (const std::string& c : cells) line += " " + md_cell(c) + " |";
  return line + "\n";
}

// A code fence longer than any run of backticks in the text, so the text stays verbatim.
std::string fence_for(const std::string& text) {
  size_t longest = 0, run = 0;
  for (const char c : text) {
    run = c == '`' ? run + 1 : 0;
    longest = std::max(longest, run);
  }
  return std::string(std::max<size_t>(3, longest + 1), '`');
}

}  // namespace

std::string summary_table(const Report& r) {
  const TextTable t = summary_cells(r);
  std::string md = md_row(t.header) + "|";
  for (size_t c = 0; c < t.header.size(); ++c) md += c == 0 || c == 2 ? " --- |" : " ---: |";
  md += "\n";
  for (const auto& row : t.rows) md += md_row(row);
  if (ran_on_cpu(r)) md += std::string("\n\u2020 **CPU run.** ") + kCpuNote + "\n";
  return md;
}

std::string markdown_report(const Report& r, const SampleGrid& samples) {
  std::ostringstream md;
  md << "# segbench report: U-Net segmentation in " << r.runs.size() << " precision mode"
     << (r.runs.size() == 1 ? "" : "s") << "\n\n"
     << "- **Machine:** " << machine_text(r) << "\n"
     << "- **Config:** " << config_text(r) << "\n"
     << "- **Data-parallel:** " << scaling_line(r) << "\n"
     << "- **Validation:** " << validation_text(r) << "\n\n"
     << "## Summary\n\n" << summary_table(r) << "\n" << steps_to_target_text(r) << "\n\n## Diagnosis\n";
  for (const RunResult& run : r.runs) {
    md << "\n### " << run.precision << (run.description.empty() ? "" : ": " + run.description) << "\n\n"
       << (run.diagnosis.empty() ? "No problem found." : run.diagnosis) << "\n";
    if (run.stopped_early)
      md << "\nStopped early after " << run.steps_done << " steps: " << run.stop_reason << "\n";
    if (!run.nonfinite_params.empty()) {
      const auto& [step, params] = run.nonfinite_params.front();
      md << "\nNon-finite parameters first at step " << step << ":";
      for (size_t k = 0; k < params.size() && k < 8; ++k)
        md << (k ? ", " : " ") << "`" << params[k].first << "` (" << params[k].second << ")";
      md << (params.size() > 8 ? ", \u2026" : "") << "\n";
    }
    if (!run.numerics_worst.empty()) {
      const std::string fence = fence_for(run.numerics_worst);
      md << "\nNumerics monitor, the tensors worst off in f16 (all records: numerics-" << run.precision
         << ".jsonl):\n\n" << fence << "text\n" << run.numerics_worst << fence << "\n";
    }
    if (!run.fallback_events.empty()) {
      md << "\nFallback events:\n\n";
      for (const FallbackEvent& e : run.fallback_events)
        md << "- step " << e.step << ", `" << e.module << "`: " << e.reason << "\n";
    }
  }

  const TextTable modes = mode_cells(r);
  md << "\n## Precision per mode\n\n" << mode_legend() << "\n\n" << md_row(modes.header) << "|";
  for (size_t c = 0; c < modes.header.size(); ++c) md << (c < 6 ? " --- |" : " ---: |");
  md << "\n";
  for (const auto& row : modes.rows) md << md_row(row);
  if (const std::vector<ExponentPanel> panels = exponent_panels(r); !panels.empty())
    md << "\n![gradient exponents of the logits](grad_exponents.svg)\n\n" << exponent_caption(panels) << "\n";
  if (has_update_ratios(r)) {
    const TextTable t = update_cells(r);
    md << "\n## Update size over the first steps\n\n" << update_legend() << "\n\n" << md_row(t.header) << "|";
    for (size_t c = 0; c < t.header.size(); ++c) md << (c < 2 ? " --- |" : " ---: |");
    md << "\n";
    for (const auto& row : t.rows) md << md_row(row);
    md << "\n![update/weight ratio over the first steps, log scale](update_ratio.svg)\n";
  }
  const UnderflowPick pick = worst_underflow(r, 10);
  if (pick.run) {
    const TextTable t = underflow_cells(pick);
    md << "\n## Gradient underflow: " << pick.run->precision << " at step " << pick.sample->step << "\n\n"
       << underflow_legend(pick) << "\n\n" << md_row(t.header) << "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n";
    for (std::vector<std::string> row : t.rows) {
      row[0] = "`" + row[0] + "`";
      md << md_row(row);
    }
  }
  if (!r.compare_text.empty()) {
    const std::string fence = fence_for(r.compare_text);
    md << "\n## FP32 vs " << (r.config.compare.empty() ? "reduced precision" : r.config.compare) << " on one batch\n\n"
       << fence << "text\n" << r.compare_text << (r.compare_text.back() == '\n' ? "" : "\n") << fence << "\n";
  }
  md << op_profile_markdown(r);
  md << "\n## Files\n\n";
  if (samples.rows > 0) {
    md << "![sample predictions, columns: image, truth";
    for (size_t i : samples.runs) md << ", " << r.runs[i].precision;
    md << "](samples.png)\n\n";
  }
  md << "[report.html](report.html) (plots) \u00b7 [metrics.csv](metrics.csv) \u00b7 [report.json](report.json)\n";
  return md.str();
}

}  // namespace hg::segbench
