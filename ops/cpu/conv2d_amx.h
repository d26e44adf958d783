// Direct convolution on the AMX tile unit for bf16 (and f16, as exact hi + lo bf16 planes):
// the tiles read the image itself, so nothing is packed per product. With unit column stride
// and dilation, a kernel row's taps of one output pixel are S*C consecutive values of the
// zero-padded NHWC image, and the next pixel's start C values later: an A tile (16 pixels x
// 32 of those values) is one TILELOADD from the image with a row stride of C values. Output
// pixels are numbered over the padded grid (m = p*Wp + q within an image), so 16 consecutive
// m are 16 equally spaced tile rows even across output rows; the m with q >= Q are computed
// and dropped. A run of S*C values not a multiple of 32 ends in a partial step whose extra
// values (the next pixel's) meet zero weights: exact, because the image is used only when
// every value is finite and not below AMX's exact range (amx::amx_safe); otherwise the
// caller takes another path. Written against amx.h's `Tiles`, so the model (amx_model.h)
// runs it on any CPU, and AVX512_BF16's vdpbf16ps (amx_dpbf16.h) runs its bf16 products on
// CPUs without AMX. The unit sums the products of one step in its own order: results are
// within the f32-accumulation bound of the exact sum, not bitwise the engine's.
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>
#include <vector>

#include "framework/dtype.h"
#include "ops/cpu/aligned.h"
#include "ops/cpu/gemm/amx.h"
#include "ops/cpu/gemm/engine.h"
#include "ops/cpu/loops.h"

