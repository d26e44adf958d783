// conv2d and conv_transpose2d against naive f64 loops written here (NHWC, KRSC), their
// gradients by finite differences, f16/bf16 rounding, and every error message.
#include <catch2/catch.hpp>
#include <cmath>

#include "halfgrad.h"
#include "ops/conv2d_kernels.h"
#include "tests/devices.h"
#include "tests/skip.h"

using namespace hg;

namespace {

Tensor rnd(const Shape& s, uint64_t seed, DType dt = f64) {
  Generator g(seed);
  return randn(s, {dt}, &g);
}

Conv2dOptions opts(std::array<int64_t, 2> st, std::array<int64_t, 2> pd, std::array<int64_t, 2> dl, int64_t g = 1) {
  return Conv2dOptions{st, pd, dl, g};
}

// Sizes of x [N, H, W, C] * w [K, R, S, C/G] -> [N, P, Q, K].
struct Dims {
  int64_t N, H, W, C, K, R, S, G, P, Q;
  Conv2dOptions o;
};

Dims dims(const Shape& xs, const Shape& ws, const Conv2dOptions& o) {
  Dims d{xs[0], xs[1], xs[2], xs[3], ws[0], ws[1], ws[2], o.groups, 0, 0, o};
  d.P = (d.H + 2 * o.padding[0] - o.dilation[0] * (d.R - 1) - 1) / o.stride[0] + 1;
  d.Q = (d.W + 2 * o.padding[1] - o.dilation[1] * (d.S - 1) - 1) / o.stride[1] + 1;
  return d;
}

// Calls f(y index, x index, w index) for every product the convolution sums.
template <class F>
void for_each_tap(const Dims& d, F f) {
  const int64_t cg = d.C / d.G, kg = d.K / d.G;
  for (int64_t n = 0; n < d.N; ++n)
    for (int64_t p = 0; p < d.P; ++p)
      for (int64_t q = 0; q < d.Q; ++q)
        for (int64_t k = 0; k < d.K; ++k)
          for (int64_t r = 0; r < d.R; ++r)
            for (int64_t s = 0; s < d.S; ++s) {
              const int64_t h = p * d.o.stride[0] - d.o.padding[0] + r * d.o.dilation[0];
              const int64_t w = q * d.o.stride[1] - d.o.padding[1] + s * d.o.dilation[1];
              if (h < 0 || h >= d.H || w < 0 || w >= d.W) continue;
              for (int64_t c = 0; c < cg; ++c)
                f(((n * d.P + p) * d.Q + q) * d.K + k, ((n * d.H + h) * d.W + w) * d.C + (k / kg) * cg + c,
                  ((k * d.R + r) * d.S + s) * cg + c);
            }
}

Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Conv2dOptions& o) {
  const Dims d = dims(x.shape(), w.shape(), o);
  auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> y(static_cast<size_t>(d.N * d.P * d.Q * d.K), 0.0);
  for_each_tap(d, [&](int64_t yi, int64_t xi, int64_t wi) { y[yi] += xv[xi] * wv[wi]; });
  if (b.defined()) {
    auto bv = b.to_vector<double>();
    for (size_t i = 0; i < y.size(); ++i) y[i] += bv[i % static_cast<size_t>(d.K)];
  }
  return from_vector(y, {d.N, d.P, d.Q, d.K}, {f64});
}

Tensor ref_dgrad(const Tensor& gy, const Tensor& w, const Shape& xs, const Conv2dOptions& o) {
  const Dims d = dims(xs, w.shape(), o);
  auto gv = gy.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> gx(static_cast<size_t>(numel_of(xs)), 0.0);
  for_each_tap(d, [&](int64_t yi, int64_t xi, int64_t wi) { gx[xi] += gv[yi] * wv[wi]; });
  return from_vector(gx, xs, {f64});
}

Tensor ref_wgrad(const Tensor& gy, const Tensor& x, const Shape& ws, const Conv2dOptions& o) {
  const Dims d = dims(x.shape(), ws, o);
  auto gv = gy.to_vector<double>(), xv = x.to_vector<double>();
  std::vector<double> gw(static_cast<size_t>(numel_of(ws)), 0.0);
  for_each_tap(d, [&](int64_t yi, int64_t xi, int64_t wi) { gw[wi] += gv[yi] * xv[xi]; });
  return from_vector(gw, ws, {f64});
}

