// batch_norm: forward and backward against naive f64 loops, gradchecks in both modes,
// running statistics, f16/bf16 inputs with f32 parameters, f32 accumulation, errors.
#include <catch2/catch.hpp>
#include <cmath>

#include "halfgrad.h"

using namespace hg;

namespace {

Tensor leaf(const Shape& s, uint64_t seed, double lo, double hi) {
  Generator g(seed);
  return uniform(s, lo, hi, {f64}, &g).set_requires_grad();
}

// Batch normalisation of x viewed as [M, C] in f64, straight from the definition.
struct Reference {
  std::vector<double> y, mean, var;  // var biased
};
Reference reference(const std::vector<double>& x, int64_t C, const std::vector<double>& w,
                    const std::vector<double>& b, double eps) {
  const int64_t M = static_cast<int64_t>(x.size()) / C;
  Reference r{std::vector<double>(x.size()), std::vector<double>(C, 0.0), std::vector<double>(C, 0.0)};
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c) r.mean[c] += x[m * C + c] / M;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c) r.var[c] += (x[m * C + c] - r.mean[c]) * (x[m * C + c] - r.mean[c]) / M;
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c)
      r.y[m * C + c] = (x[m * C + c] - r.mean[c]) / std::sqrt(r.var[c] + eps) * w[c] + b[c];
  return r;
}

// The training-mode input gradient, from differentiating the definition by hand.
std::vector<double> reference_grad_x(const std::vector<double>& x, const std::vector<double>& gy, int64_t C,
                                     const std::vector<double>& w, double eps) {
  const int64_t M = static_cast<int64_t>(x.size()) / C;
  Reference r = reference(x, C, std::vector<double>(C, 1.0), std::vector<double>(C, 0.0), eps);
  std::vector<double> sg(C, 0.0), sgx(C, 0.0), gx(x.size());
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c) {
      sg[c] += gy[m * C + c];
      sgx[c] += gy[m * C + c] * r.y[m * C + c];
    }
  for (int64_t m = 0; m < M; ++m)
    for (int64_t c = 0; c < C; ++c)
      gx[m * C + c] = w[c] / std::sqrt(r.var[c] + eps) / M * (M * gy[m * C + c] - sg[c] - r.y[m * C + c] * sgx[c]);
  return gx;
}

double max_abs(const std::vector<double>& v) {
  double m = 0;
  for (double e : v) m = std::max(m, std::abs(e));
  return m;
}

// |a - b| <= rtol * |b| + atol elementwise.
bool close(const std::vector<double>& a, const std::vector<double>& b, double rtol, double atol) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(std::abs(a[i] - b[i]) <= rtol * std::abs(b[i]) + atol)) return false;
  return true;
}

}  // namespace

TEST_CASE("batch_norm in training normalises each channel like the f64 definition", "[batch_norm]") {
  // [4, 64, 64, 9]: enough rows for the kernels to split the work; channels far from zero mean.
  for (DType dt : {f64, f32}) {
    Generator g(3);
    Tensor x = normal({4, 64, 64, 9}, 5.0, 2.0, {dt}, &g);
    Tensor w = uniform({9}, 0.5, 1.5, {dt}, &g), b = uniform({9}, -1.0, 1.0, {dt}, &g);
    Tensor y = batch_norm(x, w, b, Tensor(), Tensor(), true, 0.1, 1e-5);
    Reference r = reference(x.to_vector<double>(), 9, w.to_vector<double>(), b.to_vector<double>(), 1e-5);
    CHECK(y.dtype() == dt);
    const double tol = dt == f64 ? 1e-12 : 2e-5;
    CHECK(close(y.to_vector<double>(), r.y, tol, tol));
  }
}

