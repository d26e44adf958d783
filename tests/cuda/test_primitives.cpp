// Each primitive of cuda/primitives/ against a scalar reference written from the PTX ISA
// (fragment tables, shfl/vote definitions) or the CUDA C++ guide, on random inputs. Runs
// on the emulated device in CI and natively on a GPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "cuda/runtime.h"
#include "framework/bfloat16.h"
#include "framework/half.h"
#include "tests/cuda/test_kernels.h"
#include "tests/devices.h"
#ifdef HG_CUDA_EMULATION
#include "tests/cuda/check_guard.h"
#endif

using namespace hg::test::kernels;

namespace {

struct Rc {
  int row, col;
};
// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type": a0..a7, b0..b3,
// c0..c3 with groupID = lane >> 2 and threadID_in_group = lane % 4.
Rc k16_a(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  const int row = (i < 2 || (i >= 4 && i < 6)) ? g : g + 8;
  const int col = i < 4 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8;
  return {row, col};
}
Rc k16_b(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? t * 2 + (i & 1) : t * 2 + (i & 1) + 8, g};
}
// "Matrix Fragments for mma.m16n8k8" with .tf32.
Rc k8_a(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {(i == 0 || i == 2) ? g : g + 8, i < 2 ? t : t + 4};
}
Rc k8_b(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i == 0 ? t : t + 4, g};
}
Rc acc(int lane, int i) {
  const int g = lane >> 2, t = lane % 4;
  return {i < 2 ? g : g + 8, t * 2 + (i & 1)};
}

void run_mma(MmaKind kind, uint64_t seed) {
  const int warps = 2, K = kind == MmaKind::tf32 ? 8 : 16;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<uint32_t> a(warps * 32 * 4), b(warps * 32 * 2);
  std::vector<float> c(warps * 32 * 4);
  std::vector<double> A(warps * 16 * 16), B(warps * 16 * 8), C(warps * 16 * 8);
  // A value of each input type, as the bits the fragment holds and the exact value.
  auto draw = [&](uint32_t& bits) {
    const float x = u(rng);
    if (kind == MmaKind::f16) {
      bits = hg::float_to_half_bits(x);
      return static_cast<double>(hg::half_bits_to_float(static_cast<uint16_t>(bits)));
    }
    if (kind == MmaKind::bf16) {
      bits = hg::float_to_bf16_bits(x);
      return static_cast<double>(hg::bf16_bits_to_float(static_cast<uint16_t>(bits)));
    }
    std::memcpy(&bits, &x, 4);
    bits &= 0xffffe000u;  // a tf32 value (as cvt.rna would leave it)
    float f;
    std::memcpy(&f, &bits, 4);
    return static_cast<double>(f);
  };
  for (int w = 0; w < warps; ++w)
    for (int lane = 0; lane < 32; ++lane) {
      const int l = w * 32 + lane;
      if (kind == MmaKind::tf32) {
        for (int i = 0; i < 4; ++i) A[w * 256 + k8_a(lane, i).row * 16 + k8_a(lane, i).col] = draw(a[l * 4 + i]);
        for (int i = 0; i < 2; ++i) B[w * 128 + k8_b(lane, i).row * 8 + k8_b(lane, i).col] = draw(b[l * 2 + i]);
      } else {
        for (int r = 0; r < 4; ++r) {
          uint32_t lo, hi;
          A[w * 256 + k16_a(lane, 2 * r).row * 16 + k16_a(lane, 2 * r).col] = draw(lo);
          A[w * 256 + k16_a(lane, 2 * r + 1).row * 16 + k16_a(lane, 2 * r + 1).col] = draw(hi);
          a[l * 4 + r] = lo | hi << 16;
        }
        for (int r = 0; r < 2; ++r) {
          uint32_t lo, hi;
          B[w * 128 + k16_b(lane, 2 * r).row * 8 + k16_b(lane, 2 * r).col] = draw(lo);
          B[w * 128 + k16_b(lane, 2 * r + 1).row * 8 + k16_b(lane, 2 * r + 1).col] = draw(hi);
          b[l * 2 + r] = lo | hi << 16;
        }
      }
      for (int i = 0; i < 4; ++i) {
        c[l * 4 + i] = u(rng);
        C[w * 128 + acc(lane, i).row * 8 + acc(lane, i).col] = c[l * 4 + i];
      }
    }
  const std::vector<float> d = mma(kind, warps, a, b, c);
  for (int w = 0; w < warps; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < 4; ++i) {
        const Rc rc = acc(lane, i);
        double ref = C[w * 128 + rc.row * 8 + rc.col], mag = std::abs(ref);
        for (int k = 0; k < K; ++k) {
          const double p = A[w * 256 + rc.row * 16 + k] * B[w * 128 + k * 8 + rc.col];
          ref += p;
          mag += std::abs(p);
        }
        INFO("warp " << w << " lane " << lane << " d" << i << " = D[" << rc.row << "][" << rc.col << "]");
        REQUIRE(std::abs(d[(w * 32 + lane) * 4 + i] - ref) <= 1e-5 * mag + 1e-6);
      }
}

}  // namespace

