// The names of the enum-selected kernels (unary_stub, binary_stub, reduce_stub) as the
// profiler reports them: "relu" and "relu_grad" tell more than "unary" and "binary".
#include "ops/elementwise_kernels.h"
#include "ops/reduce_kernels.h"

namespace hg {

namespace {
template <size_t N, class E>
const char* lookup(const char* const (&names)[N], E op) {
  const auto i = static_cast<size_t>(op);
  return i < N ? names[i] : "unknown";
}
}  // namespace

const char* op_label(UnaryOp op) {
  static const char* const names[] = {
      "neg",        "exp",        "log",        "sqrt",        "rsqrt",       "abs",         "sign",
      "square",     "reciprocal", "relu",       "sigmoid",     "tanh",        "gelu",        "add_scalar",
      "mul_scalar", "div_scalar", "pow_scalar", "rsub_scalar", "rdiv_scalar", "leaky_relu",  "clamp",
      "isfinite"};
  static_assert(sizeof names / sizeof *names == static_cast<size_t>(UnaryOp::isfinite) + 1);
  return lookup(names, op);
}

const char* op_label(BinaryOp op) {
  static const char* const names[] = {
      "add",       "sub",           "mul",          "div",       "pow",       "maximum",    "minimum",
      "relu_grad", "leaky_relu_grad", "sigmoid_grad", "tanh_grad", "gelu_grad", "clamp_grad", "eq",
      "ne",        "lt",            "le",           "gt",        "ge"};
  static_assert(sizeof names / sizeof *names == static_cast<size_t>(BinaryOp::ge) + 1);
  return lookup(names, op);
}

const char* op_label(ReduceOp op) {
  static const char* const names[] = {"sum", "mean", "max", "min"};
  static_assert(sizeof names / sizeof *names == static_cast<size_t>(ReduceOp::min) + 1);
  return lookup(names, op);
}

}  // namespace hg
