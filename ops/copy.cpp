// fill_ and copy_: the checks, and the choice between a same-device copy and a transfer.
#include "ops/copy.h"

#include "ops/copy_kernels.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&)> copy_stub("copy");
DispatchStub<void(const Tensor&, double)> fill_stub("fill");
DispatchStub<void(const Tensor&, const Tensor&)> transfer_stub("transfer");

void fill_(const Tensor& t, double value) {
  if (t.numel() == 0) return;
  fill_stub(t.device(), t, value);
}

void copy_(const Tensor& dst, const Tensor& src) {
  HG_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  Tensor s = src.detach().expand(dst.shape());
  if (dst.numel() == 0) return;
  if (s.device() == dst.device()) {
    copy_stub(dst.device(), dst, s);
    return;
  }
  // Across devices: move in the source dtype, contiguous, then convert on the destination.
  Tensor staged = s.contiguous();
  Tensor moved = empty(staged.shape(), {staged.dtype(), dst.device()});
  Device gpu = dst.device().is_cpu() ? s.device() : dst.device();
  transfer_stub(gpu, moved, staged);
  copy_stub(dst.device(), dst, moved);
}

}  // namespace hg
