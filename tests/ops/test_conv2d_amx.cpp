// The direct AMX convolution (ops/cpu/conv2d_amx.h, conv2d_amx_wgrad.h): forward, stride-1
// input gradient and weight gradient of
// bf16 and f16 (hi + lo planes) against f64 loops with the f32-accumulation bound, on the
// scalar tile model (every CPU), on the tile unit (AMX hosts) and with the tile products on
// vdpbf16ps (AVX512_BF16 hosts; each skipped elsewhere, naming what is missing); results independent of the thread count; operands the unit would not
// multiply exactly (inf, NaN, tiny bf16) refused before anything is written; the AVX-512 row
// conversions equal the scalar ones on every 16-bit pattern.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>
#include <vector>

#include "framework/cpu/isa.h"
#include "halfgrad.h"
#include "ops/conv2d_kernels.h"
#include "ops/cpu/conv2d_amx.h"
#include "ops/cpu/conv2d_amx_wgrad.h"
#include "ops/cpu/gemm/amx_dpbf16.h"
#include "ops/cpu/gemm/amx_model.h"
#include "tests/skip.h"
#include "tests/thread_count.h"

using namespace hg;
using hg::cpu::amx_conv::Sizes;
using hg::cpu::gemm::amx::ModelTiles;

namespace {

// x [N, H, W, C], w [K, R, S, C], padding (ph, pw), row dilation dh; unit strides.
Sizes sizes(int64_t N, int64_t H, int64_t W, int64_t C, int64_t K, int64_t R, int64_t S, int64_t ph, int64_t pw,
            int64_t dh) {
  return {N, H, W, C, K, R, S, H + 2 * ph - dh * (R - 1), W + 2 * pw - (S - 1), ph, pw, dh};
}

const Sizes kShapes[] = {
    sizes(2, 9, 11, 5, 20, 3, 3, 1, 1, 1),   // odd channels (partial k steps), 16 + 4 filters: both block shapes
    sizes(1, 6, 40, 16, 16, 3, 3, 1, 1, 1),  // 48 values per kernel row: one full, one half step
    sizes(2, 7, 18, 32, 33, 3, 3, 2, 1, 2),  // row dilation, padding past the kernel's reach, 33 filters
    sizes(1, 5, 19, 64, 32, 1, 1, 0, 0, 1),  // 1x1
    sizes(3, 4, 5, 8, 17, 3, 3, 1, 1, 1),    // rows of 5: a 16-pixel tile spans rows and images
};

template <class T>
std::vector<T> values(int64_t n, uint64_t seed, double scale) {
  std::vector<T> v(static_cast<size_t>(n));
  uint64_t s = seed;
  for (T& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    // Spread over 8 binades, so that sums round and their order shows in the bits.
    x = store<T>(std::ldexp(scale * (static_cast<double>(s >> 40) / 16777216.0 - 0.5), -static_cast<int>((s >> 20) & 7)));
  }
  return v;
}

// Calls f(y index, x index, w index) for every product of the convolution (its taps that
// land inside the image).
template <class F>
void each_product(const Sizes& s, F f) {
  for (int64_t n = 0; n < s.N; ++n)
    for (int64_t p = 0; p < s.P; ++p)
      for (int64_t q = 0; q < s.Q; ++q)
        for (int64_t r = 0; r < s.R; ++r)
          for (int64_t t = 0; t < s.S; ++t) {
            const int64_t h = p - s.ph + r * s.dh, v = q - s.pw + t;
            if (h < 0 || h >= s.H || v < 0 || v >= s.W) continue;
            for (int64_t k = 0; k < s.K; ++k)
              for (int64_t c = 0; c < s.C; ++c)
                f(((n * s.P + p) * s.Q + q) * s.K + k, ((n * s.H + h) * s.W + v) * s.C + c,
                  ((k * s.R + r) * s.S + t) * s.C + c);
          }
}

// got against the f64 sums ref (with sum |products| mag) of up to `terms` products each:
// |got - ref| <= u |ref| + (4 terms + 2) 2^-24 mag (+ f16's subnormal step).
template <class T>
void check_bound(const std::vector<double>& ref, const std::vector<double>& mag, const std::vector<T>& got,
                 int64_t terms) {
  const double u = std::is_same_v<T, half> ? 0x1p-11 : 0x1p-8, tiny = std::is_same_v<T, half> ? 0x1p-25 : 0.0;
  int64_t bad = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    const double g = load(got[i]), bound = u * std::fabs(ref[i]) + (4.0 * terms + 2) * 0x1p-24 * mag[i] + tiny;
    if (!(std::fabs(g - ref[i]) <= bound) && bad++ < 5) {
      INFO("element " << i << " got " << g << " want " << ref[i] << " bound " << bound);
      CHECK(false);
    }
  }
  CHECK(bad == 0);
}

