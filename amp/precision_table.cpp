// The table itself. A row's class is what the op passes to autocast(); keep them equal
// (tests/amp/test_precision_table.cpp checks every row against the op's behaviour).
#include "amp/precision_table.h"

#include <cmath>
#include <sstream>

#include "framework/error.h"
#include "framework/tensor.h"

namespace hg::amp {

const std::vector<OpPrecision>& precision_table() {
  using P = PrecisionClass;
  static const std::vector<OpPrecision> t = {
      {"matmul", P::lower, "tensor-core GEMM: f16 products are exact in f32 and accumulate in f32, so f16 inputs lose little"},
      {"linear", P::lower, "a matmul plus bias"},
      {"conv2d", P::lower, "implicit GEMM on tensor cores, f32 accumulation"},
      {"conv_transpose2d", P::lower, "the input gradient of conv2d, same kernels"},
      {"softmax", P::fp32,
       "the max is subtracted first, so exp cannot overflow; but an f16 output flushes probabilities at or below 2^-25 "
       "to 0, keeps fewer than 11 significant bits below 2^-14 (subnormal) and 11 above, and the normalising sum "
       "needs f32 precision"},
      {"log_softmax", P::fp32,
       "x - max - log(sum): never forms the probabilities, so tiny ones keep their log; the sum needs f32 precision"},
      {"exp", P::fp32, "exp(x) > 65504 for x > 11.09"},
      {"log", P::fp32, "inputs at or below 2^-25 (3e-8) are 0 in f16, giving -inf"},
      {"pow", P::fp32, "powers overflow and underflow f16 quickly"},
      {"sum", P::fp32, "a sum of more than 65504 in total overflows f16 (e.g. counting pixels)"},
      {"mean", P::fp32, "a reduction: f32 result (PyTorch's autocast leaves mean in the input's dtype)"},
      {"cross_entropy", P::fp32, "a loss: log-softmax and a reduction over every pixel"},
      {"bce_with_logits", P::fp32, "a loss"},
      {"mse_loss", P::fp32, "a loss: a difference of 255.97 or more squares to inf in f16 (x^2 >= 65520 rounds to inf)"},
      {"soft_dice", P::fp32, "a loss: sums of probabilities over the whole batch exceed 65504"},
      {"batch_norm", P::fp32, "statistics always accumulate in f32 inside the op; output in the input's dtype"},
      {"batch_norm_relu", P::fp32, "batch_norm and relu in one pass (a BatchNorm2d built with_relu): batch_norm's class"},
      {"add", P::promote, "elementwise: the widest input decides, no information is thrown away"},
      {"sub", P::promote, "elementwise"},
      {"mul", P::promote, "elementwise"},
      {"div", P::promote, "elementwise; true division: integer inputs give f32"},
      {"where", P::promote, "selects between two inputs"},
      {"cat", P::promote, "joins tensors: the widest input decides"},
      {"stack", P::promote, "joins tensors"},
      {"relu", P::follow, "exact in any dtype"},
      {"leaky_relu", P::follow, "one multiply, rounded once"},
      {"sigmoid", P::follow, "bounded output, computed in f32 and rounded once"},
      {"tanh", P::follow, "bounded output"},
      {"gelu", P::follow, "computed in f32 and rounded once"},
      {"max_pool2d", P::follow, "selects values: exact"},
      {"avg_pool2d", P::follow, "small window mean, accumulated in f32"},
      {"upsample", P::follow, "copies or interpolates neighbours"},
      {"dropout", P::follow, "masks and scales"},
      {"pad", P::follow, "copies"},
      {"views", P::follow, "reshape, permute, slice, expand: no arithmetic"},
      {"bmm", P::lower, "a batched matmul"},
      {"scaled_dot_product_attention", P::lower,
       "q kᵀ and the product with v run in the compute dtype; the softmax between them is f32"},
      {"layer_norm", P::fp32,
       "the row's mean and variance are sums that cancel: accumulated in f16 they lose the spread, and x^2 is inf "
       "in f16 from |x| of about 256 (x^2 >= 65520); an f16 input keeps what storage kept, no more"},
      {"gelu_tanh", P::follow, "computed in f32 and rounded once"},
      {"index_select", P::follow, "copies rows: exact"},
      {"gather", P::follow, "copies elements: exact"},
      {"embedding", P::follow, "copies rows of the weight: exact (the backward sums repeats in f32)"},
      {"sort", P::follow, "reorders values: exact"},
      {"topk", P::follow, "selects values: exact"},
      {"masked_fill", P::follow,
       "copies, the fill value rounds once into the input's dtype (one beyond its range is refused, as in PyTorch)"},
      {"tril", P::follow, "copies or zeroes"},
      {"triu", P::follow, "copies or zeroes"},
  };
  return t;
}

PrecisionClass precision_class_of(const std::string& op) {
  for (const OpPrecision& r : precision_table())
    if (op == r.op) return r.cls;
  throw Error("precision_class_of: '" + op + "' is not in the precision table");
}

std::string precision_table_markdown() {
  std::string s = "| op | class | why |\n|---|---|---|\n";
  for (const OpPrecision& r : precision_table())
    s += std::string("| ") + r.op + " | " + precision_class_name(r.cls) + " | " + r.reason + " |\n";
  return s;
}

std::string cast_table_markdown() {
  const std::vector<double> values{2.75, -2.75, 70000.0, 1e30, -1e30, INFINITY, -INFINITY, NAN};
  const Tensor x = from_vector(values, {static_cast<int64_t>(values.size())}, {f64});
  const std::vector<int64_t> as_i64 = x.to(i64).to_vector<int64_t>();
  const std::vector<double> as_bool = x.to(b8).to_vector<double>(), as_f16 = x.to(f16).to_vector<double>();
  std::ostringstream s;
  s << "| f64 value | to i64 | to bool | to f16 |\n|---|---|---|---|\n";
  for (size_t i = 0; i < values.size(); ++i)
    s << "| " << values[i] << " | " << as_i64[i] << " | " << (as_bool[i] != 0 ? "true" : "false") << " | " << as_f16[i]
      << " |\n";
  return s.str();
}

}  // namespace hg::amp
