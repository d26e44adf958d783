// The worker pool behind hg::cpu::parallel_run: one job slot per worker (so a job of two
// threads wakes one worker, not all), a short poll before sleeping on the slot's futex while
// the machine has cores to spare, and a fresh pool in a forked child, which has none of the
// threads.
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
#include <cstdio>
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

// How long an idle thread polls before it sleeps. Measured with bench/threads_under_load
// (docs/benchmark.md): a poll of tens of microseconds catches the next op of a training
// loop on an idle machine (the U-Net step 1.2-1.9x faster than sleeping at once), but
// while other processes want the cores a poll takes their time (1.3-1.5x slower with one
// busy process), and a poll that outlasts the gaps between ops (1 ms, like libgomp's
// default) is 3-10x slower there. So by default the poll is 50 us and adaptive: it runs only
// while the machine has a core to spare for it (spin_allowed(), from the count of runnable
// tasks); HG_THREAD_SPIN_US=N fixes it at N us whatever the load (0: sleep at once).
struct SpinPolicy {
  std::chrono::nanoseconds time;
  bool adaptive;
};

const SpinPolicy& spin_policy() {
  static const SpinPolicy p = [] {
    const char* s = std::getenv("HG_THREAD_SPIN_US");
    if (!s || !*s) return SpinPolicy{std::chrono::microseconds(50), true};
    const long us = std::strtol(s, nullptr, 10);
    return SpinPolicy{std::chrono::nanoseconds(std::clamp(us, 0L, 100000L) * 1000), false};
  }();
  return p;
}

std::atomic<bool> g_spin_allowed{true};
std::atomic<int> g_awake{0};                      // pool workers not asleep in the kernel
thread_local bool t_pool_worker = false;
std::atomic<int64_t> g_spin_checked_ns{0};  // when spin_allowed was last decided (steady clock)

// The runnable tasks of the whole machine now: /proc/loadavg's "running/total" field.
int runnable_tasks() {
  FILE* f = std::fopen("/proc/loadavg", "r");
  if (!f) return -1;
  double l1, l5, l15;
  int running = -1, total;
  if (std::fscanf(f, "%lf %lf %lf %d/%d", &l1, &l5, &l15, &running, &total) != 5) running = -1;
  std::fclose(f);
  return running;
}

// Decides (from the thread that hands out jobs) whether pollers may run: only while the tasks
// runnable besides this process's own (the caller and the pool's workers that are not asleep
// in the kernel: polling, working, or just done) leave a core for each of `threads`. Polling
// allowed, it is checked again after 20 ms; refused, after 2 ms, since what took the core is
// often short (a training loop's prefetch of the next batch): a refusal that outlived it cost
// the U-Net step 10-17% (docs/benchmark.md).
void update_spin_allowed(int threads) {
  if (!spin_policy().adaptive) return;
  const int64_t now = std::chrono::duration_cast<std::chrono::nanoseconds>(
                          std::chrono::steady_clock::now().time_since_epoch()).count();
  const int64_t period = g_spin_allowed.load(std::memory_order_relaxed) ? 20'000'000 : 2'000'000;
  if (now - g_spin_checked_ns.load(std::memory_order_relaxed) < period) return;
  g_spin_checked_ns.store(now, std::memory_order_relaxed);
  static const long cores = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  const int running = runnable_tasks();
  if (running < 0) return;  // no /proc: keep the last decision
  const int others = running - 1 - g_awake.load(std::memory_order_relaxed);
  g_spin_allowed.store(others + threads <= cores, std::memory_order_relaxed);
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
// the spin policy's time (while polling is allowed), then sleeps in the kernel; the changer makes the futex call only when
// someone may be asleep (Dekker's pattern on `sleepers`, both sides sequentially consistent).
struct WaitWord {
  std::atomic<uint32_t> value{0};
  std::atomic<uint32_t> sleepers{0};

  uint32_t wait_change(uint32_t old) {
    const SpinPolicy& policy = spin_policy();
    if (policy.time.count() > 0 && g_spin_allowed.load(std::memory_order_relaxed)) {
      const auto start = std::chrono::steady_clock::now();
      for (int i = 1;; ++i) {
        const uint32_t v = value.load(std::memory_order_acquire);
        if (v != old) return v;
        if (i % 64 == 0 && (std::chrono::steady_clock::now() - start > policy.time ||
                            !g_spin_allowed.load(std::memory_order_relaxed)))
          break;
        cpu_relax();
      }
    }
    for (;;) {
      sleepers.fetch_add(1, std::memory_order_seq_cst);
      uint32_t v = value.load(std::memory_order_seq_cst);
      if (v == old) {
        if (t_pool_worker) g_awake.fetch_sub(1, std::memory_order_relaxed);
        futex_wait(value, old);
        if (t_pool_worker) g_awake.fetch_add(1, std::memory_order_relaxed);
      }
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
    update_spin_allowed(n);
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
      g_awake.fetch_add(1, std::memory_order_relaxed);
      std::thread(&Pool::work, this, slots_.back().get(), t).detach();
    }
  }

  void work(Slot* slot, int t) {
    t_in_parallel = true;
    t_pool_worker = true;  // counted awake by grow(), which started it
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
