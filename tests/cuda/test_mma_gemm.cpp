// The tensor-core GEMM engine (cuda/mma_gemm.h) and bmm / linear on it (cuda/matmul_tc.cu)
// against an f64 product of the same rounded inputs: f16, bf16, f32 in each precision mode,
// both tile configs, odd shapes, both layouts of each operand, broadcast batches, the
// element-by-element path, aligned operands (cp.async only), multi-band block orders, the
// fused epilogue. Errors are relative to sum_k |a||b|.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "cuda/kernel_settings.h"
#include "cuda/operand_alignment.h"
#include "ops/matmul_kernels.h"
#include "tests/cuda/gemm_kernels.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;
using hg::test::kernels::GemmMode;
using hg::test::kernels::GemmTile;

namespace {

// The exact product of a [B, M, K] and b [B, K, N] (any device, strides), and per element
// the size sum_k |a_ik b_kj| that bounds rounding errors of any summation order.
struct Reference {
  int64_t B, M, N;
  std::vector<double> value, scale;
};

Reference reference(const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(Device::cpu()).to(f64).contiguous(), b64 = b.to(Device::cpu()).to(f64).contiguous();
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const double* pa = a64.data<double>();
  const double* pb = b64.data<double>();
  Reference r{B, M, N, std::vector<double>(B * M * N, 0.0), std::vector<double>(B * M * N, 0.0)};
  for (int64_t z = 0; z < B; ++z)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const double x = pa[(z * M + i) * K + k];
        for (int64_t j = 0; j < N; ++j) {
          const double p = x * pb[(z * K + k) * N + j];
          r.value[(z * M + i) * N + j] += p;
          r.scale[(z * M + i) * N + j] += std::abs(p);
        }
      }
  return r;
}

// max |got - (alpha * value + bias)| / (|alpha| * scale + |bias|), ReLU applied to the
// reference if asked; got must be finite (a NaN left by the poison fails).
double max_error(const Tensor& got, const Reference& r, const Tensor& bias = Tensor(), double alpha = 1.0,
                 bool relu = false) {
  REQUIRE(got.shape() == Shape{r.B, r.M, r.N});
  const Tensor g = got.to(Device::cpu()).to(f64).contiguous();
  const Tensor b = bias.defined() ? bias.to(Device::cpu()).to(f64).contiguous() : Tensor();
  const double* pg = g.data<double>();
  double worst = 0;
  bool finite = true;
  for (size_t e = 0; e < r.value.size(); ++e) {
    const double bj = b.defined() ? b.data<double>()[e % r.N] : 0.0;
    double want = alpha * r.value[e] + bj;
    if (relu) want = std::max(want, 0.0);
    const double scale = std::abs(alpha) * r.scale[e] + std::abs(bj);
    finite = finite && std::isfinite(pg[e]);
    const double err = std::abs(pg[e] - want);
    worst = std::max(worst, scale == 0 ? (err == 0 ? 0.0 : INFINITY) : err / scale);
  }
  REQUIRE(finite);
  return worst;
}

Tensor bmm_on_cuda(const Tensor& a, const Tensor& b) {
  Tensor out = test::poisoned({a.size(0), a.size(1), b.size(2)}, a.dtype(), kCuda);
  bmm_stub(kCuda, a, b, out);
  return out;
}

Tensor engine(GemmTile tile, GemmMode mode, const Tensor& a, const Tensor& b, DType out_dtype,
              const Tensor& bias = Tensor(), float alpha = 1.0f, bool relu = false) {
  Tensor out = test::poisoned({a.size(0), a.size(1), b.size(2)}, out_dtype, kCuda);
  test::kernels::mma_gemm(tile, mode, a, b, out, bias, alpha, relu);
  return out;
}

DType input_dtype(GemmMode m) { return m == GemmMode::f16 ? f16 : m == GemmMode::bf16 ? bf16 : f32; }

// Error bounds relative to sum |a||b|: f16/bf16 outputs are rounded once (2^-11, 2^-8 of
// the value); tf32 inputs carry 2^-11 each; 3xTF32 and f32 leave f32-level sums.
double bound(GemmMode m) {
  switch (m) {
    case GemmMode::f16: return 1e-3;
    case GemmMode::bf16: return 5e-3;
    case GemmMode::tf32: return 1e-3;
    case GemmMode::tf32x3: return 1e-5;
  }
  return 0;
}

const char* name(GemmMode m) {
  const char* n[] = {"f16", "bf16", "tf32", "3xtf32"};
  return n[static_cast<int>(m)];
}

