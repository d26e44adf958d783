// The AMX kernels' logic on any CPU: the exact f16 = hi + lo split (all 65,536 f16 values),
// the scalar tile model's TDPBF16PS semantics against hand-computed values, and the real
// AMX micro-kernel code (VNNI packing, tile configuration, k loop, plane order) run on the
// model through the engine (directly, and under matmul and linear) against f64.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <thread>
#include <vector>
#include <algorithm>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "framework/cpu/isa.h"
#include "framework/error.h"
#include "halfgrad.h"
#include "tests/ops/cpu/gemm/model_kernels.h"
#include "tests/ops/cpu/gemm/reference.h"
#include "tests/skip.h"

using namespace hg;
using namespace hg::cpu;
using namespace hg::test_gemm;
namespace amx = hg::cpu::gemm::amx;

namespace {

// One-element product a · b on a kernel into an output of Out.
template <class T, class Out>
double dot1(const std::vector<T>& a, const std::vector<T>& b, const gemm::Kernel<float>& k) {
  const int64_t K = static_cast<int64_t>(a.size());
  Out out{};
  gemm::run<float>(1, 1, K, gemm::Matrix<T>{a.data(), K, 1}, gemm::Matrix<T>{b.data(), K, 1},
                   gemm::Output{&out, dtype_v<Out>, 1, 1, 0, 0, 1, 1}, gemm::Epilogue<float>{}, 1, &k);
  return static_cast<double>(load(out));
}

}  // namespace

TEST_CASE("amx split: every f16 value is hi + lo exactly, both bf16", "[gemm][amx]") {
  int64_t finite = 0;
  for (uint32_t bitsv = 0; bitsv < 65536; ++bitsv) {
    const float x = static_cast<float>(half::from_bits(static_cast<uint16_t>(bitsv)));
    uint16_t p[2];
    bool ok = true;
    amx::split<2>(x, p, ok);
    if (!std::isfinite(x)) {  // inf and NaN are left to the exact fallback (inf * a zero lo is NaN)
      CHECK_FALSE(ok);
      continue;
    }
    ++finite;
    INFO("f16 bits " << bitsv << " = " << x);
    REQUIRE(ok);
    const double hi = amx::from_bf16(p[0]), lo = amx::from_bf16(p[1]);
    REQUIRE(hi + lo == static_cast<double>(x));  // exact in f64: both are multiples of 2^-24
    REQUIRE(std::fabs(lo) <= std::fabs(hi) * 0x1p-8);
  }
  CHECK(finite == 63488);
}

TEST_CASE("amx split: the four bf16 products of two f16 values sum to their exact product", "[gemm][amx]") {
  std::mt19937 g(15);
  std::uniform_int_distribution<uint32_t> pick(0, 0xFFFF);
  int64_t pairs = 0;
  while (pairs < 200000) {
    const float x = static_cast<float>(half::from_bits(static_cast<uint16_t>(pick(g))));
    const float y = static_cast<float>(half::from_bits(static_cast<uint16_t>(pick(g))));
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    ++pairs;
    uint16_t a[2], b[2];
    bool ok = true;
    amx::split<2>(x, a, ok), amx::split<2>(y, b, ok);
    double sum = 0;
    for (int i = 0; i < 2; ++i)
      for (int j = 0; j < 2; ++j) {
        const float fa = amx::from_bf16(a[i]), fb = amx::from_bf16(b[j]);
        const float p32 = fa * fb;  // what the tile unit computes: must be exact and not subnormal
        const double p64 = static_cast<double>(fa) * static_cast<double>(fb);
        INFO(x << " * " << y << " term " << i << j);
        REQUIRE(static_cast<double>(p32) == p64);
        REQUIRE(std::fpclassify(p32) != FP_SUBNORMAL);
        sum += p64;
      }
    REQUIRE(sum == static_cast<double>(x) * static_cast<double>(y));
  }
}

TEST_CASE("amx split: values outside the format are refused, not rounded", "[gemm][amx]") {
  uint16_t p[2];
  for (float x : {1.0f + 0x1p-12f, 70000.0f, 0x1p-25f, INFINITY}) {
    bool ok = true;
    amx::split<2>(x, p, ok);
    CHECK_FALSE(ok);
  }
  for (float x : {1.0f + 0x1p-8f, 0x1p-60f, NAN}) {  // not bf16; below the exact range; NaN
    bool ok = true;
    amx::split<1>(x, p, ok);
    CHECK_FALSE(ok);
  }
  bool ok = true;
  amx::split<1>(-1.5f, p, ok);
  CHECK((ok && p[0] == 0xBFC0));
}

