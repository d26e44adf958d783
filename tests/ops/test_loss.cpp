// Losses: values against naive f64 loops, PyTorch's weighted mean and ignore_index for
// cross-entropy, stability at extreme logits, gradchecks, and the error messages.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

// sum over kept rows of w[t] (lse - x_t) / sum of w[t]; w empty means all ones.
double ce_reference(const std::vector<double>& x, const std::vector<int64_t>& t, int64_t C,
                    const std::vector<double>& w, int64_t ignore) {
  double num = 0, den = 0;
  for (size_t r = 0; r < t.size(); ++r) {
    if (t[r] == ignore) continue;
    double m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, x[r * C + c]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(x[r * C + c] - m);
    const double wt = w.empty() ? 1.0 : w[static_cast<size_t>(t[r])];
    num += wt * (m + std::log(s) - x[r * C + static_cast<size_t>(t[r])]);
    den += wt;
  }
  return num / den;
}

// Per-class (2 sum p y + eps) / (sum p + sum y + eps).
std::vector<double> dice_reference(const std::vector<double>& p, const std::vector<int64_t>& t, int64_t C,
                                   double eps) {
  std::vector<double> out(static_cast<size_t>(C));
  for (int64_t c = 0; c < C; ++c) {
    double inter = 0, ps = 0, ys = 0;
    for (size_t r = 0; r < t.size(); ++r) {
      const double y = t[r] == c ? 1.0 : 0.0;
      inter += p[r * C + c] * y;
      ps += p[r * C + c];
      ys += y;
    }
    out[static_cast<size_t>(c)] = (2 * inter + eps) / (ps + ys + eps);
  }
  return out;
}

Tensor labels(const std::vector<int64_t>& v, const Shape& s) { return from_data<int64_t>(v, s, {i64}); }

Tensor leaf(const Shape& s, uint64_t seed, double lo = -3, double hi = 3) {
  Generator g(seed);
  return uniform(s, lo, hi, {f64}, &g).set_requires_grad();
}

}  // namespace

TEST_CASE("cross_entropy is PyTorch's weighted mean over non-ignored positions", "[loss]") {
  Generator g(3);
  Tensor x = uniform({2, 3, 5}, -4, 4, {f64}, &g);
  const std::vector<int64_t> tv{4, 0, -100, 2, 2, 1};
  const std::vector<double> w{0.5, 2.0, 1.0, 3.0, 0.25};
  const std::vector<double> xv = x.to_vector<double>();
  Tensor t = labels(tv, {2, 3});
  Tensor plain = cross_entropy(x, t);
  CHECK(plain.dim() == 0);
  CHECK(plain.dtype() == f64);
  CHECK(plain.item<double>() == Approx(ce_reference(xv, tv, 5, {}, -100)).epsilon(1e-13));
  const Tensor wt = from_vector(w, {5}, {f64});
  CHECK(cross_entropy(x, t, {.weight = wt}).item<double>() == Approx(ce_reference(xv, tv, 5, w, -100)).epsilon(1e-13));
  // ignore_index may name a real class; -100 then is an invalid label.
  const std::vector<int64_t> tv2{4, 0, 1, 2, 2, 1};
  CHECK(cross_entropy(x, labels(tv2, {2, 3}), {.ignore_index = 2, .weight = wt}).item<double>() ==
        Approx(ce_reference(xv, tv2, 5, w, 2)).epsilon(1e-13));
  CHECK_THROWS_WITH(cross_entropy(x, t, {.ignore_index = 2, .weight = {}}), Catch::Contains("-100"));
  // Several blocks of rows (the partial sums are combined in order), f32 weights with f32 logits.
  Tensor big = uniform({5, 16, 16, 4}, -6, 6, {f32}, &g);
  Tensor bt = randint(0, 4, {5, 16, 16}, {i64}, &g);
  const double ref = ce_reference(big.to_vector<double>(), bt.to_vector<int64_t>(), 4, {1, 2, 3, 4}, -100);
  const double got = cross_entropy(big, bt, {.weight = tensor({1, 2, 3, 4})}).item<double>();
  CHECK(got == Approx(ref).epsilon(1e-5));
}

