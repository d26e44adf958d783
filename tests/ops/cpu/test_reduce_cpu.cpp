// The CPU sums on f32 vectors: column sums (reducing leading dimensions, e.g. an NHWC
// channel sum for a bias gradient) bitwise the per-column loop (rows added in order, f32
// accumulator, one rounding), row sums bitwise eight interleaved scalar lanes, on 1 and 2
// threads, and within the f32 bound of f64.
#include <thread>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <vector>

#include "halfgrad.h"

using namespace hg;

namespace {

template <class T>
void check_column_sums(int64_t rows, int64_t cols, bool mean) {
  Generator g(rows * 131 + cols);
  const Tensor x = uniform({rows, cols}, -4, 4, {dtype_v<T>}, &g);
  const Tensor got = mean ? hg::mean(x, {0}) : sum(x, {0});
  const T* px = x.data<T>();
  const double unit = dtype_v<T> == f32 ? 0x1p-24 : dtype_v<T> == f16 ? 0x1p-11 : 0x1p-8;
  for (int64_t c = 0; c < cols; ++c) {
    float acc = 0;
    double exact = 0, bound = 0;
    for (int64_t r = 0; r < rows; ++r) {
      acc += float(load(px[r * cols + c]));
      exact += double(load(px[r * cols + c]));
      bound += std::abs(double(load(px[r * cols + c])));
    }
    const T want = store<T>(mean ? acc / float(rows) : acc);
    const T have = got.data<T>()[c];
    INFO("column " << c);
    CHECK(std::memcmp(&want, &have, sizeof(T)) == 0);
    // rows f32 additions, then one rounding to T (and the mean's division).
    if (mean) exact /= double(rows), bound /= double(rows);
    CHECK(std::abs(double(load(have)) - exact) <= double(rows) * 0x1p-24 * bound + unit * std::abs(exact) + 1e-30);
  }
}

// A row's sum as eight lanes (lane k adds elements 8j + k), then the tail, then the lanes.
template <class T>
void check_row_sums(int64_t rows, int64_t len) {
  Generator g(rows * 17 + len);
  const Tensor x = uniform({rows, len}, -4, 4, {dtype_v<T>}, &g);
  const Tensor got = sum(x, {1});
  for (int64_t r = 0; r < rows; ++r) {
    const T* row = x.data<T>() + r * len;
    float lanes[8] = {}, acc = 0;
    int64_t i = 0;
    for (; i + 8 <= len; i += 8)
      for (int k = 0; k < 8; ++k) lanes[k] += float(load(row[i + k]));
    for (; i < len; ++i) acc += float(load(row[i]));
    for (float l : lanes) acc += l;
    const T want = store<T>(acc), have = got.data<T>()[r];
    INFO("row " << r);
    CHECK(std::memcmp(&want, &have, sizeof(T)) == 0);
  }
}

}  // namespace

TEST_CASE("row sums are bitwise eight interleaved f32 lanes for f32, f16 and bf16", "[reduce][vec]") {
  for (int64_t len : {1, 7, 8, 9, 64, 1001}) {
    INFO("len " << len);
    check_row_sums<float>(3, len);
    check_row_sums<half>(3, len);
    check_row_sums<bfloat16>(3, len);
  }
}

TEST_CASE("column sums are bitwise the per-column loop for f32, f16 and bf16 on 1 and 2 threads", "[reduce][vec]") {
  for (int threads : {1, 2}) {
    const int saved = hg::num_threads();
    hg::set_num_threads(threads);
    for (int64_t rows : {1, 7, 1000})
      for (int64_t cols : {2, 4, 5, 8, 12, 13, 64, 100})  // one column is a row sum (its own path)
        for (bool mean : {false, true}) {
          INFO("threads " << threads << " rows " << rows << " cols " << cols << (mean ? " mean" : " sum"));
          check_column_sums<float>(rows, cols, mean);
          check_column_sums<half>(rows, cols, mean);
          check_column_sums<bfloat16>(rows, cols, mean);
        }
    hg::set_num_threads(saved);
  }
}

TEST_CASE("an NHWC channel sum (a bias gradient) is the column sum; inf and NaN reach only their column",
          "[reduce][vec]") {
  std::vector<double> v(2 * 3 * 3 * 11, 1.0);
  v[5] = INFINITY;  // column 5
  v[11 + 7] = NAN;  // column 7
  v[22 + 2] = 65504;  // column 2: 65504 + 17 ones is 65521 in f32, which rounds to f16 inf
  const Tensor y = sum(from_vector(v, {2, 3, 3, 11}, {f16}), {0, 1, 2});
  std::vector<double> want(11, 18.0);
  want[2] = INFINITY;
  want[5] = INFINITY;
  const std::vector<double> got = y.to_vector<double>();
  for (int64_t c = 0; c < 11; ++c) {
    INFO("column " << c);
    if (c == 7) CHECK(std::isnan(got[c]));
    else CHECK(got[c] == want[c]);
  }
}
