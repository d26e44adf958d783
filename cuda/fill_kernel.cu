// fill on the cuda device for tensors of any dtype and layout: the value is rounded once
// on the host (as the CPU does) and the kernel stores that bit pattern; contiguous
// tensors take the elementwise loop's 16-byte vector stores.
#include "cuda/elementwise_loops.h"
#include "ops/copy_kernels.h"

namespace hg::cuda {
namespace {

template <class T>
struct Constant {
  T value;
  HG_DEVICE T operator()() const { return value; }
};

void fill_cuda(const Tensor& dst, double value) {
  visit_dtype(dst.dtype(), [&]<typename T>() { map<T>("fill", dst, {}, Constant<T>{store<T>(value)}); });
}

}  // namespace

HG_REGISTER_KERNEL(fill_stub, cuda, fill_cuda);

}  // namespace hg::cuda
