// SyncBatchNorm under mpirun -np 2: a model with batch norm trains on 2 ranks x batch B
// like one process with plain BatchNorm2d on batch 2B (weights and running statistics),
// and it falls back to the running statistics in evaluation.
#include <catch2/catch.hpp>

#include "sync_bn_check.h"

TEST_CASE("SyncBatchNorm: 2 ranks x batch 3 train like one process with BatchNorm2d on batch 6", "[dist]") {
  hg::dist_test::check_sync_bn_trains_like_one_process(hg::Device::cpu());
}
