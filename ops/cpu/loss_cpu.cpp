// CPU kernels of the losses: one pass over rows (cross-entropy, Dice) or elements
// (BCE, MSE) in f32 (f64 for f64). Partial sums are taken over fixed blocks and added
// in block order, so a result does not depend on the number of threads. Cross-entropy's
// rows run eight lanes at a time (ops/cpu/softmax_rows.h), bitwise as scalar loops.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/cpu/softmax_rows.h"
#include "ops/loss_kernels.h"

namespace hg::cpu {
namespace {

constexpr int64_t kBlock = 1024;

// f(block, begin, end) over [0, n) in blocks of kBlock, the blocks spread over threads.
int64_t block_count(int64_t n) { return (n + kBlock - 1) / kBlock; }

template <class F>
void for_blocks(int64_t n, int64_t cost_per_item, F&& f) {
  parallel_for(block_count(n), kBlock * cost_per_item, [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) f(b, b * kBlock, std::min(n, (b + 1) * kBlock));
  });
}

int64_t first_bad(const std::vector<int64_t>& per_block) {
  for (int64_t b : per_block)
    if (b >= 0) return b;
  return -1;
}

template <class T>
int64_t cross_entropy_typed(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore,
                            const Tensor& loss, const Tensor& lse, const Tensor& wsum) {
  using A = accum_t<T>;
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  const T* px = logits.data<T>();
  const int64_t* pt = target.data<int64_t>();
  const A* pw = weight.defined() ? weight.data<A>() : nullptr;
  A* plse = lse.data<A>();
  const int64_t blocks = block_count(N);
  std::vector<A> part_loss(static_cast<size_t>(blocks)), part_w(static_cast<size_t>(blocks));
  std::vector<int64_t> part_bad(static_cast<size_t>(blocks), -1);
  for_blocks(N, C * 8, [&](int64_t b, int64_t r0, int64_t r1) {
    std::vector<A> e(static_cast<size_t>(C));
    A l = 0, ws = 0;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = pt[r];
      plse[r] = 0;
      if (t == ignore) continue;
      if (t < 0 || t >= C) {
        if (part_bad[b] < 0) part_bad[b] = r;
        continue;
      }
      const T* row = px + r * C;
      const A m = rows::max(row, C), log_s = std::log(rows::exp_sum(row, C, m, e.data()));
      plse[r] = m + log_s;
      const A w = pw ? pw[t] : A(1);
      l += cross_entropy_row_loss(w, m, log_s, A(load(row[t])));
      ws += w;
    }
    part_loss[b] = l;
    part_w[b] = ws;
  });
  A total = 0, wtotal = 0;
  for (int64_t b = 0; b < blocks; ++b) {
    total += part_loss[b];
    wtotal += part_w[b];
  }
  // All positions ignored gives 0 / 0 = NaN, as PyTorch's mean does.
  *loss.data<T>() = store<T>(total / wtotal);
  *wsum.data<A>() = wtotal;
  return first_bad(part_bad);
}

template <class T>
void cross_entropy_backward_typed(const Tensor& g, const Tensor& logits, const Tensor& target, const Tensor& weight,
                                  int64_t ignore, const Tensor& lse, const Tensor& wsum, const Tensor& gx) {
  using A = accum_t<T>;
  const int64_t N = logits.shape()[0], C = logits.shape()[1];
  const T* px = logits.data<T>();
  const int64_t* pt = target.data<int64_t>();
  const A* pw = weight.defined() ? weight.data<A>() : nullptr;
  const A* plse = lse.data<A>();
  T* po = gx.data<T>();
  const A g_over_w = A(load(*g.data<T>())) / *wsum.data<A>();
  parallel_for(N, C * 8, [&](int64_t r0, int64_t r1) {
    std::vector<A> p(static_cast<size_t>(C));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = pt[r];
      const T* row = px + r * C;
      T* out = po + r * C;
      if (t == ignore) {
        std::fill(out, out + C, store<T>(A(0)));
        continue;
      }
      // p = exp(x - lse), the softmax; the target's gradient is p - 1.
      const A scale = (pw ? pw[t] : A(1)) * g_over_w;
      rows::shifted(row, C, plse[r], p.data());
      for (int64_t c = 0; c < C; ++c) p[c] = std::exp(p[c]);
      rows::store_map(C, out, [&](auto v) { return v * decltype(v)(scale); }, p.data());
      out[t] = store<T>((p[t] - A(1)) * scale);
    }
  });
}

