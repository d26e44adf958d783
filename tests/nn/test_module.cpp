// nn::Module and the layers: paths and names, state dicts and their errors, in-place
// dtype moves, train/eval, precision scopes, initialisation statistics, layer checks.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "halfgrad.h"
#include "tests/nn/module_models.h"

using namespace hg;
using test::Block;
using test::Outer;

namespace {

std::vector<std::string> names_of(const std::vector<std::pair<std::string, Tensor>>& entries) {
  std::vector<std::string> out;
  for (auto& e : entries) out.push_back(e.first);
  return out;
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : t.to_vector<double>()) m = std::max(m, std::abs(v));
  return m;
}

// Sample standard deviation, in f64.
double stddev(const Tensor& t) {
  auto v = t.to_vector<double>();
  double mean = 0, sq = 0;
  for (double x : v) mean += x;
  mean /= static_cast<double>(v.size());
  for (double x : v) sq += (x - mean) * (x - mean);
  return std::sqrt(sq / static_cast<double>(v.size() - 1));
}

}  // namespace

TEST_CASE("parameters and buffers are named by module path in registration order", "[module]") {
  Outer m;
  CHECK(names_of(m.named_parameters()) ==
        std::vector<std::string>{"enc.scale", "enc.fc.weight", "enc.fc.bias", "head.0.weight", "head.0.bias"});
  CHECK(names_of(m.named_buffers()) == std::vector<std::string>{"enc.steps"});
  CHECK(m.path().empty());
  CHECK(m.enc->path() == "enc");
  CHECK(m.enc->fc->path() == "enc.fc");
  CHECK((*m.head)[1].path() == "head.1");
  // Tensor names carry the full path, though the children were built before their parents.
  for (auto& [name, t] : m.named_parameters()) {
    CHECK(t.name() == name);
    CHECK(t.requires_grad());
    CHECK(t.is_leaf());
  }
  CHECK(m.enc->steps.name() == "enc.steps");
  CHECK_FALSE(m.enc->steps.requires_grad());
  // Relative names from a child, full names on the tensors.
  CHECK(names_of(m.enc->named_parameters()) == std::vector<std::string>{"scale", "fc.weight", "fc.bias"});
  std::vector<std::string> modules;
  for (auto& [n, mod] : m.named_modules()) modules.push_back(n + ":" + mod->type_name());
  CHECK(modules == std::vector<std::string>{":Outer", "enc:Block", "enc.fc:Linear", "head:Sequential",
                                            "head.0:Linear", "head.1:ReLU"});
  CHECK(m.parameter_count() == 4 + 12 + 4 + 8 + 2);
  CHECK(m.parameters().size() == 5);
}

TEST_CASE("a forward records the module path into the graph", "[module]") {
  Outer m;
  Tensor y = m(ones({5, 3}));
  CHECK(y.shape() == Shape{5, 2});
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->module_path() == "head.1");  // the ReLU's node
  CHECK(autograd::current_module_path().empty());
  std::string graph = autograd::graph_to_string(y);
  CHECK_THAT(graph, Catch::Contains("[enc.fc]") && Catch::Contains("[enc]") && Catch::Contains("[head.0]"));
}

TEST_CASE("the nodes of one module forward share one path string", "[module]") {
  // Before, every node held its own copy of the path.
  Outer m;
  Tensor y = m(ones({5, 3}));
  REQUIRE(y.grad_fn());
  const Node* relu = y.grad_fn().get();
  const Node* below = relu->next_edges[0].node.get();  // head.0's node
  REQUIRE(below);
  CHECK(below->module_path() == "head.0");
  Tensor w = ones({2}).set_requires_grad();
  Tensor a, b;
  {
    autograd::ModulePathScope scope("net.fc1");
    a = w * 2.0;
    b = a + 1.0;
  }
  CHECK(b.grad_fn()->module_path() == "net.fc1");
  CHECK(a.grad_fn()->module_path_ptr == b.grad_fn()->module_path_ptr);
  CHECK((w * 3.0).grad_fn()->module_path_ptr == nullptr);
}

