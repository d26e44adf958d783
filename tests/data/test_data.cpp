// Dataset and DataLoader: every example exactly once per epoch, drop_last, a different
// order per epoch that is the same for the same seed, resuming mid-epoch, errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <vector>

#include "halfgrad.h"
#include "tests/temp_dir.h"

using namespace hg;

namespace {

// Example i is (i, 10 i): lets a test read which examples a batch holds.
std::shared_ptr<data::TensorDataset> numbered(int64_t n) {
  Tensor x = arange(0, static_cast<double>(n), 1, {f32}).view({n, 1});
  return std::make_shared<data::TensorDataset>(x, x.view({n}) * 10.0);
}

std::vector<std::vector<int64_t>> epoch(data::DataLoader& loader) {
  std::vector<std::vector<int64_t>> batches;
  while (auto b = loader.next()) {
    std::vector<int64_t> ids;
    const std::vector<double> in = b->input.to_vector<double>(), tg = b->target.to_vector<double>();
    for (size_t i = 0; i < in.size(); ++i) {
      CHECK(tg[i] == in[i] * 10);
      ids.push_back(static_cast<int64_t>(in[i]));
    }
    batches.push_back(ids);
  }
  return batches;
}

}  // namespace

TEST_CASE("DataLoader visits each example once per epoch, in a seeded order", "[data]") {
  data::DataLoader loader(numbered(10), {.batch_size = 4, .seed = 5});
  CHECK(loader.batches_per_epoch() == 3);
  auto e0 = epoch(loader);
  REQUIRE(e0.size() == 3);
  CHECK(e0[2].size() == 2);  // the last batch is smaller
  std::vector<int64_t> all;
  for (auto& b : e0) all.insert(all.end(), b.begin(), b.end());
  std::vector<int64_t> sorted = all;
  std::sort(sorted.begin(), sorted.end());
  CHECK(sorted == std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(all != sorted);  // shuffled
  auto e1 = epoch(loader);
  CHECK(e1 != e0);  // a new order each epoch
  CHECK(loader.state().epoch == 1);
  // The same seed gives the same epochs; another seed another order.
  data::DataLoader again(numbered(10), {.batch_size = 4, .seed = 5});
  CHECK(epoch(again) == e0);
  data::DataLoader other(numbered(10), {.batch_size = 4, .seed = 6});
  CHECK(epoch(other) != e0);
  // No shuffle: in order; drop_last drops the short batch.
  data::DataLoader plain(numbered(10), {.batch_size = 4, .shuffle = false, .drop_last = true});
  CHECK(epoch(plain) == std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}});
}

TEST_CASE("DataLoader resumes mid-epoch from its state", "[data]") {
  data::DataLoader a(numbered(23), {.batch_size = 5, .seed = 9});
  epoch(a);
  a.next();
  a.next();
  const data::LoaderState saved = a.state();
  CHECK(saved.epoch == 1);
  CHECK(saved.batch == 2);
  auto rest = epoch(a);
  data::DataLoader b(numbered(23), {.batch_size = 5, .seed = 9});
  b.load_state(saved);
  CHECK(epoch(b) == rest);
  CHECK_THROWS_WITH(b.load_state({0, 6}), Catch::Contains("outside the data (5 batches per epoch)"));
  CHECK(b.state().epoch == 1);  // unchanged by the refused load
}

TEST_CASE("Dataset::get_batch stacks examples of a custom dataset", "[data]") {
  struct Squares : data::Dataset {
    int64_t size() const override { return 6; }
    data::Example get(int64_t i) const override { return {full({2}, double(i)), full({}, double(i * i))}; }
  };
  data::DataLoader loader(std::make_shared<Squares>(), {.batch_size = 3, .shuffle = false});
  auto b = loader.next();
  REQUIRE(b);
  CHECK(b->input.shape() == Shape{3, 2});
  CHECK(b->target.to_vector<double>() == std::vector<double>{0, 1, 4});
  CHECK_THROWS_WITH(data::DataLoader(numbered(3), {.batch_size = 0}), Catch::Contains("batch_size must be positive"));
  CHECK_THROWS_WITH(data::TensorDataset(zeros({3, 1}), zeros({4})), Catch::Contains("inputs hold 3 examples but targets 4"));
}

