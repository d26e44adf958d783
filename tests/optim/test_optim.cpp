// Optimizers and gradient clipping: the first steps against PyTorch's formulas written
// out in double, f16/bf16 parameters with f32 state and one rounding, groups, state
// dict round trips, step_if, clipping and the errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>

#include "halfgrad.h"

using namespace hg;
using namespace hg::optim;

namespace {

using Vec = std::vector<double>;

Tensor param(const Vec& v, DType dt = f64) {
  return from_vector(v, {static_cast<int64_t>(v.size())}, {dt}).set_requires_grad();
}
void give_grad(const Tensor& p, const Vec& g, DType dt) {
  Tensor t = p;
  t.set_grad(from_vector(g, {static_cast<int64_t>(g.size())}, {dt}));
}
double round_to(double x, DType dt) { return from_vector({x}, {1}, {dt}).item<double>(); }

// Three steps' gradients for a four-element parameter; signs and sizes vary.
const Vec kP0 = {0.5, -1.25, 2.0, 0.03};
const std::vector<Vec> kGrads = {{0.1, -0.4, 1.5, 0.0}, {-0.3, -0.2, 0.9, 2e-3}, {0.05, 0.6, -1.1, -4e-3}};

// A reference optimizer in double: advances p (and its own state) by one step.
using RefStep = std::function<void(Vec& p, const Vec& g, int t)>;

// Runs `opt` and `ref` for the three steps and compares after each.
void check_three_steps(Optimizer& opt, const Tensor& p, RefStep ref, DType dt, double tol) {
  Vec expect = kP0;
  for (int t = 1; t <= 3; ++t) {
    give_grad(p, kGrads[t - 1], dt);
    opt.step();
    ref(expect, kGrads[t - 1], t);
    Vec got = p.to_vector<double>();
    for (size_t j = 0; j < got.size(); ++j) {
      INFO(opt.name() << " step " << t << " element " << j);
      CHECK(got[j] == Approx(expect[j]).epsilon(tol).margin(tol));
    }
  }
}

RefStep sgd_ref(double lr, double momentum, double dampening, double wd, bool nesterov) {
  auto buf = std::make_shared<Vec>(4, 0.0);
  return [=](Vec& p, const Vec& g, int t) {
    for (size_t j = 0; j < p.size(); ++j) {
      double d = g[j] + wd * p[j];
      if (momentum != 0) {
        (*buf)[j] = t == 1 ? d : momentum * (*buf)[j] + (1 - dampening) * d;
        d = nesterov ? d + momentum * (*buf)[j] : (*buf)[j];
      }
      p[j] -= lr * d;
    }
  };
}

RefStep adam_ref(double lr, double b1, double b2, double eps, double wd, bool decoupled, bool amsgrad) {
  auto m = std::make_shared<Vec>(4, 0.0), v = std::make_shared<Vec>(4, 0.0), vmax = std::make_shared<Vec>(4, 0.0);
  return [=](Vec& p, const Vec& g, int t) {
    for (size_t j = 0; j < p.size(); ++j) {
      double gj = g[j];
      if (decoupled) p[j] *= 1 - lr * wd;
      else gj += wd * p[j];
      (*m)[j] = b1 * (*m)[j] + (1 - b1) * gj;
      (*v)[j] = b2 * (*v)[j] + (1 - b2) * gj * gj;
      (*vmax)[j] = std::max((*vmax)[j], (*v)[j]);
      double second = amsgrad ? (*vmax)[j] : (*v)[j];
      double denom = std::sqrt(second) / std::sqrt(1 - std::pow(b2, t)) + eps;
      p[j] -= lr / (1 - std::pow(b1, t)) * (*m)[j] / denom;
    }
  };
}

RefStep rmsprop_ref(double lr, double alpha, double eps, double wd, double momentum, bool centered) {
  auto sq = std::make_shared<Vec>(4, 0.0), ga = std::make_shared<Vec>(4, 0.0), buf = std::make_shared<Vec>(4, 0.0);
  return [=](Vec& p, const Vec& g, int) {
    for (size_t j = 0; j < p.size(); ++j) {
      double gj = g[j] + wd * p[j];
      (*sq)[j] = alpha * (*sq)[j] + (1 - alpha) * gj * gj;
      double var = (*sq)[j];
      if (centered) {
        (*ga)[j] = alpha * (*ga)[j] + (1 - alpha) * gj;
        var -= (*ga)[j] * (*ga)[j];
      }
      double avg = std::sqrt(var) + eps;
      if (momentum > 0) {
        (*buf)[j] = momentum * (*buf)[j] + gj / avg;
        p[j] -= lr * (*buf)[j];
      } else {
        p[j] -= lr * gj / avg;
      }
    }
  };
}

double tol_for(DType dt) { return dt == f64 ? 1e-12 : 2e-6; }

}  // namespace

