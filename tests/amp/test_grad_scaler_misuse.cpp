// GradScaler misuse and state: PyTorch's refusals (a step with no scaled loss, a step with
// no gradients), the clipping guard per scaler and per parameter, and state dicts that
// are checked before anything is loaded (a disabled scaler loads its own).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <functional>

#include "halfgrad.h"

using namespace hg;

namespace {

std::vector<std::pair<std::string, Tensor>> named(const std::string& n, const Tensor& t) { return {{n, t}}; }

Tensor scalar(double v) { return full({}, v, {f64}); }

// The state as bit patterns of doubles: equal means nothing changed, -0/NaN included.
std::map<std::string, std::vector<uint64_t>> bits(const StateDict& sd) {
  std::map<std::string, std::vector<uint64_t>> out;
  for (const auto& [k, t] : sd)
    for (double v : t.to_vector<double>()) out[k].push_back(std::bit_cast<uint64_t>(v));
  return out;
}

}  // namespace

TEST_CASE("step() without a scaled loss in this iteration is refused, as PyTorch does", "[grad_scaler][errors]") {
  Tensor w = tensor({0.5, -0.25}).set_requires_grad().set_name("w");
  optim::SGD opt(named("w", w), optim::SGDOptions{.lr = 1.0});
  amp::GradScaler scaler;
  sum(w * 3.0).backward();  // scaler.scale(loss) forgotten: the gradient is 3, not 3 x 65536
  CHECK_THROWS_WITH(scaler.step(opt), Catch::Contains("no loss was scaled since the last update()") &&
                                          Catch::Contains("_scale is None") && Catch::Contains("scaler.scale(loss)"));
  CHECK_THROWS_WITH(scaler.unscale_(opt), Catch::Contains("no loss was scaled"));
  CHECK(w.grad().to_vector<double>() == std::vector<double>{3.0, 3.0});  // not divided by the scale
  CHECK(w.to_vector<double>() == std::vector<double>{0.5, -0.25});       // not stepped

  // A loss scaled in an earlier iteration does not count for this one.
  w.set_grad(Tensor());
  scaler.scale(sum(w * 3.0)).backward();
  CHECK_FALSE(scaler.step(opt).skipped());
  scaler.update();
  w.set_grad(Tensor());
  sum(w * 3.0).backward();
  CHECK_THROWS_WITH(scaler.step(opt), Catch::Contains("no loss was scaled"));
  CHECK(w.to_vector<double>() == std::vector<double>{0.5 - 3.0, -0.25 - 3.0});

  // A disabled scaler is a pass-through: nothing to refuse.
  amp::GradScaler off(amp::GradScalerOptions{.enabled = false});
  off.step(opt);
  CHECK(w.to_vector<double>() == std::vector<double>{0.5 - 6.0, -0.25 - 6.0});
}

TEST_CASE("step() on an optimizer none of whose parameters has a gradient is refused", "[grad_scaler][errors]") {
  Tensor w = tensor({0.5}).set_requires_grad().set_name("w");
  Tensor v = tensor({2.0, 4.0}).set_requires_grad().set_name("v");  // not in the loss
  optim::SGD opt_v(named("v", v), optim::SGDOptions{.lr = 1.0});
  amp::GradScaler scaler;
  scaler.scale(sum(w * 3.0)).backward();
  CHECK_THROWS_WITH(scaler.step(opt_v), Catch::Contains("No inf checks were recorded for this optimizer") &&
                                            Catch::Contains("none of the 1 parameters"));
  CHECK(v.to_vector<double>() == std::vector<double>{2.0, 4.0});
}

TEST_CASE("holds_scaled_grad is per scaler and per parameter", "[grad_scaler][clip]") {
  // Two models, each with its own scaler: a scaled loss of one must not stop the other
  // from clipping (before, one scaler answered for every parameter in the process).
  Tensor a = tensor({0.5, -0.25}).set_requires_grad().set_name("a");
  Tensor c = tensor({1.0}).set_requires_grad().set_name("c");  // a's model, another optimizer
  Tensor b = tensor({1.0, 1.0}).set_requires_grad().set_name("b");
  optim::SGD opt_a(named("a", a), optim::SGDOptions{.lr = 0.1});
  optim::SGD opt_c(named("c", c), optim::SGDOptions{.lr = 0.1});
  amp::GradScaler sa, sb;
  sa.scale(sum(a * 3.0) + sum(c * 1.0)).backward();
  sum(b * tensor({6.0, 8.0})).backward();  // b's model in f32, no scaling this step
  CHECK(sa.holds_scaled_grad(a));
  CHECK(sa.holds_scaled_grad(c));
  CHECK_FALSE(sa.holds_scaled_grad(b));
  CHECK_FALSE(sb.holds_scaled_grad(a));
  CHECK(optim::clip_grad_norm_({b}, 100.0) == Approx(10.0));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({a}, 1.0), Catch::Contains("still multiplied by the loss scale S = 65536") &&
                                                          Catch::Contains("'a'"));
  sa.unscale_(opt_a);
  CHECK_FALSE(sa.holds_scaled_grad(a));
  CHECK(sa.holds_scaled_grad(c));  // its optimizer is not unscaled yet
  CHECK(optim::clip_grad_norm_({a}, 100.0) == Approx(std::sqrt(18.0)));
  CHECK_THROWS_WITH(optim::clip_grad_value_({c}, 1.0), Catch::Contains("'c'"));
  sa.step(opt_a);
  sa.step(opt_c);
  sa.update();
  CHECK_FALSE(sa.holds_scaled_grad(c));
}

