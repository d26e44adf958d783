// The CPU's strided loop: visits N operands broadcast to one shape (operand 0 the
// output), with dimensions merged where memory allows, the innermost dimension handed
// to a kernel lambda, and the rows (or, for a few long rows, pieces of them) split
// across the CPU threads (framework/cpu/threads.h); the parallel loop shapes kernels use.
#pragma once
#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <vector>

#include "framework/cpu/threads.h"
#include "framework/tensor.h"

namespace hg::cpu {

// Threads a parallel op may use from here: 1 inside another parallel body.
inline int op_threads() { return in_parallel() ? 1 : num_threads(); }

// f(c) for every c in [0, count) on `threads` threads, each taking one contiguous block of
// c (OpenMP's schedule(static)).
template <class F>
void parallel_static(int threads, int64_t count, F&& f) {
  const int nt = static_cast<int>(std::min<int64_t>(std::max(threads, 1), std::max<int64_t>(count, 1)));
  if (nt <= 1) {
    for (int64_t c = 0; c < count; ++c) f(c);
    return;
  }
  parallel_run(nt, [&](int t) {
    for (int64_t c = count * t / nt, end = count * (t + 1) / nt; c < end; ++c) f(c);
  });
}

// f(c) for every c in [0, count), each thread taking the next c not yet taken (OpenMP's
// schedule(dynamic, 1)): for items of uneven cost.
template <class F>
void parallel_dynamic(int threads, int64_t count, F&& f) {
  const int nt = static_cast<int>(std::min<int64_t>(std::max(threads, 1), std::max<int64_t>(count, 1)));
  if (nt <= 1) {
    for (int64_t c = 0; c < count; ++c) f(c);
    return;
  }
  std::atomic<int64_t> next{0};
  parallel_run(nt, [&](int) {
    for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < count; c = next.fetch_add(1, std::memory_order_relaxed))
      f(c);
  });
}

template <size_t N>
struct StridedOperands {
  std::array<char*, N> ptr;
  std::array<Strides, N> bytes;  // per-dimension strides in bytes (0 where broadcast)
};

// Collects pointers and byte strides; each operand must already have `shape`
// (broadcast views have stride 0).
template <size_t N>
StridedOperands<N> operands(const std::array<const Tensor*, N>& ts) {
  StridedOperands<N> o;
  for (size_t k = 0; k < N; ++k) {
    o.ptr[k] = static_cast<char*>(ts[k]->data_ptr());
    int64_t es = static_cast<int64_t>(dtype_size(ts[k]->dtype()));
    o.bytes[k].resize(ts[k]->strides().size());
    // A size-1 axis is never stepped along and may carry any stride (even INT64_MAX).
    for (size_t d = 0; d < ts[k]->strides().size(); ++d)
      o.bytes[k][d] = ts[k]->shape()[d] == 1 ? 0 : ts[k]->strides()[d] * es;
  }
  return o;
}

// The kernel of a run of rows, called through a pointer: the loop below is compiled once per
// operand count, not once per op and dtype (elementwise_cpu.cpp and copy_cpu.cpp instantiated
// it ~400 times, most of their compile time). A call covers up to a whole run of the
// second-innermost dimension (`rows` rows, operand k's pointer moving by row_step[k] bytes
// from one to the next), so short rows (a bias of 8 channels added over N*H*W pixels) do not
// pay an indirect call each.
template <size_t N>
using RowsKernel = void (*)(const void* ctx, int64_t rows, std::array<int64_t, N> row_step, int64_t n,
                            std::array<char*, N> p, std::array<int64_t, N> s);

