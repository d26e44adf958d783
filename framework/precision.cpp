// The autocast state and the casting rule per precision class.
#include "framework/precision.h"

namespace hg {

const char* precision_class_name(PrecisionClass c) {
  switch (c) {
    case PrecisionClass::lower: return "lower";
    case PrecisionClass::fp32: return "fp32";
    case PrecisionClass::promote: return "promote";
    case PrecisionClass::follow: return "follow";
  }
  return "?";
}

AutocastState& autocast_state() {
  thread_local AutocastState s;
  return s;
}

namespace {
// Casts leaf parameters through the cache. Never under NoGrad: a cast made there has no
// graph, and reusing it later with grad enabled would silently cut the weight's
// gradient (the bug PyTorch issue #112583 describes).
Tensor cached_cast(AutocastState& st, const Tensor& t, DType target) {
  if (!st.cache_enabled || !t.is_leaf() || !t.requires_grad() || !autograd::grad_mode_enabled()) return t.to(target);
  auto& cache = st.cache[target == f16 ? 0 : target == bf16 ? 1 : 2];
  auto it = cache.find(t.impl());
  if (it != cache.end()) {
    ++st.cache_hits;
    return it->second.cast;
  }
  Tensor c = t.to(target);
  cache[t.impl()] = {t, c};
  return c;
}
}  // namespace

TensorList autocast(PrecisionClass cls, const TensorList& inputs) {
  AutocastState& st = autocast_state();
  if (!st.dtype || cls == PrecisionClass::promote || cls == PrecisionClass::follow) return inputs;
  const DType target = cls == PrecisionClass::lower ? *st.dtype : f32;
  TensorList out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs) {
    const bool castable = t.defined() && is_floating(t.dtype()) && t.dtype() != f64 && t.dtype() != target;
    out.push_back(!castable ? t : (cls == PrecisionClass::lower ? cached_cast(st, t, target) : t.to(target)));
  }
  return out;
}

}  // namespace hg
