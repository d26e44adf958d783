// The emulator's scheduler: grids over host threads, blocks as sets of fibers, barriers and
// warp rendezvous, the per-thread cp.async queues, and the schedule seed.
#include "cuda/emu/executor.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <random>
#include <sstream>
#include <thread>
#include <vector>

#include "cuda/emu/fiber.h"
#include "cuda/emu/racecheck.h"
#include "framework/error.h"

thread_local uint3 threadIdx{0, 0, 0};
thread_local uint3 blockIdx{0, 0, 0};
thread_local dim3 blockDim{1, 1, 1};
thread_local dim3 gridDim{1, 1, 1};

namespace hg::cuda::emu {

namespace {

enum class State : uint8_t { ready, barrier, warp, done };

struct PendingCopy {
  void* dst;
  const void* src;
  unsigned cp_bytes, src_bytes;
};

struct CudaThread {
  Fiber fiber;
  uint3 idx{0, 0, 0};
  unsigned linear = 0;
  State state = State::ready;
  const char* waiting_op = nullptr;
  uint32_t waiting_mask = 0;
  std::vector<PendingCopy> uncommitted;
  std::deque<std::vector<PendingCopy>> committed;  // oldest group first
  uintptr_t last_load = 0;                          // granule of the last plain load
};

struct WarpGroup {
  uint32_t mask = 0, arrived = 0;
  const char* op = nullptr;
  Combine combine = nullptr;
  LaneSlot lanes[32] = {};
};

struct Warp {
  uint32_t present = 0;  // lanes that exist (the last warp of a block may be partial)
  std::vector<WarpGroup> groups;
};

uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string hex(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

std::string dims(uint3 d) { return detail::concat("(", d.x, ",", d.y, ",", d.z, ")"); }

void complete_async(void* dst, unsigned bytes);

void perform(const PendingCopy& c) {
  complete_async(c.dst, c.cp_bytes);
  std::memcpy(c.dst, c.src, c.src_bytes);
  std::memset(static_cast<char*>(c.dst) + c.src_bytes, 0, c.cp_bytes - c.src_bytes);
}

void drain_copies(CudaThread& t) {
  for (auto& group : t.committed)
    for (const PendingCopy& c : group) perform(c);
  t.committed.clear();
  for (const PendingCopy& c : t.uncommitted) perform(c);
  t.uncommitted.clear();
}

class BlockRunner;
thread_local BlockRunner* t_runner = nullptr;
thread_local CudaThread* t_thread = nullptr;

// One host thread's share of a launch: fibers for one block, reused block after block.
class BlockRunner {
 public:
  BlockRunner(dim3 grid, dim3 block, size_t smem_bytes, KernelBody body, uint64_t seed, GlobalShadow* global)
      : grid_(grid), block_(block), body_(body), seed_(seed), smem_bytes_(smem_bytes), global_(global) {
    const unsigned n = block.x * block.y * block.z;
    threads_ = std::make_unique<CudaThread[]>(n);
    n_ = n;
    for (unsigned i = 0; i < n; ++i) {
      CudaThread& t = threads_[i];
      t.linear = i;
      t.idx = {i % block.x, (i / block.x) % block.y, i / (block.x * block.y)};
    }
    warps_.resize((n + 31) / 32);
    for (unsigned w = 0; w < warps_.size(); ++w) {
      const unsigned lanes = std::min(32u, n - 32 * w);
      warps_[w].present = lanes == 32 ? 0xffffffffu : (1u << lanes) - 1;
    }
    // Exactly the requested size, so AddressSanitizer reports an access past its end.
    if (smem_bytes) smem_ = static_cast<unsigned char*>(::operator new(smem_bytes, std::align_val_t{128}));
    wepoch_.resize(warps_.size());
    if (opts_.any()) {
      shadow_.attach(smem_, smem_bytes);
      // The built-in variables are the emulator's thread-locals, not shared memory.
      shadow_.exclude(&threadIdx, sizeof threadIdx);
      shadow_.exclude(&blockIdx, sizeof blockIdx);
      shadow_.exclude(&blockDim, sizeof blockDim);
      shadow_.exclude(&gridDim, sizeof gridDim);
    }
    t_runner = this;
  }
  ~BlockRunner() {
    if (smem_) ::operator delete(smem_, std::align_val_t{128});
    t_runner = nullptr;
    blockIdx = {0, 0, 0};
    blockDim = gridDim = dim3{1, 1, 1};
  }
  BlockRunner(const BlockRunner&) = delete;
  BlockRunner& operator=(const BlockRunner&) = delete;

  void run(uint64_t b);

  void arrive_at_barrier(CudaThread& t) {
    t.state = State::barrier;
    ++at_barrier_;
    t.fiber.yield();
  }
  void warp_collective(CudaThread& t, uint32_t mask, const char* op, Combine combine, const void* in, void* out);
  void* smem() const { return smem_; }
  void access(CudaThread& t, uintptr_t a, size_t n, Access kind, const void* pc);
  void complete_async(uintptr_t a, size_t n);
  void record_error(std::exception_ptr e) { error_ = e; }
  std::string where() const {
    return detail::concat("in block ", dims(block_idx_), " of grid ", dims(grid_), " with blocks of ", dims(block_),
                          "; replay this schedule with HG_EMU_SEED=", seed_);
  }

 private:
  static void thread_main(void* arg);
  [[noreturn]] void deadlock();
  [[noreturn]] void report(const Hazard& h, const char* space, uintptr_t addr) const;
  [[noreturn]] void report_read(const char* what, const Stamp& who, const char* space) const;
  std::string thread_name(uint64_t thread) const;
  void hold_a_warp();

  dim3 grid_, block_;
  KernelBody body_;
  uint64_t seed_;
  size_t smem_bytes_;
  unsigned char* smem_ = nullptr;
  std::unique_ptr<CudaThread[]> threads_;
  unsigned n_ = 0;
  std::vector<Warp> warps_;
  unsigned live_ = 0, at_barrier_ = 0;
  uint3 block_idx_{0, 0, 0};
  std::exception_ptr error_;
  std::vector<CudaThread*> ready_;
  // The memory checks (racecheck.h) and the adversarial schedule.
  const CheckOptions opts_ = check_options();
  GlobalShadow* global_;
  SharedShadow shadow_;
  uint64_t block_linear_ = 0;
  uint32_t epoch_ = 0;
  std::vector<uint32_t> wepoch_;
  std::mt19937_64 check_rng_;
  unsigned held_warp_ = 0, hold_rounds_ = 0;
};

void BlockRunner::thread_main(void* arg) {
  auto& t = *static_cast<CudaThread*>(arg);
  try {
    t_runner->body_.invoke(t_runner->body_.ctx);
    drain_copies(t);  // the hardware completes outstanding cp.async of an exiting thread
  } catch (...) {
    t_runner->record_error(std::current_exception());
  }
  t.state = State::done;
}

void BlockRunner::run(uint64_t b) {
  block_idx_ = {static_cast<unsigned>(b % grid_.x), static_cast<unsigned>(b / grid_.x % grid_.y),
                static_cast<unsigned>(b / (uint64_t{grid_.x} * grid_.y))};
  blockIdx = block_idx_;
  blockDim = block_;
  gridDim = grid_;
  // Shared memory starts as garbage on a GPU; all-ones bits (NaN for floats) make a kernel
  // that reads it before writing it fail visibly.
  if (smem_) std::memset(smem_, 0xff, smem_bytes_);
  for (auto& w : warps_) w.groups.clear();
  block_linear_ = b;
  epoch_ = 0;
  std::fill(wepoch_.begin(), wepoch_.end(), 0u);
  shadow_.new_block();
  check_rng_.seed(splitmix(seed_ ^ splitmix(~b)));
  hold_a_warp();
  for (unsigned i = 0; i < n_; ++i) {
    CudaThread& t = threads_[i];
    t.state = State::ready;
    t.uncommitted.clear();
    t.committed.clear();
    t.last_load = 0;
    t.fiber.start(&BlockRunner::thread_main, &t);
  }
  live_ = n_;
  at_barrier_ = 0;
  std::mt19937_64 rng(splitmix(seed_ ^ splitmix(b + 1)));
  while (live_ > 0) {
    ready_.clear();
    for (unsigned i = 0; i < n_; ++i)
      if (threads_[i].state == State::ready) ready_.push_back(&threads_[i]);
    if (ready_.empty()) {
      if (at_barrier_ != live_) deadlock();
      for (unsigned i = 0; i < n_; ++i)
        if (threads_[i].state == State::barrier) threads_[i].state = State::ready;
      at_barrier_ = 0;
      ++epoch_;
      hold_a_warp();
      continue;
    }
    if (hold_rounds_ > 0) {  // the held warp runs only when no other thread can
      --hold_rounds_;
      auto held = std::stable_partition(ready_.begin(), ready_.end(),
                                        [&](const CudaThread* t) { return t->linear / 32 != held_warp_; });
      if (held != ready_.begin()) ready_.erase(held, ready_.end());
    }
    std::shuffle(ready_.begin(), ready_.end(), rng);
    for (CudaThread* t : ready_) {
      t_thread = t;
      threadIdx = t->idx;
      t->fiber.resume();
      t_thread = nullptr;
      if (error_) {
        std::exception_ptr e = error_;
        error_ = nullptr;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          throw Error(detail::concat(ex.what(), " [", where(), "]"));
        }
      }
      if (t->state == State::done) --live_;
    }
  }
}

void BlockRunner::deadlock() {
  std::ostringstream os;
  os << "cuda emulation: deadlock: " << at_barrier_ << " thread(s) wait at __syncthreads, " << (n_ - live_)
     << " exited";
  for (unsigned w = 0; w < warps_.size(); ++w)
    for (const WarpGroup& g : warps_[w].groups)
      os << "; warp " << w << " lanes " << hex(g.arrived) << " wait in " << g.op << " with member mask "
         << hex(g.mask) << " for lanes " << hex(g.mask & warps_[w].present & ~g.arrived);
  throw Error(detail::concat(os.str(), " [", where(), "]"));
}

void BlockRunner::warp_collective(CudaThread& t, uint32_t mask, const char* op, Combine combine, const void* in,
                                  void* out) {
  const unsigned lane = t.linear % 32;
  const uint32_t bit = 1u << lane;
  Warp& w = warps_[t.linear / 32];
  if (!(mask & bit))
    fail(detail::concat(op, ": lane ", lane, " executes it with member mask ", hex(mask),
                        ", which does not name the lane itself (PTX requires it)"));
  auto g = std::find_if(w.groups.begin(), w.groups.end(), [&](const WarpGroup& x) { return x.mask == mask; });
  if (g != w.groups.end() && std::strcmp(g->op, op) != 0)
    fail(detail::concat(op, ": lanes ", hex(g->arrived), " of this warp wait in ", g->op,
                        " with the same member mask ", hex(mask), "; all members must execute the same instruction"));
  if (g == w.groups.end()) {
    w.groups.push_back({});
    g = w.groups.end() - 1;
    g->mask = mask;
    g->op = op;
    g->combine = combine;
  }
  g->lanes[lane] = {in, out};
  g->arrived |= bit;
  const uint32_t members = mask & w.present;
  if (g->arrived != members) {
    t.state = State::warp;
    t.waiting_op = op;
    t.waiting_mask = mask;
    t.fiber.yield();  // the last lane to arrive computes our result and marks us ready
    return;
  }
  const WarpGroup done = *g;
  w.groups.erase(g);
  ++wepoch_[t.linear / 32];
  done.combine(done.lanes, members);
  const unsigned base = t.linear - lane;
  for (unsigned l = 0; l < 32; ++l)
    if ((members >> l & 1) && l != lane) threads_[base + l].state = State::ready;
}

void BlockRunner::hold_a_warp() {
  hold_rounds_ = 0;
  if (!opts_.adversarial || warps_.size() < 2) return;
  held_warp_ = static_cast<unsigned>(check_rng_() % warps_.size());
  hold_rounds_ = 64;
}

// The bytes of [a, a + n) that lie in the 4-byte granule g.
uint8_t granule_mask(uintptr_t g, uintptr_t a, size_t n) {
  uint8_t m = 0;
  for (unsigned i = 0; i < 4; ++i)
    if (g + i >= a && g + i < a + n) m = static_cast<uint8_t>(m | 1u << i);
  return m;
}

void BlockRunner::access(CudaThread& t, uintptr_t a, size_t n, Access kind, const void* pc) {
  const bool read = kind == Access::read || kind == Access::atomic_read;
  Stamp who;
  who.thread = block_linear_ << 32 | t.linear;
  who.pc = pc;
  who.epoch = epoch_;
  who.wepoch = wepoch_[t.linear / 32];
  who.atomic = kind == Access::atomic || kind == Access::atomic_read;
  bool tracked = false;
  for (uintptr_t g = a & ~uintptr_t{3}; g < a + n; g += 4) {
    who.mask = granule_mask(g, a, n);
    bool is_static = false;
    Hazard h;
    if (Cell* c = shadow_.cell(std::max(g, a), &is_static)) {
      tracked = true;
      const char* space = is_static ? "static __shared__ memory" : "dynamic shared memory";
      if (read && (c->pending & who.mask))
        report_read("reads the destination of a cp.async before the cp.async.wait_group that completes it", who,
                    space);
      if (read && (c->init & who.mask) != who.mask) {
        if (opts_.init) report_read("reads shared memory that no thread of the block has written", who, space);
        // Poisoned as the dynamic shared memory is: the last block's values must not leak in.
        if (is_static)
          for (unsigned i = 0; i < 4; ++i)
            if ((who.mask & ~c->init) >> i & 1) *reinterpret_cast<unsigned char*>(g + i) = 0xff;
      }
      h = record(*c, who, kind);
      if (opts_.race && h.kind) report(h, space, std::max(g, a));
    } else if (global_ && global_->covers(g)) {
      tracked = true;
      if (global_->access(g, who, kind, &h) && opts_.race && h.kind) report(h, "device memory", std::max(g, a));
    }
  }
  if (!tracked) return;
  if (kind == Access::read) t.last_load = a & ~uintptr_t{3};
  if (kind != Access::write) return;
  // A yield before the store lets other threads run between this thread's load and store,
  // as a GPU interleaves warps, so a plain read-modify-write can lose updates here too.
  unsigned per_mille = opts_.preempt_per_mille;
  if (opts_.adversarial && t.last_load == (a & ~uintptr_t{3})) per_mille = std::max(per_mille, 500u);
  if (per_mille && check_rng_() % 1000 < per_mille) t.fiber.yield();
}

void BlockRunner::complete_async(uintptr_t a, size_t n) {
  for (uintptr_t g = a & ~uintptr_t{3}; g < a + n; g += 4) {
    bool is_static = false;
    if (Cell* c = shadow_.cell(std::max(g, a), &is_static))
      c->pending = static_cast<uint8_t>(c->pending & ~granule_mask(g, a, n));
  }
}

std::string BlockRunner::thread_name(uint64_t thread) const {
  const uint64_t b = thread >> 32;
  const unsigned i = static_cast<unsigned>(thread & 0xffffffffu);
  const uint3 tid{i % block_.x, (i / block_.x) % block_.y, i / (block_.x * block_.y)};
  const uint3 bid{static_cast<unsigned>(b % grid_.x), static_cast<unsigned>(b / grid_.x % grid_.y),
                  static_cast<unsigned>(b / (uint64_t{grid_.x} * grid_.y))};
  return detail::concat("thread ", dims(tid), " of block ", dims(bid));
}

std::string access_site(const Stamp& s) {
  return locate_code(static_cast<const char*>(s.pc) - 1).where;
}

void BlockRunner::report(const Hazard& h, const char* space, uintptr_t addr) const {
  const bool raw = std::strcmp(h.kind, "read-after-write") == 0, war = std::strcmp(h.kind, "write-after-read") == 0;
  auto verb = [](const Stamp& s, bool reads) {
    return detail::concat(reads ? "reads" : "writes", s.atomic ? " (atomically)" : "");
  };
  throw Error(detail::concat(
      "cuda emulation racecheck: ", h.kind, " hazard on ", space, " at ", reinterpret_cast<const void*>(addr),
      " in kernel ", locate_code(body_.kernel).function, ": ", thread_name(h.earlier.thread), " ",
      verb(h.earlier, war), " it at ", access_site(h.earlier), ", then ", thread_name(h.later.thread), " ",
      verb(h.later, raw), " it at ", access_site(h.later),
      h.earlier.thread >> 32 != h.later.thread >> 32 ? " (different blocks: no barrier orders them)"
                                                       : " with no __syncthreads or warp collective between them",
      "; only two atomics may meet so"));
}

void BlockRunner::report_read(const char* what, const Stamp& who, const char* space) const {
  throw Error(detail::concat("cuda emulation ", opts_.init ? "initcheck" : "check", ": ", thread_name(who.thread),
                             " of kernel ", locate_code(body_.kernel).function, " ", what, " (", space, ", at ",
                             access_site(who), ")"));
}

CudaThread& current_thread(const char* what) {
  if (!t_thread) throw Error(detail::concat(what, " was called outside a kernel running under the CUDA emulation"));
  return *t_thread;
}

struct SeedState {
  std::mutex mu;
  bool set = false, announced = false, from_env = false;
  uint64_t value = 0;
};

SeedState& seed_state() {
  static SeedState s;
  return s;
}

std::atomic<int> g_host_threads{0};
std::atomic<bool> g_checks{false};  // any memory check or preemption on for the running grids

void complete_async(void* dst, unsigned bytes) {
  if (g_checks.load(std::memory_order_relaxed) && t_runner)
    t_runner->complete_async(reinterpret_cast<uintptr_t>(dst), bytes);
}

}  // namespace

uint64_t seed() {
  SeedState& s = seed_state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (!s.set) {
    if (const char* env = std::getenv("HG_EMU_SEED"); env && *env) {
      char* end = nullptr;
      s.value = std::strtoull(env, &end, 10);
      if (*end != '\0')
        throw Error(detail::concat("HG_EMU_SEED='", env, "' is not a number; valid: a decimal integer"));
      s.from_env = true;
    } else {
      s.value = (uint64_t{std::random_device{}()} << 32) ^ std::random_device{}();
    }
    s.set = true;
  }
  return s.value;
}

void set_seed(uint64_t value) {
  SeedState& s = seed_state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.value = value;
  s.set = true;
  s.announced = true;  // the caller knows it
}

int host_threads() {
  int n = g_host_threads.load();
  if (n > 0) return n;
  n = static_cast<int>(std::min(4u, std::max(1u, std::thread::hardware_concurrency())));
  if (const char* env = std::getenv("HG_EMU_THREADS"); env && *env) {
    char* end = nullptr;
    const long v = std::strtol(env, &end, 10);
    if (*end != '\0' || v < 1 || v > 256)
      throw Error(detail::concat("HG_EMU_THREADS='", env, "' is invalid; valid: an integer from 1 to 256"));
    n = static_cast<int>(v);
  }
  g_host_threads.store(n);
  return n;
}

void set_host_threads(int n) {
  HG_CHECK(n >= 1 && n <= 256, "cuda emulation: host threads must be from 1 to 256, got ", n);
  g_host_threads.store(n);
}

void run_grid(dim3 grid, dim3 block, size_t dynamic_smem_bytes, KernelBody body) {
  if (t_runner) throw Error("cuda emulation: a kernel launched a kernel; dynamic parallelism is not emulated");
  const uint64_t blocks = uint64_t{grid.x} * grid.y * grid.z;
  if (blocks == 0 || block.x * block.y * block.z == 0) return;
  const uint64_t s = seed();
  {
    SeedState& st = seed_state();
    std::lock_guard<std::mutex> lock(st.mu);
    if (!st.announced && !st.from_env)
      std::fprintf(stderr, "halfgrad: CUDA emulation schedule seed %llu (HG_EMU_SEED=%llu replays it)\n",
                   static_cast<unsigned long long>(s), static_cast<unsigned long long>(s));
    st.announced = true;
  }
  const int workers = static_cast<int>(std::min<uint64_t>(static_cast<uint64_t>(host_threads()), blocks));
  const bool checks = check_options().any();
  g_checks = checks;
  std::unique_ptr<GlobalShadow> global;
  if (checks && check_options().race) global = std::make_unique<GlobalShadow>();
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::mutex error_mu;
  std::exception_ptr error;
  auto work = [&] {
    try {
      BlockRunner runner(grid, block, dynamic_smem_bytes, body, s, global.get());
      while (!stop.load(std::memory_order_relaxed)) {
        const uint64_t b = next.fetch_add(1);
        if (b >= blocks) break;
        runner.run(b);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(error_mu);
      if (!error) error = std::current_exception();
      stop = true;
    }
  };
  std::vector<std::thread> helpers;
  for (int i = 1; i < workers; ++i) helpers.emplace_back(work);
  work();
  for (auto& h : helpers) h.join();
  if (error) std::rethrow_exception(error);
}

bool in_kernel() { return t_thread != nullptr; }

void memory_access(const void* addr, size_t n, Access kind, const void* pc) {
  if (!g_checks.load(std::memory_order_relaxed) || !t_thread) return;
  t_runner->access(*t_thread, reinterpret_cast<uintptr_t>(addr), n, kind, pc);
}

void block_barrier() { t_runner->arrive_at_barrier(current_thread("__syncthreads")); }

void* dynamic_shared_memory() {
  current_thread("dynamic_shared_memory");
  return t_runner->smem();
}

unsigned lane_id() { return current_thread("lane_id").linear % 32; }

void fail(const std::string& what) {
  if (!t_thread) throw Error("cuda emulation: " + what);
  throw Error(detail::concat("cuda emulation: ", what, " (thread ", dims(t_thread->idx), ")"));
}

void warp_collective(uint32_t mask, const char* op, Combine combine, const void* in, void* out) {
  t_runner->warp_collective(current_thread(op), mask, op, combine, in, out);
}

void cp_async(void* dst, const void* src, unsigned cp_bytes, unsigned src_bytes) {
  CudaThread& t = current_thread("cp.async");
  if (cp_bytes != 4 && cp_bytes != 8 && cp_bytes != 16)
    fail(detail::concat("cp.async: copy size ", cp_bytes, " bytes; valid: 4, 8 or 16"));
  if (src_bytes > cp_bytes)
    fail(detail::concat("cp.async: source size ", src_bytes, " exceeds the copy size ", cp_bytes));
  if (reinterpret_cast<uintptr_t>(dst) % cp_bytes || reinterpret_cast<uintptr_t>(src) % cp_bytes)
    fail(detail::concat("cp.async: addresses must be aligned to the copy size ", cp_bytes, " bytes, got dst ", dst,
                        " and src ", src));
  if (g_checks.load(std::memory_order_relaxed)) {  // the copy writes its destination from now until the wait
    t_runner->access(t, reinterpret_cast<uintptr_t>(dst), cp_bytes, Access::async_write, __builtin_return_address(0));
    t_runner->access(t, reinterpret_cast<uintptr_t>(src), src_bytes, Access::read, __builtin_return_address(0));
  }
  t.uncommitted.push_back({dst, src, cp_bytes, src_bytes});
}

void cp_async_commit() {
  CudaThread& t = current_thread("cp.async.commit_group");
  t.committed.push_back(std::move(t.uncommitted));
  t.uncommitted.clear();
}

void cp_async_wait(unsigned groups_left_pending) {
  CudaThread& t = current_thread("cp.async.wait_group");
  while (t.committed.size() > groups_left_pending) {
    for (const PendingCopy& c : t.committed.front()) perform(c);
    t.committed.pop_front();
  }
}

}  // namespace hg::cuda::emu