TEST_CASE("child->forward(x), the libtorch habit, enters the child's scope like (*child)(x)", "[module][precision]") {
  // Before forward was non-virtual, calling it directly skipped the module scope: no path
  // in the graph, no set_precision, no output observers.
  Outer m;
  m.enc->set_precision(f32);
  std::vector<std::string> seen;
  nn::ObserverHandle handle = m.add_output_observer([&](nn::Module& mod, const Tensor&) { seen.push_back(mod.path()); });
  Tensor y;
  {
    amp::Autocast ac(f16);
    y = m.enc->forward(ones({5, 3}));
  }
  handle.reset();
  CHECK(y.dtype() == f32);  // enc runs in f32 although autocast asks for f16
  REQUIRE(y.grad_fn());
  CHECK(y.grad_fn()->module_path() == "enc");
  CHECK(seen == std::vector<std::string>{"enc.fc", "enc"});
}

TEST_CASE("registration rejects bad names, duplicates and second parents", "[module][errors]") {
  Block b;
  CHECK_THROWS_WITH(b.register_parameter("fc", ones({1})), Catch::Contains("already has") && Catch::Contains("'fc'"));
  CHECK_THROWS_WITH(b.register_buffer("a.b", ones({1})), Catch::Contains("no '.'"));
  CHECK_THROWS_WITH(b.register_parameter("idx", ones({1}, {i64})), Catch::Contains("floating") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(b.register_parameter("u", Tensor()), Catch::Contains("undefined"));
  Outer o;
  CHECK_THROWS_WITH(o.register_module("again", o.enc), Catch::Contains("already the child 'enc'"));
  CHECK_THROWS_WITH(o.enc->register_module("loop", std::shared_ptr<nn::Linear>()), Catch::Contains("null"));
  CHECK_THROWS_WITH((void)(*o.head)[2], Catch::Contains("index 2 out of range for 2"));
}

TEST_CASE("a module without a single-input forward says so", "[module][errors]") {
  struct Pair : nn::Module {
    std::string type_name() const override { return "Pair"; }
  };
  Pair p;
  CHECK_THROWS_WITH(p(ones({1})), Catch::Contains("Pair") && Catch::Contains("no single-input forward"));
}

TEST_CASE("state_dict round-trips parameters and buffers, casting to each tensor's dtype", "[module]") {
  manual_seed(1);
  Outer a;
  manual_seed(2);
  Outer b;
  fill_(a.enc->steps, 7);
  CHECK_FALSE(allclose(a.enc->fc->weight, b.enc->fc->weight));
  StateDict sd = a.state_dict();
  CHECK(sd.size() == 6);
  CHECK(sd.count("enc.steps"));
  CHECK_FALSE(sd.at("enc.fc.weight").requires_grad());
  Tensor held = b.enc->fc->weight;
  b.load_state_dict(sd);
  for (auto& [n, t] : a.state_dict()) CHECK(allclose(b.state_dict().at(n).to(f64), t.to(f64), 0, 0));
  CHECK(held.is_same(b.enc->fc->weight));  // copied in place
  CHECK(b.enc->steps.item<int64_t>() == 7);
  CHECK(b.enc->fc->weight.requires_grad());

  // Into a bf16 model: each value rounds to the nearest bf16 (reference: Tensor::to).
  Outer c;
  c.to(bf16);
  c.load_state_dict(sd);
  CHECK(c.enc->fc->weight.dtype() == bf16);
  CHECK(allclose(c.enc->fc->weight.to(f64), sd.at("enc.fc.weight").to(bf16).to(f64), 0, 0));
}

TEST_CASE("load_state_dict reports every mismatch by name and loads nothing", "[module][errors]") {
  Outer m;
  StateDict sd = Outer().state_dict();
  sd.erase("enc.scale");
  sd.erase("head.0.bias");
  sd["enc.extra"] = ones({2});
  sd["head.0.weight"] = zeros({2, 5});
  std::vector<double> before = m.enc->fc->weight.to_vector<double>();
  CHECK_THROWS_WITH(m.load_state_dict(sd),
                    Catch::Contains("nothing was loaded") && Catch::Contains("Missing keys: [enc.scale, head.0.bias]") &&
                        Catch::Contains("Unexpected keys: [enc.extra]") &&
                        Catch::Contains("head.0.weight (model [2, 4], state dict [2, 5])"));
  CHECK(m.enc->fc->weight.to_vector<double>() == before);  // a valid key was not loaded either

  // Non-strict: missing and unexpected keys are fine, a wrong shape never is.
  CHECK_THROWS_WITH(m.load_state_dict(sd, false),
                    Catch::Contains("head.0.weight") && !Catch::Contains("enc.extra"));
  sd["head.0.weight"] = zeros({2, 4});
  m.load_state_dict(sd, false);
  CHECK(max_abs(m.head->named_parameters()[0].second) == 0.0);
  CHECK(m.enc->scale.to_vector<double>() == std::vector<double>{1, 1, 1, 1});
}

TEST_CASE("to(dtype) converts in place: earlier handles see it, grads go, integer buffers stay", "[module]") {
  manual_seed(3);
  Outer m;
  Tensor w = m.enc->fc->weight;  // as an optimizer would hold it
  std::vector<Tensor> params = m.parameters();
  std::vector<double> f32_values = w.to_vector<double>();
  sum(m(ones({2, 3}))).backward();
  REQUIRE(w.grad().defined());

  m.to(bf16);
  CHECK(w.dtype() == bf16);
  for (auto& p : params) CHECK(p.dtype() == bf16);
  CHECK_FALSE(w.grad().defined());
  CHECK(w.requires_grad());
  CHECK(w.name() == "enc.fc.weight");
  CHECK(m.enc->steps.dtype() == i64);
  // Each value is the nearest bf16 to the f32 value.
  CHECK(allclose(w.to(f64), from_vector(f32_values, w.shape()).to(bf16).to(f64), 0, 0));
  // Training works on the converted handles: the gradient has the new dtype.
  sum(m(ones({2, 3}, {bf16})).to(f32)).backward();
  CHECK(w.grad().dtype() == bf16);
  m.zero_grad();
  CHECK_FALSE(w.grad().defined());
  m.to(f64);
  CHECK(w.dtype() == f64);
  CHECK_THROWS_WITH(m.to(i64), Catch::Contains("floating") && Catch::Contains("i64"));
}

TEST_CASE("train() and eval() reach every descendant", "[module]") {
  Outer m;
  CHECK(m.is_training());
  m.eval();
  for (auto& [n, mod] : m.named_modules()) CHECK_FALSE(mod->is_training());
  m.enc->train();
  CHECK(m.enc->fc->is_training());
  CHECK_FALSE(m.head->is_training());
  m.train();
  for (auto& [n, mod] : m.named_modules()) CHECK(mod->is_training());
}

TEST_CASE("a module's precision overrides the autocast dtype only while autocast is on", "[module][precision]") {
  Outer m;
  m.enc->set_precision(f32);
  CHECK(m.enc->precision() == f32);
  CHECK_FALSE(m.precision().has_value());
  {
    nn::Module::Scope s(*m.enc);  // autocast off: nothing to override
    CHECK_FALSE(autocast_state().dtype.has_value());
    CHECK(autograd::current_module_path() == "enc");
  }
  autocast_state().dtype = f16;
  {
    nn::Module::Scope s(*m.enc);
    CHECK(autocast_state().dtype == f32);
    nn::Module::Scope inner(*m.enc->fc);  // no precision of its own: inherits
    CHECK(autocast_state().dtype == f32);
    CHECK(autograd::current_module_path() == "enc.fc");
  }
  CHECK(autocast_state().dtype == f16);
  {
    nn::Module::Scope s(*m.head);
    CHECK(autocast_state().dtype == f16);
  }
  autocast_state().dtype.reset();
  CHECK(autograd::current_module_path().empty());
}

TEST_CASE("default layer init is U(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weights and biases", "[module][init]") {
  manual_seed(4);
  nn::Linear lin(100, 50);
  CHECK(lin.weight.shape() == Shape{50, 100});
  CHECK(max_abs(lin.weight) <= 0.1 * (1 + 1e-6));
  CHECK(max_abs(lin.weight) > 0.099);  // 5000 draws reach the edge
  CHECK(max_abs(lin.bias) <= 0.1 * (1 + 1e-6));
  nn::Conv2d conv(12, 66, 3, {.groups = 3});
  CHECK(conv.weight.shape() == Shape{66, 3, 3, 4});
  const double bc = 1 / std::sqrt(36.0);
  CHECK(max_abs(conv.weight) <= bc * (1 + 1e-6));
  CHECK(max_abs(conv.weight) > 0.98 * bc);
  CHECK(stddev(conv.weight) == Approx(bc / std::sqrt(3.0)).epsilon(0.05));  // U(-b, b) has std b/sqrt(3)
  // PyTorch's transposed conv: fan_in = R*S*C_out/groups.
  nn::ConvTranspose2d up(8, 6, 2);
  CHECK(up.weight.shape() == Shape{8, 2, 2, 6});
  CHECK(nn::init::calculate_fan_in_and_fan_out(up.weight) == std::pair<int64_t, int64_t>{24, 32});
  CHECK(max_abs(up.weight) <= 1 / std::sqrt(24.0) * (1 + 1e-6));
  CHECK(max_abs(up.weight) > 0.9 / std::sqrt(24.0));
  CHECK(max_abs(up.bias) <= 1 / std::sqrt(24.0) * (1 + 1e-6));
  nn::Linear no_bias(3, 2, false);
  CHECK_FALSE(no_bias.bias.defined());
  CHECK(no_bias.named_parameters().size() == 1);
}

TEST_CASE("init functions hit their standard deviations and write in place", "[module][init]") {
  Generator g(5);
  Tensor w = empty({128, 3, 3, 64});  // fan_in 576, fan_out 1152
  Tensor held = w;
  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::fan_in, nn::init::Nonlinearity::relu, &g);
  CHECK(held.is_same(w));
  CHECK(stddev(w) == Approx(std::sqrt(2.0 / 576)).epsilon(0.01));
  nn::init::kaiming_normal_(w, 0.0, nn::init::FanMode::fan_out, nn::init::Nonlinearity::linear, &g);
  CHECK(stddev(w) == Approx(1 / std::sqrt(1152.0)).epsilon(0.01));
  nn::init::kaiming_uniform_(w, 0.0, nn::init::FanMode::fan_in, nn::init::Nonlinearity::relu, &g);
  CHECK(max_abs(w) <= std::sqrt(6.0 / 576) * (1 + 1e-6));
  CHECK(stddev(w) == Approx(std::sqrt(2.0 / 576)).epsilon(0.01));
  nn::init::xavier_uniform_(w, 2.0, &g);
  CHECK(max_abs(w) <= 2 * std::sqrt(6.0 / 1728) * (1 + 1e-6));
  CHECK(stddev(w) == Approx(2 * std::sqrt(2.0 / 1728)).epsilon(0.01));
  nn::init::xavier_normal_(w, 1.0, &g);
  CHECK(stddev(w) == Approx(std::sqrt(2.0 / 1728)).epsilon(0.01));
  nn::init::normal_(w, 3.0, 0.5, &g);
  CHECK(mean(w).item<double>() == Approx(3.0).epsilon(0.005));
  CHECK(nn::init::calculate_gain(nn::init::Nonlinearity::leaky_relu, 0.2) == Approx(std::sqrt(2 / 1.04)));

  // Same generator state, same values; bf16 tensors hold the bf16 rounding of them.
  Tensor a = empty({1000}), b = empty({1000}, {bf16});
  Generator g1(9), g2(9);
  nn::init::uniform_(a, -1, 1, &g1);
  nn::init::uniform_(b, -1, 1, &g2);
  CHECK(allclose(b.to(f64), a.to(bf16).to(f64), 0, 0));
  nn::init::ones_(b);
  CHECK(min(b).item<double>() == 1.0);
  nn::init::zeros_(b);
  CHECK(max_abs(b) == 0.0);

  CHECK_THROWS_WITH(nn::init::uniform_(ones({2}, {i64})), Catch::Contains("uniform_") && Catch::Contains("i64"));
  CHECK_THROWS_WITH(nn::init::kaiming_uniform_(ones({4})), Catch::Contains("at least 2 axes") && Catch::Contains("[4]"));
  CHECK_THROWS_WITH(nn::init::uniform_(ones({2}), 1, 0), Catch::Contains("lo <= hi"));
}

