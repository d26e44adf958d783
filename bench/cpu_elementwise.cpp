// ns per element of the U-Net's memory-bound CPU ops (ReLU, add, casts, pooling, BN, losses,
// Adam, the AMP unscale, numerics statistics) in f32, f16 and bf16, on a w8 b16 64x64
// activation [16, 64, 64, 8] (512 Ki elements).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "halfgrad.h"
#include "ops/amp_kernels.h"
#include "ops/elementwise_kernels.h"

using namespace hg;

namespace {

// Median wall time of f after warm-up; at least 5 runs and ~0.2 s.
double median_seconds(const std::function<void()>& f) {
  using clock = std::chrono::steady_clock;
  for (int i = 0; i < 2; ++i) f();
  std::vector<double> t;
  const auto start = clock::now();
  while (t.size() < 5 || (t.size() < 200 && std::chrono::duration<double>(clock::now() - start).count() < 0.2)) {
    const auto t0 = clock::now();
    f();
    t.push_back(std::chrono::duration<double>(clock::now() - t0).count());
  }
  std::nth_element(t.begin(), t.begin() + static_cast<long>(t.size() / 2), t.end());
  return t[t.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const Shape shape = {16, 64, 64, 8};
  const int64_t n = numel_of(shape);
  const DType dtypes[3] = {f32, f16, bf16};
  Shape bn_shape = shape;  // the BatchNorm rows' activation (--bn-shape)
  std::string only;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    int64_t d[4];
    if (a == "--bn-shape" && i + 1 < argc &&
        std::sscanf(argv[i + 1], "%ld,%ld,%ld,%ld", &d[0], &d[1], &d[2], &d[3]) == 4 && d[0] > 0 && d[1] > 0 &&
        d[2] > 0 && d[3] > 0) {
      bn_shape = {d[0], d[1], d[2], d[3]};
      ++i;
    } else if (a.rfind("--", 0) == 0) {
      std::printf(
          "usage: cpu_elementwise [--bn-shape N,H,W,C] [substring of the op names to run]  (threads: "
          "OMP_NUM_THREADS)\n  --bn-shape: the BatchNorm rows' channels-last activation (default 16,64,64,8)\n");
      return a == "--help" ? 0 : 2;
    } else {
      only = a;
    }
  }
  const int64_t C = bn_shape[3];
  auto add_row_n = [&](const std::string& name, int64_t elems,
                       const std::function<std::function<void()>(DType)>& make) {
    if (name.find(only) == std::string::npos) return;
    double ns[3];
    for (int k = 0; k < 3; ++k) ns[k] = median_seconds(make(dtypes[k])) * 1e9 / static_cast<double>(elems);
    std::printf("%-28s %8.3f %8.3f %8.3f\n", name.c_str(), ns[0], ns[1], ns[2]);
    std::fflush(stdout);
  };
  auto add_row = [&](const std::string& name, const std::function<std::function<void()>(DType)>& make) {
    add_row_n(name, n, make);
  };
  auto input = [&](DType dt, uint64_t seed) {
    Generator g(seed);
    return randn(shape, {dt}, &g);
  };
  std::printf("ns per element of [16, 64, 64, 8] (BatchNorm rows: [%ld, %ld, %ld, %ld])\n%-28s %8s %8s %8s\n",
              bn_shape[0], bn_shape[1], bn_shape[2], bn_shape[3], "op", "f32", "f16", "bf16");

  add_row("relu", [&](DType dt) { return [x = input(dt, 1)] { relu(x); }; });
  add_row("relu grad", [&](DType dt) {
    return [g = input(dt, 1), y = relu(input(dt, 2))] { run_binary(BinaryOp::relu_grad, g, y); };
  });
  add_row("add", [&](DType dt) { return [a = input(dt, 1), b = input(dt, 2)] { a + b; }; });
  add_row("mul", [&](DType dt) { return [a = input(dt, 1), b = input(dt, 2)] { a * b; }; });
  add_row("add bias [C]", [&](DType dt) {
    Generator g(3);
    return [a = input(dt, 1), b = randn({8}, {dt}, &g)] { a + b; };
  });
  add_row("sigmoid", [&](DType dt) { return [x = input(dt, 1)] { sigmoid(x); }; });
  add_row("cast to f32 (f32: f64)", [&](DType dt) {
    return [x = input(dt, 1), dt] { x.to(dt == f32 ? f64 : f32); };
  });
  add_row("cast from f32 (f32: f64)", [&](DType dt) {
    return [x = input(dt == f32 ? f64 : f32, 1), dt] { x.to(dt); };
  });
  add_row("max_pool2d 2x2", [&](DType dt) { return [x = input(dt, 1)] { max_pool2d(x); }; });
  add_row("max_pool2d 2x2 fwd+bwd", [&](DType dt) {
    return [x = input(dt, 1).set_requires_grad(), g = full({16, 32, 32, 8}, 1.0, {dt})] {
      max_pool2d(x).backward(g);
    };
  });
  add_row("upsample x2 (per input)", [&](DType dt) { return [x = input(dt, 1)] { upsample(x); }; });
  add_row("upsample x2 bilinear fwd+bwd", [&](DType dt) {
    return [x = input(dt, 1).set_requires_grad(), g = full({16, 128, 128, 8}, 1.0, {dt})] {
      upsample(x, 2, UpsampleMode::bilinear).backward(g);
    };
  });
  auto bn_input = [&](DType dt, uint64_t seed) {
    Generator g(seed);
    return randn(bn_shape, {dt}, &g);
  };
  const int64_t bn_n = numel_of(bn_shape);
  add_row_n("batch_norm train fwd", bn_n, [&](DType dt) {
    return [x = bn_input(dt, 1), w = ones({C}), b = zeros({C})] { batch_norm(x, w, b, Tensor(), Tensor(), true); };
  });
  add_row_n("batch_norm train fwd+bwd", bn_n, [&](DType dt) {
    return [x = bn_input(dt, 1).set_requires_grad(), w = ones({C}), b = zeros({C}), g = bn_input(dt, 2)] {
      batch_norm(x, w, b, Tensor(), Tensor(), true).backward(g);
    };
  });
  add_row_n("batch_norm_relu train fwd", bn_n, [&](DType dt) {
    return [x = bn_input(dt, 1), w = ones({C}), b = zeros({C})] {
      batch_norm_relu(x, w, b, Tensor(), Tensor(), true);
    };
  });
  add_row_n("batch_norm_relu train fwd+bwd", bn_n, [&](DType dt) {
    return [x = bn_input(dt, 1).set_requires_grad(), w = ones({C}), b = zeros({C}), g = bn_input(dt, 2)] {
      batch_norm_relu(x, w, b, Tensor(), Tensor(), true).backward(g);
    };
  });
  add_row("softmax (last axis, 8)", [&](DType dt) { return [x = input(dt, 1)] { softmax(x, -1); }; });
  add_row("cross_entropy fwd+bwd", [&](DType dt) {
    Generator g(4);
    Tensor t = randint(0, 8, {16, 64, 64}, {i64}, &g);
    return [x = input(dt, 1).set_requires_grad(), t] { cross_entropy(x, t).backward(); };
  });
  // Long rows (a classifier's 1024 classes) and channel sums (bias and BatchNorm-style
  // gradients): the same 512 Ki elements seen as [512, 1024] and [8192, 64].
  add_row("softmax (last axis, 1024)", [&](DType dt) { return [x = input(dt, 1).view({512, 1024})] { softmax(x, -1); }; });
  add_row("log_softmax 1024 fwd+bwd", [&](DType dt) {
    return [x = input(dt, 1).view({512, 1024}).detach().set_requires_grad(), g = input(dt, 2).view({512, 1024})] {
      log_softmax(x, -1).backward(g);
    };
  });
  add_row("softmax (axis 1 of 3, 64)", [&](DType dt) { return [x = input(dt, 1).view({64, 64, 128})] { softmax(x, 1); }; });
  add_row("cross_entropy 1024 fwd+bwd", [&](DType dt) {
    Generator g(5);
    Tensor t = randint(0, 1024, {512}, {i64}, &g);
    return [x = input(dt, 1).view({512, 1024}).detach().set_requires_grad(), t] { cross_entropy(x, t).backward(); };
  });
  add_row("sum over N,H,W (8 channels)", [&](DType dt) { return [x = input(dt, 1)] { sum(x, {0, 1, 2}); }; });
  add_row("sum over N,H,W (4 channels)", [&](DType dt) { return [x = input(dt, 1).view({16, 64, 128, 4})] { sum(x, {0, 1, 2}); }; });
  // A U-Net skip connection: two [16, 64, 64, 8] halves into one [16, 64, 64, 16] (per input element).
  add_row("concat channels 8 + 8", [&](DType dt) { return [a = input(dt, 1), b = input(dt, 2)] { cat({a, b}, 3); }; });
  add_row("sum over last axis (1024)", [&](DType dt) { return [x = input(dt, 1).view({512, 1024})] { sum(x, {1}); }; });
  add_row("sum of all", [&](DType dt) { return [x = input(dt, 1)] { sum(x); }; });
  add_row("sum over rows (64 channels)", [&](DType dt) { return [x = input(dt, 1).view({8192, 64})] { sum(x, {0}); }; });
  add_row("adam step", [&](DType dt) {
    Tensor p = input(dt, 1).set_requires_grad();
    p.set_grad(input(dt, 2));
    auto opt = std::make_shared<optim::Adam>(optim::Params{p});
    return [opt] { opt->step(); };
  });
  add_row("unscale + non-finite check", [&](DType dt) {
    std::vector<Tensor> grads = {input(dt, 1)};
    Tensor inv = full({}, 1.0, {f32}), found = zeros({}, {f32}), counts = zeros({1}, {i64});
    return [grads, inv, found, counts] { unscale_and_check_stub(Device::cpu(), grads, inv, found, counts); };
  });
  add_row("numerics statistics", [&](DType dt) { return [x = input(dt, 1)] { amp::compute_stats(x); }; });
  return 0;
}
