// Validation: forward passes without a graph, argmax over the class axis, and per-image
// per-class Dice/IoU averaged over the set.
#include "bench/segbench/evaluate.h"

#include "amp/autocast.h"
#include "framework/autograd.h"
#include "ops/reduce.h"

namespace hg::segbench {

void accumulate_image_scores(const int64_t* pred, const int64_t* truth, int64_t n, int classes,
                             std::vector<double>& dice_sum, std::vector<double>& iou_sum) {
  std::vector<int64_t> inter(static_cast<size_t>(classes)), np(static_cast<size_t>(classes)),
      nt(static_cast<size_t>(classes));
  for (int64_t i = 0; i < n; ++i) {
    ++np[static_cast<size_t>(pred[i])];
    ++nt[static_cast<size_t>(truth[i])];
    if (pred[i] == truth[i]) ++inter[static_cast<size_t>(pred[i])];
  }
  for (size_t c = 0; c < static_cast<size_t>(classes); ++c) {
    const double sum = static_cast<double>(np[c] + nt[c]), uni = sum - static_cast<double>(inter[c]);
    dice_sum[c] += sum == 0 ? 1.0 : 2.0 * static_cast<double>(inter[c]) / sum;
    iou_sum[c] += uni == 0 ? 1.0 : static_cast<double>(inter[c]) / uni;
  }
}

Metrics evaluate(nn::Module& model, const std::vector<Batch>& batches, int64_t max_images, DType input_dtype,
                 std::optional<DType> compute, int64_t keep) {
  const bool was_training = model.is_training();
  model.eval();
  NoGrad ng;
  Metrics m;
  const int classes = kNumClasses;
  m.dice.assign(classes, 0.0);
  m.iou.assign(classes, 0.0);
  int64_t seen = 0;
  // The validation images live on the CPU; the model may be on a GPU.
  const std::vector<Tensor> params = model.parameters();
  const Device device = params.empty() ? Device::cpu() : params.front().device();
  for (const Batch& b : batches) {
    if (seen >= max_images) break;
    const int64_t n = std::min(b.image.size(0), max_images - seen);
    Tensor x = b.image.narrow(0, 0, n).to(device, input_dtype);
    Tensor logits;
    {
      std::optional<amp::Autocast> ac;
      if (compute) ac.emplace(*compute);
      logits = model(x);
    }
    std::vector<int64_t> pred = argmax(logits, 3).to_vector<int64_t>();
    std::vector<int64_t> truth = b.label.narrow(0, 0, n).to_vector<int64_t>();
    const int64_t pix = b.label.size(1) * b.label.size(2);
    for (int64_t i = 0; i < n; ++i) {
      accumulate_image_scores(pred.data() + i * pix, truth.data() + i * pix, pix, classes, m.dice, m.iou);
      if (static_cast<int64_t>(m.predictions.size()) < keep)
        m.predictions.emplace_back(pred.begin() + i * pix, pred.begin() + (i + 1) * pix);
    }
    seen += n;
  }
  for (int c = 0; c < classes; ++c) {
    m.dice[c] /= static_cast<double>(std::max<int64_t>(seen, 1));
    m.iou[c] /= static_cast<double>(std::max<int64_t>(seen, 1));
    if (c > 0) {
      m.dice_mean_fg += m.dice[c] / (classes - 1);
      m.iou_mean_fg += m.iou[c] / (classes - 1);
    }
  }
  model.train(was_training);
  return m;
}

}  // namespace hg::segbench
