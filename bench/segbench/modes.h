// segbench's training modes: the five precision recipes of amp/policy.h plus an opt-in
// ablation ladder that removes one ingredient of AMP at a time, and what each mode
// stores in which dtype (the report's dtype columns).
#pragma once
#include <string>
#include <vector>

#include "amp/policy.h"

namespace hg::segbench {

enum class OptimizerKind { adam, sgd };

struct Mode {
  std::string name;
  amp::Recipe recipe;  // dtypes, autocast, loss scaling, master weights, optimizer-state dtype
  OptimizerKind optimizer = OptimizerKind::adam;
  bool ablation = false;  // opt-in (--ablations), not in the default run
  std::string description;
  // What lives in which dtype, as the report prints it ("f32", "f16", "f16 (f32 master)").
  std::string params_dtype() const;
  std::string activations_dtype() const;
  std::string grads_dtype() const;  // weight gradients as backward stores them
  std::string optimizer_state_dtype() const;
};

// Throws hg::Error naming the unknown mode and listing the valid ones.
Mode mode(const std::string& name);
std::vector<std::string> default_mode_names();   // fp32, amp, amp-master, bf16, fp16
std::vector<std::string> ablation_mode_names();  // amp-noscale, fp16-f32state, fp32-sgd, amp-sgd, fp16-sgd
std::string valid_modes_text();                  // both lists, for --help and errors

// SGD's learning rate relative to Adam's --lr: SGD with momentum 0.9 needs a larger step
// size because it does not normalise the gradient. 30x was the best of a ladder 3x, 10x,
// 30x, 100x on the cpu profile's shapes (docs/benchmark.md, the ablation ladder).
constexpr double kSgdLrFactor = 30.0;
constexpr double kSgdMomentum = 0.9;

}  // namespace hg::segbench
