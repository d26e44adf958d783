// Tour step 12 (docs/amp.md): a static loss scale. One f32 pass (S = 1, no autocast)
// measures the largest and smallest activation gradient; S is the largest power of two
// that keeps the largest one below 65504 / 8 (three doublings of headroom). For each S:
// how many of the f32 activation gradients, multiplied by S, f16 would flush to 0, keep
// subnormal or overflow (counted on the f32 pass), and, from a real autocast-f16 step at
// that S, the error of fc1's unscaled weight gradient against the f32 one.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>

#include "halfgrad.h"

using namespace hg;

namespace {

struct Counts {
  int64_t numel = 0, flush = 0, subnormal = 0, overflow = 0;
  double amax = 0, amin = INFINITY;
};

// One step at loss scale S; returns the activation-gradient counts and fc1's unscaled weight gradient.
Counts try_scale(MLP& model, const Tensor& x, const Tensor& y, double S, bool f16, Tensor* grad) {
  amp::NumericsMonitor mon(model, {.every = 1, .activations = false, .weights = false, .weight_grads = false});
  mon.begin_step(0);
  Tensor loss;
  {
    std::optional<amp::Autocast> ac;
    if (f16) ac.emplace(hg::f16);
    loss = mul(mse_loss(model(x), y), 1e-3);  // weighted down, as an auxiliary loss: small gradients
  }
  mul(loss, S).backward();
  mon.end_step();
  Counts c;
  for (const auto& r : mon.records()) {
    c.numel += r.stats.numel;
    c.flush += r.stats.f16_flush;
    c.subnormal += r.stats.f16_subnormal;
    c.overflow += r.stats.f16_overflow + r.stats.inf + r.stats.nan;
    c.amax = std::max(c.amax, r.stats.amax);
    if (r.stats.min_nonzero > 0) c.amin = std::min(c.amin, r.stats.min_nonzero);
  }
  *grad = mul(model.named_parameters()[0].second.grad(), 1.0 / S);
  model.zero_grad();
  return c;
}

}  // namespace

int main() {
  manual_seed(0);
  MLP model(16, {64, 64, 64}, 4);
  Generator gen(1);
  const Tensor x = randn({256, 16}, {}, &gen);
  const Tensor y = randn({256, 4}, {}, &gen);

  Tensor ref;
  const Counts f32c = try_scale(model, x, y, 1.0, false, &ref);
  const double S = std::exp2(std::floor(std::log2(65504.0 / 8 / f32c.amax)));
  std::printf("f32 pass: activation gradients from %.3g to %.3g (2^%.1f to 2^%.1f, a span of %.1f binades)\n",
              f32c.amin, f32c.amax, std::log2(f32c.amin), std::log2(f32c.amax), std::log2(f32c.amax / f32c.amin));
  std::printf("f16 keeps 2^-14 .. 65504 at full precision: 30 binades; chosen S = 2^%g (largest x S <= 65504 / 8)\n\n",
              std::log2(S));
  std::printf("%-7s %10s %9s %10s %9s  %s\n", "S", "act grads", "flushed", "subnormal", "overflow",
              "fc1.weight grad vs f32: |error| / |grad|");
  for (double s : {1.0, 0x1p8, 0x1p16, S, S * 16}) {
    Tensor g, unused;
    const Counts c = try_scale(model, x, y, s, false, &unused);  // what f16 would do to S x the f32 gradients
    try_scale(model, x, y, s, true, &g);                        // the real f16 step at S
    const double err = std::sqrt(sum(square(sub(g, ref))).item<double>() / sum(square(ref)).item<double>());
    char e[32];
    std::snprintf(e, sizeof e, std::isfinite(err) ? "%.2g" : "non-finite: a scaler skips", err);
    std::printf("2^%-5g %10lld %9lld %10lld %9lld  %s\n", std::log2(s), static_cast<long long>(c.numel),
                static_cast<long long>(c.flush), static_cast<long long>(c.subnormal),
                static_cast<long long>(c.overflow), e);
  }
  return 0;
}
