// The AVX512_BF16 (vdpbf16ps) GEMM kernel where this CPU has it (skipped visibly where not):
// bitwise the AVX2 kernel's results on bf16 products (the pair packing keeps the f32 chain's
// k order), the instruction's own deviation (subnormal bf16 inputs read as zero) pinned on
// the raw kernel, and the engine routing such values around it so products stay exact.
#include <catch2/catch.hpp>
#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "framework/cpu/isa.h"
#include "tests/ops/cpu/gemm/reference.h"

using namespace hg;
using namespace hg::cpu;
using namespace hg::test_gemm;

namespace {

bool has_avx512_bf16() {
  if (features().avx512_bf16 && static_cast<int>(best_isa()) >= static_cast<int>(Isa::avx512)) return true;
  WARN("SKIPPED: the vdpbf16ps GEMM kernel needs AVX512_BF16; this CPU has " << describe());
  return false;
}

const gemm::Kernel<float>& kernel() { return gemm::avx512_bf16_kernel(); }

// out[M x N] = A (M x K) · Bt (N x K)^T on kernel k into f32 (or Out), `threads` threads.
template <class Out = float>
std::vector<Out> product(const Operand<bfloat16>& a, const Operand<bfloat16>& bt, const gemm::Kernel<float>& k,
                         int threads, const gemm::Epilogue<float>& ep = {}) {
  const int64_t M = a.rows, N = bt.rows, K = a.cols;
  std::vector<Out> out(static_cast<size_t>(M * N));
  gemm::run<float>(M, N, K, a.source(), bt.source(), gemm::Output{out.data(), dtype_v<Out>, 1, M, 0, 0, N, 1}, ep,
                   threads, &k);
  return out;
}

template <class Out>
bool same_bits(const std::vector<Out>& x, const std::vector<Out>& y) {
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(Out)) == 0;
}

// One-element product on the engine with kernel k, in f32.
float dot1(const std::vector<bfloat16>& a, const std::vector<bfloat16>& b, const gemm::Kernel<float>& k) {
  const int64_t K = static_cast<int64_t>(a.size());
  float out = 0;
  gemm::run<float>(1, 1, K, gemm::Matrix<bfloat16>{a.data(), K, 1}, gemm::Matrix<bfloat16>{b.data(), K, 1},
                   gemm::Output{&out, DType::f32, 1, 1, 0, 0, 1, 1}, gemm::Epilogue<float>{}, 1, &k);
  return out;
}

}  // namespace

TEST_CASE("avx512_bf16 kernel: bf16 products are bitwise the AVX2 kernel's, on 1 and 2 threads",
          "[gemm][isa][avx512_bf16][determinism]") {
  if (!has_avx512_bf16()) return;
  struct Shape3 {
    int64_t M, N, K;
  };
  uint64_t seed = 90;
  // Odd k (a pair half padding), one and several k blocks (KC 256), half column panels,
  // more rows than one MC block.
  for (const Shape3& s : {Shape3{1, 1, 1}, Shape3{14, 32, 2}, Shape3{13, 17, 33}, Shape3{29, 47, 300},
                          Shape3{150, 65, 513}, Shape3{5, 530, 20}})
    for (bool rows : {true, false}) {
      INFO("M " << s.M << " N " << s.N << " K " << s.K << " row-major " << rows);
      seed += 2;
      const auto a = random_operand<bfloat16>(s.M, s.K, rows, seed, 3.0);
      const auto bt = random_operand<bfloat16>(s.N, s.K, !rows, seed + 1);
      const auto want = product(a, bt, gemm::avx2_kernel(), 1);
      CHECK(same_bits(product(a, bt, kernel(), 1), want));
      CHECK(same_bits(product(a, bt, kernel(), 2), want));
      const gemm::Epilogue<float> ep{-0.75f, nullptr, true};
      CHECK(same_bits(product<bfloat16>(a, bt, kernel(), 2, ep), product<bfloat16>(a, bt, gemm::avx2_kernel(), 1, ep)));
    }
  check_shapes<bfloat16>(kernel());  // and against f64 within the f32-accumulation bound
  CHECK(gemm::self_check(kernel(), gemm::Operands::bf16));
}

