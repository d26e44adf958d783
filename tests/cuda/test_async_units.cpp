// The emulation's sm_90 asynchronous units (cuda/emu/async_units.cpp, issue 19), run from
// kernels (tests/cuda/async_kernels.cu): mbarrier phases and rings, TMA visibility, swizzle
// and bulk stores, wgmma results and groups, named barriers, their misuse errors, and the
// emulated sm_90 device. References are computed here, independently of the model.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "cuda/cuda_api.h"
#include "cuda/emu/executor.h"
#include "cuda/emu/racecheck.h"
#include "framework/error.h"
#include "framework/half.h"
#include "tests/cuda/async_kernels.h"
#include "tests/cuda/check_guard.h"
#include "tests/devices.h"

using namespace hg::test::kernels;
using Catch::Matchers::Contains;
namespace emu = hg::cuda::emu;

namespace {

// Emulates an sm_90 cuda:0 for one test, then restores what it reported before (8.0 unless
// HG_EMU_CC said otherwise). Also restores the schedule seed, which tests may change.
class Sm90 {
 public:
  Sm90() {
    cudaDeviceProp prop{};
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    saved_major_ = prop.major;
    emu::set_compute_capability(0, 9, 0);
  }
  ~Sm90() {
    emu::set_compute_capability(0, saved_major_, 0);
    emu::set_seed(saved_seed_);
  }
  Sm90(const Sm90&) = delete;
  Sm90& operator=(const Sm90&) = delete;

 private:
  int saved_major_ = 8;
  uint64_t saved_seed_ = emu::seed();
};

// The memory checks off for one test (.ci/sanitize turns them on for all): stale reads are
// what some of these tests look for, and racecheck would (rightly) report them.
hg::test::CheckGuard no_checks() { return hg::test::CheckGuard(emu::CheckOptions{}); }

// A 64-column tensor of distinct 16-bit values (none 0xffff, the emulation's fill).
std::vector<uint16_t> distinct_tensor(int rows) {
  std::vector<uint16_t> v(static_cast<size_t>(rows) * kTileCols);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint16_t>(0x1000 + i * 7);
  return v;
}

constexpr int kBox = 16 * kTileCols;

// "same", or the first element where got and want differ (a short failure message where a
// whole-vector comparison would print thousands of values).
template <class T>
std::string difference(const std::vector<T>& got, const std::vector<T>& want) {
  if (got.size() != want.size()) return "sizes " + std::to_string(got.size()) + " vs " + std::to_string(want.size());
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i])
      return "element " + std::to_string(i) + ": " + std::to_string(got[i]) + ", expected " + std::to_string(want[i]);
  return "same";
}

}  // namespace

TEST_CASE("mbarrier ring: one producer and two consumer warps hand stages over", "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  std::mt19937 rng(19);
  for (const int stages : {2, 3})
    for (const uint64_t seed : {1u, 2u, 3u}) {
      emu::set_seed(seed);
      const int iterations = 40;
      std::vector<uint32_t> values(static_cast<size_t>(iterations) * 64);
      for (auto& v : values) v = rng() % 100000;
      std::vector<uint32_t> expected(64, 0);
      for (int it = 0; it < iterations; ++it)
        for (int i = 0; i < 64; ++i) expected[i] += values[static_cast<size_t>(it) * 64 + i];
      INFO("stages " << stages << ", seed " << seed);
      REQUIRE(difference(mbarrier_ring(values, stages, iterations), expected) == "same");
    }
}

TEST_CASE("mbarrier phases complete after the count's arrivals and the expected bytes", "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  auto checks = no_checks();
  for (const uint64_t seed : {1u, 7u}) {
    emu::set_seed(seed);
    const auto flags = mbarrier_phases(distinct_tensor(32));
    INFO("seed " << seed);
    CHECK(flags[0] == 1);  // a fresh barrier: waiting on parity 1 is already satisfied
    CHECK(flags[1] == 0);  // ... on parity 0 is not
    CHECK(flags[2] == 0);  // both arrivals in, the expect_tx bytes not: phase 0 still open
    CHECK(flags[3] == 1);  // after the wait the TMA tile is there
    CHECK(flags[4] == 1);  // phase 1: the second load's bytes have landed ...
    CHECK(flags[5] == 0);  // ... but one of the two arrivals is missing: not complete
    CHECK(flags[6] == 1);  // after the second arrival phase 1 is complete, phase 0 pending again
  }
}

