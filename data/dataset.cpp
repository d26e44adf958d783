// Dataset::get_batch by stacking examples, and TensorDataset, which gathers a batch of
// rows with one index_select per tensor.
#include "data/dataset.h"

#include <vector>

#include "ops/concat.h"
#include "ops/index.h"

namespace hg::data {

Example Dataset::get_batch(const Tensor& indices) const {
  HG_CHECK(indices.defined() && indices.dtype() == i64 && indices.dim() == 1,
           "Dataset::get_batch: expected i64 indices [batch]");
  std::vector<Tensor> inputs, targets;
  for (int64_t i : indices.to_vector<int64_t>()) {
    HG_CHECK(i >= 0 && i < size(), "Dataset::get_batch: index ", i, " is out of range for a dataset of ", size(),
             " examples");
    Example e = get(i);
    inputs.push_back(e.input);
    if (e.target.defined()) targets.push_back(e.target);
  }
  HG_CHECK(!inputs.empty(), "Dataset::get_batch: an empty batch");
  HG_CHECK(targets.empty() || targets.size() == inputs.size(),
           "Dataset::get_batch: some examples have a target and others do not");
  return {stack(inputs, 0), targets.empty() ? Tensor() : stack(targets, 0)};
}

TensorDataset::TensorDataset(Tensor inputs, Tensor targets) : inputs_(std::move(inputs)), targets_(std::move(targets)) {
  HG_CHECK(inputs_.defined() && inputs_.dim() >= 1, "TensorDataset: inputs must have at least one axis (examples)");
  HG_CHECK(!targets_.defined() || (targets_.dim() >= 1 && targets_.size(0) == inputs_.size(0)),
           "TensorDataset: inputs hold ", inputs_.size(0), " examples but targets ",
           targets_.defined() && targets_.dim() ? targets_.size(0) : 0);
}

Example TensorDataset::get(int64_t i) const {
  HG_CHECK(i >= 0 && i < size(), "TensorDataset: index ", i, " is out of range for ", size(), " examples");
  return {inputs_.select(0, i), targets_.defined() ? targets_.select(0, i) : Tensor()};
}

Example TensorDataset::get_batch(const Tensor& indices) const {
  const Tensor idx = indices.to(inputs_.device());
  return {index_select(inputs_, 0, idx), targets_.defined() ? index_select(targets_, 0, idx.to(targets_.device())) : Tensor()};
}

}  // namespace hg::data
