// CPU batched GEMM and linear (x · w^T + bias) on the GEMM engine (ops/cpu/gemm): operands
// are packed straight from their strided storage (f16/bf16 widened exactly to f32 there),
// multiplied with f32 (f64) accumulation, and the bias joins the f32 sum before the one
// rounding into the output dtype.
#include <vector>

#include "ops/cpu/gemm/sources.h"
#include "ops/cpu/loops.h"
#include "ops/matmul_kernels.h"

namespace hg::cpu {
namespace {

using gemm::Matrix;

template <class T>
gemm::Output matrix_out(T* p, int64_t M, int64_t N) {
  return {p, dtype_v<T>, 1, M, 0, 0, N, 1};
}

template <class T>
void bmm_typed(const Tensor& a, const Tensor& b, const Tensor& out) {
  using Acc = compute_t<T>;
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  auto one = [&](int64_t i) {
    const Matrix<T> A{pa + i * a.strides()[0], a.strides()[1], a.strides()[2]};
    const Matrix<T> Bt{pb + i * b.strides()[0], b.strides()[2], b.strides()[1]};  // B^T: rows are b's columns
    gemm::run<Acc>(M, N, K, A, Bt, matrix_out(po + i * M * N, M, N), gemm::Epilogue<Acc>{});
  };
  // Many small products: one per thread (the engine then runs single-threaded); few large
  // ones: the engine splits each over its output tiles.
  if (B > 1 && M * N * K < 128 * 128 * 128)
    parallel_for(B, M * N * K, [&](int64_t b0, int64_t b1) {
      for (int64_t i = b0; i < b1; ++i) one(i);
    });
  else
    for (int64_t i = 0; i < B; ++i) one(i);
}

void bmm_cpu(const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_floating(a.dtype(), "matmul", [&]<typename T>() { bmm_typed<T>(a, b, out); });
}

template <class T>
void linear_typed(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  using Acc = compute_t<T>;
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  std::vector<Acc> b32;
  if (bias.defined()) {
    b32.resize(static_cast<size_t>(N));
    gemm::widen(bias.data<T>(), b32.data(), N);
  }
  const Matrix<T> A{x.data<T>(), x.strides()[0], x.strides()[1]};
  const Matrix<T> Wt{w.data<T>(), w.strides()[0], w.strides()[1]};  // w [N, K] already is B^T
  gemm::Epilogue<Acc> ep;
  ep.bias = bias.defined() ? b32.data() : nullptr;
  gemm::run<Acc>(M, N, K, A, Wt, matrix_out(out.data<T>(), M, N), ep);
}

void linear_cpu(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  visit_floating(x.dtype(), "linear", [&]<typename T>() { linear_typed<T>(x, w, bias, out); });
}

}  // namespace

HG_REGISTER_KERNEL(bmm_stub, cpu, bmm_cpu);
HG_REGISTER_KERNEL(linear_stub, cpu, linear_cpu);

}  // namespace hg::cpu
