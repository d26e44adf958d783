// copy, fill and transfers on cuda against the CPU: every dtype pair (casts round exactly
// as on the CPU, so bits must match), strided and broadcast sources, strided destinations.
#include <catch2/catch.hpp>

#include <cstring>

#include "ops/copy.h"
#include "ops/copy_kernels.h"
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

// Values that exercise every conversion: fractions, ties, f16 overflow and subnormals, NaN.
// For an integer destination they stay finite and within i64 (beyond is undefined in C++).
Tensor source(DType dt, const Shape& s, uint64_t seed, bool to_integer) {
  if (dt == b8) return bernoulli(s, 0.5, Device::cpu(), nullptr).contiguous();
  Generator g(seed);
  if (to_integer) return uniform(s, -6e4, 6e4, {f64}, &g).to(dt);
  Tensor x = normal(s, 0, 300, {f64}, &g) * exp(uniform(s, -12, 5, {f64}, &g));
  if (is_floating(dt)) fill_(x.narrow(0, 0, 1), NAN);
  return x.to(dt);
}

const DType kAll[] = {f64, f32, f16, bf16, i64, b8};
}  // namespace

TEST_CASE("cuda copy converts between every pair of dtypes exactly as the CPU does", "[cuda][ops][copy]") {
  HG_REQUIRE_CUDA();
  for (DType from : kAll)
    for (DType to : kAll) {
      INFO(dtype_name(from) << " -> " << dtype_name(to));
      const Tensor src = source(from, {1031}, 11, to == i64);
      Tensor on_cuda = test::poisoned({1031}, to);
      copy_(on_cuda, src.to(kCuda));
      REQUIRE(bytes(on_cuda) == bytes(src.to(to)));
    }
  Tensor ints = randint(-5, 5, {333});
  REQUIRE(bytes(ints.to(kCuda).to(b8)) == bytes(ints.to(b8)));
  REQUIRE(bytes(ints.to(b8).to(kCuda).to(i64)) == bytes(ints.to(b8).to(i64)));
}

TEST_CASE("cuda copy reads strided and broadcast sources and writes strided destinations", "[cuda][ops][copy]") {
  HG_REQUIRE_CUDA();
  for (DType dt : {f32, f16, bf16, f64}) {
    INFO(dtype_name(dt));
    const Tensor x = test::random_input({13, 7, 5}, dt, 3);
    const Tensor xd = x.to(kCuda);
    // Permuted, sliced with a step and broadcast sources, each into a contiguous poisoned tensor.
    REQUIRE(bytes(xd.permute({2, 0, 1}).contiguous()) == bytes(x.permute({2, 0, 1}).contiguous()));
    REQUIRE(bytes(xd.slice(0, 1, 13, 3).contiguous()) == bytes(x.slice(0, 1, 13, 3).contiguous()));
    REQUIRE(bytes(xd.select(1, 2).unsqueeze(1).expand({13, 4, 5}).contiguous()) ==
            bytes(x.select(1, 2).unsqueeze(1).expand({13, 4, 5}).contiguous()));
    // A cast with a transposed source and a transposed destination.
    Tensor dst = test::poisoned({5, 13, 7}, f32);
    copy_(dst.permute({1, 2, 0}), xd);
    Tensor ref = full({5, 13, 7}, NAN, {f32});
    copy_(ref.permute({1, 2, 0}), x);
    REQUIRE(bytes(dst) == bytes(ref));
    // .to(dtype) and a sub-view written in place leave the rest alone.
    REQUIRE(bytes(xd.to(bf16)) == bytes(x.to(bf16)));
    Tensor part = test::poisoned({13, 7, 5}, dt);
    copy_(part.narrow(1, 2, 3), xd.narrow(1, 0, 3));
    const std::vector<double> v = part.to(Device::cpu()).to_vector<double>();
    REQUIRE(std::isnan(v[0]));
    REQUIRE(v[2 * 5] == x.at({0, 0, 0}));
  }
}

TEST_CASE("cuda fill writes strided tensors and only their elements", "[cuda][ops][copy]") {
  HG_REQUIRE_CUDA();
  for (DType dt : kAll) {
    INFO(dtype_name(dt));
    Tensor on_cuda = zeros({9, 33}, {dt, kCuda});
    Tensor on_cpu = zeros({9, 33}, {dt});
    fill_(on_cuda.transpose(0, 1).slice(0, 1, 33, 2), 0.1);
    fill_(on_cpu.transpose(0, 1).slice(0, 1, 33, 2), 0.1);
    REQUIRE(bytes(on_cuda) == bytes(on_cpu));
    fill_(on_cuda, -65500.3);  // contiguous: the vector path; f16 rounds to -65504 as on the CPU
    fill_(on_cpu, -65500.3);
    REQUIRE(bytes(on_cuda) == bytes(on_cpu));
  }
}

TEST_CASE("transfers of non-contiguous tensors stage through a contiguous copy", "[cuda][ops][copy]") {
  HG_REQUIRE_CUDA();
  const Tensor x = test::random_input({17, 6}, f16, 5);
  const Tensor xd = x.to(kCuda);
  // Device -> host from a transposed device tensor into a transposed host tensor.
  Tensor host = full({6, 17}, NAN, {f16});
  transfer_stub(kCuda, host.transpose(0, 1), xd);
  REQUIRE(bytes(host.transpose(0, 1)) == bytes(x));
  Tensor host2 = empty({6, 17}, {f16});
  transfer_stub(kCuda, host2, xd.transpose(0, 1));
  REQUIRE(bytes(host2) == bytes(x.transpose(0, 1)));
  // Host -> device into a strided device tensor.
  Tensor dev = test::poisoned({6, 17}, f16);
  transfer_stub(kCuda, dev.transpose(0, 1), x);
  REQUIRE(bytes(dev.transpose(0, 1)) == bytes(x));
  CHECK_THROWS_WITH(transfer_stub(kCuda, dev, x), Catch::Contains("dtype and shape must match"));
}
