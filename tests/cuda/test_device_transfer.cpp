// One body on every device (tests/devices.h): fill, host<->device transfers and copies
// give bit-identical results on the CPU and on cuda (a GPU or the emulation).
#include <catch2/catch.hpp>

#include <cstring>
#include <random>

#include "framework/error.h"
#include "framework/tensor.h"
#include "ops/copy.h"
#include "tests/devices.h"

using Catch::Matchers::Contains;

namespace {
// The bytes of a contiguous CPU tensor.
std::vector<unsigned char> bytes(const hg::Tensor& t) {
  const hg::Tensor c = t.to(hg::Device::cpu()).contiguous();
  std::vector<unsigned char> b(static_cast<size_t>(c.numel()) * hg::dtype_size(c.dtype()));
  std::memcpy(b.data(), c.data_ptr(), b.size());
  return b;
}
}  // namespace

TEST_CASE("fill rounds the value once, the same on every device", "[cuda][emu][devices]") {
  for (hg::Device d : hg::test::devices()) {
    INFO(hg::test::device_label(d));
    for (hg::DType dt : {hg::DType::f64, hg::DType::f32, hg::DType::f16, hg::DType::bf16}) {
      INFO(hg::dtype_name(dt));
      // Enough elements for several blocks and a grid-stride loop on cuda.
      const hg::Tensor cpu = hg::full({300001}, 0.1, {dt, hg::Device::cpu()});
      const hg::Tensor on_d = hg::full({300001}, 0.1, {dt, d});
      REQUIRE(on_d.device() == d);
      REQUIRE(bytes(on_d) == bytes(cpu));
      // f16 rounds this up to its largest finite value (1e6 is refused: it does not fit f16).
      const hg::Tensor top = hg::full({7}, -65500.3, {dt, d});
      REQUIRE(bytes(top) == bytes(hg::full({7}, -65500.3, {dt, hg::Device::cpu()})));
    }
  }
}

TEST_CASE("transfers to and from a device round-trip exactly", "[cuda][emu][devices]") {
  std::mt19937 rng(9);
  std::normal_distribution<double> n(0.0, 100.0);
  std::vector<double> values(4099);
  for (auto& v : values) v = n(rng);
  for (hg::Device d : hg::test::devices()) {
    INFO(hg::test::device_label(d));
    for (hg::DType dt : {hg::DType::f64, hg::DType::f32, hg::DType::f16, hg::DType::bf16}) {
      INFO(hg::dtype_name(dt));
      const hg::Tensor host = hg::from_vector(values, {4099}, {dt, hg::Device::cpu()});
      const hg::Tensor there = host.to(d);
      REQUIRE(there.device() == d);
      REQUIRE(bytes(there) == bytes(host));
      // copy_ into an existing device tensor converts on the host, then transfers.
      hg::Tensor dst = hg::zeros({4099}, {dt, d});
      hg::copy_(dst, host);
      REQUIRE(bytes(dst) == bytes(host));
    }
  }
}
