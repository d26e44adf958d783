// Tour step 14 (docs/amp.md): (a) why backward runs outside the autocast region: the ops
// a backward calls are ops too, and inside the region the policy applies to them, so the
// gradient of a layer deliberately kept in f32 is computed by an f16 matmul (here it
// overflows). (b) A gradient penalty from a scaled loss: autograd::grad of scale(loss)
// returns S x g; unscale it by hand (in f32) before forming the penalty.
#include <cmath>
#include <cstdio>

#include "halfgrad.h"

using namespace hg;

namespace {

// fc1 sees large inputs, so it is kept in f32 (debugging-amp.md, recipe 8); fc2 runs in f16.
struct Net : nn::Module {
  HG_CHILD(nn::Linear, fc1, 4, 8);
  HG_CHILD(nn::Linear, fc2, 8, 1);
  Tensor forward_impl(const Tensor& x) override {
    Tensor h;
    {
      amp::Autocast off(false);
      h = relu((*fc1)(x));
    }
    return (*fc2)(h);
  }
  std::string type_name() const override { return "Net"; }
};

double norm(const Tensor& t) { return std::sqrt(sum(square(t.to(f32))).item<double>()); }

}  // namespace

int main() {
  manual_seed(0);
  Net model;
  Generator gen(1);
  const Tensor x = mul(randn({64, 4}, {}, &gen), 300.0);  // large inputs
  const Tensor y = randn({64, 1}, {}, &gen);
  const double S = 1024;

  std::printf("(a) fc1 kept in f32, fc2 in f16, loss scale %g\n", S);
  for (bool inside : {false, true}) {
    Tensor loss;
    {
      amp::Autocast ac(f16);
      loss = mse_loss(model(x), y);
      if (inside) mul(loss, S).backward();
    }
    if (!inside) mul(loss, S).backward();
    const Tensor& g = model.fc1->weight.grad();
    const amp::TensorStats st = amp::tensor_stats(g);
    std::printf("backward %s the region: fc1.weight.grad %s, %lld non-finite of %lld, largest finite %.4g\n",
                inside ? "inside " : "outside", dtype_name(g.dtype()), static_cast<long long>(st.nonfinite()),
                static_cast<long long>(st.numel), st.amax);
    model.zero_grad();
  }

  std::printf("\n(b) penalty |dL/dw|^2 for fc2.weight, from autograd::grad\n");
  const Tensor& w = model.fc2->weight;
  const Tensor xs = randn({64, 4}, {}, &gen);  // ordinary inputs this time
  Tensor ref;
  {
    const Tensor loss = mse_loss(model(xs), y);  // f32 throughout: the reference
    ref = autograd::grad({loss}, {w}, {ones({}, {})})[0];
  }
  std::printf("f32 reference:                         %.6g\n", std::pow(norm(ref), 2));
  Tensor loss;
  {
    amp::Autocast ac(f16);
    loss = mse_loss(model(xs), y);
  }
  amp::GradScaler scaler({.init_scale = S});
  const Tensor scaled = scaler.scale(loss);
  const Tensor gs = autograd::grad({scaled}, {w}, {ones({}, {})}, true)[0];
  std::printf("from scale(loss), not unscaled:         %.6g (S^2 = %g times too large)\n", std::pow(norm(gs), 2),
              S * S);
  const Tensor g = mul(gs, 1.0 / scaler.get_scale());  // the manual unscale, in f32
  std::printf("from scale(loss), times 1/S:            %.6g\n", std::pow(norm(g), 2));
  return 0;
}
