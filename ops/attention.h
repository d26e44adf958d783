// Batched matrix products and scaled dot-product attention, written over matmul (the
// `lower` class) and softmax (the `fp32` class): under autocast the products run in the
// compute dtype and the attention weights are computed in f32.
#pragma once
#include "framework/tensor.h"

namespace hg {

// a [..., n, k] · b [..., k, m], both at least 3-D, batch axes broadcast (NumPy rules).
Tensor bmm(const Tensor& a, const Tensor& b);

struct AttentionOptions {
  bool causal = false;  // query i attends to keys 0..i (+ S - L when there are more keys)
  Tensor mask;          // optional bool [..., L, S]: true where a query may attend (as PyTorch's SDPA)
  double scale = 0;     // 0: 1/sqrt(head dim)
};

// softmax(q kᵀ · scale + masking) over the keys: [..., L, S], f32 under autocast.
Tensor attention_weights(const Tensor& q, const Tensor& k, const AttentionOptions& options = {});
// softmax(q kᵀ · scale + masking) v for q [..., L, E], k [..., S, E], v [..., S, Ev];
// the scale multiplies q before the product. Masked logits become -65504 (no inf in the
// graph), so a query with every key masked out attends uniformly instead of giving NaN.
Tensor scaled_dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v,
                                    const AttentionOptions& options = {});

}  // namespace hg
