// The optimizer base: group bookkeeping, the validate-then-update step, and the state
// dict that round-trips every step count, buffer and group lr bitwise.
#include "optim/optimizer.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <set>

#include "framework/autograd.h"
#include "ops/copy.h"

namespace hg::optim {

StepStub<AdamHyper> adam_step_stub("Adam.step");
StepStub<SGDHyper> sgd_step_stub("SGD.step");
StepStub<RMSpropHyper> rmsprop_step_stub("RMSprop.step");
DispatchStub<void(const Tensor&, const Tensor&)> count_step_stub("count_step");

namespace {

Tensor scalar(double v) { return scalar_tensor(v, {f64}); }

bool parse_index(const std::string& s, size_t& out) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  return ec == std::errc() && end == s.data() + s.size() && !s.empty();
}

// Splits "a.b.c" at dots.
std::vector<std::string> split(const std::string& key) {
  std::vector<std::string> parts(1);
  for (char c : key) {
    if (c == '.') parts.emplace_back();
    else parts.back() += c;
  }
  return parts;
}

}  // namespace

// f64 parameters keep f64 state; the others f32, or their own dtype when asked.
DType Optimizer::state_dtype(DType param) const {
  if (param == f64) return f64;
  return state_in_param_dtype_ ? param : f32;
}

void Optimizer::set_state_in_param_dtype(bool on) {
  read_device_steps();
  for (const auto& per_group : state_)
    for (const ParamState& st : per_group)
      HG_CHECK(st.step == 0, name_, ".set_state_in_param_dtype: call it before the first step");
  state_in_param_dtype_ = on;
}

Params::Params(std::vector<Tensor> params) : groups{ParamGroup{std::move(params), {}, {}, {}}} {}
Params::Params(std::initializer_list<Tensor> params) : Params(std::vector<Tensor>(params)) {}
Params::Params(std::vector<std::pair<std::string, Tensor>> named) : groups(1) {
  for (auto& [n, t] : named) {
    groups[0].names.push_back(n);
    groups[0].params.push_back(t);
  }
}
Params::Params(std::initializer_list<std::pair<std::string, Tensor>> named)
    : Params(std::vector<std::pair<std::string, Tensor>>(named)) {}
Params::Params(std::vector<ParamGroup> groups) : groups(std::move(groups)) {}
Params::Params(std::initializer_list<ParamGroup> groups) : groups(groups) {}

Optimizer::Optimizer(Params params, std::string name, double default_lr, double default_weight_decay)
    : name_(std::move(name)), default_lr_(default_lr), default_weight_decay_(default_weight_decay) {
  check_hyper(default_lr >= 0, "lr", default_lr, ">= 0");
  check_hyper(default_weight_decay >= 0, "weight_decay", default_weight_decay, ">= 0");
  HG_CHECK(!params.groups.empty(), name_, ": got no parameter groups");
  for (ParamGroup& g : params.groups) add_param_group(std::move(g));
}

void Optimizer::check_hyper(bool ok, const char* what, double value, const char* valid) const {
  HG_CHECK(ok, name_, ": ", what, " must be ", valid, ", got ", value);
}

void Optimizer::check_group(ParamGroup& group, size_t g) const {
  HG_CHECK(group.names.empty() || group.names.size() == group.params.size(), name_, ": group ", g, " has ",
           group.params.size(), " parameters but ", group.names.size(), " names (give none or one per parameter)");
  if (!group.lr) group.lr = default_lr_;
  if (!group.weight_decay) group.weight_decay = default_weight_decay_;
  HG_CHECK(*group.lr >= 0, name_, ": lr of group ", g, " must be >= 0, got ", *group.lr);
  HG_CHECK(*group.weight_decay >= 0, name_, ": weight_decay of group ", g, " must be >= 0, got ",
           *group.weight_decay);
}

