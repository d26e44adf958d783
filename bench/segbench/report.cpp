// write_report: builds every report file in memory first, then writes each atomically, so
// a failure never leaves a half-written file; report.json, metrics.csv and samples.png are
// made here, report.md and report.html in report_markdown.cpp and report_html.cpp.
#include "bench/segbench/report.h"

#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>

#include "bench/segbench/json_writer.h"
#include "bench/segbench/png.h"
#include "bench/segbench/report_parts.h"
#include "bench/segbench/scaling.h"
#include "bench/segbench/svg_exponents.h"
#include "framework/error.h"
#include "framework/serialize/atomic_write.h"

namespace hg::segbench {
namespace {

void write_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, {{text.data(), text.size()}});
}

void timing(JsonWriter& j, std::string_view name, const Timing& t) {
  j.key(name).begin_object(true).field("median", t.median_ms).field("p90", t.p90_ms).end_object();
}

void config_json(JsonWriter& j, const Config& c) {
  j.key("config").begin_object();
  j.field("precisions", c.precisions).field("device", c.device).field("profile", c.profile);
  j.field("steps", c.steps).field("batch", c.batch).field("size", c.size).field("width", c.width);
  j.field("depth", c.depth).field("seed", c.seed).field("lr", c.lr).field("threads", c.threads);
  j.field("out", c.out).field("compare", c.compare).field("dump", c.dump);
  j.field("growth_interval", c.growth_interval).field("val_images", c.val_images);
  j.field("eval_every", c.eval_every).field("eval_subset", c.eval_subset);
  j.field("monitor_every", c.monitor_every).field("clip", c.clip).field("progress", c.progress);
  j.end_object();
}

void run_json(JsonWriter& j, const RunResult& run) {
  j.begin_object();
  j.field("precision", run.precision).field("device", run.device).field("description", run.description);
  j.field("steps_done", run.steps_done).field("stopped_early", run.stopped_early);
  j.field("stop_reason", run.stop_reason).field("total_seconds", run.total_seconds);
  j.field("images_per_s", run.images_per_s);
  j.key("timing_ms").begin_object();
  timing(j, "step", run.step);
  timing(j, "forward", run.forward);
  timing(j, "backward", run.backward);
  timing(j, "optimizer", run.optimizer);
  j.end_object();
  j.field("peak_bytes", run.peak_bytes).field("max_rss_bytes", run.max_rss_bytes);
  j.field("final_loss", run.final_loss);
  j.field("val_dice", run.val_dice).field("val_iou", run.val_iou);
  j.field("val_dice_mean_fg", run.val_dice_mean_fg).field("val_iou_mean_fg", run.val_iou_mean_fg);
  j.field("steps_to_target", run.steps_to_target);

  const Curves& c = run.curves;
  j.key("curves").begin_object();
  j.field("step", c.step).field("seconds", c.seconds).field("loss", c.loss).field("scale", c.scale);
  j.field("lr", c.lr).field("eval_step", c.eval_step).field("eval_seconds", c.eval_seconds);
  j.field("eval_dice", c.eval_dice);
  j.end_object();

  j.field("skipped_steps", run.skipped_steps).field("first_nonfinite_step", run.first_nonfinite_step);
  j.key("nonfinite_params").begin_array();
  for (const auto& [step, params] : run.nonfinite_params) {
    j.begin_object().field("step", step).key("params").begin_array();
    for (const auto& [name, count] : params)
      j.begin_object(true).field("name", name).field("count", count).end_object();
    j.end_array().end_object();
  }
  j.end_array();
  j.key("underflow").begin_array();
  for (const UnderflowSample& s : run.underflow) {
    j.begin_object().field("step", s.step).key("layers").begin_array();
    for (const LayerStats& l : s.layers)
      j.begin_object(true)
          .field("name", l.name)
          .field("grad_dtype", l.grad_dtype)
          .field("grad_zero_fraction", l.grad_zero_fraction)
          .field("grad_underflow_fraction", l.grad_underflow_fraction)
          .field("grad_subnormal_fraction", l.grad_subnormal_fraction)
          .field("update_lost_fraction", l.update_lost_fraction)
          .field("grad_amax", l.grad_amax)
          .field("grad_norm", l.grad_norm)
          .end_object();
    j.end_array();
    const GradientExponents& e = s.logits;
    j.key("logits_grad").begin_object(true).field("dtype", e.dtype).field("scale", e.scale).field("numel", e.numel);
    j.field("zeros", e.zeros).field("flush", e.flush).field("subnormal", e.subnormal).field("overflow", e.overflow);
    j.field("would_flush", e.would_flush).field("log2_lo", static_cast<int64_t>(GradientExponents::kLo));
    j.field("log2_bins", e.bins).end_object();
    j.end_object();
  }
  j.end_array();
  j.key("updates").begin_array();
  for (const UpdateSample& u : run.updates) {
    j.begin_object().field("step", u.step).field("lr", u.lr).field("skipped", u.skipped).field("ratio", u.ratio);
    j.field("max_layer_ratio", u.max_layer_ratio).field("max_layer", u.max_layer);
    j.field("big_step_fraction", u.big_step_fraction).field("grad_zero_fraction", u.grad_zero_fraction);
    j.field("v_lost_fraction", u.v_lost_fraction).field("v_lost_share", u.v_lost_share);
    j.field("eps_only_fraction", u.eps_only_fraction).field("eps_only_share", u.eps_only_share);
    j.field("eps_only_mean_step", u.eps_only_mean_step).field("v_flushed_fraction", u.v_flushed_fraction);
    j.key("layers").begin_array();
    for (const LayerUpdate& l : u.layers)
      j.begin_object(true).field("name", l.name).field("ratio", l.ratio).field("unchanged_fraction", l.unchanged_fraction).end_object();
    j.end_array().end_object();
  }
  j.end_array();
  j.key("fallback_events").begin_array();
  for (const FallbackEvent& e : run.fallback_events)
    j.begin_object(true).field("step", e.step).field("module", e.module).field("reason", e.reason).end_object();
  j.end_array();
  j.key("dtypes").begin_object(true).field("params", run.params_dtype).field("activations", run.activations_dtype);
  j.field("grads", run.grads_dtype).field("optimizer_state", run.optimizer_state_dtype).end_object();
  j.field("optimizer_name", run.optimizer_name).field("cpu_isa", run.cpu_isa);
  j.field("diagnosis", run.diagnosis);
  j.field("numerics_worst", run.numerics_worst);
  j.field("adam_v_flushed_fraction", run.adam_v_flushed_fraction);
  j.end_object();
}