TEST_CASE("batch_norm passes gradcheck in f64 in training and eval mode", "[batch_norm][gradcheck]") {
  Tensor x = leaf({3, 5, 3}, 1, -2, 3), w = leaf({3}, 2, 0.5, 2), b = leaf({3}, 3, -1, 1);
  CHECK(gradcheck([](const TensorList& t) { return batch_norm(t[0], t[1], t[2], Tensor(), Tensor(), true); },
                  {x, w, b}));
  CHECK(gradcheck([](const TensorList& t) { return batch_norm(t[0], Tensor(), Tensor(), Tensor(), Tensor(), true); },
                  {x}));
  // Tracking running statistics does not change the gradient.
  Tensor rm = zeros({3}, {f64}), rv = ones({3}, {f64});
  CHECK(gradcheck([&](const TensorList& t) { return batch_norm(t[0], t[1], t[2], rm, rv, true); }, {x, w, b}));
  Tensor em = tensor({0.3, -0.2, 1.1}, {f64}), ev = tensor({0.5, 2.0, 1.3}, {f64});
  CHECK(gradcheck([&](const TensorList& t) { return batch_norm(t[0], t[1], t[2], em, ev, false); }, {x, w, b}));
  // A non-contiguous input (the channels-last view of a channels-first tensor).
  Tensor xc = leaf({3, 2, 5}, 4, -1, 1);
  CHECK(gradcheck([&](const TensorList& t) { return batch_norm(t[0].transpose(1, 2), t[1], t[2], Tensor(), Tensor(), true); },
                  {xc, leaf({2}, 5, 0.5, 2), leaf({2}, 6, -1, 1)}));
}

TEST_CASE("batch_norm tracks running statistics with the unbiased variance", "[batch_norm]") {
  // x [2, 2, 2] is [M = 4, C = 2]; element (m, c) sits at m * 2 + c.
  Tensor rm = zeros({2}), rv = ones({2});
  Tensor x1 = from_vector({1, -1, 2, -1, 3, -1, 4, -1}, {2, 2, 2});
  Tensor x2 = from_vector({0, 2, 0, -2, 4, 2, 8, -2}, {2, 2, 2});
  batch_norm(x1, Tensor(), Tensor(), rm, rv, true, 0.1);
  // Channel 0: mean 2.5, unbiased var 5/3. Channel 1: mean -1, var 0.
  CHECK(rm.to_vector<double>()[0] == Approx(0.25).epsilon(1e-6));
  CHECK(rm.to_vector<double>()[1] == Approx(-0.1).epsilon(1e-6));
  CHECK(rv.to_vector<double>()[0] == Approx(0.9 + 0.1 * 5.0 / 3.0).epsilon(1e-6));
  CHECK(rv.to_vector<double>()[1] == Approx(0.9).epsilon(1e-6));
  batch_norm(x2, Tensor(), Tensor(), rm, rv, true, 0.1);
  // Channel 0: mean 3, unbiased var 44/3. Channel 1: mean 0, unbiased var 16/3.
  CHECK(rm.to_vector<double>()[0] == Approx(0.9 * 0.25 + 0.1 * 3.0).epsilon(1e-6));
  CHECK(rm.to_vector<double>()[1] == Approx(0.9 * -0.1).epsilon(1e-6));
  CHECK(rv.to_vector<double>()[0] == Approx(0.9 * (0.9 + 0.1 * 5.0 / 3.0) + 0.1 * 44.0 / 3.0).epsilon(1e-6));
  CHECK(rv.to_vector<double>()[1] == Approx(0.81 + 0.1 * 16.0 / 3.0).epsilon(1e-6));
  CHECK_FALSE(rm.requires_grad());

  // Eval mode normalises with them and leaves them alone.
  Tensor w = tensor({2.0, 0.5}), b = tensor({0.25, -1.0});
  Tensor y = batch_norm(x2, w, b, rm, rv, false, 0.1, 1e-3);
  std::vector<double> xs = x2.to_vector<double>(), ys = y.to_vector<double>(), m = rm.to_vector<double>(),
                      v = rv.to_vector<double>();
  for (int64_t i = 0; i < 8; ++i) {
    const int64_t c = i % 2;
    CHECK(ys[i] == Approx((xs[i] - m[c]) / std::sqrt(v[c] + 1e-3) * (c ? 0.5 : 2.0) + (c ? -1.0 : 0.25)).epsilon(1e-6));
  }
  CHECK(rm.to_vector<double>()[0] == Approx(0.9 * 0.25 + 0.1 * 3.0).epsilon(1e-6));
}

