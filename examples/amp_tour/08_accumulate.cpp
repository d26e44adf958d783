// Tour step 8 (docs/amp.md): one GradScaler for gradient accumulation over micro-batches
// and for two optimizers (Adam on the body, SGD on the head). Each micro-batch's loss is
// divided by the number of micro-batches and scaled; unscale_, clip, step and update run
// once per optimizer step, after the last micro-batch.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

namespace {

constexpr int kMicro = 4, kMicroBatch = 16;

struct Net : nn::Module {
  HG_CHILD(nn::Linear, body, 8, 32);
  HG_CHILD(nn::Linear, head, 32, 1);
  Tensor forward_impl(const Tensor& x) override { return (*head)(relu((*body)(x))); }
  std::string type_name() const override { return "Net"; }
};

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::fabs(v));
  return m;
}

}  // namespace

int main() {
  manual_seed(0);
  Net model;
  Generator data_gen(1);
  const Tensor x = randn({kMicro * kMicroBatch, 8}, {}, &data_gen);
  const Tensor y = sum(tanh(x), {1}, true);
  optim::Adam body_opt(model.body->named_parameters(), {.lr = 3e-3});
  optim::SGD head_opt(model.head->named_parameters(), {.lr = 3e-2});
  amp::GradScaler scaler;

  // The reference: the whole batch in f32 at once, no scaler.
  mse_loss(model(x), y).backward();
  const Tensor ref = model.head->weight.grad().clone();
  model.zero_grad();

  for (int step = 0; step < 40; ++step) {
    double loss_sum = 0;
    for (int k = 0; k < kMicro; ++k) {
      const Tensor xb = x.slice(0, k * kMicroBatch, (k + 1) * kMicroBatch);
      const Tensor yb = y.slice(0, k * kMicroBatch, (k + 1) * kMicroBatch);
      Tensor loss;
      {
        amp::Autocast ac(f16);
        loss = mse_loss(model(xb), yb) / kMicro;  // the mean over the whole batch
      }
      loss_sum += loss.item<double>();
      scaler.scale(loss).backward();  // gradients accumulate, all multiplied by one scale
    }
    scaler.unscale_(body_opt);
    scaler.unscale_(head_opt);
    if (step == 0)
      std::printf("step 0: accumulated amp gradient of head.weight vs one f32 pass: max difference %.2g of max %.3g\n",
                  max_abs(model.head->weight.grad() - ref), max_abs(ref));
    optim::clip_grad_norm_(model.parameters(), 1.0);
    scaler.step(body_opt);
    scaler.step(head_opt);
    scaler.update();  // once, after every optimizer's step
    body_opt.zero_grad();
    head_opt.zero_grad();
    if (step % 10 == 0 || step == 39) std::printf("step %2d: loss %.4f, scale %g\n", step, loss_sum, scaler.get_scale());
  }
  return 0;
}
