// The losses on the cuda device, in f32 (f64 for f64) as on the CPU. Totals are taken in two
// deterministic passes (per-row or per-block partial sums, then one block adding them in a
// fixed order), and that last block also finds the first invalid label. The kernels that
// return that label's index read it back: the one host sync of a loss's forward.
#include <algorithm>
#include <cstdint>
#include <limits>

#include "cuda/contiguous_check.h"
#include "cuda/device_types.h"
#include "cuda/index_loop.h"
#include "cuda/row_groups.h"
#include "ops/kernel_math.h"
#include "ops/loss_kernels.h"

namespace hg::cuda {
namespace {

constexpr unsigned kThreads = 256;

template <class A>
struct Add {
  HG_DEVICE A operator()(A a, A b) const { return a + b; }
};

struct Min {
  HG_DEVICE int64_t operator()(int64_t a, int64_t b) const { return b < a ? b : a; }
};

template <class A>
struct Max {
  HG_DEVICE A operator()(A a, A b) const { return b > a ? b : a; }
};

HG_DEVICE bool is_class(int64_t t, int64_t C) { return t >= 0 && t < C; }

// Per row: lse (0 on ignored and invalid rows, as the CPU leaves it) and w[t] (lse - x_t).
template <class T>
__global__ void cross_entropy_rows(const T* x, const int64_t* target, const accum_t<T>* weight, int64_t ignore,
                                   RowGroups rows, int64_t C, accum_t<T>* lse, accum_t<T>* row_loss) {
  using A = accum_t<T>;
  const unsigned group = rows.group;
  constexpr A kNegInf = -std::numeric_limits<A>::infinity();
  for_each_row(rows, [&](int64_t r, unsigned lane, bool active) {
    const T* row = x + (active ? r * C : 0);
    const int64_t len = active ? C : 0;
    A m = kNegInf;
    for (int64_t c = lane; c < len; c += group) m = Max<A>{}(m, A(dev_load(row[c])));
    m = group_reduce(m, Max<A>{}, kNegInf, group);
    A s = 0;
    for (int64_t c = lane; c < len; c += group) s += math_exp(A(dev_load(row[c])) - m);
    s = group_reduce(s, Add<A>{}, A(0), group);
    if (!active || lane != 0) return;
    const int64_t t = target[r];
    if (t == ignore || !is_class(t, C)) {
      lse[r] = A(0);
      row_loss[r] = A(0);
      return;
    }
    const A log_s = math_log(s);
    lse[r] = m + log_s;
    row_loss[r] = cross_entropy_row_loss(weight ? weight[t] : A(1), m, log_s, A(dev_load(row[t])));
  });
}

// One block: the loss sum, the weight sum and the first invalid label (-1 if none).
template <class T>
__global__ void cross_entropy_total(const accum_t<T>* row_loss, const int64_t* target, const accum_t<T>* weight,
                                    int64_t ignore, int64_t N, int64_t C, T* loss, accum_t<T>* wsum, int64_t* bad) {
  using A = accum_t<T>;
  A l = 0, w = 0;
  int64_t first_bad = N;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x) {
    const int64_t t = target[r];
    if (t == ignore) continue;
    if (!is_class(t, C)) {
      first_bad = first_bad < r ? first_bad : r;
      continue;
    }
    l += row_loss[r];
    w += weight ? weight[t] : A(1);
  }
  l = block_reduce(l, Add<A>{}, A(0));
  w = block_reduce(w, Add<A>{}, A(0));
  first_bad = block_reduce(first_bad, Min{}, N);
  if (threadIdx.x != 0) return;
  *loss = dev_store<T>(l / w);  // all rows ignored: 0 / 0 = NaN, as on the CPU
  *wsum = w;
  *bad = first_bad < N ? first_bad : -1;
}

template <class T>
struct CrossEntropyGrad {
  const T *g, *x;
  const int64_t* target;
  const accum_t<T> *weight, *lse, *wsum;
  int64_t ignore, C;
  T* gx;
  HG_DEVICE void operator()(int64_t i) const {
    using A = accum_t<T>;
    const int64_t r = i / C, c = i - r * C, t = target[r];
    if (t == ignore || !is_class(t, C)) {
      gx[i] = dev_store<T>(A(0));
      return;
    }
    const A scale = (weight ? weight[t] : A(1)) * (A(dev_load(*g)) / *wsum);
    const A p = math_exp(A(dev_load(x[i])) - lse[r]);
    gx[i] = dev_store<T>((c == t ? p - A(1) : p) * scale);
  }
};

// Block b's sum of the loss over a grid-stride share of the elements.
template <class T>
__global__ void pointwise_partial(PointwiseLoss kind, const T* x, const T* t, int64_t n, accum_t<T>* part) {
  using A = accum_t<T>;
  A s = 0;
  for (int64_t i = int64_t{blockIdx.x} * blockDim.x + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    s += pointwise_loss_value<A>(kind, dev_load(x[i]), dev_load(t[i]));
  s = block_reduce(s, Add<A>{}, A(0));
  if (threadIdx.x == 0) part[blockIdx.x] = s;
}

template <class T>
__global__ void pointwise_total(const accum_t<T>* part, int64_t parts, int64_t n, T* out) {
  using A = accum_t<T>;
  A s = 0;
  for (int64_t b = threadIdx.x; b < parts; b += blockDim.x) s += part[b];
  s = block_reduce(s, Add<A>{}, A(0));
  if (threadIdx.x == 0) *out = dev_store<T>(s / A(n));
}

template <class T>
struct PointwiseGrad {
  PointwiseLoss kind;
  const T *g, *x, *t;
  T *gx, *gt;  // either may be null
  int64_t n;
  HG_DEVICE void operator()(int64_t i) const {
    using A = accum_t<T>;
    const A scale = A(dev_load(*g)) / A(n);
    const PointwiseLossGrad<A> d = pointwise_loss_grad<A>(kind, dev_load(x[i]), dev_load(t[i]), scale, gx != nullptr);
    if (gx) gx[i] = dev_store<T>(d.gx);
    if (gt) gt[i] = dev_store<T>(d.gt);
  }
};

// Soft Dice partial sums: block (chunk, tile) adds rows of its chunk of kDiceRows for the 32
// classes of its tile, 8 row lanes per class summed in a fixed order; part[chunk][k][c]
// holds I, P, Y (k = 0, 1, 2). Rows with an invalid label count nowhere, as on the CPU.
constexpr int kDiceClasses = 32, kDiceLanes = 8;
constexpr int64_t kDiceRows = 1024;

template <class T>
__global__ void soft_dice_partial(const T* p, const int64_t* target, int64_t N, int64_t C, accum_t<T>* part) {
  using A = accum_t<T>;
  __shared__ A sums[3][kDiceLanes][kDiceClasses];
  const int tx = static_cast<int>(threadIdx.x), ty = static_cast<int>(threadIdx.y);
  const int64_t c = int64_t{blockIdx.y} * kDiceClasses + tx, r0 = int64_t{blockIdx.x} * kDiceRows;
  const int64_t r1 = r0 + kDiceRows < N ? r0 + kDiceRows : N;
  A I = 0, P = 0, Y = 0;
  if (c < C)
    for (int64_t r = r0 + ty; r < r1; r += kDiceLanes) {
      const int64_t t = target[r];
      if (!is_class(t, C)) continue;
      const A v = dev_load(p[r * C + c]);
      P += v;
      if (t == c) {
        I += v;
        Y += A(1);
      }
    }
  sums[0][ty][tx] = I;
  sums[1][ty][tx] = P;
  sums[2][ty][tx] = Y;
  sync_threads();
  if (ty >= 3 || c >= C) return;
  A s = 0;
  for (int y = 0; y < kDiceLanes; ++y) s += sums[ty][y][tx];
  part[(int64_t{blockIdx.x} * 3 + ty) * C + c] = s;
}

// One block: stats[k][c] summed over chunks in order, dice per class, the first invalid label.
template <class T>
__global__ void soft_dice_total(const accum_t<T>* part, int64_t chunks, const int64_t* target, int64_t N, int64_t C,
                                accum_t<T> eps, accum_t<T>* stats, T* dice, int64_t* bad) {
  using A = accum_t<T>;
  for (int64_t c = threadIdx.x; c < C; c += blockDim.x) {
    A s[3] = {A(0), A(0), A(0)};
    for (int64_t b = 0; b < chunks; ++b)
      for (int k = 0; k < 3; ++k) s[k] += part[(b * 3 + k) * C + c];
    for (int k = 0; k < 3; ++k) stats[k * C + c] = s[k];
    dice[c] = dev_store<T>(soft_dice_value(s[0], s[1], s[2], eps));
  }
  int64_t first_bad = N;
  for (int64_t r = threadIdx.x; r < N; r += blockDim.x)
    if (!is_class(target[r], C) && r < first_bad) first_bad = r;
  first_bad = block_reduce(first_bad, Min{}, N);
  if (threadIdx.x == 0) *bad = first_bad < N ? first_bad : -1;
}

template <class T>
struct SoftDiceGrad {
  const T* g;
  const int64_t* target;
  const accum_t<T>* stats;
  accum_t<T> eps;
  int64_t C;
  T* gp;
  HG_DEVICE void operator()(int64_t i) const {
    using A = accum_t<T>;
    const int64_t r = i / C, c = i - r * C;
    const SoftDiceGradTerms<A> d = soft_dice_grad<A>(dev_load(g[c]), stats[c], stats[C + c], stats[2 * C + c], eps);
    gp[i] = dev_store<T>(target[r] == c ? d.on : d.off);
  }
};

template <class A>
const A* optional(const Tensor& t) {
  return t.defined() ? t.data<A>() : nullptr;
}

// The stubs' contract, checked because kernels read raw pointers: labels in i64, the
// statistics (weight, lse, wsum, stats) in the accumulation dtype of x.
void check_dtypes(const char* op, const Tensor& x, const Tensor& target, std::initializer_list<const Tensor*> acc) {
  const DType a = x.dtype() == f64 ? f64 : f32;
  HG_CHECK(!target.defined() || target.dtype() == i64, op, ": target must be i64, got ", dtype_name(target.dtype()));
  for (const Tensor* t : acc)
    HG_CHECK(!t->defined() || t->dtype() == a, op, ": statistics of ", dtype_name(x.dtype()), " inputs are ",
             dtype_name(a), ", got ", dtype_name(t->dtype()));
}

LaunchConfig one_block(const Tensor& on, const char* name) {
  return {.grid = 1, .block = kThreads, .stream = current_stream(on.device().index), .name = name};
}

int64_t cross_entropy_cuda(const Tensor& logits, const Tensor& target, const Tensor& weight, int64_t ignore,
                           const Tensor& loss, const Tensor& lse, const Tensor& wsum) {
  check_contiguous("cross_entropy", {&logits, &target, &weight, &lse});
  check_dtypes("cross_entropy", logits, target, {&weight, &lse, &wsum});
  const int64_t N = logits.size(0), C = logits.size(1);
  const Device dev = logits.device();
  Tensor bad = empty({}, {i64, dev});
  return visit_floating(logits.dtype(), "cross_entropy", [&]<typename T>() {
    using A = accum_t<T>;
    const Tensor row_loss = empty({N}, {dtype_v<A>, dev});
    const RowGroups rows = row_groups(N, C);
    if (N > 0)
      launch(cross_entropy_rows<T>, row_config(rows, dev.index, "cross_entropy_rows"), logits.data<T>(),
             target.data<int64_t>(), optional<A>(weight), ignore, rows, C, lse.data<A>(), row_loss.data<A>());
    launch(cross_entropy_total<T>, one_block(logits, "cross_entropy_total"), row_loss.data<A>(),
           target.data<int64_t>(), optional<A>(weight), ignore, N, C, loss.data<T>(), wsum.data<A>(),
           bad.data<int64_t>());
    return bad.item<int64_t>();
  });
}

void cross_entropy_backward_cuda(const Tensor& g, const Tensor& logits, const Tensor& target, const Tensor& weight,
                                 int64_t ignore, const Tensor& lse, const Tensor& wsum, const Tensor& gx) {
  check_contiguous("cross_entropy_backward", {&logits, &target, &weight, &lse, &gx});
  check_dtypes("cross_entropy_backward", logits, target, {&weight, &lse, &wsum});
  visit_floating(logits.dtype(), "cross_entropy_backward", [&]<typename T>() {
    using A = accum_t<T>;
    for_each_index(gx.device().index, "cross_entropy_backward", gx.numel(),
                   CrossEntropyGrad<T>{g.data<T>(), logits.data<T>(), target.data<int64_t>(), optional<A>(weight),
                                       lse.data<A>(), wsum.data<A>(), ignore, logits.size(1), gx.data<T>()});
  });
}

void pointwise_loss_cuda(PointwiseLoss kind, const Tensor& x, const Tensor& t, const Tensor& out) {
  check_contiguous("pointwise_loss", {&x, &t});
  const int64_t n = x.numel();
  // Blocks as the size asks, at most 1024: fixed by n, so the sums' order is too.
  const int64_t parts = std::clamp<int64_t>((n + kThreads * 16 - 1) / (kThreads * 16), 1, 1024);
  visit_floating(x.dtype(), "pointwise_loss", [&]<typename T>() {
    using A = accum_t<T>;
    const Tensor part = empty({parts}, {dtype_v<A>, x.device()});
    const int dev = x.device().index;
    launch(pointwise_partial<T>,
           {.grid = static_cast<unsigned>(parts), .block = kThreads, .stream = current_stream(dev),
            .name = "pointwise_loss_partial"},
           kind, x.data<T>(), t.data<T>(), n, part.data<A>());
    launch(pointwise_total<T>, one_block(x, "pointwise_loss_total"), part.data<A>(), parts, n, out.data<T>());
  });
}

void pointwise_loss_backward_cuda(PointwiseLoss kind, const Tensor& g, const Tensor& x, const Tensor& t,
                                  const Tensor& gx, const Tensor& gt) {
  check_contiguous("pointwise_loss_backward", {&x, &t, &gx, &gt});
  visit_floating(x.dtype(), "pointwise_loss_backward", [&]<typename T>() {
    for_each_index(x.device().index, "pointwise_loss_backward", x.numel(),
                   PointwiseGrad<T>{kind, g.data<T>(), x.data<T>(), t.data<T>(), gx.defined() ? gx.data<T>() : nullptr,
                                    gt.defined() ? gt.data<T>() : nullptr, x.numel()});
  });
}

int64_t soft_dice_cuda(const Tensor& probs, const Tensor& target, double eps, const Tensor& dice,
                       const Tensor& stats) {
  check_contiguous("soft_dice", {&probs, &target, &dice, &stats});
  check_dtypes("soft_dice", probs, target, {&stats});
  const int64_t N = probs.size(0), C = probs.size(1);
  const int64_t chunks = (N + kDiceRows - 1) / kDiceRows;
  const Device dev = probs.device();
  HG_CHECK((C + kDiceClasses - 1) / kDiceClasses <= 65535, "soft_dice on ", dev.str(), ": ", C,
           " classes are more than the kernel's grid covers (", int64_t{65535} * kDiceClasses, ")");
  Tensor bad = empty({}, {i64, dev});
  return visit_floating(probs.dtype(), "soft_dice", [&]<typename T>() {
    using A = accum_t<T>;
    const Tensor part = empty({std::max<int64_t>(chunks, 1), 3, C}, {dtype_v<A>, dev});
    if (chunks > 0)
      launch(soft_dice_partial<T>,
             {.grid = dim3(static_cast<unsigned>(chunks), static_cast<unsigned>((C + kDiceClasses - 1) / kDiceClasses)),
              .block = dim3(kDiceClasses, kDiceLanes), .stream = current_stream(dev.index), .name = "soft_dice_partial"},
             probs.data<T>(), target.data<int64_t>(), N, C, part.data<A>());
    launch(soft_dice_total<T>, one_block(probs, "soft_dice_total"), part.data<A>(), chunks, target.data<int64_t>(), N,
           C, static_cast<A>(eps), stats.data<A>(), dice.data<T>(), bad.data<int64_t>());
    return bad.item<int64_t>();
  });
}

void soft_dice_backward_cuda(const Tensor& g, const Tensor& target, const Tensor& stats, double eps,
                             const Tensor& gp) {
  check_contiguous("soft_dice_backward", {&g, &target, &stats, &gp});
  check_dtypes("soft_dice_backward", gp, target, {&stats});
  visit_floating(gp.dtype(), "soft_dice_backward", [&]<typename T>() {
    using A = accum_t<T>;
    for_each_index(gp.device().index, "soft_dice_backward", gp.numel(),
                   SoftDiceGrad<T>{g.data<T>(), target.data<int64_t>(), stats.data<A>(), static_cast<A>(eps),
                                   gp.size(1), gp.data<T>()});
  });
}

}  // namespace

HG_REGISTER_KERNEL(cross_entropy_stub, cuda, cross_entropy_cuda);
HG_REGISTER_KERNEL(cross_entropy_backward_stub, cuda, cross_entropy_backward_cuda);
HG_REGISTER_KERNEL(pointwise_loss_stub, cuda, pointwise_loss_cuda);
HG_REGISTER_KERNEL(pointwise_loss_backward_stub, cuda, pointwise_loss_backward_cuda);
HG_REGISTER_KERNEL(soft_dice_stub, cuda, soft_dice_cuda);
HG_REGISTER_KERNEL(soft_dice_backward_stub, cuda, soft_dice_backward_cuda);

}  // namespace hg::cuda
