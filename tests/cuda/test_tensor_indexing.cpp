// Host unit tests of the kernels' index arithmetic (cuda/tensor_indexing.h) and of the
// device dtype conversions' host side (cuda/device_types.h); no device needed.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <random>

#include "cuda/device_types.h"
#include "cuda/tensor_indexing.h"
#include "halfgrad.h"

using namespace hg;

namespace {
// The offset of row-major element `linear` from the tensor's own (unmerged) strides.
int64_t naive_offset(const Tensor& t, int64_t linear) {
  int64_t off = 0;
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t s = t.shape()[static_cast<size_t>(d)];
    off += (linear % s) * t.strides()[static_cast<size_t>(d)];
    linear /= s;
  }
  return off;
}
}  // namespace

TEST_CASE("element offsets of merged layouts equal the tensors' own strides", "[cuda][indexing]") {
  const Tensor base = zeros({4, 5, 6, 7});
  const Tensor views[] = {
      base,
      base.permute({0, 2, 1, 3}),
      base.transpose(0, 3),
      base.slice(1, 1, 5, 2),
      base.narrow(3, 2, 3).select(0, 1),
      base.select(2, 3).unsqueeze(1).expand({4, 3, 5, 7}),
      zeros({7}).expand({4, 5, 6, 7}),
      zeros({1, 5, 1, 7}).expand({4, 5, 6, 7}).permute({3, 1, 0, 2}),
      zeros({}),
  };
  for (const Tensor& v : views) {
    INFO(shape_str(v.shape()) << " strides " << shape_str(v.strides()));
    const cuda::TensorArg a = cuda::tensor_arg(v);
    CHECK(a.dim <= v.dim());
    for (int64_t i = 0; i < v.numel(); ++i) REQUIRE(cuda::element_offset(a, i) == naive_offset(v, i));
  }
}

TEST_CASE("a multi-operand layout keeps each operand's offsets", "[cuda][indexing]") {
  const Tensor out = zeros({3, 4, 5});
  const Tensor a = zeros({5, 4, 3}).permute({2, 1, 0});
  const Tensor b = zeros({4, 1}).expand({3, 4, 5});
  const auto l = cuda::strided_layout<3>({&out, &a, &b});
  for (int64_t i = 0; i < out.numel(); ++i) {
    const auto o = cuda::element_offsets(l, i);
    REQUIRE(o.v[0] == i);
    REQUIRE(o.v[1] == naive_offset(a, i));
    REQUIRE(o.v[2] == naive_offset(b, i));
  }
  // Contiguous operands merge into one dimension; a transposed one keeps them apart.
  CHECK(cuda::strided_layout<2>({&out, &out}).dim == 1);
  CHECK(cuda::strided_layout<2>({&out, &a}).dim == 3);
}

TEST_CASE("more than eight unmergeable dimensions are refused with hg::Error", "[cuda][indexing]") {
  const Tensor t = zeros({2, 2, 2, 2, 2, 2, 2, 2, 2}).permute({8, 7, 6, 5, 4, 3, 2, 1, 0});
  CHECK_THROWS_WITH(cuda::tensor_arg(t), Catch::Contains("9 dimensions") && Catch::Contains("contiguous first"));
  CHECK(cuda::tensor_arg(t.contiguous()).dim == 1);
}

TEST_CASE("device dtype conversions round like the CPU's", "[cuda][indexing]") {
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int i = 0; i < 20000; ++i) {
    const uint32_t x = bits(rng);
    const float f = std::bit_cast<float>(x);
    REQUIRE(cuda::dev_store<half>(f).bits == half(f).bits);
    REQUIRE(cuda::dev_store<bfloat16>(f).bits == bfloat16(f).bits);
    const double d = std::ldexp(static_cast<double>(x), -int(x % 60));
    REQUIRE(cuda::dev_store<half>(d).bits == half(d).bits);
    REQUIRE(cuda::dev_store<bfloat16>(d).bits == bfloat16(d).bits);
    const auto h = static_cast<uint16_t>(x);
    REQUIRE(std::bit_cast<uint32_t>(cuda::dev_load(half::from_bits(h))) ==
            std::bit_cast<uint32_t>(static_cast<float>(half::from_bits(h))));
  }
  // The double tie case that must not round twice, and i64/bool conversions.
  CHECK(cuda::dev_store<half>(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30)).bits == 0x3c01);
  CHECK(cuda::dev_convert<bool>(half(0.5f)) == true);
  CHECK(cuda::dev_convert<bool>(0.0) == false);
  CHECK(cuda::dev_convert<int64_t>(bfloat16(-3.0f)) == -3);
  CHECK(cuda::dev_convert<float>(true) == 1.0f);
}
