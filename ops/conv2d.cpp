// conv2d and conv_transpose2d (precision class `lower`): shape checks, forward and
// backward side by side. Both are built on the three kernels of ops/conv2d_kernels.h;
// the transposed conv's forward is conv2d's input gradient and vice versa.
#include "ops/conv2d.h"

#include <string>

#include "framework/precision.h"
#include "ops/conv2d_kernels.h"
#include "ops/copy.h"
#include "ops/operand_dtype.h"
#include "ops/reduce.h"

namespace hg {

DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&)> conv2d_forward_stub(
    "conv2d_forward");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&)> conv2d_dgrad_stub(
    "conv2d_dgrad");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&)> conv2d_wgrad_stub("conv2d_wgrad");

namespace {

using Stub = DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&)>;

std::string shape_of(const Tensor& t) { return t.defined() ? shape_str(t.shape()) : std::string("undefined"); }
std::string pair_str(const std::array<int64_t, 2>& v) { return detail::concat("(", v[0], ", ", v[1], ")"); }

// Runs a kernel into `out`; an empty operand contributes nothing, so the result is zeros.
void run_kernel(const Stub& stub, const Tensor& a, const Tensor& b, const Tensor& out, const Conv2dOptions& p) {
  if (out.numel() == 0) return;
  if (a.numel() == 0 || b.numel() == 0)
    fill_(out, 0.0);
  else
    stub(out.device(), a, b, out, p);
}

using BiasStub = DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Conv2dOptions&)>;

// conv2d's forward or input gradient with the bias inside the kernel's sum (one rounding);
// with an empty operand the result is the bias alone.
void run_biased(const BiasStub& stub, const Tensor& x, const Tensor& w, const Tensor& bias, const Tensor& y,
                const Conv2dOptions& p) {
  if (y.numel() == 0) return;
  if (x.numel() == 0 || w.numel() == 0)
    bias.defined() ? void(copy_(y, bias.expand(y.shape()))) : void(fill_(y, 0.0));
  else
    stub(y.device(), x, w, bias, y, p);
}

struct Operands {
  Tensor x, w, bias;
};

// Autocast, then the checks shared by both ops (one dtype for the three operands, as in PyTorch).
Operands prepare(const char* op, const Tensor& x0, const Tensor& w0, const Tensor& b0) {
  HG_CHECK(x0.defined() && w0.defined(), op, ": input and weight must be defined tensors");
  TensorList in = autocast(PrecisionClass::lower, {x0, w0, b0});
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  HG_CHECK(x.dim() == 4, op, ": input must be 4-D NHWC [N, H, W, C], got ", shape_of(x));
  HG_CHECK(w.dim() == 4, op, ": weight must be 4-D, got ", shape_of(w));
  HG_CHECK(w.size(1) > 0 && w.size(2) > 0, op, ": kernel size must be positive, got weight ", shape_of(w));
  HG_CHECK(x.device() == w.device() && (!b.defined() || b.device() == x.device()), op,
           ": input, weight and bias must be on one device, got ", x.device(), ", ", w.device(),
           b.defined() ? detail::concat(", ", b.device()) : std::string());
  const bool floating = is_floating(x.dtype()) && is_floating(w.dtype()) && (!b.defined() || is_floating(b.dtype()));
  HG_CHECK(floating, op, ": input, weight and bias must be floating (f64, f32, f16, bf16), got ", dtype_name(x.dtype()),
           ", ", dtype_name(w.dtype()), b.defined() ? detail::concat(", ", dtype_name(b.dtype())) : std::string());
  check_same_dtype(op, {{"input", &x}, {"weight", &w}, {"bias", &b}});
  return {x, w, b};
}

// Output sizes in 128 bits: absurd stride, padding or dilation give an error, not an
// overflow; a size that does not fit 64 bits is refused.
using Wide = __int128;
int64_t output_size(const char* op, Wide v) {
  HG_CHECK(v >= Wide{INT64_MIN} && v <= Wide{INT64_MAX}, op, ": the output size overflows 64 bits (check stride, padding and dilation)");
  return static_cast<int64_t>(v);
}

