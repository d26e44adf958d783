// Gradient clipping by total norm and by value (PyTorch semantics). Both refuse gradients
// that still carry a GradScaler's loss scale (LossScaleMark, framework/autograd.h).
#pragma once
#include <vector>

#include "framework/tensor.h"

namespace hg::optim {

// Scales the gradients of `params` in place so that their total norm (the norm of all
// of them as one vector) is at most max_norm, and returns the total norm before clipping.
// norm_type is a p > 0 or INFINITY. The sums accumulate in f32 (f64 for f64 gradients).
// The scale max_norm / (total + 1e-6) is applied only when below 1; a non-finite total
// is returned as is and the gradients are left untouched. Undefined grads are skipped.
double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0);

// Clamps every gradient element into [-clip, clip] in place (NaN stays NaN).
void clip_grad_value_(const std::vector<Tensor>& params, double clip);

}  // namespace hg::optim
