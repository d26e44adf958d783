// GPT's forward, read top to bottom as its diagram: embed tokens and positions, run
// the blocks, normalise, project back onto the vocabulary with the token embedding.
#include "models/gpt.h"

#include "nn/init.h"
#include "ops/elementwise.h"
#include "ops/matmul.h"

namespace hg {

Tensor GPTBlock::forward_impl(const Tensor& x0) {
  const Tensor x = x0 + (*attn)((*ln1)(x0));
  return x + (*mlp)((*ln2)(x));
}

GPT::GPT(const GPTConfig& c) : config(c) {
  HG_CHECK(c.vocab_size > 0 && c.block_size > 0 && c.n_layer > 0, "GPT: vocab_size, block_size and n_layer must be ",
           "positive, got ", c.vocab_size, ", ", c.block_size, ", ", c.n_layer);
  for (int64_t i = 0; i < c.n_layer; ++i) blocks->push_back(std::make_shared<GPTBlock>(c));
  for (auto& [name, m] : named_modules()) {
    if (auto* lin = dynamic_cast<nn::Linear*>(m)) {
      nn::init::normal_(lin->weight, 0.0, 0.02);
      if (lin->bias.defined()) nn::init::zeros_(lin->bias);
    } else if (auto* emb = dynamic_cast<nn::Embedding*>(m)) {
      nn::init::normal_(emb->weight, 0.0, 0.02);
    }
  }
}

Tensor GPT::forward_impl(const Tensor& tokens) {
  HG_CHECK(tokens.defined() && tokens.dim() == 2 && tokens.dtype() == i64 && tokens.size(1) <= config.block_size,
           "GPT at '", path(), "': expected i64 tokens [batch, length <= ", config.block_size, "], got ",
           tokens.defined() ? std::string(dtype_name(tokens.dtype())) + shape_str(tokens.shape()) : "undefined");
  const Tensor positions = arange(0, static_cast<double>(tokens.size(1)), 1, {i64, tokens.device()});
  Tensor x = (*drop)((*wte)(tokens) + (*wpe)(positions));
  for (size_t i = 0; i < blocks->size(); ++i) x = (*blocks)[i](x);
  return linear((*ln_f)(x), wte->weight);  // the head shares the token embedding
}

}  // namespace hg
