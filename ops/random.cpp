// Random factories: argument checks, then one draw of the generator per tensor.
#include "ops/random.h"

#include <cmath>

#include "ops/random_kernels.h"

namespace hg {

DispatchStub<void(Distribution, const Tensor&, PhiloxKey, double, double)> random_stub("random");

namespace {
Tensor draw(Distribution d, const Shape& shape, TensorOptions o, Generator* gen, double p0, double p1, const char* op) {
  check_shape(shape, op);
  bool rg = o.requires_grad;
  o.requires_grad = false;
  Tensor t = empty(shape, o);
  PhiloxKey key = (gen ? *gen : default_generator()).next();
  if (t.numel()) random_stub(o.device, d, t, key, p0, p1);
  if (rg) t.set_requires_grad(true);
  return t;
}
}  // namespace

Tensor uniform(const Shape& shape, double lo, double hi, TensorOptions o, Generator* gen) {
  HG_CHECK(is_floating(o.dtype), "uniform: needs a floating dtype, got ", dtype_name(o.dtype));
  HG_CHECK(std::isfinite(lo) && std::isfinite(hi) && lo <= hi, "uniform: needs finite lo <= hi, got [", lo, ", ", hi, ")");
  return draw(Distribution::uniform, shape, o, gen, lo, hi, "uniform");
}

Tensor normal(const Shape& shape, double mean, double std, TensorOptions o, Generator* gen) {
  HG_CHECK(is_floating(o.dtype), "normal: needs a floating dtype, got ", dtype_name(o.dtype));
  HG_CHECK(std::isfinite(mean) && std::isfinite(std) && std >= 0, "normal: needs a finite mean and std >= 0, got mean ",
           mean, ", std ", std);
  return draw(Distribution::normal, shape, o, gen, mean, std, "normal");
}

Tensor rand(const Shape& shape, TensorOptions o, Generator* gen) { return uniform(shape, 0.0, 1.0, o, gen); }
Tensor randn(const Shape& shape, TensorOptions o, Generator* gen) { return normal(shape, 0.0, 1.0, o, gen); }

Tensor randint(int64_t lo, int64_t hi, const Shape& shape, TensorOptions o, Generator* gen) {
  HG_CHECK(lo < hi, "randint: needs lo < hi, got [", lo, ", ", hi, ")");
  return draw(Distribution::integer, shape, o, gen, static_cast<double>(lo), static_cast<double>(hi), "randint");
}

Tensor bernoulli(const Shape& shape, double p, Device device, Generator* gen) {
  HG_CHECK(p >= 0 && p <= 1, "bernoulli: p must be in [0, 1], got ", p);
  return draw(Distribution::bernoulli, shape, {b8, device}, gen, p, 0, "bernoulli");
}

}  // namespace hg
