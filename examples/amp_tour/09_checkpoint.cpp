// Tour step 9 (docs/amp.md): resuming an amp run. The scaler's scale and growth tracker
// are part of the run's state, with the model, optimizer, scheduler, data loader position
// and random generator: save_training_state writes them all in one checkpoint, and
// load_training_state restores them all, so the resumed run repeats the uninterrupted one.
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "framework/serialize/training_state.h"
#include "halfgrad.h"

using namespace hg;

namespace {

std::shared_ptr<data::TensorDataset> make_data() {
  Generator g(3);
  const Tensor x = randn({48, 4}, {}, &g), y = randn({48, 1}, {}, &g);
  return std::make_shared<data::TensorDataset>(x, y);
}

// Everything one training process holds; a second Run is a fresh process.
struct Run {
  nn::Sequential model{std::make_shared<nn::Linear>(4, 16), std::make_shared<nn::ReLU>(),
                       std::make_shared<nn::Dropout>(0.2), std::make_shared<nn::Linear>(16, 1)};
  optim::AdamW opt{model.named_parameters(), {.lr = 1e-2}};
  optim::StepLR sched{opt, 4, 0.5};
  amp::GradScaler scaler{{.init_scale = 256.0, .growth_interval = 3}};
  data::DataLoader loader{make_data(), {.batch_size = 16, .seed = 1}};

  // The same list saves and loads; the names are the checkpoint's sections.
  std::vector<NamedState> state() {
    return {{"model", model},   {"optimizer", opt}, {"scheduler", sched},
            {"scaler", scaler}, {"loader", loader}, {"rng", default_generator()}};
  }

  double step() {
    std::optional<data::Example> b = loader.next();
    if (!b) b = loader.next();  // a new epoch (a new shuffle)
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(model(b->input), b->target);  // Dropout draws from the default generator
    }
    scaler.scale(loss).backward();
    scaler.step(opt);
    scaler.update();
    sched.step();
    opt.zero_grad();
    return loss.item<double>();
  }
};

}  // namespace

int main() {
  manual_seed(0);
  Run a;
  for (int s = 0; s < 7; ++s) a.step();
  const std::string path = (std::filesystem::temp_directory_path() / "halfgrad_amp_tour_09.ckpt").string();
  save_training_state(path, 7, a.state());
  std::printf("saved at step 7: scale %g, growth tracker %g, lr %g, epoch %lld batch %lld\n", a.scaler.get_scale(),
              a.scaler.growth_tracker().to(f64).item<double>(), a.sched.get_last_lr()[0],
              static_cast<long long>(a.loader.state().epoch), static_cast<long long>(a.loader.state().batch));
  std::vector<double> straight;  // the uninterrupted run goes on first: both draw from the default generator
  for (int s = 7; s < 15; ++s) straight.push_back(a.step());

  manual_seed(42);  // a fresh process: other weights, another generator state
  Run b;
  const int64_t step = load_training_state(path, b.state());
  std::printf("resumed at step %lld: scale %g, growth tracker %g, lr %g, epoch %lld batch %lld\n",
              static_cast<long long>(step), b.scaler.get_scale(), b.scaler.growth_tracker().to(f64).item<double>(),
              b.sched.get_last_lr()[0], static_cast<long long>(b.loader.state().epoch),
              static_cast<long long>(b.loader.state().batch));
  int same = 0;
  for (int s = 7; s < 15; ++s) same += b.step() == straight[s - 7];
  std::printf("steps 7-14: %d of 8 losses identical\n", same);

  // Leave a part out of the list and the load refuses, naming it (nothing is loaded).
  Run c;
  try {
    load_training_state(path, {{"model", c.model}, {"optimizer", c.opt}, {"scheduler", c.sched}, {"scaler", c.scaler}});
  } catch (const Error& e) {
    std::string msg = e.what();  // names the file; shown here without the temporary folder
    msg.replace(msg.find(path), path.size(), "run.ckpt");
    std::printf("%s\n", msg.c_str());
  }
  std::filesystem::remove(path);
  return 0;
}
