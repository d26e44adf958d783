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

TensorList autocast(PrecisionClass cls, const TensorList& inputs) {
  const AutocastState& st = autocast_state();
  if (!st.dtype || cls == PrecisionClass::promote || cls == PrecisionClass::follow) return inputs;
  const DType target = cls == PrecisionClass::lower ? *st.dtype : f32;
  TensorList out;
  out.reserve(inputs.size());
  for (const Tensor& t : inputs)
    out.push_back(t.defined() && is_floating(t.dtype()) && t.dtype() != f64 ? t.to(target) : t);
  return out;
}

}  // namespace hg
