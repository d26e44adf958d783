// hopper_gemm (cuda/hopper_gemm.h): its tile walk and wgmma descriptor bits on the host in
// every CUDA build; on an sm_90 GPU, or the emulation's sm_90 model, the kernel against the
// CPU's f64 bmm of the same rounded inputs with the epilogue applied in f64, outputs poisoned
// first. Elsewhere (no GPU, a pre-Hopper GPU) the kernel tests skip with the reason.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <tuple>

#include "cuda/hopper_gemm.h"
#include "cuda/kernel_log.h"
#include "cuda/runtime.h"
#include "cuda/primitives/wgmma_desc.h"
#include "ops/matmul_kernels.h"
#include "tests/cuda/emulated_sm90.h"
#include "tests/cuda/op_compare.h"
#include "tests/devices.h"

using namespace hg;
using hg::test::kCuda;

TEST_CASE("hopper_tile visits every output tile once, in bands of 8 tile rows", "[cuda][hopper]") {
  for (const auto& [tiles_m, tiles_n, batches] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {3, 5, 2},
                                                 {17, 4, 1}, {8, 9, 3}, {20, 1, 2}}) {
    INFO("tiles " << tiles_m << " x " << tiles_n << ", " << batches << " batch(es)");
    std::set<std::tuple<int64_t, int64_t, int64_t>> seen;
    for (int64_t t = 0; t < batches * tiles_m * tiles_n; ++t) {
      const cuda::HopperTile tile = cuda::hopper_tile(t, tiles_m, tiles_n);
      REQUIRE(tile.z == t / (tiles_m * tiles_n));
      REQUIRE((tile.tile_m >= 0 && tile.tile_m < tiles_m && tile.tile_n >= 0 && tile.tile_n < tiles_n));
      seen.insert({tile.z, tile.tile_m, tile.tile_n});
    }
    REQUIRE(static_cast<int64_t>(seen.size()) == batches * tiles_m * tiles_n);
  }
  // Consecutive tiles walk down a band of 8 tile rows before moving one tile column right.
  for (int64_t t = 0; t < 8; ++t) {
    const cuda::HopperTile tile = cuda::hopper_tile(t, 17, 4), next = cuda::hopper_tile(t + 8, 17, 4);
    REQUIRE((tile.tile_m == t && tile.tile_n == 0 && next.tile_m == t && next.tile_n == 1));
  }
  // The last band of 17 rows has one row: it walks along the columns.
  REQUIRE(cuda::hopper_tile(16 * 4 + 2, 17, 4).tile_m == 16);
  REQUIRE(cuda::hopper_tile(16 * 4 + 2, 17, 4).tile_n == 2);
}

TEST_CASE("hopper_tile_n takes 256-wide tiles for wide products that still fill the GPU", "[cuda][hopper]") {
  REQUIRE(cuda::hopper_tile_n(1, 8192, 8192, 132) == 256);  // 64 x 32 = 2048 wide tiles on an H100/H200
  REQUIRE(cuda::hopper_tile_n(1, 8192, 255, 132) == 128);   // narrower than one wide tile
  REQUIRE(cuda::hopper_tile_n(1, 1024, 768, 132) == 128);   // 8 x 3 = 24 wide tiles would idle 108 SMs
  REQUIRE(cuda::hopper_tile_n(6, 1024, 768, 132) == 256);   // 6 x 24 = 144 wide tiles: every SM gets one
  REQUIRE(cuda::hopper_tile_n(4, 1024, 768, 2) == 256);     // the emulation's 2 SMs
  REQUIRE(cuda::hopper_tile_n(1, 128, 256, 1) == 256);      // one tile, one SM
}

TEST_CASE("wgmma descriptors pack the PTX ISA's fields", "[cuda][hopper]") {
  // Start 0x400 >> 4 in bits 0-13, LBO 16 >> 4 in bits 16-29, SBO 1024 >> 4 in bits 32-45,
  // swizzle mode 1 (128B) in bits 62-63, worked out by hand from the ISA's table.
  REQUIRE(cuda::wgmma_kmajor_sw128_descriptor(0x400, 0) == 0x4000004000010040ull);
  REQUIRE(cuda::wgmma_kmajor_sw128_descriptor(0x400, 3) == 0x4000004000010046ull);  // + 3 x 32 bytes
  REQUIRE(cuda::wgmma_descriptor(0x3fff0, 0x20, 0x40, cuda::WgmmaSwizzle::b32, 5) ==
          (0x3fffull | 2ull << 16 | 4ull << 32 | 5ull << 49 | 3ull << 62));
}

