// A small U-Net (width 4, 32x32, batch 2, depth 4) takes one training step's forward and
// backward on cuda:0 and on the CPU from the same weights and data: the loss and every
// gradient agree, in f32 and under autocast f16. Every op family of the model runs on cuda
// here: conv, transposed conv, batch norm, ReLU, max-pool, cat, casts and their backwards.
#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "amp/autocast.h"
#include "bench/segbench/evaluate.h"
#include "models/unet.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

namespace {

struct StepResult {
  Tensor loss;
  std::map<std::string, Tensor> grads;
};

// The loss is a fixed random weighting of the logits (mean of logits * r): it needs no
// kernels beyond the model's own, and gives every logit a gradient of its own.
StepResult unet_step(Device dev, bool autocast_f16) {
  manual_seed(71);
  UNet net(3, 3, 4);
  net.to(dev);
  Generator g(72);
  const Tensor x = normal({2, 32, 32, 3}, 0, 1, {}, &g).to(dev);
  const Tensor r = normal({2, 32, 32, 3}, 0, 1, {}, &g).to(dev);
  StepResult s;
  {
    std::optional<amp::Autocast> ac;
    if (autocast_f16) ac.emplace(f16);
    s.loss = mean(net(x).to(f32) * r);
  }
  s.loss.backward();
  for (auto& [name, p] : net.named_parameters()) s.grads[name] = p.grad().to(Device::cpu());
  return s;
}

double cosine(const Tensor& a0, const Tensor& b0) {
  const Tensor a = a0.to(f64), b = b0.to(f64);
  return sum(a * b).item<double>() / std::sqrt(sum(a * a).item<double>() * sum(b * b).item<double>());
}

}  // namespace

TEST_CASE("a U-Net step on cuda in f32 gives the CPU's loss and gradients", "[cuda][ops][unet]") {
  HG_REQUIRE_CUDA();
  const StepResult cpu = unet_step(Device::cpu(), false), gpu = unet_step(kCuda, false);
  REQUIRE(gpu.loss.device() == kCuda);
  // Sums run in other orders, and each layer's difference feeds the next: 10x the one-op
  // tolerance (2e-4 of each gradient's largest entry).
  test::require_close(gpu.loss, cpu.loss, 10.0);
  REQUIRE(gpu.grads.size() == cpu.grads.size());
  for (const auto& [name, g] : cpu.grads) {
    INFO(name);
    test::require_close(gpu.grads.at(name), g, 10.0);
  }
}

TEST_CASE("a U-Net step on cuda under autocast f16 agrees with the CPU's", "[cuda][ops][unet]") {
  HG_REQUIRE_CUDA();
  const StepResult cpu = unet_step(Device::cpu(), true), gpu = unet_step(kCuda, true);
  REQUIRE(gpu.loss.dtype() == f32);
  test::require_close(gpu.loss, cpu.loss, 1000.0);  // 2e-2 relative: an f16 forward
  // The layers next to the output see few f16 roundings: elementwise agreement.
  for (const char* name : {"outc.weight", "outc.bias", "up4.conv2.weight", "up4.bn2.weight", "up4.bn2.bias"}) {
    INFO(name);
    test::require_close(gpu.grads.at(name), cpu.grads.at(name), 1000.0);
  }
  // Deeper in, one f16 rounding that lands the other way on one device is carried through
  // later layers (the 2x2 bottom normalises 8 values per channel), so single entries can
  // differ by tens of percent: as much as f16 differs from f32 on the CPU alone (measured
  // cosine >= 0.978). The direction still agrees; a mis-indexed or missing gradient would not.
  for (const auto& [name, g] : cpu.grads) {
    INFO(name << ": cosine " << cosine(gpu.grads.at(name), g));
    CHECK(cosine(gpu.grads.at(name), g) > 0.95);
  }
}

// segbench keeps its validation set on the host; evaluate() must move each batch to the
// model's device (it once passed host images to a cuda model and failed in the first conv).
TEST_CASE("segbench's validation runs a cuda model on host-kept batches like the CPU", "[cuda][unet][segbench]") {
  HG_REQUIRE_CUDA();
  const std::vector<segbench::Batch> val = {segbench::make_batch(5, 1, 0, 3, 32)};
  std::vector<segbench::Metrics> m;
  for (Device dev : {Device::cpu(), kCuda}) {
    manual_seed(73);
    UNet net(1, segbench::kNumClasses, 4, 3);
    net.to(dev);
    m.push_back(segbench::evaluate(net, val, 3, f32, std::nullopt, 3));
  }
  REQUIRE(m[1].predictions.size() == 3);
  int64_t same = 0, total = 0;
  for (size_t i = 0; i < 3; ++i)
    for (size_t p = 0; p < m[0].predictions[i].size(); ++p, ++total) same += m[0].predictions[i][p] == m[1].predictions[i][p];
  CHECK(static_cast<double>(same) >= 0.999 * static_cast<double>(total));  // argmax may flip on a near tie
  CHECK(m[1].dice_mean_fg == Approx(m[0].dice_mean_fg).margin(0.01));
}
