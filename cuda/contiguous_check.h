// The contract of the kernels that index raw pointers as dense NHWC / [N, C] arrays, checked
// on the host before a launch: one wording of the error for every such op.
#pragma once
#include <initializer_list>

#include "framework/error.h"
#include "framework/tensor.h"

namespace hg::cuda {

// hg::Error naming the op, the device, the shape and the strides of the first defined tensor
// of ts that is not contiguous; undefined tensors (optional operands) pass.
inline void check_contiguous(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts)
    HG_CHECK(!t->defined() || t->is_contiguous(), op, " on ", t->device().str(),
             ": the kernels take contiguous tensors, got shape ", shape_str(t->shape()), " with strides ",
             shape_str(t->strides()));
}

}  // namespace hg::cuda