TEST_CASE("O2: the masters' gradients carry the scale until their optimizer is unscaled", "[grad_scaler][clip][master]") {
  Tensor w16 = tensor({0.5, 0.25}, {f16}).set_requires_grad().set_name("w");
  amp::MasterWeights mw(named("w", w16));
  const Tensor master = mw.params()[0].second;
  optim::SGD opt(mw.params(), optim::SGDOptions{.lr = 0.1});
  amp::GradScaler scaler(amp::GradScalerOptions{.init_scale = 1024.0});
  scaler.scale(sum(w16 * 3.0)).backward();
  mw.copy_grads_to_master();
  CHECK(master.grad().to_vector<double>() == std::vector<double>{3072.0, 3072.0});
  CHECK(scaler.holds_scaled_grad(master));
  CHECK_THROWS_WITH(optim::clip_grad_norm_({master}, 1.0), Catch::Contains("still multiplied"));
  scaler.unscale_(opt);
  CHECK(optim::clip_grad_norm_({master}, 100.0) == Approx(3.0 * std::sqrt(2.0)));
}

TEST_CASE("scale() does not walk the graph: backward marks the gradients it reaches", "[grad_scaler][clip]") {
  // Before, scale() walked the whole graph to find the leaves (O(graph) per step) and held
  // them scaled from then on, even before any scaled gradient had reached them.
  Tensor w = tensor({0.5, -0.25}).set_requires_grad().set_name("w");
  optim::SGD opt(named("w", w), optim::SGDOptions{.lr = 0.1});
  amp::GradScaler scaler(amp::GradScalerOptions{.init_scale = 4.0});
  sum(w * tensor({3.0, 4.0})).backward();  // an unscaled gradient (3, 4)
  Tensor x = w;
  for (int i = 0; i < 20000; ++i) x = x * 1.0;  // w lies 20,000 nodes below the loss
  Tensor scaled = scaler.scale(sum(x));
  CHECK_FALSE(scaler.holds_scaled_grad(w));  // nothing scaled has reached w yet
  CHECK(optim::clip_grad_norm_({w}, 100.0) == Approx(5.0));
  scaled.backward();
  CHECK(scaler.holds_scaled_grad(w));
  CHECK(w.grad().to_vector<double>() == std::vector<double>{3.0 + 4.0, 4.0 + 4.0});
  // More unscaled gradient added to a scaled sum leaves it scaled.
  sum(w * 1.0).backward();
  CHECK_THROWS_WITH(optim::clip_grad_value_({w}, 1.0), Catch::Contains("still multiplied by the loss scale S = 4"));
  scaler.unscale_(opt);
  CHECK_FALSE(scaler.holds_scaled_grad(w));
  CHECK_NOTHROW(optim::clip_grad_value_({w}, 1.0));
}

TEST_CASE("a parameter outside every optimizer stays refused until update()", "[grad_scaler][clip]") {
  Tensor w = tensor({0.5}).set_requires_grad().set_name("w");
  Tensor loose = tensor({2.0}).set_requires_grad().set_name("loose");  // in the loss, in no optimizer
  optim::SGD opt(named("w", w), optim::SGDOptions{.lr = 0.1});
  amp::GradScaler scaler;
  scaler.scale(sum(w * loose)).backward();
  scaler.step(opt);
  CHECK_THROWS_WITH(optim::clip_grad_norm_({loose}, 1.0), Catch::Contains("'loose'"));
  scaler.update();
  CHECK_FALSE(scaler.holds_scaled_grad(loose));
  CHECK(optim::clip_grad_norm_({loose}, 1e9) == Approx(0.5 * 65536.0));
}

TEST_CASE("a disabled scaler loads its own state dict", "[grad_scaler][state]") {
  const bool use_amp = false;
  amp::GradScaler off(amp::GradScalerOptions{.enabled = use_amp});
  CHECK(off.state_dict().empty());
  off.load_state_dict(off.state_dict());  // threw before: "this scaler is disabled"
  amp::GradScaler on;
  off.load_state_dict(on.state_dict());  // PyTorch: a disabled scaler ignores what it is given
  CHECK_FALSE(off.is_enabled());
  CHECK(off.get_scale() == 1.0);
  CHECK_THROWS_WITH(on.load_state_dict(off.state_dict()), Catch::Contains("saved from a disabled instance"));
}

