// Nearest and bilinear upsampling on the cuda device, NHWC: one thread per output element
// forward; backward one thread per input element, gathering the outputs that read it in
// the CPU kernel's order (columns, then rows), summed in f32 (f64 for f64), rounded once.
#include "cuda/contiguous_check.h"
#include "cuda/device_types.h"
#include "cuda/index_loop.h"
#include "cuda/nhwc_pixel.h"
#include "ops/upsample_kernels.h"

namespace hg::cuda {
namespace {

template <class T>
struct UpsampleForward {
  const T* x;
  T* y;
  int64_t H, W, C, scale;
  bool bilinear;
  HG_DEVICE void operator()(int64_t o) const {
    using Cmp = compute_t<T>;
    const int64_t OH = H * scale, OW = W * scale;
    const auto [n, oh, ow, c] = pixel_of(o, OH, OW, C);
    const T* xn = x + n * H * W * C + c;
    if (!bilinear) {
      y[o] = xn[(oh / scale * W + ow / scale) * C];
      return;
    }
    const LinearTap<Cmp> th = linear_tap<Cmp>(oh, scale, H), tw = linear_tap<Cmp>(ow, scale, W);
    const auto at = [&](int64_t h, int64_t w) { return dev_load(xn[(h * W + w) * C]); };
    const Cmp upper = tw.w0 * at(th.i0, tw.i0) + tw.w1 * at(th.i0, tw.i1);
    const Cmp lower = tw.w0 * at(th.i1, tw.i0) + tw.w1 * at(th.i1, tw.i1);
    y[o] = dev_store<T>(th.w0 * upper + th.w1 * lower);
  }
};

// The outputs along one axis that read input index i, in increasing order: nearest reads
// from [i*scale, (i+1)*scale); a linear tap from i reaches at most [(i-1)*scale, (i+2)*scale).
struct AxisReaders {
  int64_t begin, end;
};
HG_HOST_DEVICE AxisReaders axis_readers(int64_t i, int64_t scale, int64_t in_size, bool bilinear) {
  if (!bilinear) return {i * scale, (i + 1) * scale};
  const int64_t lo = (i - 1) * scale, hi = (i + 2) * scale;
  return {lo > 0 ? lo : 0, hi < in_size * scale ? hi : in_size * scale};
}

// The weight with which output o reads input i along one axis; false when it does not.
// Both taps on i (the clamped edge) add up, as the CPU's transposed taps do.
template <class F>
HG_DEVICE bool tap_weight(int64_t o, int64_t i, int64_t scale, int64_t in_size, bool bilinear, F& weight) {
  if (!bilinear) {
    weight = F(1);
    return true;
  }
  const LinearTap<F> t = linear_tap<F>(o, scale, in_size);
  if (t.i0 != i && t.i1 != i) return false;
  weight = F(0);
  if (t.i0 == i) weight += t.w0;
  if (t.i1 == i) weight += t.w1;
  return true;
}

template <class T>
struct UpsampleBackward {
  const T* gy;
  T* gx;
  int64_t H, W, C, scale;
  bool bilinear;
  HG_DEVICE void operator()(int64_t i) const {
    using A = accum_t<T>;
    const int64_t OH = H * scale, OW = W * scale;
    const auto [n, h, w, c] = pixel_of(i, H, W, C);
    const AxisReaders rows = axis_readers(h, scale, H, bilinear), cols = axis_readers(w, scale, W, bilinear);
    A acc(0);
    for (int64_t oh = rows.begin; oh < rows.end; ++oh) {
      A wh;
      if (!tap_weight(oh, h, scale, H, bilinear, wh)) continue;
      const T* row = gy + ((n * OH + oh) * OW) * C + c;
      A inner(0);
      for (int64_t ow = cols.begin; ow < cols.end; ++ow) {
        A ww;
        if (tap_weight(ow, w, scale, W, bilinear, ww)) inner += ww * dev_load(row[ow * C]);
      }
      acc += wh * inner;
    }
    gx[i] = dev_store<T>(acc);
  }
};

void upsample_cuda(const Tensor& x, const Tensor& y, int64_t scale, UpsampleMode mode) {
  check_contiguous("upsample", {&x, &y});
  visit_floating(x.dtype(), "upsample", [&]<typename T>() {
    for_each_index(y.device().index, "upsample", y.numel(),
                   UpsampleForward<T>{x.data<T>(), y.data<T>(), x.size(1), x.size(2), x.size(3), scale,
                                      mode == UpsampleMode::bilinear});
  });
}

void upsample_backward_cuda(const Tensor& gy, const Tensor& gx, int64_t scale, UpsampleMode mode) {
  check_contiguous("upsample backward", {&gy, &gx});
  visit_floating(gy.dtype(), "upsample backward", [&]<typename T>() {
    for_each_index(gx.device().index, "upsample_backward", gx.numel(),
                   UpsampleBackward<T>{gy.data<T>(), gx.data<T>(), gx.size(1), gx.size(2), gx.size(3), scale,
                                       mode == UpsampleMode::bilinear});
  });
}

}  // namespace

HG_REGISTER_KERNEL(upsample_stub, cuda, upsample_cuda);
HG_REGISTER_KERNEL(upsample_backward_stub, cuda, upsample_backward_cuda);

}  // namespace hg::cuda
