// "Gradient ready" hooks: called right after backward has accumulated a leaf's .grad, so
// data-parallel training (dist/ddp.h) can start reducing a bucket of gradients
// while the rest of backward still runs. Kept out of TensorImpl so adding it did not
// change the layout every file sees.
#pragma once
#include <cstdint>
#include <functional>

#include "framework/tensor.h"

namespace hg::autograd {

// Called with the leaf (its .grad now holds this backward's contribution) in the thread
// running backward. A hook may not run backward itself.
using GradReadyHook = std::function<void(const Tensor& leaf)>;

// Returns a handle for remove_grad_ready_hook. The leaf must require grad.
int64_t add_grad_ready_hook(const Tensor& leaf, GradReadyHook hook);
void remove_grad_ready_hook(int64_t handle);

namespace detail {
// The engine's call after AccumulateGrad wrote `leaf`'s gradient (cheap when no hook exists).
void notify_grad_ready(const std::shared_ptr<TensorImpl>& leaf);
}  // namespace detail

}  // namespace hg::autograd
