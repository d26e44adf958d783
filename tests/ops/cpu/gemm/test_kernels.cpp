// Each CPU GEMM micro-kernel path against f64 (the paths this CPU lacks skip visibly), the
// choice of kernel per ISA path and operand format, and the first-use self-check that
// replaces a kernel disagreeing with the AVX2 kernel (forced here with broken kernels).
#include <catch2/catch.hpp>
#include <array>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "framework/cpu/isa.h"
#include "tests/ops/cpu/gemm/reference.h"

using namespace hg;
using namespace hg::cpu;
using namespace hg::test_gemm;

namespace {

struct Path {
  const char* what;
  const gemm::Kernel<float>& kernel;
  Isa needs;
  const char* feature;
  gemm::Operands ops;
  bool extra = true;  // a feature beyond the path's (AVX512_BF16)
};

std::vector<Path> paths() {
  return {{"AVX2 f32", gemm::avx2_kernel(), Isa::avx2, "AVX2+FMA", gemm::Operands::f32},
          {"AVX-512 f32", gemm::avx512_kernel(), Isa::avx512, "AVX-512 F/BW/VL/DQ", gemm::Operands::f32},
          {"AVX-512 f32 8x48", gemm::avx512_wide_kernel(), Isa::avx512, "AVX-512 F/BW/VL/DQ", gemm::Operands::f32},
          {"AVX512_BF16 bf16", gemm::avx512_bf16_kernel(), Isa::avx512, "AVX512_BF16", gemm::Operands::bf16,
           features().avx512_bf16},
          {"AMX bf16", gemm::amx_bf16_kernel(), Isa::amx, "AMX-BF16 (granted by the OS)", gemm::Operands::bf16},
          {"AMX exact f16", gemm::amx_f16_kernel(), Isa::amx, "AMX-BF16 (granted by the OS)", gemm::Operands::f16}};
}

bool runs_here(const Path& p) {
  if (static_cast<int>(best_isa()) >= static_cast<int>(p.needs) && p.extra) return true;
  WARN("SKIPPED: the " << p.what << " GEMM kernel needs " << p.feature << "; this CPU has " << describe());
  return false;
}

// Broken kernels: the AVX2 kernel, then one element off by one ulp per 2^10 of the first;
// and the AVX2 kernel reading f32 subnormal inputs as zero (DAZ).
void off_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  gemm::avx2_kernel().fn(kc, a, b, c, ldc, first, half);
  c[0] = c[0] * (1.0f + 0x1p-10f) + 0x1p-20f;
}

void daz_fn(int64_t kc, const void* a, const void* b, float* c, int64_t ldc, bool first, bool half) {
  thread_local std::vector<float> flushed;
  flushed.assign(static_cast<const float*>(a), static_cast<const float*>(a) + 6 * kc);
  for (float& x : flushed)
    if (std::fpclassify(x) == FP_SUBNORMAL) x = 0;
  gemm::avx2_kernel().fn(kc, flushed.data(), b, c, ldc, first, half);
}

const gemm::Kernel<float> kOff{"off-by-a-bit (test)", 6, 16, off_fn};
const gemm::Kernel<float> kDaz{"flushes subnormals (test)", 6, 16, daz_fn};

}  // namespace

TEST_CASE("gemm kernels: every path this CPU has equals f64 within the f32-accumulation bound",
          "[gemm][isa][numerics]") {
  for (const Path& p : paths()) {
    if (!runs_here(p)) continue;
    if (p.ops == gemm::Operands::f32) check_shapes<float>(p.kernel);
    if (p.ops == gemm::Operands::bf16) check_shapes<bfloat16>(p.kernel);
    if (p.ops == gemm::Operands::f16) check_shapes<half>(p.kernel);
    CHECK(gemm::self_check(p.kernel, p.ops));
  }
}

TEST_CASE("gemm kernels: the path and operand format choose the kernel", "[gemm][isa]") {
  {
    ForceIsa avx2(Isa::avx2);
    for (auto ops : {gemm::Operands::f32, gemm::Operands::bf16, gemm::Operands::f16})
      CHECK(&gemm::kernel_for(ops) == &gemm::avx2_kernel());
  }
  const int failures = gemm::self_check_failures();
  for (const Path& p : paths()) {
    if (p.needs == Isa::avx2 || !runs_here(p)) continue;
    if (&p.kernel == &gemm::avx512_bf16_kernel()) continue;  // chosen by a measurement: test_avx512_bf16.cpp
    if (&p.kernel == &gemm::avx512_wide_kernel()) continue;  // chosen by the product's width: below
    ForceIsa force(p.needs);
    CHECK(&gemm::kernel_for(p.ops) == &p.kernel);
  }
  CHECK(gemm::self_check_failures() == failures);
}