TEST_CASE("DataLoader's state_dict goes through a checkpoint and resumes the same batches", "[data][checkpoint]") {
  test::TempDir dir;
  data::DataLoader a(numbered(17), {.batch_size = 4, .seed = 3});
  a.next();
  Checkpoint ck;
  ck.sections["loader"] = a.state_dict();
  save_checkpoint(dir / "ck.safetensors", ck);
  auto rest = epoch(a);
  data::DataLoader b(numbered(17), {.batch_size = 4, .seed = 3});
  b.load_state_dict(load_checkpoint(dir / "ck.safetensors").sections.at("loader"));
  CHECK(b.state().batch == 1);
  CHECK(epoch(b) == rest);
  data::DataLoader other_seed(numbered(17), {.batch_size = 4, .seed = 4});
  CHECK_THROWS_WITH(other_seed.load_state_dict(ck.sections["loader"]),
                    Catch::Contains("saved by a loader with seed 3, this loader's seed is 4"));
  CHECK(other_seed.state().batch == 0);
  CHECK_THROWS_WITH(b.load_state_dict({}), Catch::Contains("expected a 0-d i64 tensor 'epoch'"));
}

TEST_CASE("DataLoader shards: each rank's batch is its slice of the one-process global batch", "[data][dist]") {
  auto ds = std::make_shared<data::TensorDataset>(arange(0, 23, 1, {f32}).reshape({23, 1}), arange(0, 23, 1, {i64}));
  data::DataLoader whole(ds, {.batch_size = 6, .seed = 4});
  data::DataLoader s0(ds, {.batch_size = 3, .seed = 4, .num_shards = 2, .shard = 0});
  data::DataLoader s1(ds, {.batch_size = 3, .seed = 4, .num_shards = 2, .shard = 1});
  // 23 examples make 3 full global batches of 6; the 5 left over cannot fill both shards.
  CHECK(s0.batches_per_epoch() == 3);
  for (int b = 0; b < 3; ++b) {
    std::vector<int64_t> all = whole.batch_indices(0, b).to_vector<int64_t>();
    std::vector<int64_t> a = s0.next()->target.to_vector<int64_t>(), c = s1.next()->target.to_vector<int64_t>();
    CHECK(a == std::vector<int64_t>(all.begin(), all.begin() + 3));
    CHECK(c == std::vector<int64_t>(all.begin() + 3, all.end()));
  }
  CHECK_FALSE(s0.next().has_value());
  CHECK_THROWS_WITH(data::DataLoader(ds, {.batch_size = 3, .num_shards = 2, .shard = 2}),
                    Catch::Contains("valid: 0 <= shard < num_shards"));
}

// A second check of the per-epoch shuffle (issue 29): over several epochs of a larger set,
// each epoch is a permutation, no two epochs share an order, batch_indices agrees with what
// next() returned, and a loader of the same seed replays every epoch.
TEST_CASE("DataLoader draws a different permutation every epoch, replayed by the same seed", "[data]") {
  constexpr int64_t n = 40, epochs = 5;
  data::DataLoader a(numbered(n), {.batch_size = 6, .seed = 21});
  std::vector<std::vector<int64_t>> orders;
  for (int64_t e = 0; e < epochs; ++e) {
    std::vector<int64_t> order;
    for (const auto& batch : epoch(a)) order.insert(order.end(), batch.begin(), batch.end());
    INFO("epoch " << e);
    std::vector<int64_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> all(n);
    for (int64_t i = 0; i < n; ++i) all[static_cast<size_t>(i)] = i;
    CHECK(sorted == all);
    std::vector<int64_t> listed;
    for (int64_t b = 0; b < a.batches_per_epoch(); ++b) {
      const std::vector<int64_t> idx = a.batch_indices(e, b).to_vector<int64_t>();
      listed.insert(listed.end(), idx.begin(), idx.end());
    }
    CHECK(listed == order);
    for (const auto& earlier : orders) CHECK(order != earlier);  // 40! orders: a repeat is a bug
    orders.push_back(order);
  }
  data::DataLoader again(numbered(n), {.batch_size = 6, .seed = 21});
  for (int64_t e = 0; e < epochs; ++e) {
    std::vector<int64_t> order;
    for (const auto& batch : epoch(again)) order.insert(order.end(), batch.begin(), batch.end());
    CHECK(order == orders[static_cast<size_t>(e)]);
  }
}