TEST_CASE("avx512_bf16 kernel: vdpbf16ps itself reads subnormal bf16 as zero (the deviation the engine avoids)",
          "[gemm][isa][avx512_bf16][numerics]") {
  if (!has_avx512_bf16()) return;
  // The raw kernel on hand-packed pairs: A row 0 = (2^-130, 1) (2^-130 a bf16 subnormal), B
  // column 0 = (1, 2^-4); the exact sum 2^-130 + 2^-4 rounds to 2^-4 in f32 either way, so
  // use B column 0 = (2^-10, 0): exact 2^-140 (an f32 subnormal), vdpbf16ps gives 0.
  const gemm::Kernel<float>& k = kernel();
  std::vector<uint32_t> a(static_cast<size_t>(k.mr), 0), b(static_cast<size_t>(k.nr), 0);
  const auto bf = [](float x) { return static_cast<uint32_t>(std::bit_cast<uint32_t>(x) >> 16); };
  a[0] = bf(0x1p-130f) << 16 | bf(1.0f);
  b[0] = bf(0x1p-10f) << 16;
  b[1] = bf(1.0f) << 16 | bf(0x1p-4f);  // column 1: 2^-130 * 1 + 1 * 2^-4
  std::vector<float> c(static_cast<size_t>(k.mr * k.nr), -1.0f);
  k.fn(2, a.data(), b.data(), c.data(), k.nr, true, false);
  CHECK(c[0] == 0.0f);      // the exact 2^-140 flushed
  CHECK(c[1] == 0x1p-4f);   // the normal product kept
  // The f32 chain keeps it: the engine packs it for the exact chain instead.
  CHECK(dot1({bfloat16(0x1p-130f), bfloat16(1.0f)}, {bfloat16(0x1p-10f), bfloat16(0.0f)}, k) == 0x1p-140f);
}

TEST_CASE("avx512_bf16 kernel: subnormal inputs, subnormal products and non-finite values stay exact",
          "[gemm][isa][avx512_bf16][numerics]") {
  if (!has_avx512_bf16()) return;
  const gemm::Kernel<float>& k = kernel();
  CHECK(dot1({bfloat16(0x1p-100f)}, {bfloat16(0x1p-30f)}, k) == 0x1p-130f);         // product subnormal
  CHECK(dot1({bfloat16(0x1p-133f)}, {bfloat16(0x1p10f)}, k) == 0x1p-123f);          // input subnormal
  CHECK(dot1({bfloat16(0x1p-50f), bfloat16(3.0f)}, {bfloat16(0x1p-50f), bfloat16(-0.5f)}, k) == 0x1p-100f - 1.5f);
  CHECK(dot1({bfloat16(INFINITY)}, {bfloat16(2.0f)}, k) == INFINITY);
  CHECK(std::isnan(dot1({bfloat16(INFINITY)}, {bfloat16(0.0f)}, k)));
  // A product past f32's range: the chain rounds only after adding, so 2^200 overflows to
  // inf and the exact -2^200 after it leaves inf (not inf - inf = NaN); vdpbf16ps does the
  // same (the values are finite and normal, so the kernel runs them).
  CHECK(dot1({bfloat16(0x1p100f), bfloat16(0x1p100f)}, {bfloat16(0x1p100f), bfloat16(-0x1p100f)}, k) == INFINITY);
  CHECK(dot1({bfloat16(0x1p64f)}, {bfloat16(0x1p64f)}, k) == INFINITY);
  // A tile that took the exact chain for one k block stays on it: its partial sum 2^-130
  // would be flushed if the next block (2^-56 * 2^-56) ran on vdpbf16ps.
  std::vector<bfloat16> x(257, bfloat16(0.0f)), y(257, bfloat16(0.0f));
  x[0] = bfloat16(0x1p-100f), y[0] = bfloat16(0x1p-30f), x[256] = bfloat16(0x1p-56f), y[256] = bfloat16(0x1p-56f);
  CHECK(dot1(x, y, k) == 0x1p-112f + 0x1p-130f);
  // A whole product with one subnormal element: bitwise the AVX2 kernel's.
  auto a = random_operand<bfloat16>(40, 300, true, 7), bt = random_operand<bfloat16>(50, 300, true, 8);
  a.data[5 * 300 + 17] = bfloat16(0x1p-128f);
  CHECK(same_bits(product(a, bt, k, 2), product(a, bt, gemm::avx2_kernel(), 1)));
}

