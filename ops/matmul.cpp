// matmul and linear: shape rules, broadcasting of batch dims, and their gradients.
#include "ops/matmul.h"

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/matmul_kernels.h"
#include "ops/operand_dtype.h"
#include "ops/reduce.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&, const Tensor&)> bmm_stub("bmm");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&)> linear_stub("linear");

Tensor matmul(const Tensor& a1, const Tensor& b1) {
  HG_CHECK(a1.defined() && b1.defined(), "matmul: undefined operand");
  const TensorList in = autocast(PrecisionClass::lower, {a1, b1});
  const Tensor &a0 = in[0], &b0 = in[1];
  HG_CHECK(a0.dim() >= 1 && b0.dim() >= 1, "matmul: operands must have at least 1 dimension, got ",
           shape_str(a0.shape()), " and ", shape_str(b0.shape()));
  HG_CHECK(a0.device() == b0.device(), "matmul: operands are on different devices (", a0.device(), " and ",
           b0.device(), ")");
  HG_CHECK(is_floating(a0.dtype()) && is_floating(b0.dtype()), "matmul: needs floating operands, got ",
           dtype_name(a0.dtype()), " and ", dtype_name(b0.dtype()));
  check_same_dtype("matmul", {{"input", &a0}, {"other", &b0}});
  const DType dt = a0.dtype();
  Tensor a = a0, b = b0;
  const bool a_vec = a.dim() == 1, b_vec = b.dim() == 1;
  if (a_vec) a = a.unsqueeze(0);
  if (b_vec) b = b.unsqueeze(1);
  const int64_t M = a.size(-2), K = a.size(-1), K2 = b.size(-2), N = b.size(-1);
  HG_CHECK(K == K2, "matmul: inner dimensions differ: ", shape_str(a0.shape()), " · ", shape_str(b0.shape()),
           " (", K, " vs ", K2, "; the last axis of the first must equal the second-to-last of the second)");
  Shape ba(a.shape().begin(), a.shape().end() - 2), bb(b.shape().begin(), b.shape().end() - 2);
  Shape batch = broadcast_shapes(ba, bb, "matmul (batch dimensions)");
  Shape sa = batch, sb = batch, so = batch;
  sa.insert(sa.end(), {M, K});
  sb.insert(sb.end(), {K, N});
  so.insert(so.end(), {M, N});
  const int64_t B = numel_of(batch);
  Tensor a3 = a.detach().expand(sa).reshape({B, M, K});
  Tensor b3 = b.detach().expand(sb).reshape({B, K, N});
  Tensor out = empty({B, M, N}, {dt, a.device()});
  if (out.numel()) {
    if (K == 0) detail::fill_new(out, 0.0);
    else bmm_stub(a.device(), a3, b3, out);
  }
  Tensor y = out.view(so);
  autograd::record("matmul", {a, b}, y,
                   [a_saved = SavedTensor::input(a, 0), b_saved = SavedTensor::input(b, 1)](const Tensor& g) {
    const Tensor &a = a_saved.unpack(), &b = b_saved.unpack();
    Tensor ga, gb;
    if (autograd::needs_input_grad(0)) ga = sum_to(matmul(g, b.transpose(-1, -2)), a.shape());
    if (autograd::needs_input_grad(1)) gb = sum_to(matmul(a.transpose(-1, -2), g), b.shape());
    return TensorList{ga, gb};
  });
  if (a_vec) y = y.squeeze(-2);
  if (b_vec) y = y.squeeze(-1);
  return y;
}

Tensor linear(const Tensor& x0, const Tensor& w0, const Tensor& b0) {
  // Cast before transposing, so the weight (a leaf) goes through the autocast cache.
  const TensorList in = autocast(PrecisionClass::lower, {x0, w0, b0});
  const Tensor &x = in[0], &w = in[1], &bias = in[2];
  HG_CHECK(w.defined() && w.dim() == 2, "linear: weight must be 2-D [out, in], got ",
           w.defined() ? shape_str(w.shape()) : std::string("undefined"));
  HG_CHECK(x.defined() && x.dim() >= 1 && x.size(-1) == w.size(1), "linear: input ",
           x.defined() ? shape_str(x.shape()) : std::string("undefined"), " does not end in the weight's in_features ",
           w.size(1), " (weight ", shape_str(w.shape()), ")");
  if (bias.defined())
    HG_CHECK(bias.dim() == 1 && bias.size(0) == w.size(0), "linear: bias ", shape_str(bias.shape()), " must be [",
             w.size(0), "]");
  HG_CHECK(x.device() == w.device() && (!bias.defined() || bias.device() == w.device()),
           "linear: operands are on different devices (", x.device(), ", ", w.device(),
           bias.defined() ? ", " + bias.device().str() : std::string(), ")");
  HG_CHECK(is_floating(x.dtype()) && is_floating(w.dtype()), "linear: needs floating operands, got ",
           dtype_name(x.dtype()), " and ", dtype_name(w.dtype()));
  check_same_dtype("linear", {{"input", &x}, {"weight", &w}, {"bias", &bias}});
  // One kernel for the product and the bias, as matmul(x, w^T) + bias would compute it but
  // rounded once; x's leading axes (none for a vector) are flattened into the rows of one GEMM.
  const int64_t K = x.size(-1), N = w.size(0);
  Shape so(x.shape().begin(), x.shape().end() - 1);
  const int64_t M = numel_of(so);
  so.push_back(N);
  Tensor out = empty({M, N}, {x.dtype(), x.device()});
  if (out.numel()) {
    if (K == 0) bias.defined() ? detail::copy_into_new(out, bias.detach()) : detail::fill_new(out, 0.0);
    else
      linear_stub(x.device(), x.detach().reshape({M, K}), w.detach(), bias.defined() ? bias.detach().contiguous() : bias,
                  out);
  }
  Tensor y = out.view(so);
  // The gradients matmul(x, w^T) + bias would get, each from one GEMM over all M rows. The
  // node keeps the name matmul that graphs and messages have always shown for it.
  autograd::record("matmul", {x, w, bias}, y,
                   [x_saved = SavedTensor::input(x, 0), w_saved = SavedTensor::input(w, 1), M, K, N,
                    has_bias = bias.defined()](const Tensor& g) {
                     const Tensor &x = x_saved.unpack(), &w = w_saved.unpack();
                     Tensor gx, gw, gb;
                     if (autograd::needs_input_grad(0)) gx = matmul(g, w);
                     if (autograd::needs_input_grad(1))
                       gw = matmul(g.reshape({M, N}).transpose(0, 1), x.reshape({M, K}));
                     if (has_bias && autograd::needs_input_grad(2)) gb = sum_to(g, {N});
                     return TensorList{gx, gw, gb};
                   });
  return y;
}

}  // namespace hg