TEST_CASE("SGD's first three steps follow PyTorch's formula", "[optim]") {
  for (DType dt : {f64, f32}) {
    for (SGDOptions o : {SGDOptions{.lr = 0.1},
                         SGDOptions{.lr = 0.05, .momentum = 0.9, .dampening = 0.2, .weight_decay = 0.01},
                         SGDOptions{.lr = 0.05, .momentum = 0.8, .weight_decay = 0.1, .nesterov = true}}) {
      Tensor p = param(kP0, dt);
      SGD opt({p}, o);
      check_three_steps(opt, p, sgd_ref(o.lr, o.momentum, o.dampening, o.weight_decay, o.nesterov), dt, tol_for(dt));
    }
  }
}

TEST_CASE("Adam, AdamW and AMSGrad's first three steps follow PyTorch's formulas", "[optim]") {
  for (DType dt : {f64, f32}) {
    {
      Tensor p = param(kP0, dt);
      Adam opt({p});  // defaults: lr 1e-3, betas (0.9, 0.999), eps 1e-8, no weight decay
      check_three_steps(opt, p, adam_ref(1e-3, 0.9, 0.999, 1e-8, 0, false, false), dt, tol_for(dt));
    }
    {
      Tensor p = param(kP0, dt);
      Adam opt({p}, {.lr = 0.01, .betas = {0.8, 0.9}, .eps = 1e-6, .weight_decay = 0.1});
      check_three_steps(opt, p, adam_ref(0.01, 0.8, 0.9, 1e-6, 0.1, false, false), dt, tol_for(dt));
    }
    {
      Tensor p = param(kP0, dt);
      AdamW opt({p}, {.lr = 0.01});  // default weight_decay 1e-2, decoupled
      check_three_steps(opt, p, adam_ref(0.01, 0.9, 0.999, 1e-8, 1e-2, true, false), dt, tol_for(dt));
    }
    {
      // beta2 = 0.5 lets the second moment fall after the large first gradient, so
      // AMSGrad's running maximum differs from it.
      Tensor p = param(kP0, dt);
      Adam opt({p}, {.lr = 0.02, .betas = {0.8, 0.5}, .amsgrad = true});
      check_three_steps(opt, p, adam_ref(0.02, 0.8, 0.5, 1e-8, 0, false, true), dt, tol_for(dt));
      const ParamState* st = opt.state(0, 0);
      REQUIRE(st != nullptr);
      CHECK(st->step == 3);
      CHECK(st->buffers.count("max_exp_avg_sq") == 1);
    }
  }
}