struct Dims {
  int64_t B, M, K, N;
};
constexpr Dims kOddShapes[] = {{1, 1, 1, 1}, {2, 17, 9, 33}, {1, 130, 45, 70}, {1, 65, 257, 129}};
constexpr GemmMode kModes[] = {GemmMode::f16, GemmMode::bf16, GemmMode::tf32, GemmMode::tf32x3};

}  // namespace

TEST_CASE("mma_gemm matches the f64 product on odd shapes with both tile configs", "[cuda][matmul][mma]") {
  HG_REQUIRE_CUDA();
  uint64_t seed = 100;
  for (const GemmTile tile : {GemmTile::small, GemmTile::large})
    for (const GemmMode mode : kModes)
      for (const Dims d : kOddShapes) {
        INFO(name(mode) << (tile == GemmTile::small ? " small" : " large") << " tile, B=" << d.B << " M=" << d.M
                        << " K=" << d.K << " N=" << d.N);
        const DType dt = input_dtype(mode);
        const Tensor a = test::random_cpu({d.B, d.M, d.K}, dt, ++seed), b = test::random_cpu({d.B, d.K, d.N}, dt, ++seed);
        const double err = max_error(engine(tile, mode, a.to(kCuda), b.to(kCuda), dt), reference(a, b));
        CHECK(err < bound(mode));
      }
}

TEST_CASE("f32 bmm: fast is tf32-accurate, accurate (3xTF32) and strict are f32-accurate", "[cuda][matmul][mma]") {
  HG_REQUIRE_CUDA();
  const Tensor a = test::random_cpu({2, 65, 257}, f32, 7), b = test::random_cpu({2, 257, 129}, f32, 8);
  const Reference r = reference(a, b);
  double err[3];
  for (const cuda::F32Matmul mode : {cuda::F32Matmul::strict, cuda::F32Matmul::accurate, cuda::F32Matmul::fast}) {
    cuda::ScopedF32Matmul use(mode);
    err[static_cast<int>(mode)] = max_error(bmm_on_cuda(a.to(kCuda), b.to(kCuda)), r);
  }
  const double strict = err[0], accurate = err[1], fast = err[2];
  INFO("max error / sum|a||b|: strict " << strict << ", accurate " << accurate << ", fast " << fast);
  CHECK(strict < 1e-5);
  CHECK(accurate < 1e-5);
  CHECK(fast < 1e-3);
  CHECK(fast > 2e-5);            // tf32 inputs really were rounded to 10 bits...
  CHECK(accurate * 30 < fast);  // ...and 3xTF32 recovers what that lost
}

TEST_CASE("bmm on tensor cores reads both layouts of each operand", "[cuda][matmul][mma]") {
  HG_REQUIRE_CUDA();
  cuda::ScopedF32Matmul use(cuda::F32Matmul::accurate);
  const int64_t B = 2, M = 37, K = 29, N = 43;
  for (const GemmMode mode : {GemmMode::f16, GemmMode::bf16, GemmMode::tf32x3})
    for (const bool a_t : {false, true})
      for (const bool b_t : {false, true})
        for (const GemmTile tile : {GemmTile::small, GemmTile::large}) {
          INFO(name(mode) << (a_t ? " a^T" : " a") << (b_t ? " b^T" : " b") << (tile == GemmTile::small ? " small" : " large"));
          const DType dt = input_dtype(mode);
          // Transposed: stored [B, K, M] (resp. [B, N, K]) and viewed as [B, M, K] ([B, K, N]).
          const Tensor a0 = test::random_cpu(a_t ? Shape{B, K, M} : Shape{B, M, K}, dt, 30 + a_t);
          const Tensor b0 = test::random_cpu(b_t ? Shape{B, N, K} : Shape{B, K, N}, dt, 40 + b_t);
          const Tensor a = a_t ? a0.to(kCuda).transpose(1, 2) : a0.to(kCuda);
          const Tensor b = b_t ? b0.to(kCuda).transpose(1, 2) : b0.to(kCuda);
          REQUIRE((a.strides()[1] == 1) == a_t);
          REQUIRE((b.strides()[1] == 1) == b_t);
          const Reference r = reference(a, b);
          CHECK(max_error(engine(tile, mode, a, b, dt), r) < bound(mode));
          if (tile == GemmTile::small) CHECK(max_error(bmm_on_cuda(a, b), r) < bound(mode));
        }
}