TEST_CASE("cross_entropy in f16 and bf16 equals the f64 result of the rounded logits, rounded once", "[loss][numerics]") {
  for (DType dt : {f16, bf16}) {
    const double rtol = dt == f16 ? 1e-3 : 8e-3;  // one rounding of the output
    Generator g(21);
    Tensor x = uniform({7, 9, 6}, -5, 5, {dt}, &g);
    Tensor t = randint(0, 6, {7, 9}, {i64}, &g);
    Tensor loss = cross_entropy(x, t);
    CHECK(loss.dtype() == dt);
    CHECK(loss.item<double>() ==
          Approx(ce_reference(x.to_vector<double>(), t.to_vector<int64_t>(), 6, {}, -100)).epsilon(rtol));
  }
  // Logits far beyond exp's range stay finite: log-sum-exp subtracts the maximum.
  Tensor huge = tensor({20000, -20000, 0, -20000, 20000, 19984}, {f16}).reshape({2, 3});
  const double l = cross_entropy(huge, labels({1, 2}, {2})).item<double>();
  CHECK(std::isfinite(l));
  CHECK(l == Approx(0.5 * (40000 + 16)).epsilon(1e-3));
}

TEST_CASE("cross_entropy backward is (softmax - onehot) w[t] / sum w, zero where ignored", "[loss]") {
  Generator g(4);
  Tensor x = uniform({6, 4}, -3, 3, {f16}, &g).set_requires_grad();
  const std::vector<int64_t> tv{3, -1, 0, 3, 1, 2};
  const std::vector<double> w{1.5, 0.5, 2.0, 1.0};
  Tensor loss = cross_entropy(x, labels(tv, {6}), {.ignore_index = -1, .weight = from_vector(w, {4}, {f16})});
  loss.backward();
  CHECK(x.grad().dtype() == f16);
  const std::vector<double> xv = x.to_vector<double>(), gv = x.grad().to_vector<double>();
  double den = 0;
  for (int64_t t : tv)
    if (t >= 0) den += w[static_cast<size_t>(t)];
  for (size_t r = 0; r < 6; ++r) {
    double m = -INFINITY, s = 0;
    for (size_t c = 0; c < 4; ++c) m = std::max(m, xv[r * 4 + c]);
    for (size_t c = 0; c < 4; ++c) s += std::exp(xv[r * 4 + c] - m);
    for (size_t c = 0; c < 4; ++c) {
      const double p = std::exp(xv[r * 4 + c] - m) / s;
      const double ref = tv[r] < 0 ? 0.0 : (p - (tv[r] == static_cast<int64_t>(c))) * w[static_cast<size_t>(tv[r])] / den;
      CHECK(gv[r * 4 + c] == Approx(ref).epsilon(2e-3).margin(1e-5));
    }
  }
}

TEST_CASE("cross_entropy passes gradcheck with weights and with ignore_index", "[loss][gradcheck]") {
  Tensor x = leaf({3, 5, 7}, 1);
  Tensor t = labels({0, 6, 3, 3, 1, 5, 2, 4, 6, 0, 1, 2, 5, 4, 3}, {3, 5});
  Tensor ti = labels({0, -100, 3, 3, -100, 5, 2, 4, 6, -100, 1, 2, 5, 4, 3}, {3, 5});
  Tensor w = tensor({0.3, 1.7, 1.0, 2.5, 0.8, 1.2, 0.6}, {f64});
  CHECK(gradcheck([&](const TensorList& a) { return cross_entropy(a[0], t, {.weight = w}); }, {x}));
  CHECK(gradcheck([&](const TensorList& a) { return cross_entropy(a[0], ti); }, {x}));
  CHECK(gradcheck([&](const TensorList& a) { return cross_entropy(a[0], ti, {.weight = w}); }, {x}));
}