TEST_CASE("RMSprop's first three steps follow PyTorch's formula", "[optim]") {
  for (DType dt : {f64, f32}) {
    {
      Tensor p = param(kP0, dt);
      RMSprop opt({p});  // defaults: lr 1e-2, alpha 0.99, eps 1e-8
      check_three_steps(opt, p, rmsprop_ref(1e-2, 0.99, 1e-8, 0, 0, false), dt, tol_for(dt));
    }
    {
      Tensor p = param(kP0, dt);
      RMSprop opt({p}, {.lr = 0.01, .alpha = 0.9, .eps = 1e-6, .weight_decay = 0.05, .momentum = 0.7, .centered = true});
      check_three_steps(opt, p, rmsprop_ref(0.01, 0.9, 1e-6, 0.05, 0.7, true), dt, 10 * tol_for(dt));
    }
  }
}

TEST_CASE("f16/bf16 parameters keep f32 state and are rounded once per step", "[optim][numerics]") {
  for (DType dt : {f16, bf16}) {
    INFO(dtype_name(dt));
    Vec p0(4);
    for (size_t j = 0; j < 4; ++j) p0[j] = round_to(kP0[j], dt);
    Tensor p = param(p0, dt);
    Adam opt({p}, {.lr = 0.01});
    RefStep ref = adam_ref(0.01, 0.9, 0.999, 1e-8, 0, false, false);
    Vec expect = p0;
    for (int t = 1; t <= 3; ++t) {
      Vec g(4);
      for (size_t j = 0; j < 4; ++j) g[j] = round_to(kGrads[t - 1][j], dt);
      give_grad(p, g, dt);
      opt.step();
      ref(expect, g, t);
      // The reference works on the stored 16-bit value, as the optimizer does.
      for (double& e : expect) e = round_to(e, dt);
      CHECK(p.to_vector<double>() == expect);
    }
    // The first moment keeps f32 precision: 0.1 g with g = 1.5 is not a 16-bit value.
    const Tensor& m = opt.state(0, 0)->buffers.at("exp_avg");
    CHECK(m.dtype() == f32);
    CHECK(opt.state(0, 0)->buffers.at("exp_avg_sq").dtype() == f32);
    double m2 = 0;
    for (int t = 0; t < 3; ++t) m2 = 0.9 * m2 + 0.1 * round_to(kGrads[t][2], dt);
    CHECK(m.to_vector<double>()[2] == Approx(m2).epsilon(1e-6));
  }
}

TEST_CASE("bf16 parameters stall when the update is below half an ulp", "[optim][numerics]") {
  // bf16 spaces values below 1.0 by 2^-8; a step of 1e-3 rounds back to 1.0. The state
  // still advances: this is the classic reason to keep f32 master weights.
  Tensor p = param({1.0}, bf16);
  SGD opt({p}, {.lr = 1e-3, .momentum = 0.9});
  give_grad(p, {1.0}, bf16);
  opt.step();
  CHECK(p.to_vector<double>()[0] == 1.0);
  CHECK(opt.state(0, 0)->buffers.at("momentum_buffer").to_vector<double>()[0] == 1.0);
}

TEST_CASE("Adam with tiny gradients on f16/bf16 parameters stays finite: eps stays in f32", "[optim][numerics]") {
  // g = 1e-7 gives v = 1e-17, far below f16's smallest subnormal (6e-8), and eps = 1e-8
  // is itself below it: in f16 both would be 0 and the step 0/0.
  for (DType dt : {f16, bf16}) {
    for (DType gdt : {f32, dt}) {
      INFO(dtype_name(dt) << " params, " << dtype_name(gdt) << " grads");
      const double g = round_to(1e-7, gdt), p0 = round_to(0.5, dt);
      Tensor p = param({p0, p0}, dt);
      Adam opt({p}, {.lr = 1e-2});
      give_grad(p, {g, -g}, gdt);
      opt.step();
      RefStep ref = adam_ref(1e-2, 0.9, 0.999, 1e-8, 0, false, false);
      Vec e2 = {p0, p0, p0, p0};
      ref(e2, {g, -g, 0, 0}, 1);
      Vec got = p.to_vector<double>();
      CHECK(std::isfinite(got[0]));
      CHECK(std::isfinite(got[1]));
      CHECK(got[0] == round_to(e2[0], dt));
      CHECK(got[1] == round_to(e2[1], dt));
      CHECK(got[0] < p0);  // the step is about lr * 0.9: visible at 16 bits
    }
  }
}

