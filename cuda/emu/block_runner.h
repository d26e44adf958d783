// The emulator's block runner, shared by the scheduler (executor.cpp) and the memory
// checks' side of it (block_checks.cpp): CUDA threads as fibers, warps, and one host
// thread's share of a launch. Internal to cuda/emu/.
#pragma once
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "cuda/emu/executor.h"
#include "cuda/emu/fiber.h"
#include "cuda/emu/racecheck.h"
#include "framework/error.h"

namespace hg::cuda::emu::runner {

enum class State : uint8_t { ready, barrier, warp, poll, done };

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
  uint32_t acquired = 0;                            // the block's acquire clock at its last acquire
  bool (*poll)(const void*) = nullptr;              // State::poll: the condition waited for
  const void* poll_ctx = nullptr;
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

inline uint64_t splitmix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

inline std::string dims(uint3 d) { return detail::concat("(", d.x, ",", d.y, ",", d.z, ")"); }

class BlockRunner;
extern thread_local BlockRunner* t_runner;
extern thread_local CudaThread* t_thread;
extern std::atomic<bool> g_checks;  // any memory check or preemption on for the running grids

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
  SharedWindow window() const { return {smem_, kWindowBase, static_cast<uint32_t>(smem_bytes_)}; }
  void wait_until(CudaThread& t, bool (*ready)(const void*), const void* ctx, const char* what);
  void post_async(std::function<void()> job) { async_.push_back(std::move(job)); }
  AsyncUnits& units();
  // The thread passed an mbarrier wait or a named barrier (racecheck orders by it).
  void acquire(CudaThread& t) { t.acquired = ++sync_clock_; }
  unsigned threads() const { return n_; }
  // Where dynamic shared memory starts in the shared window (see shared_window() in executor.h).
  static constexpr uint32_t kWindowBase = 0x490;
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
  void release_polls();
  void land_async(bool all);
  [[noreturn]] void report(const Hazard& h, const char* space, uintptr_t addr) const;
  [[noreturn]] void report_read(const char* check, const char* what, const Stamp& who, const char* space) const;
  std::string thread_name(uint64_t thread) const;
  std::string kernel_name() const;
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
  // Asynchronous work not yet done, and the async units' state (both per block).
  std::vector<std::function<void()>> async_;
  std::shared_ptr<AsyncUnits> units_;
  unsigned polling_ = 0;
  uint32_t sync_clock_ = 0;
};

// Marks a cp.async destination as written (the copy has landed) for the memory checks.
void complete_async(void* dst, unsigned bytes);

}  // namespace hg::cuda::emu::runner
