// The sm_90 asynchronous units of the emulation (cuda/emu/async_ops.h): mbarriers as bits in
// their 8 bytes of shared memory, TMA copies as asynchronous jobs of the scheduler, wgmma as
// per-warpgroup queues run at wait_group, bulk-store groups, named barriers. What each one
// computes (tensor-map boxes, wgmma operand layouts) is in tma_model.* and wgmma_model.*.
#include "cuda/emu/async_units.h"

#include <algorithm>
#include <cstring>

#include "cuda/emu/block_runner.h"
#include "cuda/emu/executor.h"
#include "cuda/emu/tma_model.h"
#include "cuda/emu/wgmma_model.h"
#include "framework/error.h"

namespace hg::cuda::emu {

AsyncUnits& runner::BlockRunner::units() {
  if (!units_) units_ = std::make_shared<AsyncUnits>(n_);
  return *units_;
}

namespace {

// ---- mbarrier ------------------------------------------------------------------------
// The 64 bits: a tag (so a barrier mbarrier.init did not set up is caught), the phase
// parity, the expected and pending arrival counts of the current phase, and the signed
// transaction count (bytes expected minus bytes landed).
struct Mbarrier {
  uint32_t phase, expected, pending;
  int32_t tx;
};
constexpr uint64_t kTag = 0xb7;
constexpr uint32_t kMaxCount = (1u << 11) - 1;
constexpr int32_t kMaxTx = (1 << 21) - 1;

uint64_t pack(const Mbarrier& m) {
  return kTag | uint64_t{m.phase & 1} << 8 | uint64_t{m.expected} << 9 | uint64_t{m.pending} << 20 |
         (static_cast<uint64_t>(static_cast<uint32_t>(m.tx)) & ((uint64_t{1} << 22) - 1)) << 31;
}

void check_address(const void* bar, const char* op) {
  if (reinterpret_cast<uintptr_t>(bar) % 8)
    fail(detail::concat(op, ": the barrier at ", bar, " is not 8-byte aligned"));
  shared_window().at(shared_window_address(bar), 8, op);  // all 8 bytes inside the block's shared memory
}

Mbarrier unpack(const uint64_t* bar, const char* op) {
  const uint64_t v = *bar;
  if ((v & 0xff) != kTag)
    fail(detail::concat(op, ": the barrier at shared address ", shared_window_address(bar),
                        " was not set up by mbarrier.init (or was overwritten since)"));
  auto tx = static_cast<int32_t>(v >> 31 & ((uint64_t{1} << 22) - 1));
  if (tx & (1 << 21)) tx -= 1 << 22;
  return {static_cast<uint32_t>(v >> 8 & 1), static_cast<uint32_t>(v >> 9 & kMaxCount),
          static_cast<uint32_t>(v >> 20 & kMaxCount), tx};
}

// The phase completes when every expected arrival came and the transaction count is back
// at zero; the next phase expects the init count again.
void maybe_complete(uint64_t* bar, Mbarrier m) {
  if (m.pending == 0 && m.tx == 0) {
    m.phase ^= 1;
    m.pending = m.expected;
  }
  *bar = pack(m);
}

void complete_tx(uint64_t* bar, uint32_t bytes) {
  Mbarrier m = unpack(bar, "mbarrier complete_tx (a TMA copy landing)");
  m.tx -= static_cast<int32_t>(bytes);
  if (m.tx < -kMaxTx) throw Error("cuda emulation: mbarrier transaction count underflows (more bytes landed than expected by 2^21)");
  maybe_complete(bar, m);
}

}  // namespace

void mbarrier_init(uint64_t* bar, uint32_t count) {
  check_address(bar, "mbarrier.init");
  if (count == 0 || count > kMaxCount)
    fail(detail::concat("mbarrier.init: arrival count ", count, "; the emulation models 1 to ", kMaxCount));
  *bar = pack({0, count, count, 0});
}

void mbarrier_arrive(uint64_t* bar, uint32_t count) {
  check_address(bar, "mbarrier.arrive");
  Mbarrier m = unpack(bar, "mbarrier.arrive");
  if (count > m.pending)
    fail(detail::concat("mbarrier.arrive: ", count, " arrival(s) on a phase that expects only ", m.pending,
                        " more (of ", m.expected, "): more threads arrive than the barrier was initialised for"));
  m.pending -= count;
  maybe_complete(bar, m);
}

void mbarrier_expect_tx(uint64_t* bar, uint32_t bytes) {
  check_address(bar, "mbarrier.expect_tx");
  Mbarrier m = unpack(bar, "mbarrier.expect_tx");
  if (bytes > static_cast<uint32_t>(kMaxTx) || m.tx + static_cast<int64_t>(bytes) > kMaxTx)
    fail(detail::concat("mbarrier.expect_tx: ", bytes, " bytes take the transaction count past 2^21 - 1"));
  m.tx += static_cast<int32_t>(bytes);
  *bar = pack(m);
}

// Waiting on parity P returns once the phase with that parity has completed: the current
// phase's parity is then the other one. (A fresh barrier is in phase 0, so parity 1, "the
// phase before", counts as complete.)
bool mbarrier_test_parity(const uint64_t* bar, uint32_t parity) {
  return unpack(bar, "mbarrier.try_wait.parity").phase != (parity & 1);
}

namespace {
struct ParityWait {
  const uint64_t* bar;
  uint32_t parity;
};
}  // namespace

void mbarrier_wait_parity(uint64_t* bar, uint32_t parity) {
  check_address(bar, "mbarrier.try_wait.parity");
  const ParityWait w{bar, parity};
  wait_until([](const void* c) {
    const auto& w = *static_cast<const ParityWait*>(c);
    return mbarrier_test_parity(w.bar, w.parity);
  }, &w, "mbarrier.try_wait.parity");
  acquire();
}

// ---- TMA -----------------------------------------------------------------------------
namespace {
void check_rank(int rank, const char* op) {
  if (rank < 1 || rank > 5) fail(detail::concat(op, ": rank ", rank, "; valid: 1 to 5"));
}
}  // namespace

void tma_load(void* smem_dst, const void* tensor_map, uint64_t* bar, const int32_t* coords, int rank) {
  check_rank(rank, "cp.async.bulk.tensor (load)");
  check_address(bar, "cp.async.bulk.tensor (load) completion barrier");
  CUtensorMap map;
  std::memcpy(&map, tensor_map, sizeof map);  // the instruction reads the map at issue
  const uint32_t dst = shared_window_address(smem_dst);
  const SharedWindow window = shared_window();
  std::array<int32_t, 5> c{};
  std::copy(coords, coords + rank, c.begin());
  post_async([map, dst, window, c, rank, bar] {
    const uint32_t bytes = tma_load_tile(map, window, dst, c.data(), rank);
    complete_tx(bar, bytes);
  });
}

void tma_store(const void* tensor_map, const void* smem_src, const int32_t* coords, int rank) {
  check_rank(rank, "cp.async.bulk.tensor (store)");
  BulkStore s{};
  std::memcpy(&s.map, tensor_map, sizeof s.map);
  s.src = shared_window_address(smem_src);
  std::copy(coords, coords + rank, s.coords);
  s.rank = rank;
  // The box's rows are whole 16-byte chunks that the swizzle moves only inside their 128-byte
  // line, and the source is 128-byte aligned (checked by the copy): whole lines cover it.
  const SharedWindow window = shared_window();
  const uint32_t end = std::min<uint64_t>(s.src + (tma_box_bytes(s.map, rank) + 127) / 128 * 128,
                                          uint64_t{window.base} + window.bytes);
  const unsigned char* from = window.at(s.src, end - s.src, "cp.async.bulk.tensor (store)");
  s.bytes.assign(from, from + (end - s.src));
  async_units().open_stores[thread_linear()].push_back(std::move(s));
}

void bulk_commit() {
  AsyncUnits& u = async_units();
  const unsigned t = thread_linear();
  u.committed_stores[t].push_back(std::move(u.open_stores[t]));
  u.open_stores[t].clear();
}

namespace {
void perform(std::vector<BulkStore>& group, const SharedWindow& window) {
  for (BulkStore& s : group) {
    const auto n = static_cast<uint32_t>(s.bytes.size());
    if (std::memcmp(window.at(s.src, n, "cp.async.bulk.tensor (store)"), s.bytes.data(), n) != 0)
      throw Error(detail::concat("cuda emulation: cp.async.bulk.tensor store: its shared memory [", s.src, ", ",
                                 uint64_t{s.src} + n, ") was written after the store was issued and before the "
                                 "cp.async.bulk.wait_group.read that retires it (the store may read it until then)"));
    tma_store_tile(s.map, SharedWindow{s.bytes.data(), s.src, n}, s.src, s.coords, s.rank);
  }
}
}  // namespace

void bulk_wait_read(unsigned groups_left_pending) {
  AsyncUnits& u = async_units();
  auto& groups = u.committed_stores[thread_linear()];
  const SharedWindow window = shared_window();
  while (groups.size() > groups_left_pending) {
    perform(groups.front(), window);
    groups.pop_front();
  }
}

void thread_exits(AsyncUnits& u, unsigned thread) {
  const SharedWindow window = shared_window();
  for (auto& g : u.committed_stores[thread]) perform(g, window);
  u.committed_stores[thread].clear();
  perform(u.open_stores[thread], window);  // uncommitted: the hardware still completes them
  u.open_stores[thread].clear();
}

// ---- wgmma ---------------------------------------------------------------------------
namespace {

WarpgroupQueue& my_warpgroup(AsyncUnits& u, const char* op) {
  if (block_threads() % 128)
    fail(detail::concat(op, ": needs whole warpgroups (128 threads), but the block has ", block_threads(), " threads"));
  return u.warpgroups[thread_linear() / 128];
}

const char* type_name(WgmmaType t) { return t == WgmmaType::f16 ? "f16" : "bf16"; }

void run(const WgmmaOp& op) {
  wgmma_compute(shared_window(), op.type == WgmmaType::f16 ? WgmmaInput::f16 : WgmmaInput::bf16, op.n, op.a_desc,
                op.a_mn_major, op.b_desc, op.b_mn_major, op.scale_d, op.acc.data());
}

struct GroupWait {
  WarpgroupQueue* q;
  uint64_t before;  // every op of a group < before must run
};

// Whether every op of the retiring groups has been issued by all 128 threads.
bool issued_by_all(const void* c) {
  const auto& w = *static_cast<const GroupWait*>(c);
  for (const WgmmaOp& op : w.q->ops) {
    if (op.group >= w.before) break;
    if (op.arrived != 128) return false;
  }
  return true;
}

}  // namespace

void wgmma_issue(WgmmaType type, int n, uint64_t a_desc, bool a_mn_major, uint64_t b_desc, bool b_mn_major,
                 bool scale_d, float* acc) {
  AsyncUnits& u = async_units();
  WarpgroupQueue& q = my_warpgroup(u, "wgmma.mma_async");
  const unsigned t = thread_linear(), slot = t % 128;
  const uint64_t seq = u.issued[t]++;
  if (seq < q.first) fail("wgmma.mma_async: a thread issues a wgmma its warpgroup has already run (it skipped some)");
  const uint64_t i = seq - q.first;
  const WgmmaOp mine{type, n, a_desc, b_desc, a_mn_major, b_mn_major, scale_d, u.commits[t]};
  if (i == q.ops.size()) q.ops.push_back(mine);
  if (i > q.ops.size()) fail("wgmma.mma_async: the threads of a warpgroup issue different numbers of wgmma");
  WgmmaOp& op = q.ops[i];
  if (op.type != type || op.n != n || op.a_desc != a_desc || op.b_desc != b_desc || op.a_mn_major != a_mn_major ||
      op.b_mn_major != b_mn_major || op.scale_d != scale_d || op.group != mine.group)
    fail(detail::concat("wgmma.mma_async: thread ", slot, " of the warpgroup issues m64n", n, "k16.", type_name(type),
                        " with descriptors ", a_desc, "/", b_desc, ", scale-d ", scale_d, " in commit group ", mine.group,
                        ", but the warpgroup's instruction number ", seq, " is m64n", op.n, "k16.", type_name(op.type),
                        " with ", op.a_desc, "/", op.b_desc, ", scale-d ", op.scale_d, " in group ", op.group,
                        " (.sync.aligned: every thread must execute the same wgmma)"));
  op.acc[slot] = acc;
  ++op.arrived;
}

void wgmma_commit() {
  AsyncUnits& u = async_units();
  my_warpgroup(u, "wgmma.commit_group");
  ++u.commits[thread_linear()];
}

void wgmma_wait(unsigned groups_left_pending) {
  AsyncUnits& u = async_units();
  WarpgroupQueue& q = my_warpgroup(u, "wgmma.wait_group");
  const uint64_t committed = u.commits[thread_linear()];
  if (committed <= groups_left_pending) return;
  const GroupWait w{&q, committed - groups_left_pending};
  // The retiring groups run once all 128 threads have issued them; whichever thread gets
  // here first after that runs them, for every thread's accumulators.
  wait_until(&issued_by_all, &w, "wgmma.wait_group (waiting for the warpgroup's other threads to issue)");
  while (!q.ops.empty() && q.ops.front().group < w.before) {
    run(q.ops.front());
    q.ops.pop_front();
    ++q.first;
  }
}

// ---- named barriers ------------------------------------------------------------------
namespace {
struct GenerationWait {
  const NamedBarrier* b;
  uint64_t generation;
};
}  // namespace

void named_barrier_sync(unsigned id, unsigned count) {
  if (id == 0 || id > 15) fail(detail::concat("bar.sync: barrier ", id, "; valid: 1 to 15 (0 is __syncthreads)"));
  if (count == 0 || count % 32 || count > block_threads())
    fail(detail::concat("bar.sync ", id, ": thread count ", count, "; valid: a multiple of 32 up to the block's ",
                        block_threads()));
  NamedBarrier& b = async_units().named[id];
  if (b.arrived > 0 && b.count != count)
    fail(detail::concat("bar.sync ", id, ": thread count ", count, " while threads already wait there with count ", b.count));
  b.count = count;
  const GenerationWait w{&b, b.generation};
  if (++b.arrived == count) {
    b.arrived = 0;
    ++b.generation;
  } else {
    wait_until([](const void* c) {
      const auto& w = *static_cast<const GenerationWait*>(c);
      return w.b->generation != w.generation;
    }, &w, "bar.sync (a named barrier)");
  }
  acquire();
}

}  // namespace hg::cuda::emu
