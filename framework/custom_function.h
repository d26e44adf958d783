// Custom autograd functions, the equivalent of torch.autograd.Function: a struct with a
// static forward (runs without recording, may save tensors in a context) and a static
// backward (gets the context and the output's gradient). See docs/custom-function.md.
#pragma once
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "framework/autograd.h"
#include "framework/saved_tensor.h"

namespace hg::autograd {

// What forward hands to backward: saved tensors (handles to the values forward saw)
// and named numbers (a scale, an axis).
class FunctionCtx {
 public:
  // Saved with their versions: reading them in backward after an in-place write to one
  // raises hg::Error instead of computing a gradient from the modified values.
  void save_for_backward(const TensorList& tensors) {
    saved_.clear();
    for (const Tensor& t : tensors) saved_.push_back(SavedTensor::other(t, "tensor saved by save_for_backward"));
  }
  TensorList saved_tensors() const {
    TensorList out;
    for (const SavedTensor& s : saved_) out.push_back(s.unpack());
    return out;
  }
  // Inside backward: whether input i needs a gradient (skip the work when not).
  bool needs_input_grad(size_t i) const { return autograd::needs_input_grad(i); }
  std::unordered_map<std::string, double> saved_data;

 private:
  std::vector<SavedTensor> saved_;
};

// Derive as `struct MyOp : Function<MyOp>` and define
//   static constexpr const char* name = "my_op";
//   static Tensor forward(FunctionCtx& ctx, const TensorList& inputs, extra args...);
//   static TensorList backward(FunctionCtx& ctx, const Tensor& grad_output);  // one per input
// then call MyOp::apply({a, b}, extra args...). backward may return an undefined tensor
// for an input that needs no gradient.
template <class F>
struct Function {
  template <class... Extra>
  static Tensor apply(const TensorList& inputs, Extra&&... extra) {
    auto ctx = std::make_shared<FunctionCtx>();
    Tensor y;
    {
      NoGrad no_grad;
      TensorList detached;
      for (const Tensor& t : inputs) detached.push_back(t.defined() ? t.detach() : t);
      y = F::forward(*ctx, detached, std::forward<Extra>(extra)...);
    }
    HG_CHECK(y.defined(), F::name, ": forward returned an undefined tensor");
    y = y.detach();  // a forward that returns an input must not alias the input's autograd state
    std::vector<Shape> shapes;
    for (const Tensor& t : inputs) shapes.push_back(t.defined() ? t.shape() : Shape{});
    record(F::name, inputs, y, [ctx, shapes](const Tensor& g) {
      TensorList grads = F::backward(*ctx, g);
      HG_CHECK(grads.size() == shapes.size(), F::name, ": backward returned ", grads.size(), " gradients for ",
               shapes.size(), " inputs (return one per input; an undefined Tensor for none)");
      for (size_t i = 0; i < grads.size(); ++i)
        HG_CHECK(!grads[i].defined() || grads[i].shape() == shapes[i], F::name, ": backward's gradient ", i,
                 " has shape ", shape_str(grads[i].shape()), " but input ", i, " has shape ", shape_str(shapes[i]));
      return grads;
    });
    return y;
  }
};

}  // namespace hg::autograd
