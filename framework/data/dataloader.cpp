// DataLoader: the epoch order is a pure function of (seed, epoch), which is what makes
// a resumed run draw the very batches an uninterrupted one would.
#include "framework/data/dataloader.h"

#include "framework/generator.h"
#include "ops/sort.h"

namespace hg::data {

DataLoader::DataLoader(std::shared_ptr<const Dataset> dataset, DataLoaderOptions o)
    : dataset_(std::move(dataset)), options_(o) {
  HG_CHECK(dataset_, "DataLoader: no dataset");
  HG_CHECK(o.batch_size > 0, "DataLoader: batch_size must be positive, got ", o.batch_size);
}

int64_t DataLoader::batches_per_epoch() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
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
  const int64_t start = batch * options_.batch_size;
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

}  // namespace hg::data
