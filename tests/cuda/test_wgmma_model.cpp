// The wgmma operand model (cuda/emu/wgmma_model.h) against the PTX ISA: addresses hand-derived
// from the ISA's figures, products vs an f64 GEMM of operands placed by the ISA's layout table
// (evaluated here generically), and the Hopper GEMM's descriptors reading TMA-swizzled tiles.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "cuda/emu/wgmma_model.h"
#include "cuda/primitives/smem_swizzle.h"
#include "cuda/primitives/wgmma_desc.h"
#include "framework/bfloat16.h"
#include "framework/error.h"
#include "framework/half.h"

using hg::cuda::WgmmaSwizzle;
using hg::cuda::wgmma_descriptor;
using namespace hg::cuda::emu;

namespace {

constexpr uint16_t kNaN16 = 0x7fff;  // a NaN in both f16 and bf16: a stray read shows

// A block of "shared memory" whose window starts at a 1024-aligned, nonzero address.
struct Smem {
  static constexpr uint32_t kBase = 4096;
  std::vector<unsigned char> bytes;
  explicit Smem(uint32_t n) : bytes(n) {
    for (uint32_t i = 0; i < n; i += 2) std::memcpy(&bytes[i], &kNaN16, 2);
  }
  SharedWindow window() { return {bytes.data(), kBase, static_cast<uint32_t>(bytes.size())}; }
  void put(uint32_t addr, uint16_t v) {
    REQUIRE(addr >= kBase);
    REQUIRE(addr + 2 <= kBase + bytes.size());
    std::memcpy(&bytes[addr - kBase], &v, 2);
  }
  uint16_t get(uint32_t addr) const {
    uint16_t v;
    std::memcpy(&v, &bytes[addr - kBase], 2);
    return v;
  }
};

WgmmaSwizzle swizzle_code(uint32_t span) {
  switch (span) {
    case 128: return WgmmaSwizzle::b128;
    case 64: return WgmmaSwizzle::b64;
    case 32: return WgmmaSwizzle::b32;
    default: return WgmmaSwizzle::none;
  }
}

// One mode of a CuTe layout: (shape, stride) pairs, the coordinate split colexicographically.
struct Mode {
  std::vector<std::pair<int, int>> parts;
  int eval(int c) const {
    int off = 0;
    for (const auto& [shape, stride] : parts) {
      off += c % shape * stride;
      c /= shape;
    }
    return off;
  }
};

// The ISA's "Canonical Layouts" table, transcribed as (MN mode, K mode) in 16-bit elements
// (T = 8, W = span / 16; m, k: enough repeats for any slice; LBO/SBO in bytes / 2).
std::pair<Mode, Mode> canonical_layout(bool mn_major, uint32_t span, uint32_t lbo, uint32_t sbo) {
  const int T = 8, W = static_cast<int>(span) / 16, L = static_cast<int>(lbo) / 2, S = static_cast<int>(sbo) / 2;
  if (mn_major && span == 0) return {Mode{{{T, 1}, {1, T}, {64, S}}}, Mode{{{8, T}, {64, L}}}};      // ((T,1,m),(8,k)):((1,T,SBO),(1T,LBO))
  if (mn_major) return {Mode{{{T, 1}, {W, T}, {64, L}}}, Mode{{{8, W * T}, {64, S}}}};               // ((T,W,m),(8,k)):((1,T,LBO),(WT,SBO))
  if (span == 0) return {Mode{{{8, T}, {64, S}}}, Mode{{{T, 1}, {64, L}}}};                          // ((8,m),(T,2k)):((1T,SBO),(1,LBO))
  return {Mode{{{8, W * T}, {64, S}}}, Mode{{{T, 1}, {64, T}}}};                                     // ((8,m),(T,2k)):((WT,SBO),(1,T))
}

// An operand slice of `rows` x 16 placed at `start` (descriptor-encodable) in a layout chosen
// so LBO and SBO differ and gaps (NaN) sit between the pieces: a swapped or misread offset
// reads NaN or a wrong element.
struct Placement {
  uint32_t start, lbo, sbo, span;
  bool mn_major;
  uint32_t extent;  // bytes from the 1024-aligned base the slice can touch
  uint64_t desc() const { return wgmma_descriptor(start, lbo, sbo, swizzle_code(span)); }
};

Placement choose_placement(uint32_t base, bool mn_major, uint32_t span, int rows) {
  const auto groups = static_cast<uint32_t>(rows) / 8;
  if (span == 0) return {base, groups * 144, 144, 0, mn_major, groups * 288};  // 128-byte cores, 16-byte gaps
  if (!mn_major) {  // rows span bytes apart, atoms of 8 rows with a gap atom; the slice a few K-chunks in;
    // LBO is "not used" here: a value that would land in a gap if it were
    const uint32_t k_offset = span == 128 ? 64 : span == 64 ? 32 : 0;
    return {base + k_offset, 8 * span, 16 * span, span, false, groups * 16 * span};
  }
  const uint32_t blocks = (static_cast<uint32_t>(rows) + span / 2 - 1) / (span / 2);  // span/2 elements per K-row
  return {base, 3 * 8 * span, 8 * span, span, true, blocks * 3 * 8 * span};
}

void place(Smem& smem, const Placement& p, const std::vector<uint16_t>& m, int rows) {  // m[i * 16 + k]
  const auto [mn, kk] = canonical_layout(p.mn_major, p.span, p.lbo, p.sbo);
  for (int i = 0; i < rows; ++i)
    for (int k = 0; k < 16; ++k) {
      const uint32_t addr = p.start + 2 * static_cast<uint32_t>(mn.eval(i) + kk.eval(k));
      smem.put(hg::cuda::swizzle_smem_address(addr, p.span), m[static_cast<size_t>(i) * 16 + k]);
    }
}

double value(uint16_t bits, WgmmaInput type) {
  return type == WgmmaInput::f16 ? hg::half_bits_to_float(bits) : hg::bf16_bits_to_float(bits);
}

std::vector<uint16_t> random_operand(std::mt19937& rng, int rows, WgmmaInput type, int K = 16) {
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  std::vector<uint16_t> m(static_cast<size_t>(rows) * K);
  for (auto& v : m) v = type == WgmmaInput::f16 ? hg::float_to_half_bits(u(rng)) : hg::float_to_bf16_bits(u(rng));
  return m;
}

// Accumulator storage for 128 threads of N/2 registers each, and the ISA's D fragment map.
struct Acc {
  int N;
  std::vector<std::vector<float>> regs;
  std::vector<float*> ptrs;
  Acc(int n, float fill) : N(n), regs(128, std::vector<float>(static_cast<size_t>(n / 2), fill)) {
    for (auto& r : regs) ptrs.push_back(r.data());
  }
  float* const* p() const { return ptrs.data(); }
  // The register holding D[row][col] (thread t of warp w = row / 16 etc., "wgmma .m64nNk16" D).
  float& at(int row, int col) {
    const int w = row / 16, g = row % 8, upper = row % 16 / 8, j = col / 8, c = col % 8;
    return regs[static_cast<size_t>(32 * w + 4 * g + c / 2)][static_cast<size_t>(4 * j + 2 * upper + c % 2)];
  }
};

// D[r][c] vs sum_k A[r][k] * B[k][c] (+ old) in f64; tolerance: the f32 rounding of a sum of
// K + 1 terms (once per wgmma when the sum spans several), far below any one term, so a misplaced element fails.
void check_product(Acc& acc, const std::vector<uint16_t>& a, const std::vector<uint16_t>& bt, WgmmaInput type,
                   const std::vector<float>* old, int K = 16) {
  for (int r = 0; r < 64; ++r)
    for (int c = 0; c < acc.N; ++c) {
      double ref = old ? (*old)[static_cast<size_t>(r) * acc.N + c] : 0.0, mag = std::fabs(ref);
      for (int k = 0; k < K; ++k) {
        const double t = value(a[static_cast<size_t>(r) * K + k], type) * value(bt[static_cast<size_t>(c) * K + k], type);
        ref += t;
        mag += std::fabs(t);
      }
      const float got = acc.at(r, c);
      if (!(std::fabs(got - ref) <= mag * 0x1p-23 + 1e-30)) {  // one assertion per product keeps the test fast
        INFO("D[" << r << "][" << c << "] = " << got << ", f64 reference " << ref);
        REQUIRE(std::fabs(got - ref) <= mag * 0x1p-23 + 1e-30);
      }
    }
  SUCCEED("all " << 64 * acc.N << " outputs match");
}

}  // namespace

