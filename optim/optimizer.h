// The optimizer base: parameter groups with their own lr and weight decay, per-parameter
// state (f32, or f64 for f64 parameters) and its state dict. Subclasses supply the fused
// per-element update; the base validates everything before any parameter is touched.
#pragma once
#include <cstdint>
#include <initializer_list>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "ops/optim_kernels.h"
#include "framework/state_dict.h"
#include "framework/tensor.h"

namespace hg::optim {

// A set of parameters sharing lr and weight decay. An unset lr or weight_decay takes
// the optimizer's default (filled in at construction, so both are set afterwards).
struct ParamGroup {
  std::vector<Tensor> params{};
  std::vector<std::string> names{};  // empty, or one per parameter (used in messages)
  std::optional<double> lr{};
  std::optional<double> weight_decay{};
};

// What an optimizer is built from: plain parameters, named_parameters(), or groups.
class Params {
 public:
  Params(std::vector<Tensor> params);
  Params(std::initializer_list<Tensor> params);
  Params(std::vector<std::pair<std::string, Tensor>> named);
  Params(std::initializer_list<std::pair<std::string, Tensor>> named);
  Params(std::vector<ParamGroup> groups);
  Params(std::initializer_list<ParamGroup> groups);

  std::vector<ParamGroup> groups;
};

// One parameter's state: how many steps it took, and its buffers (moments, momentum),
// each contiguous with the parameter's shape, on the parameter's device. For a parameter
// on cuda the count lives on the device (device_step, i64 0-d), where step_if may skip a
// step without the host knowing; `step` is its copy, refreshed when the state is read
// (state(), state_dict(), which synchronise).
struct ParamState {
  int64_t step = 0;
  std::map<std::string, Tensor> buffers;
  Tensor device_step;
};

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // Updates every parameter that has a gradient; the others are skipped.
  virtual void step();
  // step() unless found_inf (a one-element tensor, the GradScaler's 0-d f32 flag) is
  // non-zero or NaN; a skipped step changes nothing, not even step counts. Parameters on
  // cuda pass the flag to the kernels, which skip on the device: no host synchronisation.
  void step_if(const Tensor& found_inf);
  void zero_grad();  // gradients become undefined

  // lr and weight_decay of a group may be changed between steps (schedulers do).
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  void add_param_group(ParamGroup group);
  // Every parameter with its name: the given one, else the tensor's, else "group.<g>.<i>".
  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  // The state of parameter `index` of group `group`; null before its first step.
  const ParamState* state(size_t group, size_t index) const;

  // Keys "group.<g>.lr", "group.<g>.weight_decay", "group.<g>.num_params" and
  // "state.<g>.<i>.step" / "state.<g>.<i>.<buffer>"; scalars are 0-d f64 tensors.
  // Tensors are copies: later steps do not change a saved dict.
  StateDict state_dict() const;
  // Loads everything or nothing: missing, unexpected and mis-shaped entries are all
  // reported in one hg::Error. Parameters without state in `sd` start afresh.
  void load_state_dict(const StateDict& sd);

  const std::string& name() const { return name_; }  // "Adam", for messages
  // How many step()/step_if() calls completed, skipped ones included (schedulers use it
  // to notice being stepped before the optimizer).
  int64_t steps_called() const { return steps_called_; }

  // Where the moments/momentum of f16 and bf16 parameters live. Default: f32, which
  // keeps small second moments alive. With `true` they live in the parameter's dtype,
  // as PyTorch's optimizers keep them for a model cast with .half(): each update still
  // computes in f32 but the state is rounded to f16 on every store, so a squared
  // gradient below 2^-24 becomes 0 and Adam's update turns into m / eps. The naive
  // fp16 training mode uses it to show that failure. Set before the first step.
  void set_state_in_param_dtype(bool on);
  bool state_in_param_dtype() const { return state_in_param_dtype_; }
  DType state_dtype(DType param) const;

 protected:
  // Checks the defaults and every group (lr >= 0, weight_decay >= 0, floating leaf
  // parameters, each in one group only), filling unset group values from the defaults.
  Optimizer(Params params, std::string name, double default_lr, double default_weight_decay);

  // The buffers each parameter's state holds under the current hyper-parameters.
  virtual std::vector<std::string> buffer_names() const = 0;
  // Applies one step to `param` (contiguous) from `grad` (contiguous, same shape and
  // device, any floating dtype) through the kind's step stub; `clock` says which step it
  // is and, on cuda, when to skip it. Buffers exist on param's device, zero at first.
  virtual void update(const Tensor& param, const Tensor& grad, ParamState& st, double lr, double weight_decay,
                      const StepClock& clock) = 0;

  // "Adam: lr must be >= 0, got -1" style checks shared by the subclasses.
  void check_hyper(bool ok, const char* what, double value, const char* valid) const;

 private:
  std::string param_name(size_t g, size_t i) const;
  // The step, skipped where found_inf (undefined: never) is set.
  void step_impl(const Tensor& found_inf);
  // Copies the device step counts of cuda parameters into ParamState::step (synchronises).
  void read_device_steps() const;
  void check_group(ParamGroup& group, size_t g) const;

  std::string name_;
  bool state_in_param_dtype_ = false;
  std::vector<ParamGroup> groups_;
  // Parallel to groups_; empty until stepped. Mutable: reading it refreshes step counts
  // kept on a device.
  mutable std::vector<std::vector<ParamState>> state_;
  double default_lr_;
  double default_weight_decay_;
  int64_t steps_called_ = 0;
};

}  // namespace hg::optim
