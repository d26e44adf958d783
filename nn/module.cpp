// nn::Module: registration, tree queries, in-place device/dtype moves, state dicts and
// the forward Scope. Paths are computed from parent links on demand, so a module may be
// built before it is attached to its parent.
#include "nn/module.h"

#include <algorithm>
#include <iomanip>
#include <map>
#include <sstream>

#include "framework/precision.h"
#include "ops/copy.h"

namespace hg::nn {

namespace {

std::string join(const std::string& prefix, const std::string& name) {
  if (prefix.empty() || name.empty()) return prefix + name;
  return prefix + "." + name;
}

std::string list_str(const std::vector<std::string>& items) {
  std::string s = "[";
  for (size_t i = 0; i < items.size(); ++i) s += (i ? ", " : "") + items[i];
  return s + "]";
}

// A new entry's name must be a single path component, unique within its module.
template <class... Lists>
void check_new_name(const char* op, const std::string& name, const std::string& owner, const Lists&... lists) {
  HG_CHECK(!name.empty() && name.find('.') == std::string::npos, op, ": name '", name,
           "' must be non-empty and contain no '.'");
  auto taken = [&](const auto& entries) {
    return std::any_of(entries.begin(), entries.end(), [&](const auto& e) { return e.first == name; });
  };
  HG_CHECK(!(taken(lists) || ...), op, ": ", owner, " already has a parameter, buffer or child named '", name, "'");
}

// Re-points the tensor behind its handle, so every copy of the handle (an optimizer's,
// a user's) sees the new device and dtype; the old gradient goes with the old dtype.
void convert_in_place(const Tensor& t, Device device, DType dtype) {
  if (t.device() != device || t.dtype() != dtype) t.set_data(t.to(device, dtype));
}

// Only when the name changed (the module was attached somewhere new): a query of a
// trained model then writes nothing, so it may run while another thread reads names.
void name_by_path(Tensor& t, const std::string& path) {
  if (t.name() != path) t.set_name(path);
}

}  // namespace

Tensor Module::forward_impl(const Tensor&) {
  throw Error(type_name() + " (at '" + path() +
              "') has no single-input forward; call it with the arguments its operator() takes");
}

ObserverHandle& ObserverHandle::operator=(ObserverHandle&& o) noexcept {
  if (this != &o) {
    reset();
    list_ = std::move(o.list_);
    id_ = o.id_;
    o.id_ = 0;
  }
  return *this;
}

void ObserverHandle::reset() {
  if (auto list = list_.lock()) {
    std::lock_guard<std::mutex> lock(list->mu);
    std::erase_if(list->entries, [this](const auto& e) { return e.first == id_; });
    list->size.store(list->entries.size(), std::memory_order_release);
  }
  list_.reset();
  id_ = 0;
}

ObserverHandle Module::add_output_observer(OutputObserver f) {
  HG_CHECK(f != nullptr, "add_output_observer: the observer of ", type_name(), " is empty");
  std::lock_guard<std::mutex> lock(observers_->mu);
  const int64_t id = ++observers_->next_id;
  observers_->entries.emplace_back(id, std::make_shared<const OutputObserver>(std::move(f)));
  observers_->size.store(observers_->entries.size(), std::memory_order_release);
  return ObserverHandle(observers_, id);
}

Tensor Module::observed(Tensor output) {
  for (const Module* m = this; m; m = m->parent_) {
    ObserverList& list = *m->observers_;
    if (list.size.load(std::memory_order_acquire) == 0) continue;
    // A snapshot: an observer may remove itself (or another thread one) while it runs.
    std::vector<std::shared_ptr<const OutputObserver>> snapshot;
    {
      std::lock_guard<std::mutex> lock(list.mu);
      for (auto& [id, f] : list.entries) snapshot.push_back(f);
    }
    for (auto& f : snapshot) (*f)(*this, output);
  }
  return output;
}

const Module& Module::root() const {
  const Module* m = this;
  while (m->parent_) m = m->parent_;
  return *m;
}

Tensor Module::forward(const Tensor& x) {
  return scoped([&] { return forward_impl(x); });
}

Module::Scope::Scope(const Module& m) : path_scope_(m.path()) {
  AutocastState& st = autocast_state();
  if (m.precision() && st.dtype) {
    saved_autocast_ = st.dtype;
    st.dtype = m.precision();
    overrode_ = true;
  }
}

Module::Scope::~Scope() {
  if (overrode_) autocast_state().dtype = saved_autocast_;
}

void Module::add_child(const std::string& name, std::shared_ptr<Module> m) {
  HG_CHECK(m != nullptr, "register_module: child '", name, "' of ", type_name(), " is null");
  HG_CHECK(m->parent_ == nullptr, "register_module: the ", m->type_name(), " registered as '", name,
           "' is already the child '", m->path(), "' of another module; a module has one parent");
  for (const Module* a = this; a; a = a->parent_)
    HG_CHECK(a != m.get(), "register_module: registering '", name, "' would make ", m->type_name(),
             " its own descendant");
  check_new_name("register_module", name, type_name(), params_, buffers_, children_);
  m->parent_ = this;
  m->name_ = name;
  children_.emplace_back(name, m);
  // The subtree's tensor names were made before it had a parent.
  m->named_parameters();
  m->named_buffers();
}

Tensor Module::register_parameter(const std::string& name, Tensor t) {
  check_new_name("register_parameter", name, type_name(), params_, buffers_, children_);
  HG_CHECK(t.defined() && is_floating(t.dtype()), "register_parameter: '", name,
           "' must be a defined floating tensor (f64, f32, f16, bf16), got ",
           t.defined() ? dtype_name(t.dtype()) : "an undefined tensor");
  if (!t.is_leaf()) t = t.detach();
  t.set_requires_grad(true);
  t.set_name(join(path(), name));
  params_.emplace_back(name, t);
  return t;
}

Tensor Module::register_buffer(const std::string& name, Tensor t) {
  check_new_name("register_buffer", name, type_name(), params_, buffers_, children_);
  HG_CHECK(t.defined(), "register_buffer: '", name, "' is an undefined tensor");
  if (!t.is_leaf()) t = t.detach();
  t.set_name(join(path(), name));
  buffers_.emplace_back(name, t);
  return t;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> out;
  for (auto& [n, t] : named_parameters()) out.push_back(t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  const std::string here = path();
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto [n, t] : params_) {
    name_by_path(t, join(here, n));
    out.emplace_back(n, t);
  }
  for (auto& [cn, c] : children_)
    for (auto& [n, t] : c->named_parameters()) out.emplace_back(join(cn, n), t);
  return out;
}

std::vector<std::pair<std::string, Tensor>> Module::named_buffers() const {
  const std::string here = path();
  std::vector<std::pair<std::string, Tensor>> out;
  for (auto [n, t] : buffers_) {
    name_by_path(t, join(here, n));
    out.emplace_back(n, t);
  }
  for (auto& [cn, c] : children_)
    for (auto& [n, t] : c->named_buffers()) out.emplace_back(join(cn, n), t);
  return out;
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::named_children() const { return children_; }

std::vector<std::pair<std::string, Module*>> Module::named_modules() {
  std::vector<std::pair<std::string, Module*>> out{{"", this}};
  for (auto& [cn, c] : children_)
    for (auto& [n, m] : c->named_modules()) out.emplace_back(join(cn, n), m);
  return out;
}

int64_t Module::parameter_count() const {
  int64_t n = 0;
  for (auto& [name, t] : named_parameters()) n += t.numel();
  return n;
}

std::string Module::path() const { return parent_ ? join(parent_->path(), name_) : std::string(); }

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

void Module::to(Device device) {
  NoGrad ng;
  for (auto& [n, t] : named_parameters()) convert_in_place(t, device, t.dtype());
  for (auto& [n, t] : named_buffers()) convert_in_place(t, device, t.dtype());
}

void Module::to(DType dtype) {
  HG_CHECK(is_floating(dtype), "Module::to: modules convert to a floating dtype (f64, f32, f16, bf16), got ",
           dtype_name(dtype));
  NoGrad ng;
  for (auto& [n, t] : named_parameters()) convert_in_place(t, t.device(), dtype);
  for (auto& [n, t] : named_buffers())
    if (is_floating(t.dtype())) convert_in_place(t, t.device(), dtype);
}

void Module::zero_grad() {
  for (auto& [n, t] : named_parameters()) t.set_grad(Tensor());
}

StateDict Module::state_dict() const {
  StateDict sd;
  for (auto& [n, t] : named_parameters()) sd[n] = t.detach();
  for (auto& [n, t] : named_buffers()) sd[n] = t.detach();
  return sd;
}

void Module::load_state_dict(const StateDict& sd, bool strict) {
  std::vector<std::pair<std::string, Tensor>> own = named_parameters();
  for (auto& e : named_buffers()) own.push_back(e);
  std::map<std::string, Tensor> own_map(own.begin(), own.end());
  std::vector<std::string> missing, unexpected, misshaped;
  for (auto& [n, t] : own) {
    auto it = sd.find(n);
    if (it == sd.end()) missing.push_back(n);
    else if (!it->second.defined()) misshaped.push_back(n + " (undefined in the state dict)");
    else if (it->second.shape() != t.shape())
      misshaped.push_back(n + " (model " + shape_str(t.shape()) + ", state dict " + shape_str(it->second.shape()) + ")");
  }
  for (auto& [n, t] : sd)
    if (!own_map.count(n)) unexpected.push_back(n);
  const bool fail = !misshaped.empty() || (strict && (!missing.empty() || !unexpected.empty()));
  if (fail) {
    std::string msg = "load_state_dict: the state dict does not fit " + type_name() + "; nothing was loaded.";
    if (strict && !missing.empty()) msg += " Missing keys: " + list_str(missing) + ".";
    if (strict && !unexpected.empty()) msg += " Unexpected keys: " + list_str(unexpected) + ".";
    if (!misshaped.empty()) msg += " Mis-shaped: " + list_str(misshaped) + ".";
    throw Error(msg);
  }
  NoGrad ng;
  for (auto& [n, t] : own) {
    auto it = sd.find(n);
    if (it != sd.end()) copy_(t, it->second);
  }
}

std::string Module::summary() const {
  struct Row {
    std::string name, shape, dtype, count;
  };
  std::vector<Row> rows{{"name", "shape", "dtype", "count"}};
  int64_t n_params = 0, n_buffers = 0, bytes = 0;
  auto add = [&](const std::vector<std::pair<std::string, Tensor>>& entries, bool buffer, int64_t& total) {
    for (auto& [n, t] : entries) {
      rows.push_back({buffer ? n + " (buffer)" : n, shape_str(t.shape()), dtype_name(t.dtype()), std::to_string(t.numel())});
      total += t.numel();
      bytes += t.numel() * static_cast<int64_t>(dtype_size(t.dtype()));
    }
  };
  add(named_parameters(), false, n_params);
  add(named_buffers(), true, n_buffers);
  size_t w[3] = {0, 0, 0};
  for (auto& r : rows) {
    w[0] = std::max(w[0], r.name.size());
    w[1] = std::max(w[1], r.shape.size());
    w[2] = std::max(w[2], r.dtype.size());
  }
  std::ostringstream os;
  os << type_name() << "\n";
  for (auto& r : rows)
    os << std::left << std::setw(static_cast<int>(w[0] + 2)) << r.name << std::setw(static_cast<int>(w[1] + 2))
       << r.shape << std::setw(static_cast<int>(w[2] + 2)) << r.dtype << std::right << r.count << "\n";
  os << "parameters: " << n_params << ", buffer elements: " << n_buffers << ", memory: " << std::fixed
     << std::setprecision(2) << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB\n";
  return os.str();
}

}  // namespace hg::nn