std::string wide_str(Wide v) {
  if (v >= Wide{INT64_MIN} && v <= Wide{INT64_MAX}) return std::to_string(static_cast<int64_t>(v));
  return v > 0 ? "(over 2^63)" : "(under -2^63)";
}

void check_params(const char* op, const std::array<int64_t, 2>& stride, const std::array<int64_t, 2>& padding,
                  const std::array<int64_t, 2>& dilation, int64_t groups) {
  HG_CHECK(stride[0] > 0 && stride[1] > 0, op, ": stride must be positive, got ", pair_str(stride));
  HG_CHECK(dilation[0] > 0 && dilation[1] > 0, op, ": dilation must be positive, got ", pair_str(dilation));
  HG_CHECK(padding[0] >= 0 && padding[1] >= 0, op, ": padding must be non-negative, got ", pair_str(padding));
  HG_CHECK(groups > 0, op, ": groups must be positive, got ", groups);
}

void check_groups(const char* op, const char* what, int64_t channels, int64_t groups, const Tensor& t) {
  HG_CHECK(channels % groups == 0, op, ": ", what, " channels ", channels, " (", shape_of(t),
           ") are not divisible by groups ", groups);
}

void check_bias(const char* op, const Tensor& b, int64_t channels, const Tensor& w) {
  HG_CHECK(!b.defined() || (b.dim() == 1 && b.size(0) == channels), op, ": bias ", shape_of(b), " must be [", channels,
           "], one value per output channel of weight ", shape_of(w));
}

// Forward, bias and backward of both ops. A transposed conv is conv2d's input gradient, so
// it swaps kernels: its forward is dgrad, its input gradient is forward, and its weight
// gradient is wgrad with the input and the output gradient exchanged.
Tensor convolve(const char* op, bool transposed, const Tensor& x, const Tensor& w, const Tensor& b, const Shape& out,
                const Conv2dOptions& p) {
  Tensor xc = x.detach().contiguous(), wc = w.detach().contiguous();
  Tensor y = empty(out, {x.dtype(), x.device()});
  run_biased(transposed ? conv2d_dgrad_stub : conv2d_forward_stub, xc, wc, b.defined() ? b.detach().contiguous() : Tensor(),
             y, p);
  // Each operand is kept only if the other one's gradient needs it.
  autograd::record(op, {x, w, b}, y,
                   [x_saved = SavedTensor::input(w.requires_grad() ? xc : Tensor(), 0),
                    w_saved = SavedTensor::input(x.requires_grad() ? wc : Tensor(), 1), xshape = x.shape(),
                    wshape = w.shape(), p, transposed, has_bias = b.defined()](const Tensor& g0) {
                     const Tensor g = g0.contiguous();
                     const Tensor &xs = x_saved.unpack(), &ws = w_saved.unpack();
                     Tensor gx, gw, gb;
                     if (autograd::needs_input_grad(0)) {
                       gx = empty(xshape, {g.dtype(), g.device()});
                       run_biased(transposed ? conv2d_forward_stub : conv2d_dgrad_stub, g, ws, Tensor(), gx, p);
                     }
                     if (autograd::needs_input_grad(1)) {
                       gw = empty(wshape, {g.dtype(), g.device()});
                       if (transposed)
                         run_kernel(conv2d_wgrad_stub, xs, g, gw, p);
                       else
                         run_kernel(conv2d_wgrad_stub, g, xs, gw, p);
                     }
                     if (has_bias && autograd::needs_input_grad(2)) gb = sum(g, {0, 1, 2});
                     return TensorList{gx, gw, gb};
                   });
  return y;
}

}  // namespace

