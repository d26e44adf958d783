// The numerics monitor: per module and per tensor kind (activation, activation
// gradient, weight, weight gradient) the f16-range statistics of amp/tensor_stats.h,
// sampled every N steps, as JSON lines and as a table of the worst offenders.
//
//   amp::NumericsMonitor mon(model, {.every = 50});
//   for (step ...) {
//     mon.begin_step(step);
//     ... forward, scaler.scale(loss).backward(), scaler.unscale_(opt) ...
//     mon.end_step();              // weights and (unscaled) weight gradients
//     scaler.step(opt); ...
//   }
//   std::cout << mon.worst_table();
//
// Activation gradients are recorded as backward sees them, i.e. still multiplied by
// the loss scale: that is what lives in f16 and may underflow or overflow there.
// Statistics stay on the device until records() (one synchronisation per report).
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "amp/tensor_stats.h"
#include "nn/module.h"

namespace hg::amp {

enum class TensorKind : uint8_t { activation, activation_grad, weight, weight_grad };
const char* tensor_kind_name(TensorKind k);  // "activation", "activation grad", ...

struct MonitorOptions {
  int64_t every = 50;  // sample steps whose index is a multiple of this
  bool activations = true;
  bool activation_grads = true;
  bool weights = true;
  bool weight_grads = true;
};

struct NumericsRecord {
  int64_t step = 0;
  std::string module;  // path in the model ("down3.conv2"; "" for the model itself)
  std::string param;   // "weight", "bias" for weight kinds; "" otherwise
  TensorKind kind = TensorKind::activation;
  DType dtype = f32;
  Shape shape;
  TensorStats stats;
  std::string label() const;  // "down3.conv2 weight grad"
  std::string json() const;   // one line
};

class NumericsMonitor {
 public:
  explicit NumericsMonitor(nn::Module& model, MonitorOptions options = {});
  NumericsMonitor(const NumericsMonitor&) = delete;
  NumericsMonitor& operator=(const NumericsMonitor&) = delete;

  // Opens step `step`; it is sampled when step % every == 0.
  void begin_step(int64_t step);
  bool sampling() const;
  // Records the parameters and their gradients of a sampled step and closes it.
  void end_step();

  // Everything recorded so far, in order (reads pending device statistics back).
  const std::vector<NumericsRecord>& records();
  std::string jsonl();
  void write_jsonl(const std::string& path);
  // The n records at most that are worst for f16 (overflow and non-finite first, then
  // the fraction that would flush to zero, then subnormals), one line each, e.g.
  // "down3.conv2 weight grad: 37.0% would underflow in f16; amax 2.1e-06 (step 50)",
  // after a headline naming first_overflow() when there is one.
  std::string worst_table(size_t n = 10);
  std::vector<NumericsRecord> worst(size_t n = 10);
  // Where an overflow began: the first activation, in forward order of the earliest
  // step that has one, holding inf/NaN or values beyond the f16 max.
  std::optional<NumericsRecord> first_overflow();

  struct State;  // shared with the gradient hooks (which may outlive a step)

 private:
  std::shared_ptr<State> state_;
  nn::ObserverHandle observer_;  // after state_: removed before the state goes
};

}  // namespace hg::amp