TEST_CASE("wgmma descriptor: fields round-trip through wgmma_descriptor()", "[cuda][emu][wgmma]") {
  struct Case {
    uint32_t addr, lbo, sbo, base_offset;
    WgmmaSwizzle swz;
    uint32_t span;
  };
  for (const Case& c : {Case{0, 16, 1024, 0, WgmmaSwizzle::b128, 128}, Case{0x3fff0, 0x3fff0, 0x3fff0, 7, WgmmaSwizzle::b32, 32},
                        Case{1024 + 96, 8192, 512, 0, WgmmaSwizzle::b64, 64}, Case{144, 128, 256, 3, WgmmaSwizzle::none, 0}}) {
    const WgmmaDescriptorFields f = decode_wgmma_descriptor(wgmma_descriptor(c.addr, c.lbo, c.sbo, c.swz, c.base_offset));
    CHECK(f.start == c.addr);
    CHECK(f.lbo == c.lbo);
    CHECK(f.sbo == c.sbo);
    CHECK(f.base_offset == c.base_offset);
    CHECK(f.swizzle_span == c.span);
  }
  // The kernel's K-major 128B descriptor: slice k starts 32 k bytes in, LBO 16, SBO 1024.
  const WgmmaDescriptorFields k3 = decode_wgmma_descriptor(hg::cuda::wgmma_kmajor_sw128_descriptor(2048, 3));
  CHECK(k3.start == 2048 + 96);
  CHECK(k3.lbo == 16);
  CHECK(k3.sbo == 1024);
  CHECK(k3.swizzle_span == 128);
  for (const int bit : {14, 15, 30, 31, 46, 47, 48, 52, 61})
    CHECK_THROWS_WITH(decode_wgmma_descriptor(uint64_t{1} << bit), Catch::Contains("outside the ISA's fields"));
  const WgmmaDescriptorFields shifted = decode_wgmma_descriptor(wgmma_descriptor(0, 16, 1024, WgmmaSwizzle::b128, 2));
  CHECK_THROWS_WITH(wgmma_element_address(shifted, false, 0, 0), Catch::Contains("base offset 2"));
  const WgmmaDescriptorFields plain = decode_wgmma_descriptor(wgmma_descriptor(0, 128, 256, WgmmaSwizzle::none));
  CHECK_THROWS_WITH(wgmma_element_address(plain, false, 0, 16), Catch::Contains("outside an operand slice"));
}