namespace hg::cpu::amx_conv {

namespace amx = gemm::amx;
constexpr int64_t kTile = amx::kRows * amx::kK;  // bf16 values per operand tile (1 KiB)

// bf16 bits that AMX multiplies exactly (amx::amx_safe for a bf16 value): zero, or finite
// and at least 2^-56 in magnitude.
inline bool bf16_safe(uint16_t h) {
  const uint16_t mag = h & 0x7FFFu;
  return mag == 0 || (mag >= 0x2380u && mag < 0x7F80u);
}

template <class T>
constexpr int planes_of() {
  return std::is_same_v<T, bfloat16> ? 1 : 2;
}

// n values of T into `planes_of<T>()` rows of bf16 bits (bf16: its bits; f16: hi + lo, both
// exact, as amx::split); false when one is not a value the unit multiplies exactly (a bf16
// below 2^-56 or not finite; a non-finite f16). AVX-512 where the CPU has it (conv2d_amx.cpp).
template <class T>
bool to_planes(const T* src, int64_t n, uint16_t* const dst[2]);
template <>
bool to_planes<bfloat16>(const bfloat16* src, int64_t n, uint16_t* const dst[2]);
template <>
bool to_planes<half>(const half* src, int64_t n, uint16_t* const dst[2]);
// The same one value at a time (any CPU; the reference the AVX-512 rows are tested against).
template <class T>
bool to_planes_scalar(const T* src, int64_t n, uint16_t* const dst[2]);
template <>
bool to_planes_scalar<bfloat16>(const bfloat16* src, int64_t n, uint16_t* const dst[2]);
template <>
bool to_planes_scalar<half>(const half* src, int64_t n, uint16_t* const dst[2]);

// dst[j * ld_dst + i] = src[i * ld_src + j] for i < rows, j < cols (16-bit values; AVX2 blocks
// of 16 x 16).
void transpose16(const uint16_t* src, int64_t rows, int64_t cols, int64_t ld_src, uint16_t* dst, int64_t ld_dst);
// v[t] = z[t] | z[t + C] << 16 for t < count, z readable below avail (the high half zero
// where t + C >= avail).
void interleave_pairs(const uint16_t* z, int64_t count, int64_t avail, int64_t C, uint32_t* v);

// The zero-padded image the tiles read: `planes` planes of bf16 bits, each [N][Hp][Wp][C]
// followed by `slack` zeros (a tile row past the last pixel stays inside).
struct Image {
  aligned_vector<uint16_t> storage;  // 64-byte aligned: tile rows of 64 bytes stay in one line
  int64_t N = 0, Hp = 0, Wp = 0, C = 0, plane = 0;
  int planes = 1;
  const uint16_t* data(int p) const { return storage.data() + p * plane; }
};

// img = x [N, H, W, C] with `top` / `left` zero rows / columns before and as many after as
// make it Hp x Wp, in T's planes. False when a value is not one the unit multiplies exactly.
template <class T>
bool pad_image(Image& img, const T* x, int64_t N, int64_t H, int64_t W, int64_t C, int64_t top, int64_t left,
               int64_t Hp, int64_t Wp) {
  constexpr int P = planes_of<T>();
  img.N = N, img.Hp = Hp, img.Wp = Wp, img.C = C, img.planes = P;
  const int64_t slack = 128 * C + 4 * Wp * C + 256;
  img.plane = N * Hp * Wp * C + slack;
  // Grown, never shrunk, and not cleared: every word is written below (values or padding).
  if (static_cast<int64_t>(img.storage.size()) < img.plane * P) img.storage.resize(static_cast<size_t>(img.plane * P));
  const int64_t rows = N * Hp, row = Wp * C, w_in = std::min(W, Wp - left);
  std::vector<char> bad(static_cast<size_t>(rows), 0);
  parallel_static(rows * row < (1 << 16) ? 1 : op_threads(), rows, [&](int64_t r) {
    const int64_t n = r / Hp, h = r % Hp - top;
    for (int p = 0; p < P; ++p) {
      uint16_t* d = img.storage.data() + p * img.plane + r * row;
      if (h < 0 || h >= H) {
        std::fill_n(d, row, uint16_t(0));
      } else {
        std::fill_n(d, left * C, uint16_t(0));
        std::fill(d + (left + w_in) * C, d + row, uint16_t(0));
      }
    }
    if (h < 0 || h >= H) return;
    const T* src = x + (n * H + h) * W * C;
    uint16_t* const dst[2] = {img.storage.data() + r * row + left * C,
                              P == 2 ? img.storage.data() + img.plane + r * row + left * C : nullptr};
    const bool ok = to_planes(src, w_in * C, dst);
    bad[static_cast<size_t>(r)] = !ok;
  });
  for (int p = 0; p < P; ++p) std::fill_n(img.storage.data() + p * img.plane + rows * row, slack, uint16_t(0));
  return std::find(bad.begin(), bad.end(), 1) == bad.end();
}

// A stride-1 convolution of an Image: out[n, p, q, f] = epilogue(sum over kernel rows r and
// values e < S*C of img[n, p + r*dh, q, e] * weight(f, r, e)), where img[.., q, e] is the
// value e past pixel q's first (tap e / C, channel e % C).
struct Plan {
  const Image* img = nullptr;
  int64_t P = 0, Q = 0, R = 1, S = 1, dh = 1;
  int64_t F = 0, groups = 0;  // filters; groups of 16 (the last zero-padded)
  int64_t steps = 0;          // k steps of 32 values per kernel row: ceil(S*C / 32)
  aligned_vector<uint16_t> wt;  // B tiles [group][r][step][plane], VNNI: row i = values (2i, 2i + 1)

