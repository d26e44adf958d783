// The update/weight ratio of one optimizer step, per parameter and over all of them, and
// the Adam elements whose denominator had lost its history: a flushed v (stored 0 while m
// is not) and, with a zero gradient on top, a step of lr * m_hat / eps.
#include "bench/segbench/update_stats.h"

#include <algorithm>
#include <cmath>

namespace hg::segbench {

namespace {

// Adam's stored second moment, or empty where there is none (no Adam, or no step yet).
// With amsgrad the update reads the larger of v and its running maximum.
std::vector<double> second_moment(const optim::ParamState* st) {
  if (!st || !st->buffers.count("exp_avg_sq")) return {};
  std::vector<double> v = st->buffers.at("exp_avg_sq").to_vector<double>();
  if (const auto it = st->buffers.find("max_exp_avg_sq"); it != st->buffers.end()) {
    const std::vector<double> vmax = it->second.to_vector<double>();
    for (size_t k = 0; k < v.size(); ++k) v[k] = std::max(v[k], vmax[k]);
  }
  return v;
}

double fraction(int64_t part, int64_t whole) {
  return whole > 0 ? static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

}  // namespace

UpdateProbe::UpdateProbe(const optim::Optimizer& opt) : opt_(opt) {
  const auto& groups = opt.param_groups();
  lr_ = groups.empty() ? 0.0 : groups[0].lr.value_or(0.0);
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t i = 0; i < groups[gi].params.size(); ++i) {
      const Tensor& p = groups[gi].params[i];
      Before b;
      b.w = p.to_vector<double>();
      b.has_grad = p.grad().defined();
      if (b.has_grad) b.g = p.grad().to_vector<double>();
      const optim::ParamState* st = opt.state(gi, i);
      b.v = second_moment(st);
      if (!b.v.empty()) b.m = st->buffers.at("exp_avg").to_vector<double>();
      before_.push_back(std::move(b));
    }
}

UpdateSample UpdateProbe::measure(int64_t step, bool skipped) const {
  UpdateSample s;
  s.step = step;
  s.lr = lr_;
  s.skipped = skipped;
  if (skipped) return s;
  const auto names = opt_.named_parameters();
  const auto& groups = opt_.param_groups();
  double dw2 = 0, w2 = 0, v_lost_dw2 = 0, eps_dw2 = 0, eps_step = 0;
  int64_t elements = 0, big_step = 0, with_grad = 0, grad_zero = 0, adam_n = 0, v_lost = 0, eps_only = 0;
  int64_t grad_nonzero = 0, v_flushed = 0;
  bool adam = false;
  size_t flat = 0;
  for (size_t gi = 0; gi < groups.size(); ++gi)
    for (size_t i = 0; i < groups[gi].params.size(); ++i, ++flat) {
      const Before& b = before_[flat];
      const std::vector<double> wa = groups[gi].params[i].to_vector<double>();
      const std::vector<double> v_after = b.has_grad ? second_moment(opt_.state(gi, i)) : std::vector<double>{};
      const bool is_adam = !v_after.empty();
      adam |= is_adam;
      double l_dw2 = 0, l_w2 = 0;
      int64_t unchanged = 0;
      for (size_t k = 0; k < wa.size(); ++k) {
        const double d = wa[k] - b.w[k];
        l_dw2 += d * d;
        l_w2 += b.w[k] * b.w[k];
        unchanged += d == 0;
        big_step += std::abs(d) > 10 * lr_;
        if (!b.has_grad) continue;
        ++with_grad;
        grad_zero += b.g[k] == 0;
        if (!is_adam) continue;
        ++adam_n;
        const double m_prev = b.m.empty() ? 0.0 : b.m[k], v_prev = b.v.empty() ? 0.0 : b.v[k];
        if (v_prev == 0 && m_prev != 0) {
          ++v_lost;
          v_lost_dw2 += d * d;
          if (b.g[k] == 0) {
            ++eps_only;
            eps_dw2 += d * d;
            eps_step += std::abs(d);
          }
        }
        if (b.g[k] != 0) {
          ++grad_nonzero;
          v_flushed += v_after[k] == 0;
        }
      }
      const double ratio = l_w2 > 0 ? std::sqrt(l_dw2 / l_w2) : NAN;
      s.layers.push_back({names[flat].first, ratio, fraction(unchanged, static_cast<int64_t>(wa.size()))});
      if (std::isfinite(ratio) && ratio >= s.max_layer_ratio) {
        s.max_layer_ratio = ratio;
        s.max_layer = names[flat].first;
      }
      dw2 += l_dw2;
      w2 += l_w2;
      elements += static_cast<int64_t>(wa.size());
    }
  s.ratio = w2 > 0 ? std::sqrt(dw2 / w2) : NAN;
  s.big_step_fraction = fraction(big_step, elements);
  s.grad_zero_fraction = fraction(grad_zero, with_grad);
  if (adam) {
    s.v_lost_fraction = fraction(v_lost, adam_n);
    s.eps_only_fraction = fraction(eps_only, adam_n);
    s.v_lost_share = dw2 > 0 ? v_lost_dw2 / dw2 : 0.0;
    s.eps_only_share = dw2 > 0 ? eps_dw2 / dw2 : 0.0;
    s.eps_only_mean_step = eps_only > 0 && lr_ > 0 ? eps_step / static_cast<double>(eps_only) / lr_ : 0.0;
    s.v_flushed_fraction = fraction(v_flushed, grad_nonzero);
  }
  return s;
}

}  // namespace hg::segbench