void Optimizer::add_param_group(ParamGroup group) {
  const size_t g = groups_.size();
  check_group(group, g);
  for (size_t i = 0; i < group.params.size(); ++i) {
    const Tensor& p = group.params[i];
    HG_CHECK(p.defined(), name_, ": parameter ", i, " of group ", g, " is an undefined tensor");
    HG_CHECK(is_floating(p.dtype()), name_, ": parameter ", i, " of group ", g,
             " must have a floating dtype (f64, f32, f16, bf16), got ", dtype_name(p.dtype()));
    HG_CHECK(p.is_leaf(), name_, ": parameter ", i, " of group ", g,
             " is not a leaf (it is the output of ", p.grad_fn()->name(), "); optimize the leaf, or detach()");
    auto same = [&](const Tensor& q) { return q.is_same(p); };
    bool dup = std::any_of(group.params.begin(), group.params.begin() + static_cast<std::ptrdiff_t>(i), same);
    for (const ParamGroup& other : groups_) dup = dup || std::any_of(other.params.begin(), other.params.end(), same);
    HG_CHECK(!dup, name_, ": parameter ", i, " of group ", g,
             " appears more than once; each parameter may belong to one group only");
  }
  groups_.push_back(std::move(group));
  state_.emplace_back();
}

std::string Optimizer::param_name(size_t g, size_t i) const {
  const ParamGroup& group = groups_[g];
  if (i < group.names.size()) return group.names[i];
  if (!group.params[i].name().empty()) return group.params[i].name();
  return "group." + std::to_string(g) + "." + std::to_string(i);
}

std::vector<std::pair<std::string, Tensor>> Optimizer::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t g = 0; g < groups_.size(); ++g)
    for (size_t i = 0; i < groups_[g].params.size(); ++i) out.emplace_back(param_name(g, i), groups_[g].params[i]);
  return out;
}

void Optimizer::read_device_steps() const {
  for (auto& per_group : state_)
    for (ParamState& st : per_group)
      if (st.device_step.defined()) st.step = st.device_step.item<int64_t>();
}

const ParamState* Optimizer::state(size_t group, size_t index) const {
  if (group >= state_.size() || index >= state_[group].size()) return nullptr;
  ParamState& st = state_[group][index];
  if (st.device_step.defined()) st.step = st.device_step.item<int64_t>();
  return st.step == 0 ? nullptr : &st;
}

void Optimizer::step() {
  step_impl(Tensor());
  ++steps_called_;
}