TEST_CASE("amx model: TDPBF16PS sums pairs in order, reads bf16 subnormals as zero, flushes results",
          "[gemm][amx]") {
  using M = amx::ModelTiles;
  std::thread([] {
    CHECK_THROWS_AS(M::zero<0>(), Error);  // no LDTILECFG yet on this thread
    M::configure(amx::full_config());
    alignas(64) uint16_t a[16][32] = {}, b[16][32] = {};
    alignas(64) float c[16][16] = {};
    a[0][0] = 0x3FC0, a[0][1] = 0x4000;  // 1.5, 2
    b[0][0] = 0x4080, b[0][1] = 0x3F00;  // column 0, k pair 0: 4, 0.5
    a[1][0] = 0x0001, b[0][2] = 0x7100;  // 2^-133 (subnormal) * 2^99 in column 1, row 1
    a[2][2] = 0x1C80, b[1][4] = 0x1C80;  // 2^-70 * 2^-70 in column 2, row 2 (k = 2)
    a[3][0] = 0x4000, b[0][6] = 0x7F00;  // 2 * 2^127 overflows to inf (column 3, row 3)
    M::load<4>(a, 64), M::load<6>(b, 64), M::zero<0>();
    M::dot<0, 4, 6>();
    M::store<0>(c, 64);
    CHECK(c[0][0] == 7.0f);
    CHECK(c[1][1] == 0.0f);
    CHECK(c[2][2] == 0.0f);
    CHECK(std::isinf(c[3][3]));
    M::dot<0, 4, 6>();  // accumulates into the tile
    M::store<0>(c, 64);
    CHECK(c[0][0] == 14.0f);
  }).join();
}

TEST_CASE("amx kernels on the tile model: bf16 and split f16 products equal f64 within the bound",
          "[gemm][amx][numerics]") {
  check_shapes<bfloat16>(kModelBf16);
  check_shapes<half>(kModelF16);
  CHECK(amx::ModelTiles::state().configures >= 1);
  CHECK_FALSE(amx::ModelTiles::state().configured);  // released after each product
}

#if defined(__x86_64__)
// What another library might leave configured on this thread: 4-row tiles.
__attribute__((target("amx-tile"))) void load_foreign_tile_config() {
  static amx::TileConfig foreign = [] {
    amx::TileConfig c = amx::full_config();
    for (int t = 0; t < 8; ++t) c.rows[t] = 4, c.colsb[t] = 16;
    return c;
  }();
  _tile_loadconfig(&foreign);
}
#else
void load_foreign_tile_config() {}
#endif

TEST_CASE("amx kernels configure the tiles per product: another configuration or a release between two "
          "products breaks neither (model, and the tile unit where this CPU has one)",
          "[gemm][amx]") {
  const Operand<bfloat16> a = random_operand<bfloat16>(40, 70, true, 5), b = random_operand<bfloat16>(33, 70, true, 6);
  auto product = [&](const gemm::Kernel<float>& k) {
    std::vector<float> c(40 * 33);
    gemm::run<float>(40, 33, 70, a.source(), b.source(), gemm::Output{c.data(), DType::f32, 1, 40, 0, 0, 33, 1}, gemm::Epilogue<float>{}, 1, &k);
    return c;
  };
  const std::vector<float> want = product(kModelBf16);
  amx::TileConfig foreign = amx::full_config();
  for (int t = 0; t < 8; ++t) foreign.rows[t] = 4, foreign.colsb[t] = 16;  // another library's shapes
  amx::ModelTiles::configure(foreign);
  CHECK(product(kModelBf16) == want);
  amx::ModelTiles::release();
  CHECK(product(kModelBf16) == want);
  if (best_isa() != Isa::amx) HG_SKIP("the tile unit itself needs AMX-BF16 granted by the OS; this CPU has " + describe());
  // On the tile unit: the same bits again after a foreign configuration and after a release.
  // (Not the model's bits: TDPBF16PS sums the pairs of one instruction in an order of its
  // own, see docs/benchmark.md's kernel table; both are within the f32 bound, tested above.)
  const gemm::Kernel<float>& k = gemm::amx_bf16_kernel();
  const std::vector<float> hw = product(k);
  load_foreign_tile_config();
  CHECK(product(k) == hw);
  k.end();  // a TILERELEASE between two products
  CHECK(product(k) == hw);
}

