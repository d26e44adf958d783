// Batch normalisation's kernels on cuda:0 against the CPU's: statistics, normalisation and
// both backward modes, with and without an affine transform, channel counts that do not
// fill a 32-channel block, every floating dtype, outputs poisoned first; and batch_norm
// through autograd (training with running statistics, then eval).
#include <catch2/catch.hpp>

#include "ops/batch_norm_kernels.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

namespace {

DType stat_dtype(DType dt) { return dt == f64 ? f64 : f32; }

// Positive per-channel values (like invstd), on the CPU.
Tensor positive(int64_t C, DType s, uint64_t seed) {
  Generator g(seed);
  return uniform({C}, 0.5, 2.0, {s}, &g);
}

}  // namespace

TEST_CASE("cuda batch_norm kernels equal the CPU's", "[cuda][ops][batch_norm]") {
  HG_REQUIRE_CUDA();
  uint64_t seed = 200;
  struct Case { int64_t M, C; };
  for (const Case k : {Case{517, 37}, Case{130, 3}, Case{2, 64}}) {
    for (DType dt : test::kFloatingDtypes) {
      const DType S = stat_dtype(dt);
      // An offset mean makes the variance's cancellation matter.
      const Tensor x = (test::random_cpu({k.M, k.C}, f64, ++seed) * 3.0 + 5.0).to(dt);
      for (bool affine : {true, false}) {
        INFO(dtype_name(dt) << " M=" << k.M << " C=" << k.C << (affine ? " affine" : " no affine"));
        const Tensor w = affine ? test::random_cpu({k.C}, S, ++seed) : Tensor();
        const Tensor b = affine ? test::random_cpu({k.C}, S, ++seed) : Tensor();
        const auto to_cuda = [](const Tensor& t) { return t.defined() ? t.to(kCuda) : t; };

        Tensor mean = empty({k.C}, {S, Device::cpu()}), var = empty({k.C}, {S, Device::cpu()});
        batch_norm_stats_stub(Device::cpu(), x, mean, var);
        Tensor mean_c = test::poisoned({k.C}, S, kCuda), var_c = test::poisoned({k.C}, S, kCuda);
        batch_norm_stats_stub(kCuda, x.to(kCuda), mean_c, var_c);
        test::require_close(mean_c, mean);
        test::require_close(var_c, var);

        const Tensor invstd = positive(k.C, S, ++seed);
        Tensor y = empty({k.M, k.C}, {dt, Device::cpu()});
        batch_norm_forward_stub(Device::cpu(), x, mean, invstd, w, b, y);
        Tensor y_c = test::poisoned({k.M, k.C}, dt, kCuda);
        batch_norm_forward_stub(kCuda, x.to(kCuda), mean.to(kCuda), invstd.to(kCuda), to_cuda(w), to_cuda(b), y_c);
        test::require_close(y_c, y);

        const Tensor gy = test::random_cpu({k.M, k.C}, dt, ++seed);
        for (bool training : {true, false}) {
          INFO((training ? "training" : "eval"));
          Tensor gx = empty({k.M, k.C}, {dt, Device::cpu()});
          Tensor sg = empty({k.C}, {S, Device::cpu()}), sgx = empty({k.C}, {S, Device::cpu()});
          batch_norm_backward_stub(Device::cpu(), gy, x, mean, invstd, w, training, gx, sg, sgx);
          Tensor gx_c = test::poisoned({k.M, k.C}, dt, kCuda);
          Tensor sg_c = test::poisoned({k.C}, S, kCuda), sgx_c = test::poisoned({k.C}, S, kCuda);
          batch_norm_backward_stub(kCuda, gy.to(kCuda), x.to(kCuda), mean.to(kCuda), invstd.to(kCuda), to_cuda(w),
                                   training, gx_c, sg_c, sgx_c);
          test::require_close(sg_c, sg);
          test::require_close(sgx_c, sgx);
          // gx subtracts two sums from gy: its error is the sums' error, relative to their scale.
          test::require_close(gx_c, gx, 4.0);
        }
      }
    }
  }
}

TEST_CASE("cuda batch_norm backward without an input gradient fills only the sums", "[cuda][ops][batch_norm]") {
  HG_REQUIRE_CUDA();
  const Tensor x = test::random_cpu({33, 5}, f32, 1), gy = test::random_cpu({33, 5}, f32, 2);
  const Tensor mean = test::random_cpu({5}, f32, 3), invstd = positive(5, f32, 4);
  Tensor sg = empty({5}, {f32, Device::cpu()}), sgx = empty({5}, {f32, Device::cpu()});
  batch_norm_backward_stub(Device::cpu(), gy, x, mean, invstd, Tensor(), true, Tensor(), sg, sgx);
  Tensor sg_c = test::poisoned({5}, f32, kCuda), sgx_c = test::poisoned({5}, f32, kCuda);
  batch_norm_backward_stub(kCuda, gy.to(kCuda), x.to(kCuda), mean.to(kCuda), invstd.to(kCuda), Tensor(), true,
                           Tensor(), sg_c, sgx_c);
  test::require_close(sg_c, sg);
  test::require_close(sgx_c, sgx);
}

TEST_CASE("batch_norm on cuda through autograd equals the CPU, training then eval", "[cuda][ops][batch_norm]") {
  HG_REQUIRE_CUDA();
  for (DType dt : test::kFloatingDtypes) {
    INFO(dtype_name(dt));
    const DType S = stat_dtype(dt);
    const Tensor x0 = (test::random_cpu({2, 6, 5, 7}, f64, 300) * 2.0 + 1.0).to(dt);
    const Tensor w0 = test::random_cpu({7}, S, 301), b0 = test::random_cpu({7}, S, 302);
    Tensor out[2], eval_out[2], gx[2], gw[2], gb[2], rm[2], rv[2];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d == 0 ? Device::cpu() : kCuda;
      Tensor x = x0.to(dev).detach(), w = w0.to(dev).detach(), b = b0.to(dev).detach();
      x.set_requires_grad();
      w.set_requires_grad();
      b.set_requires_grad();
      rm[d] = zeros({7}, {S, dev});
      rv[d] = ones({7}, {S, dev});
      out[d] = batch_norm(x, w, b, rm[d], rv[d], true);
      out[d].backward(test::random_cpu(out[d].shape(), dt, 303).to(dev));
      gx[d] = x.grad();
      gw[d] = w.grad();
      gb[d] = b.grad();
      NoGrad no_grad;
      eval_out[d] = batch_norm(x, w, b, rm[d], rv[d], false);
    }
    REQUIRE(out[1].device() == kCuda);
    test::require_close(out[1], out[0]);
    test::require_close(gx[1], gx[0], 4.0);
    test::require_close(gw[1], gw[0]);
    test::require_close(gb[1], gb[0]);
    test::require_close(rm[1], rm[0]);
    test::require_close(rv[1], rv[0]);
    test::require_close(eval_out[1], eval_out[0]);
  }
}