template <class T>
void pointwise_loss_typed(PointwiseLoss kind, const Tensor& x, const Tensor& t, const Tensor& out) {
  using A = accum_t<T>;
  const int64_t n = x.numel();
  const T* px = x.data<T>();
  const T* pt = t.data<T>();
  std::vector<A> part(static_cast<size_t>(block_count(n)));
  for_blocks(n, kind == PointwiseLoss::mse ? 2 : 16, [&](int64_t b, int64_t i0, int64_t i1) {
    A s = 0;
    for (int64_t i = i0; i < i1; ++i) s += pointwise_loss_value<A>(kind, load(px[i]), load(pt[i]));
    part[b] = s;
  });
  A total = 0;
  for (A s : part) total += s;
  *out.data<T>() = store<T>(total / A(n));
}

template <class T>
void pointwise_loss_backward_typed(PointwiseLoss kind, const Tensor& g, const Tensor& x, const Tensor& t,
                                   const Tensor& gx, const Tensor& gt) {
  using A = accum_t<T>;
  const int64_t n = x.numel();
  const T* px = x.data<T>();
  const T* pt = t.data<T>();
  T* pgx = gx.defined() ? gx.data<T>() : nullptr;
  T* pgt = gt.defined() ? gt.data<T>() : nullptr;
  const A scale = A(load(*g.data<T>())) / A(n);
  parallel_for(n, 8, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const PointwiseLossGrad<A> d = pointwise_loss_grad<A>(kind, load(px[i]), load(pt[i]), scale, pgx != nullptr);
      if (pgx) pgx[i] = store<T>(d.gx);
      if (pgt) pgt[i] = store<T>(d.gt);
    }
  });
}

template <class T>
int64_t soft_dice_typed(const Tensor& probs, const Tensor& target, double eps, const Tensor& dice,
                        const Tensor& stats) {
  using A = accum_t<T>;
  const int64_t N = probs.shape()[0], C = probs.shape()[1];
  const T* pp = probs.data<T>();
  const int64_t* pt = target.data<int64_t>();
  const int64_t blocks = block_count(N);
  // Per block: I, P, Y for every class, side by side.
  std::vector<A> part(static_cast<size_t>(blocks * 3 * C), A(0));
  std::vector<int64_t> part_bad(static_cast<size_t>(blocks), -1);
  for_blocks(N, C * 2, [&](int64_t b, int64_t r0, int64_t r1) {
    A* I = part.data() + b * 3 * C;
    A* P = I + C;
    A* Y = P + C;
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t t = pt[r];
      const T* row = pp + r * C;
      if (t < 0 || t >= C) {
        if (part_bad[b] < 0) part_bad[b] = r;
        continue;
      }
      for (int64_t c = 0; c < C; ++c) P[c] += load(row[c]);
      I[t] += load(row[t]);
      Y[t] += A(1);
    }
  });
  A* ps = stats.data<A>();
  std::fill(ps, ps + 3 * C, A(0));
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t k = 0; k < 3 * C; ++k) ps[k] += part[static_cast<size_t>(b * 3 * C + k)];
  T* pd = dice.data<T>();
  const A e = static_cast<A>(eps);
  for (int64_t c = 0; c < C; ++c) pd[c] = store<T>(soft_dice_value(ps[c], ps[C + c], ps[2 * C + c], e));
  return first_bad(part_bad);
}

