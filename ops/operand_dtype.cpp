// The one-dtype check of the `lower` class ops and its message.
#include "ops/operand_dtype.h"

#include <string>
#include <vector>

namespace hg {

void check_same_dtype(const char* op, std::initializer_list<std::pair<const char*, const Tensor*>> operands) {
  const Tensor* first = nullptr;
  bool mixed = false;
  for (auto& [name, t] : operands) {
    if (!t->defined()) continue;
    if (!first) first = t;
    mixed = mixed || t->dtype() != first->dtype();
  }
  if (!mixed) return;
  std::vector<std::string> dtypes;
  std::string each;
  for (auto& [name, t] : operands) {
    if (!t->defined()) continue;
    dtypes.push_back(dtype_name(t->dtype()));
    each += detail::concat(each.empty() ? "" : ", ", name, " ", dtype_name(t->dtype()), shape_str(t->shape()));
  }
  std::string got = dtypes[0];
  for (size_t i = 1; i < dtypes.size(); ++i) got += (i + 1 == dtypes.size() ? " and " : ", ") + dtypes[i];
  throw Error(detail::concat(op, ": expected ", dtypes.size() == 2 ? "both" : "all",
                             " operands to have the same dtype, got ", got, " (", each, "). Outside autocast ", op,
                             " does not promote: cast an operand with .to(dtype), or run it under amp::Autocast"));
}

}  // namespace hg