TEST_CASE("bmm on tensor cores broadcasts batches and reads unaligned or strided views", "[cuda][matmul][mma]") {
  HG_REQUIRE_CUDA();
  cuda::ScopedF32Matmul use(cuda::F32Matmul::accurate);
  for (const GemmMode mode : {GemmMode::f16, GemmMode::bf16, GemmMode::tf32x3}) {
    const DType dt = input_dtype(mode);
    INFO(name(mode));
    {  // one matrix of each operand shared by all batch entries (batch stride 0)
      const Tensor a = test::random_cpu({1, 21, 40}, dt, 51).to(kCuda).expand({3, 21, 40});
      const Tensor b = test::random_cpu({1, 40, 24}, dt, 52).to(kCuda).expand({3, 40, 24});
      REQUIRE((a.strides()[0] == 0 && b.strides()[0] == 0));
      CHECK(max_error(bmm_on_cuda(a, b), reference(a, b)) < bound(mode));
    }
    {  // odd offsets and leading dimensions: no 16-byte chunk is aligned
      const Tensor a = test::random_cpu({2, 23, 36}, dt, 53).to(kCuda).narrow(2, 1, 33);
      const Tensor b = test::random_cpu({2, 33, 19}, dt, 54).to(kCuda).narrow(2, 1, 17);
      CHECK(max_error(bmm_on_cuda(a, b), reference(a, b)) < bound(mode));
    }
    {  // neither axis contiguous: every element goes its own way
      const Tensor a = test::random_cpu({2, 18, 50}, dt, 55).to(kCuda).slice(1, 0, 18, 2).slice(2, 0, 50, 2);
      const Tensor b = test::random_cpu({2, 25, 60}, dt, 56).to(kCuda).slice(2, 0, 60, 3);
      REQUIRE((a.strides()[2] != 1 && a.strides()[1] != 1 && b.strides()[2] != 1 && b.strides()[1] != 1));
      CHECK(max_error(bmm_on_cuda(a, b), reference(a, b)) < bound(mode));
    }
  }
}

TEST_CASE("mma_gemm on aligned operands (cp.async only; two blocks per SM for 16-bit large tiles)",
          "[cuda][matmul][mma]") {
  HG_REQUIRE_CUDA();
  cuda::ScopedF32Matmul use(cuda::F32Matmul::accurate);
  const int64_t B = 2, M = 131, K = 40, N = 75;
  const auto aligned = [](const Tensor& t, int64_t r_axis, int64_t rows, int64_t k_axis, int64_t k) {
    return cuda::operand_slow_path(reinterpret_cast<uintptr_t>(t.data_ptr()), dtype_size(t.dtype()), t.strides()[0],
                                   t.strides()[r_axis], rows, t.strides()[k_axis], k) == nullptr;
  };
  for (const GemmMode mode : kModes)
    for (const bool a_t : {false, true})
      for (const bool b_t : {false, true}) {
        INFO(name(mode) << (a_t ? " a^T" : " a") << (b_t ? " b^T" : " b"));
        const DType dt = input_dtype(mode);
        // Lines padded to whole 16-byte chunks and narrowed: every line starts aligned, and
        // lines along M (131) or N (75) end in a partial chunk, zero-filled by cp.async.
        const Tensor a0 = test::random_cpu(a_t ? Shape{B, K, 136} : Shape{B, M, K}, dt, 90 + a_t);
        const Tensor b0 = test::random_cpu(b_t ? Shape{B, N, K} : Shape{B, K, 80}, dt, 92 + b_t);
        const Tensor a = a_t ? a0.to(kCuda).narrow(2, 0, M).transpose(1, 2) : a0.to(kCuda);
        const Tensor b = b_t ? b0.to(kCuda).transpose(1, 2) : b0.to(kCuda).narrow(2, 0, N);
        REQUIRE(aligned(a, 1, M, 2, K));
        REQUIRE(aligned(b, 2, N, 1, K));
        const Reference r = reference(a, b);
        for (const GemmTile tile : {GemmTile::small, GemmTile::large})
          CHECK(max_error(engine(tile, mode, a, b, dt), r) < bound(mode));
        CHECK(max_error(bmm_on_cuda(a, b), r) < bound(mode));
      }
}

TEST_CASE("mma_gemm's grouped block order covers grids of more than one band", "[cuda][matmul][mma]") {
  HG_REQUIRE_CUDA();
  // Bands of 8 M tiles: 10 x 4 small tiles (a second band 2 tiles high), 9 x 3 large ones.
  const struct {
    GemmTile tile;
    int64_t M, N;
  } grids[] = {{GemmTile::small, 600, 200}, {GemmTile::large, 1100, 260}};
  for (const auto& g : grids)
    for (const GemmMode mode : {GemmMode::f16, GemmMode::tf32x3}) {
      INFO(name(mode) << (g.tile == GemmTile::small ? " small" : " large") << " M=" << g.M << " N=" << g.N);
      const DType dt = input_dtype(mode);
      const Tensor a = test::random_cpu({1, g.M, 16}, dt, 95), b = test::random_cpu({1, 16, g.N}, dt, 96);
      CHECK(max_error(engine(g.tile, mode, a.to(kCuda), b.to(kCuda), dt), reference(a, b)) < bound(mode));
    }
}