TEST_CASE("load_state_dict refuses bad entries and changes nothing then", "[grad_scaler][state][errors]") {
  amp::GradScalerOptions o;
  o.init_scale = 1024.0;
  o.growth_interval = 5;
  o.hysteresis = 2;
  amp::GradScaler src(o);
  Tensor p = tensor({1.0}).set_requires_grad();
  optim::SGD opt({p}, optim::SGDOptions{.lr = 0.0});
  src.scale(sum(p * 1.0)).backward();
  src.step(opt);
  src.update();  // tracker 1
  const StateDict good = src.state_dict();

  amp::GradScaler dst;  // defaults: scale 65536, interval 2000
  const auto before = bits(dst.state_dict());
  struct Case {
    const char* what;
    std::function<void(StateDict&)> corrupt;
    const char* message;
  };
  const std::vector<Case> cases = {
      {"NaN scale", [](StateDict& s) { s["scale"] = scalar(NAN); }, "'scale' must be finite and > 0"},
      {"negative scale", [](StateDict& s) { s["scale"] = scalar(-2.0); }, "'scale' must be finite and > 0"},
      {"zero scale", [](StateDict& s) { s["scale"] = scalar(0.0); }, "'scale' must be finite and > 0"},
      {"scale beyond f32", [](StateDict& s) { s["scale"] = scalar(1e39); }, "in f32"},
      {"scale of two elements", [](StateDict& s) { s["scale"] = tensor({1.0, 2.0}); }, "'scale' must be a one-element"},
      {"i64 scale", [](StateDict& s) { s["scale"] = full({}, 8, {i64}); }, "'scale' must be a floating tensor, got i64"},
      {"undefined scale", [](StateDict& s) { s["scale"] = Tensor(); }, "undefined"},
      {"zero interval", [](StateDict& s) { s["growth_interval"] = scalar(0); }, "'growth_interval' must be a whole number in [1, 2^63)"},
      {"negative interval", [](StateDict& s) { s["growth_interval"] = scalar(-5); }, "'growth_interval'"},
      {"interval beyond int64", [](StateDict& s) { s["growth_interval"] = scalar(1e19); }, "'growth_interval'"},
      {"fractional interval", [](StateDict& s) { s["growth_interval"] = scalar(2.5); }, "'growth_interval'"},
      {"growth factor 1", [](StateDict& s) { s["growth_factor"] = scalar(1.0); }, "'growth_factor' must be finite and > 1"},
      {"growth factor NaN", [](StateDict& s) { s["growth_factor"] = scalar(NAN); }, "'growth_factor'"},
      {"growth factor inf", [](StateDict& s) { s["growth_factor"] = scalar(INFINITY); }, "'growth_factor'"},
      {"backoff 0", [](StateDict& s) { s["backoff_factor"] = scalar(0.0); }, "'backoff_factor' must be in (0, 1)"},
      {"backoff 1", [](StateDict& s) { s["backoff_factor"] = scalar(1.0); }, "'backoff_factor' must be in (0, 1)"},
      {"backoff NaN", [](StateDict& s) { s["backoff_factor"] = scalar(NAN); }, "'backoff_factor'"},
      {"f32 tracker", [](StateDict& s) { s["_growth_tracker"] = full({}, 1.0, {f32}); }, "'_growth_tracker' must be a one-element i64"},
      {"negative tracker", [](StateDict& s) { s["_growth_tracker"] = full({}, -1, {i64}); }, "'_growth_tracker' must be in [0, 4]"},
      {"tracker at the interval", [](StateDict& s) { s["_growth_tracker"] = full({}, 5, {i64}); }, "must be in [0, 4]"},
      {"hysteresis 0", [](StateDict& s) { s["hysteresis"] = scalar(0); }, "'hysteresis'"},
      {"hysteresis tracker too big", [](StateDict& s) { s["_hysteresis_tracker"] = full({}, 3, {i64}); }, "'_hysteresis_tracker' must be at most 2, got 3"},
      {"negative skip streak", [](StateDict& s) { s["_skip_streak"] = full({}, -1, {i64}); }, "'_skip_streak' must be in [0, "},
      {"min_scale below 2^-126", [](StateDict& s) { s["min_scale"] = scalar(0x1p-130); }, "need 2^-126 <= min_scale"},
      {"scale below 2^-126", [](StateDict& s) { s["scale"] = scalar(0x1p-140); s["min_scale"] = scalar(0); }, "can never recover"},
      {"min_scale above the scale", [](StateDict& s) { s["min_scale"] = scalar(4096); }, "min_scale <= scale <= max_scale"},
      {"missing entry", [](StateDict& s) { s.erase("backoff_factor"); }, "missing entry 'backoff_factor'"},
      {"unknown entry", [](StateDict& s) { s["scal"] = scalar(2); }, "unexpected entry 'scal'"},
  };
  for (const Case& c : cases) {
    INFO(c.what);
    StateDict bad = good;
    c.corrupt(bad);
    CHECK_THROWS_WITH(dst.load_state_dict(bad), Catch::Contains(c.message));
    CHECK(bits(dst.state_dict()) == before);
    CHECK(dst.options().growth_interval == 2000);
  }
  dst.load_state_dict(good);
  CHECK(bits(dst.state_dict()) == bits(good));
  CHECK(dst.get_scale() == 1024.0);
  CHECK(dst.growth_tracker().item<int64_t>() == 1);
  CHECK(dst.options().growth_interval == 5);
}
