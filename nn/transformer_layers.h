// The layers a transformer is built from, as Modules over ops/: LayerNorm, Embedding,
// GELU and MultiheadAttention (scaled dot-product attention with an optional causal
// mask; under autocast its projections run in the compute dtype, its softmax in f32).
#pragma once
#include <cstdint>
#include <string>

#include "nn/layers.h"

namespace hg::nn {

// Normalises the last axes (normalized_shape) of its input; weight (ones) and bias
// (zeros) of that shape when elementwise_affine.
class LayerNorm : public Module {
 public:
  explicit LayerNorm(Shape normalized_shape, double eps = 1e-5, bool elementwise_affine = true);
  explicit LayerNorm(int64_t dim, double eps = 1e-5, bool elementwise_affine = true)
      : LayerNorm(Shape{dim}, eps, elementwise_affine) {}
  std::string type_name() const override { return "LayerNorm"; }

  const Shape normalized_shape;
  const double eps;
  Tensor weight, bias;  // undefined without elementwise_affine

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

// A lookup table: i64 indices [...] -> weight rows [..., dim]; weight N(0, 1) as PyTorch's.
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim);
  std::string type_name() const override { return "Embedding"; }

  const int64_t num_embeddings, embedding_dim;
  Tensor weight;

 protected:
  Tensor forward_impl(const Tensor& indices) override;
};

// GELU, exact (erf) by default or with PyTorch's approximate="tanh".
class GELU : public Module {
 public:
  enum class Approximate : uint8_t { none, tanh };
  explicit GELU(Approximate approximate = Approximate::none) : approximate(approximate) {}
  std::string type_name() const override { return "GELU"; }

  const Approximate approximate;

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

struct MultiheadAttentionOptions {
  bool bias = true;
  bool causal = false;  // each query attends to keys at its position and before
  double dropout = 0;   // on the attention weights, in training
  double scale = 0;     // logits = q kᵀ · scale; 0: 1/sqrt(head dim)
};

// Multi-head attention on [batch, length, embed_dim] inputs, as torch.nn.MultiheadAttention
// with batch_first: q/k/v projections (q_proj, k_proj, v_proj) split into num_heads heads,
// scaled dot-product attention per head, then out_proj. Self-attention is m(x); cross-
// attention m(query, key_value).
class MultiheadAttention : public Module {
 public:
  MultiheadAttention(int64_t embed_dim, int64_t num_heads, MultiheadAttentionOptions options = {});
  std::string type_name() const override { return "MultiheadAttention"; }
  using Module::operator();
  Tensor operator()(const Tensor& query, const Tensor& key_value);

  const int64_t embed_dim, num_heads;
  const MultiheadAttentionOptions options;
  HG_CHILD(Linear, q_proj, embed_dim, embed_dim, options.bias);
  HG_CHILD(Linear, k_proj, embed_dim, embed_dim, options.bias);
  HG_CHILD(Linear, v_proj, embed_dim, embed_dim, options.bias);
  HG_CHILD(Linear, out_proj, embed_dim, embed_dim, options.bias);

 protected:
  Tensor forward_impl(const Tensor& x) override;

 private:
  Tensor attend(const Tensor& query, const Tensor& key_value);
};

}  // namespace hg::nn