// The transposed convolution as a scatter: each input pixel spreads x * w over the output.
Tensor ref_conv_transpose(const Tensor& x, const Tensor& w, const Tensor& b, const ConvTranspose2dOptions& o) {
  const int64_t N = x.size(0), H = x.size(1), W = x.size(2), Cin = x.size(3);
  const int64_t R = w.size(1), S = w.size(2), cog = w.size(3), cig = Cin / o.groups, Cout = cog * o.groups;
  const int64_t Ho = (H - 1) * o.stride[0] - 2 * o.padding[0] + o.dilation[0] * (R - 1) + o.output_padding[0] + 1;
  const int64_t Wo = (W - 1) * o.stride[1] - 2 * o.padding[1] + o.dilation[1] * (S - 1) + o.output_padding[1] + 1;
  auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> y(static_cast<size_t>(N * Ho * Wo * Cout), 0.0);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t ww = 0; ww < W; ++ww)
        for (int64_t ci = 0; ci < Cin; ++ci)
          for (int64_t r = 0; r < R; ++r)
            for (int64_t s = 0; s < S; ++s) {
              const int64_t oh = h * o.stride[0] - o.padding[0] + r * o.dilation[0];
              const int64_t ow = ww * o.stride[1] - o.padding[1] + s * o.dilation[1];
              if (oh < 0 || oh >= Ho || ow < 0 || ow >= Wo) continue;
              for (int64_t co = 0; co < cog; ++co)
                y[((n * Ho + oh) * Wo + ow) * Cout + (ci / cig) * cog + co] +=
                    xv[((n * H + h) * W + ww) * Cin + ci] * wv[((ci * R + r) * S + s) * cog + co];
            }
  if (b.defined()) {
    auto bv = b.to_vector<double>();
    for (size_t i = 0; i < y.size(); ++i) y[i] += bv[i % static_cast<size_t>(Cout)];
  }
  return from_vector(y, {N, Ho, Wo, Cout}, {f64});
}

struct Case {
  Shape x, w;
  Conv2dOptions o;
  bool bias;
};

// Odd sizes; every stride/padding/dilation/groups combination the kernels branch on.
const std::vector<Case>& cases() {
  static const std::vector<Case> c = {
      {{2, 7, 13, 3}, {5, 3, 3, 3}, opts({1, 1}, {1, 1}, {1, 1}), true},
      {{2, 7, 13, 3}, {5, 3, 3, 3}, opts({2, 2}, {0, 0}, {1, 1}), false},
      {{1, 7, 13, 5}, {3, 5, 3, 5}, opts({2, 1}, {2, 1}, {1, 1}), true},
      {{2, 7, 13, 3}, {4, 3, 3, 3}, opts({1, 2}, {2, 2}, {2, 2}), false},
      {{2, 7, 13, 6}, {4, 3, 3, 3}, opts({2, 2}, {1, 1}, {1, 1}, 2), true},
      {{1, 7, 13, 6}, {6, 3, 1, 2}, opts({1, 1}, {0, 2}, {2, 1}, 3), false},
      {{2, 7, 13, 5}, {3, 1, 1, 5}, opts({1, 1}, {0, 0}, {1, 1}), true},  // pointwise: no im2col
      {{2, 7, 13, 5}, {3, 1, 1, 5}, opts({2, 2}, {0, 0}, {1, 1}), false},
  };
  return c;
}

}  // namespace

