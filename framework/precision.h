// Precision classes and the autocast state ops consult. Every op declares its class
// and passes its tensor inputs through autocast() first; with autocast off (the
// default) that returns them unchanged. amp/autocast.h sets the state (RAII guard).
#pragma once
#include <optional>
#include <string>

#include "framework/autograd.h"

namespace hg {

enum class PrecisionClass : uint8_t {
  lower,    // matmul, linear, conv: run in the compute dtype (f16/bf16)
  fp32,     // softmax, exp, log, pow, losses, norms, reductions: run in f32
  promote,  // add, mul, cat, where: the widest floating input (the op promotes itself)
  follow,   // relu, pooling, views, dropout: run in the input's dtype
};

const char* precision_class_name(PrecisionClass c);

// The thread-local autocast state. `dtype` is empty when autocast is off.
struct AutocastState {
  std::optional<DType> dtype;
  bool cache_enabled = true;
};
AutocastState& autocast_state();

// Casts the floating inputs an op of class `cls` receives, as the active autocast
// policy asks (the casts are Cast nodes in the graph). Undefined tensors pass through.
TensorList autocast(PrecisionClass cls, const TensorList& inputs);

}  // namespace hg
