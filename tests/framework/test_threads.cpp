// The CPU thread pool (framework/cpu/threads.h): every share runs once, nesting and
// concurrent callers run serially, exceptions come back, thread limits are per thread,
// a forked child gets a working pool, and idle workers sleep instead of spinning.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include "halfgrad.h"
#include "ops/cpu/loops.h"

using namespace hg;

namespace {

struct Threads {
  int saved = num_threads();
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(saved); }
};

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

}  // namespace

TEST_CASE("parallel_run runs every share once, the caller's on the calling thread", "[threads]") {
  Threads four(4);
  for (int n : {1, 2, 3, 4}) {
    std::vector<std::atomic<int>> runs(static_cast<size_t>(n));
    std::atomic<int> on_caller{-1};
    const auto caller = std::this_thread::get_id();
    cpu::parallel_run(n, [&](int t) {
      runs[static_cast<size_t>(t)].fetch_add(1);
      if (std::this_thread::get_id() == caller) on_caller = t;
      if (n > 1) CHECK(cpu::in_parallel());  // one share runs as a plain call
    });
    for (int t = 0; t < n; ++t) CHECK(runs[static_cast<size_t>(t)].load() == 1);
    CHECK(on_caller.load() == 0);
    CHECK_FALSE(cpu::in_parallel());
  }
}

TEST_CASE("the parallel loops cover every item once, nested ones serially", "[threads]") {
  Threads two(2);
  std::vector<std::atomic<int>> hits(1000);
  cpu::parallel_dynamic(2, 1000, [&](int64_t c) { hits[static_cast<size_t>(c)].fetch_add(1); });
  cpu::parallel_static(2, 1000, [&](int64_t c) {
    hits[static_cast<size_t>(c)].fetch_add(1);
    CHECK(cpu::op_threads() == 1);  // a parallel op inside a body runs on its thread alone
  });
  int64_t total = 0;
  cpu::parallel_for(1 << 20, 1, [&](int64_t lo, int64_t hi) {
    std::atomic_ref<int64_t>(total).fetch_add(hi - lo);
    cpu::parallel_for(100000, 100, [&](int64_t a, int64_t b) { CHECK((a == 0 && b == 100000)); });
  });
  CHECK(total == (1 << 20));
  for (auto& h : hits) CHECK(h.load() == 2);
}

TEST_CASE("an exception in any share comes back to the caller, and the pool goes on", "[threads]") {
  Threads two(2);
  CHECK_THROWS_WITH(cpu::parallel_run(2, [](int t) {
                      if (t == 1) throw std::runtime_error("worker failed");
                    }),
                    "worker failed");
  CHECK_THROWS_WITH(cpu::parallel_run(2, [](int t) {
                      if (t == 0) throw std::runtime_error("caller failed");
                    }),
                    "caller failed");
  std::atomic<int> ran{0};
  cpu::parallel_run(2, [&](int) { ran.fetch_add(1); });
  CHECK(ran.load() == 2);
}

TEST_CASE("two threads running ops at once both finish with the right results", "[threads]") {
  Threads two(2);
  const Tensor a = randn({300, 300}), b = randn({300, 300});
  const std::vector<double> want = matmul(a, b).to_vector<double>();
  std::vector<std::thread> users;
  std::atomic<int> good{0};
  for (int u = 0; u < 3; ++u)
    users.emplace_back([&] {
      for (int i = 0; i < 5; ++i) good += matmul(a, b).to_vector<double>() == want;
    });
  for (auto& t : users) t.join();
  CHECK(good.load() == 15);
}

TEST_CASE("thread counts: set_num_threads is checked, ThreadLimit holds for its thread only", "[threads]") {
  Threads three(3);
  CHECK_THROWS_WITH(set_num_threads(0), Catch::Contains("must be >= 1, got 0"));
  CHECK(num_threads() == 3);
  {
    ThreadLimit one(1);
    CHECK(num_threads() == 1);
    int other = 0;
    std::thread([&] { other = num_threads(); }).join();
    CHECK(other == 3);
    {
      ThreadLimit two(2);  // nested limits never raise the outer one
      CHECK(num_threads() == 1);
    }
  }
  CHECK(num_threads() == 3);
  CHECK_THROWS_WITH(ThreadLimit(0), Catch::Contains("must be >= 1"));
}

TEST_CASE("a forked child runs parallel ops on a pool of its own", "[threads]") {
  Threads two(2);
  cpu::parallel_run(2, [](int) {});  // the parent's workers exist before the fork
  const pid_t pid = fork();
  if (pid == 0) {
    std::atomic<int> ran{0};
    cpu::parallel_run(2, [&](int) { ran.fetch_add(1); });
    const Tensor x = randn({512, 512});
    const bool ok = ran.load() == 2 && std::isfinite(sum(matmul(x, x)).item<double>());
    _exit(ok ? 0 : 1);
  }
  int status = -1;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
}

TEST_CASE("idle pool threads sleep rather than spin", "[threads]") {
  Threads two(2);
  const Tensor x = randn({256, 256});
  for (int i = 0; i < 5; ++i) (void)matmul(x, x);  // wakes the workers
  std::this_thread::sleep_for(std::chrono::milliseconds(5));
  const double cpu0 = process_cpu_seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  // A spinning worker would burn ~0.2 s here (libgomp's default spins for up to ~300k
  // iterations per wait); sleeping ones burn next to nothing.
  CHECK(process_cpu_seconds() - cpu0 < 0.02);
}