TEST_CASE("conv2d equals a naive f64 loop on odd sizes", "[conv2d]") {
  uint64_t seed = 10;
  for (const Case& c : cases()) {
    CAPTURE(shape_str(c.x), shape_str(c.w), c.o.stride[0], c.o.padding[1], c.o.dilation[0], c.o.groups);
    Tensor x = rnd(c.x, ++seed), w = rnd(c.w, ++seed), b = c.bias ? rnd({c.w[0]}, ++seed) : Tensor();
    Tensor ref = ref_conv(x, w, b, c.o);
    Tensor y = conv2d(x, w, b, c.o);
    REQUIRE(y.shape() == ref.shape());
    CHECK(allclose(y, ref, 1e-12, 1e-12));
    Tensor y32 = conv2d(x.to(f32), w.to(f32), b.defined() ? b.to(f32) : b, c.o);
    CHECK(y32.dtype() == f32);
    CHECK(allclose(y32.to(f64), ref, 1e-5, 1e-5));
  }
  // A strided (permuted) input view gives the same result as its contiguous copy.
  Tensor xn = rnd({2, 3, 7, 13}, 99), w = rnd({4, 3, 3, 3}, 98);
  Tensor xv = xn.permute({0, 2, 3, 1});
  CHECK(allclose(conv2d(xv, w, {}, opts({1, 1}, {1, 1}, {1, 1})),
                 ref_conv(xv.contiguous(), w, {}, opts({1, 1}, {1, 1}, {1, 1})), 1e-12, 1e-12));
}

TEST_CASE("conv2d gradients equal naive loops on sizes that span tiles and threads", "[conv2d]") {
  // 3 images x 20 x 24 pixels: several column tiles per thread, images split across threads.
  struct Big {
    Shape x, w;
    Conv2dOptions o;
  };
  for (const Big& c : {Big{{3, 20, 24, 16}, {8, 3, 3, 16}, opts({1, 1}, {1, 1}, {1, 1})},
                       Big{{3, 21, 23, 12}, {10, 3, 3, 6}, opts({2, 2}, {1, 1}, {1, 1}, 2)},
                       Big{{3, 9, 11, 40}, {24, 1, 1, 40}, opts({1, 1}, {0, 0}, {1, 1})}}) {
    CAPTURE(shape_str(c.x), shape_str(c.w));
    for (DType dt : {f64, f32}) {
      Tensor x = rnd(c.x, 1, dt).set_requires_grad(), w = rnd(c.w, 2, dt).set_requires_grad();
      Tensor y = conv2d(x, w, {}, c.o);
      Tensor gy = rnd(y.shape(), 3, dt);
      y.backward(gy);
      // The weight gradient sums ~1400 products of magnitude ~1: f32 rounding of that sum
      // can reach ~1e-4 absolute, whatever the size of the result.
      const double rtol = dt == f64 ? 1e-11 : 1e-5, atol = dt == f64 ? 1e-11 : 5e-4;
      CHECK(allclose(y.to(f64), ref_conv(x, w, {}, c.o), rtol, atol));
      CHECK(allclose(x.grad().to(f64), ref_dgrad(gy, w, c.x, c.o), rtol, atol));
      CHECK(allclose(w.grad().to(f64), ref_wgrad(gy, x, c.w, c.o), rtol, atol));
    }
  }
}

TEST_CASE("the conv kernels overwrite every element of a poisoned output", "[conv2d]") {
  // Stride 2 with a 1x1 kernel leaves input pixels no output reads: their gradient must be 0.
  for (const Case& c : {cases()[2], cases()[4], cases()[6], cases()[7]}) {
    CAPTURE(shape_str(c.x), shape_str(c.w));
    for (DType dt : {f32, f16}) {
      Tensor x = rnd(c.x, 1, dt), w = rnd(c.w, 2, dt);
      const Conv2dOptions& p = c.o;
      Tensor y = full(ref_conv(x, w, {}, c.o).shape(), NAN, {dt}), gy = rnd(y.shape(), 3, dt);
      Tensor gx = full(c.x, NAN, {dt}), gw = full(c.w, NAN, {dt});
      conv2d_forward_stub(Device::cpu(), x, w, Tensor(), y, p);
      conv2d_dgrad_stub(Device::cpu(), gy, w, Tensor(), gx, p);
      conv2d_wgrad_stub(Device::cpu(), gy, x, gw, p);
      const double tol = dt == f32 ? 1e-5 : 2e-3;
      CHECK(allclose(y.to(f64), ref_conv(x, w, {}, c.o), tol, tol));
      CHECK(allclose(gx.to(f64), ref_dgrad(gy, w, c.x, c.o), tol, tol));
      CHECK(allclose(gw.to(f64), ref_wgrad(gy, x, c.w, c.o), tol, tol));
    }
  }
}

