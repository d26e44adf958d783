// Elementwise ops: values against f64 references, IEEE behaviour in f16/bf16,
// broadcasting errors, and gradchecks.
#include <catch2/catch.hpp>

#include "halfgrad.h"

using namespace hg;

namespace {
Tensor leaf(const Shape& s, uint64_t seed, double lo = -2, double hi = 2) {
  Generator g(seed);
  return uniform(s, lo, hi, {f64}, &g).set_requires_grad();
}
}  // namespace

TEST_CASE("every elementwise op passes gradcheck in f64", "[elementwise][gradcheck]") {
  Tensor a = leaf({3, 4}, 1), b = leaf({4}, 2), p = leaf({3, 4}, 3, 0.5, 2.0), q = leaf({1, 4}, 4, 0.5, 2.0);
  CHECK(gradcheck([](const TensorList& t) { return t[0] + t[1]; }, {a, b}));
  CHECK(gradcheck([](const TensorList& t) { return t[0] - t[1]; }, {a, b}));
  CHECK(gradcheck([](const TensorList& t) { return t[0] * t[1]; }, {a, b}));
  CHECK(gradcheck([](const TensorList& t) { return t[0] / t[1]; }, {a, q}));
  CHECK(gradcheck([](const TensorList& t) { return pow(t[0], t[1]); }, {p, q}));
  CHECK(gradcheck([](const TensorList& t) { return pow(t[0], 2.5); }, {p}));
  CHECK(gradcheck([](const TensorList& t) { return -t[0]; }, {a}));
  CHECK(gradcheck([](const TensorList& t) { return exp(t[0]); }, {a}));
  CHECK(gradcheck([](const TensorList& t) { return log(t[0]); }, {p}));
  CHECK(gradcheck([](const TensorList& t) { return sqrt(t[0]); }, {p}));
  CHECK(gradcheck([](const TensorList& t) { return rsqrt(t[0]); }, {p}));
  CHECK(gradcheck([](const TensorList& t) { return 3.0 / t[0] + (1.0 - t[0]) + t[0] / 4.0; }, {p}));
  CHECK(gradcheck([](const TensorList& t) { return maximum(t[0], t[1]) + minimum(t[0], t[1]); }, {a, b}));
  CHECK(gradcheck([](const TensorList& t) { return where(t[0] > 0.0, t[0] * 2.0, t[1]); }, {a, b}));
  CHECK(gradcheck([](const TensorList& t) { return clamp(t[0], -1.0, 1.0) + abs(t[0]) + square(t[0]); }, {a}));
}

TEST_CASE("f16 arithmetic overflows and underflows where IEEE binary16 does", "[elementwise][numerics]") {
  Tensor a = full({1}, 300.0, {f16});
  CHECK(std::isinf((a * a).item<double>()));  // 90000 > 65504
  CHECK((full({1}, 1e-4, {f16}) * full({1}, 1e-4, {f16})).item<double>() == 0.0);  // 1e-8 < 2^-25
  // Computed in f32 and rounded once: 255 * 257 = 65535 lies above 65520, the boundary
  // where rounding to binary16 goes to inf.
  CHECK(std::isinf((full({1}, 255.0, {f16}) * full({1}, 257.0, {f16})).item<double>()));
  // Subnormal results are kept, not flushed.
  double sub = (full({1}, std::ldexp(1.0, -12), {f16}) * full({1}, std::ldexp(1.0, -10), {f16})).item<double>();
  CHECK(sub == std::ldexp(1.0, -22));
  // bf16 has f32's range but 8 bits of precision.
  CHECK((full({1}, 300.0, {bf16}) * full({1}, 300.0, {bf16})).item<double>() == 90112.0);
  // NaN propagates as IEEE says.
  CHECK(std::isnan((full({1}, NAN, {f16}) + 1.0).item<double>()));
  CHECK(std::isnan(maximum(tensor({NAN}), tensor({1.0})).item<double>()));
}

TEST_CASE("reduced-precision results equal the f64 result of the rounded inputs, rounded once", "[elementwise][numerics]") {
  for (DType dt : {f16, bf16}) {
    Generator g(7);
    Tensor a = randn({7, 13}, {dt}, &g), b = randn({7, 13}, {dt}, &g);
    Tensor a64 = a.to(f64), b64 = b.to(f64);
    // Exactly: f32 arithmetic on 16-bit inputs then one rounding equals rounding the f64 result
    // for + and * (f32 holds these results exactly or rounds below the 16-bit ulp).
    CHECK(allclose((a * b).to(f64), (a64 * b64).to(dt).to(f64), 0, 0));
    CHECK(allclose((a + b).to(f64), (a64 + b64).to(dt).to(f64), 0, 0));
    double tol = dt == f16 ? 1e-3 : 8e-3;
    CHECK(allclose(exp(a).to(f64), exp(a64), tol, 1e-6));
    CHECK(allclose((a / b).to(f64), a64 / b64, tol, 1e-6));
  }
}

