// bmm on cuda:0 against the CPU kernel: every floating dtype, sizes that do not divide the
// 32 x 32 x 16 tile, transposed and batch-broadcast operands, and matmul's gradients.
#include <catch2/catch.hpp>

#include "ops/matmul_kernels.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

namespace {

// The CPU's bmm of a and b (any strides, on the CPU) into a fresh contiguous output.
Tensor bmm_on_cpu(const Tensor& a, const Tensor& b) {
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, {a.dtype(), Device::cpu()});
  bmm_stub(Device::cpu(), a, b, out);
  return out;
}

Tensor bmm_on_cuda(const Tensor& a, const Tensor& b) {
  Tensor out = test::poisoned({a.size(0), a.size(1), b.size(2)}, a.dtype(), kCuda);
  bmm_stub(kCuda, a, b, out);
  return out;
}

}  // namespace

TEST_CASE("cuda bmm equals the CPU's for odd sizes in every dtype", "[cuda][ops][matmul]") {
  HG_REQUIRE_CUDA();
  struct Case { int64_t B, M, K, N; };
  for (const Case c : {Case{1, 1, 1, 1}, Case{3, 33, 17, 35}, Case{2, 5, 70, 3}, Case{1, 64, 32, 32}}) {
    for (DType dt : test::kFloatingDtypes) {
      INFO(dtype_name(dt) << " B=" << c.B << " M=" << c.M << " K=" << c.K << " N=" << c.N);
      const Tensor a = test::random_cpu({c.B, c.M, c.K}, dt, 11), b = test::random_cpu({c.B, c.K, c.N}, dt, 12);
      test::require_close(bmm_on_cuda(a.to(kCuda), b.to(kCuda)), bmm_on_cpu(a, b));
    }
  }
}

TEST_CASE("cuda bmm reads transposed and batch-broadcast operands", "[cuda][ops][matmul]") {
  HG_REQUIRE_CUDA();
  for (DType dt : {DType::f32, DType::f16, DType::bf16}) {
    INFO(dtype_name(dt));
    // a^T as a view: strides (.., 1, M); b's one matrix shared by every batch entry (stride 0).
    const Tensor at = test::random_cpu({4, 19, 37}, dt, 21), b1 = test::random_cpu({1, 19, 23}, dt, 22);
    const Tensor a_cpu = at.transpose(1, 2), b_cpu = b1.expand({4, 19, 23});
    const Tensor a_cuda = at.to(kCuda).transpose(1, 2), b_cuda = b1.to(kCuda).expand({4, 19, 23});
    REQUIRE(b_cuda.strides()[0] == 0);
    test::require_close(bmm_on_cuda(a_cuda, b_cuda), bmm_on_cpu(a_cpu, b_cpu));
  }
}

TEST_CASE("cuda bmm refuses a non-contiguous output", "[cuda][ops][matmul]") {
  HG_REQUIRE_CUDA();
  const Tensor a = test::random_cpu({1, 4, 4}, f32, 1).to(kCuda);
  const Tensor out = zeros({1, 4, 4}, {f32, kCuda}).transpose(1, 2);
  REQUIRE_THROWS_WITH(bmm_stub(kCuda, a, a, out), Catch::Matchers::Contains("must be contiguous"));
}

TEST_CASE("matmul's gradients on cuda equal the CPU's", "[cuda][ops][matmul]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::kFloatingDtypes) {
    INFO(dtype_name(dt));
    const Tensor a0 = test::random_cpu({2, 3, 9, 13}, dt, 31), b0 = test::random_cpu({2, 3, 13, 6}, dt, 32);
    const Tensor g0 = test::random_cpu({2, 3, 9, 6}, dt, 33);
    Tensor grads[2][2];
    Tensor outs[2];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d == 0 ? Device::cpu() : kCuda;
      Tensor a = a0.to(dev).detach(), b = b0.to(dev).detach();
      a.set_requires_grad();
      b.set_requires_grad();
      outs[d] = matmul(a, b);
      outs[d].backward(g0.to(dev));
      grads[d][0] = a.grad();
      grads[d][1] = b.grad();
    }
    REQUIRE(outs[1].device() == kCuda);
    test::require_close(outs[1], outs[0]);
    test::require_close(grads[1][0], grads[0][0]);
    test::require_close(grads[1][1], grads[0][1]);
  }
}
