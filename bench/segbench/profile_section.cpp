// segbench's op profile: the summary of one profiled step per mode, its trace file, and
// the report section (one table over the modes, top ops per mode, a computed diagnosis).
#include "bench/segbench/profile_section.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <vector>

#include "tools/svg_plot.h"

namespace hg::segbench {

namespace {

bool is_gemm(const std::string& stub) {
  return stub == "linear" || stub == "bmm" || stub.rfind("conv2d_", 0) == 0;
}
bool is_elementwise(const std::string& stub) {
  return stub == "unary" || stub == "binary" || stub == "where" || stub == "copy" || stub == "fill";
}
bool is_reduced(const std::string& dtype) { return dtype == "f16" || dtype == "bf16"; }

std::string num(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}
std::string pct(double part, double whole) { return whole > 0 ? num(100.0 * part / whole, 0) + "%" : "n/a"; }

}  // namespace

OpProfile summarize_op_profile(const Profiler& prof, int64_t step, size_t top_rows) {
  OpProfile p;
  p.step = step;
  p.wall_ms = static_cast<double>(prof.wall_ns()) / 1e6;
  for (const OpStats& s : prof.key_averages()) {
    const double ms = static_cast<double>(s.total_ns) / 1e6;
    const bool cast = s.name == "cast";
    p.op_ms += ms;
    (cast ? p.cast_ms : is_reduced(s.dtype) ? p.reduced_ms : s.dtype == "f32" ? p.f32_ms : p.other_dtype_ms) += ms;
    if (!cast) (is_gemm(s.stub) ? p.gemm_ms : is_elementwise(s.stub) ? p.elementwise_ms : p.other_kind_ms) += ms;
    if (!cast && is_elementwise(s.stub) && is_reduced(s.dtype)) p.reduced_elementwise_ms += ms;
    if (s.stub.rfind("conv2d_", 0) == 0) p.conv_gflop += s.flops / 1e9, p.conv_ms += ms;
    if (p.device.empty()) p.device = s.kernel.rfind("avx", 0) == 0 || s.kernel == "amx" ? "cpu" : "cuda";
    if (p.top.size() < top_rows)
      p.top.push_back({s.name, s.backward ? "bwd" : "fwd", s.dtype, s.kernel, s.calls, ms, s.gflops_per_s()});
  }
  return p;
}

void finish_op_profile(Profiler& prof, const Config& cfg, const std::string& precision, int64_t step,
                       std::optional<OpProfile>& kept) {
  prof.stop();
  OpProfile p = summarize_op_profile(prof, step);
  const double op_ms = p.op_ms;
  if (!kept || op_ms < kept->op_ms) {
    if (!cfg.out.empty()) {
      p.trace_file = "trace_" + precision + ".json";
      prof.write_chrome_trace(cfg.out + "/" + p.trace_file);
    }
    if (p.device == "cpu") p.peak_gflops = fma_peak_gflops();
    if (kept) {
      p.profiled_steps = std::move(kept->profiled_steps);
      p.profiled_op_ms = std::move(kept->profiled_op_ms);
    }
    kept = std::move(p);
  }
  kept->profiled_steps.push_back(step);
  kept->profiled_op_ms.push_back(op_ms);
}

namespace {
// (slowest - fastest) / fastest over the profiled steps' op time; 0 for one step.
double relative_spread(const OpProfile& p) {
  if (p.profiled_op_ms.size() < 2) return 0;
  const auto [lo, hi] = std::minmax_element(p.profiled_op_ms.begin(), p.profiled_op_ms.end());
  return *lo > 0 ? (*hi - *lo) / *lo : 0;
}
}  // namespace

std::string op_profile_diagnosis(const std::string& mode, const OpProfile& p, const OpProfile* fp32) {
  std::ostringstream os;
  const std::string conv_rate = p.conv_ms > 0 ? num(p.conv_gflop / (p.conv_ms / 1e3), 1) : "n/a";
  const std::string peak = p.peak_gflops > 0 ? " (" + pct(p.conv_ms > 0 ? p.conv_gflop / (p.conv_ms / 1e3) : 0, p.peak_gflops) +
                                                   " of the measured f32 FMA peak, " + num(p.peak_gflops, 0) + " GFLOP/s)"
                                             : "";
  if (!fp32 || mode == "fp32") {
    os << mode << ": matrix products and convolutions take " << pct(p.gemm_ms, p.op_ms) << " of the op time, elementwise ops "
       << pct(p.elementwise_ms, p.op_ms) << ", casts " << pct(p.cast_ms, p.op_ms) << ", the rest "
       << pct(p.other_kind_ms, p.op_ms) << "; its convolutions run at " << conv_rate << " GFLOP/s" << peak << ".";
    return os.str();
  }
  const double extra = p.op_ms - fp32->op_ms;
  struct Part {
    const char* what;
    double delta;
  };
  std::vector<Part> parts{{"matrix products and convolutions", p.gemm_ms - fp32->gemm_ms},
                          {"elementwise ops", p.elementwise_ms - fp32->elementwise_ms},
                          {"casts", p.cast_ms - fp32->cast_ms},
                          {"other ops (normalisation, pooling, losses, optimizer)", p.other_kind_ms - fp32->other_kind_ms}};
  std::stable_sort(parts.begin(), parts.end(), [&](const Part& a, const Part& b) {
    return extra >= 0 ? a.delta > b.delta : a.delta < b.delta;
  });
  // A difference inside the profiled steps' own spread (or 3%) is not a difference.
  const double noise = std::max({0.03, relative_spread(p), relative_spread(*fp32)});
  os << mode << "'s ops took " << num(p.op_ms, 1) << " ms against fp32's " << num(fp32->op_ms, 1) << " ms ("
     << (extra >= 0 ? "+" : "") << pct(extra, fp32->op_ms) << "), so " << mode << " is ";
  if (std::abs(extra) <= noise * fp32->op_ms)
    os << "as fast as fp32 here, within this measurement's noise (" << pct(noise * fp32->op_ms, fp32->op_ms)
       << ": the spread of the profiled steps' op time, at least 3%). ";
  else
    os << (extra > 0 ? "not faster" : "faster") << " than fp32 here. ";
  const double whole = std::abs(extra);
  os << "Of the " << num(whole, 1) << " ms " << (extra >= 0 ? "extra" : "saved") << ", ";
  bool first = true;
  for (const Part& part : parts) {
    if ((extra >= 0) != (part.delta >= 0) || std::abs(part.delta) < 0.005 * whole) continue;
    os << (first ? "" : ", ") << pct(std::abs(part.delta), whole) << " is " << part.what;
    first = false;
  }
  if (first) os << "no kind of op stands out";
  os << ".";
  std::string against;  // the kinds that went the other way
  for (const Part& part : parts)
    if ((extra >= 0) != (part.delta >= 0) && std::abs(part.delta) >= 0.005 * whole)
      against += std::string(against.empty() ? "" : " and ") + part.what + (part.delta < 0 ? " got faster" : " got slower") +
                 " by " + num(std::abs(part.delta), 1) + " ms";
  if (!against.empty()) os << " Against that, " << against << ".";
  if (p.reduced_elementwise_ms > 0)
    os << " Elementwise ops in f16/bf16 take " << num(p.reduced_elementwise_ms, 1) << " ms ("
       << pct(p.reduced_elementwise_ms, p.op_ms) << " of " << mode << "'s op time)"
       << (p.device == "cpu" ? "; this CPU has no f16/bf16 arithmetic, so each element is converted to f32 and back in "
                               "software"
                             : "")
       << ".";
  os << " Its convolutions run at " << conv_rate << " GFLOP/s against fp32's "
     << (fp32->conv_ms > 0 ? num(fp32->conv_gflop / (fp32->conv_ms / 1e3), 1) : "n/a") << peak << ".";
  return os.str();
}

namespace {

struct Section {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
};

Section mode_table(const Report& r) {
  Section t{{"Mode", "Step ms", "Op ms", "f16/bf16 ops", "f32 ops", "Casts", "GEMM/conv", "Elementwise", "Other",
             "Conv GFLOP/s", "% of peak"},
            {}};
  for (const RunResult& run : r.runs) {
    if (!run.op_profile) continue;
    const OpProfile& p = *run.op_profile;
    const double rate = p.conv_ms > 0 ? p.conv_gflop / (p.conv_ms / 1e3) : 0;
    t.rows.push_back({run.precision, num(p.wall_ms, 1), num(p.op_ms, 1), pct(p.reduced_ms, p.op_ms), pct(p.f32_ms, p.op_ms),
                      pct(p.cast_ms, p.op_ms), pct(p.gemm_ms, p.op_ms), pct(p.elementwise_ms, p.op_ms),
                      pct(p.other_kind_ms, p.op_ms), num(rate, 1), p.peak_gflops > 0 ? pct(rate, p.peak_gflops) : "n/a"});
  }
  return t;
}

Section top_table(const OpProfile& p) {
  Section t{{"Op", "Phase", "DType", "Calls", "ms", "% of ops", "GFLOP/s", "Kernel"}, {}};
  for (const OpProfileRow& row : p.top)
    t.rows.push_back({row.name, row.phase, row.dtype, std::to_string(row.calls), num(row.ms, 2), pct(row.ms, p.op_ms),
                      row.gflops_per_s > 0 ? num(row.gflops_per_s, 1) : "-", row.kernel});
  return t;
}

const OpProfile* fp32_profile(const Report& r) {
  for (const RunResult& run : r.runs)
    if (run.precision == "fp32" && run.op_profile) return &*run.op_profile;
  return nullptr;
}

std::string md_table(const Section& t) {
  std::string s = "|", rule = "|";
  for (const std::string& h : t.header) s += " " + h + " |", rule += h == t.header.front() ? " --- |" : " ---: |";
  s += "\n" + rule + "\n";
  for (const auto& row : t.rows) {
    s += "|";
    for (const std::string& c : row) s += " " + c + " |";
    s += "\n";
  }
  return s;
}

std::string html_table(const Section& t) {
  std::string s = "<table>\n<tr>";
  for (const std::string& h : t.header) s += "<th>" + plot::xml_escape(h) + "</th>";
  s += "</tr>\n";
  for (const auto& row : t.rows) {
    s += "<tr>";
    for (const std::string& c : row) s += "<td>" + plot::xml_escape(c) + "</td>";
    s += "</tr>\n";
  }
  return s + "</table>\n";
}

constexpr const char* kIntro =
    "Each mode's fastest of its profiled steps ({STEPS}), op by op (hg::Profiler; docs/profiler.md): on a shared "
    "machine a preempted op only gets slower, so the fastest step is the least disturbed; each mode's section "
    "lists every profiled step's op time. Percentages are of the op time, the sum over the step's top-level op "
    "dispatches; open the traces in chrome://tracing or ui.perfetto.dev.";

// "Op ms per profiled step: 2: 118.7 (kept), 3: 120.1, 4: 119.0."
std::string profiled_steps_line(const OpProfile& p) {
  if (p.profiled_steps.size() < 2) return "";
  std::string s = "Op ms per profiled step: ";
  for (size_t i = 0; i < p.profiled_steps.size(); ++i) {
    s += (i ? ", " : "") + std::string("step ") + std::to_string(p.profiled_steps[i]) + " " + num(p.profiled_op_ms[i], 1);
    if (p.profiled_steps[i] == p.step) s += " (kept)";
  }
  return s + ". ";
}

std::string intro(const Report& r) {
  std::string s = kIntro;
  for (const RunResult& run : r.runs)
    if (run.op_profile) {
      const std::vector<int64_t>& st = run.op_profile->profiled_steps;
      const std::string steps = st.size() <= 1 ? "step " + std::to_string(run.op_profile->step)
                                                 : "steps " + std::to_string(st.front()) + "-" + std::to_string(st.back());
      return s.replace(s.find("{STEPS}"), 7, steps);
    }
  return "";
}

}  // namespace

std::string op_profile_markdown(const Report& r) {
  const std::string text = intro(r);
  if (text.empty()) return "";
  std::ostringstream md;
  md << "\n## Op profile\n\n" << text << "\n\n" << md_table(mode_table(r));
  for (const RunResult& run : r.runs) {
    if (!run.op_profile) continue;
    const OpProfile& p = *run.op_profile;
    md << "\n### " << run.precision << " (trace: " << (p.trace_file.empty() ? "not written" : p.trace_file) << ")\n\n"
       << md_table(top_table(p)) << "\n" << profiled_steps_line(p) << op_profile_diagnosis(run.precision, p, fp32_profile(r))
       << "\n";
  }
  return md.str();
}

std::string op_profile_html(const Report& r) {
  const std::string text = intro(r);
  if (text.empty()) return "";
  std::ostringstream h;
  h << "<h2>Op profile</h2>\n<p>" << plot::xml_escape(text) << "</p>\n" << html_table(mode_table(r));
  for (const RunResult& run : r.runs) {
    if (!run.op_profile) continue;
    const OpProfile& p = *run.op_profile;
    h << "<h3>" << plot::xml_escape(run.precision) << "</h3>\n" << html_table(top_table(p)) << "<p>"
      << plot::xml_escape(profiled_steps_line(p) + op_profile_diagnosis(run.precision, p, fp32_profile(r))) << "</p>\n";
  }
  return h.str();
}

}  // namespace hg::segbench
