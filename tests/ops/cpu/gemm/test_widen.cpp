// The engine's inline conversions at the edges of its operands: gemm::widen (every pack's
// f16/bf16 -> f32, 8 and 4 values at a time, then one by one) and the epilogue's narrowed
// last 1-7 columns of a row (masked loads, one vector rounding). Both must give the bits of
// the scalar conversions in half.h / bfloat16.h for every run length and every kind of
// value: subnormals, infinities, signalling NaNs (quieted), ties of the rounding.
#include <catch2/catch.hpp>
#include <bit>
#include <cstdint>
#include <cstring>
#include <vector>

#include "ops/cpu/gemm/sources.h"

using namespace hg;
using namespace hg::cpu;

namespace {

// Bit patterns of every class: zeros, subnormals, normals, the largest finite, infinities,
// quiet and signalling NaNs with payloads, in both signs, then a sweep of the other bits.
std::vector<uint16_t> patterns() {
  std::vector<uint16_t> p{0x0000, 0x8000, 0x0001, 0x03ff, 0x8200, 0x0400, 0x3c00, 0xbc01, 0x7bff, 0xfbff,
                          0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfd55, 0x7f80, 0xff80, 0x7fc0, 0x7f81, 0xff81,
                          0x0080, 0x007f, 0x8001, 0x4049};
  for (uint32_t b = 0; b < 0x10000; b += 2311) p.push_back(static_cast<uint16_t>(b));
  return p;
}

template <class T>
float scalar(uint16_t bits) {
  if constexpr (std::is_same_v<T, half>)
    return half_bits_to_float(bits);
  else
    return bf16_bits_to_float(bits);
}

template <class T>
void check_widen() {
  const std::vector<uint16_t> bits = patterns();
  for (int64_t n = 0; n <= 21; ++n)
    for (size_t start = 0; start + static_cast<size_t>(n) <= bits.size(); start += 7) {
      std::vector<T> src(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) src[static_cast<size_t>(i)].bits = bits[start + static_cast<size_t>(i)];
      std::vector<float> got(static_cast<size_t>(n) + 1, 123.0f);
      cpu::gemm::widen(src.data(), got.data(), n);
      for (int64_t i = 0; i < n; ++i) {
        const float want = scalar<T>(src[static_cast<size_t>(i)].bits);
        INFO("run of " << n << ", value " << i << ", bits 0x" << std::hex << src[static_cast<size_t>(i)].bits);
        REQUIRE(std::bit_cast<uint32_t>(got[static_cast<size_t>(i)]) == std::bit_cast<uint32_t>(want));
      }
      REQUIRE(got[static_cast<size_t>(n)] == 123.0f);  // nothing written past the run
    }
}

// One row of nn columns through store_tile into T, with alpha, bias and ReLU, against the
// scalar definition: round(relu(alpha * c + bias)) per column; the columns past nn (and the
// row's neighbours) keep what they held.
template <class T>
void check_tail(DType dt, bool relu) {
  const std::vector<float> vals{0.0f,   -0.0f, 1.0f, -2.5f, 65504.0f, 65520.0f, 1e-8f, 5.9604645e-8f, -3.0e38f,
                                1.0f / 3, 3.3e38f, std::numeric_limits<float>::infinity(),
                                std::bit_cast<float>(0x7fa00001u), 1.00048828125f, 2049.0f, -1e-40f};
  for (int64_t nn = 1; nn <= 15; ++nn)
    for (size_t shift = 0; shift < vals.size(); ++shift) {
      // Columns n0 = 2 .. 2 + nn of a row: c holds the row's tile from column 2 on, the bias
      // and the output every column from 0 (as store_tile indexes them).
      std::vector<float> c(16), bias(18);
      for (int64_t j = 0; j < 16; ++j) c[static_cast<size_t>(j)] = vals[(shift + static_cast<size_t>(j)) % vals.size()];
      for (int64_t j = 0; j < 18; ++j) bias[static_cast<size_t>(j)] = j % 3 == 0 ? 0.0f : 0.5f * static_cast<float>(j % 5) - 1.0f;
      std::vector<T> out(20);
      for (T& o : out) o.bits = 0x1234;
      cpu::gemm::Epilogue<float> ep;
      ep.alpha = 0.75f, ep.bias = bias.data(), ep.relu = relu;
      cpu::gemm::store_tile<float>(c.data(), 16, 0, 1, 2, nn, cpu::gemm::Output{out.data(), dt, 1, 1, 0, 0, 0, 1}, ep);
      for (int64_t j = 0; j < nn; ++j) {
        float v = ep.alpha * c[static_cast<size_t>(j)];
        v += bias[static_cast<size_t>(2 + j)];
        if (relu && v < 0.0f) v = 0.0f;
        T want;
        if constexpr (std::is_same_v<T, half>)
          want.bits = float_to_half_bits(v);
        else
          want.bits = float_to_bf16_bits(v);
        INFO(nn << " columns, column " << j << ", value " << v);
        REQUIRE(out[static_cast<size_t>(2 + j)].bits == want.bits);
      }
      for (int64_t j : {int64_t{0}, int64_t{1}}) REQUIRE(out[static_cast<size_t>(j)].bits == 0x1234);
      for (int64_t j = 2 + nn; j < 20; ++j) REQUIRE(out[static_cast<size_t>(j)].bits == 0x1234);
    }
}

}  // namespace

TEST_CASE("gemm widen: f16 and bf16 runs of every length give the scalar conversion's bits", "[gemm][numerics]") {
  check_widen<half>();
  check_widen<bfloat16>();
}

TEST_CASE("gemm epilogue: a row's last 1-7 narrowed columns round as the scalar code, nothing past them written",
          "[gemm][numerics]") {
  for (bool relu : {false, true}) {
    check_tail<half>(DType::f16, relu);
    check_tail<bfloat16>(DType::bf16, relu);
  }
}
