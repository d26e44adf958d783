// CPU kernels of reductions: f32 (f64 for f64) accumulators, fast paths for reducing
// trailing dimensions (rows, eight interleaved lanes) and leading dimensions (columns, e.g.
// NHWC channel sums, eight columns per vector), and a general strided path. f32/f16/bf16
// sums run on f32 vectors in the scalar loops' order: the same bits.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "ops/cpu/loops.h"
#include "ops/cpu/vec/map8.h"
#include "ops/reduce_kernels.h"

namespace hg::cpu {
namespace {

#ifdef HG_VEC8
// acc[0, 8G) += the sums over rows [r0, r1) of columns [c, c + 8G), G independent vector
// chains (one chain waits on its add's latency every row).
template <int G, class T>
void add_column_groups(const T* px, int64_t r0, int64_t r1, int64_t cols, int64_t c, float* acc) {
  vec::F8 a[G];
  for (int g = 0; g < G; ++g) a[g] = vec::load8(acc + 8 * g);
  for (int64_t r = r0; r < r1; ++r)
    for (int g = 0; g < G; ++g) a[g] = a[g] + vec::load8(px + r * cols + c + 8 * g);
  for (int g = 0; g < G; ++g) vec::store8(acc + 8 * g, a[g]);
}

// The same for four columns [c, c + 4) in the low half of a vector (a 1x1 head's classes:
// the scalar loop would keep each column's sum in memory and convert every f16/bf16 value
// with a call).
template <class T>
void add_column_quad(const T* px, int64_t r0, int64_t r1, int64_t cols, int64_t c, float* acc) {
  __m128 a = _mm_loadu_ps(acc);
  for (int64_t r = r0; r < r1; ++r) a = _mm_add_ps(a, x86::load4(px + r * cols + c));
  _mm_storeu_ps(acc, a);
}
#endif

// acc[c - c0] += the column sums of rows [0, rows) for c in [c0, c0 + 8k (+ 4)), eight columns
// per f32 vector held in a register over a block of rows (kept in memory, each row's add
// would wait on the last one's store): each column still adds its rows in order, so the
// sums are bitwise the scalar loop's. Returns the first column left for that loop.
template <class T, class A>
int64_t add_columns8(const T* px, int64_t rows, int64_t cols, int64_t c0, int64_t c1, A* acc) {
#ifdef HG_VEC8
  if constexpr (vec::kVec8<T>) {
    const int64_t block = std::max<int64_t>(1, 4096 / cols);  // rows whose column groups re-read L1
    const int64_t end8 = c0 + (c1 - c0) / 8 * 8, end = c1 - end8 >= 4 ? end8 + 4 : end8;
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t r1 = std::min(rows, r0 + block);
      int64_t c = c0;
      for (; c + 32 <= end8; c += 32) add_column_groups<4>(px, r0, r1, cols, c, acc + (c - c0));
      for (; c < end8; c += 8) add_column_groups<1>(px, r0, r1, cols, c, acc + (c - c0));
      if (end > end8) add_column_quad(px, r0, r1, cols, end8, acc + (end8 - c0));
    }
    return end;
  }
#endif
  return c0;
}

// lanes[k] += row[i + k] for i = 0, 8, ... while a whole vector fits, in one f32 vector:
// each lane adds its elements in the scalar loop's order. Returns the first i left.
template <class T, class A>
int64_t add_lanes8(const T* row, int64_t len, A* lanes) {
  int64_t i = 0;
#ifdef HG_VEC8
  if constexpr (vec::kVec8<T>) {
    vec::F8 acc(_mm256_loadu_ps(lanes));
    for (; i + 8 <= len; i += 8) acc = acc + vec::load8(row + i);
    _mm256_storeu_ps(lanes, acc.v);
  }
#endif
  return i;
}

template <class T>
void reduce_typed(ReduceOp op, const Tensor& x, const Tensor& out) {
  using A = accum_t<T>;
  const ReduceCombine<A> red{op};
  const int64_t n_out = out.numel(), n_in = x.numel();
  const A count = static_cast<A>(n_in / std::max<int64_t>(n_out, 1));
  auto finish = [&](A acc) { return store<T>(op == ReduceOp::mean ? acc / count : acc); };
  T* o = out.data<T>();  // out is fresh and contiguous

  // Where the kept dimensions sit decides the fast path.
  int64_t nd = x.dim(), first_reduced = nd, last_kept = -1;
  for (int64_t d = 0; d < nd; ++d) {
    bool r = out.shape()[d] == 1 && x.shape()[d] != 1;
    if (r && first_reduced == nd) first_reduced = d;
    if (!r && x.shape()[d] != 1) last_kept = d;
  }
  const bool contiguous = x.is_contiguous();
  const T* px = contiguous ? x.data<T>() : nullptr;

  if (contiguous && last_kept < first_reduced) {  // reduce trailing dims: rows of length n_in / n_out
    const int64_t len = n_in / n_out;
    parallel_for(n_out, len, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = px + r * len;
        if (op == ReduceOp::sum || op == ReduceOp::mean) {
          A lanes[8] = {};
          int64_t i = add_lanes8(row, len, lanes);
          for (; i + 8 <= len; i += 8)
            for (int k = 0; k < 8; ++k) lanes[k] += load(row[i + k]);
          A acc = 0;
          for (; i < len; ++i) acc += load(row[i]);
          for (int k = 0; k < 8; ++k) acc += lanes[k];
          o[r] = finish(acc);
        } else {
          A acc = red.identity();
          for (int64_t i = 0; i < len; ++i) acc = red(acc, load(row[i]));
          o[r] = finish(acc);
        }
      }
    });
    return;
  }

  bool leading = contiguous;  // reduce leading dims: out is a suffix of x's shape
  for (int64_t d = 0; d < nd && leading; ++d) {
    bool r = out.shape()[d] == 1 && x.shape()[d] != 1;
    if (!r && x.shape()[d] != 1) {
      for (int64_t e = d; e < nd; ++e) leading = leading && out.shape()[e] == x.shape()[e];
      break;
    }
  }
  if (leading) {
    const int64_t cols = n_out, rows = n_in / n_out;
    // Threads take whole groups of four columns, so each keeps its columns in vectors.
    parallel_for((cols + 3) / 4, 4 * rows, [&](int64_t g0, int64_t g1) {
      const int64_t c0 = 4 * g0, c1 = std::min(cols, 4 * g1);
      std::vector<A> acc(static_cast<size_t>(c1 - c0), red.identity());
      int64_t first = c0;
      if (op == ReduceOp::sum || op == ReduceOp::mean) first = add_columns8(px, rows, cols, c0, c1, acc.data());
      for (int64_t r = 0; r < rows; ++r) {
        const T* row = px + r * cols;
        for (int64_t c = first; c < c1; ++c) acc[c - c0] = red(acc[c - c0], load(row[c]));
      }
      for (int64_t c = c0; c < c1; ++c) o[c] = finish(acc[c - c0]);
    });
    return;
  }

  // General case: accumulate through a broadcast view of the accumulators.
  std::vector<A> acc(static_cast<size_t>(n_out), red.identity());
  Strides acc_strides = contiguous_strides(out.shape());
  for (int64_t d = 0; d < nd; ++d)
    if (out.shape()[d] == 1) acc_strides[d] = 0;
  StridedOperands<2> ops;
  ops.ptr = {reinterpret_cast<char*>(acc.data()), static_cast<char*>(x.data_ptr())};
  ops.bytes[0].resize(nd);
  ops.bytes[1].resize(nd);
  for (int64_t d = 0; d < nd; ++d) {
    ops.bytes[0][d] = acc_strides[d] * static_cast<int64_t>(sizeof(A));
    ops.bytes[1][d] = x.shape()[d] == 1 ? 0 : x.strides()[d] * static_cast<int64_t>(sizeof(T));  // size 1: any stride
  }
  for_each_strided<2>(x.shape(), ops, [&](int64_t n, std::array<char*, 2> p, std::array<int64_t, 2> s) {
    for (int64_t i = 0; i < n; ++i) {
      A& a = *reinterpret_cast<A*>(p[0] + i * s[0]);
      a = red(a, load(*reinterpret_cast<const T*>(p[1] + i * s[1])));
    }
  }, std::numeric_limits<int64_t>::max());
  for (int64_t i = 0; i < n_out; ++i) o[i] = finish(acc[static_cast<size_t>(i)]);
}