namespace {

struct Epilogue {
  float alpha;
  bool bias;
  bool relu;
};

// out = relu?(alpha * ref + bias[n]) in f64, rounded once to dt (bias as stored, widened).
Tensor apply_epilogue(const Tensor& ref64, const Epilogue& e, const Tensor& bias, DType dt) {
  Tensor want = empty(ref64.shape(), {f64, Device::cpu()});
  const Tensor b64 = e.bias ? bias.to(f64).contiguous() : Tensor();
  const int64_t n = ref64.size(2), total = ref64.numel();
  const double* r = ref64.data<double>();
  double* w = want.data<double>();
  for (int64_t i = 0; i < total; ++i) {
    double v = static_cast<double>(e.alpha) * r[i] + (e.bias ? b64.data<double>()[i % n] : 0.0);
    w[i] = e.relu ? std::max(v, 0.0) : v;
  }
  return want.to(dt);
}

}  // namespace

TEST_CASE("hopper_gemm equals the CPU's f64 product with the epilogue", "[cuda][hopper][matmul]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  struct Case {
    int64_t B, M, N, K;
    bool broadcast_b;
    int64_t pad;  // extra elements per row of A and B (lda = ldb = K + pad)
  };
  // K = 1000: 16 k-blocks go round the stage ring. On the emulation's 2 SMs every case of
  // more than two tiles has CTAs take several; the last case (192 tiles) does that on a
  // GPU's 132, and only runs there (it is most of this test's time under the emulation).
  const Case cases[] = {{1, 128, 128, 64, false, 0},   {1, 256, 384, 512, false, 0}, {2, 200, 136, 72, false, 0},
                        {3, 64, 72, 200, false, 0},    {2, 136, 260, 1000, true, 0}, {1, 129, 1000, 136, false, 8},
                        {4, 1024, 768, 256, false, 0}};
  const Epilogue epilogues[] = {{1.0f, false, false}, {0.5f, true, true}, {-2.0f, true, false}};
  cudaDeviceProp prop{};
  REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
  const int sms = prop.multiProcessorCount;  // the tile width depends on it (hopper_tile_n)
  uint64_t seed = 100;
  // Under AddressSanitizer (CI's sanitizer job, the emulation ~15x slower than in the release
  // suite, where every combination runs) each case runs f16 only, every layout with one
  // epilogue and K/K with the other output type: what ASan and the emulation's race and init
  // checks look at (the tile walk, TMA loads and both store widths) is all there; the epilogue
  // arithmetic and bf16 rounding are the release suite's.
#if defined(__SANITIZE_ADDRESS__)
  constexpr bool kSanitized = true;
#else
  constexpr bool kSanitized = false;
#endif
  for (const Case& c : cases) {
    if (cuda::is_emulated() && c.M * c.N * c.K > (int64_t{1} << 28)) continue;
    for (DType ab : {f16, bf16}) {
      if (kSanitized && ab == bf16) continue;
      // A given K-contiguous (row-major) or M-contiguous (the transpose of a row-major K x M
      // matrix), B K-contiguous (B^T rows, the TN layout) or N-contiguous (a row-major K x N
      // matrix); MN-contiguous rows are padded to a multiple of 8 elements as TMA needs. The
      // K/K layout takes every epilogue and output type, the others one each: the layout is
      // what they test.
      for (const int layout : {0, 1, 2, 3}) {
        const bool m_major = layout & 2, n_major = layout & 1;
        const int64_t ld = c.K + c.pad, bb = c.broadcast_b ? 1 : c.B;
        const int64_t lda = m_major ? (c.M + 7) / 8 * 8 + c.pad : ld;
        const int64_t ldb = n_major ? (c.N + 7) / 8 * 8 + c.pad : ld;
        const Tensor a_wide = test::random_cpu(m_major ? Shape{c.B, c.K, lda} : Shape{c.B, c.M, ld}, ab, ++seed);
        const Tensor b_wide = test::random_cpu(n_major ? Shape{bb, c.K, ldb} : Shape{bb, c.N, ld}, ab, ++seed);
        const Tensor a = m_major ? a_wide.narrow(2, 0, c.M).transpose(1, 2) : a_wide.narrow(2, 0, c.K);
        const Tensor bt = n_major ? b_wide.narrow(2, 0, c.N).transpose(1, 2) : b_wide.narrow(2, 0, c.K);
        Tensor ref64 = empty({c.B, c.M, c.N}, {f64, Device::cpu()});
        bmm_stub(Device::cpu(), a.to(f64), bt.to(f64).transpose(1, 2).expand({c.B, c.K, c.N}), ref64);
        const Tensor a_dev = a_wide.to(kCuda), b_dev = b_wide.to(kCuda);
        for (DType out_dt : {ab, f32}) {
          for (const Epilogue& e : epilogues) {
            if (layout != 0 && (out_dt != ab || &e != &epilogues[1])) continue;
            if (kSanitized && layout == 0 && &e != &epilogues[out_dt == ab ? 1 : 0]) continue;
            const DType bias_dt = e.alpha < 0 ? ab : f32;
            const Tensor bias = test::random_cpu({c.N}, bias_dt, ++seed), bias_dev = bias.to(kCuda);
            INFO(dtype_name(ab) << " -> " << dtype_name(out_dt) << " B=" << c.B << " M=" << c.M << " N=" << c.N
                                << " K=" << c.K << " lda=" << lda << " ldb=" << ldb << (m_major ? " A M-major" : "")
                                << (n_major ? " B N-major" : "") << (c.broadcast_b ? " (B broadcast)" : "")
                                << " alpha=" << e.alpha << (e.bias ? " bias " : " ")
                                << (e.bias ? dtype_name(bias_dt) : "") << (e.relu ? " relu" : ""));
            Tensor out = test::poisoned({c.B, c.M, c.N}, out_dt, kCuda);
            cuda::HopperGemm g;
            g.batches = c.B, g.M = c.M, g.N = c.N, g.K = c.K;
            g.ab_dtype = ab;
            g.a = a_dev.data_ptr(), g.lda = lda, g.a_m_major = m_major;
            g.batch_stride_a = (m_major ? c.K : c.M) * lda;
            g.b = b_dev.data_ptr(), g.ldb = ldb, g.b_n_major = n_major;
            g.batch_stride_b = c.broadcast_b ? 0 : (n_major ? c.K : c.N) * ldb;
            g.c = out.data_ptr(), g.c_dtype = out_dt, g.ldc = c.N, g.batch_stride_c = c.M * c.N;
            g.alpha = e.alpha, g.relu = e.relu;
            if (e.bias) g.bias = bias_dev.data_ptr(), g.bias_dtype = bias_dt;
            REQUIRE(cuda::hopper_gemm_refusal(g) == nullptr);
            // TMA stores the output where its rows (and batches) are whole multiples of 16 bytes.
            const auto es = static_cast<int64_t>(dtype_size(out_dt));
            const bool tma_store = c.N * es % 16 == 0 && (c.B == 1 || c.M * c.N * es % 16 == 0);
            const int tile_n = cuda::hopper_tile_n(c.B, c.M, c.N, sms);
            const std::string want_kernel = "hopper_gemm (128x" + std::to_string(tile_n) + ", A " +
                                            (m_major ? "M" : "K") + "-major, B " + (n_major ? "N" : "K") +
                                            "-major, " + (tma_store ? "TMA" : "direct") + " stores)";
            const cuda::KernelLog log;
            REQUIRE(cuda::hopper_gemm(g));
            REQUIRE(log.summary() == want_kernel);
            test::require_close(out, apply_epilogue(ref64, e, bias, out_dt));
          }
        }
      }
    }
  }
}

