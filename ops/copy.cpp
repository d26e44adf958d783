// fill_ and copy_: the checks, overlap handling, the choice between a same-device copy and
// a transfer, and the version bump that tells autograd the destination changed.
#include "ops/copy.h"

#include <utility>

#include "framework/scalar.h"
#include "ops/copy_kernels.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&)> copy_stub("copy");
DispatchStub<void(const Tensor&, double)> fill_stub("fill");
DispatchStub<void(const Tensor&, const Tensor&)> transfer_stub("transfer");

namespace {

// The bytes [first, last) of its storage a non-empty view can touch.
std::pair<int64_t, int64_t> byte_span(const Tensor& t) {
  int64_t lo = t.offset(), hi = t.offset();
  for (int64_t i = 0; i < t.dim(); ++i) {
    const int64_t span = (t.size(i) - 1) * t.strides()[static_cast<size_t>(i)];
    (span < 0 ? lo : hi) += span;
  }
  const auto elem = static_cast<int64_t>(dtype_size(t.dtype()));
  return {lo * elem, (hi + 1) * elem};
}

// Whether a and b may share memory: one storage and intersecting byte ranges. Views that
// interleave without touching (even and odd columns) count too; a copy through a temporary
// is right for them as well, only slower.
bool may_overlap(const Tensor& a, const Tensor& b) {
  if (!a.storage() || a.storage() != b.storage() || a.numel() == 0 || b.numel() == 0) return false;
  auto [a0, a1] = byte_span(a);
  auto [b0, b1] = byte_span(b);
  return a0 < b1 && b0 < a1;
}

void copy_same_device(const Tensor& dst, Tensor s) {
  // Reading memory the copy is writing gives a wrong result (or a memcpy on overlapping
  // ranges): read from a private copy instead.
  if (may_overlap(dst, s)) {
    Tensor tmp = empty(s.shape(), {s.dtype(), s.device()});
    copy_stub(s.device(), tmp, s);
    s = tmp;
  }
  copy_stub(dst.device(), dst, s.expand(dst.shape()));
}

}  // namespace

namespace detail {

void fill_new(const Tensor& t, double value) {
  if (t.numel() > 0) fill_stub(t.device(), t, value);
}

void copy_into_new(const Tensor& dst, const Tensor& src) {
  HG_CHECK(dst.defined() && src.defined(), "copy_: undefined tensor");
  for (int64_t i = 0; i < dst.dim(); ++i)
    HG_CHECK(dst.strides()[static_cast<size_t>(i)] != 0 || dst.size(i) <= 1,
             "copy_: unsupported operation: more than one element of the written-to tensor refers to a single memory "
             "location (the destination ",
             shape_str(dst.shape()), " has stride 0 on axis ", i,
             ", an expanded view); copy into a tensor with its own memory, e.g. dst.clone()");
  Tensor s = src.detach().expand(dst.shape());
  if (dst.numel() == 0) return;
  if (s.device() == dst.device()) {
    copy_same_device(dst, src.detach());
  } else if (!s.device().is_cpu() && !dst.device().is_cpu()) {  // between two GPUs: through the host
    Tensor host = empty(s.shape(), {s.dtype(), Device::cpu()});
    copy_into_new(host, s);
    copy_into_new(dst, host);
  } else if (dst.device().is_cpu()) {
    // Device to host: move the source in its own dtype, then convert on the CPU.
    Tensor staged = s.contiguous();
    Tensor host = empty(staged.shape(), {staged.dtype(), Device::cpu()});
    transfer_stub(staged.device(), host, staged);
    copy_stub(dst.device(), dst, host);
  } else {
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
}

}  // namespace detail

void fill_(const Tensor& t, double value) {
  HG_CHECK(t.defined(), "fill_: undefined tensor");
  check_fits_dtype(value, t.dtype(), "fill_");
  detail::fill_new(t, value);
  t.bump_version();
}

void copy_(const Tensor& dst, const Tensor& src) {
  detail::copy_into_new(dst, src);
  dst.bump_version();
}

}  // namespace hg