TEST_CASE("mbarrier misuse is reported", "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  REQUIRE_THROWS_WITH(mbarrier_misuse(MbarrierMisuse::uninitialised), Contains("was not set up by mbarrier.init"));
  REQUIRE_THROWS_WITH(mbarrier_misuse(MbarrierMisuse::extra_arrival),
                      Contains("more threads arrive than the barrier was initialised for"));
  REQUIRE_THROWS_WITH(mbarrier_misuse(MbarrierMisuse::never_completes),
                      Contains("deadlock") && Contains("waits in mbarrier.try_wait.parity"));
  REQUIRE_THROWS_WITH(mbarrier_misuse(MbarrierMisuse::outside_dynamic),
                      Contains("not in the block's dynamic shared memory"));
  REQUIRE_THROWS_WITH(mbarrier_misuse(MbarrierMisuse::misaligned), Contains("is not 8-byte aligned"));
}

TEST_CASE("TMA load: bytes land after the issue and are there after the mbarrier wait, swizzled",
          "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  auto checks = no_checks();
  const int rows = 32;
  const auto global = distinct_tensor(rows);
  for (const uint64_t seed : {1u, 5u}) {
    emu::set_seed(seed);
    INFO("seed " << seed);
    const TmaLoadSeen seen = tma_load_seen(global, rows, 8);
    // The issuing thread still sees the block-start fill right after the issue.
    REQUIRE(difference(seen.before, std::vector<uint16_t>(kBox, 0xffff)) == "same");
    // Read back through the 128B swizzle by hand, the tile is rows 8..23 of the tensor.
    REQUIRE(difference(seen.after, std::vector<uint16_t>(global.begin() + 8 * kTileCols, global.begin() + 24 * kTileCols)) ==
            "same");
  }
  SECTION("a box past the tensor's last row loads zeros there") {
    const TmaLoadSeen seen = tma_load_seen(global, rows, 24);
    std::vector<uint16_t> expected(global.begin() + 24 * kTileCols, global.end());
    expected.resize(kBox, 0);
    REQUIRE(difference(seen.after, expected) == "same");
  }
}

TEST_CASE("TMA bulk store writes the tile, in bounds only, and reads shared memory by wait_read",
          "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  std::vector<uint16_t> tile(kBox);
  for (int i = 0; i < kBox; ++i) tile[i] = static_cast<uint16_t>(0x2000 + i * 3);
  const std::vector<uint16_t> sentinel(32 * kTileCols, 0xaaaa);
  // The expected global buffer: tile element (r, c) at (row0 + r, col0 + c) where that lies
  // inside the cols x rows tensor; the sentinel elsewhere.
  const auto expect = [&](int cols, int rows, int col0, int row0) {
    std::vector<uint16_t> g = sentinel;
    for (int r = 0; r < 16; ++r)
      for (int c = 0; c < kTileCols; ++c)
        if (row0 + r < rows && col0 + c < cols) g[(row0 + r) * kTileCols + col0 + c] = tile[r * kTileCols + c];
    return g;
  };
  SECTION("inside the tensor") { REQUIRE(difference(tma_store(tile, sentinel, 64, 32, 0, 8), expect(64, 32, 0, 8)) == "same"); }
  SECTION("a box overhanging the last row and column") {
    REQUIRE(difference(tma_store(tile, sentinel, 40, 20, 0, 8), expect(40, 20, 0, 8)) == "same");
  }
}

namespace {

// Exact small values (multiples of 1/4 in [-2, 2]) as f16 or bf16 bits: every product and
// every sum of 64 of them is exact in f32, so the result must equal the f64 reference.
struct Operands {
  std::vector<uint16_t> a, b;
  std::vector<double> av, bv;
};

Operands operands(bool bf16, uint32_t seed) {
  std::mt19937 rng(seed);
  Operands o;
  const auto draw = [&](std::vector<uint16_t>& bits, std::vector<double>& values, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(static_cast<int>(rng() % 17) - 8) / 4.0f;
      uint32_t f;
      std::memcpy(&f, &v, 4);
      bits.push_back(bf16 ? static_cast<uint16_t>(f >> 16) : hg::float_to_half_bits(v));
      values.push_back(v);
    }
  };
  draw(o.a, o.av, 64 * 64);
  draw(o.b, o.bv, 128 * 64);
  return o;
}

// D[m][n] = init + sum over k in [k0, k1) of A[m][k] * B[n][k], in f64.
std::vector<float> reference(const Operands& o, int k0, int k1, double init) {
  std::vector<float> d(64 * 128);
  for (int m = 0; m < 64; ++m)
    for (int n = 0; n < 128; ++n) {
      double s = init;
      for (int k = k0; k < k1; ++k) s += o.av[m * 64 + k] * o.bv[n * 64 + k];
      d[m * 128 + n] = static_cast<float>(s);
    }
  return d;
}

}  // namespace