  int64_t b_at(int64_t g, int64_t r, int64_t s, int p) const { return (((g * R + r) * steps + s) * img->planes + p) * kTile; }
  const uint16_t* b_tile(int64_t g, int64_t r, int64_t s, int p) const { return wt.data() + b_at(g, r, s, p); }
};

// Fills plan.wt from the weights converted to planes: value (f, r, e) of plane p is
// w[p][at(r, e) + f * fs] (at: an offset per kernel row and value; fs: the filter stride).
// Sizes (R, S, F, img) must be set.
template <class At>
void pack_weights(Plan& pl, const uint16_t* const w[2], int64_t fs, At&& at) {
  const int P = pl.img->planes;
  const int64_t SC = pl.S * pl.img->C;
  pl.groups = (pl.F + 15) / 16, pl.steps = (SC + amx::kK - 1) / amx::kK;
  pl.wt.assign(static_cast<size_t>(pl.groups * pl.R * pl.steps * P * kTile), 0);
  for (int64_t g = 0; g < pl.groups; ++g)
    for (int64_t r = 0; r < pl.R; ++r)
      for (int64_t s = 0; s < pl.steps; ++s)
        for (int p = 0; p < P; ++p) {
          uint16_t* tile = pl.wt.data() + pl.b_at(g, r, s, p);
          const int64_t nf = std::min<int64_t>(16, pl.F - g * 16);
          for (int64_t i = 0; i < amx::kK && s * amx::kK + i < SC; ++i) {
            const uint16_t* src = w[p] + at(r, s * amx::kK + i) + g * 16 * fs;
            uint16_t* d = tile + (i / 2) * 32 + i % 2;
            for (int64_t n = 0; n < nf; ++n) d[n * 2] = src[n * fs];
          }
        }
}

// MG x FG accumulator tiles (MG*16 pixels from flat pixel m0 by FG*16 filters from group g0)
// into c (row stride ldc floats). Tiles 0-3 accumulate (tile mg*FG + fg), 4-5 hold A (image
// rows), 6-7 B (weights). With f16 planes each step multiplies hi·hi, hi·lo, lo·hi, lo·lo.
template <class Tiles, int Planes, int MG, int FG>
void block(const Plan& pl, int64_t m0, int64_t g0, float* c, int64_t ldc) {
  static_assert(MG * FG == 4);
  const Image& im = *pl.img;
  const int64_t C = im.C, sa = C * 2, row = pl.dh * im.Wp * C, SC = pl.S * C;
  Tiles::template zero<0>(), Tiles::template zero<1>(), Tiles::template zero<2>(), Tiles::template zero<3>();
  for (int64_t r = 0; r < pl.R; ++r)
    for (int64_t s = 0; s < pl.steps; ++s) {
      const int64_t a_off = m0 * C + r * row + s * amx::kK;
      // A unit that multiplies pair by pair (amx_dpbf16.h) skips a partial step's zero pairs.
      if constexpr (requires { Tiles::limit_pairs(16); })
        Tiles::limit_pairs(static_cast<int>((std::min<int64_t>(amx::kK, SC - s * amx::kK) + 1) / 2));
      if constexpr (MG == 2) {  // 2 x 2: each A and B tile used twice
        constexpr int kSteps = Planes == 1 ? 1 : 4;
        constexpr int kPlaneA[4] = {0, 0, 1, 1}, kPlaneB[4] = {0, 1, 1, 0};
        for (int st = 0; st < kSteps; ++st) {
          // Loads interleaved with the products: a tile is reloaded only after the products
          // reading it, so each load waits for the earliest ones and overlaps the later.
          const bool new_a = st == 0 || kPlaneA[st] != kPlaneA[st - 1];
          const bool new_b = st == 0 || kPlaneB[st] != kPlaneB[st - 1];
          const uint16_t* a = im.data(kPlaneA[st]) + a_off;
          if (new_a) Tiles::template load<4>(a, sa);
          if (new_b) Tiles::template load<6>(pl.b_tile(g0, r, s, kPlaneB[st]), 64);
          Tiles::template dot<0, 4, 6>();
          if (new_b) Tiles::template load<7>(pl.b_tile(g0 + 1, r, s, kPlaneB[st]), 64);
          Tiles::template dot<1, 4, 7>();
          if (new_a) Tiles::template load<5>(a + 16 * C, sa);
          Tiles::template dot<2, 5, 6>(), Tiles::template dot<3, 5, 7>();
        }
      } else {  // 4 x 1: one B tile (per plane) for four pixel groups
        Tiles::template load<6>(pl.b_tile(g0, r, s, 0), 64);
        if constexpr (Planes == 2) Tiles::template load<7>(pl.b_tile(g0, r, s, 1), 64);
        auto group = [&]<int T, int A>() {
          Tiles::template load<A>(im.data(0) + a_off + T * 16 * C, sa);
          Tiles::template dot<T, A, 6>();
          if constexpr (Planes == 2) {
            Tiles::template dot<T, A, 7>();
            Tiles::template load<A>(im.data(1) + a_off + T * 16 * C, sa);
            Tiles::template dot<T, A, 6>(), Tiles::template dot<T, A, 7>();
          }
        };
        group.template operator()<0, 4>(), group.template operator()<1, 5>();
        group.template operator()<2, 4>(), group.template operator()<3, 5>();
      }
    }
  if constexpr (requires { Tiles::limit_pairs(16); }) Tiles::limit_pairs(16);
  const int64_t cs = ldc * 4;
  float* c0 = c + g0 * 16;
  if constexpr (MG == 2) {
    Tiles::template store<0>(c0, cs), Tiles::template store<1>(c0 + 16, cs);
    Tiles::template store<2>(c0 + 16 * ldc, cs), Tiles::template store<3>(c0 + 16 * ldc + 16, cs);
  } else {
    Tiles::template store<0>(c0, cs), Tiles::template store<1>(c0 + 16 * ldc, cs);
    Tiles::template store<2>(c0 + 32 * ldc, cs), Tiles::template store<3>(c0 + 48 * ldc, cs);
  }
}

// Pixels per block: 64 (four 16-pixel tiles, or two blocks of two).
constexpr int64_t kBlock = 64;

// A unit that multiplies pair by pair with its sums in registers (amx_dpbf16.h: conv_rows,
// and wgrad_rows for conv2d_amx_wgrad.h).
template <class Tiles>
concept RowsUnit = requires(const typename Tiles::ConvRows& k, const typename Tiles::WgradRows& w) {
  Tiles::template conv_rows<1, 1>(k);
  Tiles::template wgrad_rows<1, 1>(w);
};

// The block of kBlock pixels from flat pixel m0 by every filter group, on such a unit: FG
// groups (2 or 1: 32 or 16 filters) by NP pixels at a time (26 or 24 sums in registers), a
// block's tail of 64 mod NP pixels by a tile of its own. The same sums as block(), bit for bit.
// Not 4 groups by 6 pixels: it streams twice the weights per call (4 KB per k step, 144 KB for
// a 3x3 kernel at C = 128, well past L1) for the same 24 sums, and on Zen 5 (bench/conv_wgrad,
// w32 @128 bf16, interleaved) 12 x 2 ran the 3x3 forwards and input gradients 2-8% faster.
// 13 x 2 (4 x 13 + 12) rather than 12 x 2 (5 x 12 + 4): a tail of 4 pixels has 8 sums, too
// few to cover the instruction's latency; 1-3% faster again.
template <class Tiles>
void rows_blocks(const Plan& pl, int64_t m0, float* c, int64_t ldc) {
  const Image& im = *pl.img;
  using Rows = typename Tiles::ConvRows;
  const int64_t gb = pl.R * pl.steps * kTile;
  auto pass = [&]<int FG, int NP, int Tail>(int64_t g) {
    Rows k{im.data(0) + m0 * im.C, im.C, pl.dh * im.Wp * im.C, pl.R, pl.steps, pl.S * im.C,
           pl.wt.data() + pl.b_at(g, 0, 0, 0), gb, c + g * 16, ldc};
    int64_t i = 0;
    for (; i + NP <= kBlock; i += NP, k.a += NP * im.C, k.c += NP * ldc) Tiles::template conv_rows<NP, FG>(k);
    if constexpr (Tail > 0) Tiles::template conv_rows<Tail, FG>(k);
  };
  int64_t g = 0;
  for (; g + 2 <= pl.groups; g += 2) pass.template operator()<2, 13, kBlock % 13>(g);
  for (; g < pl.groups; ++g) pass.template operator()<1, 24, kBlock % 24>(g);
}

// Whether dense_blocks runs the plan: filter groups in pairs, output rows of 13+ pixels (a
// block of 13 crosses at most one row's end).
inline bool dense_fits(const Plan& pl) { return pl.groups % 2 == 0 && pl.Q >= 13; }
template <class Tiles, int NP, int FG, int... B>
constexpr auto conv_rows_table(std::integer_sequence<int, B...>) {
  return std::array<void (*)(const typename Tiles::ConvRows&), NP>{&Tiles::template conv_rows<NP, FG, B + 1>...};
}
// The output pixels [v0, v0 + count) of image n (count <= kBlock; numbered over the output,
// v = p*Q + q: no padding columns) by every filter group, on such a unit (dense_fits): blocks
// of 13 pixels (4 x 13 + 12) by two groups, as rows_blocks, a block that crosses an output
// row's end skipping the padding columns between (conv_rows' Brk). The same sums as
// rows_blocks, bit for bit, without the Wp - Q columns rows_blocks computes and drops per
// output row (2 of 18 at Q = 16 for 3x3, 2 of 34 at 32). A last partial block reads at most
// 12 pixels past the image's last (the padded row below it, or the slack).
template <class Tiles>
void dense_blocks(const Plan& pl, int64_t n, int64_t v0, int64_t count, float* c, int64_t ldc) {
  const Image& im = *pl.img;
  using Rows = typename Tiles::ConvRows;
  static constexpr auto k13 = conv_rows_table<Tiles, 13, 2>(std::make_integer_sequence<int, 13>{});
  static constexpr auto k12 = conv_rows_table<Tiles, 12, 2>(std::make_integer_sequence<int, 12>{});
  const int64_t gb = pl.R * pl.steps * kTile, C = im.C, image = n * im.Hp * im.Wp;
  for (int64_t g = 0; g < pl.groups; g += 2) {
    Rows k{nullptr, C, pl.dh * im.Wp * C, pl.R, pl.steps, pl.S * C, pl.wt.data() + pl.b_at(g, 0, 0, 0), gb, nullptr,
           ldc, (im.Wp - pl.Q) * C};
    for (int64_t i = 0; i < count;) {
      const int64_t np = i + 13 <= kBlock - 12 ? 13 : 12, v = v0 + i, q = v % pl.Q;
      k.a = im.data(0) + (image + (v / pl.Q) * im.Wp + q) * C, k.c = c + i * ldc + g * 16;
      const int64_t brk = std::min(np, pl.Q - q);  // the first pixel on the next output row
      (np == 13 ? k13[static_cast<size_t>(brk - 1)] : k12[static_cast<size_t>(brk - 1)])(k);
      i += np;
    }
  }
}

// rows x F sums c (row stride ldc) plus bias (F values, or null), each rounded once into dst
// (row stride ld): the engine epilogue's arithmetic (store_tile with alpha 1, no ReLU),
// 16 values per step with AVX-512 where the CPU has it (conv2d_amx.cpp).
template <class T>
void store_rows(const float* c, int64_t ldc, int64_t rows, int64_t F, const float* bias, T* dst, int64_t ld);
template <>
void store_rows<bfloat16>(const float*, int64_t, int64_t, int64_t, const float*, bfloat16*, int64_t);
template <>
void store_rows<half>(const float*, int64_t, int64_t, int64_t, const float*, half*, int64_t);

// Runs the plan into y (output pixel (n, p, q), filter f at y[((n*P + p)*Q + q)*F + f]): per
// image, the flat pixels [0, (P-1)*Wp + Q) in blocks of 64, blocks split among `threads`
// (each output's sum is computed whole by one block: no dependence on the thread count); each
// block's valid pixels (q < Q) stored through store_rows.
template <class Tiles, class T>
void run(const Plan& pl, T* y, const float* bias, int threads) {
  constexpr int Planes = planes_of<T>();
  const Image& im = *pl.img;
  const int64_t ldc = pl.groups * 16, per_task = 4;
  if constexpr (RowsUnit<Tiles> && Planes == 1)
    if (dense_fits(pl)) {
      const int64_t PQ = pl.P * pl.Q, blocks = (PQ + kBlock - 1) / kBlock;
      const int64_t tasks_per_image = (blocks + per_task - 1) / per_task, tasks = im.N * tasks_per_image;
      parallel_dynamic(static_cast<int>(std::min<int64_t>(threads, tasks)), tasks, [&](int64_t t) {
        thread_local std::vector<float> cbuf;
        if (static_cast<int64_t>(cbuf.size()) < kBlock * ldc) cbuf.resize(static_cast<size_t>(kBlock * ldc));
        const int64_t n = t / tasks_per_image, b0 = (t % tasks_per_image) * per_task;
        for (int64_t b = b0; b < std::min(blocks, b0 + per_task); ++b) {
          const int64_t v0 = b * kBlock, count = std::min(kBlock, PQ - v0);
          dense_blocks<Tiles>(pl, n, v0, count, cbuf.data(), ldc);
          store_rows(cbuf.data(), ldc, count, pl.F, bias, y + (n * PQ + v0) * pl.F, pl.F);
        }
      });
      return;
    }
  const int64_t Wp = im.Wp, Mi = (pl.P - 1) * Wp + pl.Q, blocks = (Mi + kBlock - 1) / kBlock;
  const int64_t tasks_per_image = (blocks + per_task - 1) / per_task, tasks = im.N * tasks_per_image;
  parallel_dynamic(static_cast<int>(std::min<int64_t>(threads, tasks)), tasks, [&](int64_t t) {
    thread_local std::vector<float> cbuf;
    if (static_cast<int64_t>(cbuf.size()) < kBlock * ldc) cbuf.resize(static_cast<size_t>(kBlock * ldc));
    float* c = cbuf.data();
    const int64_t n = t / tasks_per_image, b0 = (t % tasks_per_image) * per_task;
    amx::begin<Tiles>();
    for (int64_t b = b0; b < std::min(blocks, b0 + per_task); ++b) {
      const int64_t m_local = b * kBlock, m0 = n * im.Hp * Wp + m_local;
      if constexpr (RowsUnit<Tiles> && Planes == 1) {
        rows_blocks<Tiles>(pl, m0, c, ldc);
      } else {
        int64_t g = 0;
        for (; g + 2 <= pl.groups; g += 2) {
          block<Tiles, Planes, 2, 2>(pl, m0, g, c, ldc);
          block<Tiles, Planes, 2, 2>(pl, m0 + 32, g, c + 32 * ldc, ldc);
        }
        if (g < pl.groups) block<Tiles, Planes, 4, 1>(pl, m0, g, c, ldc);
      }
      for (int64_t i = 0; i < kBlock && m_local + i < Mi;) {
        const int64_t p = (m_local + i) / Wp, q = (m_local + i) % Wp;
        if (q >= pl.Q) {
          i += Wp - q;
          continue;
        }
        const int64_t len = std::min({pl.Q - q, kBlock - i, Mi - m_local - i});
        store_rows(c + i * ldc, ldc, len, pl.F, bias, y + ((n * pl.P + p) * pl.Q + q) * pl.F, pl.F);
        i += len;
      }
    }
    amx::end<Tiles>();
  });
}

}  // namespace hg::cpu::amx_conv

