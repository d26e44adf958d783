// Precision policies (jmp's string form) and the five training modes of the benchmark
// as recipes: which dtype parameters live in, what autocast computes in, whether the
// optimizer keeps f32 master weights, and whether the loss is scaled.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "framework/dtype.h"

namespace hg::amp {

struct Policy {
  DType params = f32;   // dtype the model's parameters are stored in
  DType compute = f32;  // dtype `lower` ops (matmul, conv) run in
  DType output = f32;   // dtype the model's output is cast to
  bool keep_batchnorm_f32 = true;  // BatchNorm parameters and statistics stay f32
  // > 0: a module whose f16 output overflows this many times runs in f32 from then on
  // (amp::Fp32Fallback; needs an autocast policy). "fallback=3" in the string form.
  int64_t fallback_strikes = 0;

  // "params=f32,compute=f16,output=f32" (keys: params, compute, output, batchnorm=f32|params,
  // fallback=N).
  // Throws hg::Error naming an unknown key or dtype and what is valid.
  static Policy parse(const std::string& spec);
  std::string str() const;
};

enum class Mode { fp32, amp, amp_master, bf16, fp16 };

struct Recipe {
  Mode mode = Mode::fp32;
  std::string name;                 // "fp32", "amp", "amp-master", "bf16", "fp16"
  Policy policy;
  std::optional<DType> autocast;    // dtype of the Autocast region around forward
  bool master_weights = false;      // optimizer steps f32 copies of f16 parameters (O2)
  bool loss_scaling = false;        // dynamic GradScaler
  // The optimizer keeps its state in the parameters' dtype (naive fp16: what Adam does
  // for a PyTorch model cast with .half()); see Optimizer::set_state_in_param_dtype.
  bool optimizer_state_in_param_dtype = false;
  std::string description;
};

// "fp32" | "amp" (O1) | "amp-master" (O2) | "bf16" | "fp16" (O3, naive).
Recipe recipe(const std::string& mode);
std::vector<std::string> mode_names();

}  // namespace hg::amp
