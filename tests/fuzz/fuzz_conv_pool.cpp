// conv2d, conv_transpose2d, max_pool2d and avg_pool2d over random geometry and
// hyper-parameters (zero, negative and oversized ones included): the library must refuse
// exactly what the geometry rules refuse, and match a direct f64 loop otherwise.
#include <algorithm>
#include <limits>

#include "tests/fuzz/fuzz.h"

namespace hg::fuzz {
namespace {

constexpr int64_t kHuge = std::numeric_limits<int64_t>::max() / 2;

// Mostly in range; sometimes just below (0 or negative); rarely absurd: -kHuge, or
// +kHuge where `huge_ok` (a huge stride or dilation gives a small output or an error; a
// huge padding would ask for an output no machine holds).
int64_t hyper(Rng& rng, int64_t lo, int64_t hi, bool huge_ok = true) {
  if (rng.chance(0.02)) return huge_ok && rng.chance(0.5) ? kHuge : -kHuge;
  return rng.chance(0.03) ? lo - rng.uniform(1, 2) : rng.uniform(lo, hi);
}

// Twice the one rounding to dt (bias included in the sum) and f32 or f64
// accumulation of `terms` products of total magnitude `mag`.
double tolerance(DType dt, double want, double mag, int64_t terms) {
  const double acc = dt == f64 ? 0x1p-53 : 0x1p-24;
  return 2 * unit_roundoff(dt) * (std::abs(want) + mag) + (static_cast<double>(terms) + 2) * acc * mag +
         2 * smallest_subnormal(dt);
}

struct Geometry {
  int64_t N, H, W, C;
};

Geometry random_image(Rng& rng) {
  return {rng.uniform(1, 2), rng.uniform(1, 7), rng.uniform(1, 7), rng.uniform(1, 4)};
}

}  // namespace

void fuzz_conv(Rng& rng) {
  const bool transposed = rng.chance(0.35);
  Geometry g = random_image(rng);
  const int64_t G = hyper(rng, 1, 2);
  const int64_t R = rng.chance(0.05) ? 0 : rng.uniform(1, 3), S = rng.chance(0.05) ? 0 : rng.uniform(1, 3);
  const std::array<int64_t, 2> stride{hyper(rng, 1, 3), hyper(rng, 1, 3)}, pad{hyper(rng, 0, 2, false), hyper(rng, 0, 2, false)},
      dil{hyper(rng, 1, 2), hyper(rng, 1, 2)};
  auto opad_of = [&] { return rng.chance(0.6) ? int64_t{0} : rng.uniform(-1, 2); };
  const std::array<int64_t, 2> opad{opad_of(), opad_of()};
  if (G > 0 && G < 8 && rng.chance(0.8)) g.C = g.C * G;  // usually divisible by groups
  int64_t K = rng.uniform(1, 3) * (G > 0 && G < 8 && rng.chance(0.8) ? G : 1);
  const DType dt = rng.pick(kFloatTypes);
  const Device dev = random_device(rng);
  const bool has_bias = rng.chance(0.5);
  // conv2d: w [K, R, S, C/G]; conv_transpose2d: w [C, R, S, K/G], output channels K.
  const int64_t wlast = G > 0 ? (transposed ? std::max<int64_t>(K / G, 1) : g.C / G) : 1;
  // The transposed conv's output channels are the weight's last dim times the groups.
  if (transposed && G > 0 && G < 8) K = wlast * G;
  const int64_t bias_len = rng.chance(0.05) ? K + 1 : K;
  const Shape xs{g.N, g.H, g.W, g.C}, ws = transposed ? Shape{g.C, R, S, wlast} : Shape{K, R, S, wlast};
  Tensor x = random_tensor(rng, xs, dt), w = random_tensor(rng, ws, dt);
  Tensor b = has_bias ? random_tensor(rng, {bias_len}, dt) : Tensor();
  const std::string what = detail::concat(transposed ? "conv_transpose2d" : "conv2d", " x ", shape_text(xs), " w ",
                                          shape_text(ws), " ", dtype_name(dt), " stride ", stride[0], ",", stride[1],
                                          " pad ", pad[0], ",", pad[1], " dil ", dil[0], ",", dil[1], " groups ", G,
                                          transposed ? detail::concat(" output_padding ", opad[0], ",", opad[1]) : "");
  note(what);
  if (dev.is_cuda() && !cuda_usable()) must_fail("conv input on " + dev.str() + " without a GPU", [&] { x.to(dev); });
  x = x.to(dev);

  bool valid = G > 0 && stride[0] > 0 && stride[1] > 0 && dil[0] > 0 && dil[1] > 0 && pad[0] >= 0 && pad[1] >= 0 &&
               R > 0 && S > 0 && g.C % G == 0 && (transposed || K % G == 0) && (!has_bias || bias_len == K) && x.device() == w.device();
  // In 128 bits: the reference must not overflow where the library must not either.
  using I = __int128;
  const I er = valid ? I{dil[0]} * (R - 1) + 1 : 0, es = valid ? I{dil[1]} * (S - 1) + 1 : 0;
  I P = 0, Q = 0;
  if (valid && !transposed) {
    valid = er <= g.H + 2 * I{pad[0]} && es <= g.W + 2 * I{pad[1]};
    P = (g.H + 2 * I{pad[0]} - er) / stride[0] + 1;
    Q = (g.W + 2 * I{pad[1]} - es) / stride[1] + 1;
  } else if (valid) {
    for (int i = 0; i < 2; ++i) valid = valid && opad[i] >= 0 && (opad[i] < stride[i] || opad[i] < dil[i]);
    P = I{g.H - 1} * stride[0] - 2 * I{pad[0]} + er + opad[0];
    Q = I{g.W - 1} * stride[1] - 2 * I{pad[1]} + es + opad[1];
    valid = valid && P > 0 && Q > 0;
  }
  // A valid geometry whose output no machine holds (a huge stride of a transposed conv)
  // must be refused before anything is allocated.
  const I limit = I{1} << 32;
  if (valid && (P > limit || Q > limit || P * Q * g.N * K > limit)) must_fail(what + " (a huge output)", [&] {
    if (!transposed) return conv2d(x, w, b, Conv2dOptions{stride, pad, dil, G});
    return conv_transpose2d(x, w, b, ConvTranspose2dOptions{stride, pad, opad, dil, G});
  });
  auto run = [&] {
    if (!transposed) return conv2d(x, w, b, Conv2dOptions{stride, pad, dil, G});
    return conv_transpose2d(x, w, b, ConvTranspose2dOptions{stride, pad, opad, dil, G});
  };
  if (!valid) must_fail(what, run);
  const Tensor y = must_succeed(what, run);
  const Shape shape{g.N, static_cast<int64_t>(P), static_cast<int64_t>(Q), K};
  expect(y.shape() == shape, what, ": output shape ", shape_text(y.shape()), ", expected ", shape_text(shape));

  // Direct loops in f64 over the rounded values. The transposed conv scatters each input
  // pixel into the output; conv2d gathers each output pixel from the input.
  const std::vector<double> vx = x.to_vector<double>(), vw = w.to_vector<double>();
  std::vector<double> want(static_cast<size_t>(numel_of(shape)), 0.0), mag(want.size(), 0.0);
  const int64_t cg = g.C / G, kg = K / G;
  auto X = [&](int64_t n, int64_t h, int64_t ww, int64_t c) { return vx[static_cast<size_t>(((n * g.H + h) * g.W + ww) * g.C + c)]; };
  const int64_t Pi = shape[1], Qi = shape[2];
  auto out_at = [&](int64_t n, int64_t p, int64_t q, int64_t k) { return static_cast<size_t>(((n * Pi + p) * Qi + q) * K + k); };
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t grp = 0; grp < G; ++grp)
      for (int64_t r = 0; r < R; ++r)
        for (int64_t s = 0; s < S; ++s)
          for (int64_t ci = 0; ci < cg; ++ci)
            for (int64_t ko = 0; ko < kg; ++ko) {
              const int64_t c = grp * cg + ci, k = grp * kg + ko;
              const double wv = transposed ? vw[static_cast<size_t>(((c * R + r) * S + s) * kg + ko)]
                                           : vw[static_cast<size_t>(((k * R + r) * S + s) * cg + ci)];
              if (!transposed) {
                for (int64_t p = 0; p < Pi; ++p)
                  for (int64_t q = 0; q < Qi; ++q) {
                    const int64_t h = p * stride[0] - pad[0] + r * dil[0], ww = q * stride[1] - pad[1] + s * dil[1];
                    // Padding is zeros: 0 * an inf weight is NaN, as IEEE and im2col say.
                    if (h < 0 || h >= g.H || ww < 0 || ww >= g.W) {
                      want[out_at(n, p, q, k)] += 0.0 * wv;
                      continue;
                    }
                    want[out_at(n, p, q, k)] += X(n, h, ww, c) * wv;
                    mag[out_at(n, p, q, k)] += std::abs(X(n, h, ww, c) * wv);
                  }
              } else {
                // Gathered, as the kernels compute it (the input gradient of conv2d): output
                // pixel p takes tap r from input row h = (p + pad - r*dil) / stride when that
                // division is exact; an exact h outside the image is a padding zero, and
                // 0 * an inf weight is NaN there, as in conv2d's forward above.
                auto source = [](int64_t out, int64_t pd, int64_t tap, int64_t st, int64_t& in) {
                  const int64_t num = out + pd - tap;
                  if (((num % st) + st) % st != 0) return false;
                  in = (num - ((num % st) + st) % st) / st;
                  return true;
                };
                for (int64_t p = 0; p < Pi; ++p)
                  for (int64_t q = 0; q < Qi; ++q) {
                    int64_t h = 0, ww = 0;
                    if (!source(p, pad[0], r * dil[0], stride[0], h) || !source(q, pad[1], s * dil[1], stride[1], ww))
                      continue;  // this tap does not reach output pixel (p, q)
                    if (h < 0 || h >= g.H || ww < 0 || ww >= g.W) {
                      want[out_at(n, p, q, k)] += 0.0 * wv;
                      continue;
                    }
                    want[out_at(n, p, q, k)] += X(n, h, ww, c) * wv;
                    mag[out_at(n, p, q, k)] += std::abs(X(n, h, ww, c) * wv);
                  }
              }
            }
  const int64_t terms = R * S * (transposed ? g.C : cg);
  // conv2d and conv_transpose2d add their bias inside the f32 sum and round once.
  if (!has_bias) want = rounded(want, dt);
  if (has_bias) {
    const std::vector<double> vb = b.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) {
      want[i] += vb[i % static_cast<size_t>(K)];
      mag[i] += std::abs(vb[i % static_cast<size_t>(K)]);
    }
    want = rounded(want, dt);
  }
  std::vector<double> atol;
  for (size_t i = 0; i < want.size(); ++i) atol.push_back(tolerance(dt, want[i], mag[i], terms));
  expect_close(what, y.to_vector<double>(), want, atol);
}