template <size_t N>
void for_each_strided_rows(const Shape& shape, const StridedOperands<N>& ops, RowsKernel<N> kernel, const void* ctx,
                           int64_t grain) {
  // Drop size-1 dimensions and merge a dimension into the next when every operand
  // steps through them as one.
  Shape sh;
  std::array<Strides, N> st;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    if (!sh.empty()) {
      bool merge = true;
      for (size_t k = 0; k < N; ++k) merge = merge && st[k].back() == ops.bytes[k][d] * shape[d];
      if (merge) {
        sh.back() *= shape[d];
        for (size_t k = 0; k < N; ++k) st[k].back() = ops.bytes[k][d];
        continue;
      }
    }
    sh.push_back(shape[d]);
    for (size_t k = 0; k < N; ++k) st[k].push_back(ops.bytes[k][d]);
  }
  int64_t total = numel_of(shape);
  if (total == 0) return;
  if (sh.empty()) {
    sh.push_back(1);
    for (size_t k = 0; k < N; ++k) st[k].push_back(0);
  }
  const int64_t nd = static_cast<int64_t>(sh.size());
  const int64_t inner_n = sh.back();
  std::array<int64_t, N> inner_st;
  for (size_t k = 0; k < N; ++k) inner_st[k] = st[k].back();
  const int64_t rows = total / inner_n;

  // Rows [r0, r1), each from inner element lo to hi.
  auto run_rows = [&](int64_t r0, int64_t r1, int64_t lo, int64_t hi) {
    std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
    int64_t r = r0;
    for (int64_t d = nd - 2; d >= 0; --d) {
      idx[d] = r % sh[d];
      r /= sh[d];
    }
    std::array<char*, N> p;
    for (size_t k = 0; k < N; ++k) {
      p[k] = ops.ptr[k] + lo * inner_st[k];
      for (int64_t d = 0; d < nd - 1; ++d) p[k] += idx[d] * st[k][d];
    }
    std::array<int64_t, N> row_step{};
    if (nd >= 2)
      for (size_t k = 0; k < N; ++k) row_step[k] = st[k][nd - 2];
    for (int64_t row = r0; row < r1;) {
      // The rows left before dimension nd-2 wraps (and an outer index carries).
      const int64_t run = nd >= 2 ? std::min(r1 - row, sh[nd - 2] - idx[nd - 2]) : r1 - row;
      kernel(ctx, run, row_step, hi - lo, p, inner_st);
      row += run;
      if (nd < 2) break;
      for (size_t k = 0; k < N; ++k) p[k] += run * row_step[k];
      if ((idx[nd - 2] += run) < sh[nd - 2]) continue;
      for (size_t k = 0; k < N; ++k) p[k] -= row_step[k] * sh[nd - 2];
      idx[nd - 2] = 0;
      for (int64_t d = nd - 3; d >= 0; --d) {
        for (size_t k = 0; k < N; ++k) p[k] += st[k][d];
        if (++idx[d] < sh[d]) break;
        for (size_t k = 0; k < N; ++k) p[k] -= st[k][d] * sh[d];
        idx[d] = 0;
      }
    }
  };

  const int threads = op_threads();
  if (threads <= 1 || total < grain) {
    run_rows(0, rows, 0, inner_n);
    return;
  }
  if (rows >= threads) {
    const int64_t chunks = threads;
    parallel_static(threads, chunks, [&](int64_t c) { run_rows(rows * c / chunks, rows * (c + 1) / chunks, 0, inner_n); });
    return;
  }
  // Few long rows (a contiguous tensor is one row): split each row into pieces of whole
  // 64-element blocks. Only where the output moves along the row: an output stride of 0
  // is a reduction, whose element must not be shared between threads.
  if (inner_st[0] == 0) {
    run_rows(0, rows, 0, inner_n);
    return;
  }
  const int64_t pieces = threads;
  auto cut = [&](int64_t k) { return k == pieces ? inner_n : (inner_n * k / pieces) & ~int64_t{63}; };
  parallel_static(threads, rows * pieces, [&](int64_t c) {
    const int64_t k = c % pieces;
    if (cut(k) < cut(k + 1)) run_rows(c / pieces, c / pieces + 1, cut(k), cut(k + 1));
  });
}

// inner(n, ptrs, strides): process n elements starting at ptrs, stepping by strides bytes.
template <size_t N, class Inner>
void for_each_strided(const Shape& shape, const StridedOperands<N>& ops, const Inner& inner, int64_t grain = 32768) {
  for_each_strided_rows<N>(
      shape, ops,
      [](const void* ctx, int64_t rows, std::array<int64_t, N> row_step, int64_t n, std::array<char*, N> p,
         std::array<int64_t, N> s) {
        const Inner& f = *static_cast<const Inner*>(ctx);
        for (int64_t r = 0; r < rows; ++r) {
          f(n, p, s);
          for (size_t k = 0; k < N; ++k) p[k] += row_step[k];
        }
      },
      &inner, grain);
}

// Runs f(begin, end) over [0, n) split across threads when n * cost_per_item is large.
template <class F>
void parallel_for(int64_t n, int64_t cost_per_item, F&& f) {
  const int threads = op_threads();
  if (threads <= 1 || n < 2 || n * cost_per_item < 32768) {
    f(int64_t{0}, n);
    return;
  }
  const int64_t chunks = std::min<int64_t>(n, threads);
  parallel_run(static_cast<int>(chunks), [&](int c) { f(n * c / chunks, n * (c + 1) / chunks); });
}

}  // namespace hg::cpu
