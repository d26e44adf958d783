// Batched matmul on the cuda device with the tiled SIMT GEMM (cuda/simt_gemm.h): operands
// of any strides (broadcast batches have stride 0), f16/bf16 widened exactly to f32,
// accumulated in f32 (f64 for f64) and rounded once into the contiguous output.
#include "cuda/device_types.h"
#include "cuda/simt_gemm.h"
#include "ops/matmul_kernels.h"

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

template <class T>
StridedMatrix<T> strided_matrix(const Tensor& t) {
  return {t.data<T>(), t.strides()[0], t.strides()[1], t.strides()[2]};
}

void bmm_cuda(const Tensor& a, const Tensor& b, const Tensor& out) {
  HG_CHECK(out.is_contiguous(), "bmm on ", out.device().str(), ": the output must be contiguous, got strides ",
           shape_str(out.strides()));
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  visit_floating(a.dtype(), "matmul", [&]<typename T>() {
    simt_gemm<compute_t<T>>(out.device().index, "bmm_simt", B, M, N, K, strided_matrix<T>(a), strided_matrix<T>(b),
                            ContiguousOut<T>{out.data<T>(), M, N});
  });
}

}  // namespace

HG_REGISTER_KERNEL(bmm_stub, cuda, bmm_cuda);

}  // namespace hg::cuda
