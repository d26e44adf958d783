// The vectorised CPU softmax, log_softmax and cross-entropy (ops/cpu/softmax_rows.h)
// against one-element-at-a-time f32 loops written here, bitwise, and against f64 within a
// bound: row lengths that are no multiple of 8, exp overflow/underflow, -inf/+inf/NaN
// logits, ignore_index and class weights, a strided axis, 1 and 2 threads.
#include <thread>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "tests/thread_count.h"
#include "halfgrad.h"

using namespace hg;

namespace {

// Equal bits, or both NaN (a NaN's payload is not specified).
template <class T>
bool same(T a, T b) {
  const double da = load(a), db = load(b);
  return (std::isnan(da) && std::isnan(db)) || std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <class T>
bool same_all(const Tensor& got, const std::vector<T>& want) {
  const Tensor g = got.contiguous();
  if (g.numel() != static_cast<int64_t>(want.size())) return false;
  for (size_t i = 0; i < want.size(); ++i)
    if (!same(g.data<T>()[i], want[i])) return false;
  return true;
}

// The scalar loops: max by `v > m`, exp(x - m) summed left to right, one rounding.
template <class T>
void scalar_softmax(const T* x, T* y, int64_t n, bool log) {
  float m = -INFINITY, s = 0;
  for (int64_t i = 0; i < n; ++i) m = float(load(x[i])) > m ? float(load(x[i])) : m;
  std::vector<float> e(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    e[i] = std::exp(float(load(x[i])) - m);
    s += e[i];
  }
  const float ls = std::log(s), inv = 1.0f / s;
  for (int64_t i = 0; i < n; ++i) y[i] = log ? store<T>((float(load(x[i])) - m) - ls) : store<T>(e[i] * inv);
}

template <class T>
void scalar_softmax_backward(const T* g, const T* y, T* gx, int64_t n, bool log) {
  float acc = 0;
  for (int64_t i = 0; i < n; ++i) acc += log ? float(load(g[i])) : float(load(g[i])) * float(load(y[i]));
  for (int64_t i = 0; i < n; ++i)
    gx[i] = log ? store<T>(float(load(g[i])) - std::exp(float(load(y[i]))) * acc)
                : store<T>(float(load(y[i])) * (float(load(g[i])) - acc));
}

// Rows of length n: random values in [-8, 8], then the special rows.
std::vector<float> logits(int64_t n, uint64_t seed) {
  Generator g(seed);
  const Tensor r = uniform({6, n}, -8, 8, {f32}, &g);
  std::vector<float> v(r.data<float>(), r.data<float>() + 6 * n);
  for (int64_t i = 0; i < n; ++i) {
    v[n + i] = 90.0f + 10.0f * float(i % 3);               // exp(x) overflows f32 unless m is subtracted
    v[2 * n + i] = i % 2 ? -120.0f : 3.0f;                   // exp(x - m) underflows to 0
    v[3 * n + i] = i % 3 == 1 ? -INFINITY : v[3 * n + i];    // -inf logits get 0 (and -inf)
    v[4 * n + i] = -INFINITY;                                // all -inf: NaN, as PyTorch
    v[5 * n + i] = i == n / 2 ? NAN : (i % 2 ? -0.0f : 0.0f);  // NaN reaches its row; signed zeros
  }
  return v;
}

template <class T>
Tensor as_tensor(const std::vector<float>& v, Shape s) {
  return from_vector(std::vector<double>(v.begin(), v.end()), s, {f32}).to(dtype_v<T>);
}

template <class T>
void check_softmax_rows(int64_t n, bool log) {
  const Tensor x = as_tensor<T>(logits(n, 100 + n), {6, n}).set_requires_grad();
  Generator gen(7);
  const Tensor gy = uniform({6, n}, -1, 1, {dtype_v<T>}, &gen);
  const Tensor y = log ? log_softmax(x, -1) : softmax(x, -1);
  y.backward(gy);
  std::vector<T> want(static_cast<size_t>(6 * n)), want_g(want.size());
  const T* px = x.data<T>();
  for (int64_t r = 0; r < 6; ++r) scalar_softmax(px + r * n, want.data() + r * n, n, log);
  for (int64_t r = 0; r < 6; ++r)
    scalar_softmax_backward(gy.data<T>() + r * n, y.data<T>() + r * n, want_g.data() + r * n, n, log);
  CHECK(same_all(y, want));
  CHECK(same_all(x.grad(), want_g));
  // The f64 softmax of the rounded random row, within one rounding of T and the f32 sums.
  const double ulp = dtype_v<T> == f32 ? 0x1p-24 : dtype_v<T> == f16 ? 0x1p-11 : 0x1p-8;
  for (int64_t i = 0; i < n; ++i) {
    double m = -INFINITY, s = 0;
    for (int64_t k = 0; k < n; ++k) m = std::max(m, double(load(px[k])));
    for (int64_t k = 0; k < n; ++k) s += std::exp(double(load(px[k])) - m);
    const double ref = log ? double(load(px[i])) - m - std::log(s) : std::exp(double(load(px[i])) - m) / s;
    const double got = load(y.data<T>()[i]);
    CHECK(std::abs(got - ref) <= ulp * std::abs(ref) + 1e-6 * (std::abs(ref) + 1) + double(n) * 0x1p-24);
  }
}

template <class T>
void check_cross_entropy(int64_t C) {
  const int64_t N = 12;
  std::vector<float> v = logits(C, 40 + C), more = logits(C, 50 + C);
  v.insert(v.end(), more.begin(), more.end());
  // Rows 3, 9: some -inf; 4, 10: one finite logit, the rest -inf; 5, 11: NaN (ignored).
  v[4 * C] = v[10 * C] = 1.0f;
  std::vector<int64_t> tv(N);
  for (int64_t r = 0; r < N; ++r) tv[r] = (r * 7) % C;
  tv[3] = tv[5] = tv[11] = -100;
  tv[4] = tv[9] = tv[10] = 0;
  const Tensor target = from_vector(std::vector<double>(tv.begin(), tv.end()), {N}, {i64});
  Generator gw(9);
  const Tensor weight = uniform({C}, 0.5, 2, {f32}, &gw);
  const Tensor x = as_tensor<T>(v, {N, C}).set_requires_grad();
  const Tensor loss = cross_entropy(x, target, {.weight = weight});
  loss.backward();
  // The scalar loops: lse = m + log(sum exp(x - m)); loss = sum w (m - x_t + log s) / sum w;
  // gx = (exp(x - lse) - [c == t]) * w[t] / sum w.
  const T* px = x.data<T>();
  const float* pw = weight.data<float>();
  float total = 0, wsum = 0;
  std::vector<float> lse(N, 0);
  for (int64_t r = 0; r < N; ++r) {
    if (tv[r] < 0) continue;
    const T* row = px + r * C;
    float m = -INFINITY, s = 0;
    for (int64_t c = 0; c < C; ++c) m = float(load(row[c])) > m ? float(load(row[c])) : m;
    for (int64_t c = 0; c < C; ++c) s += std::exp(float(load(row[c])) - m);
    lse[r] = m + std::log(s);
    total += pw[tv[r]] * ((m - float(load(row[tv[r]]))) + std::log(s));
    wsum += pw[tv[r]];
  }
  CHECK(same(*loss.data<T>(), store<T>(total / wsum)));
  std::vector<T> want(static_cast<size_t>(N * C));
  for (int64_t r = 0; r < N; ++r)
    for (int64_t c = 0; c < C; ++c) {
      const float p = std::exp(float(load(px[r * C + c])) - lse[r]), scale = tv[r] < 0 ? 0 : pw[tv[r]] * (1.0f / wsum);
      want[r * C + c] = store<T>(tv[r] < 0 ? 0.0f : (c == tv[r] ? p - 1.0f : p) * scale);
    }
  CHECK(same_all(x.grad(), want));
}

}  // namespace

TEST_CASE("vectorised softmax and log_softmax are bitwise the scalar loops, forward and backward", "[softmax][vec]") {
  for (int threads : {1, 2}) {
    test::Threads t(threads);
    for (int64_t n : {1, 3, 7, 8, 9, 16, 31, 1000})
      for (bool log : {false, true}) {
        INFO("threads " << threads << " n " << n << (log ? " log_softmax" : " softmax"));
        check_softmax_rows<float>(n, log);
        check_softmax_rows<half>(n, log);
        check_softmax_rows<bfloat16>(n, log);
      }
  }
}

TEST_CASE("softmax over a middle axis gathers each strided line and matches the scalar loops", "[softmax][vec]") {
  // [2, 11, 5], axis 1: lines of 11 elements at stride 5.
  for (bool log : {false, true}) {
    std::vector<float> v = logits(11, 3), more = logits(11, 4);
    v.insert(v.end(), more.begin(), more.begin() + 44);
    const Tensor x = as_tensor<half>(v, {2, 11, 5});
    const Tensor y = log ? log_softmax(x, 1) : softmax(x, 1);
    const Tensor xt = x.permute({0, 2, 1}).contiguous();
    std::vector<half> want(110);
    for (int64_t r = 0; r < 10; ++r) scalar_softmax(xt.data<half>() + r * 11, want.data() + r * 11, 11, log);
    CHECK(same_all(y.permute({0, 2, 1}), want));
  }
}

TEST_CASE("vectorised cross_entropy is bitwise the scalar loops, with weights, ignore_index and -inf logits",
          "[loss][vec]") {
  for (int64_t C : {5, 8, 19, 1000}) {
    INFO("C " << C);
    check_cross_entropy<float>(C);
    check_cross_entropy<half>(C);
    check_cross_entropy<bfloat16>(C);
  }
}

TEST_CASE("cross_entropy of a -inf target logit is inf; of an all -inf row, NaN", "[loss][vec]") {
  for (int64_t C : {3, 9}) {
    std::vector<double> v(static_cast<size_t>(C), 1.0);
    v[1] = -INFINITY;
    CHECK(cross_entropy(from_vector(v, {1, C}, {f16}), from_vector({1}, {1}, {i64})).item<double>() == INFINITY);
    std::vector<double> all(static_cast<size_t>(C), -INFINITY);
    CHECK(std::isnan(cross_entropy(from_vector(all, {1, C}, {bf16}), from_vector({0}, {1}, {i64})).item<double>()));
  }
}