TEST_CASE("wgmma element address: hand-derived tables from the ISA's layout figures", "[cuda][emu][wgmma]") {
  const auto fields = [](uint32_t start, uint32_t lbo, uint32_t sbo, WgmmaSwizzle s) {
    return decode_wgmma_descriptor(wgmma_descriptor(start, lbo, sbo, s));
  };
  SECTION("K-major, 128B swizzle: rows of 128 bytes, 16-byte chunk index XOR row % 8") {
    const auto d = fields(0, 16, 1024, WgmmaSwizzle::b128);
    for (int i = 0; i < 8; ++i)
      for (int k = 0; k < 16; ++k)
        CHECK(wgmma_element_address(d, false, i, k) == static_cast<uint32_t>(i * 128 + ((k * 2 / 16) ^ (i % 8)) * 16 + (k * 2) % 16));
    CHECK(wgmma_element_address(d, false, 1, 8) == 128);    // chunk 1 ^ row 1 = chunk 0
    CHECK(wgmma_element_address(d, false, 3, 5) == 442);    // 384 + (0 ^ 3) * 16 + 10
    CHECK(wgmma_element_address(d, false, 7, 15) == 1006);  // 896 + (1 ^ 7) * 16 + 14
    CHECK(wgmma_element_address(d, false, 9, 0) == 1168);   // next atom (SBO): 1024 + 128 + 16
    CHECK(wgmma_element_address(fields(64, 16, 1024, WgmmaSwizzle::b128), false, 2, 0) == 352);  // slice 2: 256 + (4 ^ 2) * 16
  }
  SECTION("K-major, 64B and 32B swizzle: rows of 64 / 32 bytes") {
    const auto d64 = fields(0, 16, 512, WgmmaSwizzle::b64), d32 = fields(0, 16, 256, WgmmaSwizzle::b32);
    CHECK(wgmma_element_address(d64, false, 2, 0) == 144);  // 128 + (0 ^ 1) * 16
    CHECK(wgmma_element_address(d64, false, 7, 8) == 480);  // 448 + (1 ^ 3) * 16
    CHECK(wgmma_element_address(d64, false, 8, 3) == 518);  // 512 + 6
    CHECK(wgmma_element_address(d32, false, 3, 8) == 112);  // 96 + 16, bit 7 clear
    CHECK(wgmma_element_address(d32, false, 4, 8) == 128);  // 128 + (1 ^ 1) * 16
    CHECK(wgmma_element_address(d32, false, 4, 1) == 146);  // 128 + (0 ^ 1) * 16 + 2
  }
  SECTION("K-major, no swizzle: 8x16-byte core matrices, LBO along K, SBO along M/N") {
    const auto d = fields(0, 128, 256, WgmmaSwizzle::none);
    CHECK(wgmma_element_address(d, false, 1, 0) == 16);
    CHECK(wgmma_element_address(d, false, 0, 8) == 128);
    CHECK(wgmma_element_address(d, false, 8, 0) == 256);
    CHECK(wgmma_element_address(d, false, 9, 9) == 402);  // 16 + 256 + 2 + 128
  }
  SECTION("MN-major, no swizzle: the ISA's bf16 example ((8,1,2),(8,2)):((1,8,64),(8,128)), LBO 256, SBO 128") {
    const auto d = fields(0, 256, 128, WgmmaSwizzle::none);
    CHECK(wgmma_element_address(d, true, 1, 0) == 2);
    CHECK(wgmma_element_address(d, true, 0, 1) == 16);
    CHECK(wgmma_element_address(d, true, 8, 0) == 128);    // 64 elements
    CHECK(wgmma_element_address(d, true, 0, 8) == 256);    // 128 elements
    CHECK(wgmma_element_address(d, true, 9, 9) == 402);    // (1 + 64 + 8 + 128) * 2
  }
  SECTION("MN-major, 32B / 64B swizzle: the ISA's bf16 examples") {
    // ((8,2,2),(8,2)):((1,8,128),(16,256)), LBO 256 bytes, SBO 512 bytes, then Swizzle<1,4,3>.
    const auto d32 = fields(0, 256, 512, WgmmaSwizzle::b32);
    CHECK(wgmma_element_address(d32, true, 8, 0) == 16);
    CHECK(wgmma_element_address(d32, true, 16, 0) == 256);
    CHECK(wgmma_element_address(d32, true, 0, 4) == 128 + 16);    // K-row 4: bit 7 set flips the chunk
    CHECK(wgmma_element_address(d32, true, 9, 4) == 128 + 2);     // chunk 1 ^ 1 = 0
    CHECK(wgmma_element_address(d32, true, 0, 8) == 512);
    // ((8,4,2),(8,2)):((1,8,256),(32,512)), LBO 512 bytes, SBO 1024 bytes, then Swizzle<2,4,3>.
    const auto d64 = fields(0, 512, 1024, WgmmaSwizzle::b64);
    CHECK(wgmma_element_address(d64, true, 24, 0) == 48);
    CHECK(wgmma_element_address(d64, true, 32, 0) == 512);
    CHECK(wgmma_element_address(d64, true, 0, 6) == 384 + 48);   // K-row 6: chunk 0 ^ 3
    CHECK(wgmma_element_address(d64, true, 40, 11) == 1728);  // 16 + 512 + 3 * 64 + 1024, chunk 1 ^ (row 3 / 2)
  }
  SECTION("MN-major, 128B swizzle: K-rows of 128 bytes (64 elements), chunk index XOR K-row % 8") {
    const auto d = fields(0, 8192, 1024, WgmmaSwizzle::b128);
    for (int i = 0; i < 64; ++i)
      for (int k = 0; k < 8; ++k)
        CHECK(wgmma_element_address(d, true, i, k) == static_cast<uint32_t>(k * 128 + ((i * 2 / 16) ^ k) * 16 + (i * 2) % 16));
    CHECK(wgmma_element_address(d, true, 0, 1) == 144);
    CHECK(wgmma_element_address(d, true, 8, 1) == 128);
    CHECK(wgmma_element_address(d, true, 64, 0) == 8192);              // LBO: the next 64 N-elements
    CHECK(wgmma_element_address(d, true, 70, 9) == 8192 + 1024 + 128 + 16 + 12);  // SBO: K-rows 8..15
  }
}