void fuzz_pool(Rng& rng) {
  const Geometry g = random_image(rng);
  const bool is_max = rng.chance(0.5);
  const std::array<int64_t, 2> kernel{hyper(rng, 1, 3), hyper(rng, 1, 3)};
  // Stride 0 means "the kernel size"; -1 is invalid.
  auto stride_of = [&] { return rng.chance(0.04) ? int64_t{-1} : rng.uniform(0, 3); };
  const std::array<int64_t, 2> stride{stride_of(), stride_of()}, pad{rng.chance(0.5) ? 0 : hyper(rng, 0, 1, false),
                                                                                 rng.chance(0.5) ? 0 : hyper(rng, 0, 1, false)};
  const DType dt = rng.pick(kFloatTypes);
  const Shape xs{g.N, rng.chance(0.05) ? 0 : g.H, g.W, g.C};
  const Tensor x = random_tensor(rng, xs, dt);
  const std::string what = detail::concat(is_max ? "max_pool2d" : "avg_pool2d", " x ", shape_text(xs), " ", dtype_name(dt),
                                          " kernel ", kernel[0], ",", kernel[1], " stride ", stride[0], ",", stride[1],
                                          " pad ", pad[0], ",", pad[1]);
  note(what);
  const int64_t sh = stride[0] == 0 ? kernel[0] : stride[0], sw = stride[1] == 0 ? kernel[1] : stride[1];
  const int64_t H = xs[1], W = xs[2];
  const bool valid = H > 0 && kernel[0] > 0 && kernel[1] > 0 && sh > 0 && sw > 0 && pad[0] >= 0 && pad[1] >= 0 &&
                     2 * pad[0] <= kernel[0] && 2 * pad[1] <= kernel[1] && kernel[0] <= H + 2 * pad[0] &&
                     kernel[1] <= W + 2 * pad[1];
  auto run = [&] {
    const Pool2dOptions o{kernel, stride, pad};
    return is_max ? max_pool2d(x, o) : avg_pool2d(x, o);
  };
  if (!valid) must_fail(what, run);
  const Tensor y = must_succeed(what, run);
  const int64_t P = (H + 2 * pad[0] - kernel[0]) / sh + 1, Q = (W + 2 * pad[1] - kernel[1]) / sw + 1;
  const Shape shape{g.N, P, Q, g.C};
  expect(y.shape() == shape, what, ": output shape ", shape_text(y.shape()), ", expected ", shape_text(shape));
  const std::vector<double> vx = x.to_vector<double>();
  std::vector<double> want, mag;
  for (int64_t n = 0; n < g.N; ++n)
    for (int64_t p = 0; p < P; ++p)
      for (int64_t q = 0; q < Q; ++q)
        for (int64_t c = 0; c < g.C; ++c) {
          double best = -std::numeric_limits<double>::infinity(), sum = 0, sum_abs = 0;
          for (int64_t r = 0; r < kernel[0]; ++r)
            for (int64_t s = 0; s < kernel[1]; ++s) {
              const int64_t h = p * sh - pad[0] + r, w = q * sw - pad[1] + s;
              if (h < 0 || h >= H || w < 0 || w >= W) continue;  // padding never wins, adds zero
              const double v = vx[static_cast<size_t>(((n * H + h) * W + w) * g.C + c)];
              best = std::max(best, v);
              sum += v;
              sum_abs += std::abs(v);
            }
          want.push_back(is_max ? best : sum / static_cast<double>(kernel[0] * kernel[1]));
          mag.push_back(is_max ? 0.0 : sum_abs / static_cast<double>(kernel[0] * kernel[1]));
        }
  want = rounded(want, dt);
  std::vector<double> atol;
  for (size_t i = 0; i < want.size(); ++i)
    atol.push_back(is_max ? 0.0 : 2 * unit_roundoff(dt) * std::abs(want[i]) + 4 * kernel[0] * kernel[1] * 0x1p-24 * mag[i] + 2 * smallest_subnormal(dt));
  expect_close(what, y.to_vector<double>(), want, atol);
}

}  // namespace hg::fuzz
