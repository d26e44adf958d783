// What hg::Profiler costs on a U-Net training step: the median step time with no profiler
// recording (every dispatch then pays one relaxed load and a branch) and with one recording,
// in interleaved runs; the dispatches per step; the recording's cost per op on a small op;
// and the disabled check's own cost.
// Usage: profiler_overhead [steps per variant (default 12)] [batch] [size] [width]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "framework/profiler.h"
#include "halfgrad.h"

using namespace hg;

namespace {

using Clock = std::chrono::steady_clock;

struct Run {
  const char* name;
  bool profiled;
  std::unique_ptr<UNet> model;
  std::unique_ptr<optim::Adam> opt;
  std::vector<double> ms;
  size_t ops = 0;  // top-level op dispatches of the last profiled step
  std::string tables;  // the last profiled step's op and module tables
};

void step(Run& r, const Tensor& x, const Tensor& y) {
  std::optional<Profiler> prof;
  const auto t0 = Clock::now();
  if (r.profiled) prof.emplace();
  cross_entropy((*r.model)(x), y).backward();
  r.opt->step();
  r.opt->zero_grad();
  if (prof) prof->stop();
  r.ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  if (prof) {
    r.ops = 0;
    for (const ProfileEvent& e : prof->events()) r.ops += e.kind == ProfileEvent::Kind::op && !e.nested;
    r.tables = prof->table(15) + "\n" + prof->module_table(8);
  }
}

double median_after_warmup(std::vector<double> ms) {
  ms.erase(ms.begin(), ms.begin() + std::min<ptrdiff_t>(2, static_cast<ptrdiff_t>(ms.size()) - 1));
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

// ns per disabled check: the load and branch DispatchStub runs on every call.
double disabled_check_ns() {
  constexpr int64_t n = 200'000'000;
  int64_t taken = 0;
  const auto t0 = Clock::now();
  for (int64_t i = 0; i < n; ++i) {
    if (profiler_hook::recording()) [[unlikely]]
      ++taken;
    std::atomic_signal_fence(std::memory_order_seq_cst);  // one check per iteration, not hoisted
  }
  const double ns = std::chrono::duration<double, std::nano>(Clock::now() - t0).count() / static_cast<double>(n);
  return taken == 0 ? ns : -1;
}

// us per call of a small op, recording or not: the best of 9 interleaved blocks of `calls`
// calls each, so the difference is the recording's own cost (on cuda: the host side, with
// the CUDA event pair and the allocator read).
template <class Op>
std::pair<double, double> small_op_us(Op op, int calls) {
  double best[2] = {1e30, 1e30};
  for (int block = 0; block < 9; ++block)
    for (int on = 0; on < 2; ++on) {
      std::optional<Profiler> prof;
      if (on) prof.emplace();
      const auto t0 = Clock::now();
      for (int i = 0; i < calls; ++i) op();
      best[on] = std::min(best[on], std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
    }
  return {best[0], best[1]};
}

// The op table of one training step of a 256-wide f16 MLP (two linears, ReLU, MSE) on cuda:0.
std::string cuda_mlp_step_table() {
  manual_seed(2);
  nn::Sequential model(std::make_shared<nn::Linear>(256, 256), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Linear>(256, 256));
  model.to(Device::cuda(0));
  model.to(f16);
  const Tensor x = randn({256, 256}).to(Device::cuda(0), f16);
  Profiler prof;
  mean(square(model(x))).backward();
  prof.stop();
  return prof.table(12);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t steps = 12, batch = 8, size = 64, width = 8;
  if (argc > 1) steps = std::max(3, std::atoi(argv[1]));
  if (argc > 2) batch = std::atoi(argv[2]);
  if (argc > 3) size = std::atoi(argv[3]);
  if (argc > 4) width = std::atoi(argv[4]);
  std::printf("U-Net fp32 step (forward, backward, Adam), batch %lld, %lldx%lld, width %lld, %lld steps per variant\n",
              static_cast<long long>(batch), static_cast<long long>(size), static_cast<long long>(size),
              static_cast<long long>(width), static_cast<long long>(steps));
  std::vector<Run> runs;
  runs.push_back({"no profiler recording", false, nullptr, nullptr, {}, 0, ""});
  runs.push_back({"Profiler recording", true, nullptr, nullptr, {}, 0, ""});
  for (Run& r : runs) {
    manual_seed(1);
    r.model = std::make_unique<UNet>(1, 4, width);
    r.opt = std::make_unique<optim::Adam>(r.model->named_parameters(), optim::AdamOptions{.lr = 1e-3});
  }
  Tensor x = rand({batch, size, size, 1});
  Tensor y = randint(0, 4, {batch, size, size});
  for (int64_t i = 0; i < steps; ++i)  // interleaved: a change in machine load hits both alike
    for (Run& r : runs) step(r, x, y);
  const double off = median_after_warmup(runs[0].ms), on = median_after_warmup(runs[1].ms);
  const double check = disabled_check_ns();
  const double ops = static_cast<double>(runs[1].ops);
  std::printf("\n| variant | step ms (median) | overhead |\n| --- | ---: | ---: |\n");
  std::printf("| %s | %.2f | |\n| %s | %.2f | %+.1f%% (%.2f us per op) |\n", runs[0].name, off, runs[1].name, on,
              100.0 * (on / off - 1), 1e3 * (on - off) / std::max(ops, 1.0));
  const Tensor v = randn({64});
  const auto [small_off, small_on] = small_op_us([&] { relu(v); }, 2000);
  std::printf("\nrelu of 64 floats: %.2f us per call, %.2f us recording (+%.2f us per recorded op)\n", small_off,
              small_on, small_on - small_off);
  try {  // cuda:0 when this build has it (a GPU, or the CPU emulation, whose kernel is host time)
    const Tensor xd = v.to(Device::cuda(0)), yd = empty({64}, {f32, Device::cuda(0)});
    const auto [relu_off, relu_on] = small_op_us([&] { relu(xd); }, 500);
    std::printf("relu of 64 floats on cuda:0: %.2f us per call on the host, %.2f us recording (+%.2f us per op)\n",
                relu_off, relu_on, relu_on - relu_off);
    // A copy is a memcpy, no kernel: under the emulation its host time is mostly dispatch.
    const auto [copy_off, copy_on] = small_op_us([&] { copy_(yd, xd); }, 2000);
    std::printf("copy of 64 floats on cuda:0: %.2f us per call on the host, %.2f us recording (+%.2f us per op)\n",
                copy_off, copy_on, copy_on - copy_off);
    std::printf("\nA profiled training step of a small f16 MLP on cuda:0:\n%s", cuda_mlp_step_table().c_str());
  } catch (const Error& e) {
    std::printf("relu on cuda:0: not measured (%s)\n", e.what());
  }
  std::printf("op dispatches per step: %.0f; disabled check: %.2f ns each, %.4f%% of the step (%.1f us)\n", ops,
              check, 100.0 * ops * check * 1e-6 / off, ops * check * 1e-3);
  std::printf("\nThe last profiled step:\n%s", runs[1].tables.c_str());
  return 0;
}