TEST_CASE("wgmma_compute: every major-ness and swizzle against an f64 GEMM", "[cuda][emu][wgmma]") {
  std::mt19937 rng(19);
  for (const WgmmaInput type : {WgmmaInput::f16, WgmmaInput::bf16})
    for (const int N : {8, 128, 256})
      for (const bool a_mn : {false, true})
        for (const bool b_mn : {false, true})
          for (const uint32_t a_span : {0u, 32u, 64u, 128u})
            for (const uint32_t b_span : {0u, 32u, 64u, 128u}) {
              INFO((type == WgmmaInput::f16 ? "f16" : "bf16") << " N " << N << (a_mn ? " A MN-major" : " A K-major") << " span "
                                                               << a_span << (b_mn ? ", B MN-major" : ", B K-major") << " span " << b_span);
              const Placement pa = choose_placement(Smem::kBase, a_mn, a_span, 64);
              const Placement pb = choose_placement(Smem::kBase + (pa.extent + 1023) / 1024 * 1024, b_mn, b_span, N);
              Smem smem(pb.start - Smem::kBase + pb.extent + 1024);
              const std::vector<uint16_t> a = random_operand(rng, 64, type), bt = random_operand(rng, N, type);
              place(smem, pa, a, 64);
              place(smem, pb, bt, N);
              std::uniform_real_distribution<float> u(-4.f, 4.f);
              Acc acc(N, 0.f);
              std::vector<float> old(static_cast<size_t>(64) * N);
              for (int r = 0; r < 64; ++r)
                for (int c = 0; c < N; ++c) acc.at(r, c) = old[static_cast<size_t>(r) * N + c] = u(rng);
              wgmma_compute(smem.window(), type, N, pa.desc(), a_mn, pb.desc(), b_mn, true, acc.p());
              check_product(acc, a, bt, type, &old);
            }
}

