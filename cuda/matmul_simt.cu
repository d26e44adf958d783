// Batched matmul and linear on the cuda device with the tiled SIMT GEMM (cuda/simt_gemm.h):
// operands of any strides (broadcast batches have stride 0), f16/bf16 widened exactly to
// f32, accumulated in f32 (f64 for f64) and rounded once into the contiguous output. The
// f64 and strict-f32 path of cuda/matmul_tc.cu, which registers the kernels.
#include "cuda/matmul_simt.h"

#include "cuda/device_types.h"
#include "cuda/simt_gemm.h"

namespace hg::cuda {
namespace {

// Element (i, j) of batch entry z of a strided [B, rows, cols] tensor, in the compute type.
template <class T>
struct StridedMatrix {
  const T* p;
  int64_t sz, si, sj;
  HG_DEVICE compute_t<T> operator()(int64_t z, int64_t i, int64_t j) const { return dev_load(p[z * sz + i * si + j * sj]); }
};

template <class T>
struct ContiguousOut {
  T* p;
  int64_t M, N;
  HG_DEVICE void operator()(int64_t z, int64_t i, int64_t j, compute_t<T> v) const { p[(z * M + i) * N + j] = dev_store<T>(v); }
};

// out[i, j] = x·w^T + bias[j] in the compute type, rounded once.
template <class T>
struct BiasOut {
  T* p;
  const T* bias;
  int64_t N;
  HG_DEVICE void operator()(int64_t, int64_t i, int64_t j, compute_t<T> v) const {
    p[i * N + j] = dev_store<T>(bias ? v + dev_load(bias[j]) : v);
  }
};

template <class T>
StridedMatrix<T> strided_matrix(const Tensor& t) {
  return {t.data<T>(), t.strides()[0], t.strides()[1], t.strides()[2]};
}

}  // namespace

void bmm_simt(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  visit_floating(a.dtype(), "matmul", [&]<typename T>() {
    simt_gemm<compute_t<T>>(out.device().index, "bmm_simt", B, M, N, K, strided_matrix<T>(a), strided_matrix<T>(b),
                            ContiguousOut<T>{out.data<T>(), M, N});
  });
}

void linear_simt(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  const int64_t M = x.size(0), K = x.size(1), N = w.size(0);
  visit_floating(x.dtype(), "linear", [&]<typename T>() {
    // w^T as a [1, K, N] view: element (k, n) is w[n, k].
    const StridedMatrix<T> a{x.data<T>(), 0, x.strides()[0], x.strides()[1]};
    const StridedMatrix<T> b{w.data<T>(), 0, w.strides()[1], w.strides()[0]};
    simt_gemm<compute_t<T>>(out.device().index, "linear_simt", 1, M, N, K, a, b,
                            BiasOut<T>{out.data<T>(), bias.defined() ? bias.data<T>() : nullptr, N});
  });
}

}  // namespace hg::cuda
