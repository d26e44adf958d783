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

#include <nlohmann/json.hpp>

#include "bench/segbench/json_text.h"
#include "bench/segbench/png.h"
#include "bench/segbench/report_parts.h"
#include "bench/segbench/scaling.h"
#include "bench/segbench/svg_exponents.h"
#include "framework/error.h"
#include "framework/serialize/atomic_write.h"

namespace hg::segbench {
namespace {

using Json = nlohmann::ordered_json;

void write_file(const std::string& path, const std::string& text) {
  write_file_atomically(path, {{text.data(), text.size()}});
}

template <class T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Json timing(const Timing& t) { return {{"median", t.median_ms}, {"p90", t.p90_ms}}; }

Json config_json(const Config& c) {
  return {{"precisions", c.precisions}, {"device", c.device}, {"profile", c.profile}, {"steps", c.steps},
          {"batch", c.batch}, {"size", c.size}, {"width", c.width}, {"depth", c.depth}, {"seed", c.seed},
          {"lr", c.lr}, {"threads", c.threads}, {"out", c.out}, {"compare", c.compare}, {"dump", c.dump},
          {"growth_interval", c.growth_interval}, {"val_images", c.val_images}, {"eval_every", c.eval_every},
          {"eval_subset", c.eval_subset}, {"monitor_every", c.monitor_every}, {"clip", c.clip},
          {"progress", c.progress}};
}

Json underflow_json(const UnderflowSample& s) {
  Json layers = Json::array();
  for (const LayerStats& l : s.layers)
    layers.push_back({{"name", l.name}, {"grad_dtype", l.grad_dtype}, {"grad_zero_fraction", l.grad_zero_fraction},
                      {"grad_underflow_fraction", l.grad_underflow_fraction},
                      {"grad_subnormal_fraction", l.grad_subnormal_fraction},
                      {"update_lost_fraction", l.update_lost_fraction}, {"grad_amax", l.grad_amax},
                      {"grad_norm", l.grad_norm}});
  const GradientExponents& e = s.logits;
  Json logits = {{"dtype", e.dtype}, {"scale", e.scale}, {"numel", e.numel}, {"zeros", e.zeros},
                 {"flush", e.flush}, {"subnormal", e.subnormal}, {"overflow", e.overflow},
                 {"would_flush", e.would_flush}, {"log2_lo", static_cast<int64_t>(GradientExponents::kLo)},
                 {"log2_bins", e.bins}};
  return {{"step", s.step}, {"layers", std::move(layers)}, {"logits_grad", std::move(logits)}};
}

Json update_json(const UpdateSample& u) {
  Json layers = Json::array();
  for (const LayerUpdate& l : u.layers)
    layers.push_back({{"name", l.name}, {"ratio", l.ratio}, {"unchanged_fraction", l.unchanged_fraction}});
  return {{"step", u.step}, {"lr", u.lr}, {"skipped", u.skipped}, {"ratio", u.ratio},
          {"max_layer_ratio", u.max_layer_ratio}, {"max_layer", u.max_layer},
          {"big_step_fraction", u.big_step_fraction}, {"grad_zero_fraction", u.grad_zero_fraction},
          {"v_lost_fraction", u.v_lost_fraction}, {"v_lost_share", u.v_lost_share},
          {"eps_only_fraction", u.eps_only_fraction}, {"eps_only_share", u.eps_only_share},
          {"eps_only_mean_step", u.eps_only_mean_step}, {"v_flushed_fraction", u.v_flushed_fraction},
          {"layers", std::move(layers)}};
}

Json run_json(const RunResult& run) {
  Json j;  // an object; keys in the order given
  j["precision"] = run.precision;
  j["device"] = run.device;
  j["description"] = run.description;
  j["steps_done"] = run.steps_done;
  j["stopped_early"] = run.stopped_early;
  j["stop_reason"] = run.stop_reason;
  j["total_seconds"] = run.total_seconds;
  j["images_per_s"] = run.images_per_s;
  j["timing_ms"] = {{"step", timing(run.step)}, {"forward", timing(run.forward)}, {"backward", timing(run.backward)},
                    {"optimizer", timing(run.optimizer)}};
  j["peak_bytes"] = run.peak_bytes;
  j["max_rss_bytes"] = run.max_rss_bytes;
  j["final_loss"] = run.final_loss;
  j["val_dice"] = run.val_dice;
  j["val_iou"] = run.val_iou;
  j["val_dice_mean_fg"] = run.val_dice_mean_fg;
  j["val_iou_mean_fg"] = run.val_iou_mean_fg;
  j["steps_to_target"] = or_null(run.steps_to_target);
  const Curves& c = run.curves;
  j["curves"] = {{"step", c.step}, {"seconds", c.seconds}, {"loss", c.loss}, {"scale", c.scale}, {"lr", c.lr},
                 {"eval_step", c.eval_step}, {"eval_seconds", c.eval_seconds}, {"eval_dice", c.eval_dice}};
  j["skipped_steps"] = run.skipped_steps;
  j["first_nonfinite_step"] = or_null(run.first_nonfinite_step);
  Json& nonfinite = j["nonfinite_params"] = Json::array();
  for (const auto& [step, params] : run.nonfinite_params) {
    Json names = Json::array();
    for (const auto& [name, count] : params) names.push_back({{"name", name}, {"count", count}});
    nonfinite.push_back({{"step", step}, {"params", std::move(names)}});
  }
  Json& underflow = j["underflow"] = Json::array();
  for (const UnderflowSample& s : run.underflow) underflow.push_back(underflow_json(s));
  Json& updates = j["updates"] = Json::array();
  for (const UpdateSample& u : run.updates) updates.push_back(update_json(u));
  Json& fallbacks = j["fallback_events"] = Json::array();
  for (const FallbackEvent& e : run.fallback_events)
    fallbacks.push_back({{"step", e.step}, {"module", e.module}, {"reason", e.reason}});
  j["dtypes"] = {{"params", run.params_dtype}, {"activations", run.activations_dtype}, {"grads", run.grads_dtype},
                 {"optimizer_state", run.optimizer_state_dtype}};
  j["optimizer_name"] = run.optimizer_name;
  j["cpu_isa"] = run.cpu_isa;
  j["cpu_bf16_kernel"] = run.cpu_bf16_kernel;
  j["cpu_dot_vs_fma"] = run.cpu_dot_vs_fma;
  j["diagnosis"] = run.diagnosis;
  j["numerics_worst"] = run.numerics_worst;
  j["adam_v_flushed_fraction"] = run.adam_v_flushed_fraction;
  return j;
}

std::string json_report(const Report& r) {
  Json j;
  j["config"] = config_json(r.config);
  const Machine& m = r.machine;
  j["machine"] = {{"cpu_model", m.cpu_model}, {"threads", m.threads}, {"gpu", m.gpu}, {"compiler", m.compiler},
                  {"build_type", m.build_type}, {"ranks", m.ranks},
                  {"scaling", scaling_line(r)}};  // runs' images_per_s are per rank
  j["target_dice"] = r.target_dice;
  Json& runs = j["runs"] = Json::array();
  for (const RunResult& run : r.runs) runs.push_back(run_json(run));
  if (!r.compare_text.empty()) j["compare_text"] = r.compare_text;
  return json_text(j) + "\n";
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
