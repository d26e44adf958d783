// The report's precision pieces shared by report.md and report.html: the per-mode table
// (dtypes, loss scale, flushes in the gradients as stored next to the f16 counterfactual),
// the exponent-histogram panels, and the speed-up cell that says which CPU path ran.
#include <algorithm>
#include <cmath>

#include "bench/segbench/report_parts.h"

namespace hg::segbench {
namespace {

std::string pct(double v) { return std::isfinite(v) ? fixed(100 * v, 1) + "%" : "\u2013"; }

// Backward computed the weight gradients in f16 ("f16", "f16 -> f32"): their zeros are flushes.
bool f16_weight_grads(const RunResult& run) { return run.grads_dtype.rfind("f16", 0) == 0; }

// Mean over sampled steps and layers of a LayerStats fraction (negative values: n/a); NaN if none.
double mean_over_layers(const RunResult& run, double LayerStats::*field) {
  double s = 0;
  int64_t n = 0;
  for (const UnderflowSample& u : run.underflow)
    for (const LayerStats& l : u.layers)
      if (l.*field >= 0) {
        s += l.*field;
        ++n;
      }
  return n ? s / static_cast<double>(n) : NAN;
}

// Mean over sampled steps of a fraction of the stored logit gradient; NaN if none.
template <class F>
double mean_over_logits(const RunResult& run, F fraction) {
  double s = 0;
  int64_t n = 0;
  for (const UnderflowSample& u : run.underflow)
    if (u.logits.numel > 0) {
      s += fraction(u.logits);
      ++n;
    }
  return n ? s / static_cast<double>(n) : NAN;
}

const RunResult* run_named(const Report& r, const std::string& name) {
  const auto it = std::find_if(r.runs.begin(), r.runs.end(), [&](const RunResult& x) { return x.precision == name; });
  return it == r.runs.end() ? nullptr : &*it;
}

}  // namespace

double stored_f16_flushed(const RunResult& run) {
  return f16_weight_grads(run) ? mean_over_layers(run, &LayerStats::grad_zero_fraction) : NAN;
}

double logits_would_flush(const RunResult& run) {
  return mean_over_logits(run, [](const GradientExponents& e) { return e.dtype == "f16" ? NAN : e.would_flush; });
}

TextTable mode_cells(const Report& r) {
  TextTable t{.header = {"mode", "optimizer", "params", "activations", "weight grads", "optimizer state",
                         "loss scale final / min", "skipped steps", "stored f16 grads flushed: weights / logits",
                         "would flush if stored in f16 unscaled: weights / logits", "val Dice"}};
  for (const RunResult& run : r.runs) {
    std::string scale = "\u2013 (no scaler)";
    const bool scaled = std::any_of(run.curves.scale.begin(), run.curves.scale.end(), [](double v) { return v != 1; });
    if (scaled) {
      double lo = INFINITY;
      for (double v : run.curves.scale) lo = std::min(lo, v);
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g / %g", run.curves.scale.back(), lo);
      scale = buf;
    }
    const double logits_flushed =
        mean_over_logits(run, [](const GradientExponents& e) { return e.dtype == "f16" ? static_cast<double>(e.zeros) / e.numel : NAN; });
    const double weights_would = f16_weight_grads(run) ? NAN : mean_over_layers(run, &LayerStats::grad_underflow_fraction);
    t.rows.push_back({run.precision, run.optimizer_name, run.params_dtype, run.activations_dtype, run.grads_dtype,
                      run.optimizer_state_dtype, scale, std::to_string(run.skipped_steps.size()),
                      pct(stored_f16_flushed(run)) + " / " + pct(logits_flushed),
                      pct(weights_would) + " / " + pct(logits_would_flush(run)), fixed(run.val_dice_mean_fg, 3)});
  }
  return t;
}

std::string mode_legend() {
  return "Gradients are measured as backward stored them: still multiplied by the loss scale, in the dtype they "
         "were computed in, at every sampled step (mean over steps, and over layers for weights). In f16 a value "
         "with |g| <= 2^-25 rounds to 0 (flushes); (2^-25, 2^-14) is subnormal; >= 65520 overflows. \"stored f16 "
         "grads flushed\" counts zeros where backward computed in f16 (\u2013: the mode has no f16 gradients). "
         "\"would flush if stored in f16 unscaled\" is a counterfactual for gradients held wider than f16: "
         "nothing flushed there, but those values would if they were cast to f16 without a loss scale. "
         "weight grads \"f16 -> f32\": computed in f16 (autocast), widened into the f32 parameter's .grad.";
}

std::vector<ExponentPanel> exponent_panels(const Report& r) {
  std::vector<ExponentPanel> panels;
  for (const char* name : {"fp32", "amp"}) {
    const RunResult* run = run_named(r, name);
    if (!run) continue;
    for (auto it = run->underflow.rbegin(); it != run->underflow.rend(); ++it) {
      if (it->logits.numel == 0) continue;
      char scale[32];
      std::snprintf(scale, sizeof scale, "%g", it->logits.scale);
      const bool f16 = it->logits.dtype == "f16";
      panels.push_back({std::string(name) + ", step " + std::to_string(it->step) + ": logit gradients stored in " +
                            it->logits.dtype + (it->logits.scale != 1 ? ", scaled by " + std::string(scale) : ", unscaled") +
                            (f16 ? "" : " (the f16 bands are a counterfactual)"),
                        &it->logits});
      break;
    }
  }
  return panels;
}

std::string exponent_caption(const std::vector<ExponentPanel>& panels) {
  std::string c = "log2 |g| of the gradient of the logits (the U-Net's output) at the last sampled step, counted per "
                  "binade, over f16's bands.";
  if (panels.size() == 2)
    c += " fp32 holds it in f32, unscaled: the share in the flush band is what an f16 copy would lose. amp's loss "
         "scale shifts the whole distribution right by log2(scale) binades before backward stores it in f16, so "
         "almost nothing is left to flush.";
  return c;
}

namespace {

// Whether a CPU run's reduced-precision matrix products ran on a native unit: AMX tiles take
// bf16, and f16 as exact bf16 hi + lo pairs (the GEMM engine picks them for matmul, linear,
// and the larger convolutions); vdpbf16ps takes bf16 where it was chosen (where it outpaces the
// f32 FMA: the pair kernel for matmul, the tile kernels for most convolutions). Everything else widens f16/bf16 to
// f32 for the arithmetic.
bool native_matrix_products(const RunResult& run) {
  if (run.cpu_isa == "amx") return run.compute_dtype == "bf16" || run.compute_dtype == "f16";
  return run.compute_dtype == "bf16" && run.cpu_bf16_kernel.rfind("avx512_bf16", 0) == 0;
}

}  // namespace

std::string speedup_cell(const RunResult& run, const RunResult* fp32) {
  if (!fp32 || fp32->images_per_s <= 0 || run.images_per_s <= 0) return "\u2013";
  const std::string ratio = fixed(run.images_per_s / fp32->images_per_s, 2) + "\u00d7";
  // Where f16/bf16 were widened to f32 for every product, a ratio measures conversions and
  // memory traffic, not the format's arithmetic: said so, the number still shown.
  const bool widened = run.device == "cpu" && !run.compute_dtype.empty() && run.compute_dtype != "f32" &&
                       !native_matrix_products(run);
  return widened ? "n/a (widened to f32; " + ratio + " measured)" : ratio;
}

std::string cpu_path_text(const Report& r) {
  for (const RunResult& run : r.runs)
    if (run.device == "cpu" && !run.cpu_isa.empty())
      return "CPU kernel path " + run.cpu_isa +
             (run.cpu_isa == "amx" ? " (bf16 and f16 convolutions on AMX tiles, f16 as exact bf16 hi + lo pairs: most "
                                     "read straight from the padded image, the rest through the GEMM engine's tiles; "
                                     "the few-channel first layer and head, and elementwise ops, widened to f32)"
              : run.cpu_bf16_kernel.rfind("avx512_bf16", 0) == 0
                  ? " (bf16 on vdpbf16ps, measured at " + fixed(run.cpu_dot_vs_fma, 2) +
                        "x the f32 FMA's multiply-adds: 3x3 convolutions of 16 or more channels on long rows run the "
                        "AMX tile kernels with each tile product as vdpbf16ps, the other convolutions, matmul and linear "
                        "the GEMM engine's pair kernel; f16, the few-channel layers (f32 tiles) and elementwise ops "
                        "widened to f32)"
              : run.cpu_dot_vs_fma > 0
                  ? " (f16/bf16 widened to f32 for arithmetic: vdpbf16ps measured at " + fixed(run.cpu_dot_vs_fma, 2) +
                        "x the f32 FMA's multiply-adds here, too slow to pay)"
                  : " (f16/bf16 widened to f32 for arithmetic)");
  return "";
}

}  // namespace hg::segbench
