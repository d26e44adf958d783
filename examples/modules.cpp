// docs/modules.md, section by section: writing a module (HG_CHILD, HG_PARAM, HG_BUFFER,
// forward_impl, type_name), a two-input module, returning a model from a function,
// AdamW with a scheduler and their state, argmax/arange, gradcheck and custom ops.
// `build/examples/modules SECTION` runs one section (the doc quotes each).
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

// --- define: a module with a child, a parameter and a buffer
// y = fc(x) * gain; counts the forwards it ran in training (a buffer: saved, not trained).
class ScaledLinear : public nn::Module {
 public:
  ScaledLinear(int64_t in, int64_t out) : in_features(in), out_features(out) {}
  std::string type_name() const override { return "ScaledLinear"; }

  const int64_t in_features, out_features;  // declared before the members that use them
  HG_CHILD(nn::Linear, fc, in_features, out_features);
  HG_PARAM(gain, ones({out_features}));
  HG_BUFFER(calls, zeros({}, {i64}));

 protected:
  Tensor forward_impl(const Tensor& x) override {
    if (is_training()) {
      NoGrad ng;
      copy_(calls, add(calls, 1.0));
    }
    return mul((*fc)(x), gain);
  }
};

void define() {
  manual_seed(0);
  ScaledLinear m(4, 3);
  m(randn({2, 4}));
  std::printf("%s", m.summary().c_str());
  std::printf("calls = %lld\n", static_cast<long long>(m.calls.item<int64_t>()));
}

// --- multi-input: operator() with two arguments, its body inside scoped()
// out = attention-free gating: a * sigmoid(gate(b)).
class Gate : public nn::Module {
 public:
  explicit Gate(int64_t dim) : dim(dim) {}
  std::string type_name() const override { return "Gate"; }
  Tensor operator()(const Tensor& a, const Tensor& b) {
    return scoped([&] { return mul(a, sigmoid((*gate)(b))); });
  }

  const int64_t dim;
  HG_CHILD(nn::Linear, gate, dim, dim);
};

void multi_input() {
  manual_seed(0);
  Gate g(4);
  Tensor out = g(randn({2, 4}), randn({2, 4}));
  std::printf("Gate(a, b): %s\n", shape_str(out.shape()).c_str());
  try {
    g.forward(randn({2, 4}));  // the inherited single-input call is refused
  } catch (const Error& e) {
    std::printf("Gate.forward(x): %s\n", e.what());
  }
}

// --- factory: modules cannot be copied or moved, so a function returns a pointer
std::shared_ptr<nn::Sequential> make_mlp(int64_t in, int64_t hidden, int64_t out) {
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(in, hidden), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(hidden, out));
}

// A model that takes a built module as a child: register_module with the pointer.
class Classifier : public nn::Module {
 public:
  explicit Classifier(std::shared_ptr<nn::Module> body) : body(register_module("body", std::move(body))) {}
  std::string type_name() const override { return "Classifier"; }
  std::shared_ptr<nn::Module> body;

 protected:
  Tensor forward_impl(const Tensor& x) override { return log_softmax((*body)(x), -1); }
};

void factory() {
  manual_seed(0);
  std::shared_ptr<nn::Sequential> mlp = make_mlp(4, 8, 3);
  Classifier model(make_mlp(4, 8, 3));
  std::printf("make_mlp: %zu parameters; Classifier:", mlp->parameters().size());
  for (auto& [name, p] : model.named_parameters()) std::printf(" %s", name.c_str());
  std::printf("\n");
}

// --- optim: AdamW with a cosine schedule; both states go into a checkpoint
void optim_state() {
  manual_seed(0);
  nn::Linear model(4, 1);
  optim::AdamW opt(model.named_parameters(), {.lr = 1e-2, .weight_decay = 0.05});
  optim::CosineAnnealingLR sched(opt, /*T_max=*/10, /*eta_min=*/1e-4);
  const Tensor x = randn({16, 4}), y = randn({16, 1});
  for (int step = 0; step < 3; ++step) {
    mse_loss(model(x), y).backward();
    opt.step();
    opt.zero_grad();
    sched.step();
    std::printf("step %d: lr %.6f\n", step, sched.get_last_lr()[0]);
  }
  std::printf("scheduler state:");
  for (auto& [k, v] : sched.state_dict()) std::printf(" %s=%g", k.c_str(), v.item<double>());
  std::printf("\noptimizer state:");
  for (auto& [k, v] : opt.state_dict()) std::printf(" %s", k.c_str());
  std::printf("\n");
}

