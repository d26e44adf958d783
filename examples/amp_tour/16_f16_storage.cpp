// Tour step 16 (docs/amp.md): what 16-bit storage does to training state. (a) Weights
// stored in f16/bf16: an update is computed in f32 and rounded into the weight, so small
// updates and weight decay are swallowed; two remedies, tried on the same updates:
// stochastic rounding (round up with probability equal to the distance from the value
// below, so the rounding error is zero on average) and a Kahan-compensated update (a
// second 16-bit tensor keeps what the rounding dropped and adds it to the next update).
// (b) O2 with micro-batches: backward accumulates each micro-batch's scaled gradient into
// the f16 .grad, rounding every partial sum and overflowing when the sum passes 65504.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>

#include "halfgrad.h"

using namespace hg;

namespace {

// A 16-bit format through halfgrad's exact conversions (round to nearest even).
struct Format {
  const char* name;
  uint16_t (*to_bits)(double);
  float (*to_float)(uint16_t);
  double round(double v) const { return to_float(to_bits(v)); }
  // The representable neighbours of v: lo <= v <= hi (v finite, in range).
  void neighbours(double v, double* lo, double* hi) const {
    const uint16_t b = to_bits(v);
    const double r = to_float(b);
    const uint16_t mag = b & 0x7fff, sign = b & 0x8000;
    // One step away from zero / towards zero in magnitude, keeping the sign (0 has no smaller magnitude).
    const double away = to_float(static_cast<uint16_t>(sign | (mag + 1)));
    const double toward = mag ? to_float(static_cast<uint16_t>(sign | (mag - 1))) : -away;
    const double other = (std::fabs(v) > std::fabs(r)) ? away : toward;
    *lo = std::fmin(r, other);
    *hi = std::fmax(r, other);
  }
};
const Format kF16{"f16", double_to_half_bits, half_bits_to_float};
const Format kBF16{"bf16", double_to_bf16_bits, bf16_bits_to_float};

enum class Method { nearest, stochastic, kahan };
const char* method_name(Method m) {
  return m == Method::nearest ? "round to nearest" : m == Method::stochastic ? "stochastic rounding" : "Kahan-compensated";
}

// n updates w += delta(w), w stored in `fmt`, each update computed in f32 precision (double here).
template <class Delta>
double run(const Format& fmt, Method m, double w0, int n, Delta delta) {
  std::mt19937 gen(0);  // the standard fixes its sequence: the same on every machine
  double w = fmt.round(w0), c = 0;  // c: the Kahan compensation, stored in fmt too
  for (int i = 0; i < n; ++i) {
    const double target = w + delta(w) + (m == Method::kahan ? c : 0.0);
    if (m == Method::stochastic) {
      double lo, hi;
      fmt.neighbours(target, &lo, &hi);
      const double u = static_cast<double>(gen() >> 8) * 0x1p-24;  // uniform in [0, 1)
      w = (hi == lo || u >= (target - lo) / (hi - lo)) ? lo : hi;
    } else {
      const double next = fmt.round(target);
      if (m == Method::kahan) c = fmt.round(target - next);  // what rounding dropped (exact before storing)
      w = next;
    }
  }
  return w;
}

}  // namespace

int main() {
  std::printf("(a) a weight stored in 16 bits, updates computed in f32 and rounded into it\n");
  std::printf("%-5s %-20s %22s %26s\n", "", "", "1000 x (+1e-4) from 1", "decay x(1 - 1e-5), 10^4 steps");
  std::printf("%-5s %-20s %22.6f %26.6f\n", "exact", "", 1.1, std::pow(1 - 1e-5, 1e4));
  for (const Format* f : {&kF16, &kBF16})
    for (Method m : {Method::nearest, Method::stochastic, Method::kahan}) {
      const double a = run(*f, m, 1.0, 1000, [](double) { return 1e-4; });
      const double b = run(*f, m, 1.0, 10000, [](double w) { return -1e-5 * w; });
      std::printf("%-5s %-20s %22.6f %26.6f\n", f->name, method_name(m), a, b);
    }

  std::printf("\n(b) O2: 16 micro-batches accumulated into an f16 .grad (f16 model, loss scale S)\n");
  manual_seed(0);
  nn::Linear layer(64, 1);
  amp::cast_model(layer, f16);
  Generator gen(1);
  const Tensor x = add(randn({16 * 32, 64}, {}, &gen), 1.0).to(f16);  // inputs with a mean: gradients add up
  const Tensor y = randn({16 * 32, 1}, {}, &gen).to(f16);
  std::printf("%-6s %13s %12s %12s %14s %18s\n", "S", "max |one mb|", "max |sum|", "f16 .grad", "f16 .grad err",
              "f32 sum, rounded");
  for (double S : {1024.0, 8192.0, 65536.0}) {
    Tensor acc32 = zeros({1, 64}, {});  // the same micro-batch gradients, summed in f32
    double one = 0;
    for (int k = 0; k < 16; ++k) {
      const Tensor xb = x.slice(0, k * 32, (k + 1) * 32), yb = y.slice(0, k * 32, (k + 1) * 32);
      const Tensor loss = mul(mse_loss(layer(xb).to(f32), yb.to(f32)), S / 16);
      const Tensor alone = autograd::grad({loss}, {layer.weight}, {ones({}, {})}, true)[0].to(f32);
      one = std::fmax(one, max(abs(alone)).item<double>());
      acc32 = add(acc32, alone);
      loss.backward();  // f16 .grad += this micro-batch's gradient, rounded to f16
    }
    const Tensor acc16 = layer.weight.grad().to(f32);
    auto rel = [&](const Tensor& a) {
      return std::sqrt(sum(square(sub(a, acc32))).item<double>() / sum(square(acc32)).item<double>());
    };
    std::printf("%-6g %13.1f %12.1f %12g %14.2g %18.2g\n", S, one, max(abs(acc32)).item<double>(),
                max(abs(acc16)).item<double>(), rel(acc16), rel(acc32.to(f16).to(f32)));
    layer.weight.set_grad(Tensor());
    layer.bias.set_grad(Tensor());
  }
  return 0;
}