TEST_CASE("amx kernels on the tile model: f16 overflow, f16 subnormals, and values AMX would flush",
          "[gemm][amx][numerics]") {
  // f16: the sum 90000 overflows the f16 output, 300^2 - 300^2 + 2 does not; subnormals exact.
  CHECK(std::isinf(dot1<half, half>({half(300.f), half(300.f)}, {half(300.f), half(300.f)}, kModelF16)));
  CHECK(dot1<half, half>({half(300.f), half(300.f), half(2.f)}, {half(300.f), half(-300.f), half(1.f)}, kModelF16) ==
        2.0);
  CHECK(dot1<half, float>({half(0x1p-24f)}, {half(0x1p-24f)}, kModelF16) == 0x1p-48);
  CHECK(dot1<half, float>({half(3 * 0x1p-20f), half(1.0f + 0x1p-10f)}, {half(0x1p8f), half(1.0f + 0x1p-10f)},
                          kModelF16) == 3 * 0x1p-12 + 1.0 + 0x1p-9 + 0x1p-20);
  // An f16 inf reaches the exact fallback: inf * 2 = inf, not the split's inf * 0 = NaN.
  CHECK(dot1<half, float>({half(INFINITY)}, {half(2.0f)}, kModelF16) == INFINITY);
  // bf16: 2^-100 * 2^-30 = 2^-130 is an f32 subnormal AMX would flush; the tile falls back
  // to the exact chain.
  CHECK(dot1<bfloat16, float>({bfloat16(0x1p-100f)}, {bfloat16(0x1p-30f)}, kModelBf16) == 0x1p-130);
  CHECK(dot1<bfloat16, float>({bfloat16(0x1p-50f), bfloat16(3.0f)}, {bfloat16(0x1p-50f), bfloat16(-0.5f)},
                              kModelBf16) == 0x1p-100 - 1.5);
  // A tile that fell back for one k block stays on the exact chain: its partial sum 2^-130
  // (subnormal) would be flushed if the next block (2^-56 * 2^-56) ran on the tiles.
  std::vector<bfloat16> x(257, bfloat16(0.0f)), y(257, bfloat16(0.0f));
  x[0] = bfloat16(0x1p-100f), y[0] = bfloat16(0x1p-30f), x[256] = bfloat16(0x1p-56f), y[256] = bfloat16(0x1p-56f);
  CHECK(dot1<bfloat16, float>(x, y, kModelBf16) == 0x1p-112 + 0x1p-130);
}

TEST_CASE("amx kernels on the tile model pass the first-use self-check", "[gemm][amx]") {
  for (auto [k, ops] : {std::pair{&kModelBf16, gemm::Operands::bf16}, std::pair{&kModelF16, gemm::Operands::f16}}) {
    const int64_t calls = model_calls();
    CHECK(gemm::self_check(*k, ops));
    CHECK(model_calls() > calls);  // the check's product ran tiles on the model, not only the fallback
  }
}