// --- index: argmax and arange (accuracy, positions)
void index() {
  Tensor logits = tensor({0.1, 2.0, -1.0, 3.0, 0.5, 0.2}).reshape({2, 3});
  Tensor pred = argmax(logits, -1);  // i64 [2]
  Tensor target = tensor({1, 1}, {i64});
  const double accuracy = mean(eq(pred, target).to(f32)).item<double>();
  std::printf("argmax: %s of dtype %s, accuracy %g\n", shape_str(pred.shape()).c_str(), dtype_name(pred.dtype()),
              accuracy);
  Tensor pos = arange(0, 5, 1, {i64});  // 0..4, e.g. position ids
  Tensor steps = arange(0.0, 1.0, 0.25);  // f32 by default
  std::printf("arange(0, 5, 1, {i64}):");
  for (double v : pos.to_vector<double>()) std::printf(" %g", v);
  std::printf("\narange(0.0, 1.0, 0.25):");
  for (double v : steps.to_vector<double>()) std::printf(" %g", v);
  std::printf(" (%s)\n", dtype_name(steps.dtype()));
}

// --- gradcheck: f64 inputs; a mismatch throws. And where to cast a custom op to f32.
struct Cube : autograd::Function<Cube> {
  static constexpr const char* name = "cube";
  static Tensor forward(autograd::FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    return mul(mul(in[0], in[0]), in[0]);
  }
  static TensorList backward(autograd::FunctionCtx& ctx, const Tensor& g) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(mul(mul(x, x), 3.0), g)};
  }
};

// The same op casting inside forward, the advice docs/custom-function.md no longer gives.
struct CubeCastInside : autograd::Function<CubeCastInside> {
  static constexpr const char* name = "cube_cast_inside";
  static Tensor forward(autograd::FunctionCtx& ctx, const TensorList& in) {
    const Tensor x = in[0].to(f32);
    ctx.save_for_backward({x});
    return mul(mul(x, x), x);
  }
  static TensorList backward(autograd::FunctionCtx& ctx, const Tensor& g) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(mul(mul(x, x), 3.0), g)};
  }
};

// A backward with a wrong factor (2 x^2 instead of 3 x^2), for gradcheck to catch.
struct WrongCube : autograd::Function<WrongCube> {
  static constexpr const char* name = "wrong_cube";
  static Tensor forward(autograd::FunctionCtx& ctx, const TensorList& in) {
    ctx.save_for_backward({in[0]});
    return mul(mul(in[0], in[0]), in[0]);
  }
  static TensorList backward(autograd::FunctionCtx& ctx, const Tensor& g) {
    const Tensor x = ctx.saved_tensors()[0];
    return {mul(mul(mul(x, x), 2.0), g)};
  }
};

void check(const char* what, const std::function<Tensor(const TensorList&)>& f, const Tensor& x) {
  try {
    gradcheck(f, {x});
    std::printf("%-30s passes\n", what);
  } catch (const Error& e) {
    std::printf("%-30s throws: %s\n", what, e.what());
  }
}

void gradcheck_section() {
  Tensor x = tensor({0.5, -1.25, 2.0}, {f64}).set_requires_grad();
  check("Cube", [](const TensorList& in) { return Cube::apply({in[0]}); }, x);
  check("WrongCube", [](const TensorList& in) { return WrongCube::apply({in[0]}); }, x);
  check("Cube, f32 input",
        [](const TensorList& in) { return Cube::apply({in[0]}); }, x.detach().to(f32).set_requires_grad());
  // The recommended way to run an op in f32 under autocast: a no-op outside autocast and
  // for f64, so gradcheck still sees f64 arithmetic.
  check("Cube via autocast(fp32, ...)", [](const TensorList& in) { return Cube::apply(autocast(PrecisionClass::fp32, {in[0]})); }, x);
  check("CubeCastInside", [](const TensorList& in) { return CubeCastInside::apply({in[0]}); }, x);
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::pair<std::string, std::function<void()>>> sections = {
      {"define", define}, {"multi-input", multi_input}, {"factory", factory},
      {"optim", optim_state}, {"index", index}, {"gradcheck", gradcheck_section}};
  const std::string only = argc > 1 ? argv[1] : "";
  bool found = only.empty();
  for (auto& [name, f] : sections) {
    if (!only.empty() && name != only) continue;
    found = true;
    if (only.empty()) std::printf("== %s\n", name.c_str());
    f();
  }
  if (!found) {
    std::fprintf(stderr, "modules: unknown section '%s'; valid:", only.c_str());
    for (auto& [name, f] : sections) std::fprintf(stderr, " %s", name.c_str());
    std::fprintf(stderr, "\n");
    return 2;
  }
  return 0;
}