TEST_CASE("conv2d passes gradcheck with stride, padding, dilation, groups and bias", "[conv2d][gradcheck]") {
  Tensor x = rnd({2, 5, 7, 3}, 1).set_requires_grad(), w = rnd({4, 3, 3, 3}, 2).set_requires_grad();
  Tensor b = rnd({4}, 3).set_requires_grad();
  auto strided = [](const TensorList& t) { return conv2d(t[0], t[1], t[2], opts({2, 1}, {1, 2}, {1, 2})); };
  CHECK(gradcheck(strided, {x, w, b}));
  Tensor xg = rnd({1, 5, 6, 4}, 4).set_requires_grad(), wg = rnd({6, 3, 2, 2}, 5).set_requires_grad();
  auto grouped = [](const TensorList& t) { return conv2d(t[0], t[1], {}, opts({2, 2}, {1, 0}, {1, 1}, 2)); };
  CHECK(gradcheck(grouped, {xg, wg}));
}

TEST_CASE("conv2d computes no input gradient for an input that needs none", "[conv2d]") {
  Tensor x = rnd({2, 5, 5, 3}, 1), w = rnd({2, 3, 3, 3}, 2).set_requires_grad();
  Tensor y = conv2d(x, w, {}, opts({1, 1}, {1, 1}, {1, 1}));
  Tensor gy = rnd(y.shape(), 3);
  y.backward(gy);
  CHECK_FALSE(x.grad().defined());
  CHECK(allclose(w.grad(), ref_wgrad(gy, x, w.shape(), opts({1, 1}, {1, 1}, {1, 1})), 1e-12, 1e-12));
}