TEST_CASE("mma_gemm's epilogue: alpha, bias, ReLU and each output dtype, rounded once", "[cuda][matmul][mma]") {
  HG_REQUIRE_CUDA();
  const Tensor a = test::random_cpu({2, 45, 38}, f16, 61), b = test::random_cpu({2, 38, 70}, f16, 62);
  const Reference r = reference(a, b);
  for (const DType out : {f16, bf16, f32})
    for (const GemmTile tile : {GemmTile::small, GemmTile::large}) {
      INFO(dtype_name(out) << (tile == GemmTile::small ? " small" : " large"));
      const Tensor bias = test::random_cpu({70}, out, 63).to(kCuda);
      const double tol = out == bf16 ? 5e-3 : out == f16 ? 1e-3 : 1e-6;
      CHECK(max_error(engine(tile, GemmMode::f16, a.to(kCuda), b.to(kCuda), out, bias, 0.75f, false), r, bias, 0.75) < tol);
      const Tensor y = engine(tile, GemmMode::f16, a.to(kCuda), b.to(kCuda), out, bias, -1.5f, true);
      CHECK(max_error(y, r, bias, -1.5, true) < tol);
      const std::vector<double> ys = y.to_vector<double>();
      CHECK(*std::min_element(ys.begin(), ys.end()) == 0.0);  // ReLU clipped something
      CHECK(max_error(engine(tile, GemmMode::f16, a.to(kCuda), b.to(kCuda), out), r) < tol);
    }
}

TEST_CASE("linear_stub adds the bias before the one rounding, on every device", "[cuda][matmul][mma][linear]") {
  for (const Device dev : test::devices())
    for (const DType dt : test::kFloatingDtypes)
      for (const bool with_bias : {true, false}) {
        INFO(test::device_label(dev) << " " << dtype_name(dt) << (with_bias ? " with bias" : " no bias"));
        // x and w are read through views: x transposed, w with an odd leading dimension.
        const Tensor x = test::random_cpu({40, 33}, dt, 71).to(dev).transpose(0, 1);
        const Tensor w = test::random_cpu({18, 41}, dt, 72).to(dev).narrow(1, 1, 40);
        const Tensor bias = with_bias ? test::random_cpu({18}, dt, 73).to(dev) : Tensor();
        Tensor out = test::poisoned({33, 18}, dt, dev);
        linear_stub(dev, x, w, bias, out);
        const Reference r = reference(x.unsqueeze(0), w.transpose(0, 1).unsqueeze(0));
        const double tol = dt == bf16 ? 5e-3 : dt == f16 ? 1e-3 : dt == f32 ? 1e-5 : 1e-12;
        CHECK(max_error(out.unsqueeze(0), r, bias) < tol);
      }
}

TEST_CASE("linear on cuda equals the CPU's, forward and gradients, for flattened inputs", "[cuda][matmul][mma][linear]") {
  HG_REQUIRE_CUDA();
  for (const DType dt : test::kFloatingDtypes) {
    INFO(dtype_name(dt));
    const Tensor x0 = test::random_cpu({2, 3, 9, 13}, dt, 81), w0 = test::random_cpu({6, 13}, dt, 82);
    const Tensor b0 = test::random_cpu({6}, dt, 83), g0 = test::random_cpu({2, 3, 9, 6}, dt, 84);
    Tensor outs[2], grads[2][3];
    for (int d = 0; d < 2; ++d) {
      const Device dev = d == 0 ? Device::cpu() : kCuda;
      Tensor x = x0.to(dev).detach(), w = w0.to(dev).detach(), b = b0.to(dev).detach();
      x.set_requires_grad();
      w.set_requires_grad();
      b.set_requires_grad();
      outs[d] = linear(x, w, b);
      outs[d].backward(g0.to(dev));
      grads[d][0] = x.grad(), grads[d][1] = w.grad(), grads[d][2] = b.grad();
    }
    REQUIRE(outs[1].shape() == Shape{2, 3, 9, 6});
    test::require_close(outs[1], outs[0]);
    for (int i = 0; i < 3; ++i) test::require_close(grads[1][i], grads[0][i]);
  }
}