TEST_CASE("layers check their arguments and inputs", "[module][errors]") {
  CHECK_THROWS_WITH(nn::Conv2d(6, 4, 3, {.groups = 4}), Catch::Contains("groups (4)") && Catch::Contains("in_channels (6)"));
  CHECK_THROWS_WITH(nn::Linear(0, 3), Catch::Contains("positive"));
  CHECK_THROWS_WITH(nn::Dropout(1.0), Catch::Contains("[0, 1)"));
  nn::Conv2d conv(3, 8, 3);
  CHECK_THROWS_WITH(conv(ones({1, 3, 8, 8})), Catch::Contains("NHWC") && Catch::Contains("[N, H, W, 3]") &&
                                                  Catch::Contains("[1, 3, 8, 8]"));
  nn::BatchNorm2d bn(4);
  CHECK_THROWS_WITH(bn(ones({2, 4})), Catch::Contains("BatchNorm2d(4)") && Catch::Contains("[2, 4]"));
}

TEST_CASE("Sequential chains children named 0, 1, ...", "[module]") {
  nn::Sequential s;
  auto fc = s.push_back(std::make_shared<nn::Linear>(2, 2));
  s.push_back(std::make_shared<nn::ReLU>());
  CHECK(s.size() == 2);
  CHECK(names_of(s.named_parameters()) == std::vector<std::string>{"0.weight", "0.bias"});
  {
    NoGrad ng;
    copy_(fc->weight, from_vector({1, -1, 2, 0}, {2, 2}));
    copy_(fc->bias, tensor({0.5, -10}));
  }
  // [3, 1] -> [3 - 1 + 0.5, 6 - 10] = [2.5, -4] -> relu -> [2.5, 0]
  CHECK(s(tensor({3, 1}).view({1, 2})).to_vector<double>() == std::vector<double>{2.5, 0});
}

