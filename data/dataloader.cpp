// DataLoader: the epoch order is a pure function of (seed, epoch), which is what makes
// a resumed run draw the very batches an uninterrupted one would.
#include "data/dataloader.h"

#include "framework/generator.h"
#include "ops/sort.h"

namespace hg::data {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions o)
    : dataset_(std::move(dataset)), options_(o) {
  HG_CHECK(dataset_, "DataLoader: no dataset");
  HG_CHECK(o.batch_size > 0, "DataLoader: batch_size must be positive, got ", o.batch_size);
  HG_CHECK(o.num_shards >= 1 && o.shard >= 0 && o.shard < o.num_shards, "DataLoader: shard ", o.shard, " of ",
           o.num_shards, " shards does not exist (valid: 0 <= shard < num_shards, num_shards >= 1)");
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  if (options_.num_shards > 1) return n / (b * options_.num_shards);
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

Tensor DataLoader::epoch_order(int64_t epoch) const {
  if (epoch != cached_epoch_) {
    if (options_.shuffle) {
      Generator g;
      g.set_state(options_.seed, static_cast<uint64_t>(epoch));
      cached_order_ = randperm(dataset_->size(), {i64}, &g);
    } else {
      cached_order_ = arange(0, static_cast<double>(dataset_->size()), 1, {i64});
    }
    cached_epoch_ = epoch;
  }
  return cached_order_;
}

Tensor DataLoader::batch_indices(int64_t epoch, int64_t batch) const {
  HG_CHECK(epoch >= 0 && batch >= 0 && batch < batches_per_epoch(), "DataLoader: batch ", batch, " of epoch ", epoch,
           " does not exist (", batches_per_epoch(), " batches per epoch)");
  const int64_t start = (batch * options_.num_shards + options_.shard) * options_.batch_size;
  const int64_t len = std::min(options_.batch_size, dataset_->size() - start);
  return epoch_order(epoch).narrow(0, start, len);
}

std::optional<Example> DataLoader::next() {
  if (epoch_ended_) {
    epoch_ended_ = false;
    state_ = {state_.epoch + 1, 0};
  }
  if (state_.batch >= batches_per_epoch()) {
    epoch_ended_ = true;
    return std::nullopt;
  }
  Example e = dataset_->get_batch(batch_indices(state_.epoch, state_.batch));
  ++state_.batch;
  return e;
}

void DataLoader::load_state(LoaderState s) {
  HG_CHECK(s.epoch >= 0 && s.batch >= 0 && s.batch <= batches_per_epoch(), "DataLoader::load_state: position (epoch ",
           s.epoch, ", batch ", s.batch, ") is outside the data (", batches_per_epoch(), " batches per epoch)");
  state_ = s;
  epoch_ended_ = false;
}

StateDict DataLoader::state_dict() const {
  auto i64_scalar = [](int64_t v) { return from_data<int64_t>({v}, {}, {i64}); };
  return {{"epoch", i64_scalar(state_.epoch)},
          {"batch", i64_scalar(state_.batch)},
          {"seed", i64_scalar(static_cast<int64_t>(options_.seed))}};
}

void DataLoader::load_state_dict(const StateDict& sd) {
  for (const char* key : {"epoch", "batch", "seed"}) {
    auto it = sd.find(key);
    HG_CHECK(it != sd.end() && it->second.defined() && it->second.dtype() == i64 && it->second.numel() == 1,
             "DataLoader::load_state_dict: expected a 0-d i64 tensor '", key, "' (from DataLoader::state_dict)");
  }
  const uint64_t seed = static_cast<uint64_t>(sd.at("seed").item<int64_t>());
  HG_CHECK(seed == options_.seed, "DataLoader::load_state_dict: the state was saved by a loader with seed ", seed,
           ", this loader's seed is ", options_.seed, " (its batches would differ)");
  load_state({sd.at("epoch").item<int64_t>(), sd.at("batch").item<int64_t>()});
}

}  // namespace hg::data