template <class T>
void soft_dice_backward_typed(const Tensor& g, const Tensor& target, const Tensor& stats, double eps,
                              const Tensor& gp) {
  using A = accum_t<T>;
  const int64_t N = gp.shape()[0], C = gp.shape()[1];
  const int64_t* pt = target.data<int64_t>();
  const A* ps = stats.data<A>();
  const T* pg = g.data<T>();
  T* po = gp.data<T>();
  // A per-class constant, plus 2 gc / D on the labelled class: computed once per class.
  std::vector<A> on(static_cast<size_t>(C)), off(static_cast<size_t>(C));
  const A e = static_cast<A>(eps);
  for (int64_t c = 0; c < C; ++c) {
    const SoftDiceGradTerms<A> d = soft_dice_grad<A>(A(load(pg[c])), ps[c], ps[C + c], ps[2 * C + c], e);
    on[c] = d.on;
    off[c] = d.off;
  }
  parallel_for(N, C, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      T* out = po + r * C;
      for (int64_t c = 0; c < C; ++c) out[c] = store<T>(off[c]);
      out[pt[r]] = store<T>(on[pt[r]]);
    }
  });
}

int64_t cross_entropy_cpu(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore,
                          const Tensor& loss, const Tensor& lse, const Tensor& wsum) {
  return visit_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    return cross_entropy_typed<T>(logits, target, weight, ignore, loss, lse, wsum);
  });
}

void cross_entropy_backward_cpu(const Tensor& g, const Tensor& logits, const Tensor& target, const Tensor& weight,
                                int64_t ignore, const Tensor& lse, const Tensor& wsum, const Tensor& gx) {
  visit_floating(logits.dtype(), "cross_entropy_backward", [&]<typename T>() {
    cross_entropy_backward_typed<T>(g, logits, target, weight, ignore, lse, wsum, gx);
  });
}

void pointwise_loss_cpu(PointwiseLoss kind, const Tensor& x, const Tensor& t, const Tensor& out) {
  visit_floating(x.dtype(), "pointwise_loss", [&]<typename T>() { pointwise_loss_typed<T>(kind, x, t, out); });
}

void pointwise_loss_backward_cpu(PointwiseLoss kind, const Tensor& g, const Tensor& x, const Tensor& t,
                                 const Tensor& gx, const Tensor& gt) {
  visit_floating(x.dtype(), "pointwise_loss_backward",
                 [&]<typename T>() { pointwise_loss_backward_typed<T>(kind, g, x, t, gx, gt); });
}

int64_t soft_dice_cpu(const Tensor& probs, const Tensor& target, double eps, const Tensor& dice,
                      const Tensor& stats) {
  return visit_floating(probs.dtype(), "soft_dice",
                        [&]<typename T>() { return soft_dice_typed<T>(probs, target, eps, dice, stats); });
}

void soft_dice_backward_cpu(const Tensor& g, const Tensor& target, const Tensor& stats, double eps,
                            const Tensor& gp) {
  visit_floating(gp.dtype(), "soft_dice_backward",
                 [&]<typename T>() { soft_dice_backward_typed<T>(g, target, stats, eps, gp); });
}

}  // namespace

HG_REGISTER_KERNEL(cross_entropy_stub, cpu, cross_entropy_cpu);
HG_REGISTER_KERNEL(cross_entropy_backward_stub, cpu, cross_entropy_backward_cpu);
HG_REGISTER_KERNEL(pointwise_loss_stub, cpu, pointwise_loss_cpu);
HG_REGISTER_KERNEL(pointwise_loss_backward_stub, cpu, pointwise_loss_backward_cpu);
HG_REGISTER_KERNEL(soft_dice_stub, cpu, soft_dice_cpu);
HG_REGISTER_KERNEL(soft_dice_backward_stub, cpu, soft_dice_backward_cpu);

}  // namespace hg::cpu
