// Elementwise ops: checks, dtype promotion, forward and backward side by side.
#include "ops/elementwise.h"

#include "framework/autograd.h"
#include "framework/precision.h"
#include "ops/elementwise_kernels.h"
#include "ops/reduce.h"

namespace hg {

DispatchStub<void(UnaryOp, const Tensor&, const Tensor&, double, double)> unary_stub("unary");
DispatchStub<void(BinaryOp, const Tensor&, const Tensor&, const Tensor&, double, double)> binary_stub("binary");
DispatchStub<void(const Tensor&, const Tensor&, const Tensor&, const Tensor&)> where_stub("where");

namespace {

bool is_comparison(BinaryOp op) { return op >= BinaryOp::eq; }

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  HG_CHECK(a.defined() && b.defined(), op, ": undefined tensor operand");
  HG_CHECK(a.device() == b.device(), op, ": operands are on different devices (", a.device(), " and ", b.device(),
           "); move one with .to(device)");
}

void check_floating(const char* op, const Tensor& x) {
  HG_CHECK(x.defined(), op, ": undefined tensor");
  HG_CHECK(is_floating(x.dtype()), op, ": expected a floating tensor (f64, f32, f16, bf16), got ",
           dtype_name(x.dtype()), shape_str(x.shape()));
}

}  // namespace

Tensor run_unary(UnaryOp op, const Tensor& x, double p0, double p1) {
  Tensor out = empty(x.shape(), {op == UnaryOp::isfinite ? b8 : x.dtype(), x.device()});
  if (out.numel()) unary_stub(x.device(), op, x, out, p0, p1);
  return out;
}

Tensor run_binary(BinaryOp op, const Tensor& a, const Tensor& b, double p0, double p1) {
  Shape s = broadcast_shapes(a.shape(), b.shape(), "elementwise");
  Tensor out = empty(s, {is_comparison(op) ? b8 : a.dtype(), a.device()});
  if (out.numel()) binary_stub(a.device(), op, a.expand(s), b.expand(s), out, p0, p1);
  return out;
}

namespace {

// Brings a and b to their promoted dtype; the casts are graph nodes.
std::pair<Tensor, Tensor> promote(const char* op, const Tensor& a, const Tensor& b) {
  check_same_device(op, a, b);
  broadcast_shapes(a.shape(), b.shape(), op);
  DType dt = promote_types(a.dtype(), b.dtype());
  return {a.to(dt), b.to(dt)};
}

}  // namespace

Tensor add(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote("add", a0, b0);
  Tensor y = run_binary(BinaryOp::add, a, b);
  autograd::record("add", {a, b}, y, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return TensorList{sum_to(g, sa), sum_to(g, sb)};
  });
  return y;
}

Tensor sub(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote("sub", a0, b0);
  Tensor y = run_binary(BinaryOp::sub, a, b);
  autograd::record("sub", {a, b}, y, [sa = a.shape(), sb = b.shape()](const Tensor& g) {
    return TensorList{sum_to(g, sa), autograd::needs_input_grad(1) ? sum_to(neg(g), sb) : Tensor()};
  });
  return y;
}

Tensor mul(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote("mul", a0, b0);
  Tensor y = run_binary(BinaryOp::mul, a, b);
  autograd::record("mul", {a, b}, y,
                   [a_saved = SavedTensor::input(a, 0), b_saved = SavedTensor::input(b, 1)](const Tensor& g) {
    const Tensor &a = a_saved.unpack(), &b = b_saved.unpack();
    return TensorList{autograd::needs_input_grad(0) ? sum_to(g * b, a.shape()) : Tensor(),
                      autograd::needs_input_grad(1) ? sum_to(g * a, b.shape()) : Tensor()};
  });
  return y;
}

Tensor div(const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote("div", a0, b0);
  if (!is_floating(a.dtype())) {  // true division, as in PyTorch: integers give f32
    a = a.to(f32);
    b = b.to(f32);
  }
  Tensor y = run_binary(BinaryOp::div, a, b);
  autograd::record("div", {a, b}, y,
                   [sa = a.shape(),
                    b_saved = SavedTensor::input(b, 1),
                    y_saved = SavedTensor::output(y)](const Tensor& g) {
    const Tensor &b = b_saved.unpack(), &y = y_saved.unpack();
    Tensor gb = g / b;
    return TensorList{sum_to(gb, sa), autograd::needs_input_grad(1) ? sum_to(neg(gb * y), b.shape()) : Tensor()};
  });
  return y;
}

