// bmm and scaled dot-product attention over matmul, masked_fill and softmax: they run
// wherever those run, and under autocast the products lower while the softmax is f32.
#include "ops/attention.h"

#include <cmath>

#include "ops/elementwise.h"
#include "ops/masking.h"
#include "ops/matmul.h"
#include "ops/softmax.h"

namespace hg {

Tensor bmm(const Tensor& a, const Tensor& b) {
  HG_CHECK(a.defined() && b.defined(), "bmm: undefined tensor");
  HG_CHECK(a.dim() >= 3 && b.dim() >= 3, "bmm: expected batches of matrices (at least 3-D), got ",
           shape_str(a.shape()), " and ", shape_str(b.shape()));
  HG_CHECK(a.size(-1) == b.size(-2), "bmm: inner sizes differ: ", shape_str(a.shape()), " · ",
           shape_str(b.shape()), " (a's last axis must equal b's second to last)");
  broadcast_shapes(Shape(a.shape().begin(), a.shape().end() - 2), Shape(b.shape().begin(), b.shape().end() - 2),
                   "bmm (batch axes)");
  return matmul(a, b);
}

Tensor attention_weights(const Tensor& q, const Tensor& k, const AttentionOptions& o) {
  HG_CHECK(q.defined() && k.defined(), "attention: undefined tensor");
  HG_CHECK(q.dim() >= 2 && k.dim() >= 2 && q.size(-1) == k.size(-1),
           "attention: expected q [..., L, E] and k [..., S, E], got ", shape_str(q.shape()), " and ",
           shape_str(k.shape()));
  HG_CHECK(o.scale >= 0 && std::isfinite(o.scale), "attention: scale must be finite and >= 0 "
           "(0 means 1/sqrt(E)), got ", o.scale);
  const int64_t L = q.size(-2), S = k.size(-2);
  const double scale = o.scale > 0 ? o.scale : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
  Tensor scores = matmul(q * scale, k.transpose(-2, -1));
  // Masked logits get -65504 rather than -inf: exp of it against any logit f16 can hold
  // is exactly 0, and no inf appears for DetectAnomaly to report in a healthy model.
  const double masked = -65504.0;
  // Key j is hidden from query i when j - i > S - L: the upper triangle above that diagonal.
  if (o.causal) scores = masked_fill(scores, triangle_mask(L, S, S - L + 1, false, q.device()), masked);
  if (o.mask.defined()) {
    HG_CHECK(o.mask.dtype() == b8, "attention: the mask must be bool (true = may attend), got ",
             dtype_name(o.mask.dtype()), shape_str(o.mask.shape()));
    scores = where(o.mask, scores, full({}, masked, {scores.dtype(), scores.device()}));
  }
  return softmax(scores, -1);
}

Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionOptions& o) {
  HG_CHECK(v.defined() && k.defined() && v.dim() >= 2 && k.dim() >= 2 && k.size(-2) == v.size(-2),
           "scaled_dot_product_attention: expected v [..., S, Ev] with k's S, got k ",
           k.defined() ? shape_str(k.shape()) : "undefined", " and v ", v.defined() ? shape_str(v.shape()) : "undefined");
  return matmul(attention_weights(q, k, o), v);
}

}  // namespace hg
