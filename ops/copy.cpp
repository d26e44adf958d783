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
  if (!s.device().is_cpu() && !dst.device().is_cpu()) {  // between two GPUs: through the host
    Tensor host = empty(s.shape(), {s.dtype(), Device::cpu()});
    copy_(host, s);
    copy_(dst, host);
    return;
  }
  if (dst.device().is_cpu()) {
    // Device to host: move the source in its own dtype, then convert on the CPU.
    Tensor staged = s.contiguous();
    Tensor host = empty(staged.shape(), {staged.dtype(), Device::cpu()});
    transfer_stub(staged.device(), host, staged);
    copy_stub(dst.device(), dst, host);
    return;
  }
  // Host to device: convert on the CPU to the destination dtype, then move.
  Tensor host = empty(dst.shape(), {dst.dtype(), Device::cpu()});
  copy_stub(host.device(), host, s);
  if (dst.is_contiguous()) {
    transfer_stub(dst.device(), dst, host);
  } else {
    Tensor moved = empty(dst.shape(), {dst.dtype(), dst.device()});
    transfer_stub(dst.device(), moved, host);
    copy_stub(dst.device(), dst, moved);
  }
}

}  // namespace hg
