// The seeded fuzz driver's harness: a random source, the outcome of one case (matched the
// f64 reference, or raised hg::Error) and the tally CI reads. A case that returns wrong
// values, accepts invalid input, rejects valid input or throws anything but hg::Error fails.
#pragma once
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "halfgrad.h"

namespace hg::fuzz {

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  int64_t uniform(int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen_); }
  bool chance(double p) { return std::bernoulli_distribution(p)(gen_); }
  double normal() { return std::normal_distribution<double>(0.0, 1.0)(gen_); }
  uint64_t bits() { return gen_(); }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(uniform(0, static_cast<int64_t>(v.size()) - 1))];
  }

 private:
  std::mt19937_64 gen_;
};

// A wrong answer: the library returned, but not what the reference says.
class Mismatch : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

template <class... Parts>
void expect(bool ok, const Parts&... parts) {
  if (!ok) throw Mismatch(detail::concat(parts...));
}

// For input the reference calls valid: an hg::Error is a wrong answer too.
template <class F>
auto must_succeed(const std::string& what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const Error& e) {
    throw Mismatch(what + " is valid but was refused: " + e.what());
  }
}

// For input the reference calls invalid: returning is a wrong answer.
template <class F>
void must_fail(const std::string& what, F&& f) {
  f();
  throw Mismatch(what + " is invalid but was accepted");
}

// Names the case about to call the library (printed at once under --trace).
void note(const std::string& what);

extern const std::vector<DType> kFloatTypes;  // f64, f32, f16, bf16
// Relative precision of a dtype's rounding (half an ulp at 1) and its smallest subnormal.
double unit_roundoff(DType dt);
double smallest_subnormal(DType dt);
// Values rounded to dt as the library stores them, read back as doubles.
std::vector<double> rounded(const std::vector<double>& v, DType dt);
// Random values in dt (occasionally large, so reduced types overflow), as a tensor of shape.
Tensor random_tensor(Rng& rng, const Shape& shape, DType dt);
// Compares values within atol[i] (NaN equals NaN, infinities must match exactly).
void expect_close(const std::string& what, const std::vector<double>& got, const std::vector<double>& want,
                  const std::vector<double>& atol);
std::string shape_text(const Shape& s);

// The device an operand is put on: the CPU, or CUDA (an hg::Error without a usable GPU).
Device random_device(Rng& rng);
bool cuda_usable();

using Area = std::function<void(Rng&)>;
void fuzz_views(Rng& rng);
void fuzz_binary(Rng& rng);
void fuzz_matmul(Rng& rng);
void fuzz_conv(Rng& rng);
void fuzz_pool(Rng& rng);
void fuzz_safetensors(Rng& rng);

}  // namespace hg::fuzz