TEST_CASE("state in the parameter's dtype: Adam's second moment flushes in f16 and the steps blow up",
          "[optim][numerics]") {
  // g = 1e-5: g^2 = 1e-10 is below f16's smallest subnormal (6e-8). With f32 state Adam's
  // normalised step is ~lr; with f16 state v is rebuilt from one g^2 every step while the
  // bias correction keeps shrinking, so m_hat / sqrt(v_hat) grows far above 1.
  auto run = [](bool in_param_dtype) {
    Tensor p = param({0.0, 0.0}, f16);
    Adam opt({p}, {.lr = 1e-3});
    opt.set_state_in_param_dtype(in_param_dtype);
    for (int s = 0; s < 50; ++s) {
      give_grad(p, {1e-5, 1e-5}, f32);
      opt.step();
    }
    CHECK(opt.state(0, 0)->buffers.at("exp_avg_sq").dtype() == (in_param_dtype ? f16 : f32));
    const double v = opt.state(0, 0)->buffers.at("exp_avg_sq").to_vector<double>()[0];
    if (in_param_dtype) CHECK(v == 0.0);
    else CHECK(v == Approx(1e-10 * (1 - std::pow(0.999, 50))).epsilon(1e-3));
    return -p.to_vector<double>()[0];
  };
  const double kept = run(false), flushed = run(true);
  CHECK(kept == Approx(50 * 1e-3).epsilon(0.05));  // 50 steps of ~lr each
  CHECK(flushed > 3 * kept);
  Tensor p = param({0.0}, f16);
  Adam opt({p}, {.lr = 1e-3});
  give_grad(p, {1.0}, f32);
  opt.step();
  CHECK_THROWS_WITH(opt.set_state_in_param_dtype(true), Catch::Contains("before the first step"));
}

TEST_CASE("parameter groups have their own lr and weight decay, changeable between steps", "[optim]") {
  Tensor a = param({1.0, 2.0}), b = param({3.0}), c = param({-1.0});
  SGD opt(std::vector<ParamGroup>{{.params = {a}, .lr = 0.1},
                                  {.params = {b, c}, .names = {"b", "c"}, .weight_decay = 0.5}},
          {.lr = 0.01});
  CHECK(*opt.param_groups()[0].lr == 0.1);
  CHECK(*opt.param_groups()[1].lr == 0.01);  // filled from the default
  CHECK(*opt.param_groups()[0].weight_decay == 0.0);
  give_grad(a, {1.0, 1.0}, f64);
  give_grad(b, {2.0}, f64);
  give_grad(c, {0.0}, f64);
  opt.step();
  CHECK(a.to_vector<double>() == Vec{1.0 - 0.1, 2.0 - 0.1});
  CHECK(b.to_vector<double>()[0] == Approx(3.0 - 0.01 * (2.0 + 0.5 * 3.0)));
  CHECK(c.to_vector<double>()[0] == Approx(-1.0 - 0.01 * (0.5 * -1.0)));
  // The AMP recipe: lower one group's lr.
  opt.param_groups()[0].lr = 0.001;
  opt.step();
  CHECK(a.to_vector<double>()[0] == Approx(0.9 - 0.001));

  auto named = opt.named_parameters();
  REQUIRE(named.size() == 3);
  CHECK(named[0].first == "group.0.0");
  CHECK(named[1].first == "b");
  CHECK(named[2].second.is_same(c));
  Tensor d = param({0.0});
  d.set_name("fc.bias");
  CHECK(SGD({d}).named_parameters()[0].first == "fc.bias");
  SGD from_named(std::vector<std::pair<std::string, Tensor>>{{"w", a}});
  CHECK(from_named.named_parameters()[0].first == "w");
}

