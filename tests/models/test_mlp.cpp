// The MLP: its structure, its forward against a hand-written f64 reference, and that it
// learns two interleaved spirals with a hand-written Adam, with f32 and with bf16 weights.
#include <catch2/catch.hpp>

#include <cmath>

#include "halfgrad.h"

using namespace hg;

namespace {

struct Spirals {
  Tensor x;  // [n, 2]
  Tensor y;  // [n, 1], +1 or -1
};

// Two arms of 1.25 turns each, the second the first rotated by pi.
Spirals make_spirals(int64_t per_class) {
  std::vector<double> xs, ys;
  for (int c = 0; c < 2; ++c)
    for (int64_t i = 0; i < per_class; ++i) {
      const double r = 0.1 + 0.9 * static_cast<double>(i) / static_cast<double>(per_class);
      const double theta = 2.5 * M_PI * r + c * M_PI;
      xs.push_back(r * std::cos(theta));
      xs.push_back(r * std::sin(theta));
      ys.push_back(c ? 1.0 : -1.0);
    }
  return {from_vector(xs, {2 * per_class, 2}), from_vector(ys, {2 * per_class, 1})};
}

// Mean logistic loss log(1 + exp(-y f)), in f32.
Tensor logistic_loss(const Tensor& f, const Tensor& y) { return mean(log(exp(-(f.to(f32) * y)) + 1.0)); }

double accuracy(const Tensor& f, const Tensor& y) {
  auto fv = f.to_vector<double>(), yv = y.to_vector<double>();
  int64_t right = 0;
  for (size_t i = 0; i < fv.size(); ++i) right += (fv[i] > 0) == (yv[i] > 0);
  return static_cast<double>(right) / static_cast<double>(fv.size());
}

// Adam with f32 state; the step is computed in f32 and rounded once into the parameter's
// own dtype (for bf16 parameters, updates below half a bf16 ulp are lost: that is real).
struct Adam {
  std::vector<Tensor> params, m, v;
  double lr, b1 = 0.9, b2 = 0.999, eps = 1e-8;
  int t = 0;
  Adam(std::vector<Tensor> p, double lr_) : params(std::move(p)), lr(lr_) {
    for (auto& q : params) {
      m.push_back(zeros(q.shape()));
      v.push_back(zeros(q.shape()));
    }
  }
  void step() {
    NoGrad ng;
    ++t;
    for (size_t i = 0; i < params.size(); ++i) {
      Tensor g = params[i].grad().to(f32);
      copy_(m[i], m[i] * b1 + g * (1 - b1));
      copy_(v[i], v[i] * b2 + g * g * (1 - b2));
      Tensor mhat = m[i] / (1 - std::pow(b1, t)), vhat = v[i] / (1 - std::pow(b2, t));
      copy_(params[i], params[i].to(f32) - mhat / (sqrt(vhat) + eps) * lr);
      params[i].set_grad(Tensor());
    }
  }
};

// Full-batch training; returns the final loss and accuracy.
std::pair<double, double> train_spirals(DType dtype, int steps) {
  manual_seed(11);
  MLP net(2, {32, 32}, 1);
  net.to(dtype);
  Spirals data = make_spirals(100);
  Tensor x = data.x.to(dtype);
  Adam opt(net.parameters(), 0.01);
  for (int s = 0; s < steps; ++s) {
    logistic_loss(net(x), data.y).backward();
    opt.step();
  }
  NoGrad ng;
  Tensor f = net(x);
  return {logistic_loss(f, data.y).item<double>(), accuracy(f, data.y)};
}

}  // namespace

TEST_CASE("MLP names its layers fc1..fcN and has the expected parameters", "[mlp]") {
  MLP net(5, {7, 3}, 2);
  std::vector<std::string> names;
  for (auto& [n, t] : net.named_parameters()) names.push_back(n + " " + shape_str(t.shape()));
  CHECK(names == std::vector<std::string>{"fc1.weight [7, 5]", "fc1.bias [7]", "fc2.weight [3, 7]", "fc2.bias [3]",
                                          "fc3.weight [2, 3]", "fc3.bias [2]"});
  CHECK(net.parameter_count() == (5 * 7 + 7) + (7 * 3 + 3) + (3 * 2 + 2));
  CHECK(net.type_name() == "MLP");
  CHECK(MLP(4, {}, 3).named_children().size() == 1);
}

TEST_CASE("MLP forward equals an f64 loop over its weights", "[mlp]") {
  manual_seed(12);
  MLP net(3, {4}, 2);
  net.to(f64);
  Generator g(1);
  Tensor x = normal({6, 3}, 0, 1, {f64}, &g);
  auto X = x.to_vector<double>(), W1 = net.layers[0]->weight.to_vector<double>(),
       b1 = net.layers[0]->bias.to_vector<double>(), W2 = net.layers[1]->weight.to_vector<double>(),
       b2 = net.layers[1]->bias.to_vector<double>();
  std::vector<double> want;
  for (int n = 0; n < 6; ++n) {
    double h[4];
    for (int j = 0; j < 4; ++j) {
      h[j] = b1[j];
      for (int i = 0; i < 3; ++i) h[j] += X[n * 3 + i] * W1[j * 3 + i];
      h[j] = std::max(h[j], 0.0);
    }
    for (int k = 0; k < 2; ++k) {
      double o = b2[k];
      for (int j = 0; j < 4; ++j) o += h[j] * W2[k * 4 + j];
      want.push_back(o);
    }
  }
  CHECK(allclose(net(x), from_vector(want, {6, 2}, {f64}), 1e-12, 1e-12));
  CHECK_THROWS_WITH(net(ones({2, 5}, {f64})), Catch::Contains("in_features 3"));
}

TEST_CASE("MLP learns two spirals with f32 weights", "[mlp][train]") {
  auto [loss, acc] = train_spirals(f32, 200);
  INFO("loss " << loss << ", accuracy " << acc);
  CHECK(loss < 0.01);
  CHECK(acc >= 0.99);
}

TEST_CASE("MLP learns two spirals with bf16 weights and f32 optimizer state", "[mlp][train]") {
  auto [loss, acc] = train_spirals(bf16, 200);
  INFO("loss " << loss << ", accuracy " << acc);
  CHECK(loss < 0.02);
  CHECK(acc >= 0.99);
}