namespace hg::cpu::amx_conv {

// A convolution's sizes: x [N, H, W, C] -> y [N, P, Q, K], w [K, R, S, C]; one group, unit
// strides, unit column dilation (what fits() checks).
struct Sizes {
  int64_t N, H, W, C, K, R, S, P, Q, ph, pw, dh;
};

// The weights w (n values of T) in planes, in a buffer reused per thread; false when one is
// not exact on the unit.
template <class T>
bool weight_planes(const T* w, int64_t n, const uint16_t* planes[2]) {
  thread_local std::vector<uint16_t> buf;
  buf.resize(static_cast<size_t>(2 * n));
  uint16_t* const dst[2] = {buf.data(), buf.data() + n};
  planes[0] = dst[0], planes[1] = dst[1];
  return to_planes(w, n, dst);
}

// Bytes of staged operands every pass keeps for a group of images (the forward and input
// gradient: the padded image; the weight gradient: its pairs and gyT, with gy's planes on the
// way): the batch is staged and run a group at a time, so the copies are written and read back
// in the last-level cache instead of through memory. Measured on Zen 5 (32 MiB L3, 2 threads,
// bench/conv_wgrad --width 32 --size 128 --dtype bf16): the weight gradient with the whole batch
// of 8 staged at once (pairs alone 35 MB for 3x3 64->32 @128) ran 3x3 32->32 @128 at 7.3 ms,
// 64->32 @128 at 12.9-13.9, 1x1 64->32 @128 at 5.5-5.6; groups of 4 MiB (one image there)
// 4.0-4.8, 8.4-9.0 and 2.1-2.8 ms; 8 and 16 MiB no better. The forward's padded batch there is
// 17 MB; in groups, the forward and input gradient of the fourteen 3x3 layers ran 1-2% faster.
// Images of 64 x 64 and less are mostly staged whole.
inline constexpr int64_t kGroupBytes = int64_t{4} << 20;

// The images of x [N, H, W, C] a group at a time (as many as fit in group_bytes of padded
// planes, at least one): each group padded (top / left zero rows / columns, Hp x Wp) into img
// and run by pl into out (out_image values an image). False at the first group with a value
// the unit does not multiply exactly: the groups before it are written.
template <class Tiles, class T>
bool run_groups(Plan& pl, Image& img, const T* x, int64_t N, int64_t H, int64_t W, int64_t C, int64_t top,
                int64_t left, int64_t Hp, int64_t Wp, T* out, int64_t out_image, const float* bias, int threads,
                int64_t group_bytes) {
  const int64_t image_bytes = planes_of<T>() * Hp * Wp * C * 2;
  const int64_t G = std::clamp<int64_t>(group_bytes / std::max<int64_t>(1, image_bytes), 1, std::max<int64_t>(1, N));
  pl.img = &img;
  for (int64_t n0 = 0; n0 < N; n0 += G) {
    const int64_t g_n = std::min(G, N - n0);
    if (!pad_image(img, x + n0 * H * W * C, g_n, H, W, C, top, left, Hp, Wp)) return false;
    run<Tiles>(pl, out + n0 * out_image, bias, threads);
  }
  return true;
}

// forward / dgrad (below) with the tile interface `Tiles` (the hardware, or amx_model.h's).
// They return false when a value is not one the unit multiplies exactly: the weights before
// anything is written, an image's values (x, gy) with the outputs of the groups before it
// written (the caller computes all of them again on another path).
template <class Tiles, class T>
bool forward_on(const Sizes& s, const T* x, const T* w, const float* bias, T* y, int threads,
                int64_t group_bytes = kGroupBytes) {
  thread_local Image img;
  const int64_t Hp = std::max(s.H + s.ph, (s.P - 1) + (s.R - 1) * s.dh + 1), Wp = std::max(s.W + s.pw, s.Q + s.S - 1);
  thread_local Plan pl;
  img.C = s.C, img.planes = planes_of<T>();  // what pack_weights reads before the first group is padded
  pl.img = &img, pl.P = s.P, pl.Q = s.Q, pl.R = s.R, pl.S = s.S, pl.dh = s.dh, pl.F = s.K;
  const int64_t RSC = s.R * s.S * s.C, SC = s.S * s.C;
  const uint16_t* wp[2];
  if (!weight_planes(w, s.K * RSC, wp)) return false;
  pack_weights(pl, wp, RSC, [&](int64_t r, int64_t e) { return r * SC + e; });
  return run_groups<Tiles>(pl, img, x, s.N, s.H, s.W, s.C, s.ph, s.pw, Hp, Wp, y, s.P * s.Q * s.K, bias, threads,
                           group_bytes);
}

template <class Tiles, class T>
bool dgrad_on(const Sizes& s, const T* gy, const T* w, const float* bias, T* gx, int threads,
              int64_t group_bytes = kGroupBytes) {
  thread_local Image img;
  const int64_t top = (s.R - 1) * s.dh - s.ph, left = (s.S - 1) - s.pw;
  thread_local Plan pl;
  img.C = s.K, img.planes = planes_of<T>();
  pl.img = &img, pl.P = s.H, pl.Q = s.W, pl.R = s.R, pl.S = s.S, pl.dh = s.dh, pl.F = s.C;
  // Filter c, kernel row r, value e = s'*K + k of the flipped kernel: w[k, R-1-r, S-1-s', c].
  const uint16_t* wp[2];
  if (!weight_planes(w, s.K * s.R * s.S * s.C, wp)) return false;
  pack_weights(pl, wp, 1, [&](int64_t r, int64_t e) {
    const int64_t ss = e / s.K, k = e % s.K;
    return ((k * s.R + (s.R - 1 - r)) * s.S + (s.S - 1 - ss)) * s.C;
  });
  return run_groups<Tiles>(pl, img, gy, s.N, s.P, s.Q, s.K, top, left, s.H + (s.R - 1) * s.dh, s.W + s.S - 1, gx,
                           s.H * s.W * s.C, bias, threads, group_bytes);
}

// The unit the tiles run on: the AMX tile unit (bf16, and f16 as two planes); AVX512_BF16's
// vdpbf16ps (gemm/amx_dpbf16.h) on a CPU without AMX where that instruction does more
// multiply-adds than the f32 FMA (gemm::bf16_pairs_pay, the pair kernel's rule), bf16
// only (f16's four plane products would lose to the f32 tiles); or none. unit() is the one
// this CPU runs now: the best it has whose first-use self-check passed.
enum class Unit { none, amx, dpbf16 };
Unit unit();
// While one lives, unit() is none on this process (the other paths alone: benchmarks compare
// with them, tests pin their results).
class TilesOff {
 public:
  TilesOff();
  ~TilesOff();
  TilesOff(const TilesOff&) = delete;
  TilesOff& operator=(const TilesOff&) = delete;
};
// Whether the unit multiplies T (amx: bf16 and f16; dpbf16: bf16).
template <class T>
bool multiplies(Unit u) {
  return u == Unit::amx || (u == Unit::dpbf16 && std::is_same_v<T, bfloat16>);
}

// The forward y = conv(x, w) + bias (bias: K f32 values or null), and the input gradient gx
// = conv_transpose(gy, w) + bias (bias: C values or null; needs (R-1)*dh >= ph and S-1 >= pw),
// on unit u (which must multiply T). They return false when a value of the operands is not one
// the unit multiplies exactly (non-finite, or below 2^-56): the caller then takes the exact
// path, which writes every output (a refused image value may come after the first groups of
// images were written; refused weights before anything is).
template <class T>
bool forward(Unit u, const Sizes& s, const T* x, const T* w, const float* bias, T* y, int threads);
template <class T>
bool dgrad(Unit u, const Sizes& s, const T* gy, const T* w, const float* bias, T* gx, int threads);
// The weight gradient gw [K, R, S, C] of the forward above from gy and x (conv2d_amx_wgrad.h),
// rounded once; the same refusal.
template <class T>
bool wgrad(Unit u, const Sizes& s, const T* gy, const T* x, T* gw, int threads);

}  // namespace hg::cpu::amx_conv
