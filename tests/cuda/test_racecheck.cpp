// The emulation's memory checks (cuda/emu/racecheck.h, issue 22): racecheck names both
// accesses of a race on shared or device memory and leaves barriers, warp collectives and
// atomics alone; preemption at stores makes a plain += lose updates; initcheck and the
// poisoning of static __shared__; cp.async data read before its wait.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <regex>
#include <string>
#include <vector>

#include "cuda/emu/executor.h"
#include "framework/error.h"
#include "tests/cuda/check_guard.h"
#include "tests/cuda/race_kernels.h"
#include "tests/cuda/test_kernels.h"
#include "tests/devices.h"

using namespace hg::test::kernels;
using Catch::Matchers::Contains;
using hg::cuda::emu::CheckOptions;
using hg::test::CheckGuard;

namespace {

CheckOptions race_only() {
  CheckOptions o;
  o.race = true;
  return o;
}

// The message of the hg::Error that f throws (empty when it throws none).
template <class F>
std::string error_of(F f) {
  try {
    f();
  } catch (const hg::Error& e) {
    return e.what();
  }
  return "";
}

// How many "file:line" source locations of `file` the message names.
size_t sites_in(const std::string& message, const std::string& file) {
  const std::regex site(file + ":[0-9]+");
  return static_cast<size_t>(std::distance(std::sregex_iterator(message.begin(), message.end(), site), {}));
}

}  // namespace

TEST_CASE("racecheck names the kernel and both accesses of a missing __syncthreads", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckGuard checks(race_only());
  std::vector<int32_t> values(256 * 2);
  std::iota(values.begin(), values.end(), 1);
  const std::string msg = error_of([&] { block_sums(values, 256, true); });
  INFO(msg);
  // Which of the two accesses comes first depends on the schedule: a neighbour's read
  // before the write, or the write before the read.
  REQUIRE_THAT(msg, (Contains("racecheck: read-after-write hazard") || Contains("racecheck: write-after-read hazard")) &&
                        Contains("on static __shared__ memory") && Contains("in kernel block_sum_kernel") &&
                        Contains("HG_EMU_SEED="));
  REQUIRE(sites_in(msg, "tests/cuda/block_kernels.cu") == 2);
  // With the barrier the same reduction is clean and right: 1 + ... + 256 per block.
  const auto sums = block_sums(values, 256, false);
  REQUIRE(sums == std::vector<int32_t>{256 * 257 / 2, 256 * 257 / 2 + 256 * 256});
}

TEST_CASE("racecheck: a read then an overwrite by another warp needs a barrier between them", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckGuard checks(race_only());
  const std::string msg = error_of([] { read_then_overwrite(false); });
  INFO(msg);
  REQUIRE_THAT(msg, Contains("write-after-read hazard") || Contains("read-after-write hazard"));
  REQUIRE(sites_in(msg, "tests/cuda/race_kernels.cu") == 2);
  REQUIRE(read_then_overwrite(true) == std::vector<uint32_t>(64, 7));
}

TEST_CASE("racecheck: a plain += on a shared slot is a race, atomics are not", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckGuard checks(race_only());
  const std::string msg = error_of([] { shared_count(2, 64, false); });
  INFO(msg);
  REQUIRE_THAT(msg, Contains("hazard on static __shared__ memory") && Contains("shared_count_kernel") &&
                        Contains("no __syncthreads or warp collective between them"));
  REQUIRE(sites_in(msg, "tests/cuda/race_kernels.cu") == 2);
  REQUIRE(shared_count(2, 64, true) == std::vector<uint32_t>{64, 64});
}

TEST_CASE("racecheck: blocks adding to one device-memory word race unless atomic", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckGuard checks(race_only());
  const std::string msg = error_of([] { global_count(8, false); });
  INFO(msg);
  REQUIRE_THAT(msg, Contains("hazard on device memory") && Contains("different blocks"));
  // Both sites are the kernel's `*count += 1` (line 32). GCC at -O1 (the ASan build) files
  // that instrumented access under the generated unit that includes race_kernels.cu (its
  // line number is still the kernel source's), so either file name names the right line.
  REQUIRE(sites_in(msg, "tests/cuda/race_kernels(\\.cu|_emu\\.cpp)") == 2);
  REQUIRE_THAT(msg, Contains("_kernels.cu:32") || Contains("_kernels_emu.cpp:32"));
  REQUIRE(global_count(8, true) == 8);
}

