// The CPU threads halfgrad's kernels run on: a pool of its own rather than OpenMP's team,
// because libgomp's idle threads spin (its default wait policy, fixed when the process
// starts) and on a machine other processes keep busy that made small training programs
// 3-20x slower (bench/threads_under_load). Idle threads here poll for 50 us and then sleep
// on a futex, and poll only while the machine has a core to spare for them (the count of
// runnable tasks in /proc/loadavg besides its own threads, read again after 20 ms while
// polling is allowed and after 2 ms while it is refused); HG_THREAD_SPIN_US=N fixes the
// poll at N us whatever the load (0: sleep at once). How many threads: hg::set_num_threads(n),
// else HG_NUM_THREADS, else OMP_NUM_THREADS, else the CPUs this process may run on (its
// affinity mask).
#pragma once
#include <cstdint>

namespace hg {

// Threads a parallel op of the calling thread may use (>= 1).
int num_threads();
// Process-wide; n >= 1 (hg::Error otherwise). Takes effect at the next op.
void set_num_threads(int n);

// While alive, the calling thread's ops use at most n threads (a data-loading thread that
// should leave the cores to training: ThreadLimit one(1)). Nests; per thread.
class ThreadLimit {
 public:
  explicit ThreadLimit(int n);
  ~ThreadLimit();
  ThreadLimit(const ThreadLimit&) = delete;
  ThreadLimit& operator=(const ThreadLimit&) = delete;

 private:
  int previous_;
};

namespace cpu {

// True on a pool thread running a parallel body, and on the caller while it runs its own
// share: nested parallel ops then run on the calling thread alone.
bool in_parallel();

// Runs body(ctx, t) for every t in [0, n) and returns when all have finished: t = 0 on the
// calling thread, the others on pool threads. n must not exceed num_threads(). When the
// pool is busy with another thread's op, or inside a parallel body, every t runs here in
// order. The first exception a body throws is rethrown once all have finished.
void parallel_run(int n, void (*body)(void* ctx, int t), void* ctx);

// The same for any callable f(int t).
template <class F>
void parallel_run(int n, F&& f) {
  parallel_run(n, [](void* ctx, int t) { (*static_cast<F*>(ctx))(t); }, const_cast<void*>(static_cast<const void*>(&f)));
}

}  // namespace cpu
}  // namespace hg
