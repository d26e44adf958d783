// The worker pool behind hg::cpu::parallel_run: one job slot per worker (so a job of two
// threads wakes one worker, not all), a short spin before sleeping on the slot's futex
// (std::atomic::wait), and a fresh pool in a forked child, which has none of the threads.
#include "framework/cpu/threads.h"

#include <pthread.h>
#include <sched.h>

#include <atomic>
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

// How long an idle thread polls before it sleeps: long enough to catch the next op of a
// training loop (ops follow each other within microseconds), short enough that idle
// threads do not compete with other processes for the cores.
constexpr auto kSpin = std::chrono::microseconds(30);

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#endif
}

// Waits until `a` no longer holds `old`: polls for kSpin, then sleeps in the kernel.
template <class T>
T wait_change(const std::atomic<T>& a, T old) {
  const auto start = std::chrono::steady_clock::now();
  for (int i = 1;; ++i) {
    const T v = a.load(std::memory_order_acquire);
    if (v != old) return v;
    if (i % 64 == 0 && std::chrono::steady_clock::now() - start > kSpin) break;
    cpu_relax();
  }
  for (;;) {
    a.wait(old, std::memory_order_acquire);
    const T v = a.load(std::memory_order_acquire);
    if (v != old) return v;
  }
}

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
  // Runs job on t = 1..n-1 of the workers and t = 0 here; the caller holds run_mu_.
  void run(int n, const Job& job) {
    grow(n - 1);
    remaining_.store(n - 1, std::memory_order_relaxed);
    for (int t = 1; t < n; ++t) {
      Slot& s = *slots_[static_cast<size_t>(t - 1)];
      s.job.store(&job, std::memory_order_release);
      s.job.notify_one();
    }
    std::exception_ptr mine;
    try {
      job.body(job.ctx, 0);
    } catch (...) {
      mine = std::current_exception();
    }
    for (int left = remaining_.load(std::memory_order_acquire); left != 0;
         left = remaining_.load(std::memory_order_acquire))
      wait_change(remaining_, left);
    std::exception_ptr theirs = std::exchange(error_, nullptr);
    if (mine) std::rethrow_exception(mine);
    if (theirs) std::rethrow_exception(theirs);
  }

  std::mutex run_mu;  // one parallel op at a time

 private:
  struct alignas(64) Slot {
    std::atomic<const Job*> job{nullptr};
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
    for (;;) {
      const Job* job = wait_change<const Job*>(slot->job, nullptr);
      try {
        job->body(job->ctx, t);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu_);
        if (!error_) error_ = std::current_exception();
      }
      slot->job.store(nullptr, std::memory_order_relaxed);
      // The pool, not the job (the caller's, gone once it sees 0), carries the count.
      if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) remaining_.notify_one();
    }
  }

  std::vector<std::unique_ptr<Slot>> slots_;  // grows only; workers live as long as the process
  std::atomic<int> remaining_{0};
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
