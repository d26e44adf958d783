// What the AMP debugging tools cost: median U-Net amp training step time with nothing
// attached, with the numerics monitor on a sampled step (all four tensor kinds), with
// the FP32 fallback's per-step overflow check, and under anomaly detection.
// Usage: numerics_overhead [steps per variant (default 12)] [batch] [size] [width]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

using Clock = std::chrono::steady_clock;

struct Setup {
  int64_t steps = 12, batch = 8, size = 64, width = 8;
};

// One training run with a debugging tool attached through `hook` (called before the
// step with begin = true and after unscale_ with begin = false).
struct Variant {
  Variant(const char* n, std::function<void(UNet&, int64_t, bool begin)> h) : name(n), hook(std::move(h)) {}
  const char* name;
  std::function<void(UNet&, int64_t, bool begin)> hook;
  std::unique_ptr<UNet> model;
  std::unique_ptr<optim::Adam> opt;
  std::unique_ptr<amp::GradScaler> scaler;
  std::vector<double> ms;
};

void setup(Variant& v, const Setup& s) {
  manual_seed(1);
  v.model = std::make_unique<UNet>(1, 4, s.width);
  v.opt = std::make_unique<optim::Adam>(v.model->named_parameters(), optim::AdamOptions{.lr = 1e-3});
  v.scaler = std::make_unique<amp::GradScaler>();
}

void step(Variant& v, int64_t i, const Tensor& x, const Tensor& y) {
  const auto t0 = Clock::now();
  v.hook(*v.model, i, true);
  Tensor loss;
  {
    amp::Autocast ac(f16);
    loss = cross_entropy((*v.model)(x).to(f32), y);
  }
  v.scaler->scale(loss).backward();
  v.scaler->unscale_(*v.opt);
  v.hook(*v.model, i, false);
  v.scaler->step(*v.opt);
  v.scaler->update();
  v.opt->zero_grad();
  v.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
}

double median_after_warmup(std::vector<double> ms) {
  ms.erase(ms.begin(), ms.begin() + std::min<ptrdiff_t>(2, static_cast<ptrdiff_t>(ms.size()) - 1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  Setup s;
  if (argc > 1) s.steps = std::max(3, std::atoi(argv[1]));
  if (argc > 2) s.batch = std::atoi(argv[2]);
  if (argc > 3) s.size = std::atoi(argv[3]);
  if (argc > 4) s.width = std::atoi(argv[4]);
  std::printf("U-Net amp step, batch %lld, %lldx%lld, width %lld, %lld steps per variant (median after 2 warm-up)\n",
              static_cast<long long>(s.batch), static_cast<long long>(s.size), static_cast<long long>(s.size),
              static_cast<long long>(s.width), static_cast<long long>(s.steps));

  std::optional<amp::NumericsMonitor> mon;
  std::optional<amp::Fp32Fallback> fb;
  std::optional<amp::DetectAnomaly> guard;
  size_t records = 0;
  std::vector<Variant> variants;
  variants.emplace_back("amp step, nothing attached", [](UNet&, int64_t, bool) {});
  variants.emplace_back("NumericsMonitor, sampled step (all kinds)", [&](UNet& m, int64_t i, bool begin) {
                        if (!mon) mon.emplace(m, amp::MonitorOptions{.every = 1});
                        if (begin) {
                          mon->begin_step(i);
                          return;
                        }
                        mon->end_step();
                        records = mon->records().size();  // includes reading the statistics back
                      });
  variants.emplace_back("Fp32Fallback check (every step)", [&](UNet& m, int64_t i, bool begin) {
                        if (!fb) fb.emplace(m, amp::FallbackOptions{.strikes = 3});
                        if (begin) fb->begin_step(i);
                        else fb->end_step();
                      });
  variants.emplace_back("DetectAnomaly (every op, synchronising)", [&](UNet&, int64_t, bool begin) {
                        if (begin) guard.emplace();
                        else guard.reset();
                      });
  for (Variant& v : variants) setup(v, s);
  Tensor x = rand({s.batch, s.size, s.size, 1});
  Tensor y = randint(0, 4, {s.batch, s.size, s.size});
  // Interleaved, so a change in machine load hits every variant alike.
  for (int64_t i = 0; i < s.steps; ++i)
    for (Variant& v : variants) step(v, i, x, y);
  const double base = median_after_warmup(variants[0].ms);

  std::printf("\n| variant | step ms (median) | overhead |\n| --- | ---: | ---: |\n");
  auto row = [&](const char* name, double ms) { std::printf("| %s | %.1f | %+.0f%% |\n", name, ms, 100.0 * (ms / base - 1)); };
  for (const Variant& v : variants) row(v.name, median_after_warmup(v.ms));
  std::printf("\nmonitor records per sampled step: %zu\n", records / static_cast<size_t>(s.steps));
  return 0;
}
