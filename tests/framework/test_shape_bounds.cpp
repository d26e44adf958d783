// Shape, stride and offset arithmetic at the edge of int64 (issue 17, item 3) and the
// factories and parsers that used to throw something other than hg::Error (item 5).
#include <catch2/catch.hpp>

#include <cstdint>

#include "halfgrad.h"

using namespace hg;

namespace {
constexpr int64_t kHuge = 3037000500;  // kHuge^2 > 2^63 - 1 (3037000499^2 is the last square that fits)
}  // namespace

TEST_CASE("make_tensor refuses a view whose bounds overflow int64", "[shape][errors]") {
  const auto st = zeros({8}).storage();
  // (9 - 1) * 2^61 = 2^64 wraps to 0 without a check: the view looked in bounds.
  CHECK_THROWS_WITH(make_tensor(st, {9}, {int64_t{1} << 61}, 0, f32), Catch::Contains("2^63"));
  CHECK_THROWS_WITH(make_tensor(st, {3, 2}, {INT64_MAX, -1}, 1, f32), Catch::Contains("make_tensor"));
  CHECK_THROWS_WITH(make_tensor(st, {2}, {1}, INT64_MAX, f32), Catch::Contains("offset"));
  CHECK_THROWS_WITH(make_tensor(st, {0}, {1}, -1, f32), Catch::Contains("offset"));
  // In bounds, negative strides included: accepted, and read correctly.
  const Tensor base = arange(0, 8);
  const Tensor rev = make_tensor(base.storage(), {4}, {-2}, 7, f32);
  CHECK(rev.to_vector<double>() == std::vector<double>{7, 5, 3, 1});
  CHECK(sum(rev).item<double>() == 16.0);
}

TEST_CASE("shapes whose sizes multiply past int64 are refused, zero sizes included", "[shape][errors]") {
  CHECK_THROWS_WITH(numel_of({kHuge, kHuge}), Catch::Contains("int64"));
  CHECK(numel_of({0, kHuge, kHuge}) == 0);  // a count, which is 0 whatever the order
  CHECK(numel_of({kHuge, kHuge, 0}) == 0);
  CHECK_THROWS_WITH(contiguous_strides({2, kHuge, kHuge}), Catch::Contains("overflow"));
  CHECK(contiguous_strides({kHuge, 3, 0}) == Strides{3, 1, 1});  // the outermost product is never needed
  for (const Shape& s : {Shape{0, kHuge, kHuge}, Shape{kHuge, kHuge, 0}, Shape{kHuge, 0, kHuge}}) {
    CHECK_THROWS_WITH(empty(s), Catch::Contains("empty") && Catch::Contains("2^63"));
    CHECK_THROWS_WITH(zeros(s, {f16}), Catch::Contains("too large"));
    CHECK_THROWS_WITH(make_tensor(nullptr, s, {0, 0, 0}, 0, f32), Catch::Contains("make_tensor"));
  }
  CHECK_NOTHROW(check_shape({0, int64_t{1} << 62, 1}, "test"));
  // Fits as a count of elements, not as bytes.
  CHECK_THROWS_WITH(empty({int64_t{1} << 62}, {f32}), Catch::Contains("2^63 bytes"));
}

TEST_CASE("expand refuses a shape whose element count overflows", "[shape][errors]") {
  const Tensor one = ones({1, 1});
  // Before: numel wrapped to a small or zero count and sum() answered 0.
  CHECK_THROWS_AS(one.expand({kHuge, kHuge}), Error);
  CHECK_THROWS_AS(one.expand({0, kHuge, kHuge}), Error);
  const Tensor ok = one.expand({int64_t{1} << 31, 4});
  CHECK(ok.numel() == (int64_t{1} << 33));
  CHECK(ok.strides() == Strides{0, 0});
}

