// Max and average pooling on the cuda device, NHWC, one thread per output element forward
// and per input element backward (a gather over the windows covering it: no atomics, and
// the sums add in the CPU kernel's order, in f32 (f64 for f64), rounded once).
#include <limits>

#include "cuda/contiguous_check.h"
#include "cuda/device_types.h"
#include "cuda/index_loop.h"
#include "cuda/nhwc_pixel.h"
#include "ops/pool2d_kernels.h"

namespace hg::cuda {
namespace {

template <class T>
struct MaxPoolForward {
  const T* x;
  T* y;
  int64_t* argmax;  // nullptr when no gradient is needed
  Pool2dGeometry g;
  HG_DEVICE void operator()(int64_t o) const {
    using Cmp = compute_t<T>;
    const Pixel px = pixel_of(o, g.P, g.Q, g.C);
    const WindowSpan hs = window_span(px.row, g.R, g.sh, g.ph, g.H), ws = window_span(px.col, g.S, g.sw, g.pw, g.W);
    const T* xn = x + px.n * g.H * g.W * g.C + px.c;
    // As on the CPU: the first element wins ties, and wins outright when all are -inf.
    Cmp best = -std::numeric_limits<Cmp>::infinity();
    int64_t idx = hs.begin * g.W + ws.begin;
    for (int64_t h = hs.begin; h < hs.end; ++h)
      for (int64_t w = ws.begin; w < ws.end; ++w) {
        const Cmp a = dev_load(xn[(h * g.W + w) * g.C]);
        if (max_pool_takes(a, best)) {
          best = a;
          idx = h * g.W + w;
        }
      }
    y[o] = xn[idx * g.C];  // copied, not converted back: exact in every dtype
    if (argmax) argmax[o] = idx;
  }
};

template <class T>
struct MaxPoolBackward {
  const T* gy;
  const int64_t* argmax;
  T* gx;
  Pool2dGeometry g;
  HG_DEVICE void operator()(int64_t i) const {
    const Pixel px = pixel_of(i, g.H, g.W, g.C);
    const WindowRange pr = windows_covering(px.row, g.R, g.sh, g.ph, g.P);
    const WindowRange qr = windows_covering(px.col, g.S, g.sw, g.pw, g.Q);
    const int64_t self = px.row * g.W + px.col;
    accum_t<T> acc(0);
    for (int64_t p = pr.lo; p < pr.hi; ++p)
      for (int64_t q = qr.lo; q < qr.hi; ++q) {
        const int64_t o = ((px.n * g.P + p) * g.Q + q) * g.C + px.c;
        if (argmax[o] == self) acc += dev_load(gy[o]);
      }
    gx[i] = dev_store<T>(acc);
  }
};

template <class T>
struct AvgPoolForward {
  const T* x;
  T* y;
  Pool2dGeometry g;
  HG_DEVICE void operator()(int64_t o) const {
    using A = accum_t<T>;
    const Pixel px = pixel_of(o, g.P, g.Q, g.C);
    const WindowSpan hs = window_span(px.row, g.R, g.sh, g.ph, g.H), ws = window_span(px.col, g.S, g.sw, g.pw, g.W);
    const T* xn = x + px.n * g.H * g.W * g.C + px.c;
    A acc(0);
    for (int64_t h = hs.begin; h < hs.end; ++h)
      for (int64_t w = ws.begin; w < ws.end; ++w) acc += dev_load(xn[(h * g.W + w) * g.C]);
    // Padding counts as zeros: every window divides by its full size.
    y[o] = dev_store<T>(acc / static_cast<A>(g.R * g.S));
  }
};

template <class T>
struct AvgPoolBackward {
  const T* gy;
  T* gx;
  Pool2dGeometry g;
  HG_DEVICE void operator()(int64_t i) const {
    using A = accum_t<T>;
    const Pixel px = pixel_of(i, g.H, g.W, g.C);
    const WindowRange pr = windows_covering(px.row, g.R, g.sh, g.ph, g.P);
    const WindowRange qr = windows_covering(px.col, g.S, g.sw, g.pw, g.Q);
    A acc(0);
    for (int64_t p = pr.lo; p < pr.hi; ++p)
      for (int64_t q = qr.lo; q < qr.hi; ++q) acc += dev_load(gy[((px.n * g.P + p) * g.Q + q) * g.C + px.c]);
    gx[i] = dev_store<T>(acc / static_cast<A>(g.R * g.S));
  }
};

void max_pool2d_cuda(const Tensor& x, const Tensor& y, const Tensor& argmax, const Pool2dGeometry& g) {
  check_contiguous("max_pool2d", {&x, &y, &argmax});
  visit_floating(x.dtype(), "max_pool2d", [&]<typename T>() {
    for_each_index(y.device().index, "max_pool2d", y.numel(),
                   MaxPoolForward<T>{x.data<T>(), y.data<T>(), argmax.defined() ? argmax.data<int64_t>() : nullptr, g});
  });
}

void max_pool2d_backward_cuda(const Tensor& gy, const Tensor& argmax, const Tensor& gx, const Pool2dGeometry& g) {
  check_contiguous("max_pool2d backward", {&gy, &argmax, &gx});
  visit_floating(gy.dtype(), "max_pool2d backward", [&]<typename T>() {
    for_each_index(gx.device().index, "max_pool2d_backward", gx.numel(),
                   MaxPoolBackward<T>{gy.data<T>(), argmax.data<int64_t>(), gx.data<T>(), g});
  });
}

void avg_pool2d_cuda(const Tensor& x, const Tensor& y, const Pool2dGeometry& g) {
  check_contiguous("avg_pool2d", {&x, &y});
  visit_floating(x.dtype(), "avg_pool2d", [&]<typename T>() {
    for_each_index(y.device().index, "avg_pool2d", y.numel(), AvgPoolForward<T>{x.data<T>(), y.data<T>(), g});
  });
}

void avg_pool2d_backward_cuda(const Tensor& gy, const Tensor& gx, const Pool2dGeometry& g) {
  check_contiguous("avg_pool2d backward", {&gy, &gx});
  visit_floating(gy.dtype(), "avg_pool2d backward", [&]<typename T>() {
    for_each_index(gx.device().index, "avg_pool2d_backward", gx.numel(), AvgPoolBackward<T>{gy.data<T>(), gx.data<T>(), g});
  });
}

}  // namespace

HG_REGISTER_KERNEL(max_pool2d_stub, cuda, max_pool2d_cuda);
HG_REGISTER_KERNEL(max_pool2d_backward_stub, cuda, max_pool2d_backward_cuda);
HG_REGISTER_KERNEL(avg_pool2d_stub, cuda, avg_pool2d_cuda);
HG_REGISTER_KERNEL(avg_pool2d_backward_stub, cuda, avg_pool2d_backward_cuda);

}  // namespace hg::cuda
