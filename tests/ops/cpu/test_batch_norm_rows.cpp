// BatchNorm's vector row forms (ops/cpu/batch_norm_vec.h, 8 lanes and, on AVX-512, 16)
// against its scalar row forms (batch_norm_rows.h) fed the same rows widened one element at
// a time, bit for bit: f32/f16/bf16, channel counts 8..64, row counts with and without a full
// block, inf/NaN/subnormal/tie inputs, outputs rounded once into f16/bf16 (overflow to inf,
// subnormal results); batch_norm_relu's backward, whose mask recomputes relu's output.
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "framework/cpu/isa.h"
#include "halfgrad.h"
#include "ops/cpu/batch_norm_rows.h"
#include "skip.h"

using namespace hg;
namespace bn = hg::cpu::bn;

namespace {

// Equal bits, or both NaN: where two NaNs meet in an add, which payload survives depends
// on the operand order the compiler picked for the scalar loop.
template <class T>
bool same(T a, T b) {
  const float fa = load(a), fb = load(b);
  return (std::isnan(fa) && std::isnan(fb)) || std::memcmp(&a, &b, sizeof(T)) == 0;
}

// Values of the storage type T: mostly normal around 1, with inf, NaN, f32 or T
// subnormals, values just below T's overflow and rounding ties in f32 ([C] channels, so
// every lane of every channel vector sees some).
template <class T>
std::vector<T> rows_of(int64_t n, int64_t C, uint32_t seed, bool specials) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::vector<T> v(static_cast<size_t>(n * C));
  for (size_t i = 0; i < v.size(); ++i) {
    float x = normal(rng);
    if (specials) {
      switch (rng() % 23) {
        case 0: x = INFINITY; break;
        case 1: x = -INFINITY; break;
        case 2: x = NAN; break;
        case 3: x = std::is_same_v<T, half> ? 3e-6f : std::bit_cast<float>(0x00012345u); break;  // subnormal in T
        case 4: x = std::is_same_v<T, half> ? 65000.0f : 3e38f; break;
        case 5: x = 1.0f + 0x1p-8f; break;  // a bf16 tie
        case 6: x = 1.0f + 0x1p-11f; break;  // an f16 tie
        default: break;
      }
    }
    v[i] = store<T>(x);
  }
  return v;
}

template <class T>
std::vector<float> widened(const std::vector<T>& v) {
  std::vector<float> w(v.size());
  for (size_t i = 0; i < v.size(); ++i) w[i] = load(v[i]);
  return w;
}

template <class T>
std::vector<T> rounded(const std::vector<float>& v) {
  std::vector<T> r(v.size());
  for (size_t i = 0; i < v.size(); ++i) r[i] = store<T>(v[i]);
  return r;
}

// Per-channel f32 factors, some zero, negative or large so outputs overflow T.
std::vector<float> factors(int64_t C, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> f(static_cast<size_t>(C));
  for (auto& x : f) x = u(rng);
  f[0] = 0.0f;
  return f;
}

template <class T>
size_t mismatches(const std::vector<T>& got, const std::vector<T>& want) {
  size_t bad = 0;
  for (size_t i = 0; i < want.size(); ++i) bad += !same(got[i], want[i]);
  return bad;
}

