// The two-level model the nn::Module tests share:
// Outer { enc: Block { fc, scale, steps (buffer) }, head: Sequential { 0: Linear, 1: ReLU } }.
#pragma once
#include <memory>
#include <string>

#include "halfgrad.h"

namespace hg::test {

struct Block : nn::Module {
  HG_CHILD(nn::Linear, fc, 3, 4);
  HG_PARAM(scale, ones({4}));
  HG_BUFFER(steps, zeros({}, {i64}));
  Tensor forward_impl(const Tensor& x) override { return (*fc)(x) * scale; }
  std::string type_name() const override { return "Block"; }
};

struct Outer : nn::Module {
  HG_CHILD(Block, enc);
  HG_CHILD(nn::Sequential, head, std::make_shared<nn::Linear>(4, 2), std::make_shared<nn::ReLU>());
  Tensor forward_impl(const Tensor& x) override { return (*head)((*enc)(x)); }
  std::string type_name() const override { return "Outer"; }
};

}  // namespace hg::test
