// LayerNorm, Embedding, GELU and MultiheadAttention: argument checks that name the
// layer and its path, PyTorch's initialisation, forwards over ops/.
#include "nn/transformer_layers.h"

#include "nn/init.h"
#include "ops/activation.h"
#include "ops/attention.h"
#include "ops/gelu_tanh.h"
#include "ops/index.h"
#include "ops/matmul.h"
#include "ops/normalization.h"

namespace hg::nn {

LayerNorm::LayerNorm(Shape shape, double eps_, bool affine) : normalized_shape(std::move(shape)), eps(eps_) {
  HG_CHECK(!normalized_shape.empty() && numel_of(normalized_shape) > 0 && eps_ >= 0,
           "LayerNorm: needs a non-empty normalized_shape of positive sizes and eps >= 0, got ",
           shape_str(normalized_shape), " and ", eps_);
  if (affine) {
    weight = register_parameter("weight", ones(normalized_shape));
    bias = register_parameter("bias", zeros(normalized_shape));
  }
}

Tensor LayerNorm::forward_impl(const Tensor& x) {
  HG_CHECK(x.defined(), "LayerNorm at '", path(), "': undefined input");
  return layer_norm(x, normalized_shape, weight, bias, eps);
}

Embedding::Embedding(int64_t num, int64_t dim) : num_embeddings(num), embedding_dim(dim) {
  HG_CHECK(num > 0 && dim > 0, "Embedding: num_embeddings and embedding_dim must be positive, got ", num, " and ",
           dim);
  weight = register_parameter("weight", empty({num, dim}));
  init::normal_(weight);
}

Tensor Embedding::forward_impl(const Tensor& indices) {
  HG_CHECK(indices.defined() && indices.dtype() == i64, "Embedding(", num_embeddings, ", ", embedding_dim,
           ") at '", path(), "': expected i64 indices, got ",
           indices.defined() ? std::string(dtype_name(indices.dtype())) + shape_str(indices.shape()) : "undefined");
  return embedding(weight, indices);
}

Tensor GELU::forward_impl(const Tensor& x) { return approximate == Approximate::tanh ? gelu_tanh(x) : gelu(x); }

MultiheadAttention::MultiheadAttention(int64_t e, int64_t h, MultiheadAttentionOptions o)
    : embed_dim(e), num_heads(h), options(o) {
  HG_CHECK(e > 0 && h > 0 && e % h == 0, "MultiheadAttention: embed_dim (", e,
           ") must be positive and divisible by num_heads (", h, ")");
  HG_CHECK(o.dropout >= 0 && o.dropout < 1, "MultiheadAttention: dropout must be in [0, 1), got ", o.dropout);
}

Tensor MultiheadAttention::forward_impl(const Tensor& x) { return attend(x, x); }

Tensor MultiheadAttention::operator()(const Tensor& query, const Tensor& key_value) {
  return scoped([&] { return attend(query, key_value); });
}

Tensor MultiheadAttention::attend(const Tensor& query, const Tensor& kv) {
  for (const Tensor* t : {&query, &kv})
    HG_CHECK(t->defined() && t->dim() == 3 && t->size(2) == embed_dim, "MultiheadAttention(", embed_dim, ", ",
             num_heads, ") at '", path(), "': expected [batch, length, ", embed_dim, "] inputs, got ",
             t->defined() ? shape_str(t->shape()) : "undefined");
  HG_CHECK(query.size(0) == kv.size(0), "MultiheadAttention at '", path(), "': query batch ", query.size(0),
           " differs from key/value batch ", kv.size(0));
  const int64_t b = query.size(0), hd = embed_dim / num_heads;
  // [B, T, E] -> [B, heads, T, head_dim]
  auto heads = [&](const Tensor& t) { return t.view({b, t.size(1), num_heads, hd}).transpose(1, 2); };
  const Tensor q = heads((*q_proj)(query)), k = heads((*k_proj)(kv)), v = heads((*v_proj)(kv));
  AttentionOptions ao;
  ao.causal = options.causal;
  ao.scale = options.scale;
  // Dropout acts on the attention weights, between the softmax and the product with v.
  const Tensor y = options.dropout > 0 && is_training()
                       ? matmul(dropout(attention_weights(q, k, ao), options.dropout, true), v)
                       : scaled_dot_product_attention(q, k, v, ao);
  return (*out_proj)(y.transpose(1, 2).reshape({b, query.size(1), embed_dim}));
}

}  // namespace hg::nn
