// The default generator and the state a checkpoint saves.
#include "framework/generator.h"

namespace hg {

void Generator::manual_seed(uint64_t seed) { set_state(seed, 0); }

void Generator::set_state(uint64_t seed, uint64_t draws) {
  std::lock_guard<std::mutex> lock(mu_);
  seed_ = seed;
  draws_ = draws;
}

PhiloxKey Generator::next() {
  std::lock_guard<std::mutex> lock(mu_);
  return {seed_, draws_++};
}

Generator& default_generator() {
  static Generator g(0x5eed);
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace hg