TEST_CASE("racecheck: lanes ordered by a warp collective do not race", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckGuard checks(race_only());
  const auto out = warp_exchange();
  for (uint32_t lane = 0; lane < 32; ++lane) REQUIRE(out[lane] == (lane ^ 1) * 3);
}

TEST_CASE("preemption at stores makes a plain += lose updates, as on a GPU", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckOptions o;
  o.preempt_per_mille = 500;
  CheckGuard checks(o);
  // Without preemption a fiber's load and store of `slot += 1` never interleave with
  // another's; with it, some block must end below its thread count.
  const auto counts = shared_count(8, 64, false);
  REQUIRE(*std::min_element(counts.begin(), counts.end()) < 64);
  REQUIRE(shared_count(8, 64, true) == std::vector<uint32_t>(8, 64));
  CheckOptions adversarial;
  adversarial.adversarial = true;
  CheckGuard schedule(adversarial);
  const auto held = shared_count(8, 64, false);
  REQUIRE(*std::min_element(held.begin(), held.end()) < 64);
}

TEST_CASE("initcheck reports reads of shared memory the block never wrote", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckOptions o;
  o.init = true;
  CheckGuard checks(o);
  const std::string msg = error_of([] { read_static_shared(false); });
  INFO(msg);
  REQUIRE_THAT(msg, Contains("initcheck") && Contains("reads shared memory that no thread of the block has written") &&
                        Contains("static_shared_kernel"));
  REQUIRE(sites_in(msg, "tests/cuda/race_kernels.cu") == 1);
  std::vector<uint32_t> expected(64);
  std::iota(expected.begin(), expected.end(), 1u);
  REQUIRE(read_static_shared(true) == expected);
}

TEST_CASE("static __shared__ starts poisoned in every block, not with the last block's values", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckGuard checks(race_only());
  const int threads = hg::cuda::emu::host_threads();
  hg::cuda::emu::set_host_threads(1);  // both launches on one host thread: same thread_local array
  read_static_shared(true);
  const auto leftovers = read_static_shared(false);
  hg::cuda::emu::set_host_threads(threads);
  REQUIRE(leftovers == std::vector<uint32_t>(64, 0xffffffffu));
}

TEST_CASE("reading a cp.async destination before its wait_group is reported", "[cuda][emu][racecheck]") {
  HG_REQUIRE_CUDA();
  CheckGuard checks(race_only());
  std::vector<uint32_t> src(32 * 4);
  std::iota(src.begin(), src.end(), 100u);
  const std::string msg = error_of([&] { cp_async_then_read(src, true); });
  INFO(msg);
  REQUIRE_THAT(msg, Contains("reads the destination of a cp.async before the cp.async.wait_group"));
  REQUIRE(sites_in(msg, "tests/cuda/race_kernels.cu") == 1);
  const auto out = cp_async_then_read(src, false);
  for (uint32_t lane = 0; lane < 32; ++lane) REQUIRE(out[lane] == 100 + 4 * lane);
}

TEST_CASE("the memory-check settings reject bad values by name", "[cuda][emu][racecheck]") {
  // Parsed once per process from the environment; the parser is what a bad value meets.
  REQUIRE_THROWS_WITH(hg::cuda::emu::parse_check_options("2", nullptr, nullptr, nullptr),
                      Contains("HG_EMU_RACECHECK='2'") && Contains("valid: 0 or 1"));
  REQUIRE_THROWS_WITH(hg::cuda::emu::parse_check_options(nullptr, nullptr, "chaos", nullptr),
                      Contains("HG_EMU_SCHEDULE='chaos'") && Contains("adversarial"));
  REQUIRE_THROWS_WITH(hg::cuda::emu::parse_check_options(nullptr, nullptr, nullptr, "1001"),
                      Contains("HG_EMU_PREEMPT='1001'") && Contains("0 to 1000"));
  const CheckOptions o = hg::cuda::emu::parse_check_options("1", "0", "adversarial", "20");
  REQUIRE((o.race && !o.init && o.adversarial && o.preempt_per_mille == 20));
}