TEST_CASE("hopper_gemm declines what TMA cannot load and leaves the output alone", "[cuda][hopper]") {
  HG_REQUIRE_CUDA();
  // lda = 100 elements = 200 bytes, not a multiple of 16: refused on every device.
  const Tensor a = test::random_cpu({1, 128, 100}, f16, 1).to(kCuda), b = test::random_cpu({1, 128, 100}, f16, 2).to(kCuda);
  Tensor out = test::poisoned({1, 128, 128}, f16, kCuda);
  cuda::HopperGemm g;
  g.M = 128, g.N = 128, g.K = 100;
  g.a = a.data_ptr(), g.lda = 100, g.b = b.data_ptr(), g.ldb = 100;
  g.c = out.data_ptr(), g.ldc = 128;
  REQUIRE(cuda::hopper_gemm_refusal(g) != nullptr);
  REQUIRE_FALSE(cuda::hopper_gemm(g));
  const Tensor host = out.to(Device::cpu()).to(f64);
  for (int64_t i = 0; i < host.numel(); ++i) REQUIRE(std::isnan(host.data<double>()[i]));
  // f32 operands are not the kernel's either.
  g.ab_dtype = f32, g.lda = g.ldb = 104;
  REQUIRE_FALSE(cuda::hopper_gemm(g));
  // Nor is an output of the other 16-bit type: it writes f32 or the operands' dtype.
  g.ab_dtype = f16, g.c_dtype = bf16;
  REQUIRE_THAT(std::string(cuda::hopper_gemm_refusal(g)), Catch::Matchers::Contains("C must be f32 or A and B's dtype"));
}

TEST_CASE("hopper_gemm rejects arguments that are wrong for any GEMM", "[cuda][hopper]") {
  HG_REQUIRE_CUDA();
  const test::EmulatedSm90 sm90;
  if (const char* why = cuda::hopper_gemm_device_refusal(0)) HG_SKIP(std::string("hopper_gemm cannot run: ") + why);
  const Tensor a = test::random_cpu({1, 128, 128}, f16, 1).to(kCuda);
  Tensor out = test::poisoned({1, 128, 128}, f16, kCuda);
  cuda::HopperGemm g;
  g.M = 128, g.N = 128, g.K = 128;
  g.a = a.data_ptr(), g.lda = 128, g.b = a.data_ptr(), g.ldb = 128, g.c = out.data_ptr(), g.ldc = 64;
  REQUIRE_THROWS_WITH(cuda::hopper_gemm(g), Catch::Matchers::Contains("ldc >= N"));
}