TEST_CASE("parameters without a gradient are skipped; zero_grad makes gradients undefined", "[optim]") {
  Tensor a = param({1.0}), b = param({2.0});
  Adam opt({a, b});
  give_grad(a, {1.0}, f64);
  opt.step();
  CHECK(a.to_vector<double>()[0] != 1.0);
  CHECK(b.to_vector<double>()[0] == 2.0);
  CHECK(opt.state(0, 1) == nullptr);
  opt.zero_grad();
  CHECK_FALSE(a.grad().defined());
  opt.step();
  CHECK(opt.state(0, 0)->step == 1);
}

TEST_CASE("non-contiguous parameters and gradients are updated through their views", "[optim]") {
  Tensor storage = from_vector({1, 2, 3, 4, 5, 6}, {2, 3}, {f32});
  Tensor p = storage.transpose(0, 1).detach().set_requires_grad();  // [3, 2], strided
  REQUIRE_FALSE(p.is_contiguous());
  // Gradient (i, j) is 2 p(i, j) = 2 storage(j, i), laid out transposed as well.
  p.set_grad(from_vector({2, 4, 6, 8, 10, 12}, {2, 3}, {f16}).transpose(0, 1));
  SGD opt({p}, {.lr = 0.25});
  opt.step();
  CHECK(storage.to_vector<double>() == std::vector<double>{0.5, 1.0, 1.5, 2.0, 2.5, 3.0});
}

TEST_CASE("state_dict round trip reproduces the next step bitwise", "[optim]") {
  using Factory = std::function<std::unique_ptr<Optimizer>(std::vector<ParamGroup>)>;
  std::vector<Factory> factories = {
      [](auto g) { return std::make_unique<SGD>(std::move(g), SGDOptions{.lr = 0.1, .momentum = 0.9}); },
      [](auto g) { return std::make_unique<Adam>(std::move(g), AdamOptions{.lr = 0.01, .amsgrad = true}); },
      [](auto g) { return std::make_unique<AdamW>(std::move(g), AdamWOptions{.lr = 0.01}); },
      [](auto g) { return std::make_unique<RMSprop>(std::move(g), RMSpropOptions{.momentum = 0.5, .centered = true}); },
  };
  for (const Factory& make : factories) {
    for (DType dt : {f32, f16, f64}) {
      Tensor a = param(kP0, dt), b = param({1.0, 2.0}, dt);
      auto groups = [](Tensor x, Tensor y) {
        return std::vector<ParamGroup>{{.params = {x}}, {.params = {y}, .lr = 0.003}};
      };
      auto opt = make(groups(a, b));
      INFO(opt->name() << " " << dtype_name(dt));
      for (int t = 0; t < 2; ++t) {
        give_grad(a, kGrads[t], dt);
        give_grad(b, {0.5, -0.25}, dt);
        opt->step();
      }
      opt->param_groups()[1].lr = 0.0123;
      StateDict sd = opt->state_dict();
      CHECK(sd.count("group.1.lr") == 1);
      CHECK(sd.at("state.0.0.step").item<double>() == 2);
      Tensor a2 = a.detach().clone().set_requires_grad(), b2 = b.detach().clone().set_requires_grad();

      give_grad(a, kGrads[2], dt);
      give_grad(b, {0.5, -0.25}, dt);
      opt->step();
      CHECK(sd.at("state.0.0.step").item<double>() == 2);  // the saved dict is a copy

      auto opt2 = make(groups(a2, b2));
      opt2->load_state_dict(sd);
      CHECK(*opt2->param_groups()[1].lr == 0.0123);
      give_grad(a2, kGrads[2], dt);
      give_grad(b2, {0.5, -0.25}, dt);
      opt2->step();
      CHECK(a2.to_vector<double>() == a.to_vector<double>());
      CHECK(b2.to_vector<double>() == b.to_vector<double>());
      StateDict s1 = opt->state_dict(), s2 = opt2->state_dict();
      REQUIRE(s1.size() == s2.size());
      for (const auto& [k, t] : s1) {
        INFO(k);
        CHECK(t.to_vector<double>() == s2.at(k).to_vector<double>());
      }
    }
  }
}