Tensor pow(const Tensor& a1, const Tensor& b1) {
  const TensorList in = autocast(PrecisionClass::fp32, {a1, b1});
  auto [a, b] = promote("pow", in[0], in[1]);
  check_floating("pow", a);
  Tensor y = run_binary(BinaryOp::pow, a, b);
  autograd::record("pow", {a, b}, y,
                   [a_saved = SavedTensor::input(a, 0),
                    b_saved = SavedTensor::input(b, 1),
                    y_saved = SavedTensor::output(y)](const Tensor& g) {
    const Tensor &a = a_saved.unpack(), &b = b_saved.unpack(), &y = y_saved.unpack();
    Tensor ga, gb;
    // d/da a^b = b a^(b-1); d/db a^b = a^b log a (taken as 0 where a == 0, as PyTorch does)
    if (autograd::needs_input_grad(0)) ga = sum_to(g * b * pow(a, b - 1.0), a.shape());
    if (autograd::needs_input_grad(1)) {
      Tensor loga = where(eq(a, zeros_like(a)), zeros_like(a), log(a));
      gb = sum_to(g * y * loga, b.shape());
    }
    return TensorList{ga, gb};
  });
  return y;
}

namespace {
// maximum/minimum: the gradient goes to the selected input; on ties it is split evenly.
Tensor select_extreme(const char* name, BinaryOp op, const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote(name, a0, b0);
  Tensor y = run_binary(op, a, b);
  autograd::record(name, {a, b}, y,
                   [a_saved = SavedTensor::input(a, 0),
                    b_saved = SavedTensor::input(b, 1),
                    y_saved = SavedTensor::output(y)](const Tensor& g) {
    const Tensor &a = a_saved.unpack(), &b = b_saved.unpack(), &y = y_saved.unpack();
    Tensor one = ones_like(y), zero = zeros_like(y);
    Tensor wa = where(eq(a.expand(y.shape()), y), one, zero);
    Tensor wb = where(eq(b.expand(y.shape()), y), one, zero);
    Tensor tot = maximum(wa + wb, one);
    return TensorList{sum_to(g * wa / tot, a.shape()), sum_to(g * wb / tot, b.shape())};
  });
  return y;
}
}  // namespace