// Forward (dgrad = false: y from x) or input gradient (gx from gy) against f64 loops.
template <class T>
void check_against_f64(const Sizes& s, bool dgrad, const std::vector<T>& in, const std::vector<T>& w,
                       const std::vector<float>& bias, const std::vector<T>& got) {
  const int64_t F = dgrad ? s.C : s.K;
  std::vector<double> ref(got.size()), mag(got.size());
  for (size_t i = 0; i < ref.size(); ++i) ref[i] = bias[i % static_cast<size_t>(F)], mag[i] = std::fabs(ref[i]);
  each_product(s, [&](int64_t yi, int64_t xi, int64_t wi) {
    const double prod = static_cast<double>(load(in[static_cast<size_t>(dgrad ? yi : xi)])) * load(w[static_cast<size_t>(wi)]);
    const size_t o = static_cast<size_t>(dgrad ? xi : yi);
    ref[o] += prod, mag[o] += std::fabs(prod);
  });
  check_bound(ref, mag, got, s.R * s.S * (dgrad ? s.K : s.C));
}

// DotTiles' tile products one at a time, without its register-resident blocks (conv_rows,
// wgrad_rows): the kernels' tile-by-tile path on vdpbf16ps.
struct DotByTile {
  using D = cpu::gemm::amx::DotTiles;
  static void configure(const cpu::gemm::amx::TileConfig& c) { D::configure(c); }
  static void release() { D::release(); }
  template <int T>
  static void zero() { D::zero<T>(); }
  template <int T>
  static void load(const void* p, int64_t stride) { D::load<T>(p, stride); }
  template <int T>
  static void store(void* p, int64_t stride) { D::store<T>(p, stride); }
  static void limit_pairs(int pairs) { D::limit_pairs(pairs); }
  template <int C, int A, int B>
  static void dot() { D::dot<C, A, B>(); }
};
static_assert(cpu::amx_conv::RowsUnit<cpu::gemm::amx::DotTiles> && !cpu::amx_conv::RowsUnit<DotByTile>);

// The entry points on a unit: run_checked's stand-ins for a `Tiles` type.
struct Hardware {
  static constexpr cpu::amx_conv::Unit unit = cpu::amx_conv::Unit::amx;
};
struct DotUnit {
  static constexpr cpu::amx_conv::Unit unit = cpu::amx_conv::Unit::dpbf16;
};
template <class Tiles>
constexpr bool is_unit = requires { Tiles::unit; };