TEST_CASE("wgmma_compute: scale_d false ignores old accumulators; bad N and out-of-window operands fail", "[cuda][emu][wgmma]") {
  std::mt19937 rng(7);
  const Placement pa = choose_placement(Smem::kBase, false, 128, 64), pb = choose_placement(Smem::kBase + 16384, true, 64, 64);
  Smem smem(32768);
  const auto a = random_operand(rng, 64, WgmmaInput::bf16), bt = random_operand(rng, 64, WgmmaInput::bf16);
  place(smem, pa, a, 64);
  place(smem, pb, bt, 64);
  Acc acc(64, std::nanf(""));
  wgmma_compute(smem.window(), WgmmaInput::bf16, 64, pa.desc(), false, pb.desc(), true, false, acc.p());
  check_product(acc, a, bt, WgmmaInput::bf16, nullptr);

  for (const int bad_n : {0, 4, 12, 264})
    CHECK_THROWS_WITH(wgmma_compute(smem.window(), WgmmaInput::bf16, bad_n, pa.desc(), false, pb.desc(), true, false, acc.p()),
                      Catch::Contains("is not a multiple of 8 in 8..256"));
  // B's last rows run past the window: an error naming the operand, no accumulator written.
  Acc untouched(64, 1.5f);
  const uint64_t past_end = wgmma_descriptor(Smem::kBase + 32768 - 1024, 16, 1024, WgmmaSwizzle::b128);
  CHECK_THROWS_WITH(wgmma_compute(smem.window(), WgmmaInput::bf16, 64, pa.desc(), false, past_end, false, true, untouched.p()),
                    Catch::Contains("wgmma operand B") && Catch::Contains("outside the block's shared memory"));
  CHECK(untouched.at(0, 0) == 1.5f);
  CHECK(untouched.at(63, 63) == 1.5f);
}

