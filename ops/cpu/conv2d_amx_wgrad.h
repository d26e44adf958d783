// The weight gradient on the AMX tile unit (conv2d_amx.h's forward, turned around): gw[k, r,
// e] = sum over output pixels m of gy[m, k] * img[m, r, e], with img[m, r, e] the value e
// (tap e / C, channel e % C) past pixel m's first in kernel row r of the zero-padded image.
// A tile product is gw tile [16 filters x 16 values] += gyT [16 filters x 32 pixels] · the
// image's values for those 32 pixels in VNNI pairs. gy is transposed once (gyT: filters x
// pixels, the pixels of each image numbered over the padded grid as in the forward, zero
// where q >= Q); the image is stored once more as pairs (Z[t], Z[t + C]) in one 32-bit word
// (the same value e of two neighbouring pixels), so a B tile is 16 rows of 16 such words,
// one TILELOADD with a row stride of 2C words. The reduction over pixels is cut into chunks
// of 32-pixel steps fixed by the shape, each chunk's f32 partial computed whole by one task,
// the partials summed in chunk order and rounded once: the result does not depend on the
// thread count. Zero gyT entries meet finite image values (the image is verified exact on
// the unit), and values past a kernel row's S*C are computed and dropped.
#pragma once
#include <algorithm>
#include <cstdint>
#include <vector>

#include "ops/cpu/conv2d_amx.h"

namespace hg::cpu::amx_conv {

struct WgradPlan {
  const Image* img = nullptr;          // x, padded as for the forward
  aligned_vector<uint16_t> gyt;        // [plane][step][Kp][32]: gy transposed per 32-pixel step, zero past the valid pixels
  aligned_vector<uint32_t> pairs;      // [plane][img->plane]: (Z[t], Z[t + C])
  int64_t P = 0, Q = 0, R = 1, S = 1, dh = 1, K = 0;
  int64_t Kp = 0, Mt = 0;              // filters rounded up to the tiles' (16 or 32); gyT's pixel slots per plane (a group's)
  int64_t per_image = 0, steps = 0;    // 32-pixel steps per image, in all
  int64_t first_step = 0;              // the staged images' first step: gyT and the pairs hold steps from it
  int64_t groups = 0;                  // value groups of 16 per kernel row: ceil(S*C / 16)
  // Steps over the output pixels only (v = p*Q + q; a unit with its sums in registers, Q even:
  // a pixel pair never crosses a row), else over the padded grid (p*Wp + q; uniform tile rows).
  bool dense = false;

