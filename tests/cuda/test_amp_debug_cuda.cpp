// The AMP debugging tools on cuda:0: the numerics monitor's device-side statistics, the
// anomaly message, compare() and the FP32 fallback agree with the CPU.
#include <catch2/catch.hpp>

#include "halfgrad.h"
#include "tests/amp/debug_models.h"
#include "tests/devices.h"

using namespace hg;

namespace {
// Records of one sampled forward/backward of the overflow-prone model under autocast f16.
std::vector<amp::NumericsRecord> monitored_step(Device d) {
  manual_seed(21);
  test::OverflowNet model(1e4);
  model.to(d);
  Tensor x = randn({8, 4}).to(d);
  amp::NumericsMonitor mon(model, {.every = 1});
  mon.begin_step(0);
  {
    amp::Autocast ac(f16);
    Tensor y = model(x);
    mul(sum(y.to(f32)), 1e-6).backward();
  }
  mon.end_step();
  return mon.records();
}
}  // namespace

TEST_CASE("NumericsMonitor on cuda:0 records what it records on the CPU", "[cuda][amp]") {
  HG_REQUIRE_CUDA();
  std::vector<amp::NumericsRecord> cpu = monitored_step(Device::cpu()), gpu = monitored_step(Device::cuda(0));
  REQUIRE(cpu.size() == gpu.size());
  bool some_inf = false;
  for (size_t i = 0; i < cpu.size(); ++i) {
    INFO(cpu[i].label());
    CHECK(gpu[i].label() == cpu[i].label());
    CHECK(gpu[i].stats.numel == cpu[i].stats.numel);
    CHECK(gpu[i].stats.inf == cpu[i].stats.inf);
    CHECK(gpu[i].stats.nan == cpu[i].stats.nan);
    CHECK(gpu[i].stats.zeros == cpu[i].stats.zeros);
    CHECK(gpu[i].stats.amax == Approx(cpu[i].stats.amax).epsilon(1e-3));
    some_inf = some_inf || cpu[i].stats.inf > 0;
  }
  CHECK(some_inf);
}

TEST_CASE("DetectAnomaly and compare() name the overflowing layer on cuda:0", "[cuda][amp]") {
  HG_REQUIRE_CUDA();
  manual_seed(21);
  test::OverflowNet model(1e4);
  model.to(Device::cuda(0));
  Tensor x = randn({8, 4}).to(Device::cuda(0));
  {
    amp::DetectAnomaly guard;
    amp::Autocast ac(f16);
    CHECK_THROWS_WITH(model(x), Catch::StartsWith("forward of matmul in big produced "));
  }
  amp::Comparison c = amp::compare(model, x, [](const Tensor& y) { return mean(square(y)); }, amp::recipe("amp").policy);
  REQUIRE(c.first_exceeding);
  CHECK(c.modules[*c.first_exceeding].module == "big");
}