std::string json_report(const Report& r) {
  JsonWriter j;
  j.begin_object();
  config_json(j, r.config);
  const Machine& m = r.machine;
  j.key("machine").begin_object();
  j.field("cpu_model", m.cpu_model).field("threads", m.threads).field("gpu", m.gpu);
  j.field("compiler", m.compiler).field("build_type", m.build_type);
  j.field("ranks", m.ranks).field("scaling", scaling_line(r));  // runs' images_per_s are per rank
  j.end_object();
  j.field("target_dice", r.target_dice);
  j.key("runs").begin_array();
  for (const RunResult& run : r.runs) run_json(j, run);
  j.end_array();
  if (!r.compare_text.empty()) j.field("compare_text", r.compare_text);
  j.end_object();
  return j.str() + "\n";
}

// Spreadsheets and pandas read nan/inf; an empty cell means "not measured at this step".
std::string csv_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[32];
  return std::string(buf, std::to_chars(buf, buf + sizeof buf, v).ptr);
}

std::string csv_text(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string out = "\"";
  for (const char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string metrics_csv(const Report& r) {
  std::string csv = "precision,step,seconds,loss,scale,lr,eval_dice\n";
  for (const RunResult& run : r.runs) {
    const Curves& c = run.curves;
    std::map<int64_t, double> eval;
    for (size_t i = 0; i < std::min(c.eval_step.size(), c.eval_dice.size()); ++i) eval[c.eval_step[i]] = c.eval_dice[i];
    auto at = [](const std::vector<double>& v, size_t i) { return i < v.size() ? csv_number(v[i]) : std::string(); };
    for (size_t i = 0; i < c.step.size(); ++i) {
      const auto e = eval.find(c.step[i]);
      csv += csv_text(run.precision) + "," + std::to_string(c.step[i]) + "," + at(c.seconds, i) + "," +
             at(c.loss, i) + "," + at(c.scale, i) + "," + at(c.lr, i) + "," +
             (e == eval.end() ? std::string() : csv_number(e->second)) + "\n";
    }
  }
  return csv;
}

Image8 samples_png(const Report& r, const SampleGrid& g) {
  std::vector<GridRow> rows(g.rows);
  for (size_t i = 0; i < g.rows; ++i) {
    rows[i].image = r.sample_images[i];
    rows[i].truth = r.sample_truths[i];
    for (size_t k : g.runs) rows[i].predictions.push_back(r.runs[k].sample_predictions[i]);
  }
  return prediction_grid(rows, g.size);
}

}  // namespace

void write_report(const Report& r, const std::string& dir) {
  HG_CHECK(!dir.empty(), "write_report: no report folder given");
  const SampleGrid samples = sample_grid(r);
  std::vector<std::pair<std::string, std::string>> files{
      {"report.json", json_report(r)},
      {"metrics.csv", metrics_csv(r)},
      {"report.md", markdown_report(r, samples)},
      {"report.html", html_report(r, samples)}};
  const std::vector<ExponentPanel> panels = exponent_panels(r);  // report.md links the figure
  if (!panels.empty()) files.emplace_back("grad_exponents.svg", svg_exponent_histogram("Gradient exponents of the logits", panels));
  if (has_update_ratios(r)) files.emplace_back("update_ratio.svg", update_svg(r));
  Image8 png;
  if (samples.rows > 0) png = samples_png(r, samples);

  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  HG_CHECK(!ec && std::filesystem::is_directory(dir), "write_report: cannot create the report folder ", dir, ": ",
           ec ? ec.message() : "a file of that name is in the way");
  const std::filesystem::path base(dir);
  for (const auto& [name, text] : files) write_file((base / name).string(), text);
  if (samples.rows > 0) write_png((base / "samples.png").string(), png);
}

}  // namespace hg::segbench
