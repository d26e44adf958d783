// Values meeting dtypes: the scalar entry points (full, fill_, scalar_tensor, from_vector)
// refuse what does not fit, tensor-scalar arithmetic follows PyTorch's type promotion, and
// casts to i64 give a defined result (saturation, NaN -> 0) on every device.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>

#include "halfgrad.h"
#include "tests/devices.h"

using namespace hg;
using Catch::Matchers::Contains;

namespace {
const double kNotI64[] = {1e30, -1e30, INFINITY, -INFINITY, NAN, 0x1p63};
const int64_t kMax = std::numeric_limits<int64_t>::max(), kMin = std::numeric_limits<int64_t>::min();

// f must throw hg::Error saying "<op>: value ... cannot be converted to i64 ..." with the range.
template <class F>
void refused_for_i64(const std::string& op, F f) {
  INFO(op);
  try {
    f();
    FAIL_CHECK("not refused");
  } catch (const Error& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Contains(op + ": value ") && Contains("cannot be converted to i64") && Contains("[-2^63, 2^63)"));
  }
}
}  // namespace

TEST_CASE("the scalar entry points refuse values i64 cannot hold, naming value and dtype", "[scalar][errors]") {
  for (double v : kNotI64) {
    INFO(v);
    refused_for_i64("full", [&] { full({2}, v, {i64}); });
    refused_for_i64("scalar_tensor", [&] { scalar_tensor(v, {i64}); });
    refused_for_i64("full_like", [&] { full_like(zeros({2}, {i64}), v); });
    Tensor t = zeros({3}, {i64});
    refused_for_i64("fill_", [&] { fill_(t, v); });
    CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{0, 0, 0});  // nothing written
    CHECK(t.version() == 0);
    refused_for_i64("from_vector", [&] { from_vector({1.0, v}, {2}, {i64}); });
    refused_for_i64("from_vector", [&] { tensor({v}, {i64}); });
  }
  CHECK_THROWS_WITH(full({1}, 1e30, {i64}), Contains("value 1e+30"));
  CHECK_THROWS_WITH(full({1}, -INFINITY, {i64}), Contains("value -inf"));
  CHECK_THROWS_WITH(full({1}, NAN, {i64}), Contains("value nan"));
}

TEST_CASE("i64 takes every finite value in [-2^63, 2^63), a fraction truncated toward zero", "[scalar]") {
  CHECK(full({1}, -0x1p63, {i64}).item<int64_t>() == kMin);
  CHECK(scalar_tensor(std::nextafter(0x1p63, 0.0), {i64}).item<int64_t>() == kMax - 1023);
  CHECK(full({1}, 2.75, {i64}).item<int64_t>() == 2);  // PyTorch truncates too
  CHECK(full({1}, -2.75, {i64}).item<int64_t>() == -2);
  Tensor t = zeros({2}, {i64});
  fill_(t, -0x1p63);
  CHECK(t.to_vector<int64_t>() == std::vector<int64_t>{kMin, kMin});
  CHECK(from_vector({-0x1p63, 0x1p62}, {2}, {i64}).to_vector<int64_t>() == std::vector<int64_t>{kMin, int64_t{1} << 62});
}

TEST_CASE("floating dtypes take inf and NaN but refuse finite values beyond their range", "[scalar][errors]") {
  CHECK_THROWS_WITH(full({1}, 70000.0, {f16}), Contains("full: value 70000 cannot be converted to f16") && Contains("65504"));
  CHECK_THROWS_WITH(full({1}, 1e39, {bf16}), Contains("cannot be converted to bf16"));
  CHECK_THROWS_WITH(scalar_tensor(-1e39), Contains("cannot be converted to f32"));
  Tensor h = zeros({1}, {f16});
  CHECK_THROWS_WITH(fill_(h, 65505.0), Contains("fill_: value 65505"));
  CHECK(full({1}, 65504.0, {f16}).item<double>() == 65504.0);
  CHECK(std::isinf(full({1}, -INFINITY, {f16}).item<double>()));
  CHECK(std::isnan(full({1}, NAN, {bf16}).item<double>()));
  CHECK(full({1}, 1e300, {f64}).item<double>() == 1e300);
  CHECK(full({1}, NAN, {b8}).item<bool>());  // bool takes anything: v != 0
  // from_vector rounds into floating dtypes as IEEE says (torch.tensor does the same).
  CHECK(std::isinf(from_vector({70000.0}, {1}, {f16}).item<double>()));
}