Tensor maximum(const Tensor& a, const Tensor& b) { return select_extreme("maximum", BinaryOp::maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return select_extreme("minimum", BinaryOp::minimum, a, b); }

namespace {

// An integer or bool tensor meeting an integral scalar: the op runs in i64 against the scalar
// as an exact i64 tensor (a double parameter would round values beyond 2^53). Integers carry
// no gradient, so nothing is recorded.
Tensor integral_scalar_op(BinaryOp op, const Tensor& a, const Scalar& s, bool scalar_first = false) {
  HG_CHECK(a.defined(), op_label(op), ": undefined tensor");
  const Tensor x = a.to(i64);
  const Tensor k = from_data<int64_t>({s.to_i64()}, {}, {i64, a.device()});
  return scalar_first ? run_binary(op, k, x) : run_binary(op, x, k);
}

// The floating tensor a (op) s runs in: a itself, or f32 for an integer or bool tensor
// (PyTorch's rule for a floating scalar, and for true division).
Tensor floating_operand(const char* op, const Tensor& a) {
  HG_CHECK(a.defined(), op, ": undefined tensor");
  return is_floating(a.dtype()) ? a : a.to(f32);
}

// add, sub, mul and rsub follow scalar_result_dtype (the one promotion rule): i64 here,
// otherwise the floating dtype floating_operand gives.
bool integral_case(const Tensor& a, const Scalar& s) { return a.defined() && scalar_result_dtype(a.dtype(), s) == i64; }

}  // namespace

Tensor add(const Tensor& a0, Scalar s) {
  if (integral_case(a0, s)) return integral_scalar_op(BinaryOp::add, a0, s);
  const Tensor a = floating_operand("add", a0);
  Tensor y = run_unary(UnaryOp::add_scalar, a, s.to_double());
  autograd::record("add", {a}, y, [](const Tensor& g) { return TensorList{g}; });
  return y;
}

Tensor sub(const Tensor& a0, Scalar s) {
  if (integral_case(a0, s)) return integral_scalar_op(BinaryOp::sub, a0, s);
  return add(a0, -s.to_double());
}

Tensor mul(const Tensor& a0, Scalar s) {
  if (integral_case(a0, s)) return integral_scalar_op(BinaryOp::mul, a0, s);
  const Tensor a = floating_operand("mul", a0);
  const double d = s.to_double();
  Tensor y = run_unary(UnaryOp::mul_scalar, a, d);
  autograd::record("mul", {a}, y, [d](const Tensor& g) { return TensorList{mul(g, d)}; });
  return y;
}

Tensor div(const Tensor& a0, Scalar s) {
  const Tensor a = floating_operand("div", a0);
  const double d = s.to_double();
  Tensor y = run_unary(UnaryOp::div_scalar, a, d);
  autograd::record("div", {a}, y, [d](const Tensor& g) { return TensorList{div(g, d)}; });
  return y;
}

Tensor pow(const Tensor& a0, Scalar s) {
  HG_CHECK(a0.defined(), "pow: undefined tensor");
  HG_CHECK(is_floating(a0.dtype()) || !s.is_integral(), "pow: an ", dtype_name(a0.dtype()),
           " tensor with the integer exponent ", s.to_i64(),
           " is not supported; pass a floating exponent (2.0, giving f32) or cast the tensor to a floating dtype");
  const double p = s.to_double();
  const Tensor a = autocast(PrecisionClass::fp32, {floating_operand("pow", a0)})[0];
  Tensor y = run_unary(UnaryOp::pow_scalar, a, p);
  autograd::record("pow", {a}, y, [a_saved = SavedTensor::input(a, 0), p](const Tensor& g) {
    return TensorList{g * mul(pow(a_saved.unpack(), p - 1.0), p)};
  });
  return y;
}

Tensor rsub(const Tensor& a0, Scalar s) {
  if (integral_case(a0, s)) return integral_scalar_op(BinaryOp::sub, a0, s, /*scalar_first=*/true);
  const Tensor a = floating_operand("rsub", a0);
  Tensor y = run_unary(UnaryOp::rsub_scalar, a, s.to_double());
  autograd::record("rsub", {a}, y, [](const Tensor& g) { return TensorList{neg(g)}; });
  return y;
}

Tensor rdiv(const Tensor& a0, Scalar s) {
  const Tensor a = floating_operand("rdiv", a0);
  Tensor y = run_unary(UnaryOp::rdiv_scalar, a, s.to_double());
  autograd::record("rdiv", {a}, y,
                   [a_saved = SavedTensor::input(a, 0), y_saved = SavedTensor::output(y)](const Tensor& g) {
    return TensorList{neg(g * y_saved.unpack() / a_saved.unpack())};
  });
  return y;
}

Tensor neg(const Tensor& x) {
  Tensor y = run_unary(UnaryOp::neg, x);
  autograd::record("neg", {x}, y, [](const Tensor& g) { return TensorList{neg(g)}; });
  return y;
}

Tensor exp(const Tensor& x0) {
  check_floating("exp", x0);
  const Tensor x = autocast(PrecisionClass::fp32, {x0})[0];
  Tensor y = run_unary(UnaryOp::exp, x);
  autograd::record("exp", {x}, y,
                   [y_saved = SavedTensor::output(y)](const Tensor& g) { return TensorList{g * y_saved.unpack()}; });
  return y;
}

Tensor log(const Tensor& x0) {
  check_floating("log", x0);
  const Tensor x = autocast(PrecisionClass::fp32, {x0})[0];
  Tensor y = run_unary(UnaryOp::log, x);
  autograd::record("log", {x}, y,
                   [x_saved = SavedTensor::input(x, 0)](const Tensor& g) { return TensorList{g / x_saved.unpack()}; });
  return y;
}

Tensor sqrt(const Tensor& x) {
  check_floating("sqrt", x);
  Tensor y = run_unary(UnaryOp::sqrt, x);
  autograd::record("sqrt", {x}, y, [y_saved = SavedTensor::output(y)](const Tensor& g) {
    return TensorList{g / mul(y_saved.unpack(), 2.0)};
  });
  return y;
}

Tensor rsqrt(const Tensor& x) {
  check_floating("rsqrt", x);
  Tensor y = run_unary(UnaryOp::rsqrt, x);
  autograd::record("rsqrt", {x}, y, [y_saved = SavedTensor::output(y)](const Tensor& g) {
    const Tensor& y = y_saved.unpack();
    return TensorList{g * mul(y * y * y, -0.5)};
  });
  return y;
}

Tensor abs(const Tensor& x) {
  Tensor y = run_unary(UnaryOp::abs, x);
  autograd::record("abs", {x}, y, [x_saved = SavedTensor::input(x, 0)](const Tensor& g) {
    return TensorList{g * sign(x_saved.unpack())};
  });
  return y;
}

Tensor square(const Tensor& x) {
  Tensor y = run_unary(UnaryOp::square, x);
  autograd::record("square", {x}, y, [x_saved = SavedTensor::input(x, 0)](const Tensor& g) {
    return TensorList{g * mul(x_saved.unpack(), 2.0)};
  });
  return y;
}

Tensor sign(const Tensor& x) { return run_unary(UnaryOp::sign, x); }

Tensor clamp(const Tensor& x, double lo, double hi) {
  HG_CHECK(!(lo > hi), "clamp: lower bound ", lo, " exceeds upper bound ", hi);
  Tensor y = run_unary(UnaryOp::clamp, x, lo, hi);
  autograd::record("clamp", {x}, y, [x_saved = SavedTensor::input(x, 0), lo, hi](const Tensor& g) {
    return TensorList{run_binary(BinaryOp::clamp_grad, g, x_saved.unpack(), lo, hi)};
  });
  return y;
}

namespace {
Tensor compare(const char* name, BinaryOp op, const Tensor& a0, const Tensor& b0) {
  auto [a, b] = promote(name, a0, b0);
  return run_binary(op, a.detach(), b.detach());
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) { return compare("eq", BinaryOp::eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return compare("ne", BinaryOp::ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return compare("lt", BinaryOp::lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return compare("le", BinaryOp::le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return compare("gt", BinaryOp::gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return compare("ge", BinaryOp::ge, a, b); }
// The scalar is compared in f32 (f64 for f64 tensors), not rounded to the tensor's dtype;
// beyond f32's range it rounds to ±inf first, as in PyTorch (scalar_tensor would refuse it).
static Tensor scalar_like(const Tensor& a, double s) {
  return a.dtype() == f64 ? scalar_tensor(s, {f64, a.device()})
                          : scalar_tensor(static_cast<double>(static_cast<float>(s)), {f32, a.device()});
}
Tensor gt(const Tensor& a, double s) { return gt(a, scalar_like(a, s)); }
Tensor lt(const Tensor& a, double s) { return lt(a, scalar_like(a, s)); }
Tensor isfinite(const Tensor& x) { return run_unary(UnaryOp::isfinite, x.detach()); }

Tensor where(const Tensor& cond, const Tensor& a0, const Tensor& b0) {
  HG_CHECK(cond.defined() && cond.dtype() == b8, "where: the condition must be a bool tensor, got ",
           cond.defined() ? dtype_name(cond.dtype()) : "undefined");
  check_same_device("where", cond, a0);
  auto [a, b] = promote("where", a0, b0);
  Shape s = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor y = empty(s, {a.dtype(), a.device()});
  if (y.numel()) where_stub(y.device(), cond.expand(s), a.expand(s), b.expand(s), y);
  autograd::record("where", {a, b}, y,
                   [c_saved = SavedTensor::other(cond, "condition"), sa = a.shape(), sb = b.shape()](const Tensor& g) {
    const Tensor& c = c_saved.unpack();
    Tensor z = zeros({}, {g.dtype(), g.device()});
    return TensorList{autograd::needs_input_grad(0) ? sum_to(where(c, g, z), sa) : Tensor(),
                      autograd::needs_input_grad(1) ? sum_to(where(c, z, g), sb) : Tensor()};
  });
  return y;
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator-(const Tensor& x) { return neg(x); }
Tensor operator+(const Tensor& a, Scalar s) { return add(a, s); }
Tensor operator+(Scalar s, const Tensor& a) { return add(a, s); }
Tensor operator-(const Tensor& a, Scalar s) { return sub(a, s); }
Tensor operator-(Scalar s, const Tensor& a) { return rsub(a, s); }
Tensor operator*(const Tensor& a, Scalar s) { return mul(a, s); }
Tensor operator*(Scalar s, const Tensor& a) { return mul(a, s); }
Tensor operator/(const Tensor& a, Scalar s) { return div(a, s); }
Tensor operator/(Scalar s, const Tensor& a) { return rdiv(a, s); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator>(const Tensor& a, double s) { return gt(a, s); }
Tensor operator<(const Tensor& a, double s) { return lt(a, s); }

}  // namespace hg