TEST_CASE("load_state_dict reports every problem and loads nothing", "[optim][errors]") {
  Tensor a = param({1.0, 2.0});
  Adam opt({a});
  give_grad(a, {1.0, 1.0}, f64);
  opt.step();
  StateDict good = opt.state_dict();

  Tensor b = param({1.0, 2.0});
  Adam fresh({b}, {.lr = 0.5});
  StateDict bad = good;
  bad.erase("state.0.0.exp_avg_sq");
  bad["state.0.0.exp_avg"] = zeros({3}, {f32});
  bad["state.0.7.step"] = scalar_tensor(1, {f64});
  bad["group.0.lr"] = ones({2}, {f64});
  CHECK_THROWS_WITH(fresh.load_state_dict(bad),
                    Catch::Contains("nothing was loaded") && Catch::Contains("missing 'state.0.0.exp_avg_sq'") &&
                        Catch::Contains("'state.0.0.exp_avg' must be a floating tensor of shape [2], got [3]") &&
                        Catch::Contains("unexpected 'state.0.7.step'") && Catch::Contains("'group.0.lr' must be a 0-d"));
  CHECK(fresh.state(0, 0) == nullptr);
  CHECK(*fresh.param_groups()[0].lr == 0.5);

  Adam two({b, param({0.0})});
  CHECK_THROWS_WITH(two.load_state_dict(good), Catch::Contains("group 0 has 2 parameters here but 1"));
  SGD sgd({b}, {.momentum = 0.9});
  CHECK_THROWS_WITH(sgd.load_state_dict(good), Catch::Contains("unexpected 'state.0.0.exp_avg'"));
}

TEST_CASE("step_if skips the whole step when found_inf is set", "[optim]") {
  Tensor p = param({1.0, -1.0}, f16);
  Adam opt({p}, {.lr = 0.1});
  give_grad(p, {1.0, 1.0}, f16);
  opt.step_if(scalar_tensor(1.0));
  CHECK(p.to_vector<double>() == Vec{1.0, -1.0});
  CHECK(opt.state(0, 0) == nullptr);
  opt.step_if(scalar_tensor(NAN));
  CHECK(opt.state(0, 0) == nullptr);
  opt.step_if(scalar_tensor(0.0));
  CHECK(opt.state(0, 0)->step == 1);
  CHECK(p.to_vector<double>()[0] < 1.0);
  opt.step_if(scalar_tensor(INFINITY));
  CHECK(opt.state(0, 0)->step == 1);
  CHECK_THROWS_WITH(opt.step_if(zeros({2})), Catch::Contains("found_inf must be a one-element tensor") &&
                                                 Catch::Contains("[2]"));
}