TEST_CASE("conv_transpose2d equals a naive scatter and has the documented output size", "[conv2d]") {
  struct T {
    Shape x, w;
    ConvTranspose2dOptions o;
    Shape expect;
  };
  const std::vector<T> cases = {
      // (H-1)s - 2p + d(R-1) + op + 1: (7-1)2 - 2 + 2 + 1 + 1 = 14; (13-1)2 - 2 + 2 + 1 + 1 = 26
      {{2, 7, 13, 3}, {3, 3, 3, 5}, {{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1}, {2, 14, 26, 5}},
      // 2x2 stride 2, the U-Net's upsampling: (7-1)2 + 1 + 1 = 14
      {{1, 7, 5, 4}, {4, 2, 2, 3}, {{2, 2}, {0, 0}, {0, 0}, {1, 1}, 1}, {1, 14, 10, 3}},
      // groups 2, dilation 2, output_padding below dilation but not below stride 1:
      // (7-1)1 - 0 + 2*2 + 1 + 1 = 12; (5-1)3 - 2 + 1*2 + 2 + 1 = 15
      {{2, 7, 5, 4}, {4, 3, 3, 3}, {{1, 3}, {0, 1}, {1, 2}, {2, 1}, 2}, {2, 12, 15, 6}},
  };
  uint64_t seed = 40;
  for (const T& c : cases) {
    CAPTURE(shape_str(c.x), shape_str(c.w));
    Tensor x = rnd(c.x, ++seed), w = rnd(c.w, ++seed), b = rnd({c.expect[3]}, ++seed);
    Tensor y = conv_transpose2d(x, w, b, c.o);
    CHECK(y.shape() == c.expect);
    Tensor ref = ref_conv_transpose(x, w, b, c.o);
    REQUIRE(ref.shape() == c.expect);
    CHECK(allclose(y, ref, 1e-12, 1e-12));
    CHECK(allclose(conv_transpose2d(x.to(f32), w.to(f32), b.to(f32), c.o).to(f64), ref, 1e-5, 1e-5));
  }
}

TEST_CASE("conv_transpose2d is the adjoint of conv2d", "[conv2d]") {
  // <conv2d(a, w), b> == <a, conv_transpose2d(b, w)> for the same stride, padding, dilation.
  Tensor a = rnd({2, 9, 8, 4}, 1), w = rnd({6, 3, 3, 2}, 2);
  Conv2dOptions o = opts({2, 1}, {1, 1}, {1, 2}, 2);
  Tensor y = conv2d(a, w, {}, o);
  Tensor b = rnd(y.shape(), 3);
  Tensor back = conv_transpose2d(b, w, {}, {o.stride, o.padding, {0, 0}, o.dilation, o.groups});
  // y is [2, 5, 6, 6]; back: (5-1)2 - 2 + 2 + 1 = 9 and (6-1) - 2 + 4 + 1 = 8 rows and columns.
  REQUIRE(back.shape() == a.shape());
  CHECK(sum(y * b).item<double>() == Approx(sum(a * back).item<double>()).epsilon(1e-12));
}

TEST_CASE("conv_transpose2d passes gradcheck with stride, padding, dilation, groups and bias", "[conv2d][gradcheck]") {
  Tensor x = rnd({2, 4, 3, 4}, 1).set_requires_grad(), w = rnd({4, 3, 3, 3}, 2).set_requires_grad();
  Tensor b = rnd({3}, 3).set_requires_grad();
  auto strided = [](const TensorList& t) {
    return conv_transpose2d(t[0], t[1], t[2], {{2, 2}, {1, 1}, {1, 0}, {1, 1}, 1});
  };
  CHECK(gradcheck(strided, {x, w, b}));
  Tensor xg = rnd({1, 3, 4, 4}, 4).set_requires_grad(), wg = rnd({4, 3, 2, 3}, 5).set_requires_grad();
  Tensor bg = rnd({6}, 6).set_requires_grad();
  auto grouped = [](const TensorList& t) {
    return conv_transpose2d(t[0], t[1], t[2], {{1, 2}, {1, 0}, {1, 1}, {2, 1}, 2});
  };
  CHECK(gradcheck(grouped, {xg, wg, bg}));
}

TEST_CASE("f16 and bf16 convolutions equal the f64 result of the rounded inputs, rounded once", "[conv2d][numerics]") {
  // Products are exact in f32 and the sums accumulate in f32, so the only sizeable error is the
  // final rounding: half an ulp, 2^-11 (f16) or 2^-8 (bf16) relative; atol covers the f32 sums
  // (up to ~1400 products of magnitude ~1 for the weight gradient).
  for (DType dt : {f16, bf16}) {
    CAPTURE(dtype_name(dt));
    const double rtol = dt == f16 ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8), atol = 5e-5;
    // Few channels (the input is widened whole), 8 channels per group and a pointwise conv
    // (widened run by run), and a size that spans tiles and threads.
    for (const Case& c : {cases()[0], cases()[4], cases()[6],
                          Case{{2, 7, 13, 16}, {6, 3, 3, 8}, opts({2, 2}, {1, 1}, {1, 1}, 2), false},
                          Case{{2, 7, 13, 16}, {5, 1, 1, 16}, opts({1, 1}, {0, 0}, {1, 1}), false},
                          Case{{3, 20, 24, 16}, {8, 3, 3, 16}, opts({1, 1}, {1, 1}, {1, 1}), false}}) {
      CAPTURE(shape_str(c.x), shape_str(c.w));
      Tensor x = rnd(c.x, 5, dt).set_requires_grad(), w = rnd(c.w, 6, dt).set_requires_grad();
      Tensor y = conv2d(x, w, {}, c.o);
      CHECK(y.dtype() == dt);
      Tensor x64 = x.detach().to(f64), w64 = w.detach().to(f64);
      CHECK(allclose(y.to(f64), ref_conv(x64, w64, {}, c.o), rtol, atol));
      Tensor gy = rnd(y.shape(), 7, dt);
      y.backward(gy);
      Tensor gy64 = gy.to(f64);
      CHECK(allclose(x.grad().to(f64), ref_dgrad(gy64, w64, c.x, c.o), rtol, atol));
      CHECK(allclose(w.grad().to(f64), ref_wgrad(gy64, x64, c.w, c.o), rtol, atol));
    }
    Tensor x = rnd({2, 7, 13, 3}, 8, dt), w = rnd({3, 3, 3, 5}, 9, dt);
    ConvTranspose2dOptions to{{2, 2}, {1, 1}, {1, 1}, {1, 1}, 1};
    CHECK(
        allclose(conv_transpose2d(x, w, {}, to).to(f64), ref_conv_transpose(x.to(f64), w.to(f64), {}, to), rtol, atol));
  }
}

