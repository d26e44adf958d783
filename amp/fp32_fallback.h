// Automatic FP32 fallback: a module that keeps overflowing in reduced precision is
// switched to f32 (nn::Module::set_precision) for the rest of the run, and the switch
// is logged as an event with its step and reason.
//
//   amp::Fp32Fallback fallback(model, {.strikes = 3});
//   for (step ...) {
//     fallback.begin_step(step);
//     ... forward under Autocast, backward, res = scaler.step(opt) ...
//     fallback.end_step(&res);
//   }
//
// A strike is (a) a sampled step where the module's f16/bf16 output held inf/NaN and it
// was the first module to finish its forward with one (the innermost culprit), or
// (b) a step the scaler skipped where the module was the last one in forward order
// with non-finite gradients (where backward first overflowed). Forward strikes add up
// over the run; gradient strikes must come on consecutive skipped steps, so the
// scaler's normal probing (an overflow after each growth) never triggers a switch.
// It needs an autocast policy: a module's override changes what autocast computes in.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "amp/grad_scaler.h"
#include "nn/module.h"
#include "framework/serialize/checkpoint.h"

namespace hg::amp {

struct FallbackOptions {
  int64_t strikes = 3;      // k
  int64_t check_every = 1;  // forward checks on steps that are multiples of this
};

struct FallbackEvent {
  int64_t step = 0;
  std::string module;
  std::string reason;
};

class Fp32Fallback {
 public:
  explicit Fp32Fallback(nn::Module& model, FallbackOptions options = {});
  Fp32Fallback(const Fp32Fallback&) = delete;
  Fp32Fallback& operator=(const Fp32Fallback&) = delete;

  void begin_step(int64_t step);
  // After the optimizer step; `result` (may be null) is the scaler's step result.
  // Reads the step's overflow flags back (one synchronisation per checked step).
  void end_step(const StepResult* result = nullptr);

  const std::vector<FallbackEvent>& events() const;
  std::vector<std::string> fp32_modules() const;  // paths switched so far

  // The switches and events go into / come back from a checkpoint's metadata, so a
  // resumed run keeps its f32 modules.
  void save(Checkpoint& checkpoint) const;
  void load(const Checkpoint& checkpoint);

  struct State;

 private:
  std::shared_ptr<State> state_;
  nn::ObserverHandle observer_;  // after state_: removed before the state goes
};

}  // namespace hg::amp
