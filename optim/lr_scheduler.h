// Learning-rate schedulers: each sets every parameter group's lr from the base lr the
// group had at construction, with PyTorch's formulas (closed forms); ReduceLROnPlateau
// instead lowers the current lr when a metric stops improving.
#pragma once
#include <cstdint>
#include <vector>

#include "optim/optimizer.h"
#include "framework/state_dict.h"

namespace hg::optim {

// Constructing a scheduler sets the lrs for epoch 0 (as PyTorch's initial step does);
// each step() moves to the next epoch (or iteration: whatever the caller counts).
// The scheduler keeps a reference to the optimizer, which must outlive it.
// Its first step() warns (hg::warn) when the optimizer has not stepped since the scheduler
// was made: the lr of epoch 0 then never reaches an update (PyTorch's warning). A step
// that GradScaler skipped for inf/NaN gradients counts as a step here (PyTorch warns
// then): the lr was offered, and an AMP run's first step often overflows by design.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  virtual void step();
  std::vector<double> get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  const std::vector<double>& base_lrs() const { return base_lrs_; }

  // "last_epoch", "base_lr.<g>", "last_lr.<g>" (and a subclass's counters), as 0-d f64
  // tensors. Loading also sets each group's lr to the restored last lr, so the order in
  // which optimizer and scheduler states are loaded does not matter.
  StateDict state_dict() const;
  // Loads everything or nothing; missing, unexpected or non-scalar entries are reported.
  void load_state_dict(const StateDict& sd);

 protected:
  LRScheduler(Optimizer& optimizer, const char* name);
  // The lr of group g at `epoch`; may throw (nothing is changed then).
  virtual double lr_at(int64_t epoch, size_t g) const = 0;
  // Sets the lrs for epoch 0: the last line of each subclass's constructor.
  void start();
  void set_lrs(int64_t epoch, const std::vector<double>& lrs);

  // Extra state of a subclass: its key names, and how to save/restore them.
  virtual std::vector<std::string> extra_keys() const { return {}; }
  virtual double extra_value(const std::string&) const { return 0; }
  virtual void set_extra_value(const std::string&, double) {}

  void check(bool ok, const char* what, double value, const char* valid) const;

  Optimizer& optimizer_;
  const char* name_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = 0;
  int64_t optimizer_steps_at_start_ = 0;
};

// lr = base * gamma^floor(epoch / step_size).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, size_t g) const override;

 private:
  int64_t step_size_;
  double gamma_;
};

// lr = base * gamma^(number of milestones <= epoch); a repeated milestone counts twice.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1);

 protected:
  double lr_at(int64_t epoch, size_t g) const override;

 private:
  std::vector<int64_t> milestones_;  // sorted
  double gamma_;
};

// lr = eta_min + (base - eta_min) (1 + cos(pi e / T_max)) / 2. With warmup_steps W > 0
// the first W epochs rise linearly from base * warmup_start_factor to base (PyTorch's
// LinearLR), and the cosine then runs over the remaining T_max - W epochs, so the lr
// reaches eta_min at epoch T_max whatever W is.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0, int64_t warmup_steps = 0,
                    double warmup_start_factor = 1.0 / 3.0);

 protected:
  double lr_at(int64_t epoch, size_t g) const override;

 private:
  int64_t t_max_, warmup_steps_;
  double eta_min_, warmup_start_factor_;
};

// PyTorch's OneCycleLR with cosine annealing (two phases; momentum is not cycled):
// from max_lr / div_factor up to max_lr over the first pct_start of total_steps, then
// down to max_lr / div_factor / final_div_factor at step total_steps - 1. Stepping past
// total_steps is an error. It sets the lrs itself (base_lrs are the initial lrs).
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25.0, double final_div_factor = 1e4);
  // One max_lr per parameter group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps, double pct_start = 0.3,
             double div_factor = 25.0, double final_div_factor = 1e4);

 protected:
  double lr_at(int64_t epoch, size_t g) const override;

 private:
  std::vector<double> max_lrs_;
  int64_t total_steps_;
  double pct_start_, div_factor_, final_div_factor_;
};

// Lowers each group's lr to max(lr * factor, min_lr) once the metric has not improved
// for more than `patience` steps, then waits `cooldown` steps before counting again.
// Improvement is relative (rel: better than best * (1 -/+ threshold)) or absolute (abs:
// by more than threshold). Reductions smaller than 1e-8 are ignored (PyTorch's eps).
struct PlateauOptions {
  enum class Mode { min, max };
  enum class Threshold { rel, abs };
  Mode mode = Mode::min;
  double factor = 0.1;
  int64_t patience = 10;
  double threshold = 1e-4;
  Threshold threshold_mode = Threshold::rel;
  int64_t cooldown = 0;
  double min_lr = 0;
};

class ReduceLROnPlateau : public LRScheduler {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, PlateauOptions options = {});

  void step(double metric);
  // A plateau scheduler needs the metric: this throws, naming step(metric).
  void step() override;

  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }

 protected:
  double lr_at(int64_t epoch, size_t g) const override;
  std::vector<std::string> extra_keys() const override;
  double extra_value(const std::string& key) const override;
  void set_extra_value(const std::string& key, double value) override;

 private:
  bool is_better(double metric) const;

  PlateauOptions options_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
};

}  // namespace hg::optim