TEST_CASE("cross_entropy with every position ignored is NaN; NaN logits propagate", "[loss][numerics]") {
  Tensor x = tensor({1, 2, 3, 4, 5, 6}).reshape({2, 3});
  Tensor all_ignored = cross_entropy(x, labels({-100, -100}, {2}));
  CHECK(std::isnan(all_ignored.item<double>()));
  Tensor xn = tensor({1, NAN, 3, 4, 5, 6}).reshape({2, 3});
  CHECK(std::isnan(cross_entropy(xn, labels({0, 1}, {2})).item<double>()));
  CHECK(std::isnan(bce_with_logits(tensor({NAN, 1}), tensor({0, 1})).item<double>()));
  CHECK(std::isnan(mse_loss(tensor({NAN, 1}), tensor({0, 1})).item<double>()));
}

TEST_CASE("cross_entropy names the bad label, its position and C; and the bad shapes", "[loss][errors]") {
  Tensor x = ones({2, 3, 5});
  CHECK_THROWS_WITH(cross_entropy(x, labels({0, 1, 2, 3, 4, 7}, {2, 3})),
                    Catch::Contains("target value 7") && Catch::Contains("flat position 5") &&
                        Catch::Contains("[1, 2]") && Catch::Contains("C = 5"));
  // The first bad label is reported, negative ones included.
  CHECK_THROWS_WITH(cross_entropy(x, labels({0, -3, 2, 9, 4, 7}, {2, 3})),
                    Catch::Contains("target value -3") && Catch::Contains("[0, 1]"));
  CHECK_THROWS_WITH(cross_entropy(x, labels({0, 1, 2, 3, 4, 0}, {3, 2})),
                    Catch::Contains("cross_entropy") && Catch::Contains("[3, 2]") && Catch::Contains("[2, 3, 5]"));
  CHECK_THROWS_WITH(cross_entropy(x, labels({0, 1, 2, 3, 4, 0}, {2, 3}), {.weight = ones({4})}),
                    Catch::Contains("weight") && Catch::Contains("[4]") && Catch::Contains("[5]"));
  CHECK_THROWS_WITH(cross_entropy(x, ones({2, 3})), Catch::Contains("i64") && Catch::Contains("f32"));
  CHECK_THROWS_WITH(cross_entropy(scalar_tensor(1.0), labels({0}, {})), Catch::Contains("0-d"));
}

TEST_CASE("bce_with_logits and mse_loss match naive f64 loops", "[loss]") {
  Generator g(8);
  Tensor x = uniform({3, 7, 5}, -5, 5, {f64}, &g), t = uniform({3, 7, 5}, 0, 1, {f64}, &g);
  const std::vector<double> xv = x.to_vector<double>(), tv = t.to_vector<double>();
  double bce = 0, mse = 0;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double p = 1 / (1 + std::exp(-xv[i]));
    bce -= tv[i] * std::log(p) + (1 - tv[i]) * std::log(1 - p);
    mse += (xv[i] - tv[i]) * (xv[i] - tv[i]);
  }
  CHECK(bce_with_logits(x, t).item<double>() == Approx(bce / 105).epsilon(1e-12));
  CHECK(mse_loss(x, t).item<double>() == Approx(mse / 105).epsilon(1e-12));
  for (DType dt : {f16, bf16}) {
    const double rtol = dt == f16 ? 1e-3 : 8e-3;
    Tensor xr = x.to(dt), tr = t.to(dt);
    const std::vector<double> xs = xr.to_vector<double>(), ts = tr.to_vector<double>();
    double m = 0;
    for (size_t i = 0; i < xs.size(); ++i) m += (xs[i] - ts[i]) * (xs[i] - ts[i]);
    CHECK(mse_loss(xr, tr).dtype() == dt);
    CHECK(mse_loss(xr, tr).item<double>() == Approx(m / 105).epsilon(rtol));
  }
  // Stable at logits where the naive formula gives log(0): loss ~ |x| on the wrong side, ~0 on the right one.
  CHECK(bce_with_logits(tensor({100, -100}), tensor({0, 1})).item<double>() == Approx(100.0));
  CHECK(bce_with_logits(tensor({100, -100}), tensor({1, 0})).item<double>() == Approx(0.0).margin(1e-30));
  CHECK(std::isfinite(bce_with_logits(full({4}, -60000, {f16}), ones({4}, {f16})).item<double>()));
}