TEST_CASE("BatchNorm2d counts training batches and keeps its statistics as buffers", "[module]") {
  nn::BatchNorm2d bn(3);
  CHECK(names_of(bn.named_parameters()) == std::vector<std::string>{"weight", "bias"});
  CHECK(names_of(bn.named_buffers()) == std::vector<std::string>{"running_mean", "running_var", "num_batches_tracked"});
  Generator g(6);
  Tensor x = normal({4, 5, 5, 3}, 2.0, 1.0, {}, &g);
  bn(x);
  bn(x);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);
  CHECK(bn.num_batches_tracked.dtype() == i64);
  // Two updates with momentum 0.1 from 0 toward a batch mean near 2: 0.19 * mean.
  auto rm = bn.running_mean.to_vector<double>();
  for (double v : rm) CHECK(v == Approx(0.19 * 2.0).margin(0.06));
  bn.eval();
  bn(x);
  CHECK(bn.num_batches_tracked.item<int64_t>() == 2);
}

TEST_CASE("summary lists every tensor and the totals", "[module]") {
  Outer m;
  std::string s = m.summary();
  CHECK_THAT(s, Catch::Contains("Outer") && Catch::Contains("enc.fc.weight") && Catch::Contains("[4, 3]") &&
                    Catch::Contains("enc.steps (buffer)") && Catch::Contains("parameters: 30"));
}

TEST_CASE("MaxPool2d pools 2x2 windows; Dropout acts only in training", "[module]") {
  nn::MaxPool2d pool(2);
  // x[h, w] = 4h + w: each 2x2 window's maximum is its bottom-right element.
  Tensor x = arange(0, 16).view({1, 4, 4, 1});
  CHECK(pool(x).to_vector<double>() == std::vector<double>{5, 7, 13, 15});
  CHECK(nn::MaxPool2d(3, 1, 1)(x).shape() == Shape{1, 4, 4, 1});
  nn::Dropout drop(0.5);
  Tensor ones_in = ones({4000});
  auto kept = drop(ones_in).to_vector<double>();
  int64_t zeros_seen = std::count(kept.begin(), kept.end(), 0.0);
  CHECK(std::count(kept.begin(), kept.end(), 2.0) + zeros_seen == 4000);  // survivors scaled by 1/(1-p)
  CHECK(zeros_seen == Approx(2000).margin(200));
  drop.eval();
  CHECK(drop(ones_in).to_vector<double>() == std::vector<double>(4000, 1.0));
}
