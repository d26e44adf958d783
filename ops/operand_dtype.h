// The dtype rule of the `lower` class ops (matmul, linear, conv): their operands share one
// dtype, as in PyTorch. Autocast casts them to one first; outside it, f16 with f32 is an
// error rather than a silent promotion to f32 (which would hide a missing autocast).
#pragma once
#include <initializer_list>
#include <utility>

#include "framework/tensor.h"

namespace hg {

// `operands`: (name, tensor) pairs; undefined tensors (an absent bias) are skipped.
void check_same_dtype(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> operands);

}  // namespace hg