TEST_CASE("avx512_bf16 kernel: the engine takes it only where the measured vdpbf16ps rate beats the FMA's",
          "[gemm][isa][avx512_bf16]") {
  if (!has_avx512_bf16()) return;
  // One vdpbf16ps does twice an FMA's multiply-adds: cores issue it once or twice per FMA
  // pair, so the ratio lies near 1 or 2; anything far outside says the probe measures nothing.
  const double ratio = gemm::avx512_bf16_dot_vs_fma();
  INFO("vdpbf16ps multiply-adds per f32 FMA multiply-add, measured: " << ratio);
  CHECK(ratio > 0.3);
  CHECK(ratio < 3.0);
  if (isa() != Isa::avx512) return;  // HG_CPU_ISA chose another path
  const char* chosen = gemm::kernel_for(gemm::Operands::bf16).name;
  CHECK((chosen == kernel().name || chosen == gemm::avx512_kernel().name));
  // The probe measures once per process: the choice follows its one ratio (1.3 the threshold).
  if (ratio < 1.0) CHECK(chosen == gemm::avx512_kernel().name);
  if (ratio > 1.7) CHECK(chosen == kernel().name);
}

TEST_CASE("avx512_bf16 kernel: the AVX-512 panel conversions give the scalar ones' pairs and verdicts",
          "[avx512_bf16][gemm][isa]") {
  if (!has_avx512_bf16()) return;
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  // Ordinary bf16 values, then one special value per panel: inexact (not a bf16), tiny,
  // subnormal, inf, NaN, or none; every k tail from 1 to 70 (partial 32-value blocks, odd kc).
  const float specials[] = {1.0f + 0x1p-12f, 0x1p-60f, 0x1p-130f, INFINITY, NAN, 0.0f};
  for (bool a_panel : {true, false}) {
    const int64_t rows = a_panel ? 14 : 32;
    for (int64_t kc = 1; kc <= 70; ++kc)
      for (float special : specials) {
        INFO((a_panel ? "A" : "B") << " panel, kc " << kc << ", special " << special);
        std::vector<float> panel(static_cast<size_t>(rows * kc));
        for (float& v : panel) v = std::bit_cast<float>(std::bit_cast<uint32_t>(u(rng)) & 0xFFFF0000u);
        panel[rng() % panel.size()] = special;
        const size_t words = static_cast<size_t>((kc + 1) / 2 * rows);
        std::vector<uint32_t> got(words + 8, 0xDEADBEEFu), want(words + 8, 0xDEADBEEFu);
        const bool vg = gemm::avx512_bf16_pairs(a_panel, true, panel.data(), kc, got.data());
        const bool vw = gemm::avx512_bf16_pairs(a_panel, false, panel.data(), kc, want.data());
        CHECK(vg == vw);
        CHECK(vw == (special == 0.0f));
        if (vw) CHECK(std::memcmp(got.data(), want.data(), words * 4) == 0);
        CHECK(got[words] == 0xDEADBEEFu);  // nothing written past the panel's pairs
      }
  }
}
