// The GEMM engine tests' f64 reference: operands of exact T values and check_product, which
// runs the engine (optionally with a given micro-kernel) and checks every element against
// f64 within the f32-accumulation bound.
#pragma once
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "framework/bfloat16.h"
#include "framework/half.h"
#include "ops/cpu/gemm/sources.h"

namespace hg::test_gemm {

using namespace hg;
using namespace hg::cpu;

// A row-major M x K operand stored with strides (rs, ks) in a buffer of T.
template <class T>
struct Operand {
  int64_t rows, cols, rs, ks;
  std::vector<T> data;
  double at(int64_t i, int64_t k) const { return static_cast<double>(load(data[static_cast<size_t>(i * rs + k * ks)])); }
  gemm::Matrix<T> source() const { return {data.data(), rs, ks}; }
};

// Values already representable in T (so the reference sees exactly what the engine reads).
template <class T>
Operand<T> random_operand(int64_t rows, int64_t cols, bool row_major, uint64_t seed, double scale = 1.0) {
  Operand<T> o{rows, cols, row_major ? cols : 1, row_major ? 1 : rows, {}};
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0.0, scale);
  o.data.resize(static_cast<size_t>(rows * cols));
  for (T& v : o.data) v = store<T>(d(g));
  return o;
}

constexpr double kU32 = 0x1p-24;

inline double unit_roundoff(DType dt) {
  return dt == DType::f16 ? 0x1p-11 : dt == DType::bf16 ? 0x1p-8 : dt == DType::f64 ? 0x1p-53 : kU32;
}

// Runs the engine into an output of T and checks every element against f64:
// |got - ref| <= (terms K + 3) u32 (sum|a||b| + |ref|) (accumulation of `terms` products
// per k, and f32 products) + u_out |ref| + the output type's smallest subnormal step.
template <class T, class Out = T>
void check_product(const Operand<T>& a, const Operand<T>& bt, const std::vector<double>& bias, double alpha,
                   bool relu, int threads = -1, const gemm::Kernel<compute_t<T>>* kernel = nullptr) {
  using Acc = compute_t<T>;
  const int64_t M = a.rows, N = bt.rows, K = a.cols;
  std::vector<Out> out(static_cast<size_t>(M * N));
  std::vector<Acc> b32(bias.begin(), bias.end());
  gemm::Epilogue<Acc> ep{static_cast<Acc>(alpha), bias.empty() ? nullptr : b32.data(), relu};
  gemm::run<Acc>(M, N, K, a.source(), bt.source(), gemm::Output{out.data(), dtype_v<Out>, 1, M, 0, 0, N, 1}, ep,
                 threads, kernel);
  const int64_t terms = kernel ? kernel->terms : 1;  // an f16 split sums 4 products per k
  const double u_acc = std::is_same_v<Acc, double> ? 0x1p-53 : kU32, u_out = unit_roundoff(dtype_v<Out>);
  const double tiny = dtype_v<Out> == DType::f16 ? 0x1p-25 : dtype_v<Out> == DType::f64 ? 0 : 0x1p-149;
  int64_t bad = 0;
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double ref = 0, mag = 0;
      for (int64_t k = 0; k < K; ++k) {
        ref += a.at(i, k) * bt.at(j, k);
        mag += std::abs(a.at(i, k) * bt.at(j, k));
      }
      ref = alpha * ref + (bias.empty() ? 0.0 : bias[static_cast<size_t>(j)]);
      if (relu && ref < 0) ref = 0;
      const double got = static_cast<double>(load(out[static_cast<size_t>(i * N + j)]));
      const double bound = (terms * K + 3) * u_acc * (std::abs(alpha) * mag + std::abs(ref)) + u_out * std::abs(ref) + tiny;
      if (!(std::abs(got - ref) <= bound) && bad++ < 5) {
        INFO("element (" << i << ", " << j << ") got " << got << " want " << ref << " bound " << bound);
        CHECK(false);
      }
    }
  CHECK(bad == 0);
}

// The product shapes every kernel path is checked on, plus the epilogue, against f64.
template <class T>
void check_shapes(const gemm::Kernel<float>& k) {
  struct Shape3 {
    int64_t M, N, K;
  };
  uint64_t seed = 40;
  // Around each kernel's tile (6x16, 14x32, 8x48, 32x32) and the blocks (KC 256 or the
  // kernel's 128, MC 144, NC 512); N 64, 80 and 97 leave the 8x48 tile 16, 32 and 1 columns.
  for (const Shape3& s : {Shape3{1, 1, 1}, Shape3{7, 5, 3}, Shape3{15, 33, 31}, Shape3{32, 32, 32}, Shape3{29, 47, 300},
                          Shape3{150, 65, 257}, Shape3{5, 530, 20}, Shape3{9, 64, 129}, Shape3{17, 80, 128},
                          Shape3{8, 97, 385}})
    for (bool rows : {true, false}) {
      INFO(k.name << ": M " << s.M << " N " << s.N << " K " << s.K << " row-major " << rows);
      seed += 2;
      check_product(random_operand<T>(s.M, s.K, rows, seed), random_operand<T>(s.N, s.K, !rows, seed + 1), {}, 1.0,
                    false, 2, &k);
    }
  std::vector<double> bias;
  for (int j = 0; j < 37; ++j) bias.push_back(0.5 * (j % 5) - 1.0);
  check_product(random_operand<T>(23, 40, true, 3), random_operand<T>(37, 40, false, 4), bias, -1.5, true, 1, &k);
}

}  // namespace hg::test_gemm