void Optimizer::step_impl(const Tensor& found_inf) {
  NoGrad no_grad;
  // Every check runs before the first update, so a bad gradient leaves all parameters
  // and all state as they were.
  std::vector<std::pair<size_t, size_t>> todo;
  state_.resize(groups_.size());  // groups may have been appended through param_groups()
  for (size_t g = 0; g < groups_.size(); ++g) {
    const ParamGroup& group = groups_[g];
    const double lr = group.lr.value_or(default_lr_), wd = group.weight_decay.value_or(default_weight_decay_);
    HG_CHECK(lr >= 0, name_, ".step: lr of group ", g, " must be >= 0, got ", lr);
    HG_CHECK(wd >= 0, name_, ".step: weight_decay of group ", g, " must be >= 0, got ", wd);
    state_[g].resize(group.params.size());
    for (size_t i = 0; i < group.params.size(); ++i) {
      const Tensor& p = group.params[i];
      const Tensor& grad = p.grad();
      if (!grad.defined()) continue;
      const std::string who = detail::concat("'", param_name(g, i), "'");
      HG_CHECK(grad.device() == p.device(), name_, ".step: the gradient of ", who, " is on ", grad.device().str(),
               " but the parameter is on ", p.device().str());
      HG_CHECK(grad.shape() == p.shape(), name_, ".step: the gradient of ", who, " has shape ",
               shape_str(grad.shape()), " but the parameter has shape ", shape_str(p.shape()));
      HG_CHECK(is_floating(grad.dtype()), name_, ".step: the gradient of ", who,
               " must have a floating dtype, got ", dtype_name(grad.dtype()));
      for (const auto& [bn, buf] : state_[g][i].buffers)
        HG_CHECK(buf.shape() == p.shape(), name_, ".step: the state '", bn, "' of ", who, " has shape ",
                 shape_str(buf.shape()), " but the parameter has shape ", shape_str(p.shape()),
                 " (was the parameter replaced? load a matching state dict or make a new optimizer)");
      todo.emplace_back(g, i);
    }
  }
  // On the CPU a set flag skips here (reading it costs nothing); cuda kernels read it themselves.
  const bool any_cpu =
      std::any_of(todo.begin(), todo.end(), [&](auto gi) { return groups_[gi.first].params[gi.second].device().is_cpu(); });
  const bool skip_on_cpu = found_inf.defined() && any_cpu && found_inf.item<double>() != 0.0;  // NaN counts as found
  for (auto [g, i] : todo) {
    const Tensor& p = groups_[g].params[i];
    if (p.device().is_cpu() && skip_on_cpu) continue;
    ParamState& st = state_[g][i];
    const DType sdt = state_dtype(p.dtype());
    // A parameter moved between devices keeps its count where its kernels read it.
    if (p.device().is_cpu() && st.device_step.defined()) {
      st.step = st.device_step.item<int64_t>();
      st.device_step = Tensor();
    } else if (p.device().is_cuda() && (!st.device_step.defined() || st.device_step.device() != p.device())) {
      st.device_step = scalar_tensor(static_cast<double>(st.device_step.defined() ? st.device_step.item<int64_t>() : st.step),
                                     {i64, p.device()});
    }
    if (st.buffers.empty())
      for (const std::string& bn : buffer_names()) st.buffers[bn] = zeros(p.shape(), {sdt, p.device()});
    // A parameter cast or moved in place (Module::to) keeps its state, converted once here.
    for (auto& [bn, buf] : st.buffers)
      if (buf.dtype() != sdt || buf.device() != p.device()) buf = buf.to(p.device()).to(sdt).contiguous();
    StepClock clock;
    if (p.device().is_cpu()) {
      clock.count = ++st.step;
    } else {
      clock.device_count = st.device_step;
      if (found_inf.defined()) clock.skip_if = found_inf.device() == p.device() ? found_inf : found_inf.to(p.device());
    }
    Tensor pc = p.is_contiguous() ? p : p.contiguous();
    Tensor gc = p.grad().is_contiguous() ? p.grad() : p.grad().contiguous();
    update(pc, gc, st, groups_[g].lr.value_or(default_lr_), groups_[g].weight_decay.value_or(default_weight_decay_),
           clock);
    if (!pc.is_same(p)) copy_(p, pc);
    else p.bump_version();  // the kernel wrote p in place: graphs that saved it must not reuse it
    if (p.device().is_cuda()) count_step_stub(p.device(), clock.device_count, clock.skip_if);
  }
}

void Optimizer::step_if(const Tensor& found_inf) {
  HG_CHECK(found_inf.defined() && found_inf.numel() == 1, name_,
           ".step_if: found_inf must be a one-element tensor (the GradScaler's 0-d f32 flag), got ",
           found_inf.defined() ? "shape " + shape_str(found_inf.shape()) : std::string("an undefined tensor"));
  step_impl(found_inf);
  ++steps_called_;
}

void Optimizer::zero_grad() {
  for (ParamGroup& group : groups_)
    for (Tensor& p : group.params) p.set_grad(Tensor());
}

StateDict Optimizer::state_dict() const {
  read_device_steps();
  StateDict sd;
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string gp = "group." + std::to_string(g) + ".";
    sd[gp + "lr"] = scalar(groups_[g].lr.value_or(default_lr_));
    sd[gp + "weight_decay"] = scalar(groups_[g].weight_decay.value_or(default_weight_decay_));
    sd[gp + "num_params"] = scalar(static_cast<double>(groups_[g].params.size()));
    for (size_t i = 0; g < state_.size() && i < state_[g].size(); ++i) {
      const ParamState& st = state_[g][i];
      if (st.step == 0) continue;
      const std::string sp = "state." + std::to_string(g) + "." + std::to_string(i) + ".";
      sd[sp + "step"] = scalar(static_cast<double>(st.step));
      for (const auto& [bn, buf] : st.buffers) sd[sp + bn] = buf.clone();
    }
  }
  return sd;
}