// Runs forward (or dgrad) with tiles `Tiles` (or the unit) and checks it; returns the result.
template <class Tiles, class T>
std::vector<T> run_checked(const Sizes& s, bool dgrad, int threads, uint64_t seed,
                           int64_t group_bytes = cpu::amx_conv::kGroupBytes) {
  const int64_t in_n = dgrad ? s.N * s.P * s.Q * s.K : s.N * s.H * s.W * s.C;
  const int64_t out_n = dgrad ? s.N * s.H * s.W * s.C : s.N * s.P * s.Q * s.K, F = dgrad ? s.C : s.K;
  const std::vector<T> in = values<T>(in_n, seed, 8.0), w = values<T>(s.K * s.R * s.S * s.C, seed + 1, 0.5);
  std::vector<float> bias(static_cast<size_t>(F));
  for (int64_t f = 0; f < F; ++f) bias[static_cast<size_t>(f)] = 0.125f * static_cast<float>(f % 5);
  std::vector<T> out(static_cast<size_t>(out_n), store<T>(NAN));
  bool ran;
  if constexpr (is_unit<Tiles>)
    ran = dgrad ? cpu::amx_conv::dgrad<T>(Tiles::unit, s, in.data(), w.data(), bias.data(), out.data(), threads)
                : cpu::amx_conv::forward<T>(Tiles::unit, s, in.data(), w.data(), bias.data(), out.data(), threads);
  else
    ran = dgrad ? cpu::amx_conv::dgrad_on<Tiles>(s, in.data(), w.data(), bias.data(), out.data(), threads, group_bytes)
                : cpu::amx_conv::forward_on<Tiles>(s, in.data(), w.data(), bias.data(), out.data(), threads, group_bytes);
  REQUIRE(ran);
  check_against_f64(s, dgrad, in, w, bias, out);
  return out;
}

// The weight gradient gw [K, R, S, C] from gy and x against f64 loops, with tiles `Tiles`
// (or the unit); returns it.
template <class Tiles, class T>
std::vector<T> wgrad_checked(const Sizes& s, int threads, uint64_t seed,
                             int64_t group_bytes = cpu::amx_conv::kGroupBytes) {
  const std::vector<T> gy = values<T>(s.N * s.P * s.Q * s.K, seed, 4.0), x = values<T>(s.N * s.H * s.W * s.C, seed + 1, 4.0);
  std::vector<T> gw(static_cast<size_t>(s.K * s.R * s.S * s.C), store<T>(NAN));
  bool ran;
  if constexpr (is_unit<Tiles>)
    ran = cpu::amx_conv::wgrad<T>(Tiles::unit, s, gy.data(), x.data(), gw.data(), threads);
  else
    ran = cpu::amx_conv::wgrad_on<Tiles>(s, gy.data(), x.data(), gw.data(), threads, group_bytes);
  REQUIRE(ran);
  std::vector<double> ref(gw.size(), 0.0), mag(gw.size(), 0.0);
  each_product(s, [&](int64_t yi, int64_t xi, int64_t wi) {
    const double prod = static_cast<double>(load(gy[static_cast<size_t>(yi)])) * load(x[static_cast<size_t>(xi)]);
    ref[static_cast<size_t>(wi)] += prod, mag[static_cast<size_t>(wi)] += std::fabs(prod);
  });
  check_bound(ref, mag, gw, s.N * s.P * s.Q);
  return gw;
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Forward and input gradient on `shapes`, weight gradient on a few, each against f64 at 1 and 2
// threads, the two bitwise equal; seeds from `seed`.
template <class Tiles, class T>
void all_passes_both_thread_counts(const std::vector<Sizes>& shapes, uint64_t seed) {
  for (const Sizes& s : shapes)
    for (bool dgrad : {false, true}) {
      if (dgrad && ((s.R - 1) * s.dh < s.ph || s.S - 1 < s.pw)) continue;
      INFO("x " << s.N << "x" << s.H << "x" << s.W << "x" << s.C << " filters " << s.K << (dgrad ? " dgrad" : ""));
      const std::vector<T> one = run_checked<Tiles, T>(s, dgrad, 1, seed);
      const std::vector<T> two = run_checked<Tiles, T>(s, dgrad, 2, seed);
      CHECK(same_bits(one, two));
    }
  for (const Sizes& s : {kShapes[0], kShapes[1], kShapes[2], kShapes[4], sizes(4, 20, 40, 16, 16, 3, 3, 1, 1, 1)}) {
    INFO("weight gradient, x " << s.N << "x" << s.H << "x" << s.W << "x" << s.C << " filters " << s.K);
    const std::vector<T> one = wgrad_checked<Tiles, T>(s, 1, seed + 2);
    const std::vector<T> two = wgrad_checked<Tiles, T>(s, 2, seed + 2);
    CHECK(same_bits(one, two));
  }
}

}  // namespace