// The Hopper GEMM (cuda/hopper_gemm_kernel.h): TMA writes 64-element (128-byte) rows with the 128B
// swizzle, row r of a box at r * 128; each consumer warpgroup reads 64 rows of A, and B, per
// 16-wide K slice through wgmma_kmajor_sw128_descriptor(). The model must read exactly the
// tile's sub-matrices, and four accumulating wgmmas give the f64 product over K = 64.
TEST_CASE("wgmma model reads the Hopper GEMM's TMA-swizzled tiles through its descriptors", "[cuda][emu][wgmma]") {
  std::mt19937 rng(90);
  constexpr int kRows = 128, kTileK = 64;
  constexpr uint32_t a_tile = Smem::kBase, b_tile = Smem::kBase + 16384;
  Smem smem(49152);
  const WgmmaInput type = WgmmaInput::f16;
  const std::vector<uint16_t> a = random_operand(rng, kRows, type, kTileK), bt = random_operand(rng, kRows, type, kTileK);
  // TMA, K-major box (rows x 64 K): element (r, c) at tile + r * 128 + 2 c, swizzled.
  const auto tma_kmajor = [](uint32_t tile, int r, int c) {
    return hg::cuda::swizzle_smem_address(tile + static_cast<uint32_t>(r * 128 + 2 * c), 128);
  };
  for (int r = 0; r < kRows; ++r)
    for (int c = 0; c < kTileK; ++c) smem.put(tma_kmajor(a_tile, r, c), a[static_cast<size_t>(r) * kTileK + c]);

  for (int consumer = 0; consumer < 2; ++consumer)
    for (int ks = 0; ks < 4; ++ks) {
      const auto d = decode_wgmma_descriptor(hg::cuda::wgmma_kmajor_sw128_descriptor(a_tile + consumer * 64 * 128, ks));
      for (int i = 0; i < 64; ++i)
        for (int k = 0; k < 16; ++k) {
          INFO("consumer " << consumer << " slice " << ks << " A(" << i << ", " << k << ")");
          REQUIRE(smem.get(wgmma_element_address(d, false, i, k)) ==
                  a[static_cast<size_t>(64 * consumer + i) * kTileK + 16 * ks + k]);
        }
    }

  SECTION("B K-major (N rows of 64 K), as the kernel stores it") {
    for (int r = 0; r < kRows; ++r)
      for (int c = 0; c < kTileK; ++c) smem.put(tma_kmajor(b_tile, r, c), bt[static_cast<size_t>(r) * kTileK + c]);
    Acc acc(kRows, std::nanf(""));
    for (int ks = 0; ks < 4; ++ks)
      wgmma_compute(smem.window(), type, kRows, hg::cuda::wgmma_kmajor_sw128_descriptor(a_tile, ks), false,
                    hg::cuda::wgmma_kmajor_sw128_descriptor(b_tile, ks), false, ks > 0, acc.p());
    const std::vector<uint16_t> a_top(a.begin(), a.begin() + 64 * kTileK);
    check_product(acc, a_top, bt, type, nullptr, kTileK);
  }
  SECTION("B MN-major (K rows of 64 N = 128 bytes, boxes of 64 N-columns): LBO = box bytes, SBO = 1024") {
    // Box nb holds N-columns [64 nb, 64 nb + 64): K-row k at box + k * 128, element n at 2 (n % 64).
    constexpr uint32_t box_bytes = kTileK * 128;
    for (int n = 0; n < kRows; ++n)
      for (int k = 0; k < kTileK; ++k)
        smem.put(tma_kmajor(b_tile + static_cast<uint32_t>(n / 64) * box_bytes, k, n % 64), bt[static_cast<size_t>(n) * kTileK + k]);
    Acc acc(kRows, std::nanf(""));
    for (int ks = 0; ks < 4; ++ks) {
      // The k-th slice is 16 K-rows further: 16 * 128 bytes, a whole number of swizzle atoms.
      const uint64_t b_desc = wgmma_descriptor(b_tile + 2048u * static_cast<uint32_t>(ks), box_bytes, 1024, WgmmaSwizzle::b128);
      const auto d = decode_wgmma_descriptor(b_desc);
      for (int n = 0; n < kRows; ++n)
        for (int k = 0; k < 16; ++k) {
          INFO("slice " << ks << " B(k " << k << ", n " << n << ")");
          REQUIRE(smem.get(wgmma_element_address(d, true, n, k)) == bt[static_cast<size_t>(n) * kTileK + 16 * ks + k]);
        }
      wgmma_compute(smem.window(), type, kRows, hg::cuda::wgmma_kmajor_sw128_descriptor(a_tile, ks), false, b_desc, true,
                    ks > 0, acc.p());
    }
    const std::vector<uint16_t> a_top(a.begin(), a.begin() + 64 * kTileK);
    check_product(acc, a_top, bt, type, nullptr, kTileK);
  }
}
