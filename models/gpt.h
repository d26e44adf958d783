// A small GPT (decoder-only transformer): token + position embedding, pre-LN blocks of
// causal self-attention and a GELU MLP, a final LayerNorm and a head tied to the token
// embedding. Input: i64 token ids [batch, length]; output: logits [batch, length, vocab].
#pragma once
#include <cstdint>
#include <string>

#include "nn/containers.h"
#include "nn/layers.h"
#include "nn/transformer_layers.h"

namespace hg {

struct GPTConfig {
  int64_t vocab_size = 0;
  int64_t block_size = 64;  // the longest sequence (position embeddings)
  int64_t n_layer = 2;
  int64_t n_head = 2;
  int64_t n_embd = 64;
  double dropout = 0;
  double attn_scale = 0;  // attention logit scale; 0: 1/sqrt(head dim) (larger values are f16-hostile)
};

// x + attn(ln1(x)), then x + mlp(ln2(x)).
class GPTBlock : public nn::Module {
 public:
  explicit GPTBlock(const GPTConfig& c) : config(c) {}
  std::string type_name() const override { return "GPTBlock"; }

  const GPTConfig config;
  HG_CHILD(nn::LayerNorm, ln1, config.n_embd);
  HG_CHILD(nn::MultiheadAttention, attn, config.n_embd, config.n_head,
           nn::MultiheadAttentionOptions{.causal = true, .dropout = config.dropout, .scale = config.attn_scale});
  HG_CHILD(nn::LayerNorm, ln2, config.n_embd);
  HG_CHILD(nn::Sequential, mlp, std::make_shared<nn::Linear>(config.n_embd, 4 * config.n_embd),
           std::make_shared<nn::GELU>(nn::GELU::Approximate::tanh),
           std::make_shared<nn::Linear>(4 * config.n_embd, config.n_embd), std::make_shared<nn::Dropout>(config.dropout));

 protected:
  Tensor forward_impl(const Tensor& x) override;
};

class GPT : public nn::Module {
 public:
  // Weights of linear layers and embeddings N(0, 0.02), biases zero, as GPT-2 starts.
  explicit GPT(const GPTConfig& c);
  std::string type_name() const override { return "GPT"; }

  const GPTConfig config;
  HG_CHILD(nn::Embedding, wte, config.vocab_size, config.n_embd);
  HG_CHILD(nn::Embedding, wpe, config.block_size, config.n_embd);
  HG_CHILD(nn::Dropout, drop, config.dropout);
  HG_CHILD(nn::ModuleList, blocks);
  HG_CHILD(nn::LayerNorm, ln_f, config.n_embd);

 protected:
  Tensor forward_impl(const Tensor& tokens) override;
};

}  // namespace hg