TEST_CASE("elementwise errors name the op and the shapes", "[elementwise][errors]") {
  CHECK_THROWS_WITH(ones({2, 3}) + ones({4}), Catch::Contains("add") && Catch::Contains("[2, 3]") && Catch::Contains("[4]"));
  CHECK_THROWS_WITH(exp(ones({2}, {i64})), Catch::Contains("exp") && Catch::Contains("floating") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(where(ones({2}), ones({2}), ones({2})), Catch::Contains("bool"));
  CHECK_THROWS_WITH(clamp(ones({2}), 1.0, 0.0), Catch::Contains("exceeds"));
}

TEST_CASE("mixed dtypes promote to the wider floating type", "[elementwise][dtype]") {
  CHECK((ones({2}, {f16}) + ones({2}, {f32})).dtype() == f32);
  CHECK((ones({2}, {f16}) + ones({2}, {bf16})).dtype() == f32);
  CHECK((ones({2}, {f16}) * 3.0).dtype() == f16);
  CHECK((ones({2}, {i64}) + ones({2}, {f16})).dtype() == f16);
  CHECK((ones({2}, {f64}) + ones({2}, {f32})).dtype() == f64);
}

// A second check of div's backward besides gradcheck (issue 29): both gradients against
// their closed forms, d(a/b)/da = 1/b and d(a/b)/db = -a/b^2, summed over broadcast axes,
// in f64 to 1e-14 and in f32; also with only the divisor requiring a gradient.
TEST_CASE("div's gradients equal 1/b and -a/b^2, summed where b or a was broadcast", "[elementwise][autograd]") {
  struct Shapes {
    Shape a, b;
  };
  for (const Shapes& s : {Shapes{{3, 4}, {4}}, Shapes{{3, 4}, {3, 1}}, Shapes{{1, 4}, {3, 1}}, Shapes{{2, 3}, {2, 3}}}) {
    for (DType dt : {f64, f32}) {
      for (bool a_grad : {true, false}) {
        INFO("a " << shape_str(s.a) << " b " << shape_str(s.b) << " " << dtype_name(dt) << (a_grad ? "" : ", b only"));
        Generator g(11);
        Tensor a = uniform(s.a, -2, 2, {dt}, &g).set_requires_grad(a_grad);
        Tensor b = uniform(s.b, 0.5, 2, {dt}, &g);
        b = where(uniform(s.b, 0, 1, {dt}, &g) > 0.5, b, -b).detach().set_requires_grad();  // both signs
        const Shape out = broadcast_shapes(s.a, s.b, "test");
        const Tensor gy = uniform(out, -1, 1, {dt}, &g);
        (a / b).backward(gy);
        // Closed forms over the broadcast output, element by element in double.
        const auto av = a.expand(out).contiguous().to_vector<double>(), bv = b.expand(out).contiguous().to_vector<double>(),
                   gv = gy.to_vector<double>();
        std::vector<double> ga(av.size()), gb(av.size());
        for (size_t i = 0; i < av.size(); ++i) {
          ga[i] = gv[i] / bv[i];
          gb[i] = -gv[i] * av[i] / (bv[i] * bv[i]);
        }
        // Sums v (over `out`) into `to`, right-aligned: an axis of size 1 in `to` takes index 0.
        const auto reduce = [&](const std::vector<double>& v, const Shape& to) {
          std::vector<double> r(static_cast<size_t>(numel_of(to)), 0.0);
          for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
            int64_t rest = i, j = 0, stride = 1;
            for (int64_t d = static_cast<int64_t>(out.size()) - 1, e = static_cast<int64_t>(to.size()) - 1; d >= 0;
                 --d, --e) {
              const int64_t idx = rest % out[static_cast<size_t>(d)];
              rest /= out[static_cast<size_t>(d)];
              if (e < 0) continue;
              const int64_t n = to[static_cast<size_t>(e)];
              j += (n == 1 ? 0 : idx) * stride;
              stride *= n;
            }
            r[static_cast<size_t>(j)] += v[static_cast<size_t>(i)];
          }
          return from_vector(r, to, {f64});
        };
        const double tol = dt == f64 ? 1e-14 : 1e-6;
        CHECK(b.grad().dtype() == dt);
        CHECK(allclose(b.grad().to(f64), reduce(gb, s.b), tol, tol));
        if (a_grad) CHECK(allclose(a.grad().to(f64), reduce(ga, s.a), tol, tol));
        else CHECK_FALSE(a.grad().defined());
      }
    }
  }
}
