// Casting a model to a policy's parameter dtype (BatchNorm kept in f32), and the f32
// master weights of O2 ("amp-master"): the optimizer steps f32 copies of the model's
// f16 parameters, so updates smaller than half an f16 ulp are not lost.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "nn/module.h"
#include "framework/state_dict.h"

namespace hg::amp {

// Converts every floating parameter and buffer of `model` to `dtype` in place, except
// those of BatchNorm modules when keep_batchnorm_f32 (they stay f32).
void cast_model(nn::Module& model, DType dtype, bool keep_batchnorm_f32 = true);

class MasterWeights {
 public:
  // Takes model.named_parameters(); f16/bf16 ones get an f32 master copy, f32 ones are
  // their own masters. The copies are made here: when resuming, load the model before
  // building this, or (for a bit-exact resume) load this one's state_dict afterwards.
  explicit MasterWeights(std::vector<std::pair<std::string, Tensor>> model_params);

  // What the optimizer is built on: f32 leaves named like the model's parameters.
  std::vector<std::pair<std::string, Tensor>> params() const;
  // After backward: master.grad = model.grad widened to f32 (exactly); model grads dropped.
  void copy_grads_to_master();
  // After the optimizer step: model = master rounded once to the model's dtype.
  void copy_master_to_model();

  // The f32 masters of the reduced-precision parameters, by parameter name (f32 ones are
  // their own masters and live in the model's state dict). Save it with the model: the
  // model holds the masters rounded to f16/bf16, so a run resumed without it restarts
  // from rounded masters and drifts away from the run it continues.
  StateDict state_dict() const;
  // Loads every master (exactly the names state_dict() gives, f32, same shapes; checked
  // before anything changes, refused as a whole) and rounds them into the model.
  void load_state_dict(const StateDict& sd);

 private:
  std::vector<std::pair<std::string, Tensor>> model_;
  std::vector<Tensor> master_;
};

}  // namespace hg::amp