TEST_CASE("the 2x2 stride-2 transposed convolution (windows tiling the image) in every dtype, with its gradients",
          "[conv2d][numerics]") {
  // Its forward runs conv2d's input gradient one kernel row at a time (tiling_dgrad), its input
  // gradient conv2d's forward on windows read once; output_padding leaves a row and a column no
  // window covers (the general path), 17 channels are not a multiple of any vector width.
  for (DType dt : {f64, f32, f16, bf16}) {
    for (int64_t op : {0, 1}) {
      CAPTURE(dtype_name(dt), op);
      const double rtol = dt == f16 ? std::ldexp(1.0, -11) : dt == bf16 ? std::ldexp(1.0, -8) : 1e-6;
      const double atol = dt == f64 ? 1e-12 : 5e-5;
      const ConvTranspose2dOptions o{{2, 2}, {0, 0}, {op, op}, {1, 1}, 1};
      Tensor x = rnd({3, 5, 7, 24}, 50, dt).set_requires_grad(), w = rnd({24, 2, 2, 17}, 51, dt).set_requires_grad();
      Tensor b = rnd({17}, 52, dt).set_requires_grad();
      Tensor y = conv_transpose2d(x, w, b, o);
      REQUIRE(y.shape() == Shape{3, 10 + op, 14 + op, 17});
      Tensor x64 = x.detach().to(f64), w64 = w.detach().to(f64), b64 = b.detach().to(f64);
      CHECK(allclose(y.to(f64), ref_conv_transpose(x64, w64, b64, o), rtol, atol));
      // The transposed convolution's gradients are conv2d's: the input's the forward of the
      // 2x2 stride-2 conv2d on gy, the weight's that conv2d's weight gradient with roles swapped.
      Tensor gy = rnd(y.shape(), 53, dt);
      y.backward(gy);
      Tensor gy64 = gy.to(f64);
      const Conv2dOptions c = opts({2, 2}, {0, 0}, {1, 1});
      CHECK(allclose(x.grad().to(f64), ref_conv(gy64, w64, {}, c), rtol, atol));
      CHECK(allclose(w.grad().to(f64), ref_wgrad(x64, gy64, w64.shape(), c), rtol,
                     atol));
    }
  }
}

TEST_CASE("f16 convolution accumulates in f32 and overflows only on the rounded output", "[conv2d][numerics]") {
  // 300*300 + 300*(-300) + 2*1: partial sums of 90000 exceed f16's 65504, the result does not.
  Tensor x = from_vector({300, 300, 2}, {1, 1, 1, 3}, {f16}), w = from_vector({300, -300, 1}, {1, 1, 1, 3}, {f16});
  CHECK(conv2d(x, w).item<double>() == 2.0);
  Tensor w2 = from_vector({300, 300, 1}, {1, 1, 1, 3}, {f16});
  CHECK(std::isinf(conv2d(x, w2).item<double>()));  // 180002 > 65504
  CHECK(std::isnan(conv2d(from_vector({NAN, 1, 1}, {1, 1, 1, 3}, {f16}), w).item<double>()));
}

