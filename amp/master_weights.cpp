// cast_model and MasterWeights: in-place dtype changes via Tensor::set_data, so that
// handles held elsewhere (optimizers, monitors) keep pointing at the live parameters.
#include "amp/master_weights.h"

#include <algorithm>
#include <set>

#include "framework/autograd.h"
#include "ops/copy.h"

namespace hg::amp {

void cast_model(nn::Module& model, DType dtype, bool keep_batchnorm_f32) {
  HG_CHECK(is_floating(dtype), "cast_model: expected a floating dtype, got ", dtype_name(dtype));
  std::set<const TensorImpl*> keep;
  if (keep_batchnorm_f32)
    for (auto& [path, m] : model.named_modules())
      if (m->type_name() == "BatchNorm2d") {
        for (auto& [n, t] : m->named_parameters()) keep.insert(t.impl());
        for (auto& [n, t] : m->named_buffers()) keep.insert(t.impl());
      }
  NoGrad ng;
  auto convert = [&](const Tensor& t, DType target) {
    if (!is_floating(t.dtype()) || t.dtype() == target) return;
    t.set_data(t.to(target));
  };
  for (auto& [n, t] : model.named_parameters()) convert(t, keep.count(t.impl()) ? f32 : dtype);
  for (auto& [n, t] : model.named_buffers()) convert(t, keep.count(t.impl()) ? f32 : dtype);
}

MasterWeights::MasterWeights(std::vector<std::pair<std::string, Tensor>> model_params) : model_(std::move(model_params)) {
  NoGrad ng;
  for (auto& [name, p] : model_) {
    HG_CHECK(is_floating(p.dtype()), "MasterWeights: parameter '", name, "' is not floating");
    if (p.dtype() == f32 || p.dtype() == f64) {
      master_.push_back(p);
      continue;
    }
    Tensor m = p.to(f32).contiguous().detach();
    m.set_requires_grad(true);
    m.set_name(name);
    master_.push_back(m);
  }
}

std::vector<std::pair<std::string, Tensor>> MasterWeights::params() const {
  std::vector<std::pair<std::string, Tensor>> out;
  for (size_t i = 0; i < model_.size(); ++i) out.emplace_back(model_[i].first, master_[i]);
  return out;
}

void MasterWeights::copy_grads_to_master() {
  NoGrad ng;
  for (size_t i = 0; i < model_.size(); ++i) {
    const Tensor& p = model_[i].second;
    if (master_[i].is_same(p)) continue;
    master_[i].set_grad(p.grad().defined() ? p.grad().to(f32).contiguous() : Tensor());
    // The master's gradient carries the model's loss scale now.
    if (p.grad().defined()) autograd::set_loss_scale(master_[i].grad(), autograd::loss_scale_of(p.grad()));
    p.set_grad(Tensor());
  }
}

void MasterWeights::copy_master_to_model() {
  NoGrad ng;
  for (size_t i = 0; i < model_.size(); ++i)
    if (!master_[i].is_same(model_[i].second)) copy_(model_[i].second, master_[i]);
}

StateDict MasterWeights::state_dict() const {
  StateDict sd;
  NoGrad ng;
  for (size_t i = 0; i < model_.size(); ++i)
    if (!master_[i].is_same(model_[i].second)) sd[model_[i].first] = master_[i].detach().clone();
  return sd;
}

void MasterWeights::load_state_dict(const StateDict& sd) {
  std::vector<std::string> problems;
  size_t expected = 0;
  for (size_t i = 0; i < model_.size(); ++i) {
    if (master_[i].is_same(model_[i].second)) continue;
    ++expected;
    const std::string& name = model_[i].first;
    auto it = sd.find(name);
    if (it == sd.end()) problems.push_back("'" + name + "' is missing");
    else if (!it->second.defined()) problems.push_back("'" + name + "' is undefined");
    else if (it->second.dtype() != f32 || it->second.shape() != master_[i].shape())
      problems.push_back(detail::concat("'", name, "' is ", dtype_name(it->second.dtype()), " ", shape_str(it->second.shape()),
                                        ", expected f32 ", shape_str(master_[i].shape())));
  }
  for (const auto& [name, t] : sd) {
    const bool known = std::any_of(model_.begin(), model_.end(), [&](const auto& e) { return e.first == name; });
    if (!known) problems.push_back("'" + name + "' is not a parameter of this model");
  }
  if (problems.empty() && sd.size() != expected)
    problems.push_back("it holds f32 parameters, which are their own masters (saved with the model)");
  if (!problems.empty()) {
    std::string msg = "MasterWeights.load_state_dict: the state does not fit these master weights; nothing was loaded:";
    for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : " ") + problems[i];
    throw Error(msg);
  }
  NoGrad ng;
  for (size_t i = 0; i < model_.size(); ++i)
    if (!master_[i].is_same(model_[i].second)) copy_(master_[i], sd.at(model_[i].first));
  copy_master_to_model();
}

}  // namespace hg::amp