TEMPLATE_TEST_CASE("conv2d on AMX tiles (scalar model): forward and input gradient within the f32 bound",
                   "[conv2d][amx]", bfloat16, half) {
  for (const Sizes& s : kShapes)
    for (bool dgrad : {false, true}) {
      if (dgrad && ((s.R - 1) * s.dh < s.ph || s.S - 1 < s.pw)) continue;  // padding past the kernel: engine only
      INFO("x " << s.N << "x" << s.H << "x" << s.W << "x" << s.C << " filters " << s.K << " kernel " << s.R << "x"
                << s.S << " pad " << s.ph << "," << s.pw << " dil " << s.dh << (dgrad ? " input gradient" : " forward"));
      const std::vector<TestType> one = run_checked<ModelTiles, TestType>(s, dgrad, 1, 7);
      const std::vector<TestType> two = run_checked<ModelTiles, TestType>(s, dgrad, 2, 7);
      CHECK(same_bits(one, two));
    }
}

TEMPLATE_TEST_CASE("conv2d on AMX tiles (scalar model): weight gradient within the f32 bound, any thread count",
                   "[conv2d][amx]", bfloat16, half) {
  // 16 and 20/33 filters: the 1 x 4 and 2 x 2 tile shapes; a shape with more than one chunk.
  const Sizes big = sizes(4, 20, 40, 16, 16, 3, 3, 1, 1, 1);
  for (const Sizes& s : {kShapes[0], kShapes[1], kShapes[2], kShapes[4], big}) {
    INFO("x " << s.N << "x" << s.H << "x" << s.W << "x" << s.C << " filters " << s.K << " dil " << s.dh);
    const std::vector<TestType> one = wgrad_checked<ModelTiles, TestType>(s, 1, 5);
    const std::vector<TestType> two = wgrad_checked<ModelTiles, TestType>(s, 2, 5);
    CHECK(same_bits(one, two));
  }
  CHECK(cpu::amx_conv::wgrad_chunk_steps(4 * 27, 16 * 144) < 4 * 27);  // `big` really is in several chunks
}

// Every pass stages the batch a group of images at a time (as many as fit in a byte budget):
// one image per group must give the bits of the whole batch at once. The weight gradient
// also reduces a group at a time, with chunks of the reduction cut by a group's end (27 and
// 26 steps an image, chunks of 32); images without top padding (whose neighbour's first row
// is real data).
template <class Tiles, class T>
void grouping_keeps_bits(uint64_t seed) {
  const Sizes unpadded = sizes(3, 6, 20, 16, 24, 3, 3, 0, 1, 1);
  for (const Sizes& s : {kShapes[0], kShapes[2], kShapes[4], sizes(4, 20, 40, 16, 16, 3, 3, 1, 1, 1), unpadded}) {
    INFO("x " << s.N << "x" << s.H << "x" << s.W << "x" << s.C << " filters " << s.K << " pad " << s.ph);
    const std::vector<T> whole = wgrad_checked<Tiles, T>(s, 2, seed, int64_t{1} << 40);
    CHECK(same_bits(whole, wgrad_checked<Tiles, T>(s, 2, seed, 1)));
    CHECK(same_bits(whole, wgrad_checked<Tiles, T>(s, 1, seed, 1)));
    for (bool dgrad : {false, true}) {
      if (dgrad && ((s.R - 1) * s.dh < s.ph || s.S - 1 < s.pw)) continue;
      const std::vector<T> batch = run_checked<Tiles, T>(s, dgrad, 2, seed, int64_t{1} << 40);
      CHECK(same_bits(batch, run_checked<Tiles, T>(s, dgrad, 2, seed, 1)));
      CHECK(same_bits(batch, run_checked<Tiles, T>(s, dgrad, 1, seed, 1)));
    }
  }
}

