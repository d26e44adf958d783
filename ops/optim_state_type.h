// The element type of an optimizer's state buffers for a parameter of type T: its
// compute type (f32 for f16/bf16), or T itself when the optimizer keeps its state in
// the parameter's dtype (Optimizer::set_state_in_param_dtype). Updates read a state
// element into the compute type and store it back rounded once.
#pragma once
#include "framework/dtype.h"
#include "framework/tensor.h"

namespace hg::optim {

template <class T, class Body>
void visit_state_type(const Tensor& buffer, Body&& body) {
  using C = compute_t<T>;
  if constexpr (std::is_same_v<T, C>) {
    body.template operator()<C>();
  } else {
    if (buffer.dtype() == dtype_v<T>) body.template operator()<T>();
    else body.template operator()<C>();
  }
}

}  // namespace hg::optim
