// The CPU convolution weight gradient on the U-Net's layer shapes (segbench's cpu profile:
// width 8, depth 4, batch 16, 64x64, NHWC), ms and GFLOP/s per shape and dtype: where
// conv2d_wgrad's time goes, layer by layer.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>

#include "bench/best_seconds.h"
#include "halfgrad.h"
#include "ops/conv2d_kernels.h"

using namespace hg;

namespace {

struct Layer {
  int64_t hw, cin, cout, k;  // image side, channels in/out, kernel side
};

const Layer kLayers[] = {{64, 1, 8, 3},   {64, 8, 8, 3},   {32, 8, 16, 3},  {32, 16, 16, 3}, {16, 16, 32, 3},
                         {16, 32, 32, 3}, {8, 32, 64, 3},  {8, 64, 64, 3},  {4, 64, 128, 3}, {4, 128, 128, 3},
                         {8, 128, 64, 3}, {16, 64, 32, 3}, {32, 32, 16, 3}, {64, 16, 8, 3},  {8, 128, 64, 1},
                         {16, 64, 32, 1}, {32, 32, 16, 1}, {64, 16, 8, 1}};

std::string layer_name(const Layer& l) {
  char name[40];
  std::snprintf(name, sizeof name, "%lldx%lld %lld->%lld @%lld", static_cast<long long>(l.k), static_cast<long long>(l.k),
                static_cast<long long>(l.cin), static_cast<long long>(l.cout), static_cast<long long>(l.hw));
  return name;
}

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: conv_wgrad [--help] [FILTER]\n"
               "  times the CPU conv2d weight gradient on each U-Net layer shape, in f32, bf16 and f16;\n"
               "  FILTER runs only the layers whose name contains it (e.g. '3x3 8->16'); threads: OMP_NUM_THREADS\n");
}

}  // namespace

int main(int argc, char** argv) {
  const char* only = nullptr;  // run only layers whose name contains this
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      usage(stdout);
      return 0;
    }
    if (argv[i][0] == '-' || only) {
      std::fprintf(stderr, "conv_wgrad: %s '%s'\n", argv[i][0] == '-' ? "unknown flag" : "more than one filter", argv[i]);
      usage(stderr);
      return 2;
    }
    only = argv[i];
  }
  if (only && std::none_of(std::begin(kLayers), std::end(kLayers),
                           [&](const Layer& l) { return layer_name(l).find(only) != std::string::npos; })) {
    std::fprintf(stderr, "conv_wgrad: no layer name contains '%s'; the layers are:\n", only);
    for (const Layer& l : kLayers) std::fprintf(stderr, "  %s\n", layer_name(l).c_str());
    return 2;
  }
  NoGrad no_grad;
  const int64_t N = 16;
  const Device cpu = Device::cpu();
  std::printf("conv2d weight gradient, U-Net w8 d4 b16 64^2, %d threads\n", num_threads());
  std::printf("%-18s %-5s %9s %9s\n", "layer", "type", "ms", "GFLOP/s");
  for (DType dt : {f32, bf16, f16}) {
    double total = 0;
    for (const Layer& l : kLayers) {
      const std::string name = layer_name(l);
      if (only && name.find(only) == std::string::npos) continue;
      const Conv2dOptions p{{1, 1}, {l.k / 2, l.k / 2}, {1, 1}, 1};
      Generator g(3);
      Tensor x = randn({N, l.hw, l.hw, l.cin}, {dt}, &g), gy = randn({N, l.hw, l.hw, l.cout}, {dt}, &g);
      Tensor gw = empty({l.cout, l.k, l.k, l.cin}, {dt});
      const double s = bench::best_seconds([&] { conv2d_wgrad_stub(cpu, gy, x, gw, p); }, 0.2, 40);
      const double flops = 2.0 * N * l.hw * l.hw * l.cout * l.k * l.k * l.cin;
      total += s;
      std::printf("%-18s %-5s %9.3f %9.1f\n", name.c_str(), dtype_name(dt), s * 1e3, flops / s * 1e-9);
    }
    std::printf("%-18s %-5s %9.3f\n", "all layers", dtype_name(dt), total * 1e3);
  }
  return 0;
}
