// CPU kernels give the same bits with 1 and 2 OpenMP threads: elementwise loops split
// rows or pieces of rows, and every reduction (BatchNorm statistics and gradients, loss
// means, the unscale count) sums over a split fixed by the shape, not the thread count.
#include <catch2/catch.hpp>
#include <thread>

#include <cmath>
#include <cstring>
#include <functional>
#include <vector>

#include "halfgrad.h"
#include "ops/amp_kernels.h"

using namespace hg;

namespace {

// Restores the thread count a test found.
struct Threads {
  int saved = hg::num_threads();
  explicit Threads(int n) { hg::set_num_threads(n); }
  ~Threads() { hg::set_num_threads(saved); }
};

std::vector<unsigned char> bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  const auto* p = static_cast<const unsigned char*>(c.data_ptr());
  return {p, p + c.numel() * static_cast<int64_t>(dtype_size(c.dtype()))};
}

// f's outputs as bytes, computed with n threads.
std::vector<std::vector<unsigned char>> run_with(int n, const std::function<std::vector<Tensor>()>& f) {
  Threads t(n);
  std::vector<std::vector<unsigned char>> out;
  for (const Tensor& r : f()) out.push_back(bytes_of(r));
  return out;
}

void same_bits_1_and_2(const std::function<std::vector<Tensor>()>& f) {
  const auto one = run_with(1, f), two = run_with(2, f);
  REQUIRE(one.size() == two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    INFO("output " << i);
    CHECK(one[i] == two[i]);
  }
}

Tensor input(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(s, {dt}, &g);
}

}  // namespace

TEST_CASE("elementwise ops, casts and pooling give the same bits with 1 and 2 threads", "[cpu][threads]") {
  if (static_cast<int>(std::thread::hardware_concurrency()) < 2) WARN("one processor: the 2-thread run shares it, the comparison still holds");
  for (DType dt : {f32, f16, bf16}) {
    INFO(dtype_name(dt));
    // 100,003 elements: one long row split into pieces, with a tail.
    Tensor a = input({100003}, dt, 1), b = input({100003}, dt, 2), x = input({8, 32, 32, 8}, dt, 3);
    same_bits_1_and_2([&] {
      return std::vector<Tensor>{relu(a), a + b, a * b, sigmoid(a), a.to(f32), a.to(f32).to(dt),
                                 max_pool2d(x), upsample(x, 2, UpsampleMode::bilinear)};
    });
  }
}

// ops/cpu/loops.h hands its kernels runs of rows along the second-innermost dimension; a run
// ends where that dimension wraps and an outer index carries, and a thread's share may start
// in the middle of one. Every element must be visited once, with each operand's own strides.
TEST_CASE("the strided loop visits every element once across wrapping rows, broadcasts and thread splits", "[cpu][threads]") {
  for (int threads : {1, 2}) {
    Threads t(threads);
    // 1,890 elements (one thread's serial loop) and 43,758 (split by rows between threads).
    for (Shape s : {Shape{5, 7, 9, 6}, Shape{13, 17, 33, 6}}) {
      INFO("threads " << threads << ", shape [" << s[0] << ", " << s[1] << ", " << s[2] << ", " << s[3] << "]");
      // a's dimensions 1 and 2 swapped (a view no dimension of which merges with the next);
      // b broadcast over dimensions 0 and 2.
      const int64_t n = s[0] * s[1] * s[2] * s[3];
      Tensor a_data = arange(0, static_cast<double>(n), 1, {f64}).reshape({s[0], s[2], s[1], s[3]});
      Tensor a = a_data.permute({0, 2, 1, 3});
      Tensor b = arange(0, static_cast<double>(s[1] * s[3]), 1, {f64}).reshape({s[1], 1, s[3]}) * 1e6;
      Tensor out = (a + b).contiguous();
      const double* o = out.data<double>();
      int64_t wrong = 0;
      for (int64_t i = 0; i < s[0]; ++i)
        for (int64_t j = 0; j < s[1]; ++j)
          for (int64_t k = 0; k < s[2]; ++k)
            for (int64_t l = 0; l < s[3]; ++l) {
              const double want = static_cast<double>(((i * s[2] + k) * s[1] + j) * s[3] + l) + 1e6 * static_cast<double>(j * s[3] + l);
              wrong += o[((i * s[1] + j) * s[2] + k) * s[3] + l] != want;
            }
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("BatchNorm statistics, outputs and gradients give the same bits with 1 and 2 threads", "[cpu][threads]") {
  for (DType dt : {f32, f16, bf16}) {
    INFO(dtype_name(dt));
    Tensor x0 = input({16, 32, 32, 8}, dt, 4), gy = input({16, 32, 32, 8}, dt, 5);
    same_bits_1_and_2([&] {
      Tensor x = x0.detach().set_requires_grad();
      Tensor w = ones({8}).set_requires_grad(), b = zeros({8}).set_requires_grad();
      Tensor rm = zeros({8}), rv = ones({8});
      Tensor y = batch_norm(x, w, b, rm, rv, true);
      y.backward(gy);
      return std::vector<Tensor>{y, rm, rv, x.grad(), w.grad(), b.grad()};
    });
  }
}

TEST_CASE("loss means, the unscale count and numerics statistics give the same bits with 1 and 2 threads", "[cpu][threads]") {
  Generator g(6);
  Tensor target = randint(0, 8, {16, 32, 32}, {i64}, &g);
  for (DType dt : {f32, f16, bf16}) {
    INFO(dtype_name(dt));
    Tensor logits0 = input({16, 32, 32, 8}, dt, 7);
    same_bits_1_and_2([&] {
      Tensor logits = logits0.detach().set_requires_grad();
      Tensor loss = cross_entropy(logits, target);
      loss.backward();
      Tensor grad = input({300001}, dt, 8) * 1000.0;
      Tensor found = zeros({}, {f32}), counts = zeros({1}, {i64});
      // A few overflowing elements so the count is not zero.
      Tensor big = full({5}, dt == f16 ? 60000.0 : 3e38, {dt});
      std::memcpy(grad.data_ptr(), big.data_ptr(), 5 * dtype_size(dt));
      Tensor two = full({}, dt == f16 ? 4.0 : 8.0, {f32});
      unscale_and_check_stub(Device::cpu(), std::vector<Tensor>{grad}, two, found, counts);
      return std::vector<Tensor>{loss, logits.grad(), grad, found, counts, softmax(logits0, -1),
                                 amp::compute_stats(input({300001}, dt, 9))};
    });
  }
}

TEST_CASE("unscale counts values that overflow when rounded back to f16, on the vector body and the tail", "[cpu][amp]") {
  // 20000 * 4 = 80000 is finite in f32 but above 65520, so inf in f16; 16000 * 4 = 64000 is not.
  std::vector<double> v(21, 16000.0);
  v[3] = v[20] = 20000.0;  // one in the first block of 8, one in the tail
  v[9] = NAN;
  Tensor grad = from_vector(v, {21}, {f16});
  Tensor scale = full({}, 4.0, {f32}), found = zeros({}, {f32}), counts = zeros({1}, {i64});
  unscale_and_check_stub(Device::cpu(), std::vector<Tensor>{grad}, scale, found, counts);
  CHECK(counts.data<int64_t>()[0] == 3);
  CHECK(found.item<double>() == 1.0);
  std::vector<double> out = grad.to_vector<double>();
  CHECK(std::isinf(out[3]));
  CHECK(std::isinf(out[20]));
  CHECK(out[0] == 64000.0);
}
