// Anomaly detection through the autograd engine's forward and backward observers.
#include "amp/anomaly.h"

#include <algorithm>
#include <cstdio>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "amp/tensor_stats.h"
#include "framework/autograd.h"
#include "framework/error.h"

namespace hg::amp {

// The forward inputs' max |x| of every node recorded under detection, for the backward
// message. Keyed by node; the weak reference tells a live node from a freed one whose
// address a new node reuses. Owned by the outermost DetectAnomaly of the thread.
struct InputAmaxTable {
  struct Entry {
    std::weak_ptr<const Node> node;
    std::vector<double> amax;
  };
  std::unordered_map<const Node*, Entry> entries;
  size_t prune_at = 1024;  // drops the freed nodes' entries when the table reaches this size

  void put(Node* node, std::vector<double> amax) {
    if (entries.size() >= prune_at) {
      std::erase_if(entries, [](const auto& kv) { return kv.second.node.expired(); });
      prune_at = std::max<size_t>(1024, 2 * entries.size());
    }
    entries[node] = Entry{node->weak_from_this(), std::move(amax)};
  }
  const std::vector<double>* find(const Node& node) const {
    auto it = entries.find(&node);
    if (it == entries.end() || it->second.node.lock().get() != &node) return nullptr;
    return &it->second.amax;
  }
};

namespace {
thread_local bool t_active = false;
thread_local AnomalyOptions t_options;
thread_local InputAmaxTable* t_table = nullptr;

// The checks run ops themselves (contiguous copies, the statistics): those must not
// be checked again.
class Pause {
 public:
  Pause() : saved_(t_active) { t_active = false; }
  ~Pause() { t_active = saved_; }
  Pause(const Pause&) = delete;
  Pause& operator=(const Pause&) = delete;

 private:
  bool saved_;
};

constexpr double kF16Max = 65504.0;

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", v);
  return buf;
}

std::string where(const char* op, const std::string& module_path, const char* direction) {
  std::string s = std::string(direction) + " of " + op;
  if (!module_path.empty()) s += " in " + module_path;
  return s;
}

// "12 inf and 3 NaN" / "5 values beyond the f16 max" ...; empty when the tensor is fine.
std::string fault(const TensorStats& s, DType dtype) {
  std::string out;
  if (s.inf) out += std::to_string(s.inf) + " inf";
  if (s.nan) out += (out.empty() ? "" : " and ") + std::to_string(s.nan) + " NaN";
  if (t_options.check_f16_range && dtype != f16 && s.f16_overflow)
    out += (out.empty() ? "" : " and ") + std::to_string(s.f16_overflow) + " values that overflow f16 (|x| >= 65520 rounds to inf)";
  return out;
}

std::string describe(const Tensor& t, const TensorStats& s) {
  return std::string(dtype_name(t.dtype())) + " " + shape_str(t.shape()) + " amax " + sci(s.amax) +
         (s.nonfinite() ? " with " + std::to_string(s.inf) + " inf, " + std::to_string(s.nan) + " NaN" : "");
}

// Views and copies only show values an earlier op made; that op is the one to blame.
bool passes_values_through(const char* op) {
  static const std::set<std::string> ops = {"view", "permute", "slice", "expand", "squeeze", "unsqueeze", "clone"};
  return ops.count(op) > 0;
}

void on_forward(const char* op, Node* node, const std::vector<Tensor*>& outputs, const TensorList& inputs) {
  // Ops called by a node's backward are checked as that node's result (on_backward).
  if (!t_active || autograd::in_backward() || passes_values_through(op)) return;
  Pause pause;
  std::vector<TensorStats> in_stats(inputs.size());
  std::vector<double> amax(inputs.size(), 0.0);
  bool inputs_finite = true;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined() || !is_floating(inputs[i].dtype())) continue;
    in_stats[i] = tensor_stats(inputs[i]);
    amax[i] = in_stats[i].amax;
    inputs_finite = inputs_finite && in_stats[i].nonfinite() == 0;
  }
  if (node && t_table) t_table->put(node, amax);
  for (size_t o = 0; o < outputs.size(); ++o) {
    const Tensor& y = *outputs[o];
    if (!y.defined() || !is_floating(y.dtype())) continue;
    const TensorStats s = tensor_stats(y);
    const std::string bad = fault(s, y.dtype());
    if (bad.empty()) continue;
    std::string msg = where(op, node ? node->module_path() : autograd::current_module_path(), "forward") + " produced " +
                      bad + " in " + dtype_name(y.dtype()) + " (output " + std::to_string(o) + ", shape " +
                      shape_str(y.shape()) + ", " + std::to_string(s.numel) + " elements); inputs:";
    for (size_t i = 0; i < inputs.size(); ++i)
      if (inputs[i].defined() && is_floating(inputs[i].dtype())) msg += " #" + std::to_string(i) + " " + describe(inputs[i], in_stats[i]) + ";";
    if (!inputs_finite)
      msg += " an input was already non-finite: the fault is upstream of this op (check the data)";
    else if (y.dtype() == f16 && s.inf)
      msg += " the inputs are finite, so the result exceeds the f16 max 65504: run this module in f32 "
             "(set_precision) or keep its inputs smaller";
    throw NumericsError(msg);
  }
}

