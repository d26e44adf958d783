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

#include "cuda/emu/async_units.h"
#include "cuda/emu/block_runner.h"
#include "cuda/emu/fiber.h"
#include "cuda/emu/racecheck.h"
#include "framework/error.h"

thread_local uint3 threadIdx{0, 0, 0};
thread_local uint3 blockIdx{0, 0, 0};
thread_local dim3 blockDim{1, 1, 1};
thread_local dim3 gridDim{1, 1, 1};

namespace hg::cuda::emu {

using namespace runner;

thread_local BlockRunner* runner::t_runner = nullptr;
thread_local CudaThread* runner::t_thread = nullptr;
std::atomic<bool> runner::g_checks{false};

namespace {

std::string hex(uint32_t v) {
  std::ostringstream os;
  os << "0x" << std::hex << v;
  return os.str();
}

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

}  // namespace

void BlockRunner::thread_main(void* arg) {
  auto& t = *static_cast<CudaThread*>(arg);
  try {
    t_runner->body_.invoke(t_runner->body_.ctx);
    drain_copies(t);  // the hardware completes outstanding cp.async of an exiting thread
    if (t_runner->units_) thread_exits(*t_runner->units_, t.linear);  // and its bulk stores
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
  async_.clear();
  units_.reset();
  polling_ = 0;
  sync_clock_ = 0;
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
    t.acquired = 0;
    t.fiber.start(&BlockRunner::thread_main, &t);
  }
  live_ = n_;
  at_barrier_ = 0;
  std::mt19937_64 rng(splitmix(seed_ ^ splitmix(b + 1)));
  while (live_ > 0) {
    if (!async_.empty()) land_async(false);
    if (polling_ > 0) release_polls();
    ready_.clear();
    for (unsigned i = 0; i < n_; ++i)
      if (threads_[i].state == State::ready) ready_.push_back(&threads_[i]);
    if (ready_.empty()) {
      if (!async_.empty()) {  // nothing else can move: the outstanding copies land
        land_async(true);
        continue;
      }
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
  land_async(true);
}

void BlockRunner::release_polls() {
  for (unsigned i = 0; i < n_; ++i) {
    CudaThread& t = threads_[i];
    if (t.state != State::poll) continue;
    t_thread = &t;  // a condition may read the waiting thread's identity
    const bool ready = t.poll(t.poll_ctx);
    t_thread = nullptr;
    if (ready) {
      t.state = State::ready;
      --polling_;
    }
  }
}

void BlockRunner::land_async(bool all) {
  // A job may post more work (a copy completing on a barrier does not); take the list first.
  std::vector<std::function<void()>> now, later;
  for (auto& job : async_) (all || (check_rng_() & 1) ? now : later).push_back(std::move(job));
  async_ = std::move(later);
  try {
    for (auto& job : now) job();
  } catch (const std::exception& ex) {
    throw Error(detail::concat(ex.what(), " [", where(), "]"));
  }
}

void BlockRunner::wait_until(CudaThread& t, bool (*ready)(const void*), const void* ctx, const char* what) {
  if (ready(ctx)) return;
  t.state = State::poll;
  t.poll = ready;
  t.poll_ctx = ctx;
  t.waiting_op = what;
  ++polling_;
  t.fiber.yield();  // the scheduler makes us ready once the condition holds
}

void BlockRunner::deadlock() {
  std::ostringstream os;
  os << "cuda emulation: deadlock: " << at_barrier_ << " thread(s) wait at __syncthreads, " << polling_
     << " in an mbarrier/warpgroup wait, " << (n_ - live_) << " exited";
  for (unsigned w = 0; w < warps_.size(); ++w)
    for (const WarpGroup& g : warps_[w].groups)
      os << "; warp " << w << " lanes " << hex(g.arrived) << " wait in " << g.op << " with member mask "
         << hex(g.mask) << " for lanes " << hex(g.mask & warps_[w].present & ~g.arrived);
  for (unsigned i = 0; i < n_; ++i)
    if (threads_[i].state == State::poll) os << "; thread " << dims(threads_[i].idx) << " waits in " << threads_[i].waiting_op;
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

namespace {

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
unsigned thread_linear() { return current_thread("thread_linear").linear; }
unsigned block_threads() {
  current_thread("block_threads");
  return t_runner->threads();
}

void wait_until(bool (*ready)(const void*), const void* ctx, const char* what) {
  t_runner->wait_until(current_thread(what), ready, ctx, what);
}

void acquire() { t_runner->acquire(current_thread("an acquire")); }

void post_async(std::function<void()> job) {
  current_thread("asynchronous work");
  t_runner->post_async(std::move(job));
}

SharedWindow shared_window() {
  current_thread("shared_window");
  return t_runner->window();
}

uint32_t shared_window_address(const void* p) {
  current_thread("a shared-window address");
  const SharedWindow w = t_runner->window();
  const auto a = reinterpret_cast<uintptr_t>(p), lo = reinterpret_cast<uintptr_t>(w.host);
  if (a < lo || a - lo > w.bytes)
    fail(detail::concat("a shared-window address of ", p, ", which is not in the block's dynamic shared memory (",
                        w.bytes, " bytes; the emulation gives window addresses to dynamic shared memory only)"));
  return w.base + static_cast<uint32_t>(a - lo);
}

AsyncUnits& async_units() {
  current_thread("the asynchronous units");
  return t_runner->units();
}

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