TEST_CASE("wgmma m64n128k16: f64-exact results, asynchronous accumulators, wait_group retires in order",
          "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  auto checks = no_checks();
  for (const bool bf16 : {false, true}) {
    INFO((bf16 ? "bf16" : "f16"));
    const Operands o = operands(bf16, bf16 ? 3 : 4);
    const float init = 0.5f;
    const WgmmaSeen seen = wgmma_two_groups(bf16, o.a, o.b, init);
    REQUIRE(difference(seen.acc1_before_wait, std::vector<float>(64 * 128, init)) == "same");  // issued, not yet run
    REQUIRE(difference(seen.acc1_after_wait1, reference(o, 0, 32, init)) == "same");  // group 1: k slices 0, 1
    REQUIRE(difference(seen.acc2_after_wait1, std::vector<float>(64 * 128, init)) == "same");  // group 2 still pending
    REQUIRE(difference(seen.acc2_after_wait0, reference(o, 32, 64, init)) == "same");  // group 2: k slices 2, 3
  }
}

TEST_CASE("wgmma misuse is reported", "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  REQUIRE_THROWS_WITH(wgmma_misuse(WgmmaMisuse::divergent_descriptor),
                      Contains("every thread must execute the same wgmma"));
  REQUIRE_THROWS_WITH(wgmma_misuse(WgmmaMisuse::partial_warpgroup),
                      Contains("needs whole warpgroups") && Contains("96 threads"));
}

TEST_CASE("named barriers: two warpgroups exchange data, each on its own barrier", "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  const int rounds = 6;
  std::vector<uint32_t> expected(256);
  for (uint32_t t = 0; t < 256; ++t) {
    const uint32_t group = t / 128, neighbour = group * 128 + (t % 128 + 1) % 128;
    for (uint32_t r = 0; r < rounds; ++r) expected[t] += neighbour * 7 + r * 1000 + group * 100000;
  }
  for (const uint64_t seed : {1u, 2u, 3u}) {
    emu::set_seed(seed);
    INFO("seed " << seed);
    REQUIRE(difference(named_barrier_exchange(rounds), expected) == "same");
  }
  REQUIRE_THROWS_WITH(named_barrier_misuse(1, 48), Contains("thread count 48") && Contains("a multiple of 32"));
  REQUIRE_THROWS_WITH(named_barrier_misuse(0, 128), Contains("barrier 0; valid: 1 to 15"));
}

TEST_CASE("the emulated sm_90 device", "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  const int before = prop.major;
  // HG_EMU_SMS (a run that makes every device look like a big GPU) replaces the default SM counts.
  const char* sms_env = std::getenv("HG_EMU_SMS");
  const int env_sms = sms_env && *sms_env ? std::atoi(sms_env) : 0;
  {
    Sm90 sm90;
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    CHECK(prop.major == 9);
    CHECK(prop.minor == 0);
    CHECK(prop.sharedMemPerBlockOptin == 227 * 1024);
    CHECK(prop.multiProcessorCount == (env_sms ? env_sms : 2));
  }
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  REQUIRE(prop.major == before);  // the guard put back what HG_EMU_CC (default 8.0) gave
  if (before == 8) {
    CHECK(prop.sharedMemPerBlockOptin == 163 * 1024);
    CHECK(prop.multiProcessorCount == (env_sms ? env_sms : 1));
  }
  REQUIRE_THROWS_WITH(emu::set_compute_capability(0, 7, 5), Contains("not emulated; valid: 8.0, 9.0"));
  REQUIRE_THROWS_WITH(emu::set_compute_capability(0, 9, 1), Contains("not emulated; valid: 8.0, 9.0"));
  REQUIRE_THROWS_WITH(emu::set_compute_capability(2, 9, 0), Contains("device 2 does not exist"));
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  REQUIRE(prop.major == before);  // a refused capability changes nothing
}

// racecheck orders accesses by __syncthreads, warp collectives and (an acquire clock in
// cuda/emu/async_units.cpp) mbarrier phases and named barriers: the correct hand-overs above
// are not reported as races.
TEST_CASE("racecheck accepts accesses ordered by mbarrier phases and named barriers", "[cuda][emu][async]") {
  HG_REQUIRE_CUDA();
  Sm90 sm90;
  emu::CheckOptions race;
  race.race = true;
  hg::test::CheckGuard checks(race);
  std::vector<uint32_t> values(4 * 64, 1);
  REQUIRE_NOTHROW(mbarrier_ring(values, 2, 4));
  REQUIRE_NOTHROW(named_barrier_exchange(2));
}
