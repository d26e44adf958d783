// CPU kernels of batch normalisation on contiguous [M, C] data. Rows are cut into a
// number of chunks fixed by the shape (so sums do not depend on the thread count), and
// each chunk is read in L1-sized row blocks by the row forms of batch_norm_rows.h (scalar)
// or batch_norm_vec.h (8 or 16 lanes, chosen per call by bn::vec_rows; the same bits).
#include <algorithm>
#include <type_traits>
#include <vector>

#include "framework/half_convert.h"
#include "ops/batch_norm_kernels.h"
#include "ops/cpu/batch_norm_rows.h"
#include "ops/cpu/batch_norm_vec.h"
#include "ops/cpu/loops.h"
#include "ops/cpu/vec/vec8.h"

namespace hg::cpu {
namespace {

template <class T>
constexpr bool kReduced = std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

constexpr int64_t kBlockElems = 4096;   // 16 KiB of f32 per widened stream
constexpr int64_t kChunkElems = 65536;  // work per chunk of a reduction
constexpr int64_t kMaxChunks = 16;

int64_t block_rows(int64_t C) { return std::max<int64_t>(1, kBlockElems / std::max<int64_t>(C, 1)); }

// Gives row blocks of T data as S: f32/f64 are read in place, f16/bf16 widened into a buffer.
template <class T>
class RowReader {
  using S = compute_t<T>;

 public:
  explicit RowReader(int64_t elems) : buf_(kReduced<T> ? static_cast<size_t>(elems) : 0) {}
  // As read(), into a buffer the caller may write (f32/f64 copied instead of read in place).
  S* read_copy(const T* src, int64_t n) {
    if constexpr (kReduced<T>) {
      return const_cast<S*>(read(src, n));  // buf_, this reader's own
    } else {
      if (static_cast<int64_t>(own_.size()) < n) own_.resize(static_cast<size_t>(n));
      std::copy(src, src + n, own_.data());
      return own_.data();
    }
  }
  const S* read(const T* src, int64_t n) {
    if constexpr (std::is_same_v<T, half>) {
      convert_f16_to_f32(src, buf_.data(), static_cast<size_t>(n));
      return buf_.data();
    } else if constexpr (std::is_same_v<T, bfloat16>) {
      convert_bf16_to_f32(src, buf_.data(), static_cast<size_t>(n));
      return buf_.data();
    } else {
      return src;
    }
  }

 private:
  std::vector<S> buf_, own_;
};

// Where a row block's results are computed in S: in place for f32/f64, else in a buffer
// that flush() rounds once into the T destination.
template <class T>
class RowWriter {
  using S = compute_t<T>;

 public:
  explicit RowWriter(int64_t elems) : buf_(kReduced<T> ? static_cast<size_t>(elems) : 0) {}
  S* target(T* dst) {
    if constexpr (kReduced<T>) return buf_.data();
    else return dst;
  }
  void flush(T* dst, int64_t n) {
    if constexpr (std::is_same_v<T, half>) convert_f32_to_f16(buf_.data(), dst, static_cast<size_t>(n));
    else if constexpr (std::is_same_v<T, bfloat16>) convert_f32_to_bf16(buf_.data(), dst, static_cast<size_t>(n));
  }

