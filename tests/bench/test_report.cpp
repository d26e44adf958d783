// segbench's report writers on a synthetic three-run report (a NaN that stops fp16, skipped
// steps under loss scaling, underflow samples): every file is written and well formed, and
// report.json's layout and the SVG plots handle escaping, NaN and log2 axes.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/segbench/json_text.h"
#include "bench/segbench/report.h"
#include "bench/segbench/report_parts.h"
#include "tools/svg_plot.h"
#include "framework/error.h"

using namespace hg::segbench;
namespace plot = hg::plot;
namespace fs = std::filesystem;

namespace {

// A strict JSON validator (RFC 8259 grammar; no NaN, no trailing commas).
struct JsonChecker {
  const std::string& s;
  size_t i = 0;
  void ws() {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t')) ++i;
  }
  bool lit(const char* word) {
    const size_t n = std::strlen(word);
    if (s.compare(i, n, word) != 0) return false;
    i += n;
    return true;
  }
  bool digits() {
    const size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i;
    return i > start;
  }
  bool string() {
    if (!lit("\"")) return false;
    while (i < s.size() && s[i] != '"') {
      if (static_cast<unsigned char>(s[i]) < 0x20) return false;
      if (s[i++] != '\\') continue;
      if (i >= s.size()) return false;
      const char e = s[i++];
      if (e == 'u') {
        for (int k = 0; k < 4; ++k, ++i)
          if (i >= s.size() || !std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
      } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
        return false;
      }
    }
    return lit("\"");
  }
  bool number() {
    lit("-");
    if (!lit("0") && !digits()) return false;
    if (lit(".") && !digits()) return false;
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      ++i;
      if (!lit("+")) lit("-");
      if (!digits()) return false;
    }
    return true;
  }
  bool value() {
    ws();
    if (i >= s.size()) return false;
    bool ok;
    if (lit("{")) {
      ws();
      ok = lit("}");
      while (!ok) {
        ws();
        if (!string()) return false;
        ws();
        if (!lit(":") || !value()) return false;
        ws();
        if (lit("}")) ok = true;
        else if (!lit(",")) return false;
      }
    } else if (lit("[")) {
      ws();
      ok = lit("]");
      while (!ok) {
        if (!value()) return false;
        ws();
        if (lit("]")) ok = true;
        else if (!lit(",")) return false;
      }
    } else {
      ok = s[i] == '"' ? string() : lit("true") || lit("false") || lit("null") || number();
    }
    ws();
    return ok;
  }
  bool document() { return value() && i == s.size(); }
};

bool valid_json(const std::string& text) { return JsonChecker{text}.document(); }

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

std::vector<LayerStats> layers(double zero_scale) {
  std::vector<LayerStats> out;
  for (int k = 0; k < 12; ++k) {
    LayerStats l;
    l.name = "enc" + std::to_string(k / 2) + (k % 2 ? ".bias" : ".conv.weight");
    l.grad_zero_fraction = zero_scale * k / 24.0;
    l.grad_underflow_fraction = 0.01 * k;
    l.grad_subnormal_fraction = 0.02;
    l.update_lost_fraction = zero_scale * 0.1;
    l.grad_amax = 0.5 / (k + 1);
    l.grad_norm = 1.0 / (k + 1);
    out.push_back(l);
  }
  return out;
}

