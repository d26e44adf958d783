// Precision classes and the autocast state ops consult. Every op declares its class
// and passes its tensor inputs through autocast() first; with autocast off (the
// default) that returns them unchanged. amp/autocast.h sets the state (RAII guard).
#pragma once
#include <optional>
#include <string>
#include <unordered_map>

#include "framework/autograd.h"

namespace hg {

enum class PrecisionClass : uint8_t {
  lower,    // matmul, linear, conv: run in the compute dtype (f16/bf16)
  fp32,     // softmax, exp, log, pow, losses, norms, reductions: run in f32
  promote,  // add, mul, cat, where: the widest floating input (the op promotes itself)
  follow,   // relu, pooling, views, dropout: run in the input's dtype
};

const char* precision_class_name(PrecisionClass c);

// The thread-local autocast state. `dtype` is empty when autocast is off. The cache
// holds the low-precision copy of each leaf parameter cast inside the outermost
// autocast region (key: the leaf's impl and the target dtype), so a weight used twice
// is cast once; amp::Autocast clears it when that region ends.
struct AutocastState {
  std::optional<DType> dtype;
  bool cache_enabled = true;
  int depth = 0;  // nesting of amp::Autocast guards
  struct Entry {
    Tensor source;  // kept alive so its address cannot be reused while cached
    Tensor cast;
  };
  std::unordered_map<const TensorImpl*, Entry> cache[3];  // by target: f16, bf16, f32
  int64_t cache_hits = 0;
};
AutocastState& autocast_state();

// Casts the floating inputs an op of class `cls` receives, as the active autocast
// policy asks (the casts are Cast nodes in the graph). Undefined tensors pass through.
TensorList autocast(PrecisionClass cls, const TensorList& inputs);

}  // namespace hg
