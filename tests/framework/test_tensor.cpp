// Tensor construction, views that share storage, conversions and bad input.
#include <catch2/catch.hpp>

#include "halfgrad.h"
#include "tests/devices.h"

using namespace hg;

TEST_CASE("factories make the shape, dtype and values asked for", "[tensor]") {
  Tensor z = zeros({2, 3});
  CHECK(z.shape() == Shape{2, 3});
  CHECK(z.dtype() == f32);
  CHECK(z.numel() == 6);
  for (double v : z.to_vector<double>()) CHECK(v == 0.0);
  Tensor f = full({4}, 2.5, {f16});
  CHECK(f.dtype() == f16);
  for (double v : f.to_vector<double>()) CHECK(v == 2.5);
  Tensor a = arange(0, 5);
  CHECK(a.to_vector<double>() == std::vector<double>{0, 1, 2, 3, 4});
  Tensor t = tensor({1, 2, 3, 4, 5, 6}).reshape({2, 3});
  CHECK(t.at({1, 2}) == 6.0);
  CHECK(t.at({0, 1}) == 2.0);
  CHECK(scalar_tensor(7.0).item<double>() == 7.0);
}

TEST_CASE("factories reject negative sizes and bad counts", "[tensor][errors]") {
  CHECK_THROWS_WITH(zeros({2, -1}), Catch::Contains("non-negative") && Catch::Contains("[2, -1]"));
  CHECK_THROWS_WITH(from_vector({1, 2, 3}, {2, 2}), Catch::Contains("3 values") && Catch::Contains("[2, 2]"));
  CHECK_THROWS_WITH(arange(0, 1, 0), Catch::Contains("step"));
}

TEST_CASE("values round into f16 and bf16 as IEEE says", "[tensor][numerics]") {
  Tensor h = tensor({65504.0, 65520.0, 1e-8, 0.1, 3e-8}, {f16});
  std::vector<double> v = h.to_vector<double>();
  CHECK(v[0] == 65504.0);
  CHECK(std::isinf(v[1]));
  CHECK(v[2] == 0.0);
  CHECK(v[3] == 0.0999755859375);  // nearest binary16 to 0.1
  CHECK(v[4] == std::ldexp(1.0, -25 + 1));  // 3e-8 rounds to the smallest subnormal 2^-24
  Tensor b = tensor({1.0 + 1.0 / 256}, {bf16});  // halfway between 1 and 1+2^-7: ties to even
  CHECK(b.item<double>() == 1.0);
}

TEST_CASE("views share storage", "[tensor][views]") {
  Tensor t = arange(0, 24).reshape({2, 3, 4});
  Tensor p = t.permute({2, 0, 1});
  CHECK(p.shape() == Shape{4, 2, 3});
  CHECK(p.storage() == t.storage());
  CHECK(p.at({3, 1, 2}) == t.at({1, 2, 3}));
  CHECK_FALSE(p.is_contiguous());
  Tensor n = t.narrow(2, 1, 2);
  CHECK(n.shape() == Shape{2, 3, 2});
  CHECK(n.at({1, 0, 1}) == t.at({1, 0, 2}));
  Tensor s = t.slice(1, 0, 3, 2);
  CHECK(s.shape() == Shape{2, 2, 4});
  CHECK(s.at({0, 1, 3}) == t.at({0, 2, 3}));
  Tensor e = tensor({1, 2, 3}).reshape({3, 1}).expand({3, 4});
  CHECK(e.strides()[1] == 0);
  CHECK(e.at({2, 3}) == 3.0);
  Tensor u = t.unsqueeze(0);
  CHECK(u.shape() == Shape{1, 2, 3, 4});
  CHECK(u.squeeze(0).shape() == t.shape());
  CHECK(t.transpose(0, 2).shape() == Shape{4, 3, 2});
  CHECK(t.flatten(1).shape() == Shape{2, 12});
  CHECK(t.select(1, -1).at({1, 0}) == t.at({1, 2, 0}));
  // Writing through a view changes the base.
  fill_(t.select(0, 0), -1.0);
  CHECK(t.at({0, 2, 3}) == -1.0);
  CHECK(t.at({1, 0, 0}) == 12.0);
}

TEST_CASE("contiguous copies a permuted view into row-major order", "[tensor][views]") {
  Tensor t = arange(0, 6).reshape({2, 3});
  Tensor c = t.transpose(0, 1).contiguous();
  CHECK(c.is_contiguous());
  CHECK(c.to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
  CHECK(t.transpose(0, 1).reshape({6}).to_vector<double>() == std::vector<double>{0, 3, 1, 4, 2, 5});
}

TEST_CASE("invalid views are refused with the shapes involved", "[tensor][views][errors]") {
  Tensor t = arange(0, 6).reshape({2, 3});
  CHECK_THROWS_WITH(t.reshape({4, 2}), Catch::Contains("[4, 2]") && Catch::Contains("[2, 3]"));
  CHECK_THROWS_WITH(t.transpose(0, 1).view({6}), Catch::Contains("without a copy"));
  CHECK_THROWS_WITH(t.permute({0, 0}), Catch::Contains("twice"));
  CHECK_THROWS_WITH(t.narrow(1, 2, 2), Catch::Contains("outside axis"));
  CHECK_THROWS_WITH(t.squeeze(0), Catch::Contains("not 1"));
  CHECK_THROWS_WITH(t.expand({3, 3}), Catch::Contains("cannot be expanded"));
  CHECK_THROWS_WITH(t.transpose(0, 2), Catch::Contains("out of range") && Catch::Contains("-2 to 1"));
}

TEST_CASE("to() converts dtypes with rounding and is a no-op for the same dtype", "[tensor]") {
  Tensor t = tensor({1.0 / 3.0, 70000.0, -2.5}, {f64});
  Tensor h = t.to(f16);
  CHECK(h.dtype() == f16);
  std::vector<double> v = h.to_vector<double>();
  CHECK(v[0] == 0.333251953125);
  CHECK(std::isinf(v[1]));
  CHECK(v[2] == -2.5);
  CHECK(t.to(f64).is_same(t));
  Tensor i = tensor({1.7, -2.2}).to(i64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, -2});
}

