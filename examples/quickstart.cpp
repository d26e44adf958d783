// The program to copy when starting with halfgrad: a small MLP learns which points lie
// inside a circle (Adam, cosine learning-rate schedule), then its weights are saved to a
// safetensors file and loaded into a fresh model that must predict exactly the same.
#include <cstdio>
#include <filesystem>
#include <string>

#include "halfgrad.h"

using namespace hg;

int main() {
  // One seed fixes every random draw below (data and initial weights): reruns are identical.
  manual_seed(0);

  // 1024 points from a 2-D standard normal, labelled 1 inside the circle |x|² < 2 ln 2,
  // which holds half of them. No straight line separates the classes, so the hidden
  // layers have to learn a curved boundary.
  Tensor x = randn({1024, 2});
  Tensor y = (sum(square(x), {1}, /*keepdim=*/true) < 1.386).to(f32);  // [1024, 1], 0 or 1

  // Linear(2, 32) -> ReLU -> Linear(32, 32) -> ReLU -> Linear(32, 1): one logit per point.
  MLP model(2, {32, 32}, 1);
  std::printf("%s\n", model.summary().c_str());

  const int steps = 300;
  // named_parameters() lets messages name a parameter ("fc2.weight") when something is off.
  optim::Adam opt(model.named_parameters(), {.lr = 0.02});
  // The lr follows half a cosine from 0.02 down to 0 over the run: big steps early, fine ones late.
  optim::CosineAnnealingLR sched(opt, steps);

  double loss_value = 0;
  for (int step = 0; step < steps; ++step) {
    // The loss takes logits: sigmoid inside it is computed stably (no log(0) for confident points).
    Tensor loss = bce_with_logits(model(x), y);
    loss.backward();  // fills p.grad() of every parameter
    opt.step();
    opt.zero_grad();  // gradients would otherwise add up across steps
    sched.step();
    loss_value = loss.item<double>();
    if (step % 50 == 0 || step == steps - 1) std::printf("step %3d  loss %.4f\n", step, loss_value);
  }

  // Inference needs no graph: NoGrad skips recording what backward would need.
  NoGrad no_grad;
  Tensor logits = model(x);
  const double accuracy = mean(eq(logits > 0.0, y > 0.5).to(f32)).item<double>();
  std::printf("training accuracy %.1f%%\n", 100 * accuracy);

  // safetensors is the format PyTorch, JAX and others read; names are module paths.
  const std::string path = (std::filesystem::temp_directory_path() / "halfgrad_quickstart.safetensors").string();
  save(path, model.state_dict());
  MLP restored(2, {32, 32}, 1);  // new random weights...
  restored.load_state_dict(load(path));  // ...replaced by the saved ones (every name must match)
  std::filesystem::remove(path);
  // rtol = atol = 0: the reloaded model must give the very same bits.
  const bool same = allclose(restored(x), logits, 0.0, 0.0);
  std::printf("reloaded model predicts the same: %s\n", same ? "yes" : "NO");

  const double threshold = 0.05;
  std::printf("final loss %.4f (needs < %.2f)\n", loss_value, threshold);
  return loss_value < threshold && same ? 0 : 1;
}