TEST_CASE("bce_with_logits and mse_loss pass gradcheck in both arguments", "[loss][gradcheck]") {
  Tensor x = leaf({3, 5}, 2), t = leaf({3, 5}, 3, 0.05, 0.95);
  CHECK(gradcheck([](const TensorList& a) { return bce_with_logits(a[0], a[1]); }, {x, t}));
  CHECK(gradcheck([](const TensorList& a) { return mse_loss(a[0], a[1]); }, {x, t}));
  CHECK_THROWS_WITH(mse_loss(ones({2, 3}), ones({3, 2})),
                    Catch::Contains("mse_loss") && Catch::Contains("[2, 3]") && Catch::Contains("[3, 2]"));
  CHECK_THROWS_WITH(bce_with_logits(ones({2}, {i64}), ones({2})), Catch::Contains("floating"));
}

TEST_CASE("soft_dice matches the per-class f64 formula and passes gradcheck", "[loss][gradcheck]") {
  Generator g(6);
  Tensor p = uniform({5, 16, 16, 4}, 0, 1, {f32}, &g);  // several blocks of rows
  Tensor t = randint(0, 4, {5, 16, 16}, {i64}, &g);
  Tensor d = soft_dice(p, t, 1e-6);
  CHECK(d.shape() == Shape{4});
  const std::vector<double> ref = dice_reference(p.to_vector<double>(), t.to_vector<int64_t>(), 4, 1e-6);
  const std::vector<double> got = d.to_vector<double>();
  for (size_t c = 0; c < 4; ++c) CHECK(got[c] == Approx(ref[c]).epsilon(1e-5));

  Tensor pp = leaf({3, 5, 3}, 4, 0.05, 0.95);
  Tensor tt = labels({0, 2, 2, 1, 0, 2, 2, 0, 1, 1, 0, 2, 2, 1, 0}, {3, 5});
  CHECK(gradcheck([&](const TensorList& a) { return soft_dice(a[0], tt, 1e-3); }, {pp}));
  // Composed with softmax, as a segmentation loss uses it.
  Tensor logits = leaf({3, 5, 3}, 5);
  CHECK(gradcheck([&](const TensorList& a) { return soft_dice(softmax(a[0], -1), tt); }, {logits}));
  CHECK_THROWS_WITH(soft_dice(ones({2, 3}), labels({1, 3}, {2})),
                    Catch::Contains("soft_dice") && Catch::Contains("target value 3") && Catch::Contains("C = 3"));
  CHECK_THROWS_WITH(soft_dice(ones({2, 3}), labels({1, 2}, {2}), -1.0), Catch::Contains("eps"));
}

TEST_CASE("losses run in f32 under autocast and keep the gradient's dtype at the input", "[loss][precision]") {
  Tensor x = tensor({0.5, -1, 2, 0.25, 3, -2}, {f16}).reshape({2, 3}).set_requires_grad();
  autocast_state().dtype = f16;
  Tensor ce = cross_entropy(x, labels({2, 0}, {2}), {.weight = tensor({1, 2, 3}, {f16})});
  Tensor mse = mse_loss(x, zeros({2, 3}, {f16}));
  Tensor dice = soft_dice(softmax(x, -1), labels({2, 0}, {2}));
  autocast_state().dtype.reset();
  CHECK(ce.dtype() == f32);
  CHECK(mse.dtype() == f32);
  CHECK(dice.dtype() == f32);
  const std::vector<double> xv = x.to_vector<double>();
  CHECK(ce.item<double>() == Approx(ce_reference(xv, {2, 0}, 3, {1, 2, 3}, -100)).epsilon(1e-6));
  (ce + mse).backward();
  REQUIRE(x.grad().defined());
  CHECK(x.grad().dtype() == f16);  // the Cast node's backward casts it back
}
