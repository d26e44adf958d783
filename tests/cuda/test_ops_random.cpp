// Random fills on cuda: the same Philox streams as the CPU, so a seeded draw is the same
// tensor on both devices, bit for bit, in every dtype and distribution.
#include <catch2/catch.hpp>

#include <cstring>

#include "tests/cuda/ops_compare.h"

using namespace hg;
using hg::test::kCuda;

namespace {
std::vector<unsigned char> bytes(const Tensor& t) {
  const Tensor c = t.to(Device::cpu()).contiguous();
  std::vector<unsigned char> b(static_cast<size_t>(c.numel()) * dtype_size(c.dtype()));
  std::memcpy(b.data(), c.data_ptr(), b.size());
  return b;
}
}  // namespace

TEST_CASE("seeded draws on cuda equal the CPU's bit for bit", "[cuda][ops][random]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes()) {
    INFO(dtype_name(dt));
    for (uint64_t seed : {0ull, 7ull, 0x123456789abcdefull}) {
      Generator gc(seed), gd(seed);
      for (int draw = 0; draw < 2; ++draw) {  // a second draw uses the next stream
        const Tensor a = randn({1001}, {dt}, &gc), b = randn({1001}, {dt, kCuda}, &gd);
        REQUIRE(b.device() == kCuda);
        REQUIRE(bytes(b) == bytes(a));
      }
      REQUIRE(bytes(uniform({333}, -2, 5, {dt, kCuda}, &gd)) == bytes(uniform({333}, -2, 5, {dt}, &gc)));
      REQUIRE(bytes(normal({77}, 3, 0.5, {dt, kCuda}, &gd)) == bytes(normal({77}, 3, 0.5, {dt}, &gc)));
    }
  }
  Generator gc(3), gd(3);
  REQUIRE(bytes(randint(-5, 1000, {999}, {i64, kCuda}, &gd)) == bytes(randint(-5, 1000, {999}, {i64}, &gc)));
  REQUIRE(bytes(bernoulli({999}, 0.3, kCuda, &gd)) == bytes(bernoulli({999}, 0.3, Device::cpu(), &gc)));
  // Not all equal: the draw really is random.
  const std::vector<double> v = randn({64}, {f32, kCuda}, &gd).to(Device::cpu()).to_vector<double>();
  REQUIRE(std::count(v.begin(), v.end(), v[0]) == 1);
}