TEST_CASE("matmul and linear of f16/bf16 tensors take the AMX kernels (on the tile model) and match f64",
          "[gemm][amx][numerics]") {
  for (DType dt : {f16, bf16}) {
    INFO(dtype_name(dt));
    gemm::OverrideKernel use(dt == f16 ? gemm::Operands::f16 : gemm::Operands::bf16,
                             dt == f16 ? kModelF16 : kModelBf16);
    const int64_t calls = model_calls();
    Generator g(5);
    const int64_t M = 45, K = 70, N = 37;
    const Tensor a = randn({M, K}, {dt}, &g), w = randn({N, K}, {dt}, &g), bias = randn({N}, {dt}, &g);
    const Tensor y = linear(a, w, bias), z = matmul(a, w.transpose(0, 1));
    CHECK(model_calls() > calls);
    const std::vector<double> av = a.to_vector<double>(), wv = w.to_vector<double>(), bv = bias.to_vector<double>();
    const std::vector<double> yv = y.to_vector<double>(), zv = z.to_vector<double>();
    const double u = dt == f16 ? 0x1p-11 : 0x1p-8;
    int64_t bad = 0;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double ref = 0, mag = 0;
        for (int64_t k = 0; k < K; ++k) ref += av[i * K + k] * wv[j * K + k], mag += std::fabs(av[i * K + k] * wv[j * K + k]);
        const double acc = (4 * K + 3) * 0x1p-24 * (mag + std::fabs(bv[j]));
        if (!(std::fabs(zv[i * N + j] - ref) <= u * std::fabs(ref) + acc)) ++bad;
        if (!(std::fabs(yv[i * N + j] - ref - bv[j]) <= u * std::fabs(ref + bv[j]) + acc)) ++bad;
      }
    CHECK(bad == 0);
  }
}

namespace {

// Panels for the conversion test: ordinary bf16/f16 values, and every kind the split must
// refuse or treat specially (zeros of both signs, values just at and below 2^-56, f16
// subnormals, non-bf16/non-f16 values, inf, NaN, f32 max), at random places.
std::vector<float> odd_panel(int64_t n, uint32_t seed, bool f16) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  std::uniform_int_distribution<int> pick(0, 15), which(0, 13);
  const float special[14] = {0.0f,     -0.0f,     0x1p-56f, -0x1p-56f, 0x1.fffffep-57f, 0x1p-24f,        3 * 0x1p-24f,
                             INFINITY, -INFINITY, NAN,      3.4e38f,   65504.0f,        1.0f + 0x1p-12f, 70000.0f};
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) {
    if (pick(g) < 3) {
      x = special[which(g)];
    } else {
      x = u(g);
      if (pick(g) < 14)  // most values of the format, some not
        x = f16 ? static_cast<float>(half(x)) : static_cast<float>(bfloat16(x));
    }
  }
  return v;
}

template <int Planes>
void same_conversions(const gemm::Kernel<float>& k) {
  for (int64_t kc : {1, 7, 16, 31, 32, 33, 64, 100, 256}) {
    for (uint32_t seed = 0; seed < 12; ++seed) {
      INFO("planes " << Planes << " kc " << kc << " seed " << seed);
      const bool clean = seed % 3 == 0;  // some panels all exact, so a true verdict is compared too
      std::vector<float> a = odd_panel(amx::MR * kc, seed, Planes == 2), b = odd_panel(amx::NR * kc, seed + 99, Planes == 2);
      if (clean)
        for (std::vector<float>* v : {&a, &b})
          for (float& x : *v) {
            bool ok = true;
            uint16_t p[2] = {};
            amx::split<Planes>(x, p, ok);
            if (!ok) x = 1.0f;
          }
      const int64_t bytes = amx::panel_bytes<Planes>(kc, amx::MR);
      std::vector<unsigned char> want(static_cast<size_t>(bytes), 0xAB), got(static_cast<size_t>(bytes), 0xCD);
      const bool want_a = amx::repack_a<Planes>(a.data(), kc, want.data());
      const bool got_a = k.repack_a(a.data(), kc, got.data());
      CHECK(want_a == got_a);
      CHECK(want_a == clean);
      CHECK(want == got);
      std::fill(want.begin(), want.end(), 0xAB), std::fill(got.begin(), got.end(), 0xCD);
      const bool want_b = amx::repack_b<Planes>(b.data(), kc, want.data());
      const bool got_b = k.repack_b(b.data(), kc, got.data());
      CHECK(want_b == got_b);
      CHECK(want_b == clean);
      CHECK(want == got);
    }
  }
}

}  // namespace

TEST_CASE("amx panel conversions: the AVX-512 ones give amx.h's bytes and verdicts", "[gemm][amx]") {
  if (static_cast<int>(best_isa()) < static_cast<int>(Isa::avx512) || gemm::amx_bf16_kernel().repack_a == nullptr)
    HG_SKIP("the AMX kernels' AVX-512 panel conversions need AVX-512 F/BW/VL/DQ; this CPU has " + describe());
  same_conversions<1>(gemm::amx_bf16_kernel());
  same_conversions<2>(gemm::amx_f16_kernel());
}
