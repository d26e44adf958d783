// Autocast: a thread-local, nestable RAII region in which every op runs in the dtype
// its precision class asks for (framework/precision.h): `lower` ops in f16/bf16,
// `fp32` ops in f32. Casts become Cast nodes in the graph.
#pragma once
#include <optional>

#include "framework/precision.h"

namespace hg::amp {

class Autocast {
 public:
  // Autocast(hg::f16) or Autocast(hg::bf16): on, with that compute dtype.
  explicit Autocast(DType compute, bool cache = true);
  // Autocast(false): off inside (e.g. to run one block in full precision).
  explicit Autocast(bool enabled);
  ~Autocast();
  Autocast(const Autocast&) = delete;
  Autocast& operator=(const Autocast&) = delete;

 private:
  std::optional<DType> saved_dtype_;
  bool saved_cache_;
};

bool is_autocast_enabled();
std::optional<DType> autocast_dtype();
// Number of casts served from the cache in this thread (for tests and the monitor).
int64_t cast_cache_hits();

}  // namespace hg::amp