TEST_CASE("mma m16n8k16 f16 and bf16 and m16n8k8 tf32 follow the PTX fragment tables", "[cuda][emu][primitives]") {
  HG_REQUIRE_CUDA();
  for (uint64_t seed : {1u, 2u, 3u}) {
    SECTION("f16 seed " + std::to_string(seed)) { run_mma(MmaKind::f16, seed); }
    SECTION("bf16 seed " + std::to_string(seed)) { run_mma(MmaKind::bf16, seed); }
    SECTION("tf32 seed " + std::to_string(seed)) { run_mma(MmaKind::tf32, seed); }
  }
}

TEST_CASE("ldmatrix x1/x2/x4 and .trans deliver the PTX fragment layout", "[cuda][emu][primitives]") {
  HG_REQUIRE_CUDA();
  std::mt19937 rng(7);
  std::vector<uint16_t> rows(32 * 8);
  for (auto& v : rows) v = static_cast<uint16_t>(rng());
  std::vector<int> row_of_lane(32);
  std::iota(row_of_lane.begin(), row_of_lane.end(), 0);
  std::shuffle(row_of_lane.begin(), row_of_lane.end(), rng);
  for (unsigned n : {1u, 2u, 4u})
    for (bool trans : {false, true}) {
      INFO("x" << n << (trans ? ".trans" : ""));
      const std::vector<uint32_t> out = ldmatrix(n, trans, rows, row_of_lane);
      // Row r of matrix m is at the address lane 8m + r gave; each lane gets, per matrix,
      // (row lane/4, columns 2*(lane%4) and +1), or with .trans that pair transposed.
      auto element = [&](unsigned m, unsigned r, unsigned col) { return rows[row_of_lane[8 * m + r] * 8 + col]; };
      for (unsigned lane = 0; lane < 32; ++lane)
        for (unsigned m = 0; m < n; ++m) {
          const uint32_t lo = trans ? element(m, lane % 4 * 2, lane / 4) : element(m, lane / 4, lane % 4 * 2);
          const uint32_t hi = trans ? element(m, lane % 4 * 2 + 1, lane / 4) : element(m, lane / 4, lane % 4 * 2 + 1);
          INFO("lane " << lane << " matrix " << m);
          REQUIRE(out[lane * n + m] == (lo | hi << 16));
        }
    }
}

namespace {
// The CUDA C++ Programming Guide's definitions of __shfl*_sync with a width.
uint32_t shfl_reference(ShflKind kind, unsigned lane, const std::vector<uint32_t>& v, uint32_t arg, unsigned width) {
  const unsigned base = lane / width * width;
  switch (kind) {
    case ShflKind::idx: return v[base + arg % width];
    case ShflKind::up: return lane % width >= arg ? v[lane - arg] : v[lane];
    case ShflKind::down: return lane % width + arg < width ? v[lane + arg] : v[lane];
    case ShflKind::bfly: return (lane ^ arg) < base + width ? v[lane ^ arg] : v[lane];
  }
  return 0;
}
}  // namespace

TEST_CASE("shuffles idx/up/down/xor with widths and out-of-range lanes", "[cuda][emu][primitives]") {
  HG_REQUIRE_CUDA();
  std::mt19937 rng(11);
  std::vector<uint32_t> value(32);
  for (auto& v : value) v = rng();
  for (ShflKind kind : {ShflKind::idx, ShflKind::up, ShflKind::down, ShflKind::bfly})
    for (unsigned width : {32u, 16u, 8u, 4u, 2u, 1u}) {
      std::vector<uint32_t> arg(32);
      // idx lanes past the width (and past 32) wrap; deltas and masks up to 31.
      for (auto& a : arg) a = rng() % (kind == ShflKind::idx ? 64 : 32);
      const auto out = shfl(kind, 32, 0xffffffffu, 0xffffffffu, value, arg, static_cast<int>(width));
      for (unsigned lane = 0; lane < 32; ++lane) {
        INFO("kind " << static_cast<int>(kind) << " width " << width << " lane " << lane << " arg " << arg[lane]);
        REQUIRE(out[lane] == shfl_reference(kind, lane, value, arg[lane], width));
      }
    }
}