TEMPLATE_TEST_CASE("conv2d on AMX tiles (scalar model): every pass a group of images at a time, the same bits",
                   "[conv2d][amx]", bfloat16, half) {
  grouping_keeps_bits<ModelTiles, TestType>(9);
  // A value refused in the last image, met after the first groups are reduced: nothing written.
  const Sizes s = sizes(3, 6, 20, 16, 24, 3, 3, 1, 1, 1);
  std::vector<TestType> x = values<TestType>(s.N * s.H * s.W * s.C, 3, 4.0);
  const std::vector<TestType> gy = values<TestType>(s.N * s.P * s.Q * s.K, 4, 4.0);
  x[x.size() - 5] = store<TestType>(std::numeric_limits<double>::infinity());
  std::vector<TestType> gw(static_cast<size_t>(s.K * s.R * s.S * s.C), store<TestType>(-3.0));
  CHECK_FALSE(cpu::amx_conv::wgrad_on<ModelTiles>(s, gy.data(), x.data(), gw.data(), 2, 1));
  CHECK(std::all_of(gw.begin(), gw.end(), [](TestType v) { return load(v) == -3.0; }));
  // The forward and the input gradient refuse it too, the first images' outputs written (the
  // caller computes them all again on another path).
  const std::vector<TestType> w = values<TestType>(s.K * s.R * s.S * s.C, 5, 0.5);
  std::vector<TestType> y(gy.size()), gx(x.size());
  CHECK_FALSE(cpu::amx_conv::forward_on<ModelTiles>(s, x.data(), w.data(), nullptr, y.data(), 2, 1));
  std::vector<TestType> gyb = gy;
  gyb[gyb.size() - 3] = store<TestType>(std::numeric_limits<double>::quiet_NaN());
  CHECK_FALSE(cpu::amx_conv::dgrad_on<ModelTiles>(s, gyb.data(), w.data(), nullptr, gx.data(), 2, 1));
}