RunResult make_run(const std::string& precision, int64_t steps, bool scaled) {
  RunResult r;
  r.precision = precision;
  r.device = "cpu";
  r.description = precision + " run";
  r.steps_done = steps;
  r.total_seconds = 0.05 * static_cast<double>(steps);
  r.images_per_s = precision == "fp32" ? 80 : 95;
  r.step = {12.5, 14.0};
  r.forward = {4, 5};
  r.backward = {7, 8};
  r.optimizer = {1.5, 1.9};
  r.peak_bytes = 48 << 20;
  r.max_rss_bytes = 300 << 20;
  r.final_loss = 0.4;
  r.val_dice = {0.98, 0.9, 0.8, 0.6};
  r.val_iou = {0.96, 0.82, 0.67, 0.43};
  r.val_dice_mean_fg = 0.7667;
  r.val_iou_mean_fg = 0.64;
  for (int64_t s = 0; s < steps; ++s) {
    r.curves.step.push_back(s);
    r.curves.seconds.push_back(0.05 * static_cast<double>(s + 1));
    r.curves.loss.push_back(2.0 * std::exp(-0.03 * static_cast<double>(s)));
    r.curves.scale.push_back(scaled ? std::ldexp(1.0, 16 - static_cast<int>(std::min<int64_t>(s, 3))) : 1.0);
    r.curves.lr.push_back(1e-3);
    if (s % 20 == 19) {
      r.curves.eval_step.push_back(s);
      r.curves.eval_seconds.push_back(0.05 * static_cast<double>(s + 1));
      r.curves.eval_dice.push_back(0.3 + 0.01 * static_cast<double>(s));
    }
  }
  r.underflow = {{10, layers(scaled ? 0.2 : 0.1), {}}, {steps - 1, layers(scaled ? 0.3 : 0.1), {}}};
  const bool f16 = precision != "fp32";
  r.params_dtype = scaled ? "f32" : precision == "fp32" ? "f32" : "f16";
  r.activations_dtype = r.compute_dtype = f16 ? "f16" : "f32";
  r.grads_dtype = scaled ? "f16 -> f32" : r.params_dtype;
  r.optimizer_state_dtype = "m, v f32";
  r.optimizer_name = "Adam";
  r.cpu_isa = "avx2";
  // Logit gradients: fp32's unscaled, 70 of 100 at or below 2^-25; amp's scaled f16, 2 flushed.
  GradientExponents& e = r.underflow.back().logits;
  e.dtype = f16 ? "f16" : "f32";
  e.scale = scaled ? 8192 : 1;
  e.numel = 100;
  e.bins.assign(GradientExponents::kHi - GradientExponents::kLo + 1, 0);
  if (f16) {
    e.zeros = 2;
    e.subnormal = 8;
    e.bins[static_cast<size_t>(-16 - GradientExponents::kLo)] = 8;
    e.bins[static_cast<size_t>(-8 - GradientExponents::kLo)] = 90;
  } else {
    e.flush = 70;
    e.would_flush = 0.7;
    e.bins[static_cast<size_t>(-30 - GradientExponents::kLo)] = 70;
    e.bins[static_cast<size_t>(-20 - GradientExponents::kLo)] = 30;
  }
  r.sample_predictions.assign(3, std::vector<int64_t>(16 * 16, 1));
  return r;
}

Report make_report() {
  Report rep;
  rep.config.precisions = {"fp32", "amp", "fp16"};
  rep.config.device = "cpu";
  rep.config.steps = 60;
  rep.config.batch = 4;
  rep.config.size = 16;
  rep.config.width = 8;
  rep.config.eval_every = 20;
  rep.config.compare = "amp";
  rep.machine = {"Test CPU \"quoted\"", 2, "", "g++ 12", "release"};
  rep.runs.push_back(make_run("fp32", 60, false));
  RunResult amp = make_run("amp", 60, true);
  amp.skipped_steps = {0, 1, 2};
  amp.steps_to_target = 40;
  amp.fallback_events.push_back({5, "dec1.conv", "overflow in f16 \u2192 ran in f32"});
  rep.runs.push_back(amp);
  RunResult fp16 = make_run("fp16", 26, false);
  fp16.curves.loss.back() = NAN;
  fp16.curves.loss[24] = INFINITY;
  fp16.stopped_early = true;
  fp16.stop_reason = "non-finite loss without loss scaling";
  fp16.first_nonfinite_step = 24;
  fp16.final_loss = NAN;
  fp16.val_dice_mean_fg = NAN;
  fp16.nonfinite_params = {{25, {{"enc0.conv.weight", 72}}}};
  fp16.diagnosis = "Gradients flushed to zero in f16.\nAdam's eps (1e-8) is 0 in f16.";
  rep.runs.push_back(fp16);
  for (int k = 0; k < 3; ++k) {
    rep.sample_images.emplace_back(16 * 16, 0.25f * static_cast<float>(k));
    rep.sample_truths.emplace_back(16 * 16, k);
  }
  rep.compare_text = "layer | max rel err\n``` not a fence end\nlogits | 3e-3";
  return rep;
}

