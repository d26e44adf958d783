// The Autocast guard: saves and restores the thread's autocast state, and empties the
// cast cache when the outermost region ends (the cached casts belong to one forward).
#include "amp/autocast.h"

namespace hg::amp {

Autocast::Autocast(DType compute, bool cache) {
  HG_CHECK(compute == f16 || compute == bf16 || compute == f32, "Autocast: the compute dtype must be f16, bf16 or f32, got ",
           dtype_name(compute));
  AutocastState& st = autocast_state();
  saved_dtype_ = st.dtype;
  saved_cache_ = st.cache_enabled;
  st.dtype = compute;
  st.cache_enabled = cache;
  ++st.depth;
}

Autocast::Autocast(bool enabled) {
  HG_CHECK(!enabled, "Autocast(true) needs a compute dtype: write Autocast(hg::f16) or Autocast(hg::bf16)");
  AutocastState& st = autocast_state();
  saved_dtype_ = st.dtype;
  saved_cache_ = st.cache_enabled;
  st.dtype.reset();
  ++st.depth;
}

Autocast::~Autocast() {
  AutocastState& st = autocast_state();
  st.dtype = saved_dtype_;
  st.cache_enabled = saved_cache_;
  if (--st.depth == 0)
    for (auto& c : st.cache) c.clear();
}

bool is_autocast_enabled() { return autocast_state().dtype.has_value(); }
std::optional<DType> autocast_dtype() { return autocast_state().dtype; }
int64_t cast_cache_hits() { return autocast_state().cache_hits; }

}  // namespace hg::amp