TEST_CASE("the cpu device is always there; cuda says why it is not", "[tensor][device]") {
  CHECK(Device::parse("cpu").is_cpu());
  CHECK(Device::parse("cuda:1").index == 1);
  CHECK_THROWS_WITH(Device::parse("tpu"), Catch::Contains("valid: cpu, cuda"));
  Device d = Device::automatic();
  // Without a usable GPU the error carries the reason (the CUDA runtime's message, or
  // that this build has no CUDA backend). An emulated cuda:0 works but is never "auto".
  if (d.is_cpu() && !hg::test::cuda_available()) CHECK_THROWS_WITH(zeros({2}, {f32, Device::cuda(0)}), Catch::Contains("not available"));
}

TEST_CASE("random streams are deterministic per seed and well distributed", "[tensor][random]") {
  Generator g1(42), g2(42), g3(43);
  Tensor a = randn({1000}, {}, &g1), b = randn({1000}, {}, &g2), c = randn({1000}, {}, &g3);
  CHECK(a.to_vector<float>() == b.to_vector<float>());
  CHECK(a.to_vector<float>() != c.to_vector<float>());
  Tensor big = randn({100000}, {f64}, &g1);
  std::vector<double> v = big.to_vector<double>();
  double m = 0, s = 0;
  for (double x : v) m += x;
  m /= static_cast<double>(v.size());
  for (double x : v) s += (x - m) * (x - m);
  s = std::sqrt(s / static_cast<double>(v.size()));
  CHECK(std::abs(m) < 0.02);
  CHECK(std::abs(s - 1.0) < 0.02);
  Tensor u = rand({10000}, {}, &g1);
  for (double x : u.to_vector<double>()) REQUIRE((x >= 0.0 && x < 1.0));
  Tensor r = randint(3, 7, {1000}, {i64}, &g1);
  std::vector<int64_t> ri = r.to_vector<int64_t>();
  std::array<int, 4> hits{};
  for (int64_t x : ri) {
    REQUIRE((x >= 3 && x < 7));
    ++hits[static_cast<size_t>(x - 3)];
  }
  for (int h : hits) CHECK(h > 150);
  // Element i depends only on (seed, draw, i): a prefix of a larger draw is the smaller draw.
  Generator g4(7), g5(7);
  std::vector<float> small = rand({10}, {}, &g4).to_vector<float>();
  std::vector<float> large = rand({1000}, {}, &g5).to_vector<float>();
  CHECK(std::equal(small.begin(), small.end(), large.begin()));
}

TEST_CASE("allclose compares with tolerances and NaN rules", "[tensor]") {
  Tensor a = tensor({1.0, 2.0, NAN}), b = tensor({1.0, 2.000001, NAN});
  CHECK_FALSE(allclose(a, b));
  CHECK(allclose(a, b, 1e-5, 1e-8, true));
  CHECK_FALSE(allclose(tensor({1.0}), tensor({1.1})));
}

TEST_CASE("using an undefined tensor is an error, not a crash", "[tensor][errors]") {
  Tensor t;
  CHECK_FALSE(t.defined());
  CHECK_THROWS_WITH(t.dtype(), Catch::Contains("dtype") && Catch::Contains("undefined"));
  CHECK_THROWS_WITH(t.shape(), Catch::Contains("undefined"));
  Tensor x = ones({2}).set_requires_grad();
  CHECK_THROWS_WITH(x.grad().dtype(), Catch::Contains("never computed"));  // no backward yet
  CHECK_THROWS_AS(exp(t), hg::Error);
}

TEST_CASE("data<T>() checks T against the tensor's dtype", "[tensor][errors]") {
  Tensor t = tensor({1.5, 2.5});
  CHECK(t.data<float>()[1] == 2.5f);
  CHECK_THROWS_WITH(t.data<double>(), Catch::Contains("data<f64>()") && Catch::Contains("holds f32"));
  CHECK_THROWS_WITH(t.data<int64_t>(), Catch::Contains("holds f32"));
  CHECK_THROWS_WITH(Tensor().data<float>(), Catch::Contains("undefined"));
}

TEST_CASE("from_data keeps the dtype of its values unless one is given", "[tensor]") {
  Tensor i = from_data<int64_t>({1, 2, 3}, {3});
  CHECK(i.dtype() == i64);
  CHECK(i.to_vector<int64_t>() == std::vector<int64_t>{1, 2, 3});
  CHECK(from_data<int64_t>({(int64_t{1} << 60) + 1}, {1}).item<int64_t>() == (int64_t{1} << 60) + 1);  // not via f32
  CHECK(from_data<double>({0.1}, {1}).dtype() == f64);
  CHECK(from_data<double>({0.1}, {1}).item<double>() == 0.1);
  CHECK(from_data<half>({half(1.0f)}, {1}).dtype() == f16);
  CHECK(from_data<int64_t>({1, 2}, {2}, {.requires_grad = false}).dtype() == i64);
  CHECK(from_data<int64_t>({1, 2}, {2}, {f32}).dtype() == f32);
  CHECK(from_vector({1, 2}, {2}).dtype() == f32);  // from_vector and tensor() keep f32 as the default
}