struct TempDir {
  fs::path path = fs::temp_directory_path() / ("hg_test_report_" + std::to_string(getpid()));
  TempDir() { fs::remove_all(path); }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("report: every file is written and well formed", "[report]") {
  TempDir tmp;
  const Report rep = make_report();
  write_report(rep, (tmp.path / "out").string());
  const fs::path dir = tmp.path / "out";
  for (const char* f : {"report.json", "metrics.csv", "report.md", "report.html", "samples.png", "grad_exponents.svg"}) {
    INFO(f);
    REQUIRE(fs::exists(dir / f));
    CHECK(fs::file_size(dir / f) > 0);
  }
  CHECK(std::distance(fs::directory_iterator(dir), fs::directory_iterator()) == 6);  // no temporaries left

  const std::string json = read(dir / "report.json");
  CHECK(valid_json(json));
  for (const char* p : {"fp32", "amp", "fp16"}) CHECK(count(json, std::string("\"precision\": \"") + p + "\"") == 1);
  CHECK(count(json, "\"first_nonfinite_step\": null") == 2);
  CHECK(json.find("\"first_nonfinite_step\": 24") != std::string::npos);
  CHECK(json.find("\"final_loss\": null") != std::string::npos);
  CHECK(json.find("\"val_dice_mean_fg\": 0.7667") != std::string::npos);  // RunResult's names, flat
  CHECK(json.find("\"val_dice_mean_fg\": null") != std::string::npos);
  CHECK(json.find("null, null]") != std::string::npos);  // fp16's last two losses: inf, NaN
  CHECK(json.find("\"steps_to_target\": 40") != std::string::npos);
  CHECK(json.find("\"skipped_steps\": [0, 1, 2]") != std::string::npos);
  CHECK(json.find("Test CPU \\\"quoted\\\"") != std::string::npos);
  CHECK(json.find("sample_predictions") == std::string::npos);

  const std::string csv = read(dir / "metrics.csv");
  CHECK(csv.rfind("precision,step,seconds,loss,scale,lr,eval_dice\n", 0) == 0);
  CHECK(count(csv, "\n") == 1 + 60 + 60 + 26);
  std::istringstream lines(csv);
  std::string line;
  int evaluations = 0;
  std::getline(lines, line);
  while (std::getline(lines, line)) {
    CHECK(count(line, ",") == 6);
    evaluations += line.back() != ',';
  }
  CHECK(evaluations == 3 + 3 + 1);
  CHECK(csv.find("\nfp16,25,") != std::string::npos);
  CHECK(csv.find(",nan,1,0.001,\n") != std::string::npos);
  CHECK(csv.find(",inf,1,0.001,\n") != std::string::npos);
  CHECK(csv.find("\namp,1,0.1,") != std::string::npos);

  const std::string md = read(dir / "report.md");
  for (const char* p : {"| fp32 |", "| amp |", "| fp16 |"}) CHECK(count(md, p) == 2);  // summary, precision per mode
  CHECK(md.find("widened to f32") != std::string::npos);
  CHECK(md.find("| 24 (run stopped) |") != std::string::npos);
  // amp runs at 95 img/s, fp32 at 80: 1.1875, but its f16 was widened to f32 on this path.
  CHECK(md.find("| n/a (widened to f32; 1.19\u00d7 measured) |") != std::string::npos);
  CHECK(md.find("| 1.00\u00d7 |") != std::string::npos);
  CHECK(md.find("CPU kernel path avx2") != std::string::npos);
  // Precision per mode. amp: scale 65536 halved to 8192; stored zeros mean over both samples
  // and 12 layers of 0.2k/24 and 0.3k/24 (k = 0..11) = 0.25 * 5.5 / 24 = 5.7%; logits 2 of 100.
  CHECK(md.find("| amp | Adam | f32 | f16 | f16 -> f32 | m, v f32 | 8192 / 8192 | 3 | 5.7% / 2.0% | \u2013 / \u2013 |") !=
        std::string::npos);
  // fp32: nothing stored in f16; its counterfactual: 0.01k mean 5.5% (weights), 70% (logits).
  CHECK(md.find("| fp32 | Adam | f32 | f32 | f32 | m, v f32 | \u2013 (no scaler) | 0 | \u2013 / \u2013 | 5.5% / 70.0% |") !=
        std::string::npos);
  CHECK(md.find("![gradient exponents of the logits](grad_exponents.svg)") != std::string::npos);
  const std::string svg = read(dir / "grad_exponents.svg");
  CHECK(svg.find("would flush if stored in f16 70.0%") != std::string::npos);
  CHECK(svg.find("flushed (stored zeros) 2.0%") != std::string::npos);
  CHECK(svg.find("scaled by 8192") != std::string::npos);
  CHECK(json.find("\"logits_grad\"") != std::string::npos);
  CHECK(md.find(rep.compare_text) != std::string::npos);
  CHECK(md.find("## Gradient underflow: amp at step 59") != std::string::npos);
  CHECK(md.find("overflow in f16") != std::string::npos);
  CHECK(summary_table(rep).find("| amp |") != std::string::npos);

  const std::string html = read(dir / "report.html");
  CHECK(count(html, "<svg") == 7);  // loss x2, Dice x2, loss scale, gradient exponents, per-layer zeros
  CHECK(html.find("<script") == std::string::npos);
  CHECK(html.find("src=\"http") == std::string::npos);
  CHECK(html.find("<link") == std::string::npos);
  CHECK(html.find("src=\"samples.png\"") != std::string::npos);
  CHECK(html.find("widened to f32") != std::string::npos);
  CHECK(html.find("Adam&#39;s eps") != std::string::npos);
  CHECK(html.find("nan") == std::string::npos);
  CHECK(count(html, "<html") == 1);
  CHECK(count(html, "</html>") == 1);
}

TEST_CASE("report: on AMX the speed-up column shows the measured ratio of f16 and bf16, on AVX-512 the caveat",
          "[report]") {
  Report rep = make_report();
  for (RunResult& r : rep.runs) r.cpu_isa = "amx";
  const RunResult& fp32 = rep.runs.front();
  const RunResult& amp = rep.runs[1];
  REQUIRE(amp.compute_dtype == "f16");
  CHECK(speedup_cell(amp, &fp32) == "1.19\u00d7");  // 95 / 80 img/s, products on AMX tiles
  CHECK(cpu_path_text(rep).find("on AMX tiles") != std::string::npos);
  CHECK(summary_table(rep).find("widened to f32;") == std::string::npos);
  for (RunResult& r : rep.runs) r.cpu_isa = "avx512", r.cpu_bf16_kernel = "avx512 f32 14x32";  // no vdpbf16ps: widened
  CHECK(speedup_cell(rep.runs[1], &rep.runs.front()) == "n/a (widened to f32; 1.19\u00d7 measured)");
  CHECK(cpu_path_text(rep) == "CPU kernel path avx512 (f16/bf16 widened to f32 for arithmetic)");
  for (RunResult& r : rep.runs) r.cpu_dot_vs_fma = 0.5;  // vdpbf16ps there, measured too slow
  CHECK(cpu_path_text(rep).find("vdpbf16ps measured at 0.50x the f32 FMA's multiply-adds here, too slow") !=
        std::string::npos);
}

TEST_CASE("report: where bf16 products ran on vdpbf16ps, bf16's speed-up is measured, f16's keeps the caveat",
          "[report]") {
  Report rep = make_report();
  for (RunResult& r : rep.runs) r.cpu_isa = "avx512", r.cpu_bf16_kernel = "avx512_bf16 bf16 pairs 14x32", r.cpu_dot_vs_fma = 1.9;
  RunResult bf = rep.runs[1];
  bf.compute_dtype = "bf16";
  CHECK(speedup_cell(bf, &rep.runs.front()) == "1.19\u00d7");
  CHECK(speedup_cell(rep.runs[1], &rep.runs.front()) == "n/a (widened to f32; 1.19\u00d7 measured)");  // f16
  CHECK(cpu_path_text(rep).find("on vdpbf16ps, measured at 1.90x") != std::string::npos);
}

TEST_CASE("report: a GPU run has no CPU note, no samples no PNG", "[report]") {
  TempDir tmp;
  Report rep = make_report();
  for (RunResult& r : rep.runs) {
    r.device = "cuda";
    r.sample_predictions.clear();
  }
  write_report(rep, tmp.path.string());
  CHECK_FALSE(fs::exists(tmp.path / "samples.png"));
  CHECK(read(tmp.path / "report.md").find("widened to f32") == std::string::npos);
  const std::string html = read(tmp.path / "report.html");
  CHECK(html.find("widened to f32") == std::string::npos);
  CHECK(html.find("samples.png") == std::string::npos);
  CHECK(summary_table(rep).find("widened to f32") == std::string::npos);
}

TEST_CASE("report: a report without runs or samples is still complete", "[report]") {
  TempDir tmp;
  Report rep;
  rep.config.device = "cpu";
  write_report(rep, tmp.path.string());
  for (const char* f : {"report.json", "metrics.csv", "report.md", "report.html"})
    CHECK(fs::file_size(tmp.path / f) > 0);
  CHECK(valid_json(read(tmp.path / "report.json")));
  CHECK(read(tmp.path / "metrics.csv") == "precision,step,seconds,loss,scale,lr,eval_dice\n");
  const std::string html = read(tmp.path / "report.html");
  CHECK(count(html, "<svg") == 5);
  CHECK(count(html, ">no data</text>") == 5);
}

TEST_CASE("report: an unwritable folder is an hg::Error", "[report]") {
  TempDir tmp;
  fs::create_directories(tmp.path);
  std::ofstream(tmp.path / "a_file") << "x";
  CHECK_THROWS_AS(write_report(make_report(), (tmp.path / "a_file" / "out").string()), hg::Error);
  CHECK_THROWS_AS(write_report(make_report(), (tmp.path / "a_file").string()), hg::Error);
}

TEST_CASE("report.json text: escaping, NaN as null, flat containers on one line", "[report]") {
  using Json = nlohmann::ordered_json;
  Json j;
  j["a"] = std::vector<double>{1, NAN, 2.5, -INFINITY};
  j["s"] = "a\"b\\c\nd\te\x01\x1f \u00e9\u2192";
  j["n"] = nullptr;
  j["o"] = Json::array({Json{{"t", true}, {"k", 3}}, Json::array(), Json{{"v", {1, 2}}}});
  j["section"] = {{"x", 1}, {"y", "z"}};
  j["bad"] = std::string("\xff");
  const std::string text = json_text(j);
  CHECK(valid_json(text));
  CHECK(text.rfind("{\n  \"a\": [1.0, null, 2.5, null],\n  \"s\": ", 0) == 0);  // keys in the order given
  CHECK(text.find(R"("s": "a\"b\\c\nd\te\u0001\u001f )" "\u00e9\u2192\"") != std::string::npos);
  CHECK(text.find("\"n\": null") != std::string::npos);
  // A flat record on one line, an empty array, and an object holding an array spread out.
  CHECK(text.find("\"o\": [\n    {\"t\": true, \"k\": 3},\n    [],\n    {\n      \"v\": [1, 2]\n    }\n  ]") !=
        std::string::npos);
  // The top object's sections are listed key by key even when flat.
  CHECK(text.find("\"section\": {\n    \"x\": 1,\n    \"y\": \"z\"\n  }") != std::string::npos);
  CHECK(text.find("\"bad\": \"\xef\xbf\xbd\"") != std::string::npos);  // invalid UTF-8 becomes U+FFFD
  CHECK(text.back() == '}');
  CHECK(Json::parse(text)["a"][1].is_null());
}

TEST_CASE("svg plot: NaN points break the line, log2 axis, markers", "[report]") {
  plot::LinePlot p{.id = "t", .title = "loss <&>", .x_label = "step", .y_label = "loss"};
  p.series.push_back({"a", "", {0, 1, 2, 3, 4, 5}, {1, 2, NAN, 3, INFINITY, 4}, {}});
  p.series.push_back({"b", "#123456", {0, 1, 2}, {NAN, NAN, NAN}, {}});
  const std::string svg = plot::svg_line_plot(p);
  CHECK(svg.rfind("<svg", 0) == 0);
  CHECK(svg.find("loss &lt;&amp;&gt;") != std::string::npos);
  CHECK(count(svg, "<path fill=\"none\" stroke-width=\"1.8\"") == 1);  // only the segment 0-1 has two points
  CHECK(count(svg, "l-4.5 8h9z") == 5);                              // NaN, inf and b's three NaNs
  CHECK(svg.find("NaN/inf") != std::string::npos);
  CHECK(svg.find("nan") == std::string::npos);
  CHECK(svg.find("inf\"") == std::string::npos);

  plot::LinePlot s{.id = "s", .title = "scale", .x_label = "step", .y_label = "scale", .log2_y = true};
  s.series.push_back({"amp", "", {0, 1, 2, 3}, {65536, 32768, 32768, 0}, {1}});
  const std::string log_svg = plot::svg_line_plot(s);
  CHECK(log_svg.find(">16</tspan>") != std::string::npos);
  CHECK(log_svg.find(">15</tspan>") != std::string::npos);
  CHECK(count(log_svg, "l-4.5 -8h9z") == 1);  // the 0, unplottable on a log axis, at the bottom
  CHECK(log_svg.find("skipped step") != std::string::npos);
  CHECK(log_svg.find("nan") == std::string::npos);

  const std::string empty = plot::svg_line_plot({.id = "e", .title = "nothing", .x_label = "x", .y_label = "y"});
  CHECK(empty.find("no data") != std::string::npos);

  const std::string bars = plot::svg_bar_chart({.title = "u", .value_label = "v", .categories = {"w1", "w2"},
                                          .panels = {{"fp16", "", {0.5, NAN}}, {"amp", "", {0.0004}}}});
  CHECK(bars.find("50.0%") != std::string::npos);
  CHECK(bars.find("&lt;0.1%") != std::string::npos);
  CHECK(count(bars, "\u2013") == 2);  // NaN and the missing value
}
