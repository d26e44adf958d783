// DataLoader: batches of a Dataset in an order drawn per epoch from (seed, epoch), so a
// run is deterministic by seed and resumes mid-epoch from a saved (epoch, batch) state.
//
//   data::DataLoader loader(dataset, {.batch_size = 32, .seed = 1});
//   for (int epoch = 0; epoch < 10; ++epoch)
//     while (auto batch = loader.next()) train(batch->input, batch->target);
//   checkpoint.sections["loader"] = loader.state_dict();   // resume: loader.load_state_dict(...)
#pragma once
#include <cstdint>
#include <memory>
#include <optional>

#include "data/dataset.h"
#include "framework/state_dict.h"

namespace hg::data {

struct DataLoaderOptions {
  int64_t batch_size = 32;
  bool shuffle = true;     // a new permutation each epoch; false: 0, 1, 2, ...
  bool drop_last = false;  // drop a last batch smaller than batch_size
  uint64_t seed = 0;       // the permutation of epoch e is randperm from Generator(seed) at draw e
  // Data-parallel sharding: batch b of an epoch is one global batch of batch_size x
  // num_shards examples of the shared order, of which shard `shard` (the rank) takes the
  // shard-th slice. Every shard then steps through the same (epoch, batch) positions, so a
  // saved position resumes all ranks; a last global batch that cannot fill every shard is
  // dropped (all ranks must take equal steps).
  int64_t num_shards = 1;
  int64_t shard = 0;
};

struct LoaderState {
  int64_t epoch = 0;
  int64_t batch = 0;  // the next batch of that epoch
};

class DataLoader {
 public:
  DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions options = {});

  // The next batch of this epoch; nullopt when the epoch is over (the call after that
  // starts the next epoch).
  std::optional<Example> next();
  int64_t batches_per_epoch() const;
  // The indices of epoch `epoch`'s batch `batch` (i64 [<= batch_size]).
  Tensor batch_indices(int64_t epoch, int64_t batch) const;

  LoaderState state() const { return state_; }
  // Resumes at a saved position; hg::Error (and no change) if it is outside the data.
  void load_state(LoaderState s);
  // The position as 0-d i64 tensors "epoch", "batch" and "seed" (a Checkpoint section);
  // loading refuses, changing nothing, a state of another seed or outside the data.
  StateDict state_dict() const;
  void load_state_dict(const StateDict& sd);
  const DataLoaderOptions& options() const { return options_; }

 private:
  Tensor epoch_order(int64_t epoch) const;
  std::shared_ptr<const Dataset> dataset_;
  DataLoaderOptions options_;
  LoaderState state_;
  bool epoch_ended_ = false;
  mutable int64_t cached_epoch_ = -1;
  mutable Tensor cached_order_;
};

}  // namespace hg::data