template <class T>
void check_dtype(const bn::VecRows<T>& v, bool specials) {
  for (int64_t C : {8, 16, 24, 48, 64}) {
    if (C % v.lanes != 0) continue;
    for (int64_t n : std::initializer_list<int64_t>{1, 5, 33, 4096 / C + 3}) {
      INFO(v.lanes << " lanes, C " << C << ", rows " << n << (specials ? ", with inf/NaN/subnormals" : ""));
      const auto x = rows_of<T>(n, C, static_cast<uint32_t>(C * 1000 + n), specials);
      const auto g = rows_of<T>(n, C, static_cast<uint32_t>(C * 1000 + n + 1), specials);
      const auto xw = widened(x), gw = widened(g);
      const auto mean = factors(C, 3, 2.0f), scale = factors(C, 4, 300.0f), shift = factors(C, 5, 1.0f);
      const auto k2 = factors(C, 6, 0.5f), k3 = factors(C, 7, 1e-3f);
      const auto start = factors(2 * C, 8, 10.0f);  // partial sums from earlier blocks
      std::vector<float> acc(static_cast<size_t>(2 * C));

      auto part_s = start, part_v = start;
      bn::sums(xw.data(), n, C, acc.data(), part_s.data());
      v.sums(x.data(), n, C, part_v.data());
      CHECK(mismatches(part_v, part_s) == 0);

      part_s = start, part_v = start;
      bn::deviation_sums(xw.data(), n, C, mean.data(), acc.data(), part_s.data());
      v.deviation_sums(x.data(), n, C, mean.data(), part_v.data());
      CHECK(mismatches(part_v, part_s) == 0);

      part_s = start, part_v = start;
      bn::grad_sums(gw.data(), xw.data(), n, C, mean.data(), acc.data(), part_s.data());
      v.grad_sums(g.data(), x.data(), n, C, mean.data(), part_v.data(), {});
      CHECK(mismatches(part_v, part_s) == 0);

      std::vector<float> ys(x.size());
      std::vector<T> yv(x.size());
      bn::affine(xw.data(), n, C, mean.data(), scale.data(), shift.data(), ys.data());
      v.affine(x.data(), n, C, mean.data(), scale.data(), shift.data(), yv.data());
      CHECK(mismatches(yv, rounded<T>(ys)) == 0);

      for (bool training : {true, false}) {
        INFO((training ? "training" : "evaluation") << " input gradient");
        bn::input_grad(gw.data(), training ? xw.data() : nullptr, n, C, mean.data(), scale.data(), k2.data(),
                       k3.data(), ys.data());
        v.input_grad(g.data(), x.data(), n, C, mean.data(), scale.data(), training ? k2.data() : nullptr, k3.data(),
                     yv.data(), {});
        CHECK(mismatches(yv, rounded<T>(ys)) == 0);
      }

      // batch_norm_relu's backward: gy masked where relu's output, recomputed from x, is > 0.
      // Reference: the scalar forms on gy masked by y = relu(affine(x)) rounded to T, as the
      // forward stores it. Channels 0-2 (scale 0) output their shift: one so small that
      // f16/bf16 round it to +0 (masked there, not in f32), one that rounds to T's smallest
      // subnormal (kept), and the tie between them (rounds to +0, even).
      auto shift_r = shift, scale_r = scale;
      const bool f16 = std::is_same_v<T, half>;
      scale_r[0] = scale_r[1] = scale_r[2] = 0.0f;
      shift_r[0] = f16 ? 0x1p-26f : 0x1p-135f;
      shift_r[1] = f16 ? 0x1p-24f * 0.75f : 0x1p-133f * 0.75f;
      shift_r[2] = f16 ? 0x1p-25f : 0x1p-134f;
      std::vector<float> yr(x.size());
      bn::affine<true>(xw.data(), n, C, mean.data(), scale_r.data(), shift_r.data(), yr.data());
      const std::vector<float> y_stored = widened(rounded<T>(yr));
      auto gm = gw;
      bn::relu_mask(gm.data(), y_stored.data(), static_cast<int64_t>(gm.size()));
      const bn::ReluOf<float> relu{scale_r.data(), shift_r.data()};
      part_s = start, part_v = start;
      bn::grad_sums(gm.data(), xw.data(), n, C, mean.data(), acc.data(), part_s.data());
      v.grad_sums(g.data(), x.data(), n, C, mean.data(), part_v.data(), relu);
      CHECK(mismatches(part_v, part_s) == 0);
      for (bool training : {true, false}) {
        INFO((training ? "training" : "evaluation") << " input gradient through relu");
        bn::input_grad(gm.data(), training ? xw.data() : nullptr, n, C, mean.data(), scale.data(), k2.data(),
                       k3.data(), ys.data());
        v.input_grad(g.data(), x.data(), n, C, mean.data(), scale.data(), training ? k2.data() : nullptr, k3.data(),
                     yv.data(), relu);
        CHECK(mismatches(yv, rounded<T>(ys)) == 0);
      }
    }
  }
}

}  // namespace

