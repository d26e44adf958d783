// Initialisers: fan and gain arithmetic, then one random draw in the tensor's own dtype
// copied in place, so handles held elsewhere (optimizers) see the new values.
#include "nn/init.h"

#include <cmath>

#include "framework/autograd.h"
#include "ops/copy.h"
#include "ops/random.h"

namespace hg::nn::init {

namespace {

void check_floating(const Tensor& t, const char* op) {
  HG_CHECK(t.defined() && is_floating(t.dtype()), op, ": needs a defined floating tensor (f64, f32, f16, bf16), got ",
           t.defined() ? dtype_name(t.dtype()) : "an undefined tensor");
}

double fan(const Tensor& w, FanMode mode) {
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(w);
  return static_cast<double>(mode == FanMode::fan_in ? fan_in : fan_out);
}

}  // namespace

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& w) {
  HG_CHECK(w.defined() && w.dim() >= 2, "calculate_fan_in_and_fan_out: needs a weight with at least 2 axes ",
           "([out, in] or [out, receptive field..., in]), got ", w.defined() ? shape_str(w.shape()) : "undefined");
  int64_t receptive = 1;
  for (int64_t i = 1; i + 1 < w.dim(); ++i) receptive *= w.size(i);
  return {receptive * w.size(-1), receptive * w.size(0)};
}

double calculate_gain(Nonlinearity nonlinearity, double a) {
  switch (nonlinearity) {
    case Nonlinearity::linear: return 1.0;
    case Nonlinearity::relu: return std::sqrt(2.0);
    case Nonlinearity::leaky_relu: return std::sqrt(2.0 / (1.0 + a * a));
  }
  throw Error("calculate_gain: unknown nonlinearity");
}

void uniform_(const Tensor& t, double lo, double hi, Generator* gen) {
  check_floating(t, "init::uniform_");
  HG_CHECK(lo <= hi && std::isfinite(lo) && std::isfinite(hi), "init::uniform_: needs finite lo <= hi, got [", lo,
           ", ", hi, ")");
  NoGrad ng;
  copy_(t, uniform(t.shape(), lo, hi, {t.dtype(), t.device()}, gen));
}

void normal_(const Tensor& t, double mean, double std, Generator* gen) {
  check_floating(t, "init::normal_");
  HG_CHECK(std >= 0 && std::isfinite(std) && std::isfinite(mean), "init::normal_: needs a finite mean and std >= 0, got mean ",
           mean, ", std ", std);
  NoGrad ng;
  copy_(t, normal(t.shape(), mean, std, {t.dtype(), t.device()}, gen));
}

void zeros_(const Tensor& t) {
  check_floating(t, "init::zeros_");
  fill_(t, 0.0);
}

void ones_(const Tensor& t) {
  check_floating(t, "init::ones_");
  fill_(t, 1.0);
}

void kaiming_uniform_(const Tensor& w, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  check_floating(w, "init::kaiming_uniform_");
  if (w.numel() == 0) return;  // no fan to scale by, and nothing to fill
  const double bound = calculate_gain(nonlinearity, a) * std::sqrt(3.0 / fan(w, mode));
  uniform_(w, -bound, bound, gen);
}

void kaiming_normal_(const Tensor& w, double a, FanMode mode, Nonlinearity nonlinearity, Generator* gen) {
  check_floating(w, "init::kaiming_normal_");
  if (w.numel() == 0) return;  // no fan to scale by, and nothing to fill
  normal_(w, 0.0, calculate_gain(nonlinearity, a) / std::sqrt(fan(w, mode)), gen);
}

void xavier_uniform_(const Tensor& w, double gain, Generator* gen) {
  check_floating(w, "init::xavier_uniform_");
  if (w.numel() == 0) return;  // no fan to scale by, and nothing to fill
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(w);
  const double bound = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  uniform_(w, -bound, bound, gen);
}

void xavier_normal_(const Tensor& w, double gain, Generator* gen) {
  check_floating(w, "init::xavier_normal_");
  if (w.numel() == 0) return;  // no fan to scale by, and nothing to fill
  auto [fan_in, fan_out] = calculate_fan_in_and_fan_out(w);
  normal_(w, 0.0, gain * std::sqrt(2.0 / static_cast<double>(fan_in + fan_out)), gen);
}

}  // namespace hg::nn::init