TEST_CASE("from_vector of int64 values is exact beyond 2^53 and gives i64", "[scalar]") {
  const int64_t big = (int64_t{1} << 53) + 1;  // a double would round it to 2^53
  const std::vector<int64_t> v{big, kMin, kMax, -3};
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    Tensor t = from_vector(v, {2, 2}, {std::nullopt, d});
    CHECK(t.dtype() == i64);
    CHECK(t.shape() == Shape{2, 2});
    CHECK(t.to_vector<int64_t>() == v);
  }
  CHECK(from_vector(std::vector<int64_t>{3, -1}, {2}, {f16}).to_vector<double>() == std::vector<double>{3, -1});
}

TEST_CASE("tensor-scalar arithmetic follows PyTorch's type promotion", "[scalar][elementwise]") {
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    const Tensor x = from_vector(std::vector<int64_t>{1, -2, 3}, {3}, {i64, d});
    // A floating scalar makes an integer tensor f32: 1e30 is no longer wrapped to INT64_MIN.
    Tensor y = x + 1e30;
    CHECK(y.dtype() == f32);
    CHECK(y.to_vector<double>() == std::vector<double>(3, static_cast<float>(1e30)));
    CHECK((x * 0.5).to_vector<double>() == std::vector<double>{0.5, -1, 1.5});
    CHECK((x - INFINITY).dtype() == f32);
    // An integral scalar keeps it i64, exactly (2^53 + 1 would round as a double).
    const int64_t big = (int64_t{1} << 53) + 1;
    Tensor z = x + big;
    CHECK(z.dtype() == i64);
    CHECK(z.to_vector<int64_t>() == std::vector<int64_t>{big + 1, big - 2, big + 3});
    CHECK((x + 2).to_vector<int64_t>() == std::vector<int64_t>{3, 0, 5});
    CHECK((x * 3).to_vector<int64_t>() == std::vector<int64_t>{3, -6, 9});
    CHECK((x - 1).to_vector<int64_t>() == std::vector<int64_t>{0, -3, 2});
    CHECK((10 - x).to_vector<int64_t>() == std::vector<int64_t>{9, 12, 7});
    // True division: integers give f32, by a scalar and by a tensor.
    CHECK((x / 2).dtype() == f32);
    CHECK((x / 2).to_vector<double>() == std::vector<double>{0.5, -1, 1.5});
    CHECK((6 / x).to_vector<double>() == std::vector<double>{6, -3, 2});
    CHECK((x / x).to_vector<double>() == std::vector<double>{1, 1, 1});
    CHECK(div(x, zeros({3}, {i64, d})).to_vector<double>()[0] == INFINITY);  // was an integer division by 0
    // A bool tensor: integral scalar -> i64, floating -> f32.
    const Tensor b = from_vector({1.0, 0.0}, {2}, {b8, d});
    CHECK((b + 1).dtype() == i64);
    CHECK((b + 1).to_vector<int64_t>() == std::vector<int64_t>{2, 1});
    CHECK((b * 2.5).dtype() == f32);
    // pow: a floating exponent gives f32; an integer exponent on an integer tensor is refused.
    CHECK(pow(x, 2.0).dtype() == f32);
    CHECK_THROWS_WITH(pow(x, 2), Contains("pow: an i64 tensor with the integer exponent 2"));
    // Floating tensors keep their dtype whatever the scalar.
    const Tensor h = ones({2}, {f16, d});
    CHECK((h + 2).dtype() == f16);
    CHECK((h * 1e30).dtype() == f16);
    CHECK(std::isinf((h * 1e30).to_vector<double>()[0]));
  }
}

TEST_CASE("casts to i64 saturate, send NaN to 0 and truncate fractions, on every device", "[scalar][copy]") {
  const std::vector<double> v{1e30, -1e30, INFINITY, -INFINITY, NAN, 2.75, -2.75, -0x1p63};
  const std::vector<int64_t> want{kMax, kMin, kMax, kMin, 0, 2, -2, kMin};
  for (Device d : test::devices()) {
    INFO(test::device_label(d));
    for (DType from : {f64, f32, f16, bf16}) {
      INFO(dtype_name(from));
      const Tensor src = from_vector(v, {8}, {f64, d}).to(from);  // f16 rounds 1e30 to inf: same answer
      CHECK(src.to(i64).to_vector<int64_t>() == want);
      Tensor dst = zeros({8}, {i64, d});
      copy_(dst, src);
      CHECK(dst.to_vector<int64_t>() == want);
    }
  }
  CHECK(clamp(from_vector(std::vector<int64_t>{-5, 5}, {2}), -INFINITY, 1e30).to_vector<int64_t>() ==
        std::vector<int64_t>{-5, 5});  // the bounds saturate into i64 instead of wrapping
}
