// The composite transformer ops (layer_norm, gelu_tanh, masked_fill, tril/triu,
// attention) are written over primitives every backend has: one body, every device,
// each result equal to the CPU's within the device's rounding.
#include <catch2/catch.hpp>

#include "halfgrad.h"
#include "tests/devices.h"

using namespace hg;

TEST_CASE("composite transformer ops run on every device and agree with the CPU", "[layer_norm][attention][devices]") {
  Generator g(9);
  const Tensor x = randn({2, 5, 8}, {f32}, &g), w = randn({8}, {f32}, &g);
  const Tensor mask = x > 0.5;
  AttentionOptions causal;
  causal.causal = true;
  auto run = [&](Device d) {
    const Tensor xd = x.to(d);
    return TensorList{layer_norm(xd, {8}, w.to(d)), gelu_tanh(xd), masked_fill(xd, mask.to(d), -3),
                      tril(xd, 1), triu(xd), scaled_dot_product_attention(xd, xd, xd, causal)};
  };
  const TensorList want = run(Device::cpu());
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    const TensorList got = run(d);
    for (size_t i = 0; i < got.size(); ++i) {
      INFO("result " << i);
      CHECK(got[i].device() == d);
      CHECK(allclose(got[i].to(Device::cpu()), want[i], 1e-5, 1e-6));
    }
  }
}
