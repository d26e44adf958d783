// The cuBLAS/cuDNN references (cuda/vendor/vendor_ops.h) against the CPU kernels on a real
// GPU: bmm and the three conv2d passes on random inputs of odd shapes, strided operands,
// groups and dilation. Elsewhere they skip with the reason; what runs everywhere: the
// emulation's refusal, and the kernel settings' parse errors naming the valid values.
#include <catch2/catch.hpp>

#include "cuda/kernel_settings.h"
#include "ops/conv2d_kernels.h"
#include "ops/matmul_kernels.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"
#ifdef HG_WITH_CUDA
#include "cuda/runtime.h"
#include "cuda/vendor/vendor_ops.h"
#endif

using namespace hg;
using Catch::Matchers::Contains;
using hg::test::cpu_bmm;
using hg::test::kCuda;

namespace {

#ifdef HG_WITH_CUDA
// Why the vendor library cannot be compared with the CPU here ("" when it can).
std::string vendor_skip_reason(bool cudnn) {
  if (cuda::is_emulated()) return "the cuBLAS/cuDNN references need a real GPU; cuda:0 is the CPU emulation";
  if (!test::cuda_available()) return test::cuda_unavailable_reason();
  return cudnn ? cuda::vendor::cudnn_unavailable_reason() : cuda::vendor::cublas_unavailable_reason();
}

#define HG_REQUIRE_VENDOR(cudnn)                                  \
  do {                                                            \
    const std::string why_ = vendor_skip_reason(cudnn);           \
    if (!why_.empty()) HG_SKIP(why_);                             \
  } while (0)

Tensor vendor_bmm(const Tensor& a, const Tensor& b) {
  Tensor out = test::poisoned({a.size(0), a.size(1), b.size(2)}, a.dtype(), kCuda);
  cuda::vendor::bmm(a, b, out);
  return out;
}

// f32 under `fast` is tf32 (10-bit mantissas): ~1e-3 relative, so 100x the f32 tolerance.
double f32_scale(cuda::F32Matmul m) { return m == cuda::F32Matmul::fast ? 100.0 : 1.0; }
#endif

}  // namespace

#ifdef HG_WITH_CUDA
TEST_CASE("vendor bmm equals the CPU's for odd sizes and strided operands", "[cuda][vendor]") {
  HG_REQUIRE_VENDOR(false);
  struct Case { int64_t B, M, K, N; };
  for (const cuda::F32Matmul mode : {cuda::F32Matmul::strict, cuda::F32Matmul::accurate, cuda::F32Matmul::fast}) {
    const cuda::ScopedF32Matmul scoped(mode);
    for (const Case c : {Case{1, 1, 1, 1}, Case{3, 33, 17, 35}, Case{2, 70, 129, 5}, Case{1, 128, 64, 96}}) {
      for (DType dt : test::kFloatingDtypes) {
        INFO(dtype_name(dt) << " f32 mode " << cuda::to_string(mode) << " B=" << c.B << " M=" << c.M << " K=" << c.K
                            << " N=" << c.N);
        const Tensor a = test::random_cpu({c.B, c.M, c.K}, dt, 11), b = test::random_cpu({c.B, c.K, c.N}, dt, 12);
        test::require_close(vendor_bmm(a.to(kCuda), b.to(kCuda)), cpu_bmm(a, b), dt == f32 ? f32_scale(mode) : 1.0);
      }
    }
  }
  const cuda::ScopedF32Matmul strict(cuda::F32Matmul::strict);
  for (DType dt : {f32, f16, bf16}) {
    INFO(dtype_name(dt));
    // a transposed (rows contiguous), b one matrix shared by all batch entries (stride 0).
    const Tensor at = test::random_cpu({4, 19, 37}, dt, 21), b1 = test::random_cpu({1, 19, 23}, dt, 22);
    test::require_close(vendor_bmm(at.to(kCuda).transpose(1, 2), b1.to(kCuda).expand({4, 19, 23})),
                        cpu_bmm(at.transpose(1, 2), b1.expand({4, 19, 23})));
    // Neither axis contiguous (every other element): cuBLAS cannot express it, so it is copied.
    const Tensor a4 = test::random_cpu({2, 9, 14, 2}, dt, 23), b2 = test::random_cpu({2, 14, 6}, dt, 24);
    const Tensor a_cuda = a4.to(kCuda).select(3, 0);
    REQUIRE(a_cuda.strides()[2] == 2);
    test::require_close(vendor_bmm(a_cuda, b2.to(kCuda).transpose(1, 2).contiguous().transpose(1, 2)),
                        cpu_bmm(a4.select(3, 0), b2));
  }
}