TEST_CASE("batch_norm on f16/bf16 input with f32 parameters computes in f32 and rounds once", "[batch_norm]") {
  for (DType dt : {f16, bf16}) {
    Generator g(11);
    const int64_t C = 5;
    Tensor x = normal({6, 7, 9, C}, 3.0, 2.0, {dt}, &g);  // rounded inputs: the reference sees the same values
    Tensor w = uniform({C}, 0.5, 1.5, {f32, Device::cpu(), true}, &g);
    Tensor b = uniform({C}, -1.0, 1.0, {f32, Device::cpu(), true}, &g);
    Tensor rm = zeros({C}), rv = ones({C});
    Tensor xg = x.detach().set_requires_grad();
    Tensor y = batch_norm(xg, w, b, rm, rv, true, 1.0);  // momentum 1: the running stats are the batch's
    REQUIRE(y.dtype() == dt);
    std::vector<double> xs = x.to_vector<double>(), ws = w.to_vector<double>(), bs = b.to_vector<double>();
    Reference r = reference(xs, C, ws, bs, 1e-5);
    const int64_t M = 6 * 7 * 9;
    std::vector<double> unbiased(C);
    for (int64_t c = 0; c < C; ++c) unbiased[c] = r.var[c] * M / (M - 1);
    // Statistics accumulate in f32: far tighter than the 16-bit formats.
    CHECK(close(rm.to_vector<double>(), r.mean, 1e-6, 1e-6));
    CHECK(close(rv.to_vector<double>(), unbiased, 1e-5, 0));
    // The output is rounded once to the 16-bit format: half an ulp (2^-11 f16, 2^-8 bf16) plus slack.
    const double tol = dt == f16 ? 1e-3 : 8e-3;
    CHECK(close(y.to_vector<double>(), r.y, tol, tol * 0.1));

    Tensor gy = normal(y.shape(), 0.0, 1.0, {dt}, &g);
    y.backward(gy);
    REQUIRE(xg.grad().dtype() == dt);
    REQUIRE(w.grad().dtype() == f32);
    std::vector<double> gys = gy.to_vector<double>();
    std::vector<double> gx = reference_grad_x(xs, gys, C, ws, 1e-5);
    CHECK(close(xg.grad().to_vector<double>(), gx, tol, tol * max_abs(gx)));
    std::vector<double> gw(C, 0.0), gb(C, 0.0);
    Reference xhat = reference(xs, C, std::vector<double>(C, 1.0), std::vector<double>(C, 0.0), 1e-5);
    for (int64_t i = 0; i < M * C; ++i) {
      gw[i % C] += gys[i] * xhat.y[i];
      gb[i % C] += gys[i];
    }
    CHECK(close(w.grad().to_vector<double>(), gw, 1e-4, 1e-4));
    CHECK(close(b.grad().to_vector<double>(), gb, 1e-5, 1e-5));
  }
}

TEST_CASE("batch_norm statistics of f16 data whose f16 sums would overflow stay exact", "[batch_norm]") {
  // Values near 300 over 32768 rows: the sum (~1e7) and sum of squares (~3e9) lie far
  // beyond f16's 65504; accumulated in f32 the statistics are right.
  Generator g(5);
  const int64_t C = 5;
  Tensor x = uniform({32768, C}, 280.0, 320.0, {f16}, &g);
  Tensor rm = zeros({C}), rv = zeros({C});
  Tensor y = batch_norm(x, Tensor(), Tensor(), rm, rv, true, 1.0);
  Reference r = reference(x.to_vector<double>(), C, std::vector<double>(C, 1.0), std::vector<double>(C, 0.0), 1e-5);
  CHECK(close(rm.to_vector<double>(), r.mean, 1e-6, 0));
  std::vector<double> unbiased(C);
  for (int64_t c = 0; c < C; ++c) unbiased[c] = r.var[c] * 32768 / 32767;
  CHECK(close(rv.to_vector<double>(), unbiased, 1e-4, 0));
  CHECK(close(y.to_vector<double>(), r.y, 1e-3, 1e-3));
}

