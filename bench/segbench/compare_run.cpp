// The comparison behind segbench --compare, built from the same seed, data and model
// as the training runs.
#include "bench/segbench/compare_run.h"

#include "amp/policy.h"
#include "bench/segbench/data.h"
#include "bench/segbench/train.h"
#include "framework/generator.h"
#include "models/unet.h"

namespace hg::segbench {

amp::Comparison compare_run(const Config& cfg, const std::string& mode, Device device) {
  const amp::Recipe rc = amp::recipe(mode);
  manual_seed(cfg.seed);  // the initial weights of every training run
  UNet model(1, kNumClasses, cfg.width, cfg.depth);
  model.to(device);
  Batch batch = make_batch(cfg.seed, 0, 0, cfg.batch, cfg.size);
  Tensor target = batch.label.to(device);
  return amp::compare(model, batch.image.to(device), [&](const Tensor& logits) { return segmentation_loss(logits, target); },
                      rc.policy);
}

}  // namespace hg::segbench
