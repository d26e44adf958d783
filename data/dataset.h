// Datasets: indexed collections of (input, target) examples that a DataLoader batches.
// A subclass defines size() and get(i); get_batch gathers many at once (one index_select
// for tensor-backed data, a stack of get(i) otherwise).
#pragma once
#include <cstdint>

#include "framework/tensor.h"

namespace hg::data {

struct Example {
  Tensor input, target;  // target may be undefined (unlabelled data)
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  // The examples at `indices` (i64 [B]) stacked along a new axis 0.
  virtual Example get_batch(const Tensor& indices) const;
};

// Examples are the slices along axis 0 of `inputs` and `targets` (equal first sizes).
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor inputs, Tensor targets = Tensor());
  int64_t size() const override { return inputs_.size(0); }
  Example get(int64_t index) const override;
  Example get_batch(const Tensor& indices) const override;

 private:
  Tensor inputs_, targets_;
};

}  // namespace hg::data