void on_backward(Node& node, const TensorList& grad_inputs, const TensorList& grad_outputs) {
  if (!t_active) return;
  Pause pause;
  for (size_t i = 0; i < grad_inputs.size(); ++i) {
    const Tensor& g = grad_inputs[i];
    if (!g.defined() || !is_floating(g.dtype())) continue;
    const TensorStats s = tensor_stats(g);
    const std::string bad = fault(s, g.dtype());
    if (bad.empty()) continue;
    std::string msg = where(node.name().c_str(), node.module_path(), "backward") + " produced " + bad + " in " +
                      dtype_name(g.dtype()) + " (the gradient for input " + std::to_string(i) + ", shape " +
                      shape_str(g.shape()) + ")";
    double in_amax = 0;
    bool incoming_finite = true;
    for (const Tensor& go : grad_outputs) {
      if (!go.defined() || !is_floating(go.dtype())) continue;
      const TensorStats gs = tensor_stats(go);
      msg += "; incoming gradient " + describe(go, gs);
      in_amax = std::max(in_amax, gs.amax);
      incoming_finite = incoming_finite && gs.nonfinite() == 0;
    }
    double fwd_amax = 0;
    const std::vector<double>* input_amax = t_table ? t_table->find(node) : nullptr;
    if (input_amax && !input_amax->empty()) {
      for (double a : *input_amax) fwd_amax = std::max(fwd_amax, a);
      msg += "; forward inputs amax";
      for (double a : *input_amax) msg += " " + sci(a);
    }
    if (!incoming_finite)
      msg += "; the incoming gradient was already non-finite: the fault is further down the graph";
    else if (g.dtype() == f16 && in_amax * fwd_amax > kF16Max)
      msg += "; incoming gradient amax " + sci(in_amax) + " x forward input amax " + sci(fwd_amax) + " = " +
             sci(in_amax * fwd_amax) + " exceeds the f16 max 65504 (lower the loss scale or run this module in f32)";
    throw NumericsError(msg);
  }
}
}  // namespace

DetectAnomaly::DetectAnomaly(AnomalyOptions options) : saved_(t_options), was_active_(t_active) {
  autograd::set_forward_observer(&on_forward);
  autograd::set_backward_observer(&on_backward);
  if (!t_table) {
    table_ = std::make_unique<InputAmaxTable>();
    t_table = table_.get();
  }
  t_options = options;
  t_active = true;
}

DetectAnomaly::~DetectAnomaly() {
  t_options = saved_;
  t_active = was_active_;
  if (table_) t_table = nullptr;
}

bool DetectAnomaly::active() { return t_active; }

}  // namespace hg::amp