Tensor conv2d(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Conv2dOptions& o) {
  auto [x, w, b] = prepare("conv2d", x0, w0, b0);
  check_params("conv2d", o.stride, o.padding, o.dilation, o.groups);
  const int64_t N = x.size(0), H = x.size(1), W = x.size(2), C = x.size(3);
  const int64_t K = w.size(0), R = w.size(1), S = w.size(2), G = o.groups;
  check_groups("conv2d", "input", C, G, x);
  HG_CHECK(C == w.size(3) * G, "conv2d: input ", shape_of(x), " has ", C, " channels but weight ", shape_of(w),
           " expects ", w.size(3) * G, " (its last dim ", w.size(3), " times groups ", G, ")");
  check_groups("conv2d", "output", K, G, w);
  const Wide er = Wide{o.dilation[0]} * (R - 1) + 1, es = Wide{o.dilation[1]} * (S - 1) + 1;
  const Wide Hp = H + 2 * Wide{o.padding[0]}, Wp = W + 2 * Wide{o.padding[1]};
  HG_CHECK(er <= Hp && es <= Wp, "conv2d: kernel ", R, "x", S, " (", wide_str(er), "x", wide_str(es), " with dilation ",
           pair_str(o.dilation), ") is larger than the padded input ", wide_str(Hp), "x", wide_str(Wp), " (input ",
           shape_of(x), ", padding ", pair_str(o.padding), ")");
  const int64_t P = output_size("conv2d", (Hp - er) / o.stride[0] + 1),
                Q = output_size("conv2d", (Wp - es) / o.stride[1] + 1);
  check_bias("conv2d", b, K, w);

  return convolve("conv2d", false, x, w, b, {N, P, Q, K}, {o.stride, o.padding, o.dilation, G});
}

Tensor conv_transpose2d(const Tensor& x0, const Tensor& w0, const Tensor& b0, const ConvTranspose2dOptions& o) {
  auto [x, w, b] = prepare("conv_transpose2d", x0, w0, b0);
  check_params("conv_transpose2d", o.stride, o.padding, o.dilation, o.groups);
  for (int i = 0; i < 2; ++i)
    HG_CHECK(o.output_padding[i] >= 0 && (o.output_padding[i] < o.stride[i] || o.output_padding[i] < o.dilation[i]),
             "conv_transpose2d: output_padding ", pair_str(o.output_padding),
             " must be non-negative and smaller than either stride ", pair_str(o.stride), " or dilation ",
             pair_str(o.dilation));
  const int64_t N = x.size(0), H = x.size(1), W = x.size(2), Cin = x.size(3);
  const int64_t R = w.size(1), S = w.size(2), G = o.groups, Cout = w.size(3) * G;
  HG_CHECK(Cin == w.size(0), "conv_transpose2d: input ", shape_of(x), " has ", Cin, " channels but weight ",
           shape_of(w), " expects ", w.size(0), " (its first dim)");
  check_groups("conv_transpose2d", "input", Cin, G, x);
  const int64_t Ho = output_size("conv_transpose2d", Wide{H - 1} * o.stride[0] - 2 * Wide{o.padding[0]} +
                                                         Wide{o.dilation[0]} * (R - 1) + o.output_padding[0] + 1);
  const int64_t Wo = output_size("conv_transpose2d", Wide{W - 1} * o.stride[1] - 2 * Wide{o.padding[1]} +
                                                         Wide{o.dilation[1]} * (S - 1) + o.output_padding[1] + 1);
  HG_CHECK(Ho > 0 && Wo > 0, "conv_transpose2d: output size ", Ho, "x", Wo, " is not positive (input ", shape_of(x),
           ", weight ", shape_of(w), ", stride ", pair_str(o.stride), ", padding ", pair_str(o.padding), ")");
  check_bias("conv_transpose2d", b, Cout, w);

  // The conv2d whose input gradient this is: input [N, Ho, Wo, Cout], output [N, H, W, Cin],
  // and w read as its [K = Cin, R, S, Cout / groups] weight.
  return convolve("conv_transpose2d", true, x, w, b, {N, Ho, Wo, Cout}, {o.stride, o.padding, o.dilation, G});
}

}  // namespace hg
