// Tour step 9 (docs/amp.md): resuming an amp run. The scaler's scale and growth tracker
// are part of the run's state: save them in the checkpoint with the model and the
// optimizer, and the resumed run repeats the uninterrupted one bit for bit.
#include <cstdio>
#include <filesystem>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

struct Run {
  nn::Linear model{4, 1};
  optim::Adam opt{model.named_parameters(), {.lr = 1e-2}};
  amp::GradScaler scaler{{.init_scale = 256.0, .growth_interval = 3}};

  double step(const Tensor& x, const Tensor& y) {
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(model(x), y);
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    opt.zero_grad();
    return loss.item<double>();
  }
};

}  // namespace

int main() {
  manual_seed(0);
  Generator g(3);
  const Tensor x = randn({32, 4}, {}, &g), y = randn({32, 1}, {}, &g);
  Run a;
  for (int s = 0; s < 7; ++s) a.step(x, y);
  const std::string path = (std::filesystem::temp_directory_path() / "halfgrad_amp_tour_09.ckpt").string();
  save_checkpoint(path, {.sections = {{"model", a.model.state_dict()},
                                      {"optimizer", a.opt.state_dict()},
                                      {"scaler", a.scaler.state_dict()}},
                         .step = 7});
  std::printf("saved at step 7: scale %g, growth tracker %g\n", a.scaler.get_scale(),
              a.scaler.growth_tracker().to(f64).item<double>());

  Run b;  // a fresh process would start here
  const Checkpoint c = load_checkpoint(path);
  b.model.load_state_dict(c.sections.at("model"));
  b.opt.load_state_dict(c.sections.at("optimizer"));
  b.scaler.load_state_dict(c.sections.at("scaler"));
  std::filesystem::remove(path);
  std::printf("resumed:          scale %g, growth tracker %g\n", b.scaler.get_scale(),
              b.scaler.growth_tracker().to(f64).item<double>());
  int same = 0;
  for (int s = 7; s < 12; ++s) same += a.step(x, y) == b.step(x, y);
  std::printf("steps 7-11: %d of 5 losses identical; scales %g and %g\n", same, a.scaler.get_scale(), b.scaler.get_scale());
  Run fresh_scaler;  // what happens without the scaler section: the scale restarts
  std::printf("without the scaler section the scale would restart at %g\n", fresh_scaler.scaler.get_scale());
  return 0;
}
