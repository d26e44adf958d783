// The numerics monitor: a module-output observer and gradient hooks queue device-side
// statistics during a sampled step; records() reads them back in one go.
#include "amp/numerics_monitor.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

#include "framework/serialize/atomic_write.h"

namespace hg::amp {

namespace {
struct Pending {
  NumericsRecord record;  // without stats yet
  Tensor packed;
};

std::string shape_json(const Shape& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) out += (i ? "," : "") + std::to_string(s[i]);
  return out + "]";
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

std::string percent(double f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", 100.0 * f);
  return buf;
}

std::string sci(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2g", v);
  return buf;
}

// Overflow and non-finite values break a run outright; flushing loses information
// silently; subnormals lose precision.
double badness(const TensorStats& s) {
  return 100.0 * s.fraction(s.f16_overflow + s.nonfinite()) + s.fraction(s.f16_flush) + 0.01 * s.fraction(s.f16_subnormal);
}
}  // namespace

struct NumericsMonitor::State {
  MonitorOptions options;
  std::unordered_map<const nn::Module*, std::string> paths;
  nn::Module* model = nullptr;
  int64_t step = 0;
  bool sampling = false;
  std::vector<Pending> pending;
  std::vector<NumericsRecord> records;

  void add(std::string module, std::string param, TensorKind kind, const Tensor& t) {
    Pending p;
    p.record.step = step;
    p.record.module = std::move(module);
    p.record.param = std::move(param);
    p.record.kind = kind;
    p.record.dtype = t.dtype();
    p.record.shape = t.shape();
    p.packed = compute_stats(t);
    pending.push_back(std::move(p));
  }
};

const char* tensor_kind_name(TensorKind k) {
  switch (k) {
    case TensorKind::activation: return "activation";
    case TensorKind::activation_grad: return "activation grad";
    case TensorKind::weight: return "weight";
    case TensorKind::weight_grad: return "weight grad";
  }
  return "?";
}

std::string NumericsRecord::label() const {
  std::string who = module.empty() ? std::string("(model)") : module;
  const bool weight_kind = kind == TensorKind::weight || kind == TensorKind::weight_grad;
  if (weight_kind && param != "weight") return who + " " + param + (kind == TensorKind::weight_grad ? " grad" : "");
  return who + " " + tensor_kind_name(kind);
}

std::string NumericsRecord::json() const {
  std::string kind_key = tensor_kind_name(kind);
  std::replace(kind_key.begin(), kind_key.end(), ' ', '_');
  std::ostringstream os;
  os << "{\"step\":" << step << ",\"module\":" << json_string(module) << ",\"kind\":\"" << kind_key
     << "\",\"param\":" << json_string(param) << ",\"dtype\":\"" << dtype_name(dtype)
     << "\",\"shape\":" << shape_json(shape) << ",\"stats\":" << stats.json() << "}";
  return os.str();
}

NumericsMonitor::NumericsMonitor(nn::Module& model, MonitorOptions options) : state_(std::make_shared<State>()) {
  HG_CHECK(options.every >= 1, "NumericsMonitor: every must be >= 1, got ", options.every);
  state_->options = options;
  state_->model = &model;
  for (auto& [path, m] : model.named_modules()) state_->paths[m] = path;
  std::weak_ptr<State> weak = state_;
  observer_ = model.add_output_observer([weak](nn::Module& m, const Tensor& y) {
    auto st = weak.lock();
    if (!st || !st->sampling || !y.defined() || !is_floating(y.dtype())) return;
    auto it = st->paths.find(&m);
    if (it == st->paths.end()) return;
    const std::string path = it->second;
    if (st->options.activations) st->add(path, "", TensorKind::activation, y);
    if (st->options.activation_grads && y.requires_grad()) {
      const int64_t step = st->step;
      y.register_hook([weak, path, step](const Tensor& g) {
        if (auto s = weak.lock()) {
          const int64_t saved = s->step;
          s->step = step;  // the hook runs in backward, possibly after end_step()
          s->add(path, "", TensorKind::activation_grad, g);
          s->step = saved;
        }
        return Tensor();
      });
    }
  });
}


void NumericsMonitor::begin_step(int64_t step) {
  state_->step = step;
  state_->sampling = step % state_->options.every == 0;
}

bool NumericsMonitor::sampling() const { return state_->sampling; }

void NumericsMonitor::end_step() {
  State& st = *state_;
  if (!st.sampling) return;
  for (auto& [name, p] : st.model->named_parameters()) {
    const size_t dot = name.rfind('.');
    std::string module = dot == std::string::npos ? "" : name.substr(0, dot);
    std::string param = dot == std::string::npos ? name : name.substr(dot + 1);
    if (st.options.weights) st.add(module, param, TensorKind::weight, p);
    if (st.options.weight_grads && p.grad().defined()) st.add(module, param, TensorKind::weight_grad, p.grad());
  }
  st.sampling = false;
}

const std::vector<NumericsRecord>& NumericsMonitor::records() {
  State& st = *state_;
  for (Pending& p : st.pending) {
    p.record.stats = unpack_stats(p.packed);
    st.records.push_back(std::move(p.record));
  }
  st.pending.clear();
  return st.records;
}

std::string NumericsMonitor::jsonl() {
  std::string out;
  for (const NumericsRecord& r : records()) out += r.json() + "\n";
  return out;
}

void NumericsMonitor::write_jsonl(const std::string& path) {
  const std::string text = jsonl();
  write_file_atomically(path, {{text.data(), text.size()}});
}

std::vector<NumericsRecord> NumericsMonitor::worst(size_t n) {
  // The worst step of each (module, param, kind), then the worst of those.
  std::map<std::string, const NumericsRecord*> by_label;
  for (const NumericsRecord& r : records()) {
    const NumericsRecord*& best = by_label[r.label()];
    if (!best || badness(r.stats) > badness(best->stats)) best = &r;
  }
  std::vector<const NumericsRecord*> list;
  for (auto& [label, r] : by_label)
    if (badness(r->stats) > 0) list.push_back(r);
  std::stable_sort(list.begin(), list.end(),
                   [](const NumericsRecord* a, const NumericsRecord* b) { return badness(a->stats) > badness(b->stats); });
  std::vector<NumericsRecord> out;
  for (size_t i = 0; i < list.size() && i < n; ++i) out.push_back(*list[i]);
  return out;
}

std::optional<NumericsRecord> NumericsMonitor::first_overflow() {
  for (const NumericsRecord& r : records())
    if (r.kind == TensorKind::activation && (r.stats.nonfinite() > 0 || r.stats.f16_overflow > 0)) return r;
  return std::nullopt;
}

std::string NumericsMonitor::worst_table(size_t n) {
  std::vector<NumericsRecord> list = worst(n);
  if (list.empty()) return "no tensor leaves the f16 range or flushes to zero in f16\n";
  std::string out;
  // Non-finite values spread forward; the first activation that has them is the origin.
  if (auto first = first_overflow())
    out += "overflow starts at: " + first->label() + " (step " + std::to_string(first->step) + ")\n";
  for (const NumericsRecord& r : list) {
    const TensorStats& s = r.stats;
    std::vector<std::string> parts;
    if (s.nonfinite() > 0) parts.push_back(std::to_string(s.inf) + " inf, " + std::to_string(s.nan) + " NaN");
    if (s.f16_overflow > 0) parts.push_back(percent(s.fraction(s.f16_overflow)) + " overflow f16 (|x| >= 65520 rounds to inf)");
    if (s.f16_flush > 0) parts.push_back(percent(s.fraction(s.f16_flush)) + " would underflow in f16");
    if (s.f16_subnormal > 0) parts.push_back(percent(s.fraction(s.f16_subnormal)) + " f16 subnormal");
    std::string line = r.label() + " (" + dtype_name(r.dtype) + "): ";
    for (size_t i = 0; i < parts.size(); ++i) line += (i ? "; " : "") + parts[i];
    line += "; amax " + sci(s.amax) + ", smallest non-zero " + sci(s.min_nonzero) + " (step " + std::to_string(r.step) + ")\n";
    out += line;
  }
  return out;
}

}  // namespace hg::amp
