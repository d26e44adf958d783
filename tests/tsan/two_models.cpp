// The two-model training workload: an MLP and a small conv net, each trained under
// autocast f16 with its own monitor, scaler and fallback, and clipped after unscale_,
// on batches from its own generator (the default one is shared, so it is not used).
#include "tests/tsan/two_models.h"

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <thread>

namespace hg::test {

namespace {

struct Mlp : nn::Module {
  HG_CHILD(nn::Linear, fc1, 8, 32);
  HG_CHILD(nn::ReLU, act);
  HG_CHILD(nn::Linear, fc2, 32, 4);
  Tensor forward_impl(const Tensor& x) override { return (*fc2)((*act)((*fc1)(x))); }
  std::string type_name() const override { return "Mlp"; }
};

struct ConvNet : nn::Module {
  HG_CHILD(nn::Conv2d, conv, 3, 8, 3, Conv2dOptions{.padding = {1, 1}});
  HG_CHILD(nn::ReLU, act);
  HG_CHILD(nn::Linear, head, 8, 4);
  Tensor forward_impl(const Tensor& x) override { return (*head)(mean((*act)((*conv)(x)), {1, 2})); }
  std::string type_name() const override { return "ConvNet"; }
};

std::string bits_of(const Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  std::string s(v.size() * sizeof(float), '\0');
  std::memcpy(s.data(), v.data(), s.size());
  return s;
}

// A model built from its own generator: construction draws from the default one, which
// both threads would share, so the weights are overwritten from `gen` in place.
template <class M>
std::unique_ptr<M> make_model(Generator& gen) {
  auto m = std::make_unique<M>();
  NoGrad ng;
  for (auto& [name, p] : m->named_parameters()) copy_(p, mul(randn(p.shape(), {f32}, &gen), 0.3));
  return m;
}

ThreadRun train(nn::Module& model, Generator& gen, const Tensor& teacher, bool images, int steps) {
  ThreadRun r;
  for (auto& [path, m] : model.named_modules()) r.module_paths.push_back(path);
  // While this model trains, another thread installs and removes observers on it and
  // builds and drops monitors of it (the global observer list crashed on this).
  std::atomic<int64_t> churn{0};
  std::jthread churner([&](std::stop_token stop) {
    while (!stop.stop_requested()) {
      amp::NumericsMonitor idle(model, {.every = 1});
      nn::ObserverHandle h = model.add_output_observer([](nn::Module&, const Tensor&) {});
      churn += 2;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  });
  while (churn == 0) std::this_thread::yield();  // training starts once the churn has
  optim::Adam opt(model.named_parameters(), optim::AdamOptions{.lr = 1e-2});
  // A high first scale with a short growth interval: some steps overflow and are skipped.
  amp::GradScaler scaler(amp::GradScalerOptions{.init_scale = 0x1p24, .growth_interval = 4});
  amp::NumericsMonitor monitor(model, {.every = 2});
  amp::Fp32Fallback fallback(model, {.strikes = 3});
  for (int step = 0; step < steps; ++step) {
    Tensor x = images ? randn({8, 4, 4, 3}, {f32}, &gen) : randn({16, 8}, {f32}, &gen);
    Tensor y = matmul(images ? mean(x, {1, 2}) : x.narrow(1, 0, 3), teacher);
    monitor.begin_step(step);
    fallback.begin_step(step);
    r.sampled_steps += monitor.sampling();
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(model(x).to(f32), y);
    }
    r.losses.push_back(loss.item<double>());
    scaler.scale(loss).backward();
    scaler.unscale_(opt);
    monitor.end_step();
    optim::clip_grad_norm_(model.parameters(), 5.0);
    amp::StepResult res = scaler.step(opt);
    scaler.update();
    fallback.end_step(&res);
    r.skipped += res.skipped();
    opt.zero_grad();
  }
  churner.request_stop();
  churner.join();
  r.observer_churn = churn;
  r.records = monitor.records();
  for (auto& [name, p] : model.named_parameters()) r.weights.push_back(bits_of(p));
  return r;
}

}  // namespace

ThreadRun train_model(int which, int steps) {
  Generator gen(100 + static_cast<uint64_t>(which));
  Tensor teacher = randn({3, 4}, {f32}, &gen);
  ThreadRun r;
  try {
    if (which == 0) {
      auto m = make_model<Mlp>(gen);
      r = train(*m, gen, teacher, false, steps);
    } else {
      auto m = make_model<ConvNet>(gen);
      r = train(*m, gen, teacher, true, steps);
    }
  } catch (const std::exception& e) {
    r.error = e.what();
  }
  r.model = which == 0 ? "mlp" : "conv";
  return r;
}

std::array<ThreadRun, 2> train_two_models_in_two_threads(int steps) {
  std::array<ThreadRun, 2> runs;
  std::thread a([&] { runs[0] = train_model(0, steps); });
  std::thread b([&] { runs[1] = train_model(1, steps); });
  a.join();
  b.join();
  return runs;
}

}  // namespace hg::test