TEST_CASE("a safetensors header with zero sizes next to huge ones is an hg::Error", "[shape][errors]") {
  // What a file could hold: the loader makes empty(shape) from it.
  CHECK_THROWS_AS(empty({0, kHuge, kHuge}, {bf16}), Error);
  CHECK(empty({0, kHuge}).numel() == 0);
}

TEST_CASE("arange with a huge count is an hg::Error, not std::length_error", "[shape][errors]") {
  CHECK_THROWS_WITH(arange(0, 1e300), Catch::Contains("arange") && Catch::Contains("more than any tensor"));
  CHECK_THROWS_WITH(arange(0, 1e18), Catch::Contains("memory"));  // 8e18 bytes: no machine has them
  CHECK_THROWS_AS(arange(-1e19, 1e19, 1.0), Error);
  CHECK(arange(5, 0, -2).to_vector<double>() == std::vector<double>{5, 3, 1});
  CHECK(arange(0, 1, 0.25, {f16}).to_vector<double>() == std::vector<double>{0, 0.25, 0.5, 0.75});
  CHECK(arange(3, 1).numel() == 0);
}

TEST_CASE("Device::parse refuses an index past int with hg::Error", "[shape][errors]") {
  CHECK_THROWS_WITH(Device::parse("cuda:99999999999999999999"), Catch::Contains("index is over"));
  CHECK_THROWS_WITH(Device::parse("cuda:2147483648"), Catch::Contains("cuda:2147483648"));
  CHECK_THROWS_WITH(Device::parse("cuda:-1"), Catch::Contains("valid: cpu, cuda, cuda:N"));
  CHECK(Device::parse("cuda:7").index == 7);
  CHECK(Device::parse("cuda:0007").index == 7);
}

TEST_CASE("views of a size-1 or empty axis with a huge stride do not overflow", "[shape][errors]") {
  // Found by .ci/fuzz: slice's offset start * stride passed int64 for an empty result.
  const auto st = zeros({8}).storage();
  const Tensor one = make_tensor(st, {1}, {INT64_MAX}, 7, f32);  // a size-1 axis may have any stride
  CHECK(one.item<double>() == 0.0);
  const Tensor none = one.slice(0, 1, 1);
  CHECK(none.numel() == 0);
  CHECK(one.narrow(0, 1, 0).numel() == 0);
  // An empty tensor is not bounds-checked, so its strides can be anything; unsqueeze's
  // new stride (stride * size) must not overflow.
  const Tensor empty_view = make_tensor(st, {0, 5}, {1, int64_t{1} << 62}, 0, f32);
  CHECK(empty_view.unsqueeze(1).shape() == Shape{0, 1, 5});
  CHECK(empty_view.slice(1, 3, 5).shape() == Shape{0, 2});  // 3 * 2^62 would overflow
  CHECK(empty_view.transpose(0, 1).reshape({5, 0, 1}).shape() == Shape{5, 0, 1});
  CHECK(make_tensor(st, {0, 9}, {1, INT64_MAX}, 0, f32).slice(1, 2, 9, 3).shape() == Shape{0, 3});
  CHECK(empty_view.unsqueeze(2).shape() == Shape{0, 5, 1});
}

TEST_CASE("reading a size-1 axis with a huge stride does not overflow the byte strides", "[shape][errors]") {
  // The CPU loops turned element strides into byte strides before dropping size-1 axes:
  // INT64_MAX * 4 overflowed (UBSan) for a view the bounds check rightly accepts.
  const auto st = from_vector({1, 2, 3, 4, 5, 6, 7, 8}, {8}).storage();
  const Tensor row = make_tensor(st, {1, 3}, {INT64_MAX, 2}, 1, f32);  // elements 1, 3, 5 -> 2, 4, 6
  CHECK(row.to_vector<double>() == std::vector<double>{2, 4, 6});
  CHECK(sum(row).item<double>() == 12.0);
  CHECK((row * 2.0).to_vector<double>() == std::vector<double>{4, 8, 12});
}