TEST_CASE("conv2d refuses mixed dtypes outside autocast and follows the policy inside", "[conv2d][dtype]") {
  CHECK_THROWS_WITH(conv2d(ones({1, 3, 3, 2}, {f16}), ones({1, 1, 1, 2}, {f32})),
                    Catch::Contains("conv2d: expected both operands to have the same dtype, got f16 and f32") &&
                        Catch::Contains("weight f32[1, 1, 1, 2]"));
  CHECK_THROWS_WITH(conv2d(ones({1, 3, 3, 2}, {f16}), ones({1, 1, 1, 2}, {bf16})), Catch::Contains("got f16 and bf16"));
  CHECK_THROWS_WITH(conv_transpose2d(ones({1, 3, 3, 2}, {bf16}), ones({2, 1, 1, 1}, {bf16}), ones({1}, {f64})),
                    Catch::Contains("conv_transpose2d: expected all operands to have the same dtype, got bf16, bf16 and f64"));
  amp::Autocast ac(f16);
  CHECK(conv2d(ones({1, 3, 3, 2}, {f16}), ones({1, 1, 1, 2}, {f32}), ones({1}, {f32})).dtype() == f16);
}

TEST_CASE("conv2d and conv_transpose2d errors name the op, the shapes and what is valid", "[conv2d][errors]") {
  const Tensor x = ones({1, 5, 5, 3}), w = ones({2, 3, 3, 3});
  CHECK_THROWS_WITH(conv2d(ones({5, 5, 3}), w),
                    Catch::Contains("conv2d") && Catch::Contains("4-D NHWC") && Catch::Contains("[5, 5, 3]"));
  CHECK_THROWS_WITH(conv2d(x, ones({2, 3, 3})), Catch::Contains("weight must be 4-D") && Catch::Contains("[2, 3, 3]"));
  CHECK_THROWS_WITH(conv2d(x, ones({2, 3, 3, 4})),
                    Catch::Contains("3 channels") && Catch::Contains("[2, 3, 3, 4]") && Catch::Contains("expects 4"));
  CHECK_THROWS_WITH(conv2d(x, ones({2, 3, 3, 1}), {}, opts({1, 1}, {0, 0}, {1, 1}, 2)),
                    Catch::Contains("input channels 3") && Catch::Contains("not divisible by groups 2"));
  CHECK_THROWS_WITH(conv2d(ones({1, 5, 5, 4}), ones({3, 3, 3, 2}), {}, opts({1, 1}, {0, 0}, {1, 1}, 2)),
                    Catch::Contains("output channels 3") && Catch::Contains("[3, 3, 3, 2]"));
  CHECK_THROWS_WITH(conv2d(ones({1, 4, 4, 1}), ones({1, 5, 5, 1})),
                    Catch::Contains("larger than the padded input 4x4") && Catch::Contains("[1, 4, 4, 1]"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, opts({1, 1}, {0, 0}, {3, 1})), Catch::Contains("7x3") && Catch::Contains("5x5"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, opts({0, 1}, {0, 0}, {1, 1})),
                    Catch::Contains("stride must be positive, got (0, 1)"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, opts({1, 1}, {0, 0}, {1, 0})), Catch::Contains("dilation must be positive"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, opts({1, 1}, {-1, 0}, {1, 1})), Catch::Contains("padding must be non-negative"));
  CHECK_THROWS_WITH(conv2d(x, w, {}, opts({1, 1}, {0, 0}, {1, 1}, 0)), Catch::Contains("groups must be positive"));
  CHECK_THROWS_WITH(conv2d(x, ones({2, 0, 3, 3})), Catch::Contains("kernel size must be positive"));
  CHECK_THROWS_WITH(conv2d(x, w, ones({3})), Catch::Contains("bias [3] must be [2]"));
  CHECK_THROWS_WITH(conv2d(ones({1, 5, 5, 3}, {i64}), w), Catch::Contains("floating") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(conv2d(Tensor(), w), Catch::Contains("must be defined"));

  CHECK_THROWS_WITH(conv_transpose2d(x, ones({2, 3, 3, 4})), Catch::Contains("conv_transpose2d") &&
                                                                 Catch::Contains("3 channels") &&
                                                                 Catch::Contains("its first dim"));
  CHECK_THROWS_WITH(conv_transpose2d(x, ones({3, 3, 3, 4}), {}, {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 2}),
                    Catch::Contains("not divisible by groups 2"));
  CHECK_THROWS_WITH(conv_transpose2d(ones({1, 1, 1, 1}), ones({1, 1, 1, 1}), {}, {{1, 1}, {1, 1}, {0, 0}, {1, 1}, 1}),
                    Catch::Contains("output size -1x-1 is not positive"));
  CHECK_THROWS_WITH(conv_transpose2d(x, w.view({3, 3, 3, 2}), {}, {{2, 2}, {0, 0}, {2, 0}, {1, 1}, 1}),
                    Catch::Contains("output_padding (2, 0)") && Catch::Contains("smaller than either stride (2, 2)"));
  CHECK_NOTHROW(conv_transpose2d(x, w.view({3, 3, 3, 2}), {}, {{1, 1}, {0, 0}, {1, 0}, {2, 1}, 1}));
  CHECK_THROWS_WITH(conv_transpose2d(x, w.view({3, 3, 3, 2}), ones({3})), Catch::Contains("bias [3] must be [2]"));
}

TEST_CASE("conv_transpose2d adds its bias in the f32 sum and rounds once", "[conv2d][numerics]") {
  // 1024 + 0.25 is no f16 (it rounds to 1024, and 1024 - 1024 = 0); summed in f32 with the
  // bias -1024 it is 0.25. In bf16 256 + 0.5 rounds to 256 (spacing 2 there).
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    const auto vec = [&](std::vector<double> v, Shape s, DType dt) { return from_vector(v, s, {dt, d}); };
    const auto values = [](const Tensor& t) { return t.to(Device::cpu()).to_vector<double>(); };
    const Tensor w = vec({1, 1}, {2, 1, 1, 1}, f16);
    CHECK(values(conv_transpose2d(vec({1024, 0.25}, {1, 1, 1, 2}, f16), w, vec({-1024}, {1}, f16))) ==
          std::vector<double>{0.25});
    CHECK(values(conv_transpose2d(vec({256, 0.5}, {1, 1, 1, 2}, bf16), vec({1, 1}, {2, 1, 1, 1}, bf16),
                                  vec({-256}, {1}, bf16))) == std::vector<double>{0.5});
    // Two groups: each group's output channels take their own bias.
    const Tensor yg = conv_transpose2d(vec({1024, 0.25, 1024, 0.25}, {1, 1, 1, 4}, f16), vec({1, 1, 1, 1}, {4, 1, 1, 1}, f16),
                                       vec({-1024, -1023}, {2}, f16), {{1, 1}, {0, 0}, {0, 0}, {1, 1}, 2});
    CHECK(values(yg) == std::vector<double>{0.25, 1.25});
    // Stride 2 with output_padding 1: the output pixels no input reaches hold the bias alone.
    const Tensor ys = conv_transpose2d(vec({1024, 0.25}, {1, 1, 1, 2}, f16), w, vec({-1024}, {1}, f16),
                                       {{2, 2}, {0, 0}, {1, 1}, {1, 1}, 1});
    CHECK(values(ys) == std::vector<double>{0.25, -1024, -1024, -1024});
  }
}

TEST_CASE("empty batches give empty outputs and zero channels give zeros", "[conv2d]") {
  Tensor w = rnd({4, 3, 3, 2}, 1).set_requires_grad();
  Tensor y = conv2d(zeros({0, 5, 5, 2}, {f64}), w, {}, opts({1, 1}, {1, 1}, {1, 1}));
  CHECK(y.shape() == Shape{0, 5, 5, 4});
  sum(y).backward();
  CHECK(allclose(w.grad(), zeros({4, 3, 3, 2}, {f64})));
  Tensor b = tensor({1.0, -2.0}, {f64});
  Tensor z = conv2d(ones({1, 4, 4, 0}, {f64}), ones({2, 3, 3, 0}, {f64}), b);
  CHECK(allclose(z, b.expand({1, 2, 2, 2})));
}

TEST_CASE("conv2d refuses operands on different devices", "[conv2d][errors]") {
  HG_REQUIRE_CUDA();
  CHECK_THROWS_WITH(conv2d(ones({1, 3, 3, 1}, {f32, Device::cuda()}), ones({1, 1, 1, 1})),
                    Catch::Contains("conv2d") && Catch::Contains("one device") && Catch::Contains("cuda:0"));
}