TEST_CASE("batch_norm variance stays accurate when the mean dwarfs the spread", "[batch_norm]") {
  // Mean 1e4, std 1 in f32: E[x^2] - E[x]^2 would cancel 1e8 against 1e8 in f32 (ulp 8)
  // and lose every digit; deviations from the mean keep them.
  Generator g(8);
  Tensor x = normal({20000, 3}, 1e4, 1.0, {f32}, &g);
  Tensor rm = zeros({3}), rv = zeros({3});
  batch_norm(x, Tensor(), Tensor(), rm, rv, true, 1.0);
  Reference r = reference(x.to_vector<double>(), 3, {1, 1, 1}, {0, 0, 0}, 1e-5);
  std::vector<double> unbiased(3);
  for (int64_t c = 0; c < 3; ++c) unbiased[c] = r.var[c] * 20000 / 19999;
  CHECK(close(rv.to_vector<double>(), unbiased, 1e-4, 0));
}

TEST_CASE("batch_norm errors name the argument, the shapes and what is valid", "[batch_norm][errors]") {
  Tensor x = ones({4, 3});
  CHECK_THROWS_WITH(batch_norm(x, ones({4}), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("batch_norm") && Catch::Contains("weight") && Catch::Contains("[4]") &&
                        Catch::Contains("[4, 3]") && Catch::Contains("expected [3]"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), ones({3, 1}), Tensor(), Tensor(), true),
                    Catch::Contains("bias") && Catch::Contains("[3, 1]"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), zeros({2}), ones({2}), true),
                    Catch::Contains("running_mean") && Catch::Contains("[2]"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), zeros({3}), Tensor(), true), Catch::Contains("together"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), false),
                    Catch::Contains("eval mode") && Catch::Contains("running_mean"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 1.5),
                    Catch::Contains("momentum") && Catch::Contains("[0, 1]") && Catch::Contains("1.5"));
  CHECK_THROWS_WITH(batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 0.0),
                    Catch::Contains("eps") && Catch::Contains("> 0"));
  CHECK_THROWS_WITH(batch_norm(ones({1, 1, 3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("expected more than 1 value per channel when training") &&
                        Catch::Contains("[1, 1, 3]"));
  CHECK_NOTHROW(batch_norm(ones({1, 1, 3}), Tensor(), Tensor(), zeros({3}), ones({3}), false));
  CHECK_THROWS_WITH(batch_norm(ones({3}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("at least 2 dimensions") && Catch::Contains("[3]"));
  CHECK_THROWS_WITH(batch_norm(ones({4, 3}, {i64}), Tensor(), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("batch_norm") && Catch::Contains("floating") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(batch_norm(x, ones({3}, {i64}), Tensor(), Tensor(), Tensor(), true),
                    Catch::Contains("weight") && Catch::Contains("i64"));
}

TEST_CASE("batch_norm propagates NaN only through its own channel", "[batch_norm]") {
  Tensor x = from_vector({1, 2, NAN, 4, 5, 6}, {3, 2});
  std::vector<double> y = batch_norm(x, Tensor(), Tensor(), Tensor(), Tensor(), true).to_vector<double>();
  CHECK(std::isnan(y[0]));
  CHECK(std::isnan(y[2]));
  CHECK(y[1] == Approx(-std::sqrt(1.5)).epsilon(1e-4));  // channel 1: 2, 4, 6 -> var 8/3
  CHECK(y[5] == Approx(std::sqrt(1.5)).epsilon(1e-4));
}

namespace {

// Equal values with equal signs (+0 and -0 differ), or both NaN.
bool same_values(const Tensor& a, const Tensor& b) {
  const std::vector<double> u = a.to_vector<double>(), v = b.to_vector<double>();
  if (u.size() != v.size()) return false;
  for (size_t i = 0; i < u.size(); ++i) {
    const bool nan = std::isnan(u[i]) && std::isnan(v[i]);
    if (!nan && (u[i] != v[i] || std::signbit(u[i]) != std::signbit(v[i]))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("batch_norm_relu gives relu(batch_norm) bit for bit, forward and backward", "[batch_norm]") {
  for (DType dt : {f64, f32, f16, bf16})
    for (int64_t C : {5, 16})  // the scalar rows, and (f32/f16/bf16) the 8-lane ones
      for (bool training : {true, false}) {
        INFO(dtype_name(dt) << " C = " << C << (training ? " training" : " eval"));
        Generator g(31 + C);
        const DType S = dt == f64 ? f64 : f32;
        std::vector<double> xv = normal({3, 5, 7, C}, 0.5, 2.0, {f64}, &g).to_vector<double>();
        std::vector<double> wv = uniform({C}, 0.5, 1.5, {f64}, &g).to_vector<double>();
        wv[0] = 0.0;  // channel 0: every output an exact zero (relu's mask: none pass)
        // channel 2 (no bias): outputs so small that positive ones round to +0 in f16 (below
        // 2^-25) and some in bf16 (below 2^-134): the mask is the rounded output's, not the sum's.
        wv[2] = dt == bf16 ? 1e-40 : 1e-9;
        if (!training) xv[static_cast<size_t>(((1 * 5 + 2) * 7 + 3) * C + 1)] = std::nan("");  // eval: one NaN output
        const Tensor x = from_data<double>(xv, {3, 5, 7, C}).to(dt), w = from_data<double>(wv, {C}).to(S);
        std::vector<double> bv = uniform({C}, -1.0, 1.0, {f64}, &g).to_vector<double>();
        bv[2] = 0.0;
        const Tensor b = from_data<double>(bv, {C}).to(S);
        Tensor gy = normal(x.shape(), 0.0, 1.0, {dt}, &g);
        Tensor rm = uniform({C}, -0.5, 0.5, {S}, &g), rv = uniform({C}, 0.5, 2.0, {S}, &g);
        auto run = [&](bool fused, Tensor& rm_out, Tensor& rv_out) {
          Tensor xl = x.detach().set_requires_grad(), wl = w.detach().set_requires_grad();
          Tensor bl = b.detach().set_requires_grad();
          rm_out = rm.clone(), rv_out = rv.clone();
          Tensor y = fused ? batch_norm_relu(xl, wl, bl, rm_out, rv_out, training)
                           : relu(batch_norm(xl, wl, bl, rm_out, rv_out, training));
          y.backward(gy);
          return std::vector<Tensor>{y, xl.grad(), wl.grad(), bl.grad()};
        };
        Tensor rm1, rv1, rm2, rv2;
        const std::vector<Tensor> two_ops = run(false, rm1, rv1), fused = run(true, rm2, rv2);
        for (size_t i = 0; i < two_ops.size(); ++i) {
          INFO((i == 0 ? "y" : i == 1 ? "grad x" : i == 2 ? "grad weight" : "grad bias"));
          REQUIRE(fused[i].dtype() == two_ops[i].dtype());
          CHECK(same_values(fused[i], two_ops[i]));
        }
        CHECK(same_values(rm1, rm2));
        CHECK(same_values(rv1, rv2));
        // The mask did something: the zero channel's outputs and gradients, and some negatives.
        const std::vector<double> y = fused[0].to_vector<double>();
        CHECK(std::count(y.begin(), y.end(), 0.0) > static_cast<long>(y.size() / C));
        CHECK(std::all_of(y.begin(), y.end(), [](double v) { return !(v < 0); }));
      }
}

TEST_CASE("BatchNorm2d with_relu is BatchNorm2d then ReLU", "[batch_norm][nn]") {
  Generator g(5);
  nn::BatchNorm2d plain(8), fused(8, 1e-5, 0.1, true);
  Tensor x = normal({2, 3, 4, 8}, 0.0, 1.0, {f32}, &g);
  CHECK(same_values(fused(x), relu(plain(x))));
  CHECK(same_values(fused.running_mean, plain.running_mean));
  fused.eval(), plain.eval();
  CHECK(same_values(fused(x), relu(plain(x))));
}