 private:
  std::vector<S> buf_;
};

// Calls f(first_row, rows) over [r0, r1) in blocks of `block` rows.
template <class F>
void for_blocks(int64_t r0, int64_t r1, int64_t block, F&& f) {
  for (int64_t r = r0; r < r1; r += block) f(r, std::min(block, r1 - r));
}

// out[0, width) = the sum over chunks of body(r0, r1, partial), where body adds its rows'
// contribution into its own zeroed `partial`. Chunks are added in order: deterministic.
template <class S, class Body>
void chunked_sum(int64_t M, int64_t C, int64_t width, S* out, Body&& body) {
  const int64_t chunks = std::max<int64_t>(1, std::min({M * C / kChunkElems, M, kMaxChunks}));
  std::vector<S> partial(static_cast<size_t>(chunks * width), S(0));
  parallel_for(chunks, M * C / chunks, [&](int64_t c0, int64_t c1) {
    for (int64_t k = c0; k < c1; ++k) body(M * k / chunks, M * (k + 1) / chunks, partial.data() + k * width);
  });
  for (int64_t w = 0; w < width; ++w) {
    S s = 0;
    for (int64_t k = 0; k < chunks; ++k) s += partial[static_cast<size_t>(k * width + w)];
    out[w] = s;
  }
}

// Two passes (mean, then deviations from it), with the deviations' own sum correcting
// for the rounding of the mean (the corrected two-pass algorithm).
template <class T>
void stats_typed(const Tensor& x, const Tensor& mean_t, const Tensor& var_t) {
  using S = compute_t<T>;
  const int64_t M = x.size(0), C = x.size(1), B = block_rows(C);
  const bn::VecRows<T>* vr = bn::vec_rows<T>(C);  // null: the scalar forms
  const T* px = x.data<T>();
  S* mean = mean_t.data<S>();
  S* var = var_t.data<S>();
  chunked_sum<S>(M, C, C, mean, [&](int64_t r0, int64_t r1, S* part) {
    if (vr) return for_blocks(r0, r1, B, [&](int64_t r, int64_t n) { vr->sums(px + r * C, n, C, part); });
    RowReader<T> rd(B * C);
    std::vector<S> acc(static_cast<size_t>(C));
    for_blocks(r0, r1, B, [&](int64_t r, int64_t n) { bn::sums(rd.read(px + r * C, n * C), n, C, acc.data(), part); });
  });
  for (int64_t c = 0; c < C; ++c) mean[c] /= static_cast<S>(M);

  std::vector<S> dev(static_cast<size_t>(2 * C));
  chunked_sum<S>(M, C, 2 * C, dev.data(), [&](int64_t r0, int64_t r1, S* part) {
    if (vr)
      return for_blocks(r0, r1, B, [&](int64_t r, int64_t n) { vr->deviation_sums(px + r * C, n, C, mean, part); });
    RowReader<T> rd(B * C);
    std::vector<S> acc(static_cast<size_t>(2 * C));
    for_blocks(r0, r1, B, [&](int64_t r, int64_t n) {
      bn::deviation_sums(rd.read(px + r * C, n * C), n, C, mean, acc.data(), part);
    });
  });
  for (int64_t c = 0; c < C; ++c) {
    const S v = (dev[C + c] - dev[c] * dev[c] / static_cast<S>(M)) / static_cast<S>(M);
    var[c] = v < S(0) ? S(0) : v;  // rounding can dip below zero for constant channels; NaN stays
  }
}

// The forward's per-channel factors: y = (x - mean) * scale + shift, scale = invstd * weight
// (1 without one), shift = bias (0 without one). The backward's relu mask and its gx factor k1
// use the same products.
template <class S>
struct Affine {
  std::vector<S> scale, shift;
};
template <class S>
Affine<S> affine_of(const Tensor& invstd, const Tensor& weight, const Tensor& bias, int64_t C) {
  Affine<S> f{std::vector<S>(static_cast<size_t>(C)), std::vector<S>(static_cast<size_t>(C), S(0))};
  for (int64_t c = 0; c < C; ++c) {
    f.scale[c] = invstd.data<S>()[c] * (weight.defined() ? weight.data<S>()[c] : S(1));
    if (bias.defined()) f.shift[c] = bias.data<S>()[c];
  }
  return f;
}
template <class T, bool Relu>
void forward_typed(const Tensor& x, const Tensor& mean_t, const Tensor& invstd_t, const Tensor& weight,
                   const Tensor& bias, const Tensor& y) {
  using S = compute_t<T>;
  const int64_t M = x.size(0), C = x.size(1), B = block_rows(C);
  const bn::VecRows<T>* vr = bn::vec_rows<T>(C);  // null: the scalar forms
  const S* mean = mean_t.data<S>();
  const Affine<S> f = affine_of<S>(invstd_t, weight, bias, C);
  const std::vector<S>&scale = f.scale, &shift = f.shift;
  const T* px = x.data<T>();
  T* py = y.data<T>();
  parallel_for(M, C, [&](int64_t r0, int64_t r1) {
    if (vr)
      return for_blocks(r0, r1, B, [&](int64_t r, int64_t n) {
        (Relu ? vr->affine_relu : vr->affine)(px + r * C, n, C, mean, scale.data(), shift.data(), py + r * C);
      });
    RowReader<T> rd(B * C);
    RowWriter<T> wr(B * C);
    for_blocks(r0, r1, B, [&](int64_t r, int64_t n) {
      bn::affine<Relu>(rd.read(px + r * C, n * C), n, C, mean, scale.data(), shift.data(), wr.target(py + r * C));
      wr.flush(py + r * C, n * C);
    });
  });
}

// relu: the op is batch_norm_relu (gy then passes where relu's output, recomputed from x with
// the forward's operations and `bias`, is > 0).
template <class T>
void backward_typed(const Tensor& gy, const Tensor& x, const Tensor& mean_t, const Tensor& invstd_t,
                    const Tensor& weight, const Tensor& bias, bool relu, bool training, const Tensor& gx,
                    const Tensor& sum_gy_t, const Tensor& sum_gy_xhat_t) {
  using S = compute_t<T>;
  const int64_t M = x.size(0), C = x.size(1), B = block_rows(C);
  const bn::VecRows<T>* vr = bn::vec_rows<T>(C);  // null: the scalar forms
  const T* px = x.data<T>();
  const T* pg = gy.data<T>();
  const S* mean = mean_t.data<S>();
  const S* invstd = invstd_t.data<S>();
  // The forward's factors: relu's output is relu((x - mean) * scale + shift) rounded to T.
  const Affine<S> f = affine_of<S>(invstd_t, weight, bias, C);
  const std::vector<S>&scale = f.scale, &shift = f.shift;
  const bn::ReluOf<S> relu_of = relu ? bn::ReluOf<S>{scale.data(), shift.data()} : bn::ReluOf<S>{};
  // gy's rows [r, r + n) as S, masked where relu's output is not > 0 when there is a relu: the
  // scalar forms recompute that output as forward_typed's do (affine, then the one rounding).
  // rt: a scratch reader (x's rows, then y's), wy and y: y's rounding and its rows.
  auto grad_rows = [&](RowReader<T>& rg, RowReader<T>& rt, RowWriter<T>& wy, std::vector<T>& y, int64_t r,
                       int64_t n) -> const S* {
    if (!relu) return rg.read(pg + r * C, n * C);
    if (static_cast<int64_t>(y.size()) < n * C) y.resize(static_cast<size_t>(n * C));
    bn::affine<true>(rt.read(px + r * C, n * C), n, C, mean, scale.data(), shift.data(), wy.target(y.data()));
    wy.flush(y.data(), n * C);
    S* g = rg.read_copy(pg + r * C, n * C);
    bn::relu_mask(g, rt.read(y.data(), n * C), n * C);
    return g;
  };
  std::vector<S> sums(static_cast<size_t>(2 * C));  // sum(gy), then sum(gy * (x - mean))
  chunked_sum<S>(M, C, 2 * C, sums.data(), [&](int64_t r0, int64_t r1, S* part) {
    if (vr)
      return for_blocks(r0, r1, B,
                        [&](int64_t r, int64_t n) { vr->grad_sums(pg + r * C, px + r * C, n, C, mean, part, relu_of); });
    RowReader<T> rx(B * C), rg(B * C), ry(B * C);
    RowWriter<T> wy(B * C);
    std::vector<T> y;
    std::vector<S> acc(static_cast<size_t>(2 * C));
    for_blocks(r0, r1, B, [&](int64_t r, int64_t n) {
      const S* g = grad_rows(rg, ry, wy, y, r, n);
      bn::grad_sums(g, rx.read(px + r * C, n * C), n, C, mean, acc.data(), part);
    });
  });
  S* sum_gy = sum_gy_t.data<S>();
  S* sum_gy_xhat = sum_gy_xhat_t.data<S>();
  for (int64_t c = 0; c < C; ++c) {
    sum_gy[c] = sums[c];
    sum_gy_xhat[c] = sums[C + c] * invstd[c];
  }
  if (!gx.defined()) return;

  // gx = k1 * gy + k2 * (x - mean) + k3: the training formula with per-channel factors; k1 is
  // the forward's scale, invstd * weight.
  const std::vector<S>& k1 = scale;
  std::vector<S> k2(static_cast<size_t>(C), S(0)), k3(static_cast<size_t>(C), S(0));
  const S inv_m = S(1) / static_cast<S>(M);
  for (int64_t c = 0; c < C; ++c) {
    if (training) {
      k2[c] = -k1[c] * invstd[c] * sum_gy_xhat[c] * inv_m;
      k3[c] = -k1[c] * sum_gy[c] * inv_m;
    }
  }
  T* pgx = gx.data<T>();
  parallel_for(M, 2 * C, [&](int64_t r0, int64_t r1) {
    if (vr)
      return for_blocks(r0, r1, B, [&](int64_t r, int64_t n) {
        vr->input_grad(pg + r * C, px + r * C, n, C, mean, k1.data(), training ? k2.data() : nullptr, k3.data(),
                       pgx + r * C, relu_of);
      });
    RowReader<T> rx(B * C), rg(B * C), ry(B * C);
    RowWriter<T> wr(B * C), wy(B * C);
    std::vector<T> y;
    for_blocks(r0, r1, B, [&](int64_t r, int64_t n) {
      const S* g = grad_rows(rg, ry, wy, y, r, n);
      const S* xs = training ? rx.read(px + r * C, n * C) : nullptr;
      bn::input_grad(g, xs, n, C, mean, k1.data(), k2.data(), k3.data(), wr.target(pgx + r * C));
      wr.flush(pgx + r * C, n * C);
    });
  });
}

void stats_cpu(const Tensor& x, const Tensor& mean, const Tensor& var) {
  visit_floating(x.dtype(), "batch_norm", [&]<typename T>() { stats_typed<T>(x, mean, var); });
}

void forward_cpu(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight, const Tensor& bias,
                 const Tensor& y) {
  visit_floating(x.dtype(), "batch_norm", [&]<typename T>() { forward_typed<T, false>(x, mean, invstd, weight, bias, y); });
}

void relu_forward_cpu(const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                      const Tensor& bias, const Tensor& y) {
  visit_floating(x.dtype(), "batch_norm_relu",
                 [&]<typename T>() { forward_typed<T, true>(x, mean, invstd, weight, bias, y); });
}

void backward_cpu(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                  bool training, const Tensor& gx, const Tensor& sum_gy, const Tensor& sum_gy_xhat) {
  visit_floating(x.dtype(), "batch_norm backward", [&]<typename T>() {
    backward_typed<T>(gy, x, mean, invstd, weight, Tensor(), false, training, gx, sum_gy, sum_gy_xhat);
  });
}

void relu_backward_cpu(const Tensor& gy, const Tensor& x, const Tensor& mean, const Tensor& invstd,
                       const Tensor& weight, const Tensor& bias, bool training, const Tensor& gx, const Tensor& sum_gy,
                       const Tensor& sum_gy_xhat) {
  visit_floating(x.dtype(), "batch_norm_relu backward", [&]<typename T>() {
    backward_typed<T>(gy, x, mean, invstd, weight, bias, true, training, gx, sum_gy, sum_gy_xhat);
  });
}

}  // namespace

namespace bn {

template <class T>
const VecRows<T>* rows8() {
#ifdef HG_VEC8
  static const VecRows<T> rows = lanes::table<vec::F8, T>();
  return &rows;
#else
  return nullptr;
#endif
}
template const VecRows<float>* rows8();
template const VecRows<half>* rows8();
template const VecRows<bfloat16>* rows8();

}  // namespace bn

HG_REGISTER_KERNEL(batch_norm_stats_stub, cpu, stats_cpu);
HG_REGISTER_KERNEL(batch_norm_forward_stub, cpu, forward_cpu);
HG_REGISTER_KERNEL(batch_norm_backward_stub, cpu, backward_cpu);
HG_REGISTER_KERNEL(batch_norm_relu_forward_stub, cpu, relu_forward_cpu);
HG_REGISTER_KERNEL(batch_norm_relu_backward_stub, cpu, relu_backward_cpu);

}  // namespace hg::cpu