TEMPLATE_TEST_CASE("conv2d on AMX tiles: operands the unit would not multiply exactly are refused, nothing written",
                   "[conv2d][amx]", bfloat16, half) {
  const Sizes s = sizes(1, 6, 20, 16, 16, 3, 3, 1, 1, 1);
  std::vector<TestType> x = values<TestType>(s.N * s.H * s.W * s.C, 3, 4.0);
  std::vector<TestType> w = values<TestType>(s.K * s.R * s.S * s.C, 4, 0.5);
  const double tiny = std::is_same_v<TestType, bfloat16> ? 0x1p-60 : 0.0;  // every finite f16 is exact
  for (double bad : {std::numeric_limits<double>::infinity(), std::nan(""), tiny}) {
    if (bad == 0.0) continue;
    for (bool in_weights : {false, true}) {
      INFO("value " << bad << (in_weights ? " in the weights" : " in the image"));
      std::vector<TestType> xb = x, wb = w;
      (in_weights ? wb[37] : xb[555]) = store<TestType>(bad);
      std::vector<TestType> y(static_cast<size_t>(s.N * s.P * s.Q * s.K), store<TestType>(-3.0));
      CHECK_FALSE(cpu::amx_conv::forward_on<ModelTiles>(s, xb.data(), wb.data(), nullptr, y.data(), 1));
      CHECK(std::all_of(y.begin(), y.end(), [](TestType v) { return load(v) == -3.0; }));
      if (!in_weights) {  // the weight gradient refuses the image, and gy in the forward's output shape
        std::vector<TestType> gw(w.size(), store<TestType>(-3.0));
        CHECK_FALSE(cpu::amx_conv::wgrad_on<ModelTiles>(s, y.data(), xb.data(), gw.data(), 1));
        std::vector<TestType> gy(y.size(), store<TestType>(0.5));
        gy[77] = store<TestType>(bad);
        CHECK_FALSE(cpu::amx_conv::wgrad_on<ModelTiles>(s, gy.data(), x.data(), gw.data(), 1));
        CHECK(std::all_of(gw.begin(), gw.end(), [](TestType v) { return load(v) == -3.0; }));
      }
      // The public op then takes the exact path: the non-finite value reaches exactly the
      // outputs whose sums contain it.
      if (!std::isfinite(bad)) {
        const Tensor xt = from_data(xb, {s.N, s.H, s.W, s.C}), wt = from_data(wb, {s.K, s.R, s.S, s.C});
        Tensor yt = empty({s.N, s.P, s.Q, s.K}, {xt.dtype()});
        conv2d_forward_stub(Device::cpu(), xt, wt, Tensor(), yt, Conv2dOptions{{1, 1}, {1, 1}, {1, 1}, 1});
        const std::vector<double> got = yt.to_vector<double>();
        int64_t nonfinite = 0, other_filters = 0;
        for (size_t i = 0; i < got.size(); ++i) {
          nonfinite += !std::isfinite(got[i]);
          other_filters += !std::isfinite(got[i]) && i % static_cast<size_t>(s.K) != 0;
        }
        if (in_weights) {  // weight 37 is filter 0's: that filter's interior outputs at least, no other filter
          CHECK(other_filters == 0);
          CHECK(nonfinite >= (s.P - 2) * (s.Q - 2));
        } else {  // pixel 555's 3x3 neighbourhood, every filter
          CHECK(nonfinite == 9 * s.K);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("conv2d on AMX tiles: the tile unit, within the f32 bound, at 1 and 2 threads alike", "[conv2d][amx]",
                   bfloat16, half) {
  using hg::cpu::Isa;
  if (hg::cpu::best_isa() != Isa::amx)
    HG_SKIP("the tile unit itself needs AMX-BF16 granted by the OS; this CPU has " + hg::cpu::describe());
  hg::cpu::ForceIsa amx(Isa::amx);
  REQUIRE(cpu::amx_conv::unit() == cpu::amx_conv::Unit::amx);  // the first-use self-check passed
  all_passes_both_thread_counts<Hardware, TestType>(std::vector<Sizes>(std::begin(kShapes), std::end(kShapes)), 11);
}

// The same kernels with their tile products on vdpbf16ps (gemm/amx_dpbf16.h): every CPU with
// AVX512_BF16 runs them (an AMX CPU too, though there the tile unit is chosen); the entry
// points run them where unit() picks them (the instruction out-runs the f32 FMA).
TEST_CASE("conv2d on AMX tiles: the tile products on AVX512_BF16, within the f32 bound, at 1 and 2 threads alike",
          "[conv2d][amx]") {
  using hg::cpu::Isa;
  if (!hg::cpu::features().avx512_bf16 || hg::cpu::best_isa() == Isa::avx2)
    HG_SKIP("vdpbf16ps needs AVX-512 with AVX512_BF16; this CPU has " + hg::cpu::describe());
  using Dot = cpu::gemm::amx::DotTiles;
  // kShapes' partial steps read 8, 12 and 16 of a step's pairs; 2 channels of a 3x3 kernel, 3.
  std::vector<Sizes> shapes(std::begin(kShapes), std::end(kShapes));
  shapes.push_back(sizes(2, 6, 20, 2, 16, 3, 3, 1, 1, 1));
  // Even filter groups and output rows of 13 or more: blocks over the output pixels (dense_blocks),
  // crossing row ends at every offset (rows of 15: 135 pixels, the last block of 7; the input
  // gradient's 20 filters, 16 + 4), and with row dilation (rows of 14).
  shapes.push_back(sizes(2, 9, 15, 20, 32, 3, 3, 1, 1, 1));
  shapes.push_back(sizes(1, 9, 14, 8, 64, 3, 3, 2, 1, 2));
  // Rows of 8: a weight gradient step of 32 pixels crosses three row ends (the forward keeps the
  // padded grid below 13 pixels a row).
  shapes.push_back(sizes(2, 8, 8, 16, 32, 3, 3, 1, 1, 1));
  // 1x1 with 8 channels and 24 filters: the forward's two groups (16 + 8) over output pixels, the
  // input gradient's one group of 8 over the grid.
  shapes.push_back(sizes(2, 6, 13, 8, 24, 1, 1, 0, 0, 1));
  all_passes_both_thread_counts<Dot, bfloat16>(shapes, 17);
  grouping_keeps_bits<Dot, bfloat16>(19);
  // Its sums kept in registers (conv_rows, wgrad_rows) give the bits of the same products one
  // 16 x 16 tile at a time, their sums stored between products (kShapes[0]: 20 filters, 4 + 1
  // groups and partial steps; a 16 x 16 image of 64 filters: groups of four). The weight
  // gradient's steps over output pixels (Q even) add the products of the padded grid's steps
  // without its zero ones, in the same order: the same bits while the reduction is one chunk
  // (every shape here; the chunks of sizes(4, 20, 40, ...) above are checked against the bound).
  shapes.push_back(sizes(2, 16, 16, 24, 64, 3, 3, 1, 1, 1));
  for (const Sizes& s : shapes) {
    INFO("x " << s.N << "x" << s.H << "x" << s.W << "x" << s.C << " filters " << s.K);
    CHECK(same_bits(run_checked<Dot, bfloat16>(s, false, 2, 23), run_checked<DotByTile, bfloat16>(s, false, 2, 23)));
    if ((s.R - 1) * s.dh >= s.ph && s.S - 1 >= s.pw)
      CHECK(same_bits(run_checked<Dot, bfloat16>(s, true, 2, 23), run_checked<DotByTile, bfloat16>(s, true, 2, 23)));
    CHECK(same_bits(wgrad_checked<Dot, bfloat16>(s, 2, 29), wgrad_checked<DotByTile, bfloat16>(s, 2, 29)));
  }
  // Through the entry points where the CPU picks this unit (its self-check passed); f16 is not
  // multiplied on it (four plane products would lose to the f32 tiles).
  hg::cpu::ForceIsa avx512(Isa::avx512);
  if (cpu::amx_conv::unit() == cpu::amx_conv::Unit::dpbf16) {
    const Sizes& s = kShapes[0];
    const std::vector<bfloat16> via_unit = run_checked<DotUnit, bfloat16>(s, false, 2, 17);
    CHECK(same_bits(via_unit, run_checked<Dot, bfloat16>(s, false, 1, 17)));
    std::vector<half> y(static_cast<size_t>(s.N * s.P * s.Q * s.K));
    const std::vector<half> xh(static_cast<size_t>(s.N * s.H * s.W * s.C), half(1.0f));
    const std::vector<half> wh(static_cast<size_t>(s.K * s.R * s.S * s.C), half(1.0f));
    CHECK_FALSE(cpu::amx_conv::forward<half>(cpu::amx_conv::Unit::dpbf16, s, xh.data(), wh.data(), nullptr, y.data(), 1));
  }
}

TEMPLATE_TEST_CASE("conv2d on AMX tiles: the AVX-512 row conversions give the scalar ones' planes and verdicts",
                   "[conv2d][amx]", bfloat16, half) {
  const auto& f = hg::cpu::features();
  if (!(f.avx512bw && f.avx512vl))
    HG_SKIP("the AVX-512 row conversions need AVX-512 BW/VL; this CPU has " + hg::cpu::describe());
  std::vector<TestType> all(65536);
  for (uint32_t i = 0; i < 65536; ++i) all[i].bits = static_cast<uint16_t>(i);
  int64_t refused = 0, differ = 0;
  for (uint32_t i = 0; i < 65536; ++i) {  // one value at a time: the verdicts
    uint16_t a[2] = {}, b[2] = {};
    uint16_t* const da[2] = {a, a + 1};
    uint16_t* const db[2] = {b, b + 1};
    const bool va = cpu::amx_conv::to_planes(&all[i], 1, da), vb = cpu::amx_conv::to_planes_scalar(&all[i], 1, db);
    refused += !vb;
    differ += va != vb || (vb && std::memcmp(a, b, sizeof a) != 0);
  }
  CHECK(differ == 0);
  CHECK(refused > 0);  // inf and NaN (and, bf16, the values below 2^-56) are refused
  // Runs of every length 1..70 at every offset mod 4: the tails.
  std::vector<TestType> safe, unsafe;  // every pattern, by the scalar verdict
  for (uint32_t i = 0; i < 65536; ++i) {
    uint16_t p[2];
    uint16_t* const d[2] = {p, p + 1};
    (cpu::amx_conv::to_planes_scalar(&all[i], 1, d) ? safe : unsafe).push_back(all[i]);
  }
  for (int64_t len = 1; len <= 70; ++len)
    for (int64_t off = 0; off < 4; ++off) {
      std::vector<uint16_t> a(2 * 80, 7), b(2 * 80, 7);
      uint16_t* const da[2] = {a.data(), a.data() + 80};
      uint16_t* const db[2] = {b.data(), b.data() + 80};
      const TestType* src = safe.data() + 1000 + off * 13;
      CHECK(cpu::amx_conv::to_planes(src, len, da));
      CHECK(cpu::amx_conv::to_planes_scalar(src, len, db));
      CHECK(a == b);  // the planes and the untouched words past the run
    }
  // A refused value anywhere in a run (whole 32- or 16-value steps and the tail alike) refuses it.
  int64_t missed = 0;
  for (int64_t len : {16, 33, 64, 70})
    for (int64_t pos : {int64_t{0}, int64_t{15}, std::min<int64_t>(31, len - 1), len - 1})
      for (size_t u = 0; u < unsafe.size(); u += 97) {
        std::vector<TestType> run(safe.begin() + 2000, safe.begin() + 2000 + len);
        run[static_cast<size_t>(pos)] = unsafe[u];
        std::vector<uint16_t> a(2 * 80);
        uint16_t* const da[2] = {a.data(), a.data() + 80};
        missed += cpu::amx_conv::to_planes(run.data(), len, da);
      }
  CHECK(missed == 0);
}

TEST_CASE("conv2d on AMX tiles: image pairs and the gy transposition give the plain loops' words", "[conv2d][amx]") {
  std::vector<uint16_t> z(3000);
  for (size_t i = 0; i < z.size(); ++i) z[i] = static_cast<uint16_t>(i * 40503u + 17u);
  for (int64_t C : {1, 4, 16, 32, 48})
    for (int64_t count : {0, 1, 15, 16, 33, 100, 1000})
      for (int64_t avail : {count, count + C - 1, count + C + 40}) {
        INFO("C " << C << " count " << count << " avail " << avail);
        std::vector<uint32_t> v(static_cast<size_t>(count) + 8, 0xDEADBEEFu);
        cpu::amx_conv::interleave_pairs(z.data(), count, avail, C, v.data());
        int64_t bad = 0;
        for (int64_t t = 0; t < count; ++t)
          bad += v[static_cast<size_t>(t)] != (z[static_cast<size_t>(t)] |
                                               (t + C < avail ? uint32_t(z[static_cast<size_t>(t + C)]) << 16 : 0u));
        CHECK(bad == 0);
        CHECK(v[static_cast<size_t>(count)] == 0xDEADBEEFu);  // nothing written past count
      }
  for (int64_t rows : {1, 16, 32, 37})
    for (int64_t cols : {1, 16, 20, 48}) {
      INFO(rows << " x " << cols);
      std::vector<uint16_t> t(static_cast<size_t>(cols * 40), 0);
      cpu::amx_conv::transpose16(z.data(), rows, cols, cols + 3, t.data(), 40);
      int64_t bad = 0;
      for (int64_t i = 0; i < rows; ++i)
        for (int64_t j = 0; j < cols; ++j) bad += t[static_cast<size_t>(j * 40 + i)] != z[static_cast<size_t>(i * (cols + 3) + j)];
      CHECK(bad == 0);
    }
}
