// The numerics statistics (amp/tensor_stats.h) on cuda against the CPU kernel: counts, the
// log2 histogram, amax and min non-zero exactly; sums within a tolerance (another order);
// every floating dtype, NaN/inf/zeros/subnormals/overflow planted, sizes over many blocks.
#include <catch2/catch.hpp>

#include "amp/tensor_stats.h"
#include "tests/cuda/ops_compare.h"

using namespace hg;
using hg::test::kCuda;

namespace {

// Values spread over many binades (|x| from 2^-45 to 2^25) with special values planted.
Tensor spread(int64_t n, DType dt, uint64_t seed) {
  Generator g(seed);
  const Tensor e = uniform({n}, -45, 25, {f64}, &g), s = uniform({n}, -1, 1, {f64}, &g);
  Tensor x = (pow(full({n}, 2.0, {f64}), e) * s).to(dt);
  fill_(x.narrow(0, 3, 5), 0.0);
  fill_(x.narrow(0, 11, 2), NAN);
  fill_(x.narrow(0, n - 1, 1), -INFINITY);
  copy_(x.narrow(0, n / 2, 1), full({1}, 70000.0, {f64}));  // a cast: inf in f16, an overflow count elsewhere
  return x;
}

}  // namespace

TEST_CASE("numerics statistics on cuda equal the CPU's", "[cuda][ops][amp][numerics]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::float_dtypes())
    for (int64_t n : {int64_t{20}, int64_t{5000}, int64_t{70001}}) {
      INFO(dtype_name(dt) << " n " << n);
      const Tensor x = spread(n, dt, 100 + static_cast<uint64_t>(n));
      const Tensor cpu = amp::compute_stats(x);
      const Tensor dev = amp::compute_stats(x.to(kCuda));
      REQUIRE(dev.device() == kCuda);
      const std::vector<double> a = dev.to(Device::cpu()).to_vector<double>(), b = cpu.to_vector<double>();
      REQUIRE(a.size() == static_cast<size_t>(kNumericsFields));
      for (int f = 0; f < kNumericsFields; ++f) {
        INFO("field " << f << ": cuda " << a[f] << ", cpu " << b[f]);
        if (f == 3 || f == 4) CHECK(a[f] == Approx(b[f]).epsilon(1e-12).margin(1e-9));
        else CHECK(a[f] == b[f]);
      }
      const amp::TensorStats s = amp::unpack_stats(dev);
      CHECK(s.nan == 2);
      // In f16 the values under 2^-25 are zeros and those over 65504 infs already.
      CHECK((dt == f16 ? s.zeros > 5 : s.zeros == 5));
      CHECK((dt == f16 ? s.inf > 2 : s.inf == 1));
      CHECK(s.f16_subnormal > 0);
      if (dt != f16) CHECK(s.f16_overflow >= 1);
    }
}

TEST_CASE("numerics statistics on cuda: an empty tensor and one without non-zeros", "[cuda][ops][amp][numerics]") {
  HG_REQUIRE_CUDA();
  for (const Tensor& x : {empty({0}, {f32}), zeros({300}, {bf16})}) {
    const std::vector<double> a = amp::compute_stats(x.to(kCuda)).to(Device::cpu()).to_vector<double>();
    const std::vector<double> b = amp::compute_stats(x).to_vector<double>();
    REQUIRE(a == b);
  }
}