TEST_CASE("optimizer hyper-parameter and parameter errors name the value and the valid range", "[optim][errors]") {
  Tensor p = param({1.0});
  CHECK_THROWS_WITH(SGD({p}, {.lr = -0.1}), Catch::Contains("SGD: lr must be >= 0, got -0.1"));
  CHECK_THROWS_WITH(SGD({p}, {.momentum = -1}), Catch::Contains("momentum must be >= 0, got -1"));
  CHECK_THROWS_WITH(SGD({p}, {.nesterov = true}), Catch::Contains("momentum must be > 0 with nesterov"));
  CHECK_THROWS_WITH(SGD({p}, {.momentum = 0.9, .dampening = 0.1, .nesterov = true}),
                    Catch::Contains("dampening must be 0 with nesterov, got 0.1"));
  CHECK_THROWS_WITH(SGD({p}, {.weight_decay = -1}), Catch::Contains("weight_decay must be >= 0"));
  CHECK_THROWS_WITH(Adam({p}, {.betas = {1.0, 0.999}}), Catch::Contains("Adam: betas.first must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(AdamW({p}, {.betas = {0.9, -0.5}}), Catch::Contains("AdamW: betas.second must be in [0, 1)"));
  CHECK_THROWS_WITH(Adam({p}, {.eps = -1e-8}), Catch::Contains("eps must be >= 0"));
  CHECK_THROWS_WITH(Adam({p}, {.lr = NAN}), Catch::Contains("lr must be >= 0, got nan"));
  CHECK_THROWS_WITH(RMSprop({p}, {.alpha = 1.5}), Catch::Contains("RMSprop: alpha must be in [0, 1], got 1.5"));
  CHECK_THROWS_WITH(RMSprop({p}, {.momentum = -0.5}), Catch::Contains("momentum must be >= 0"));
  CHECK_THROWS_WITH(SGD(std::vector<ParamGroup>{{.params = {p}, .lr = -1.0}}),
                    Catch::Contains("lr of group 0 must be >= 0, got -1"));
  CHECK_THROWS_WITH(SGD({p, p}), Catch::Contains("appears more than once"));
  CHECK_THROWS_WITH(SGD({p * 2.0}), Catch::Contains("is not a leaf"));
  CHECK_THROWS_WITH(SGD({ones({2}, {i64})}), Catch::Contains("floating dtype") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(SGD(std::vector<ParamGroup>{{.params = {p}, .names = {"a", "b"}}}),
                    Catch::Contains("1 parameters but 2 names"));

  // A bad gradient is found before any parameter changes.
  Tensor q = param({1.0, 2.0});
  SGD opt({p, q}, {.lr = 0.1});
  give_grad(p, {1.0}, f64);
  give_grad(q, {1.0, 2.0, 3.0}, f64);
  q.set_name("fc.weight");
  CHECK_THROWS_WITH(opt.step(), Catch::Contains("gradient of 'fc.weight' has shape [3]") && Catch::Contains("[2]"));
  CHECK(p.to_vector<double>()[0] == 1.0);
  opt.param_groups()[0].lr = -1.0;
  give_grad(q, {1.0, 2.0}, f64);
  CHECK_THROWS_WITH(opt.step(), Catch::Contains("lr of group 0 must be >= 0"));
}

TEST_CASE("clip_grad_norm_ returns the total norm and scales only when above max_norm", "[optim]") {
  const Vec ga = {3.0, -4.0, 0.5}, gb = {1.0, -2.0};
  for (double norm_type : {2.0, 1.0, 3.0, double(INFINITY)}) {
    INFO("norm_type " << norm_type);
    double ref = 0;
    for (const Vec* g : {&ga, &gb})
      for (double x : *g) ref = std::isinf(norm_type) ? std::max(ref, std::abs(x)) : ref + std::pow(std::abs(x), norm_type);
    if (!std::isinf(norm_type)) ref = std::pow(ref, 1.0 / norm_type);
    for (DType dt : {f64, f32, f16}) {
      Tensor a = param({0, 0, 0}), b = param({0, 0}), none = param({0});
      give_grad(a, ga, dt);
      give_grad(b, gb, dt);
      CHECK(clip_grad_norm_({a, b, none}, 100.0, norm_type) == Approx(ref).epsilon(1e-6));
      CHECK(a.grad().to_vector<double>() == ga);  // below max_norm: untouched
      CHECK(clip_grad_norm_({a, b}, 1.0, norm_type) == Approx(ref).epsilon(1e-6));
      const double coef = 1.0 / (ref + 1e-6);
      const double tol = dt == f16 ? 1e-3 : 1e-6;
      for (size_t j = 0; j < ga.size(); ++j) CHECK(a.grad().to_vector<double>()[j] == Approx(ga[j] * coef).epsilon(tol));
      for (size_t j = 0; j < gb.size(); ++j) CHECK(b.grad().to_vector<double>()[j] == Approx(gb[j] * coef).epsilon(tol));
    }
  }
  CHECK(clip_grad_norm_({param({1.0})}, 1.0) == 0.0);  // no gradients at all
}

TEST_CASE("clip_grad_norm_ over many f16 elements accumulates in f32", "[optim][numerics]") {
  // 50000 values of 1.0: the sum of squares, 50000, is past f16's range and its
  // square root 223.6 is not a 16-bit value; both come out right in f32.
  Tensor p = param(Vec(50000, 0.0), f16);
  give_grad(p, Vec(50000, 1.0), f16);
  CHECK(clip_grad_norm_({p}, 1e9) == Approx(std::sqrt(50000.0)).epsilon(1e-6));
}

TEST_CASE("clip_grad_norm_ leaves the gradients untouched when the norm is inf or NaN", "[optim]") {
  Tensor a = param({0, 0}), b = param({0});
  give_grad(a, {INFINITY, 1.0}, f16);
  give_grad(b, {2.0}, f32);
  CHECK(std::isinf(clip_grad_norm_({a, b}, 1.0)));
  CHECK(a.grad().to_vector<double>() == Vec{INFINITY, 1.0});
  CHECK(b.grad().to_vector<double>() == Vec{2.0});
  CHECK(std::isinf(clip_grad_norm_({a, b}, 1.0, INFINITY)));
  give_grad(a, {NAN, 1.0}, f32);
  CHECK(std::isnan(clip_grad_norm_({a, b}, 1.0)));
  CHECK(std::isnan(clip_grad_norm_({a, b}, 1.0, INFINITY)));
  CHECK(b.grad().to_vector<double>() == Vec{2.0});
}

TEST_CASE("clip_grad_value_ clamps every element", "[optim]") {
  Tensor a = param({0, 0, 0, 0});
  give_grad(a, {-3.0, 0.25, 2.0, NAN}, bf16);
  clip_grad_value_({a}, 0.5);
  Vec g = a.grad().to_vector<double>();
  CHECK(g[0] == -0.5);
  CHECK(g[1] == 0.25);
  CHECK(g[2] == 0.5);
  CHECK(std::isnan(g[3]));
  CHECK(a.grad().dtype() == bf16);
}

TEST_CASE("clipping refuses a gradient that carries a live loss-scale mark, and changes nothing", "[optim][clip]") {
  Tensor a = param({0});
  give_grad(a, {10.0}, f32);
  auto mark = std::make_shared<LossScaleMark>(LossScaleMark{full({}, 1024.0)});
  autograd::set_loss_scale(a.grad(), mark);
  CHECK_THROWS_WITH(clip_grad_norm_({a}, 1.0), Catch::Contains("still multiplied by the loss scale S = 1024"));
  CHECK_THROWS_WITH(clip_grad_value_({a}, 1.0), Catch::Contains("unscale_(optimizer) first"));
  CHECK(a.grad().to_vector<double>()[0] == 10.0);
  mark.reset();  // the scaler moved on (update()): the mark expires with it
  CHECK(clip_grad_norm_({a}, 1.0) == Approx(10.0));
}

TEST_CASE("clipping errors name the value and the valid range", "[optim][errors]") {
  Tensor a = param({0});
  CHECK_THROWS_WITH(clip_grad_norm_({a}, -1.0), Catch::Contains("max_norm must be >= 0, got -1"));
  CHECK_THROWS_WITH(clip_grad_norm_({a}, 1.0, 0.0), Catch::Contains("norm_type must be > 0 or INFINITY, got 0"));
  CHECK_THROWS_WITH(clip_grad_value_({a}, -0.5), Catch::Contains("clip must be >= 0, got -0.5"));
  CHECK_THROWS_WITH(clip_grad_norm_({Tensor()}, 1.0), Catch::Contains("parameter 0 is an undefined tensor"));
}
