// The CPU optimizer kernel on f16/bf16 parameters long enough to cross its 256-element
// blocks and the thread split: every element equals the update rule applied alone to
// the widened values and rounded once, state in f32 or in the parameter's dtype; f32 too
// (Adam's F8 lanes), with weight decay, AdamW, amsgrad and inf/NaN/subnormal values.
#include <catch2/catch.hpp>
#include <thread>

#include <bit>
#include <cmath>
#include <memory>
#include <tuple>
#include <vector>

#include "ops/optim_update_rules.h"
#include "halfgrad.h"

using namespace hg;

namespace {

template <class T>
std::vector<float> widened(const Tensor& t) {
  std::vector<float> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(static_cast<float>(t.data<T>()[i]));
  return v;
}

template <class T>
void check_adam(bool state_in_param_dtype, int threads) {
  INFO(dtype_name(dtype_v<T>) << (state_in_param_dtype ? ", state in the parameter's dtype" : ", f32 state")
                              << ", " << threads << " thread(s)");
  const int saved = hg::num_threads();
  hg::set_num_threads(threads);
  const int64_t n = 70001;  // 273 blocks of 256 and a tail
  Generator g(3);
  Tensor p = randn({n}, {dtype_v<T>}, &g).set_requires_grad();
  const optim::AdamHyper h{1e-2, 0.0, 0.9, 0.999, 1e-8, false, false};
  optim::Adam opt({p}, {.lr = h.lr});
  opt.set_state_in_param_dtype(state_in_param_dtype);
  std::vector<float> ref = widened<T>(p), m(n, 0.0f), v(n, 0.0f), vmax(n, 0.0f);
  auto round = [&](float x) { return state_in_param_dtype ? static_cast<float>(T(x)) : x; };
  for (int t = 1; t <= 2; ++t) {
    Tensor grad = randn({n}, {dtype_v<T>}, &g);
    p.set_grad(grad);
    opt.step();
    const std::vector<float> gv = widened<T>(grad);
    const auto s = optim::adam_scalars<float>(h, t);
    for (int64_t i = 0; i < n; ++i) {
      ref[i] = static_cast<float>(T(optim::adam_element(ref[i], gv[i], m[i], v[i], vmax[i], s)));
      m[i] = round(m[i]);
      v[i] = round(v[i]);
    }
  }
  hg::set_num_threads(saved);
  const std::vector<float> got = widened<T>(p);
  int bad = 0;
  for (int64_t i = 0; i < n; ++i) bad += std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(ref[i]);
  CHECK(bad == 0);
}

}  // namespace

TEST_CASE("Adam on long f16/bf16 parameters equals the per-element rule, rounded once", "[optim][cpu]") {
  for (bool in_dtype : {false, true})
    for (int threads : {1, 2}) {
      check_adam<half>(in_dtype, threads);
      check_adam<bfloat16>(in_dtype, threads);
    }
}

namespace {

// Both NaN, or equal bits (which NaN payload survives where two meet is the compiler's order).
bool same_value(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// Values with inf, NaN, f32 subnormals and zeros among normal ones.
template <class T>
Tensor with_specials(int64_t n, uint64_t seed) {
  Generator g(seed);
  Tensor t = randn({n}, {dtype_v<T>}, &g);
  const float specials[5] = {INFINITY, -INFINITY, NAN, std::bit_cast<float>(0x00012345u), 0.0f};
  for (int64_t i = 0; i < n; ++i)
    if ((i * 7 + static_cast<int64_t>(seed)) % 11 == 0) t.data<T>()[i] = T(specials[(i / 11) % 5]);
  return t;
}

// Every length 1..17 (the F8 body and each scalar tail) and one that crosses a 256-element block.
template <class T>
void check_adam_variants(bool decoupled, double weight_decay, bool amsgrad) {
  INFO(dtype_name(dtype_v<T>) << (decoupled ? " AdamW" : " Adam") << ", weight decay " << weight_decay
                              << (amsgrad ? ", amsgrad" : ""));
  for (int64_t n : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 300}) {
    INFO("n " << n);
    Tensor p = with_specials<T>(n, static_cast<uint64_t>(n)).set_requires_grad();
    const optim::AdamHyper h{1e-2, weight_decay, 0.9, 0.999, 1e-8, amsgrad, decoupled};
    std::unique_ptr<optim::Adam> opt;
    if (decoupled) opt = std::make_unique<optim::AdamW>(optim::Params{p}, optim::AdamWOptions{.lr = h.lr, .weight_decay = weight_decay, .amsgrad = amsgrad});
    else opt = std::make_unique<optim::Adam>(optim::Params{p}, optim::AdamOptions{.lr = h.lr, .weight_decay = weight_decay, .amsgrad = amsgrad});
    std::vector<float> ref = widened<T>(p), m(n, 0.0f), v(n, 0.0f), vmax(n, 0.0f);
    for (int t = 1; t <= 3; ++t) {
      Tensor grad = with_specials<T>(n, static_cast<uint64_t>(100 * t + n));
      p.set_grad(grad);
      opt->step();
      const std::vector<float> gv = widened<T>(grad);
      const auto s = optim::adam_scalars<float>(h, t);
      for (int64_t i = 0; i < n; ++i) ref[i] = static_cast<float>(T(optim::adam_element(ref[i], gv[i], m[i], v[i], vmax[i], s)));
    }
    const std::vector<float> got = widened<T>(p);
    int bad = 0;
    for (int64_t i = 0; i < n; ++i) bad += !same_value(got[i], ref[i]);
    CHECK(bad == 0);
  }
}

}  // namespace

TEST_CASE("Adam, AdamW and amsgrad over f32/f16/bf16 equal the scalar rule on every tail length, with inf/NaN/subnormals",
          "[optim][cpu]") {
  for (auto [decoupled, wd, ams] : {std::tuple{false, 0.0, false}, std::tuple{false, 0.1, false},
                                    std::tuple{true, 0.1, true}, std::tuple{false, 0.0, true}}) {
    check_adam_variants<float>(decoupled, wd, ams);
    check_adam_variants<half>(decoupled, wd, ams);
    check_adam_variants<bfloat16>(decoupled, wd, ams);
  }
}