void check_forms(const bn::VecRows<float>* f, const bn::VecRows<half>* h, const bn::VecRows<bfloat16>* b) {
  for (bool specials : {false, true}) {
    check_dtype<float>(*f, specials);
    check_dtype<half>(*h, specials);
    check_dtype<bfloat16>(*b, specials);
  }
}

TEST_CASE("BatchNorm's 8-lane row forms give the scalar row forms' bits", "[batch_norm][bits]") {
  if (!bn::rows8<float>()) HG_SKIP("this build has no AVX2/F16C, so BatchNorm runs only its scalar row forms");
  check_forms(bn::rows8<float>(), bn::rows8<half>(), bn::rows8<bfloat16>());
}

TEST_CASE("BatchNorm's 16-lane row forms give the scalar row forms' bits", "[batch_norm][bits][avx512]") {
  if (!bn::rows16<float>()) HG_SKIP("this CPU (or HG_CPU_ISA) has no AVX-512 F/BW/VL/DQ: no 16-lane BatchNorm rows");
  check_forms(bn::rows16<float>(), bn::rows16<half>(), bn::rows16<bfloat16>());
}

TEST_CASE("BatchNorm takes the widest row form whose lane count divides C", "[batch_norm][bits]") {
  CHECK(bn::vec_rows<double>(16) == nullptr);
  CHECK(bn::vec_rows<half>(12) == nullptr);
  CHECK(bn::vec_rows<float>(3) == nullptr);
  if (!bn::rows8<float>()) HG_SKIP("this build has no AVX2/F16C: only the scalar row forms");
  CHECK(bn::vec_rows<bfloat16>(8) == bn::rows8<bfloat16>());
  CHECK(bn::vec_rows<float>(24) == bn::rows8<float>());
  {
    hg::cpu::ForceIsa avx2(hg::cpu::Isa::avx2);
    CHECK(bn::rows16<float>() == nullptr);
    CHECK(bn::vec_rows<half>(32) == bn::rows8<half>());
  }
  if (!bn::rows16<float>()) HG_SKIP("this CPU (or HG_CPU_ISA) has no AVX-512: the 16-lane choice is not checked");
  CHECK(bn::vec_rows<half>(32) == bn::rows16<half>());
  CHECK(bn::vec_rows<bfloat16>(16) == bn::rows16<bfloat16>());
  CHECK(bn::rows16<float>()->lanes == 16);
}

TEST_CASE("BatchNorm over C = 8 and C = 12 agrees with f64 in f32, f16 and bf16", "[batch_norm][bits]") {
  // The public op on both row forms: each output within its dtype's rounding of the f64 value.
  for (DType dt : {f32, f16, bf16}) {
    for (int64_t C : {8, 12}) {
      INFO(dtype_name(dt) << ", C " << C);
      Generator gen(9);
      const Tensor x64 = randn({37, C}, {f64}, &gen);
      const Tensor y = batch_norm(x64.to(dt), ones({C}), zeros({C}), Tensor(), Tensor(), true).to(f64);
      const Tensor xr = x64.to(dt).to(f64);
      const Tensor m = mean(xr, {0}, true), var = mean((xr - m) * (xr - m), {0}, true);
      const Tensor want = (xr - m) / sqrt(var + 1e-5);
      const double tol = dt == f32 ? 1e-5 : dt == f16 ? 4e-3 : 3e-2;
      CHECK(max(abs(y - want)).item<double>() < tol);
    }
  }
}
