// CPU batched GEMM and linear (x · w^T + bias) on Eigen. f16/bf16 operands are widened to
// f32 while being packed into contiguous panels (exact: every f16/bf16 is an f32),
// multiplied and accumulated in f32 (the bias added in f32), and the result rounded once to
// the output dtype.
#include <Eigen/Core>
#include <vector>

#include "framework/half_convert.h"
#include "ops/copy.h"
#include "ops/cpu/loops.h"
#include "ops/matmul_kernels.h"

namespace hg::cpu {
namespace {

template <class T>
using RowMat = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using StridedMap = Eigen::Map<const RowMat<T>, Eigen::Unaligned, Eigen::Stride<Eigen::Dynamic, Eigen::Dynamic>>;

template <class T>
void bmm_native(const Tensor& a, const Tensor& b, const Tensor& out) {
  const int64_t B = a.size(0), M = a.size(1), K = a.size(2), N = b.size(2);
  const T* pa = a.data<T>();
  const T* pb = b.data<T>();
  T* po = out.data<T>();
  auto one = [&](int64_t i) {
    StridedMap<T> A(pa + i * a.strides()[0], M, K, {a.strides()[1], a.strides()[2]});
    StridedMap<T> Bm(pb + i * b.strides()[0], K, N, {b.strides()[1], b.strides()[2]});
    Eigen::Map<RowMat<T>> O(po + i * M * N, M, N);
    O.noalias() = A * Bm;
  };
  // Many small products: one per thread; few large ones: Eigen threads each.
  if (B > 1 && M * N * K < 64 * 64 * 64) parallel_for(B, M * N * K, [&](int64_t b0, int64_t b1) { for (int64_t i = b0; i < b1; ++i) one(i); });
  else for (int64_t i = 0; i < B; ++i) one(i);
}

void bmm_cpu(const Tensor& a, const Tensor& b, const Tensor& out) {
  visit_floating(a.dtype(), "matmul", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      bmm_native<T>(a, b, out);
    } else {
      Tensor a32 = empty(a.shape(), {f32, Device::cpu()}), b32 = empty(b.shape(), {f32, Device::cpu()});
      copy_(a32, a);
      copy_(b32, b);
      Tensor o32 = empty(out.shape(), {f32, Device::cpu()});
      bmm_native<float>(a32, b32, o32);
      copy_(out, o32);
    }
  });
}

// The f32/f64 product as bmm_cpu computes it, plus the bias in the same type.
template <class T>
void linear_native(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  bmm_native<T>(x.unsqueeze(0), w.transpose(0, 1).unsqueeze(0), out.view({1, out.size(0), out.size(1)}));
  if (!bias.defined()) return;
  Eigen::Map<RowMat<T>> O(out.data<T>(), out.size(0), out.size(1));
  const Eigen::Map<const Eigen::Matrix<T, 1, Eigen::Dynamic>> b(bias.data<T>(), bias.size(0));
  O.rowwise() += b;
}

void linear_cpu(const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& out) {
  visit_floating(x.dtype(), "linear", [&]<typename T>() {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
      linear_native<T>(x, w, bias, out);
    } else {
      const auto widened = [](const Tensor& t) {
        if (!t.defined()) return t;
        Tensor t32 = empty(t.shape(), {f32, Device::cpu()});
        copy_(t32, t);
        return t32;
      };
      Tensor o32 = empty(out.shape(), {f32, Device::cpu()});
      linear_native<float>(widened(x), widened(w), widened(bias), o32);
      copy_(out, o32);
    }
  });
}

}  // namespace

HG_REGISTER_KERNEL(bmm_stub, cpu, bmm_cpu);
HG_REGISTER_KERNEL(linear_stub, cpu, linear_cpu);

}  // namespace hg::cpu
