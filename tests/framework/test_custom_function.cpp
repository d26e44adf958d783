// Custom autograd functions (autograd::Function): forward runs unrecorded, backward gets
// the saved tensors and data, gradients checked in f64, misuse reported by name.
#include <catch2/catch.hpp>

#include <cmath>

#include "halfgrad.h"

using namespace hg;
using autograd::FunctionCtx;

namespace {

// y = exp(x) * s: backward reuses the saved output, as the docs' example does.
struct ScaledExp : autograd::Function<ScaledExp> {
  static constexpr const char* name = "scaled_exp";
  static Tensor forward(FunctionCtx& ctx, const TensorList& in, double s) {
    Tensor y = exp(in[0]) * s;
    ctx.save_for_backward({y});
    return y;
  }
  static TensorList backward(FunctionCtx& ctx, const Tensor& g) { return {g * ctx.saved_tensors()[0]}; }
};

// y = a * b with a backward that skips what is not needed.
struct Mul : autograd::Function<Mul> {
  static constexpr const char* name = "custom_mul";
  static Tensor forward(FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0], in[1]});
    ctx.saved_data["calls"] += 1;
    CHECK_FALSE(in[0].requires_grad());  // forward sees detached inputs
    return in[0] * in[1];
  }
  static TensorList backward(FunctionCtx& ctx, const Tensor& g) {
    const TensorList& s = ctx.saved_tensors();
    return {ctx.needs_input_grad(0) ? g * s[1] : Tensor(), ctx.needs_input_grad(1) ? g * s[0] : Tensor()};
  }
};

struct WrongCount : autograd::Function<WrongCount> {
  static constexpr const char* name = "wrong_count";
  static Tensor forward(FunctionCtx&, const TensorList& in) { return in[0] * 2.0; }
  static TensorList backward(FunctionCtx&, const Tensor& g) { return {g, g}; }
};

}  // namespace

TEST_CASE("a custom Function's gradients pass gradcheck", "[custom_function]") {
  Generator g(1);
  Tensor x = uniform({3, 2}, -1, 1, {f64}, &g).set_requires_grad();
  Tensor y = uniform({3, 2}, -1, 1, {f64}, &g).set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return ScaledExp::apply({in[0]}, 3.0); }, {x}));
  CHECK(gradcheck([](const TensorList& in) { return Mul::apply({in[0], in[1]}); }, {x, y}));
  Tensor out = ScaledExp::apply({x}, 2.0);
  CHECK(out.grad_fn()->name() == "scaled_exp");
  CHECK(allclose(out, exp(x) * 2.0));
  // Only one input requires grad: backward is asked for that one.
  Tensor c = tensor({2, 3}, {f64});
  Tensor w = tensor({5, 7}, {f64}).set_requires_grad();
  sum(Mul::apply({c, w})).backward();
  CHECK(w.grad().to_vector<double>() == std::vector<double>{2, 3});
  // No input requires grad: nothing is recorded.
  CHECK_FALSE(Mul::apply({c, c}).requires_grad());
}

TEST_CASE("a custom Function's backward that returns the wrong gradients is named", "[custom_function][errors]") {
  Tensor x = tensor({1, 2}, {f64}).set_requires_grad();
  CHECK_THROWS_WITH(sum(WrongCount::apply({x})).backward(),
                    Catch::Contains("wrong_count: backward returned 2 gradients for 1 inputs"));
}

namespace {

// The example of docs/custom-function.md, verbatim in substance.
struct Softplus : autograd::Function<Softplus> {
  static constexpr const char* name = "softplus";
  static Tensor forward(FunctionCtx& ctx, const TensorList& in, double beta) {
    const Tensor& x = in[0];
    ctx.save_for_backward({x});
    ctx.saved_data["beta"] = beta;
    Tensor bx = x * beta;
    return (relu(bx) + log(exp(-abs(bx)) + 1.0)) / beta;
  }
  static TensorList backward(FunctionCtx& ctx, const Tensor& grad) {
    const Tensor x = ctx.saved_tensors()[0];
    return {grad * sigmoid(x * ctx.saved_data.at("beta"))};
  }
};

}  // namespace

TEST_CASE("the softplus example of docs/custom-function.md works as the page says", "[custom_function][docs]") {
  Tensor x = tensor({-100, 0, 100}, {f64}).set_requires_grad();
  Tensor y = Softplus::apply({x}, 1.0);
  const std::vector<double> yv = y.to_vector<double>();
  CHECK(yv[0] == 0.0);  // log(1 + 3.7e-44): the 1 absorbs the tiny term in f64
  CHECK(yv[1] == Approx(std::log(2.0)).epsilon(1e-15));
  CHECK(yv[2] == Approx(100.0).epsilon(1e-15));
  sum(y).backward();
  const std::vector<double> gv = x.grad().to_vector<double>();
  CHECK(gv[0] == Approx(std::exp(-100.0)).epsilon(1e-10));
  CHECK(gv[1] == 0.5);
  CHECK(gv[2] == 1.0);
  Tensor xs = tensor({-3, 0.5, 2}, {f64}).set_requires_grad();
  CHECK(gradcheck([](const TensorList& in) { return Softplus::apply({in[0]}, 2.0); }, {xs}));
}

TEST_CASE("a tensor a custom Function saved and then modified in place is refused in backward", "[custom_function][version]") {
  Tensor c = tensor({2, 3}, {f64});
  Tensor w = tensor({5, 7}, {f64}).set_requires_grad();
  Tensor l = sum(Mul::apply({c, w}));
  fill_(c, 0.0);  // the gradient of w would silently become 0
  CHECK_THROWS_WITH(l.backward(), Catch::Contains("custom_mul") && Catch::Contains("modified by an in-place operation"));
}
