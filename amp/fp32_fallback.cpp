// The FP32 fallback: a module-output observer queues non-finite counts of reduced-
// precision outputs on the device; end_step() reads them once and hands out strikes.
#include "amp/fp32_fallback.h"

#include <map>
#include <sstream>
#include <unordered_map>

#include "amp/tensor_stats.h"

namespace hg::amp {

namespace {
const char* kMetaKey = "amp.fp32_fallback";
}

struct Fp32Fallback::State {
  FallbackOptions options;
  nn::Module* model = nullptr;
  std::unordered_map<const nn::Module*, std::string> paths;
  std::map<std::string, nn::Module*> by_path;
  int64_t step = 0;
  bool checking = false;
  std::vector<std::pair<const nn::Module*, Tensor>> outputs;  // (module, packed stats) in completion order
  std::vector<std::string> order;                              // forward completion order, last checked step
  std::map<std::string, int64_t> forward_strikes, grad_strikes;
  std::vector<FallbackEvent> events;

  void switch_to_f32(const std::string& path, std::string reason) {
    nn::Module* m = by_path.at(path);
    if (m->precision() == f32) return;
    m->set_precision(f32);
    events.push_back({step, path, std::move(reason)});
  }
};

Fp32Fallback::Fp32Fallback(nn::Module& model, FallbackOptions options) : state_(std::make_shared<State>()) {
  HG_CHECK(options.strikes >= 1, "Fp32Fallback: strikes must be >= 1, got ", options.strikes);
  HG_CHECK(options.check_every >= 1, "Fp32Fallback: check_every must be >= 1, got ", options.check_every);
  state_->options = options;
  state_->model = &model;
  for (auto& [path, m] : model.named_modules()) {
    state_->paths[m] = path;
    state_->by_path[path] = m;
  }
  std::weak_ptr<State> weak = state_;
  observer_ = model.add_output_observer([weak](nn::Module& m, const Tensor& y) {
    auto st = weak.lock();
    if (!st || !st->checking || !y.defined()) return;
    if (!st->paths.count(&m) || (y.dtype() != f16 && y.dtype() != bf16)) return;
    st->outputs.emplace_back(&m, compute_stats(y));
  });
}


void Fp32Fallback::begin_step(int64_t step) {
  State& st = *state_;
  st.step = step;
  st.checking = step % st.options.check_every == 0;
  st.outputs.clear();
}

void Fp32Fallback::end_step(const StepResult* result) {
  State& st = *state_;
  bool forward_strike = false;
  if (st.checking) {
    st.order.clear();
    for (auto& [m, packed] : st.outputs) {
      const std::string& path = st.paths[m];
      st.order.push_back(path);
      if (forward_strike) continue;
      const TensorStats s = unpack_stats(packed);
      if (s.nonfinite() == 0) continue;
      forward_strike = true;
      const int64_t n = ++st.forward_strikes[path];
      if (n >= st.options.strikes)
        st.switch_to_f32(path, detail::concat("forward output overflowed in reduced precision in ", n,
                                              " checked steps (", s.inf, " inf, ", s.nan, " NaN of ", s.numel,
                                              " at step ", st.step, ")"));
    }
    st.outputs.clear();
    st.checking = false;
  }
  if (!result || forward_strike) return;
  if (!result->skipped()) {
    st.grad_strikes.clear();
    return;
  }
  // The module with non-finite gradients that finished its forward last: backward
  // reached it first, so its backward is where the overflow began.
  std::map<std::string, int64_t> bad_modules;
  for (auto& [name, count] : result->nonfinite()) {
    const size_t dot = name.rfind('.');
    bad_modules[dot == std::string::npos ? "" : name.substr(0, dot)] += count;
  }
  std::string culprit;
  for (const std::string& path : st.order)
    if (bad_modules.count(path)) culprit = path;
  if (culprit.empty() && !bad_modules.empty()) culprit = bad_modules.rbegin()->first;
  if (culprit.empty() || !st.by_path.count(culprit)) return;
  for (auto it = st.grad_strikes.begin(); it != st.grad_strikes.end();)
    it = it->first == culprit ? std::next(it) : st.grad_strikes.erase(it);
  const int64_t n = ++st.grad_strikes[culprit];
  if (n >= st.options.strikes)
    st.switch_to_f32(culprit, detail::concat("gradients non-finite in ", n, " consecutive skipped steps (",
                                             bad_modules[culprit], " elements at step ", st.step, ")"));
}

const std::vector<FallbackEvent>& Fp32Fallback::events() const { return state_->events; }

std::vector<std::string> Fp32Fallback::fp32_modules() const {
  std::vector<std::string> out;
  for (const FallbackEvent& e : state_->events) out.push_back(e.module);
  return out;
}

void Fp32Fallback::save(Checkpoint& checkpoint) const {
  // One event per line: step <tab> module <tab> reason (none of them holds a tab or newline).
  std::string text;
  for (const FallbackEvent& e : state_->events) text += std::to_string(e.step) + "\t" + e.module + "\t" + e.reason + "\n";
  checkpoint.metadata[kMetaKey] = text;
}

void Fp32Fallback::load(const Checkpoint& checkpoint) {
  State& st = *state_;
  auto it = checkpoint.metadata.find(kMetaKey);
  if (it == checkpoint.metadata.end()) return;
  std::vector<FallbackEvent> events;
  std::stringstream ss(it->second);
  std::string line;
  while (std::getline(ss, line)) {
    const size_t a = line.find('\t'), b = a == std::string::npos ? a : line.find('\t', a + 1);
    HG_CHECK(b != std::string::npos, "Fp32Fallback::load: malformed event line '", line, "' in the checkpoint");
    FallbackEvent e;
    try {
      e.step = std::stoll(line.substr(0, a));
    } catch (const std::exception&) {
      throw Error("Fp32Fallback::load: malformed step in event line '" + line + "'");
    }
    e.module = line.substr(a + 1, b - a - 1);
    e.reason = line.substr(b + 1);
    HG_CHECK(st.by_path.count(e.module), "Fp32Fallback::load: the checkpoint switched module '", e.module,
             "' to f32, but this model has no such module");
    events.push_back(std::move(e));
  }
  for (const FallbackEvent& e : events) st.by_path[e.module]->set_precision(f32);
  st.events = std::move(events);
}

}  // namespace hg::amp