TEST_CASE("vendor conv2d passes equal the CPU's with stride, padding, dilation and groups", "[cuda][vendor]") {
  HG_REQUIRE_VENDOR(true);
  struct Case {
    int64_t N, H, W, C, K, R, S;
    Conv2dOptions p;
  };
  const Case cases[] = {
      {2, 9, 11, 8, 16, 3, 3, {{1, 1}, {1, 1}, {1, 1}, 1}},   // the U-Net's 3x3, odd image
      {1, 13, 7, 6, 9, 3, 2, {{2, 1}, {1, 0}, {1, 1}, 3}},    // strided, asymmetric, 3 groups of 2 -> 3
      {2, 10, 12, 4, 8, 3, 3, {{1, 1}, {2, 2}, {2, 2}, 1}},   // dilation 2
      {3, 8, 8, 16, 32, 1, 1, {{1, 1}, {0, 0}, {1, 1}, 1}},   // 1x1
      {1, 16, 16, 32, 32, 3, 3, {{2, 2}, {1, 1}, {1, 1}, 2}},  // strided, 2 groups of 16
  };
  for (const cuda::F32Matmul mode : {cuda::F32Matmul::strict, cuda::F32Matmul::fast}) {
    const cuda::ScopedF32Matmul scoped(mode);
    for (const Case& c : cases) {
      const int64_t P = (c.H + 2 * c.p.padding[0] - c.p.dilation[0] * (c.R - 1) - 1) / c.p.stride[0] + 1;
      const int64_t Q = (c.W + 2 * c.p.padding[1] - c.p.dilation[1] * (c.S - 1) - 1) / c.p.stride[1] + 1;
      for (DType dt : {f32, f16, bf16}) {
        if (dt != f32 && mode == cuda::F32Matmul::fast) continue;  // the mode only concerns f32
        INFO(dtype_name(dt) << " f32 mode " << cuda::to_string(mode) << " x [" << c.N << "," << c.H << "," << c.W
                            << "," << c.C << "] w [" << c.K << "," << c.R << "," << c.S << "," << c.C / c.p.groups
                            << "] groups " << c.p.groups);
        const double tol = dt == f32 ? f32_scale(mode) : 1.0;
        const Tensor x = test::random_cpu({c.N, c.H, c.W, c.C}, dt, 31);
        const Tensor w = test::random_cpu({c.K, c.R, c.S, c.C / c.p.groups}, dt, 32);
        const Tensor gy = test::random_cpu({c.N, P, Q, c.K}, dt, 33);
        const Device cpu = Device::cpu();

        Tensor y_cpu = empty(gy.shape(), {dt}), y = test::poisoned(gy.shape(), dt, kCuda);
        conv2d_forward_stub(cpu, x, w, Tensor(), y_cpu, c.p);
        cuda::vendor::conv2d_forward(x.to(kCuda), w.to(kCuda), y, c.p);
        test::require_close(y, y_cpu, tol);

        Tensor gx_cpu = empty(x.shape(), {dt}), gx = test::poisoned(x.shape(), dt, kCuda);
        conv2d_dgrad_stub(cpu, gy, w, Tensor(), gx_cpu, c.p);
        cuda::vendor::conv2d_dgrad(gy.to(kCuda), w.to(kCuda), gx, c.p);
        test::require_close(gx, gx_cpu, tol);

        Tensor gw_cpu = empty(w.shape(), {dt}), gw = test::poisoned(w.shape(), dt, kCuda);
        conv2d_wgrad_stub(cpu, gy, x, gw_cpu, c.p);
        cuda::vendor::conv2d_wgrad(gy.to(kCuda), x.to(kCuda), gw, c.p);
        test::require_close(gw, gw_cpu, tol);
      }
    }
  }
}