TEST_CASE("gemm kernels: a kernel failing its first-use self-check is replaced by the AVX2 kernel, once",
          "[gemm][isa]") {
  CHECK(gemm::self_check(gemm::avx2_kernel(), gemm::Operands::f32));
  CHECK(gemm::self_check(gemm::avx2_kernel(), gemm::Operands::f16));
  CHECK_FALSE(gemm::self_check(kDaz, gemm::Operands::f32));  // the subnormal row's sums vanish
  const int before = gemm::self_check_failures();
  {
    gemm::OverrideKernel broken(gemm::Operands::f32, kOff);
    CHECK(&gemm::kernel_for(gemm::Operands::f32) == &gemm::avx2_kernel());
    CHECK(&gemm::kernel_for(gemm::Operands::f32) == &gemm::avx2_kernel());
    CHECK(gemm::self_check_failures() == before + 1);  // checked, and warned, once
    // Products through the default kernel choice are right despite the broken kernel.
    check_product(random_operand<float>(20, 30, true, 1), random_operand<float>(30, 30, true, 2), {}, 1.0, false);
  }
  CHECK(gemm::self_check_failures() == before + 1);
}

TEST_CASE("gemm kernels: the 8x48 f32 tile is chosen on Intel cores for 96 columns and more, and gives the 14x32 "
          "tile's bits", "[gemm][isa]") {
  if (static_cast<int>(best_isa()) < static_cast<int>(Isa::avx512)) {
    WARN("SKIPPED: the 8x48 AVX-512 tile needs AVX-512 F/BW/VL/DQ; this CPU has " << describe());
    return;
  }
  ForceIsa force(Isa::avx512);
  CHECK(gemm::wide_tile_pays(128) == features().intel);
  CHECK_FALSE(gemm::wide_tile_pays(64));
  CHECK_FALSE(gemm::wide_tile_pays(0));  // width unknown
  for (auto ops : {gemm::Operands::f32, gemm::Operands::f16}) {
    CHECK(&gemm::kernel_for(ops, 64) == &gemm::avx512_kernel());
    CHECK(&gemm::kernel_for(ops, 0) == &gemm::avx512_kernel());
    CHECK(&gemm::kernel_for(ops, 256) == (features().intel ? &gemm::avx512_wide_kernel() : &gemm::avx512_kernel()));
  }
  {
    ForceIsa avx2(Isa::avx2);
    CHECK(&gemm::kernel_for(gemm::Operands::f32, 256) == &gemm::avx2_kernel());
  }
  // Every element is one fused multiply-add chain in k order whatever the tile and K block:
  // the two tiles agree bit for bit, at 1 and 2 threads, across K blocks of 128 and 256 and
  // column remainders of 1, 16, 32 and 47 (subnormal and overflowing products included).
  for (auto [M, N, K] : {std::array<int64_t, 3>{37, 97, 300}, {150, 64, 129}, {9, 80, 513}, {16, 143, 40}}) {
    auto a = random_operand<float>(M, K, true, static_cast<uint64_t>(M));
    auto b = random_operand<float>(N, K, false, static_cast<uint64_t>(N));
    a.data[0] = 3e38f, b.data[0] = 4.0f;
    for (int64_t k = 0; k < K; ++k) a.data[static_cast<size_t>(K + k)] = 0x1p-140f * static_cast<float>(k % 7);
    for (int threads : {1, 2}) {
      std::vector<float> narrow(static_cast<size_t>(M * N)), wide(narrow.size());
      gemm::run<float>(M, N, K, a.source(), b.source(), gemm::Output{narrow.data(), DType::f32, 1, M, 0, 0, N, 1}, {},
                       threads, &gemm::avx512_kernel());
      gemm::run<float>(M, N, K, a.source(), b.source(), gemm::Output{wide.data(), DType::f32, 1, M, 0, 0, N, 1}, {},
                       threads, &gemm::avx512_wide_kernel());
      INFO("M " << M << " N " << N << " K " << K << " threads " << threads);
      CHECK(std::memcmp(narrow.data(), wide.data(), narrow.size() * sizeof(float)) == 0);
    }
  }
}
