// The block state behind cuda/emu/async_ops.h: wgmma queues per warpgroup, bulk-store groups
// per thread, named barriers. Internal to cuda/emu/; one per running block (BlockRunner::units).
#pragma once
#include <array>
#include <cstdint>
#include <deque>
#include <vector>

#include "cuda/emu/async_ops.h"
#include "cuda/emu/shared_window.h"

namespace hg::cuda::emu {

// One wgmma of a warpgroup: what it multiplies, and each thread's accumulators once the
// thread has issued it. It runs when a wait_group retires its commit group.
struct WgmmaOp {
  WgmmaType type;
  int n;
  uint64_t a_desc, b_desc;
  bool a_mn_major, b_mn_major, scale_d;
  uint64_t group;  // the commit group it belongs to (commits made before its issue)
  std::array<float*, 128> acc{};
  unsigned arrived = 0;
};

struct WarpgroupQueue {
  std::deque<WgmmaOp> ops;  // issued, not yet run, oldest first
  uint64_t first = 0;       // sequence number of ops.front()
};

// A bulk store: what it reads is taken at issue (the hardware may read any time until the
// wait_group.read that retires it) and compared at that wait, so both a store issued before
// the tile was written and a tile overwritten before the wait are caught.
struct BulkStore {
  CUtensorMap map;
  uint32_t src;
  int32_t coords[5];
  int rank;
  std::vector<unsigned char> bytes;  // shared memory [src, src + bytes.size()) at issue
};

struct NamedBarrier {
  unsigned arrived = 0, count = 0;
  uint64_t generation = 0;
};

struct AsyncUnits {
  explicit AsyncUnits(unsigned threads)
      : warpgroups((threads + 127) / 128), issued(threads), commits(threads), open_stores(threads),
        committed_stores(threads) {}
  std::vector<WarpgroupQueue> warpgroups;
  std::vector<uint64_t> issued, commits;  // per thread: wgmmas issued, groups committed
  std::vector<std::vector<BulkStore>> open_stores;
  std::vector<std::deque<std::vector<BulkStore>>> committed_stores;
  NamedBarrier named[16];
};

// A thread exits: the hardware completes its outstanding bulk stores.
void thread_exits(AsyncUnits& units, unsigned thread);

}  // namespace hg::cuda::emu