TEST_CASE("vendor references say why they cannot run", "[cuda][vendor]") {
  const std::string blas = cuda::vendor::cublas_unavailable_reason(), dnn = cuda::vendor::cudnn_unavailable_reason();
  if (cuda::is_emulated()) {
    REQUIRE_THAT(blas, Contains("native CUDA build") && Contains("emulation"));
    REQUIRE_THAT(dnn, Contains("native CUDA build") && Contains("emulation"));
    const Tensor a = test::random_cpu({1, 4, 4}, f32, 1).to(kCuda), out = empty({1, 4, 4}, {f32, kCuda});
    REQUIRE_THROWS_WITH(cuda::vendor::bmm(a, a, out), Contains("vendor bmm") && Contains("CPU emulation"));
    const Tensor x = test::random_cpu({1, 4, 4, 2}, f32, 2).to(kCuda), w = test::random_cpu({3, 1, 1, 2}, f32, 3).to(kCuda);
    const Tensor y = empty({1, 4, 4, 3}, {f32, kCuda});
    REQUIRE_THROWS_WITH(cuda::vendor::conv2d_forward(x, w, y, Conv2dOptions{}), Contains("CPU emulation"));
    REQUIRE_THROWS_WITH(cuda::vendor::conv2d_dgrad(y, w, x, Conv2dOptions{}), Contains("CPU emulation"));
    REQUIRE_THROWS_WITH(cuda::vendor::conv2d_wgrad(y, x, w, Conv2dOptions{}), Contains("CPU emulation"));
  } else if (!test::cuda_available()) {
    // Natively without a GPU: either the library file is missing (named) or the device is.
    REQUIRE_THAT(blas, Contains("libcublas") || Contains("no CUDA device"));
    REQUIRE_THAT(dnn, Contains("libcudnn") || Contains("cudnn.h") || Contains("no CUDA device"));
    const Tensor a = test::random_cpu({1, 4, 4}, f32, 1);
    REQUIRE_THROWS_WITH(cuda::vendor::bmm(a, a, a.clone()), Contains("cuda devices") && Contains("cpu"));
  } else {
    // On a GPU a missing library is a reason naming the file; present, the reason is empty.
    if (!blas.empty()) REQUIRE_THAT(blas, Contains("libcublas"));
    if (!dnn.empty()) REQUIRE_THAT(dnn, Contains("libcudnn") || Contains("cudnn.h"));
    const Tensor a = test::random_cpu({1, 4, 4}, f32, 1);
    REQUIRE_THROWS_WITH(cuda::vendor::bmm(a, a, a.clone()), Contains("cuda devices"));
  }
}
#endif

TEST_CASE("kernel settings reject unknown values and name the valid ones", "[cuda][vendor][settings]") {
  REQUIRE(cuda::parse_f32_matmul("fast") == cuda::F32Matmul::fast);
  REQUIRE(cuda::parse_provider("vendor") == cuda::Provider::vendor);
  REQUIRE_THROWS_WITH(cuda::parse_f32_matmul("tf32", "HG_F32_MATMUL"),
                      Contains("HG_F32_MATMUL") && Contains("'tf32'") && Contains("strict") && Contains("accurate") &&
                          Contains("fast"));
  REQUIRE_THROWS_WITH(cuda::parse_provider("cublas", "HG_GEMM"),
                      Contains("HG_GEMM") && Contains("'cublas'") && Contains("halfgrad") && Contains("vendor"));
  const cuda::F32Matmul before = cuda::f32_matmul();
  const cuda::Provider conv_before = cuda::conv_provider();
  {
    const cuda::ScopedF32Matmul fast(cuda::F32Matmul::fast);
    REQUIRE(cuda::f32_matmul() == cuda::F32Matmul::fast);
    const cuda::ScopedConvProvider vendor(cuda::Provider::vendor);
    REQUIRE(cuda::conv_provider() == cuda::Provider::vendor);
  }
  REQUIRE(cuda::f32_matmul() == before);
  REQUIRE(cuda::conv_provider() == conv_before);
}
