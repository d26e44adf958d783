// clip_grad_norm_ against PyTorch's formula written out in f64 (issue 29): clip_coef =
// max_norm / (total_norm + 1e-6), clamped to 1, at a tolerance tight enough to see the
// epsilon, and on tiny norms where the epsilon decides the result.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "halfgrad.h"

using namespace hg;
using Vec = std::vector<double>;

namespace {

Tensor with_grad(const Vec& g, DType dt) {
  Tensor p = zeros({static_cast<int64_t>(g.size())}, {dt}).set_requires_grad();
  p.set_grad(from_vector(g, {static_cast<int64_t>(g.size())}, {dt}));
  return p;
}

// torch.nn.utils.clip_grad_norm_'s arithmetic, in double.
double torch_total(const std::vector<Vec>& grads, double norm_type) {
  double acc = 0;
  for (const Vec& g : grads)
    for (double x : g) acc = std::isinf(norm_type) ? std::max(acc, std::abs(x)) : acc + std::pow(std::abs(x), norm_type);
  return std::isinf(norm_type) ? acc : std::pow(acc, 1.0 / norm_type);
}
double torch_coef(double total, double max_norm) { return std::min(1.0, max_norm / (total + 1e-6)); }

// Clips f64 gradients and checks the norm and every element against the formula.
void check_f64(const std::vector<Vec>& grads, double max_norm, double norm_type) {
  std::vector<Tensor> params;
  for (const Vec& g : grads) params.push_back(with_grad(g, f64));
  const double total = torch_total(grads, norm_type), coef = torch_coef(total, max_norm);
  INFO("total " << total << " max_norm " << max_norm << " norm_type " << norm_type << " coef " << coef);
  CHECK(optim::clip_grad_norm_(params, max_norm, norm_type) == Approx(total).epsilon(1e-13).margin(0));
  for (size_t i = 0; i < grads.size(); ++i) {
    const Vec got = params[i].grad().to_vector<double>();
    for (size_t j = 0; j < got.size(); ++j) CHECK(got[j] == Approx(grads[i][j] * coef).epsilon(1e-13).margin(0));
  }
}

}  // namespace

TEST_CASE("clip_grad_norm_ in f64 equals PyTorch's formula to 1e-13", "[optim][clip]") {
  const std::vector<Vec> grads = {{3.0, -4.0, 0.5}, {1.0, -2.0}, {0.25}};
  for (double norm_type : {2.0, 1.0, 3.0, double(INFINITY)}) {
    // 1e-6 against a norm of about 5 changes the coefficient by 2e-7 relative: seen here.
    check_f64(grads, 1.0, norm_type);
    check_f64(grads, 0.01, norm_type);
    check_f64(grads, 100.0, norm_type);  // coefficient clamped to 1: untouched
  }
}

TEST_CASE("clip_grad_norm_ on tiny norms: the 1e-6 in the divisor decides the result", "[optim][clip]") {
  // Norm 5e-7 < max_norm 1e-6, yet PyTorch scales by 1e-6 / 1.5e-6 = 2/3 (the clamp is on
  // the coefficient, not on the norm); without the epsilon nothing would change.
  check_f64({{3e-7, -4e-7}}, 1e-6, 2.0);
  check_f64({{3e-7, -4e-7}}, 1e-7, 2.0);  // 1/15 with the epsilon, 1/5 without
  check_f64({{1e-9}, {-2e-9, 2e-9}}, 1e-8, 1.0);
  check_f64({{0.0, 0.0}}, 1.0, 2.0);  // a zero norm divides by the epsilon alone
  for (DType dt : {f32, f16, bf16}) {
    INFO(dtype_name(dt));
    Tensor p = with_grad({3e-3, -4e-3}, dt);
    const Vec g = p.grad().to_vector<double>();  // the stored (rounded) values
    const double total = std::hypot(g[0], g[1]), coef = torch_coef(total, 1e-3);
    CHECK(optim::clip_grad_norm_({p}, 1e-3) == Approx(total).epsilon(dt == f32 ? 1e-6 : 1e-3));
    const Vec got = p.grad().to_vector<double>();
    const double ulp = dt == f32 ? 0x1p-23 : dt == f16 ? 0x1p-10 : 0x1p-7;
    for (size_t j = 0; j < g.size(); ++j) CHECK(got[j] == Approx(g[j] * coef).epsilon(ulp));
    // The coefficient without the epsilon (1e-3 / 5e-3 = 0.2) is 2e-4 larger, relatively: many ulps of f32.
    if (dt == f32) CHECK(std::abs(got[0] - g[0] * 1e-3 / total) > 4 * ulp * std::abs(got[0]));
  }
}
