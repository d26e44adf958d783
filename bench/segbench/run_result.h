// What one segbench run (one precision mode) measured, and the benchmark's config: the
// contract between the trainer (train.cpp) and the report writers (report*.cpp).
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/segbench/profile_data.h"

namespace hg::segbench {

struct Config {
  std::vector<std::string> precisions{"fp32", "amp", "amp-master", "bf16", "fp16"};
  std::string device = "auto";
  std::string profile = "cpu";
  int64_t steps = 0, batch = 0, size = 0, width = 0, depth = 4;
  uint64_t seed = 0;
  double lr = 1e-3;
  int threads = 0;              // 0: all cores
  std::string out;              // report folder
  std::string compare;          // "" or a precision: FP32-vs-reduced comparison on one batch
  std::string dump;             // "" or a folder for first-step tensors
  int64_t growth_interval = 0;  // GradScaler growth interval
  int64_t val_images = 256;
  int64_t eval_every = 0;       // validation Dice on a subset every n steps (0: only at the end)
  int64_t eval_subset = 64;     // images used by the periodic evaluations
  int64_t monitor_every = 0;    // per-layer gradient statistics every n steps
  double clip = 1.0;            // gradient clipping max norm (unscaled gradients)
  bool progress = true;
  int64_t poison_step = -1;     // test hook: a NaN pixel in this step's input batch (-1: none)
  int64_t fallback_strikes = 0; // > 0: amp::Fp32Fallback in autocast modes, after this many overflows
  bool compare_only = false;    // --compare without training
  // --profile-ops: this step and the next kProfiledSteps - 1 (those that run) of each mode run under
  // hg::Profiler; the report keeps the fastest (-1: none).
  int64_t profile_ops_step = -1;
};

struct Curves {
  std::vector<int64_t> step;        // one entry per step
  std::vector<double> seconds;      // wall time since the run's start, at the end of each step
  std::vector<double> loss;         // may hold NaN/inf
  std::vector<double> scale;        // loss scale in effect at each step (1 without scaling)
  std::vector<double> lr;
  std::vector<int64_t> eval_step;   // periodic validation
  std::vector<double> eval_seconds;
  std::vector<double> eval_dice;    // mean foreground Dice on the eval subset
};

// f16's bands for gradient magnitudes, one definition everywhere: round-to-nearest-even
// takes |x| <= 2^-25 to 0 and (2^-25, 2^-24) up to 2^-24; subnormal below 2^-14; from
// 65520 on, rounding gives inf.
constexpr double kF16FlushMax = 0x1p-25, kF16NormalMin = 0x1p-14, kF16OverflowMin = 65520.0;

// Per-layer gradient statistics at one sampled step (layer = parameter name), on the
// gradient as stored: still scaled by the loss scale, in the dtype backward wrote it.
struct LayerStats {
  std::string name;
  std::string grad_dtype;              // dtype of the stored gradient (.grad)
  double grad_zero_fraction = 0;       // exactly zero as stored (flushed, where computed in f16)
  // Counterfactual for gradients held wider than f16: non-zero but |g / scale| <= 2^-25, i.e.
  // would flush if stored in f16 unscaled (-1 where the gradient is stored in f16 already).
  double grad_underflow_fraction = 0;
  double grad_subnormal_fraction = 0;  // stored |g| in (2^-25, 2^-14): f16 subnormal if stored in f16
  double update_lost_fraction = 0;     // non-zero proposed update but weight unchanged (rounded away)
  double grad_amax = 0;                // of the unscaled gradient
  double grad_norm = 0;                // of the unscaled gradient
};

// log2 |g| of one gradient tensor as stored, for the exponent-histogram figure.
struct GradientExponents {
  std::string dtype;      // "" when nothing was recorded
  double scale = 1;       // loss scale the stored values carry
  int64_t numel = 0, zeros = 0, flush = 0, subnormal = 0, overflow = 0;  // flush: 0 < |g| <= 2^-25
  double would_flush = 0; // fraction with 0 < |g / scale| <= 2^-25: would flush stored in f16 unscaled
  static constexpr int kLo = -40, kHi = 20;  // bins floor(log2 |g|), clamped to [kLo, kHi]
  std::vector<int64_t> bins;                 // kHi - kLo + 1 counts of non-zero finite values
};

struct UnderflowSample {
  int64_t step = 0;
  std::vector<LayerStats> layers;
  GradientExponents logits;  // gradient of the model's output (the logits) as backward stored it
};

// One optimizer step against the weights it moved, on the optimizer's own parameters (f16
// for fp16, the f32 masters for amp-master), at the first steps and every sampled step.
struct LayerUpdate {
  std::string name;
  double ratio = 0;               // ||w_after - w_before|| / ||w_before|| (NaN where ||w_before|| = 0)
  double unchanged_fraction = 0;  // elements whose stored weight did not change
};

// Every step below this one is measured, then only the sampled steps.
constexpr int64_t kFirstUpdateSteps = 8;

struct UpdateSample {
  int64_t step = 0;
  double lr = 0;                // the learning rate the step used
  bool skipped = false;         // the loss scaler dropped the step: nothing moved
  double ratio = 0;             // ||w_after - w_before|| / ||w_before|| over all parameters
  double max_layer_ratio = 0;   // the largest per-parameter ratio, and whose it is
  std::string max_layer;
  // Elements that moved by more than 10 x lr: Adam steps each weight by about lr (at most
  // a few lr), clipped SGD with momentum 0.9 by at most 10 lr.
  double big_step_fraction = 0;
  double grad_zero_fraction = 0;  // elements whose gradient, as the optimizer read it, was exactly 0
  // Adam only (-1 otherwise). v_lost: the stored second moment v was 0 before the step
  // although m was not, so v had forgotten gradients m remembers (they flushed when v was
  // stored); eps_only: v_lost and a zero gradient, so the denominator was eps alone and the
  // step lr * m_hat / eps. Fractions of all elements; shares of ||w_after - w_before||^2.
  double v_lost_fraction = -1, v_lost_share = -1;
  double eps_only_fraction = -1, eps_only_share = -1;
  double eps_only_mean_step = -1;  // mean |w_after - w_before| / lr over the eps_only elements
  double v_flushed_fraction = -1;  // of the elements with g != 0: v stored as 0 after the step
  std::vector<LayerUpdate> layers;
};

struct FallbackEvent {
  int64_t step = 0;
  std::string module, reason;
};

struct Timing {
  double median_ms = 0, p90_ms = 0;
};

struct RunResult {
  std::string precision, device, description;
  // What the mode stores in which dtype (bench/segbench/modes.h) and its optimizer.
  std::string params_dtype, activations_dtype, grads_dtype, optimizer_state_dtype, optimizer_name;
  std::string cpu_isa;           // CPU kernel path (hg::cpu::isa()) when it ran on the CPU
  std::string cpu_bf16_kernel;   // the GEMM micro-kernel bf16 x bf16 products took there
  double cpu_dot_vs_fma = 0;     // vdpbf16ps vs f32 FMA multiply-adds, measured (0: no AVX512_BF16)
  std::string compute_dtype;     // dtype matmul/conv inputs had: "f32", "f16" or "bf16"
  int64_t steps_done = 0;
  bool stopped_early = false;    // a non-finite loss without loss scaling stops the run
  std::string stop_reason;
  double total_seconds = 0, images_per_s = 0;
  Timing step, forward, backward, optimizer;
  int64_t peak_bytes = 0;        // allocator peak (tensor memory)
  int64_t max_rss_bytes = 0;
  double final_loss = 0;         // mean of the last 10 finite losses (NaN if none)
  std::vector<double> val_dice, val_iou;  // per class (index 0 = background)
  double val_dice_mean_fg = 0, val_iou_mean_fg = 0;
  std::optional<int64_t> steps_to_target;  // first eval step reaching the target Dice
  Curves curves;
  std::vector<int64_t> skipped_steps;
  std::optional<int64_t> first_nonfinite_step;
  std::vector<std::pair<int64_t, std::vector<std::pair<std::string, int64_t>>>> nonfinite_params;  // step -> (param, count)
  std::vector<UnderflowSample> underflow;
  std::vector<UpdateSample> updates;  // the first kFirstUpdateSteps steps and the sampled ones
  std::vector<FallbackEvent> fallback_events;
  std::string diagnosis;         // one paragraph: what went wrong in this mode and why ("" if nothing)
  std::string numerics_worst;    // the numerics monitor's worst offenders for f16, one per line
  // All its records, one JSON line each: main writes them to numerics-<mode>.jsonl once the
  // run is safe in the report (a full disk must not lose a finished run).
  std::string numerics_jsonl;
  // Adam: the largest fraction, over the steps in `updates`, of second-moment elements
  // stored as 0 although their gradient was not (flushed in f16 state; -1: not Adam).
  double adam_v_flushed_fraction = -1;
  // Sample predictions on the first validation images: argmax labels, size*size each.
  std::vector<std::vector<int64_t>> sample_predictions;
  std::optional<OpProfile> op_profile;  // --profile-ops
};

struct Machine {
  std::string cpu_model;
  int threads = 0;
  std::string gpu;  // "" when none
  std::string compiler, build_type;
  int ranks = 1;  // data-parallel processes (mpirun -np N); Config::batch and images_per_s are per rank
};

struct Report {
  Config config;
  Machine machine;
  double target_dice = 0.85;
  std::vector<RunResult> runs;
  // First validation images (f32 size*size) and truths, for the sample-prediction PNG.
  std::vector<std::vector<float>> sample_images;
  std::vector<std::vector<int64_t>> sample_truths;
  std::string compare_text;  // the --compare table, when asked
};

}  // namespace hg::segbench