TEST_CASE("shuffles with a partial member mask read members only", "[cuda][emu][primitives]") {
  HG_REQUIRE_CUDA();
  std::vector<uint32_t> value(32), arg(32);
  for (unsigned l = 0; l < 32; ++l) value[l] = 1000 + l, arg[l] = (l + 8) % 32;
  // Lanes 0..15 shuffle among themselves; lanes 8..15 name lanes 16..23, which are not
  // members: PTX leaves that result undefined and the emulation returns its poison.
  const auto out = shfl(ShflKind::idx, 32, 0x0000ffffu, 0x0000ffffu, value, arg, 32);
  for (unsigned l = 0; l < 8; ++l) REQUIRE(out[l] == 1008 + l);
  if (hg::cuda::is_emulated())
    for (unsigned l = 8; l < 16; ++l) REQUIRE(out[l] == 0xffffffffu);
  // A block of 20 threads: its only warp has 12 lanes that do not exist.
  for (unsigned l = 0; l < 32; ++l) arg[l] = 4;
  const auto down = shfl(ShflKind::down, 20, 0xfffffu, 0xffffffffu, value, arg, 32);
  for (unsigned l = 0; l < 16; ++l) REQUIRE(down[l] == 1004 + l);
  if (hg::cuda::is_emulated())
    for (unsigned l = 16; l < 20; ++l) REQUIRE(down[l] == 0xffffffffu);
}

TEST_CASE("ballot, all and any over full and partial member masks", "[cuda][emu][primitives]") {
  HG_REQUIRE_CUDA();
  std::mt19937 rng(5);
  for (uint32_t active : {0xffffffffu, 0x55555555u, 0x0000ff0fu}) {
    for (int trial = 0; trial < 3; ++trial) {
      std::vector<uint8_t> pred(32);
      for (auto& p : pred) p = trial == 2 ? 1 : static_cast<uint8_t>(rng() % 2);
      uint32_t ballot = 0;
      for (unsigned l = 0; l < 32; ++l)
        if ((active >> l & 1) && pred[l]) ballot |= 1u << l;
      const auto out = vote(active, pred);
      for (unsigned l = 0; l < 32; ++l) {
        if (!(active >> l & 1)) continue;
        INFO("active " << active << " trial " << trial << " lane " << l);
        REQUIRE(out[3 * l] == ballot);
        REQUIRE(out[3 * l + 1] == (ballot == active ? 1u : 0u));
        REQUIRE(out[3 * l + 2] == (ballot != 0 ? 1u : 0u));
      }
    }
  }
}

TEST_CASE("cp.async copies land by their wait_group, with zero fill", "[cuda][emu][primitives]") {
  HG_REQUIRE_CUDA();
#ifdef HG_CUDA_EMULATION
  // The kernel reads destinations before their wait on purpose; the checks would report it.
  hg::test::CheckGuard no_checks(hg::cuda::emu::CheckOptions{});
#endif
  std::mt19937 rng(3);
  std::vector<uint32_t> src(32 * 12);
  for (auto& v : src) v = rng();
  const CpAsyncResult r = cp_async(src);
  const uint32_t sentinel = 0xdeadbeefu;
  for (unsigned lane = 0; lane < 32; ++lane) {
    const uint32_t* s = &src[lane * 12];
    INFO("lane " << lane);
    for (int i = 0; i < 4; ++i) REQUIRE(r.after_wait2[lane * 12 + i] == s[i]);
    for (int i = 0; i < 8; ++i) REQUIRE(r.after_wait1[lane * 12 + i] == s[i]);
    for (int i = 0; i < 11; ++i) REQUIRE(r.after_wait0[lane * 12 + i] == s[i]);
    REQUIRE(r.after_wait0[lane * 12 + 11] == (s[11] & 0xffffu));  // 2 bytes copied, 2 zero-filled
    // A GPU may finish copies early; the emulation never does, so a kernel that reads
    // before its wait is caught.
    if (hg::cuda::is_emulated()) {
      for (int i = 4; i < 12; ++i) REQUIRE(r.after_wait2[lane * 12 + i] == sentinel);
      for (int i = 8; i < 12; ++i) REQUIRE(r.after_wait1[lane * 12 + i] == sentinel);
    }
  }
}

TEST_CASE("atomics under contention from many blocks", "[cuda][emu][primitives]") {
  HG_REQUIRE_CUDA();
  const unsigned blocks = 64, threads = 256;
  const auto n = static_cast<int64_t>(blocks) * threads;
  const AtomicTotals t = atomics(blocks, threads);
  REQUIRE(t.f32_sum == static_cast<float>(n));  // exact: every partial sum is an integer below 2^24
  REQUIRE(t.i32_sum == n * (n - 1) / 2);
  REQUIRE(t.u64_sum == static_cast<unsigned long long>(n) * (1ull << 40) + static_cast<unsigned long long>(n * (n - 1) / 2));
  REQUIRE(t.i32_max == n - 1);
  REQUIRE(t.cas_count == n);
}