  // Column j of the output (kernel row r, values 16g..16g+15): its offset in the image.
  int64_t column_offset(int64_t j) const { return (j / groups) * dh * img->Wp * img->C + (j % groups) * 16; }
};

// Tile (fg, ec) of FG x EG (filter groups g0.., columns cols[0..EG)) lives at c + fg*16*ldc +
// col_at[ec] (16 x 16 f32, row stride ldc): starting from zero (`first`) or from what is there,
// accumulates steps [s0, s0 + n) and stores it back. Tiles 0-3 accumulate (fg*EG + ec), 4-5
// hold gyT, 6-7 the image pairs; f16 planes multiply hi·hi, hi·lo, lo·lo, lo·hi. Loading and
// storing f32 tiles is exact: the sums are those of one uninterrupted run.
template <class Tiles, int Planes, int FG, int EG>
void wgrad_block(const WgradPlan& pl, int64_t s0, int64_t n, int64_t g0, const int64_t* cols, const int64_t* col_at,
                 float* c, int64_t ldc, bool first) {
  static_assert(FG * EG == 4);
  const Image& im = *pl.img;
  const int64_t C = im.C, grid = im.Hp * im.Wp, sb = 2 * C * 4;
  int64_t off[EG];
  for (int e = 0; e < EG; ++e) off[e] = pl.column_offset(cols[e]);
  const int64_t cs = ldc * 4;
  auto at = [&](int t) { return c + (t / EG) * 16 * ldc + col_at[t % EG]; };
  if (first) {
    Tiles::template zero<0>(), Tiles::template zero<1>(), Tiles::template zero<2>(), Tiles::template zero<3>();
  } else {
    Tiles::template load<0>(at(0), cs), Tiles::template load<1>(at(1), cs);
    Tiles::template load<2>(at(2), cs), Tiles::template load<3>(at(3), cs);
  }
  constexpr int kSteps = Planes == 1 ? 1 : 4;
  constexpr int kPlaneA[4] = {0, 0, 1, 1}, kPlaneB[4] = {0, 1, 1, 0};
  for (int64_t st = s0; st < s0 + n; ++st) {
    const int64_t ls = st - pl.first_step, img_n = ls / pl.per_image, m = (ls % pl.per_image) * 32;
    const uint16_t* a = pl.gyt.data() + (ls * pl.Kp + g0 * 16) * 32;  // 16 filters x 32 pixels: contiguous
    const uint32_t* b = pl.pairs.data() + (img_n * grid + m) * C;
    for (int s = 0; s < kSteps; ++s) {
      const uint16_t* ap = a + kPlaneA[s] * pl.Kp * pl.Mt;
      const uint32_t* bp = b + kPlaneB[s] * im.plane;
      if constexpr (FG == 2) {
        if (s == 0 || kPlaneA[s] != kPlaneA[s - 1])
          Tiles::template load<4>(ap, 64), Tiles::template load<5>(ap + 16 * 32, 64);
        if (s == 0 || kPlaneB[s] != kPlaneB[s - 1])
          Tiles::template load<6>(bp + off[0], sb), Tiles::template load<7>(bp + off[1], sb);
        Tiles::template dot<0, 4, 6>(), Tiles::template dot<1, 4, 7>();
        Tiles::template dot<2, 5, 6>(), Tiles::template dot<3, 5, 7>();
      } else {
        if (s == 0 || kPlaneA[s] != kPlaneA[s - 1]) Tiles::template load<4>(ap, 64);
        Tiles::template load<6>(bp + off[0], sb), Tiles::template load<7>(bp + off[1], sb);
        Tiles::template dot<0, 4, 6>(), Tiles::template dot<1, 4, 7>();
        Tiles::template load<6>(bp + off[2], sb), Tiles::template load<7>(bp + off[3], sb);
        Tiles::template dot<2, 4, 6>(), Tiles::template dot<3, 4, 7>();
      }
    }
  }
  Tiles::template store<0>(at(0), cs), Tiles::template store<1>(at(1), cs);
  Tiles::template store<2>(at(2), cs), Tiles::template store<3>(at(3), cs);
}

// A task of wgrad_on on a unit with its sums in registers (amx_dpbf16.h, wgrad_rows): steps
// [s_begin, s_end) of filters [f_begin, f_begin + nf) into their partial rows out (row stride
// ldc, filter f_begin first), in sub-ranges of 8 steps; per sub-range 8 filters by 3 columns
// at a time (a kernel row's last by 1 or 2). The sums of wgrad_block, bit for bit.
template <class Tiles>
void rows_task(const WgradPlan& pl, int64_t s_begin, int64_t s_end, int64_t f_begin, int64_t nf, float* out,
               int64_t ldc, int64_t chunk_begin) {
  using Rows = typename Tiles::WgradRows;
  const Image& im = *pl.img;
  const int64_t C = im.C, grid = im.Hp * im.Wp, columns = pl.R * pl.groups, kSub = 8, NF = 8;
  for (int64_t s0 = s_begin; s0 < s_end; s0 += kSub) {
    const int64_t n = std::min(kSub, s_end - s0), l0 = s0 - pl.first_step;
    const uint32_t* b[kSub * 16];  // pair q of step t: its image pairs' row
    for (int64_t t = 0; t < n; ++t) {
      const int64_t ls = l0 + t, image = (ls / pl.per_image) * grid, m0 = (ls % pl.per_image) * 32;
      for (int64_t q = 0; q < 16; ++q) {
        // Past an image's last pixel gyT is zero: any finite row does, dense takes the last pair's.
        const int64_t v = pl.dense ? std::min(m0 + 2 * q, pl.P * pl.Q - 2) : m0 + 2 * q;
        b[t * 16 + q] = pl.pairs.data() + (image + (pl.dense ? (v / pl.Q) * im.Wp + v % pl.Q : v)) * C;
      }
    }
    for (int64_t f0 = 0; f0 < nf; f0 += NF) {
      int64_t off[3], col_at[3];
      Rows k{pl.gyt.data() + (l0 * pl.Kp + f_begin + f0) * 32, pl.Kp * 32, b, off, n, out + f0 * ldc, col_at, ldc,
             s0 == chunk_begin};
      for (int64_t c0 = 0; c0 < columns;) {
        const int64_t nv = std::min<int64_t>(3, columns - c0);
        for (int64_t e = 0; e < nv; ++e) {
          const int64_t j = c0 + e;
          off[e] = pl.column_offset(j), col_at[e] = 16 * j;
        }
        if (nv == 3)
          Tiles::template wgrad_rows<8, 3>(k);
        else if (nv == 2)
          Tiles::template wgrad_rows<8, 2>(k);
        else
          Tiles::template wgrad_rows<8, 1>(k);
        c0 += nv;
      }
    }
  }
}

// Steps per chunk of the reduction: a function of the shape only. At least 32 steps (1024
// pixels) and at most 64 chunks, partials within ~64 MiB.
inline int64_t wgrad_chunk_steps(int64_t steps, int64_t wsize) {
  const int64_t max_chunks = std::max<int64_t>(1, (int64_t{64} << 20) / std::max<int64_t>(1, wsize * 4));
  return std::max({int64_t{32}, (steps + 63) / 64, (steps + max_chunks - 1) / max_chunks});
}

// The image's pairs (Z[t], Z[t + C]) of the zero-padded image Z (x with `top` / `left` zero
// rows / columns, Hp x Wp), built straight from x a padded row at a time: the row (and the
// next row's first C values, which its last pixel pairs with) converted into a small buffer,
// then interleaved. geo gets the padded image's geometry (no storage). False when a value is
// not one the unit multiplies exactly.
template <class T>
bool pair_image(WgradPlan& pl, Image& geo, const T* x, int64_t N, int64_t H, int64_t W, int64_t C, int64_t top,
                int64_t left, int64_t Hp, int64_t Wp, int threads) {
  constexpr int P = planes_of<T>();
  geo.N = N, geo.Hp = Hp, geo.Wp = Wp, geo.C = C, geo.planes = P;
  geo.plane = N * Hp * Wp * C + 128 * C + 4 * Wp * C + 256;  // as pad_image: slack past the last row
  if (static_cast<int64_t>(pl.pairs.size()) < P * geo.plane) pl.pairs.resize(static_cast<size_t>(P * geo.plane));
  const int64_t rows = N * Hp, row = Wp * C, w_in = std::min(W, Wp - left);
  std::vector<char> bad(static_cast<size_t>(rows), 0);
  // Converts padded row r's values [0, len) (len <= row) into d[p] (zeros where padding).
  auto convert = [&](int64_t r, int64_t len, uint16_t* const d[2]) {
    for (int p = 0; p < P; ++p) std::fill_n(d[p], len, uint16_t(0));
    const int64_t n = r / Hp, h = r % Hp - top;
    if (r >= rows || h < 0 || h >= H || len <= left * C) return true;
    const int64_t vals = std::min(w_in * C, len - left * C);
    uint16_t* const dd[2] = {d[0] + left * C, P == 2 ? d[1] + left * C : nullptr};
    return to_planes(x + (n * H + h) * W * C, vals, dd);
  };
  parallel_static(rows * row < (1 << 16) ? 1 : threads, rows, [&](int64_t r) {
    thread_local std::vector<uint16_t> buf_tls;
    std::vector<uint16_t>& buf = buf_tls;
    const int64_t len = row + C;
    if (static_cast<int64_t>(buf.size()) < 2 * len) buf.resize(static_cast<size_t>(2 * len));
    uint16_t* const d[2] = {buf.data(), buf.data() + len};
    uint16_t* const next[2] = {d[0] + row, d[1] + row};
    const bool ok = convert(r, row, d) && convert(r + 1, C, next);
    bad[static_cast<size_t>(r)] = !ok;
    for (int p = 0; p < P; ++p) interleave_pairs(d[p], row, len, C, pl.pairs.data() + p * geo.plane + r * row);
  });
  for (int p = 0; p < P; ++p)
    std::fill(pl.pairs.data() + p * geo.plane + rows * row, pl.pairs.data() + (p + 1) * geo.plane, 0u);
  return std::find(bad.begin(), bad.end(), 1) == bad.end();
}

// gy of images [n0, n0 + G) staged for the tiles: in planes on the pixel grid of the steps
// (slot n*per_image*32 + p*Wp + q, images counted from n0, Wp the padded width or, dense,
// Q; zero where q >= Q and past an image's last pixel), then each 32-slot step transposed to
// [Kp][32] into pl.gyt (pl.Mt slots per plane). False when a value is not one the unit
// multiplies exactly.
template <class T>
bool stage_gy(WgradPlan& pl, const Sizes& s, const T* gy, int64_t n0, int64_t G, int64_t Wp, int threads) {
  constexpr int Planes = planes_of<T>();
  thread_local std::vector<uint16_t> grid_buf;
  std::vector<uint16_t>& rows = grid_buf;
  const int64_t K = s.K, slots = pl.Mt, steps = G * pl.per_image;
  // Grown, never cleared: each row's valid pixels are converted, the rest zeroed here.
  if (static_cast<int64_t>(rows.size()) < Planes * slots * K) rows.resize(static_cast<size_t>(Planes * slots * K));
  uint16_t* const dst[2] = {rows.data(), rows.data() + slots * K};
  std::vector<char> bad(static_cast<size_t>(G * s.P), 0);
  parallel_static(G * s.P * s.Q * K < (1 << 16) ? 1 : threads, G * s.P, [&](int64_t np) {
    const int64_t n = np / s.P, p = np % s.P, slot = n * pl.per_image * 32 + p * Wp;
    // Zero from q = Q to the next row's first pixel, or for the last row to the image's end.
    const int64_t end = p + 1 < s.P ? slot + Wp : (n + 1) * pl.per_image * 32;
    uint16_t* const d[2] = {dst[0] + slot * K, Planes == 2 ? dst[1] + slot * K : nullptr};
    for (int q = 0; q < Planes; ++q) std::fill(d[q] + s.Q * K, dst[q] + end * K, uint16_t(0));
    bad[static_cast<size_t>(np)] = !to_planes(gy + (n0 * s.P + np) * s.Q * K, s.Q * K, d);
  });
  if (std::find(bad.begin(), bad.end(), 1) != bad.end()) return false;
  if (static_cast<int64_t>(pl.gyt.size()) < Planes * pl.Kp * pl.Mt)
    pl.gyt.resize(static_cast<size_t>(Planes * pl.Kp * pl.Mt));
  parallel_static(steps < 8 ? 1 : threads, steps, [&](int64_t st) {
    for (int p = 0; p < Planes; ++p) {
      uint16_t* t = pl.gyt.data() + p * pl.Kp * pl.Mt + st * pl.Kp * 32;
      transpose16(dst[p] + st * 32 * K, 32, K, K, t, 32);
      std::fill(t + K * 32, t + pl.Kp * 32, uint16_t(0));  // the padding filters
    }
  });
  return true;
}

// gw [K, R, S, C] (T, rounded once) = the weight gradient of y = conv(x, w) (sizes s, unit
// strides and column dilation) from gy; false, nothing written, when a value of x or gy is not
// one the unit multiplies exactly. The images are staged and reduced a group at a time (as
// many as fit in group_bytes, at least one): the chunks of the reduction, and with them the
// result, do not depend on the grouping (a chunk cut by a group's end resumes from its
// partial, stored exactly) nor on the thread count.
template <class Tiles, class T>
bool wgrad_on(const Sizes& s, const T* gy, const T* x, T* gw, int threads, int64_t group_bytes = kGroupBytes) {
  constexpr int Planes = planes_of<T>();
  // Per-thread buffers, reused; the lambdas below run on other threads, so they use these
  // references (a thread_local named in a lambda is the running thread's own).
  thread_local Image img_buf;
  thread_local WgradPlan plan_buf;
  thread_local aligned_vector<float> part_buf;
  Image& img = img_buf;
  WgradPlan& pl = plan_buf;
  aligned_vector<float>& part = part_buf;
  const int64_t Hp = std::max(s.H + s.ph, (s.P - 1) + (s.R - 1) * s.dh + 1), Wp = std::max(s.W + s.pw, s.Q + s.S - 1);
  pl.img = &img, pl.P = s.P, pl.Q = s.Q, pl.R = s.R, pl.S = s.S, pl.dh = s.dh, pl.K = s.K;
  const bool wide = s.K > 16;  // tiles of 2 filter groups x 2 columns, else 1 x 4
  pl.Kp = wide ? (s.K + 31) / 32 * 32 : 16;
  pl.dense = RowsUnit<Tiles> && Planes == 1 && s.Q % 2 == 0;
  const int64_t Mi = pl.dense ? s.P * s.Q : (s.P - 1) * Wp + s.Q;  // an image's pixels on the steps' grid
  pl.per_image = (Mi + 31) / 32, pl.steps = s.N * pl.per_image;
  pl.groups = (s.S * s.C + 15) / 16;
  const int64_t image_bytes = Planes * (Hp * Wp * s.C * 4 + pl.per_image * 32 * (s.K + pl.Kp) * 2);
  const int64_t G = std::clamp<int64_t>(group_bytes / std::max<int64_t>(1, image_bytes), 1, s.N);
  pl.Mt = G * pl.per_image * 32;
  // Per chunk and filter set, one task: the chunk's steps in sub-ranges of kSub (their gyT and
  // pairs stay in L1 while every column set of FG x EG tiles runs over them), the tiles
  // accumulating in the chunk's partial, laid out [Kp][R][groups*16] (whole tiles).
  const int64_t SC = s.S * s.C, RG = s.R * pl.groups * 16, wsize = pl.Kp * RG;
  const int64_t chunk = wgrad_chunk_steps(pl.steps, wsize), chunks = (pl.steps + chunk - 1) / chunk;
  const int64_t EG = wide ? 2 : 4, FG = wide ? 2 : 1, kSub = 8;
  const int64_t columns = s.R * pl.groups, col_sets = (columns + EG - 1) / EG, fsets = pl.Kp / (16 * FG);
  if (static_cast<int64_t>(part.size()) < chunks * wsize) part.resize(static_cast<size_t>(chunks * wsize));
  for (int64_t n0 = 0; n0 < s.N; n0 += G) {
    const int64_t g_n = std::min(G, s.N - n0);
    if (!pair_image(pl, img, x + n0 * s.H * s.W * s.C, g_n, s.H, s.W, s.C, s.ph, s.pw, Hp, Wp, threads)) return false;
    if (!stage_gy(pl, s, gy, n0, g_n, pl.dense ? s.Q : Wp, threads)) return false;
    // The chunks this group's steps [g0, g1) reach, each over its part of them.
    const int64_t g0 = n0 * pl.per_image, g1 = (n0 + g_n) * pl.per_image, c0 = g0 / chunk;
    const int64_t tasks = ((g1 - 1) / chunk - c0 + 1) * fsets;
    pl.first_step = g0;
    parallel_dynamic(static_cast<int>(std::min<int64_t>(threads, tasks)), tasks, [&](int64_t task) {
      const int64_t ch = c0 + task / fsets, fs = task % fsets;
      const int64_t s_begin = std::max(g0, ch * chunk), s_end = std::min(g1, (ch + 1) * chunk);
      float* out = part.data() + ch * wsize + fs * FG * 16 * RG;
      if constexpr (RowsUnit<Tiles> && Planes == 1) {
        rows_task<Tiles>(pl, s_begin, s_end, fs * FG * 16, FG * 16, out, RG, ch * chunk);
      } else {
        amx::begin<Tiles>();
        for (int64_t s0 = s_begin; s0 < s_end; s0 += kSub) {
          const int64_t n = std::min(kSub, s_end - s0);
          for (int64_t cset = 0; cset < col_sets; ++cset) {
            int64_t cols[4], col_at[4];
            for (int64_t e = 0; e < EG; ++e) {
              cols[e] = std::min(columns - 1, cset * EG + e);  // a short set repeats its last column
              col_at[e] = 16 * cols[e];  // column j's 16 values in a partial row [R][groups*16]
            }
            if (wide)
              wgrad_block<Tiles, Planes, 2, 2>(pl, s0, n, fs * 2, cols, col_at, out, RG, s0 == ch * chunk);
            else
              wgrad_block<Tiles, Planes, 1, 4>(pl, s0, n, fs, cols, col_at, out, RG, s0 == ch * chunk);
          }
        }
        amx::end<Tiles>();
      }
    });
  }
  // The partials summed in chunk order (filters k < K, values v < S*C of each kernel row),
  // rounded once into gw [K][R][S*C].
  thread_local aligned_vector<float> sum_buf;
  aligned_vector<float>& sum = sum_buf;
  if (static_cast<int64_t>(sum.size()) < s.K * RG) sum.resize(static_cast<size_t>(s.K * RG));
  parallel_static(s.K * RG * chunks < (1 << 16) ? 1 : threads, s.K, [&](int64_t k) {
    float* d = sum.data() + k * RG;
    std::copy_n(part.data() + k * RG, RG, d);
    for (int64_t c = 1; c < chunks; ++c) {
      const float* src = part.data() + c * wsize + k * RG;
      for (int64_t e = 0; e < RG; ++e) d[e] += src[e];
    }
    store_rows(d, pl.groups * 16, s.R, SC, nullptr, gw + k * s.R * SC, SC);
  });
  return true;
}

}  // namespace hg::cpu::amx_conv
