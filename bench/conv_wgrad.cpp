// The CPU convolution weight gradient on the U-Net's layer shapes (segbench's cpu profile:
// width 8, depth 4, batch 16, 64x64, NHWC), ms and GFLOP/s per shape and dtype, beside the
// same layer's forward and input gradient (timed interleaved with it: rounds of one each,
// best of each): the ratio wgrad / forward GFLOP/s is what issue 32's goal (>= 0.75) is about.
// The decoder's 2x2 stride-2 transposed convolutions are rows "2x2s2" (see Layer).

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <optional>
#include <string>
#include <vector>

#include "bench/best_seconds.h"
#include "halfgrad.h"
#include "ops/conv2d_kernels.h"
#include "ops/cpu/conv2d_amx.h"

using namespace hg;

namespace {

// A layer as conv2d sees it: x [N, hw, hw, cin] -> y [N, hw/stride, hw/stride, cout], w [cout, k, k, cin].
// The decoder's ConvTranspose2d(2c -> c, 2x2, stride 2) is the input gradient of the conv
// 2x2 stride 2 c -> 2c on its output (its forward runs conv2d's dgrad, its input gradient
// conv2d's forward): those rows have stride 2, and the bias (of the pass that has one in the
// model: the head's forward, the transposed convolution's dgrad) is added as there.
struct Layer {
  int64_t hw, cin, cout, k, stride = 1;  // image side, channels in/out, kernel side, stride
};

const Layer kLayers[] = {{64, 1, 8, 3},   {64, 8, 8, 3},   {32, 8, 16, 3},   {32, 16, 16, 3},  {16, 16, 32, 3},
                         {16, 32, 32, 3}, {8, 32, 64, 3},  {8, 64, 64, 3},   {4, 64, 128, 3},  {4, 128, 128, 3},
                         {8, 128, 64, 3}, {16, 64, 32, 3}, {32, 32, 16, 3},  {64, 16, 8, 3},   {8, 128, 64, 1},
                         {16, 64, 32, 1}, {32, 32, 16, 1}, {64, 16, 8, 1},   {64, 8, 4, 1},    {8, 64, 128, 2, 2},
                         {16, 32, 64, 2, 2}, {32, 16, 32, 2, 2}, {64, 8, 16, 2, 2}};

// A layer of the U-Net of base width 8 * scale on size x size inputs: the image's one
// channel and the head's 4 classes stay as they are.
Layer scaled(Layer l, int64_t scale, int64_t size) {
  l.cin = l.cin == 1 ? 1 : l.cin * scale, l.cout = l.cout == 4 ? 4 : l.cout * scale;
  l.hw = l.hw * size / 64;
  return l;
}

std::string layer_name(const Layer& l) {
  char name[48];
  std::snprintf(name, sizeof name, "%lldx%lld%s %lld->%lld @%lld", static_cast<long long>(l.k),
                static_cast<long long>(l.k), l.stride == 2 ? "s2" : "", static_cast<long long>(l.cin),
                static_cast<long long>(l.cout), static_cast<long long>(l.hw));
  return name;
}

void usage(std::FILE* to) {
  std::fprintf(to,
               "usage: conv_wgrad [--help] [--dtype f32|bf16|f16] [--width 8|16|32] [--size N] [--compare-tiles] [FILTER]\n"
               "  times the CPU conv2d weight gradient and forward on each U-Net layer shape, in f32, bf16\n"
               "  and f16 (or the one --dtype names); --width 16 / 32: the U-Net of that base width (channels\n"
               "  x2 / x4, batch 8: torch_compare's other configurations); --size N: input images N x N (a\n"
               "  multiple of 16, default 64; torch_compare's w32 runs 128); --compare-tiles: each f16/bf16 layer\n"
               "  also without the direct tile convolution (AMX, or vdpbf16ps), rounds interleaved (row 'off');\n"
               "  FILTER runs only the layers whose name contains it (e.g. '3x3 8->16'); threads: OMP_NUM_THREADS\n");
}

}  // namespace

