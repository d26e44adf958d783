// Saving a tensor for backward, and the error when an in-place op has modified it since.
#include "framework/saved_tensor.h"

#include "framework/autograd.h"

namespace hg {

SavedTensor::SavedTensor(const Tensor& t, Role role, uint32_t index, const char* what)
    : tensor_(t.defined() ? t.detach() : Tensor()),
      version_(t.defined() ? t.version() : 0),
      role_(role),
      index_(index),
      what_(what) {}

void SavedTensor::throw_modified() const {
  const Node* node = autograd::running_node();
  std::string op = node ? node->name() : std::string("a backward function");
  if (node && !node->module_path().empty()) op += " [" + node->module_path() + "]";
  const std::string which = role_ == Role::input    ? detail::concat("input ", index_)
                            : role_ == Role::output ? detail::concat("output ", index_)
                                                    : std::string(what_);
  throw Error(detail::concat(
      "backward of ", op, ": its ", which, " (", dtype_name(tensor_.dtype()), shape_str(tensor_.shape()),
      "), needed for gradient computation, has been modified by an in-place operation: saved at version ", version_,
      ", now ", tensor_.version(),
      ". An in-place write (copy_, fill_, an optimizer step, load_state_dict, ...) changed it between the forward "
      "and this backward; write to a clone() instead, or run backward before the write"));
}

}  // namespace hg