void Optimizer::load_state_dict(const StateDict& sd) {
  std::vector<std::string> problems;
  auto problem = [&](const auto&... parts) { problems.push_back(detail::concat(parts...)); };
  // Reads a 0-d entry into `out`; false (and a problem noted) when missing or not 0-d.
  auto scalar_of = [&](const std::string& key, double& out) {
    auto it = sd.find(key);
    if (it == sd.end()) {
      problem("missing '", key, "'");
      return false;
    }
    if (!it->second.defined() || it->second.dim() != 0) {
      problem("'", key, "' must be a 0-d tensor, got ",
              it->second.defined() ? "shape " + shape_str(it->second.shape()) : "an undefined tensor");
      return false;
    }
    out = it->second.item<double>();
    return true;
  };

  std::vector<double> lrs(groups_.size()), wds(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) {
    const std::string gp = "group." + std::to_string(g) + ".";
    if (scalar_of(gp + "lr", lrs[g]) && !(lrs[g] >= 0)) problem("'", gp, "lr' must be >= 0, got ", lrs[g]);
    if (scalar_of(gp + "weight_decay", wds[g]) && !(wds[g] >= 0))
      problem("'", gp, "weight_decay' must be >= 0, got ", wds[g]);
    double n = 0;
    if (scalar_of(gp + "num_params", n) && n != static_cast<double>(groups_[g].params.size()))
      problem("group ", g, " has ", groups_[g].params.size(), " parameters here but ", n, " in the state dict");
  }

  const std::vector<std::string> names = buffer_names();
  std::vector<std::vector<ParamState>> fresh(groups_.size());
  for (size_t g = 0; g < groups_.size(); ++g) fresh[g].resize(groups_[g].params.size());
  std::set<std::pair<size_t, size_t>> seen;
  for (const auto& [key, t] : sd) {
    std::vector<std::string> parts = split(key);
    if (parts.size() == 3 && parts[0] == "group") {
      size_t g;
      if (parse_index(parts[1], g) && g < groups_.size() &&
          (parts[2] == "lr" || parts[2] == "weight_decay" || parts[2] == "num_params"))
        continue;
    }
    size_t g, i;
    const bool known = parts.size() == 4 && parts[0] == "state" && parse_index(parts[1], g) &&
                       g < groups_.size() && parse_index(parts[2], i) && i < groups_[g].params.size() &&
                       (parts[3] == "step" || std::find(names.begin(), names.end(), parts[3]) != names.end());
    if (!known) {
      problem("unexpected '", key, "'");
      continue;
    }
    seen.emplace(g, i);
    if (parts[3] != "step") {
      const Tensor& p = groups_[g].params[i];
      if (!t.defined() || t.shape() != p.shape() || !is_floating(t.dtype())) {
        problem("'", key, "' must be a floating tensor of shape ", shape_str(p.shape()), ", got ",
                t.defined() ? shape_str(t.shape()) + " " + dtype_name(t.dtype()) : "an undefined tensor");
        continue;
      }
      Tensor buf = empty(p.shape(), {state_dtype(p.dtype()), p.device()});
      copy_(buf, t);
      fresh[g][i].buffers[parts[3]] = buf;
    }
  }
  for (auto [g, i] : seen) {
    const std::string sp = "state." + std::to_string(g) + "." + std::to_string(i) + ".";
    double step = 0;
    if (scalar_of(sp + "step", step) && !(step >= 1 && step == std::floor(step) && step < 9.0e15))
      problem("'", sp, "step' must be a positive whole number, got ", step);
    fresh[g][i].step = static_cast<int64_t>(step);
    for (const std::string& bn : names)
      if (!sd.count(sp + bn)) problem("missing '", sp, bn, "'");
  }

  if (!problems.empty()) {
    std::string msg = name_ + ".load_state_dict: nothing was loaded:";
    for (const std::string& p : problems) msg += "\n  " + p;
    throw Error(msg);
  }
  for (size_t g = 0; g < groups_.size(); ++g) {
    groups_[g].lr = lrs[g];
    groups_[g].weight_decay = wds[g];
  }
  state_ = std::move(fresh);
}

}  // namespace hg::optim