void reduce_cpu(ReduceOp op, const Tensor& x, const Tensor& out) {
  visit_dtype(x.dtype(), [&]<typename T>() {
    if constexpr (std::is_same_v<T, bool>) throw Error("reduce: bool tensors cannot be reduced; cast to i64 first");
    else reduce_typed<T>(op, x, out);
  });
}

void argmax_cpu(const Tensor& x, int64_t axis, const Tensor& out) {
  // Move the axis last so each output element scans one strided line.
  std::vector<int64_t> order;
  for (int64_t d = 0; d < x.dim(); ++d)
    if (d != axis) order.push_back(d);
  order.push_back(axis);
  Tensor xp = x.permute(order).contiguous();
  const int64_t len = x.shape()[static_cast<size_t>(axis)], n = xp.numel() / len;
  Tensor op = out.permute(order).contiguous();
  int64_t* po = op.data<int64_t>();
  visit_dtype(x.dtype(), [&]<typename T>() {
    const T* px = xp.data<T>();
    parallel_for(n, len, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const T* row = px + r * len;
        int64_t best = 0;
        auto bv = load(row[0]);
        for (int64_t i = 1; i < len; ++i)
          if (!argmax_step(bv, best, load(row[i]), i)) break;
        po[r] = best;
      }
    });
  });
  // out is contiguous with size 1 on `axis`, so its permuted copy has the same layout.
  std::copy(po, po + n, out.data<int64_t>());
}

}  // namespace

HG_REGISTER_KERNEL(reduce_stub, cpu, reduce_cpu);
HG_REGISTER_KERNEL(argmax_stub, cpu, argmax_cpu);

}  // namespace hg::cpu
