// GPU kernel throughput: halfgrad's GEMM and the U-Net's 3x3 convolutions (forward, input
// gradient, weight gradient) next to cuBLAS / cuDNN in the same run, each result checked
// once against the vendor's. Timed with CUDA events: warm-up, then the median of >= 10
// runs over rotating input buffers larger than the 50 MB L2, so no run reads a warm cache.
//   gpu_kernels [--quick] [--out table.md]
// Needs a native CUDA build and a GPU; under the CPU emulation it refuses (exit 2).
// Exit 1 when any row's max rel diff exceeds its dtype's bound (diff_bound) or halfgrad's
// kernel threw; a row without a vendor result (no cuBLAS/cuDNN here) has no verdict.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "cuda/kernel_log.h"
#include "cuda/kernel_settings.h"
#include "cuda/runtime.h"
#include "cuda/stream.h"
#include "cuda/vendor/vendor_ops.h"
#include "halfgrad.h"
#include "ops/conv2d_kernels.h"
#include "ops/matmul_kernels.h"

using namespace hg;

namespace {

const Device kGpu = Device::cuda(0);
constexpr double kRotateBytes = 256.0 * (1 << 20);  // inputs cycled per measurement: 5x the L2

struct Row {
  Row(std::string k, std::string s, std::string d) : kernel(std::move(k)), shape(std::move(s)), dtype(std::move(d)) {}
  std::string kernel, shape, dtype;
  double ours = NAN, vendor = NAN, max_rel_diff = NAN;
  std::string ran;   // the kernels halfgrad actually launched (cuda::KernelLog), e.g. after a decline
  std::string note;  // why a number is missing
  double bound = 0;  // the largest max rel diff that passes (diff_bound)
  bool ours_failed = false;
};

// The largest norm-wise relative difference from the vendor's result that passes, for one
// row's dtype (the output's rounding: f16 2^-11, bf16 2^-8, products in tf32 2^-11 per
// input, times a margin for a different summation order). f32 strict/accurate must agree
// to near f32 accuracy: 1e-5 separates them from a kernel that fell back to tf32 (~1e-4 at K = 8192).
double diff_bound(DType dt, cuda::F32Matmul f32_mode) {
  if (dt == f16) return 1e-2;
  if (dt == bf16) return 3e-2;
  return f32_mode == cuda::F32Matmul::fast ? 1e-2 : 1e-5;
}

// A row fails when halfgrad's side threw or both sides ran and differ beyond the bound.
bool row_fails(const Row& r) {
  return r.ours_failed || (!std::isnan(r.max_rel_diff) && !(r.max_rel_diff <= r.bound));
}

// Fresh N(0, 1) data on the GPU (generated in f32, rounded once into dt); never zeros.
Tensor random_gpu(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(s, {f32, kGpu}, &g).to(dt);
}

// Median milliseconds of run(i) for i = 0, 1, ... (the caller rotates buffers by i):
// 3 warm-up runs, then `runs` runs each timed by its own pair of events.
double median_ms(const std::function<void(int)>& run, int runs) {
  for (int i = 0; i < 3; ++i) run(i);
  const cuda::Stream s = cuda::current_stream(0);
  std::vector<double> t;
  cuda::Event start, stop;
  for (int i = 0; i < runs; ++i) {
    start.record(s);
    run(i);
    stop.record(s);
    stop.synchronize();
    t.push_back(start.elapsed_ms(stop));
  }
  std::nth_element(t.begin(), t.begin() + static_cast<long>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

// max |got - want| / max |want|, on the host in f64 (a norm-wise relative difference: an
// elementwise one explodes where sums cancel to near zero).
double max_rel_diff(const Tensor& got, const Tensor& want) {
  const Tensor g = got.to(Device::cpu(), f32).contiguous(), w = want.to(Device::cpu(), f32).contiguous();
  const float* pg = g.data<float>();
  const float* pw = w.data<float>();
  double diff = 0, scale = 0;
  for (int64_t i = 0; i < w.numel(); ++i) {
    diff = std::max(diff, std::abs(static_cast<double>(pg[i]) - pw[i]));
    scale = std::max(scale, std::abs(static_cast<double>(pw[i])));
    if (std::isnan(pg[i]) != std::isnan(pw[i])) return INFINITY;
  }
  return scale > 0 ? diff / scale : diff;
}

// How many copies of the inputs make the rotation exceed the L2 several times over.
int rotation_sets(double bytes_per_set) { return std::clamp(static_cast<int>(kRotateBytes / bytes_per_set) + 1, 2, 16); }

// Times ours and the vendor's on rotating inputs, checks ours once against the vendor's.
// ours(i, out) / vendor(i, out) run on input set i % sets into `out`. A side that fails
// (e.g. no cuDNN here) leaves its column empty and its message in the row's note.
void measure(Row& r, double flops, int runs, const std::function<void(int, const Tensor&)>& ours,
             const std::function<void(int, const Tensor&)>& vendor, const Tensor& out_ours, const Tensor& out_vendor) {
  auto tflops = [&](const std::function<void(int, const Tensor&)>& f, const Tensor& out, const char* who) {
    try {
      f(0, out);  // first use: self-checks and one-time setup run here, outside the log
      if (&out == &out_ours) {
        const cuda::KernelLog log;
        f(0, out);
        r.ran = log.summary();
      }
      return flops / (median_ms([&](int i) { f(i, out); }, runs) * 1e-3) * 1e-12;
    } catch (const std::exception& e) {
      r.note += std::string(r.note.empty() ? "" : "; ") + who + ": " + e.what();
      if (&out == &out_ours) r.ours_failed = true;
      return static_cast<double>(NAN);
    }
  };
  r.ours = tflops(ours, out_ours, "halfgrad");
  r.vendor = tflops(vendor, out_vendor, "vendor");
  // Both outputs now hold the last timed run's result, which used the same input set.
  if (!std::isnan(r.ours) && !std::isnan(r.vendor)) r.max_rel_diff = max_rel_diff(out_ours, out_vendor);
}

std::string fmt(const char* f, double v) {
  if (std::isnan(v)) return "—";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

const char* kHeader =
    "| kernel | shape | dtype | ours TFLOP/s | vendor TFLOP/s | ratio | max rel diff | ran (ours) |\n"
    "|---|---|---|---|---|---|---|---|\n";

// A table line; a row with an error points at its numbered note below the table.
std::string line(const Row& r, int note_number) {
  std::string diff = r.note.empty() ? fmt("%.2e", r.max_rel_diff) : "note " + std::to_string(note_number);
  if (row_fails(r)) diff += " FAIL (bound " + fmt("%.0e", r.bound) + ")";
  return "| " + r.kernel + " | " + r.shape + " | " + r.dtype + " | " + fmt("%.1f", r.ours) + " | " +
         fmt("%.1f", r.vendor) + " | " + fmt("%.2f", r.ours / r.vendor) + " | " + diff + " | " +
         (r.ran.empty() ? "—" : r.ran) + " |\n";
}

// Prints each row as soon as it is measured, so that a run stopped by a time limit still
// shows what it measured; table() is the whole thing for --out.
class Rows {
 public:
  void add(const Row& r) {
    int number = 0;
    if (!r.note.empty()) {  // the same message (e.g. no cuDNN here) gets one number
      const auto it = std::find(notes_.begin(), notes_.end(), r.note);
      number = static_cast<int>(it - notes_.begin()) + 1;
      if (it == notes_.end()) notes_.push_back(r.note);
    }
    lines_.push_back(line(r, number));
    if (row_fails(r)) ++failures_;
    std::printf("%s", lines_.back().c_str());
    std::fflush(stdout);
  }
  std::string notes() const {
    std::string t;
    for (size_t i = 0; i < notes_.size(); ++i) t += "\nnote " + std::to_string(i + 1) + ": " + notes_[i] + "\n";
    return t;
  }
  int failures() const { return failures_; }
  std::string table() const {
    std::string t = kHeader;
    for (const std::string& l : lines_) t += l;
    return t + notes();
  }

 private:
  std::vector<std::string> lines_, notes_;
  int failures_ = 0;
};

// One GEMM row: dtype, f32 mode, whether the Hopper kernel may run, and the layout of B:
// NN multiplies a row-major B (what matmul sees; the Hopper kernel reads it N-major), TN a
// transposed view A·B^T (what linear sees; read K-major).
struct GemmMode {
  DType dt;
  cuda::F32Matmul f32;
  bool hopper, tn;
  const char* label;
};

void gemm_rows(Rows& rows, const std::vector<int64_t>& sizes, int runs) {
  using cuda::F32Matmul;
  const GemmMode modes[] = {{f16, F32Matmul::strict, false, false, "f16 mma.sync"},
                            {f16, F32Matmul::strict, true, false, "f16 wgmma (NN: B read N-major)"},
                            {f16, F32Matmul::strict, true, true, "f16 wgmma (TN)"},
                            {bf16, F32Matmul::strict, false, false, "bf16 mma.sync"},
                            {bf16, F32Matmul::strict, true, false, "bf16 wgmma (NN: B read N-major)"},
                            {bf16, F32Matmul::strict, true, true, "bf16 wgmma (TN)"},
                            {f32, F32Matmul::fast, false, false, "f32 fast (tf32)"},
                            {f32, F32Matmul::accurate, false, false, "f32 accurate (3xTF32)"},
                            {f32, F32Matmul::strict, false, false, "f32 strict"}};
  const cuda::ScopedGemmProvider ours_provider(cuda::Provider::halfgrad);
  for (int64_t n : sizes) {
    for (const GemmMode& m : modes) {
      const cuda::ScopedF32Matmul f32_mode(m.f32);
      const cuda::ScopedHopperGemm hopper(m.hopper);
      Row r{"gemm", std::to_string(n) + "^3", m.label};
      r.bound = diff_bound(m.dt, m.f32);
      const int sets = rotation_sets(2.0 * n * n * static_cast<double>(dtype_size(m.dt)));
      std::vector<Tensor> a, b;
      for (int s = 0; s < sets; ++s) {
        a.push_back(random_gpu({1, n, n}, m.dt, 100 + 2 * s));
        const Tensor bs = random_gpu({1, n, n}, m.dt, 101 + 2 * s);
        b.push_back(m.tn ? bs.transpose(1, 2) : bs);
      }
      const Tensor out_ours = empty({1, n, n}, {m.dt, kGpu}), out_vendor = empty({1, n, n}, {m.dt, kGpu});
      measure(
          r, 2.0 * n * n * n, runs,
          [&](int i, const Tensor& out) { bmm_stub(kGpu, a[i % sets], b[i % sets], out); },
          [&](int i, const Tensor& out) { cuda::vendor::bmm(a[i % sets], b[i % sets], out); }, out_ours, out_vendor);
      rows.add(r);
    }
  }
}

struct Layer {
  int64_t cin, cout, hw;
};

void conv_rows(Rows& rows, const std::vector<Layer>& layers, int64_t N, int runs) {
  const cuda::ScopedConvProvider ours_provider(cuda::Provider::halfgrad);
  const Conv2dOptions p{{1, 1}, {1, 1}, {1, 1}, 1};
  for (const Layer& l : layers) {
    for (DType dt : {f16, bf16}) {
      const Shape xs{N, l.hw, l.hw, l.cin}, ws{l.cout, 3, 3, l.cin}, ys{N, l.hw, l.hw, l.cout};
      const double flops = 2.0 * N * l.hw * l.hw * l.cout * 9.0 * l.cin;
      const double elem = static_cast<double>(dtype_size(dt));
      const int sets = rotation_sets(elem * (static_cast<double>(N) * l.hw * l.hw * (l.cin + l.cout) + 9.0 * l.cin * l.cout));
      std::vector<Tensor> x, w, gy;
      for (int s = 0; s < sets; ++s) {
        x.push_back(random_gpu(xs, dt, 200 + 3 * s));
        w.push_back(random_gpu(ws, dt, 201 + 3 * s));
        gy.push_back(random_gpu(ys, dt, 202 + 3 * s));
      }
      const std::string shape = std::to_string(l.cin) + "->" + std::to_string(l.cout) + " @" + std::to_string(l.hw) +
                                "^2 x" + std::to_string(N);
      auto pick = [&](const std::vector<Tensor>& v, int i) -> const Tensor& { return v[static_cast<size_t>(i % sets)]; };
      Row fwd{"conv fprop", shape, dtype_name(dt)}, dgrad{"conv dgrad", shape, dtype_name(dt)},
          wgrad{"conv wgrad", shape, dtype_name(dt)};
      for (Row* r : {&fwd, &dgrad, &wgrad}) r->bound = diff_bound(dt, cuda::F32Matmul::strict);
      measure(
          fwd, flops, runs, [&](int i, const Tensor& y) { conv2d_forward_stub(kGpu, pick(x, i), pick(w, i), Tensor(), y, p); },
          [&](int i, const Tensor& y) { cuda::vendor::conv2d_forward(pick(x, i), pick(w, i), y, p); },
          empty(ys, {dt, kGpu}), empty(ys, {dt, kGpu}));
      measure(
          dgrad, flops, runs, [&](int i, const Tensor& gx) { conv2d_dgrad_stub(kGpu, pick(gy, i), pick(w, i), Tensor(), gx, p); },
          [&](int i, const Tensor& gx) { cuda::vendor::conv2d_dgrad(pick(gy, i), pick(w, i), gx, p); },
          empty(xs, {dt, kGpu}), empty(xs, {dt, kGpu}));
      measure(
          wgrad, flops, runs, [&](int i, const Tensor& gw) { conv2d_wgrad_stub(kGpu, pick(gy, i), pick(x, i), gw, p); },
          [&](int i, const Tensor& gw) { cuda::vendor::conv2d_wgrad(pick(gy, i), pick(x, i), gw, p); },
          empty(ws, {dt, kGpu}), empty(ws, {dt, kGpu}));
      for (const Row* r : {&fwd, &dgrad, &wgrad}) rows.add(*r);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  bool quick = false;
  std::string out;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) {
      quick = true;
    } else if (std::strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
      out = argv[++i];
    } else {
      std::fprintf(stderr, "usage: gpu_kernels [--quick] [--out FILE]   (unknown argument '%s')\n", argv[i]);
      return 2;
    }
  }
  if (cuda::is_emulated()) {
    std::fprintf(stderr, "gpu_kernels: this build's cuda:0 is the CPU emulation; GPU throughput and the "
                         "cuBLAS/cuDNN references need a native CUDA build on a machine with a GPU\n");
    return 2;
  }
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "gpu_kernels: no CUDA device: %s\n", cuda::unavailable_reason().c_str());
    return 2;
  }
  for (const std::string& why : {cuda::vendor::cublas_unavailable_reason(), cuda::vendor::cudnn_unavailable_reason()})
    if (!why.empty()) std::fprintf(stderr, "gpu_kernels: warning: %s (vendor columns will be empty)\n", why.c_str());

  NoGrad no_grad;
  const int runs = 10;
  // The 3x3 convolutions of segbench's U-Net at width 64, depth 4 (channels 64..1024):
  // each DoubleConv's two convolutions, encoder (c -> 2c) and decoder (2c -> c) distinct.
  std::vector<Layer> layers{{64, 64, 256},    {64, 128, 128},  {128, 128, 128}, {128, 256, 64}, {256, 256, 64},
                            {256, 512, 32},   {512, 512, 32},  {512, 1024, 16},  {1024, 1024, 16}, {1024, 512, 32},
                            {512, 256, 64},   {256, 128, 128}, {128, 64, 256}};
  std::vector<int64_t> sizes{2048, 4096, 8192};
  int64_t batch = 16;
  if (quick) {
    sizes = {1024, 2048};
    layers = {{64, 64, 64}, {256, 256, 16}, {1024, 1024, 4}};
    batch = 4;
  }
  std::printf("gpu_kernels on %s%s: median of %d runs after 3 warm-ups, CUDA events, inputs rotated over >= %.0f MB\n",
              cuda::device_name(0).c_str(), quick ? " (--quick)" : "", runs, kRotateBytes / 1e6);
  const std::string footnote =
      "\nours = halfgrad (the bmm / conv2d dispatch stubs with provider halfgrad; 'mma.sync' rows with the Hopper "
      "kernel switched off, 'wgmma' rows with it on: on a GPU other than sm_90 or if its self-check failed they "
      "run mma.sync too); vendor = cuBLAS "
      "(cublasGemmStridedBatchedEx) / cuDNN; f32 accurate's vendor is cuBLAS in plain f32 (it has no 3xTF32 mode); "
      "max rel diff = max |ours - vendor| / max |vendor| over one output, FAIL beyond its bound (f16 1e-2, bf16 3e-2, "
      "tf32 1e-2, f32 strict/accurate 1e-5); ran (ours) = the kernels halfgrad's run "
      "launched (copies included), which says whether a 'wgmma' row really ran wgmma; conv shapes: cin->cout @HxW xbatch, 3x3, "
      "padding 1, NHWC.\n";
  std::printf("\n%s", kHeader);
  Rows rows;
  gemm_rows(rows, sizes, runs);
  conv_rows(rows, layers, batch, runs);
  std::printf("%s%s", rows.notes().c_str(), footnote.c_str());
  const std::string t = rows.table() + footnote;
  if (!out.empty()) {
    std::ofstream f(out);
    f << t;
    if (!f) {
      std::fprintf(stderr, "gpu_kernels: could not write %s\n", out.c_str());
      return 1;
    }
  }
  if (rows.failures() > 0) {
    std::fprintf(stderr, "gpu_kernels: %d row(s) FAIL: a max rel diff beyond its bound or a halfgrad kernel that threw\n",
                 rows.failures());
    return 1;
  }
  std::printf("gpu_kernels: every row with a vendor result within its bound\n");
  return 0;
}
