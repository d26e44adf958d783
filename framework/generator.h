// Counter-based random numbers (Philox4x32-10): element i of the n-th draw from a
// generator seeded s is a pure function of (s, n, i), so every device and thread
// count produces the same stream.
#pragma once
#include <array>
#include <cstdint>
#include <mutex>

namespace hg {

struct PhiloxKey {
  uint64_t seed;
  uint64_t stream;  // which draw of the generator
};

// Four 32-bit outputs for (key, counter) after 10 Philox rounds. constexpr so that cuda
// kernels (nvcc --expt-relaxed-constexpr) run this very function: the same stream everywhere.
constexpr std::array<uint32_t, 4> philox4x32(PhiloxKey key, uint64_t counter) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = static_cast<uint32_t>(key.stream), c3 = static_cast<uint32_t>(key.stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(key.seed), k1 = static_cast<uint32_t>(key.seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = uint64_t{0xD2511F53u} * c0, p1 = uint64_t{0xCD9E8D57u} * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0, n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {c0, c1, c2, c3};
}

// Uniform in [0, 1) with 24 random bits (f32) or 53 (f64).
constexpr float uniform_f32(uint32_t u) { return static_cast<float>(u >> 8) * 0x1.0p-24f; }
constexpr double uniform_f64(uint32_t hi, uint32_t lo) {
  return static_cast<double>(((uint64_t{hi} << 32) | lo) >> 11) * 0x1.0p-53;
}

class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed);
  uint64_t seed() const { return seed_; }
  uint64_t draws() const { return draws_; }
  void set_state(uint64_t seed, uint64_t draws);
  // Reserves the next draw's key.
  PhiloxKey next();

 private:
  std::mutex mu_;
  uint64_t seed_;
  uint64_t draws_ = 0;
};

Generator& default_generator();
void manual_seed(uint64_t seed);  // seeds the default generator

}  // namespace hg
