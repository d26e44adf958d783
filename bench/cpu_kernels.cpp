// CPU kernel throughput: GEMM through hg::matmul (the GEMM engine) and the U-Net's 3x3
// convolutions (forward, input gradient, weight gradient) in f32, f16 and bf16, each next to
// raw Eigen f32 GEMM on the same M x N x K and to this machine's measured FMA peak.
#include <Eigen/Core>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "bench/best_seconds.h"
#include "framework/cpu/isa.h"
#include "halfgrad.h"
#include "ops/conv2d_kernels.h"
#include "ops/cpu/gemm/sources.h"

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#endif

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("avx512f")
namespace {
// 10 independent chains of 16-wide FMAs, `iters` rounds (timed by the caller: no library
// code in this AVX-512 region). Run only when isa() >= avx512.
float avx512_fma_burst(int64_t iters) {
  __m512 acc[10];
  for (int i = 0; i < 10; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  for (int64_t k = 0; k < iters; ++k)
    for (int i = 0; i < 10; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  alignas(64) float lanes[16];
  float sink = 0;
  for (int i = 0; i < 10; ++i) {
    _mm512_store_ps(lanes, acc[i]);
    sink += lanes[i];
  }
  return sink;
}
}  // namespace
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("amx-tile,amx-bf16")
namespace {
// 4 independent TDPBF16PS chains (accumulator tiles 0-3 from A tiles 4, 5 and B tiles 6,
// 7, the GEMM kernel's tile assignment, no memory traffic), `iters` rounds of 4. Run only
// where isa() == amx (the OS granted tile data). Each instruction: 16 x 16 x 32 multiply-adds.
void amx_dot_burst(int64_t iters) {
  struct alignas(64) Config {
    uint8_t palette = 1, start_row = 0, reserved[14] = {};
    uint16_t colsb[16] = {};
    uint8_t rows[16] = {};
  } cfg;
  for (int t = 0; t < 8; ++t) cfg.colsb[t] = 64, cfg.rows[t] = 16;
  alignas(64) static uint16_t ones[16 * 32];
  alignas(64) static float out[16 * 16];
  for (uint16_t& x : ones) x = 0x3F80;  // 1.0
  _tile_loadconfig(&cfg);
  _tile_loadd(4, ones, 64);
  _tile_loadd(5, ones, 64);
  _tile_loadd(6, ones, 64);
  _tile_loadd(7, ones, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  for (int64_t k = 0; k < iters; ++k) {  // (the tile intrinsics are statements, one per line)
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    _tile_dpbf16ps(2, 5, 6);
    _tile_dpbf16ps(3, 5, 7);
  }
  _tile_stored(0, out, 64);
  _tile_release();
}
}  // namespace
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bf16")
namespace {
// 12 independent chains of 16-wide vdpbf16ps (two products each), `iters` rounds. Run only
// where the CPU has AVX512_BF16.
float avx512_bf16_dot_burst(int64_t iters) {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(0.001f * static_cast<float>(i));
  const __m512bh m = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3F80)), a = reinterpret_cast<__m512bh>(_mm512_set1_epi16(0x3400));
  for (int64_t k = 0; k < iters; ++k)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_dpbf16_ps(acc[i], m, a);
  alignas(64) float lanes[16];
  float sink = 0;
  for (int i = 0; i < 12; ++i) {
    _mm512_store_ps(lanes, acc[i]);
    sink += lanes[i];
  }
  return sink;
}
}  // namespace
#pragma GCC pop_options
#endif

using namespace hg;
namespace gemm = hg::cpu::gemm;
using hg::bench::best_seconds;

namespace {

using RowMatf = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

// Raw Eigen f32 GEMM, C[M, N] = A[M, K] B[K, N], row-major as the conv kernels use it.
double eigen_gflops(int64_t M, int64_t N, int64_t K) {
  RowMatf a = RowMatf::Random(M, K), b = RowMatf::Random(K, N), c(M, N);
  const double s = best_seconds([&] { c.noalias() = a * b; });
  return 2.0 * M * N * K / s * 1e-9;
}

// The f32 FMA peak of `threads` cores: tight loops of independent 8-wide FMAs (10 chains,
// enough to cover the FMA latency on two pipes); the best of 30 short bursts per thread,
// GFLOP/s summed over the threads.
double fma_peak_gflops(int threads) {
#if defined(__AVX2__) && defined(__FMA__)
  constexpr int64_t iters = 200'000;
  double total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    __m256 acc[10];
    for (int i = 0; i < 10; ++i) acc[i] = _mm256_set1_ps(0.001f * static_cast<float>(i + omp_get_thread_num()));
    const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    double best = 1e30;
    for (int burst = 0; burst < 30; ++burst) {
      const auto t0 = std::chrono::steady_clock::now();
      for (int64_t k = 0; k < iters; ++k)
        for (int i = 0; i < 10; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    float sink = 0;
    for (int i = 0; i < 10; ++i) sink += _mm256_cvtss_f32(acc[i]);
    if (sink == 12345.0f) std::printf(" ");  // keeps the loop alive
    total += 2.0 * 8 * 10 * static_cast<double>(iters) / best * 1e-9;
  }
  return total;
#else
  (void)threads;
  return 0;
#endif
}

// The AVX-512 f32 FMA peak of one core (0 where this CPU lacks it).
double avx512_peak_gflops() {
#if defined(__x86_64__)
  if (static_cast<int>(cpu::best_isa()) < static_cast<int>(cpu::Isa::avx512)) return 0;
  constexpr int64_t iters = 200'000;
  double best = 1e30;
  for (int burst = 0; burst < 30; ++burst) {
    const auto t0 = std::chrono::steady_clock::now();
    if (avx512_fma_burst(iters) == 12345.0f) std::printf(" ");  // keeps the loop alive
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * 16 * 10 * static_cast<double>(iters) / best * 1e-9;
#else
  return 0;
#endif
}

// The vdpbf16ps peak of one core in GFLOP/s (32 multiply-adds per instruction; 0 where the
// CPU lacks AVX512_BF16).
double avx512_bf16_peak_gflops() {
#if defined(__x86_64__)
  if (!cpu::features().avx512_bf16) return 0;
  constexpr int64_t iters = 200'000;
  double best = 1e30;
  for (int burst = 0; burst < 30; ++burst) {
    const auto t0 = std::chrono::steady_clock::now();
    if (avx512_bf16_dot_burst(iters) == 12345.0f) std::printf(" ");
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * 32 * 12 * static_cast<double>(iters) / best * 1e-9;
#else
  return 0;
#endif
}

// The AMX bf16 peak of one core in GFLOP/s (0 where the path is not available).
double amx_bf16_peak_gflops() {
#if defined(__x86_64__)
  if (cpu::best_isa() != cpu::Isa::amx) return 0;
  constexpr int64_t iters = 20'000;
  double best = 1e30;
  for (int burst = 0; burst < 30; ++burst) {
    const auto t0 = std::chrono::steady_clock::now();
    amx_dot_burst(iters);
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 2.0 * 16 * 16 * 32 * 4 * static_cast<double>(iters) / best * 1e-9;
#else
  return 0;
#endif
}

// One micro-kernel path on one thread: n^3 GEMM of T operands through the engine with that
// kernel forced (packing and epilogue included), GFLOP/s.
template <class T>
double kernel_gflops(const gemm::Kernel<float>& k, int64_t n) {
  Generator g(3);
  const Tensor a = randn({n, n}, {dtype_v<T>}, &g), b = randn({n, n}, {dtype_v<T>}, &g), c = empty({n, n}, {dtype_v<T>});
  const gemm::Matrix<T> sa{a.data<T>(), n, 1}, sb{b.data<T>(), n, 1};
  const gemm::Output o{c.data<T>(), dtype_v<T>, 1, n, 0, 0, n, 1};
  const double s = best_seconds([&] { gemm::run<float>(n, n, n, sa, sb, o, gemm::Epilogue<float>{}, 1, &k); });
  return 2.0 * n * n * n / s * 1e-9;
}

// A row per micro-kernel path: GFLOP/s against the f32 FMA peak (AVX2's for the AVX2
// kernel, AVX-512's for the others, as issue 15's goals state them), or why it cannot run
// here; the AMX kernels also against the measured AMX bf16 peak.
void kernel_path_rows(double peak_avx2, double peak_avx512) {
  const int64_t n = 1024;
  std::printf("GEMM micro-kernel paths, 1 thread, %lld^3, engine with the kernel forced; f32 FMA peak AVX2 %.1f, "
              "AVX-512 %s GFLOP/s\n",
              static_cast<long long>(n), peak_avx2, peak_avx512 > 0 ? std::to_string(peak_avx512).c_str() : "n/a");
  struct Path {
    const gemm::Kernel<float>& k;
    DType dt;
    cpu::Isa needs;
    const char* feature;
    double peak;
    bool extra = true;  // a feature beyond the path's (AVX512_BF16)
  };
  const double peak_dot = avx512_bf16_peak_gflops();
  if (peak_dot > 0)
    std::printf("  vdpbf16ps peak %.1f GFLOP/s on 1 core (%.2fx the AVX-512 f32 FMA peak; the engine's own probe: "
                "%.2fx); bf16 GEMMs here take: %s\n",
                peak_dot, peak_dot / peak_avx512, gemm::avx512_bf16_dot_vs_fma(),
                gemm::kernel_for(gemm::Operands::bf16).name);
  const double peak_amx = amx_bf16_peak_gflops();
  if (peak_amx > 0)
    std::printf("  AMX bf16 peak %.1f GFLOP/s on 1 core (TDPBF16PS, %.2fx the AVX-512 f32 FMA peak)\n", peak_amx,
                peak_amx / peak_avx512);
  for (const Path& p : {Path{gemm::avx2_kernel(), f32, cpu::Isa::avx2, "AVX2+FMA", peak_avx2},
                        Path{gemm::avx512_kernel(), f32, cpu::Isa::avx512, "AVX-512", peak_avx512},
                        Path{gemm::avx512_wide_kernel(), f32, cpu::Isa::avx512, "AVX-512", peak_avx512},
                        Path{gemm::avx512_bf16_kernel(), bf16, cpu::Isa::avx512, "AVX512_BF16", peak_avx512,
                             cpu::features().avx512_bf16},
                        Path{gemm::amx_bf16_kernel(), bf16, cpu::Isa::amx, "AMX-BF16", peak_avx512},
                        Path{gemm::amx_f16_kernel(), f16, cpu::Isa::amx, "AMX-BF16", peak_avx512}}) {
    if (static_cast<int>(cpu::best_isa()) < static_cast<int>(p.needs) || !p.extra) {
      std::printf("  %-30s %-4s not available on this CPU (needs %s)\n", p.k.name, dtype_name(p.dt), p.feature);
      continue;
    }
    const double gf = p.dt == f32 ? kernel_gflops<float>(p.k, n)
                      : p.dt == bf16 ? kernel_gflops<bfloat16>(p.k, n) : kernel_gflops<half>(p.k, n);
    std::printf("  %-30s %-4s %9.1f GFLOP/s = %5.2fx the %s f32 FMA peak", p.k.name, dtype_name(p.dt), gf,
                gf / p.peak, p.needs == cpu::Isa::avx2 ? "AVX2" : "AVX-512");
    if (p.needs == cpu::Isa::amx && peak_amx > 0) std::printf(" = %4.0f%% of the AMX bf16 peak", 100.0 * gf / peak_amx);
    std::printf("\n");
  }
}

struct Row {
  std::string name, pass, dtype;
  double ms, gflops, eigen_gflops;
};

double g_peak = 0;  // the measured FMA peak of all threads

void print_row(const Row& r) {
  std::printf("%-22s %-6s %-4s %9.3f %9.1f %9.1f %7.2f %6.0f%%\n", r.name.c_str(), r.pass.c_str(), r.dtype.c_str(),
              r.ms, r.gflops, r.eigen_gflops, r.gflops / r.eigen_gflops, 100.0 * r.gflops / g_peak);
}

struct Layer {
  int64_t hw, cin, cout;
};

}  // namespace

int main(int argc, char** argv) {
  // It takes no arguments; anything but --help is refused rather than silently ignored.
  const auto is_help = [](const char* a) { return std::strcmp(a, "--help") == 0 || std::strcmp(a, "-h") == 0; };
  const char* usage =
      "usage: cpu_kernels [--help]\n"
      "  GEMM and the U-Net's 3x3 convolutions (forward, input and weight gradient) in f32, f16 and bf16\n"
      "  on the CPU next to Eigen f32 GEMM and the FMA peak: a table, then one JSON line; threads:\n"
      "  OMP_NUM_THREADS\n";
  if (argc == 2 && is_help(argv[1])) {
    std::fputs(usage, stdout);
    return 0;
  }
  if (argc > 1) {
    std::fprintf(stderr, "cpu_kernels: unknown argument '%s' (it takes none)\n%s", argv[is_help(argv[1]) ? 2 : 1], usage);
    return 2;
  }
  NoGrad no_grad;
  std::vector<Row> rows;
  const int threads = num_threads();
  omp_set_num_threads(threads);  // Eigen's reference GEMM uses OpenMP's threads: as many
  const double peak1 = fma_peak_gflops(1);
  g_peak = fma_peak_gflops(threads);
  std::printf("kernel path %s (%s); %d threads; f32 FMA peak %.1f GFLOP/s on 1 core, %.1f on %d\n",
              cpu::isa_name(cpu::isa()), cpu::describe().c_str(), threads, peak1, g_peak, threads);
  kernel_path_rows(peak1, avx512_peak_gflops());
  std::printf("%-22s %-6s %-4s %9s %9s %9s %7s %7s\n", "kernel", "pass", "type", "ms", "GFLOP/s", "Eigen", "ratio",
              "peak");

  for (int64_t n : {256, 1024}) {
    const double ref = eigen_gflops(n, n, n);
    for (DType dt : {f32, f16, bf16}) {
      Generator g(1);
      Tensor a = randn({n, n}, {dt}, &g), b = randn({n, n}, {dt}, &g);
      const double s = best_seconds([&] { matmul(a, b); });
      rows.push_back(
          {"matmul " + std::to_string(n) + "^3", "fwd", dtype_name(dt), s * 1e3, 2.0 * n * n * n / s * 1e-9, ref});
      print_row(rows.back());
    }
  }

  // The convolutions of a width-16, depth-4 U-Net on 64x64 images, batch 8 (3x3, padding 1).
  const int64_t N = 8;
  const Conv2dOptions p{{1, 1}, {1, 1}, {1, 1}, 1};
  for (const Layer& l : {Layer{64, 1, 16}, Layer{64, 16, 16}, Layer{32, 16, 32}, Layer{32, 32, 32}, Layer{16, 32, 64},
                         Layer{8, 64, 128}, Layer{4, 128, 256}}) {
    const int64_t M = N * l.hw * l.hw, RSC = 9 * l.cin;
    const double flops = 2.0 * M * l.cout * RSC;
    const double ref_fwd = eigen_gflops(M, l.cout, RSC), ref_dgrad = eigen_gflops(M, RSC, l.cout),
                 ref_wgrad = eigen_gflops(l.cout, RSC, M);
    const std::string name = std::to_string(l.cin) + "->" + std::to_string(l.cout) + " @" + std::to_string(l.hw) + "^2";
    for (DType dt : {f32, f16, bf16}) {
      Generator g(2);
      Tensor x = randn({N, l.hw, l.hw, l.cin}, {dt}, &g), w = randn({l.cout, 3, 3, l.cin}, {dt}, &g);
      Tensor y = empty({N, l.hw, l.hw, l.cout}, {dt}), gy = randn(y.shape(), {dt}, &g);
      Tensor gx = empty_like(x), gw = empty_like(w);
      const Device cpu = Device::cpu();
      const double sf = best_seconds([&] { conv2d_forward_stub(cpu, x, w, Tensor(), y, p); });
      const double sd = best_seconds([&] { conv2d_dgrad_stub(cpu, gy, w, Tensor(), gx, p); });
      const double sw = best_seconds([&] { conv2d_wgrad_stub(cpu, gy, x, gw, p); });
      for (auto [pass, s, ref] :
           {std::tuple{"fwd", sf, ref_fwd}, std::tuple{"dgrad", sd, ref_dgrad}, std::tuple{"wgrad", sw, ref_wgrad}}) {
        rows.push_back({"conv " + name, pass, dtype_name(dt), s * 1e3, flops / s * 1e-9, ref});
        print_row(rows.back());
      }
    }
  }

  // The goal for reduced precision: f16 convolutions within 1.3x of f32's time.
  double conv_ms[3] = {0, 0, 0};
  for (const Row& r : rows)
    if (r.name.starts_with("conv ")) conv_ms[r.dtype == "f16" ? 1 : r.dtype == "bf16" ? 2 : 0] += r.ms;
  std::printf("all conv passes: f32 %.2f ms, f16 %.2f ms, bf16 %.2f ms, f16/f32 %.2f\n", conv_ms[0], conv_ms[1],
              conv_ms[2], conv_ms[1] / conv_ms[0]);

  std::printf(
      "{\"benchmark\": \"cpu_kernels\", \"isa\": \"%s\", \"threads\": %d, \"fma_peak_gflops_1core\": %.1f, "
      "\"fma_peak_gflops\": %.1f, \"conv_ms_f32\": %.3f, \"conv_ms_f16\": %.3f, \"conv_ms_bf16\": %.3f, "
      "\"results\": [",
      cpu::isa_name(cpu::isa()), threads, peak1, g_peak, conv_ms[0], conv_ms[1], conv_ms[2]);
  for (size_t i = 0; i < rows.size(); ++i)
    std::printf(
        "%s{\"kernel\": \"%s\", \"pass\": \"%s\", \"dtype\": \"%s\", \"ms\": %.4f, \"gflops\": %.2f, "
        "\"eigen_gflops\": %.2f}",
        i ? ", " : "", rows[i].name.c_str(), rows[i].pass.c_str(), rows[i].dtype.c_str(), rows[i].ms, rows[i].gflops,
        rows[i].eigen_gflops);
  std::printf("]}\n");
  return 0;
}
