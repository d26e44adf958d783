// The execution model: __syncthreads, dynamic shared memory, built-in variables of 2-D
// grids, and what the emulation must catch: a missing barrier (randomised schedules), an
// out-of-bounds write (AddressSanitizer), misused warp collectives and deadlocks.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <numeric>
#include <random>
#include <string>

#include "cuda/runtime.h"
#include "framework/error.h"
#include "tests/cuda/test_kernels.h"
#include "tests/devices.h"
#ifdef HG_CUDA_EMULATION
#include "cuda/emu/executor.h"
#include "tests/cuda/check_guard.h"
#endif

using namespace hg::test::kernels;
using Catch::Matchers::Contains;

namespace {

std::vector<int32_t> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> v(n);
  for (auto& x : v) x = static_cast<int32_t>(rng() % 1000) + 1;
  return v;
}

std::vector<int32_t> host_sums(const std::vector<int32_t>& v, unsigned threads) {
  std::vector<int32_t> s(v.size() / threads);
  for (size_t b = 0; b < s.size(); ++b)
    s[b] = std::accumulate(v.begin() + static_cast<long>(b * threads), v.begin() + static_cast<long>((b + 1) * threads), 0);
  return s;
}

#ifdef HG_CUDA_EMULATION
// Restores the process's schedule settings after a test that changes them.
struct ScheduleGuard {
  uint64_t seed = hg::cuda::emu::seed();
  int threads = hg::cuda::emu::host_threads();
  ~ScheduleGuard() {
    hg::cuda::emu::set_seed(seed);
    hg::cuda::emu::set_host_threads(threads);
  }
};
#endif

#define HG_REQUIRE_EMULATION()                                                                              \
  do {                                                                                                      \
    HG_REQUIRE_CUDA();                                                                                      \
    if (!hg::cuda::is_emulated()) HG_SKIP("checks a property of the CUDA emulation; this build runs on a GPU"); \
  } while (0)

}  // namespace

TEST_CASE("a shared-memory reduction with __syncthreads is right under every schedule", "[cuda][emu]") {
  HG_REQUIRE_CUDA();
  const unsigned threads = 256;
  const auto values = random_values(threads * 12, 1);
  const auto expected = host_sums(values, threads);
#ifdef HG_CUDA_EMULATION
  ScheduleGuard guard;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    hg::cuda::emu::set_seed(seed);
    INFO("HG_EMU_SEED=" << seed);
    REQUIRE(block_sums(values, threads, false) == expected);
  }
#else
  REQUIRE(block_sums(values, threads, false) == expected);
#endif
}

TEST_CASE("a missing __syncthreads is detected: randomised schedules give wrong sums", "[cuda][emu]") {
  HG_REQUIRE_EMULATION();
#ifdef HG_CUDA_EMULATION
  ScheduleGuard guard;
  // The schedules alone, without the racecheck that reports this race at once (test_racecheck.cpp).
  hg::test::CheckGuard no_checks(hg::cuda::emu::CheckOptions{});
  const unsigned threads = 256;
  const auto values = random_values(threads * 4, 2);
  const auto expected = host_sums(values, threads);
  int wrong = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    hg::cuda::emu::set_seed(seed);
    if (block_sums(values, threads, true) != expected) ++wrong;
  }
  // A thread reads a neighbour's slot before the neighbour wrote it unless, by luck, every
  // writer ran first: with 256 threads in random order that never happens.
  REQUIRE(wrong == 8);
  // The same seed replays the same schedule (one host thread, so blocks run in order).
  // The racy reads see what the previous launch left in shared memory, so the compared
  // runs both follow a run of the same kernel on the same thread.
  hg::cuda::emu::set_host_threads(1);
  hg::cuda::emu::set_seed(42);
  block_sums(values, threads, true);
  const auto first = block_sums(values, threads, true);
  hg::cuda::emu::set_seed(42);
  REQUIRE(block_sums(values, threads, true) == first);
  REQUIRE(first != expected);
#endif
}

TEST_CASE("dynamic shared memory is per block over a 2-D grid of 2-D blocks", "[cuda][emu]") {
  HG_REQUIRE_CUDA();
  const unsigned bx = 3, by = 2, tx = 16, ty = 6, per_block = tx * ty;
  std::vector<float> v(bx * by * per_block);
  std::iota(v.begin(), v.end(), 0.0f);
  const auto out = reverse_blocks(v, bx, by, tx, ty);
  for (unsigned b = 0; b < bx * by; ++b)
    for (unsigned i = 0; i < per_block; ++i) {
      INFO("block " << b << " element " << i);
      REQUIRE(out[b * per_block + i] == v[b * per_block + per_block - 1 - i]);
    }
}

TEST_CASE("misused warp collectives raise hg::Error naming the seed", "[cuda][emu]") {
  HG_REQUIRE_EMULATION();
  REQUIRE_THROWS_WITH(shfl_with_exited_lane(), Contains("deadlock") && Contains("shfl.sync.idx") &&
                                                   Contains("0xffff0000") && Contains("HG_EMU_SEED="));
  REQUIRE_THROWS_WITH(shfl_mask_without_self(), Contains("does not name the lane itself") && Contains("0xfffffffe"));
  REQUIRE_THROWS_WITH(ldmatrix_misaligned(), Contains("not 16-byte aligned"));
  // The emulation is usable again after a failed launch.
  const auto values = random_values(64, 3);
  REQUIRE(block_sums(values, 64, false) == host_sums(values, 64));
}

TEST_CASE("an out-of-bounds write in a kernel is reported by AddressSanitizer", "[cuda][emu]") {
  HG_REQUIRE_EMULATION();
#if !defined(__SANITIZE_ADDRESS__)
  HG_SKIP("this build has no AddressSanitizer (configure with -Db_sanitize=address, as .ci/sanitize does)");
#else
  // The kernel runs in a child process, which AddressSanitizer ends with its report.
  auto run_child = [](bool into_shared) {
    int fds[2];
    REQUIRE(pipe(fds) == 0);
    const pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      close(fds[0]);
      dup2(fds[1], 2);
      try {
        write_past_end(101, into_shared);
      } catch (...) {
        _exit(3);
      }
      _exit(0);
    }
    close(fds[1]);
    std::string report;
    char buf[4096];
    for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) report.append(buf, static_cast<size_t>(n));
    close(fds[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    INFO(report);
    REQUIRE(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    REQUIRE_THAT(report, Contains("ERROR: AddressSanitizer"));
    REQUIRE_THAT(report, Contains("WRITE of size 4"));
  };
  SECTION("past the end of a tensor") { run_child(false); }
  SECTION("past the end of dynamic shared memory") { run_child(true); }
#endif
}

#ifdef HG_CUDA_EMULATION
TEST_CASE("the emulated SM count is settable and restores to the default", "[cuda][emu][splitk]") {
  HG_REQUIRE_EMULATION();
  const auto sms = [] {
    int n = 0;
    REQUIRE(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
    return n;
  };
  const int before = sms();
  REQUIRE(hg::cuda::emu::multiprocessor_count_override(0) == 0);
  hg::cuda::emu::set_multiprocessor_count(0, 132);
  CHECK(sms() == 132);
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  CHECK(prop.multiProcessorCount == 132);
  hg::cuda::emu::set_multiprocessor_count(0, 0);
  CHECK(sms() == before);
  CHECK_THROWS_WITH(hg::cuda::emu::set_multiprocessor_count(0, 2000), Contains("not an SM count"));
  CHECK_THROWS_WITH(hg::cuda::emu::set_multiprocessor_count(0, -1), Contains("valid: 1 to 1024"));
}
#endif
