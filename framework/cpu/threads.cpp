// The worker pool behind hg::cpu::parallel_run: one job slot per worker (so a job of two
// threads wakes one worker, not all), a short spin before sleeping on the slot's futex
// (std::atomic::wait), and a fresh pool in a forked child, which has none of the threads.
#include "framework/cpu/threads.h"

#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "framework/error.h"

namespace hg {
namespace {

// How long an idle thread polls before it sleeps: HG_THREAD_SPIN_US, default 0. Measured
// with bench/threads_under_load (docs/benchmark.md): a 30 us poll catches the next op of a
// training loop on an idle machine (1.3x faster on tiny ops), but any poll competes for
// the cores with whatever else runs (up to 1.5x slower under load), and a poll that
// outlasts the gaps between ops (1 ms, like libgomp's default) is 3-10x slower there.
std::chrono::nanoseconds spin_time() {
  static const std::chrono::nanoseconds t = [] {
    const char* s = std::getenv("HG_THREAD_SPIN_US");
    const long us = s && *s ? std::strtol(s, nullptr, 10) : 0;
    return std::chrono::nanoseconds(std::clamp(us, 0L, 100000L) * 1000);
  }();
  return t;
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

void futex_wait(std::atomic<uint32_t>& word, uint32_t old) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAIT_PRIVATE, old, nullptr, nullptr, 0);
}
void futex_wake(std::atomic<uint32_t>& word, int n) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(&word), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr, 0);
}

// A word one thread waits on for a change and another changes: the waiter polls for
// spin_time(), then sleeps in the kernel; the changer makes the futex call only when
// someone may be asleep (Dekker's pattern on `sleepers`, both sides sequentially consistent).
struct WaitWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleepers{0};

  uint32_t wait_change(uint32_t old) {
    const auto spin = spin_time();
    if (spin.count() > 0) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 1;; ++i) {
        const uint32_t v = value.load(std::memory_order_acquire);
        if (v != old) return v;
        if (i % 64 == 0 && std::chrono::steady_clock::now() - start > spin) break;
        cpu_relax();
      }
    }
    for (;;) {
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      uint32_t v = value.load(std::memory_order_seq_cst);
      if (v == old) futex_wait(value, old);
      sleepers.fetch_sub(1, std::memory_order_seq_cst);
      v = value.load(std::memory_order_acquire);
      if (v != old) return v;
    }
  }
  void wake_all() {
    if (sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(value, INT32_MAX);
  }
};

int env_threads(const char* name) {
  const char* s = std::getenv(name);
  if (!s || !*s) return 0;
  char* end = nullptr;
  const long v = std::strtol(s, &end, 10);  // OMP_NUM_THREADS may be a list "4,2": its first entry
  if (end == s || v < 1 || v > 4096) return 0;
  return static_cast<int>(v);
}

int default_threads() {
  if (int n = env_threads("HG_NUM_THREADS")) return n;
  if (int n = env_threads("OMP_NUM_THREADS")) return n;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

std::atomic<int> g_threads{0};  // 0: not decided yet
thread_local int t_limit = 0;   // ThreadLimit of this thread; 0: none
thread_local bool t_in_parallel = false;

struct Job {
  void (*body)(void*, int);
  void* ctx;
};

class Pool {
 public:
  // Runs job on t = 1..n-1 of the workers and t = 0 here; the caller holds run_mu.
  void run(int n, const Job& job) {
    grow(n - 1);
    remaining_.value.store(static_cast<uint32_t>(n - 1), std::memory_order_relaxed);
    for (int t = 1; t < n; ++t) {
      Slot& s = *slots_[static_cast<size_t>(t - 1)];
      s.job = &job;
      s.seq.value.fetch_add(1, std::memory_order_seq_cst);  // publishes s.job
      s.seq.wake_all();
    }
    std::exception_ptr mine;
    try {
      job.body(job.ctx, 0);
    } catch (...) {
      mine = std::current_exception();
    }
    for (uint32_t left = remaining_.value.load(std::memory_order_acquire); left != 0;)
      left = remaining_.wait_change(left);
    std::exception_ptr theirs = std::exchange(error_, nullptr);
    if (mine) std::rethrow_exception(mine);
    if (theirs) std::rethrow_exception(theirs);
  }

  std::mutex run_mu;  // one parallel op at a time

 private:
  struct alignas(64) Slot {
    WaitWord seq;                // bumped once per job handed to this worker
    const Job* job = nullptr;    // written before seq is bumped, read after it is seen
  };

  void grow(int workers) {
    while (static_cast<int>(slots_.size()) < workers) {
      slots_.push_back(std::make_unique<Slot>());
      const int t = static_cast<int>(slots_.size());
      std::thread(&Pool::work, this, slots_.back().get(), t).detach();
    }
  }

  void work(Slot* slot, int t) {
    t_in_parallel = true;
    uint32_t seen = 0;
    for (;;) {
      seen = slot->seq.wait_change(seen);
      const Job* job = slot->job;
      try {
        job->body(job->ctx, t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
      // The pool, not the job (the caller's, gone once it sees 0), carries the count.
      if (remaining_.value.fetch_sub(1, std::memory_order_seq_cst) == 1) remaining_.wake_all();
    }
  }

  std::vector<std::unique_ptr<Slot>> slots_;  // grows only; workers live as long as the process
  WaitWord remaining_;
  std::mutex error_mu_;
  std::exception_ptr error_;
};

// Never destroyed (workers may be asleep in it at exit); a forked child, which has none of
// its threads, starts a new one.
std::atomic<Pool*> g_pool{nullptr};

Pool& pool() {
  Pool* p = g_pool.load(std::memory_order_acquire);
  if (p) return *p;
  static std::once_flag once;
  std::call_once(once, [] {
    g_pool.store(new Pool, std::memory_order_release);
    pthread_atfork(nullptr, nullptr, [] { g_pool.store(new Pool, std::memory_order_release); });
  });
  return *g_pool.load(std::memory_order_acquire);
}

}  // namespace

int num_threads() {
  int n = g_threads.load(std::memory_order_relaxed);
  if (n == 0) {
    int expected = 0;
    g_threads.compare_exchange_strong(expected, default_threads());
    n = g_threads.load(std::memory_order_relaxed);
  }
  return t_limit > 0 ? std::min(n, t_limit) : n;
}

void set_num_threads(int n) {
  HG_CHECK(n >= 1, "set_num_threads: the number of threads must be >= 1, got ", n);
  g_threads.store(n, std::memory_order_relaxed);
}

ThreadLimit::ThreadLimit(int n) : previous_(t_limit) {
  HG_CHECK(n >= 1, "ThreadLimit: the number of threads must be >= 1, got ", n);
  t_limit = previous_ > 0 ? std::min(previous_, n) : n;
}

ThreadLimit::~ThreadLimit() { t_limit = previous_; }

namespace cpu {

bool in_parallel() { return t_in_parallel; }

void parallel_run(int n, void (*body)(void*, int), void* ctx) {
  const auto serial = [&] {
    for (int t = 0; t < n; ++t) body(ctx, t);
  };
  if (n <= 1 || t_in_parallel) return serial();
  Pool& p = pool();
  std::unique_lock<std::mutex> lock(p.run_mu, std::try_to_lock);
  if (!lock.owns_lock()) return serial();  // another thread's op has the pool
  t_in_parallel = true;
  try {
    p.run(n, Job{body, ctx});
  } catch (...) {
    t_in_parallel = false;
    throw;
  }
  t_in_parallel = false;
}

}  // namespace cpu
}  // namespace hg
