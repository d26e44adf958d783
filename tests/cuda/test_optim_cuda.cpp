// The optimizers on cuda against the CPU: a few steps of Adam, AdamW (AMSGrad), SGD (plain,
// momentum, Nesterov) and RMSprop (centered, momentum) on f32/f16/bf16 parameters with f32
// or param-dtype state, parameters, state and step counts compared; step_if with the flag
// set (1 or NaN) changes nothing on the device.
#include <catch2/catch.hpp>

#include <cstring>
#include <functional>
#include <memory>

#include "tests/cuda/ops_compare.h"

using namespace hg;
using hg::test::kCuda;

namespace {

// The same bytes: a skipped step must leave every bit where it was.
void require_bits(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const Tensor g = got.to(Device::cpu()).contiguous(), w = want.to(Device::cpu()).contiguous();
  REQUIRE(std::memcmp(g.data_ptr(), w.data_ptr(), static_cast<size_t>(w.numel()) * dtype_size(w.dtype())) == 0);
}

using MakeOpt = std::function<std::unique_ptr<optim::Optimizer>(Tensor)>;

std::vector<std::pair<const char*, MakeOpt>> optimizers() {
  return {
      {"Adam", [](Tensor p) { return std::make_unique<optim::Adam>(optim::Params{p}, optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1}); }},
      {"AdamW amsgrad",
       [](Tensor p) { return std::make_unique<optim::AdamW>(optim::Params{p}, optim::AdamWOptions{.lr = 0.02, .amsgrad = true}); }},
      {"SGD", [](Tensor p) { return std::make_unique<optim::SGD>(optim::Params{p}, optim::SGDOptions{.lr = 0.1}); }},
      {"SGD momentum",
       [](Tensor p) {
         return std::make_unique<optim::SGD>(optim::Params{p},
                                             optim::SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01});
       }},
      {"SGD nesterov",
       [](Tensor p) { return std::make_unique<optim::SGD>(optim::Params{p}, optim::SGDOptions{.lr = 0.05, .momentum = 0.8, .nesterov = true}); }},
      {"RMSprop centered momentum",
       [](Tensor p) {
         return std::make_unique<optim::RMSprop>(
             optim::Params{p}, optim::RMSpropOptions{.lr = 0.01, .weight_decay = 0.05, .momentum = 0.5, .centered = true});
       }},
      {"RMSprop", [](Tensor p) { return std::make_unique<optim::RMSprop>(optim::Params{p}, optim::RMSpropOptions{.lr = 0.01}); }},
  };
}

}  // namespace

TEST_CASE("optimizer steps on cuda equal the CPU's, f32 and param-dtype state", "[cuda][optim]") {
  HG_REQUIRE_CUDA();
  for (const auto& [name, make] : optimizers())
    for (DType dt : {f32, f16, bf16})
      for (bool state_in_param : {false, true}) {
        INFO(name << " " << dtype_name(dt) << (state_in_param ? " state in param dtype" : " f32 state"));
        const Tensor p0 = test::random_input({333}, dt, 5);
        auto run = [&](Device d) {
          Tensor p = p0.to(d).clone().detach().set_requires_grad();  // p0 itself stays as it is
          auto opt = make(p);
          opt->set_state_in_param_dtype(state_in_param);
          for (int s = 0; s < 3; ++s) {
            p.set_grad(test::random_input({333}, dt, 10 + static_cast<uint64_t>(s), -2e-3, 2e-3).to(d));
            opt->step();
          }
          return std::pair{p.detach(), opt->state_dict()};
        };
        const auto [p_cpu, sd_cpu] = run(Device::cpu());
        const auto [p_dev, sd_dev] = run(kCuda);
        test::require_same(p_dev, p_cpu, 1e-2);
        REQUIRE(sd_dev.size() == sd_cpu.size());
        for (const auto& [key, t] : sd_cpu) {
          INFO(key);
          REQUIRE(sd_dev.count(key));
          if (t.dim() == 0) REQUIRE(sd_dev.at(key).item<double>() == t.item<double>());  // lr, step counts
          else test::require_same(sd_dev.at(key), t, 1e-6);
        }
        REQUIRE(sd_cpu.at("state.0.0.step").item<double>() == 3);
      }
}

TEST_CASE("step_if on cuda skips on the device when the flag is set", "[cuda][optim][amp]") {
  HG_REQUIRE_CUDA();
  for (const auto& [name, make] : optimizers())
    for (const double flag : {1.0, static_cast<double>(NAN), 0.0}) {
      INFO(name << " flag " << flag);
      Tensor p = test::random_input({100}, f16, 7).to(kCuda).detach().set_requires_grad();
      auto opt = make(p);
      p.set_grad(test::random_input({100}, f16, 8).to(kCuda));
      opt->step();
      const Tensor before = p.detach().clone();
      const StateDict sd_before = opt->state_dict();
      p.set_grad(test::random_input({100}, f16, 9).to(kCuda));
      opt->step_if(scalar_tensor(flag, {f32, kCuda}));
      const StateDict sd_after = opt->state_dict();
      if (flag == 0.0) {
        REQUIRE(sd_after.at("state.0.0.step").item<double>() == 2);
        REQUIRE_FALSE(p.detach().to(Device::cpu()).to_vector<double>() == before.to(Device::cpu()).to_vector<double>());
        continue;
      }
      require_bits(p.detach(), before);
      for (const auto& [key, t] : sd_before) {
        INFO(key);
        if (t.dim() == 0) REQUIRE(sd_after.at(key).item<double>() == t.item<double>());
        else require_bits(sd_after.at(key), t);
      }
    }
}

TEST_CASE("gradient clipping on cuda matches the CPU: the total norm and the clipped gradients",
          "[cuda][optim][clip]") {
  HG_REQUIRE_CUDA();
  for (DType dt : {f32, f16, bf16})
    for (const double norm_type : {2.0, 1.0, 3.0, static_cast<double>(INFINITY)}) {
      INFO(dtype_name(dt) << " norm " << norm_type);
      const Tensor g0 = test::random_input({300}, dt, 61), g1 = test::random_input({7, 5}, f32, 62);
      auto run = [&](Device d) {
        Tensor a = zeros({300}, {dt, d}).set_requires_grad(), b = zeros({7, 5}, {f32, d}).set_requires_grad();
        a.set_grad(g0.to(d).clone());
        b.set_grad(g1.to(d).clone());
        const double total = optim::clip_grad_norm_({a, b}, 1.5, norm_type);
        return std::tuple{total, a.grad(), b.grad()};
      };
      const auto [n_cpu, a_cpu, b_cpu] = run(Device::cpu());
      const auto [n_dev, a_dev, b_dev] = run(kCuda);
      REQUIRE(n_dev == Approx(n_cpu).epsilon(1e-5));
      REQUIRE(n_cpu > 1.5);  // the gradients were clipped
      test::require_same(a_dev, a_cpu, 1.0);
      test::require_same(b_dev, b_cpu, 1.0);
    }
  Tensor g = test::random_input({50}, bf16, 63);
  fill_(g.narrow(0, 4, 1), NAN);
  auto run = [&](Device d) {
    Tensor a = zeros({50}, {bf16, d}).set_requires_grad();
    a.set_grad(g.to(d).clone());
    optim::clip_grad_value_({a}, 0.75);
    return a.grad();
  };
  test::require_same(run(kCuda), run(Device::cpu()), 1.0);
}