int main(int argc, char** argv) {
  const char* only = nullptr;  // run only layers whose name contains this
  std::vector<DType> dtypes{f32, bf16, f16};
  int64_t width = 8;
  int64_t size = 64;
  bool compare_tiles = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--width") == 0) {
      const std::string w = i + 1 < argc ? argv[++i] : "";
      if (w != "8" && w != "16" && w != "32") {
        std::fprintf(stderr, "conv_wgrad: --width needs 8, 16 or 32, got '%s'\n", w.c_str());
        return 2;
      }
      width = std::stoi(w);
      continue;
    }
    if (std::strcmp(argv[i], "--size") == 0) {
      const std::string v = i + 1 < argc ? argv[++i] : "";
      char* end = nullptr;
      const long n = std::strtol(v.c_str(), &end, 10);
      if (v.empty() || *end != '\0' || n < 16 || n > 1024 || n % 16 != 0) {
        std::fprintf(stderr, "conv_wgrad: --size needs a multiple of 16 from 16 to 1024, got '%s'\n", v.c_str());
        return 2;
      }
      size = n;
      continue;
    }
    if (std::strcmp(argv[i], "--dtype") == 0) {
      const std::string d = i + 1 < argc ? argv[++i] : "";
      if (d != "f32" && d != "bf16" && d != "f16") {
        std::fprintf(stderr, "conv_wgrad: --dtype needs f32, bf16 or f16, got '%s'\n", d.c_str());
        return 2;
      }
      dtypes = {d == "f32" ? f32 : d == "bf16" ? bf16 : f16};
      continue;
    }
    if (std::strcmp(argv[i], "--compare-tiles") == 0) {
      compare_tiles = true;
      continue;
    }
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
  const int64_t N = width == 8 ? 16 : 8, scale = width / 8;
  if (only && std::none_of(std::begin(kLayers), std::end(kLayers),
                           [&](const Layer& l) { return layer_name(scaled(l, scale, size)).find(only) != std::string::npos; })) {
    std::fprintf(stderr, "conv_wgrad: no layer name contains '%s'; the layers of width %lld are:\n", only,
                 static_cast<long long>(width));
    for (const Layer& l : kLayers) std::fprintf(stderr, "  %s\n", layer_name(scaled(l, scale, size)).c_str());
    return 2;
  }
  NoGrad no_grad;
  const Device cpu = Device::cpu();
  std::printf("conv2d weight gradient vs forward, U-Net w%lld d4 b%lld %lld^2, %d threads\n",
              static_cast<long long>(width), static_cast<long long>(N), static_cast<long long>(size), num_threads());
  std::printf("%-18s %-5s %9s %9s %9s %9s %7s %9s %9s\n", "layer", "type", "wgrad ms", "GFLOP/s", "fwd ms", "GFLOP/s",
              "ratio", "dgrad ms", "GFLOP/s");
  double worst = 1e30;
  for (DType dt : dtypes) {
    double total_w[2] = {}, total_f[2] = {}, total_d[2] = {};
    int variants = 1;
    for (Layer l : kLayers) {
      l = scaled(l, scale, size);
      const std::string name = layer_name(l);
      if (only && name.find(only) == std::string::npos) continue;
      const int64_t pad = l.stride == 1 ? l.k / 2 : 0, out = l.hw / l.stride;
      const Conv2dOptions p{{l.stride, l.stride}, {pad, pad}, {1, 1}, 1};
      Generator g(3);
      Tensor x = randn({N, l.hw, l.hw, l.cin}, {dt}, &g), gy = randn({N, out, out, l.cout}, {dt}, &g);
      Tensor w = randn({l.cout, l.k, l.k, l.cin}, {dt}, &g);
      Tensor gw = empty({l.cout, l.k, l.k, l.cin}, {dt}), y = empty({N, out, out, l.cout}, {dt});
      Tensor gx = empty({N, l.hw, l.hw, l.cin}, {dt});
      const Tensor fwd_bias = l.cout == 4 ? randn({l.cout}, {dt}, &g) : Tensor();
      const Tensor dgrad_bias = l.stride == 2 ? randn({l.cin}, {dt}, &g) : Tensor();
      // Interleaved: each round times one wgrad, one forward and one dgrad (per variant: with
      // and, for --compare-tiles, without the tile convolution); the best of each is kept.
      variants = compare_tiles && dt != f32 ? 2 : 1;
      double sw[2] = {1e30, 1e30}, sf[2] = {1e30, 1e30}, sd[2] = {1e30, 1e30};
      for (int round = 0; round < 6; ++round)
        for (int v = 0; v < variants; ++v) {
          std::optional<cpu::amx_conv::TilesOff> off;
          if (v == 1) off.emplace();
          sw[v] = std::min(sw[v], bench::best_seconds([&] { conv2d_wgrad_stub(cpu, gy, x, gw, p); }, 0.03, 8));
          sf[v] = std::min(sf[v], bench::best_seconds([&] { conv2d_forward_stub(cpu, x, w, fwd_bias, y, p); }, 0.03, 8));
          sd[v] = std::min(sd[v], bench::best_seconds([&] { conv2d_dgrad_stub(cpu, gy, w, dgrad_bias, gx, p); }, 0.03, 8));
        }
      const double flops = 2.0 * N * out * out * l.cout * l.k * l.k * l.cin;
      for (int v = 0; v < variants; ++v) total_w[v] += sw[v], total_f[v] += sf[v], total_d[v] += sd[v];
      worst = std::min(worst, sf[0] / sw[0]);
      for (int v = 0; v < variants; ++v)
        std::printf("%-18s %-5s %9.3f %9.1f %9.3f %9.1f %7.2f %9.3f %9.1f\n", name.c_str(),
                    v == 0 ? dtype_name(dt) : "off", sw[v] * 1e3, flops / sw[v] * 1e-9, sf[v] * 1e3,
                    flops / sf[v] * 1e-9, sf[v] / sw[v], sd[v] * 1e3, flops / sd[v] * 1e-9);
    }
    for (int v = 0; v < variants; ++v)
      std::printf("%-18s %-5s %9.3f %9s %9.3f %9s %7.2f %9.3f\n", "all layers", v == 0 ? dtype_name(dt) : "off",
                  total_w[v] * 1e3, "", total_f[v] * 1e3, "", total_f[v] / total_w[v], total_d[v] * 1e3);
  }
  std::printf("lowest wgrad/forward ratio: %.2f (goal >= 0.75)\n", worst);
  return 0;
}
