// What the cuda tests of summing ops (matmul, conv, pooling, BN, ...) share: random inputs
// made on the CPU, NaN-poisoned outputs, and a comparison with the CPU whose tolerance
// scales with the reference's largest entry, since sums in another order can cancel to
// small values (ops_compare.h is the elementwise ops' version: ulps of each value).
#pragma once
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>

#include "halfgrad.h"
#include "ops/matmul_kernels.h"

namespace hg::test {

inline const Device kCuda = Device::cuda(0);

// N(0, 1) samples rounded once into `dt`, on the CPU.
inline Tensor random_cpu(const Shape& s, DType dt, uint64_t seed) {
  Generator g(seed);
  return randn(s, {f64}, &g).to(dt);
}

// A tensor of NaNs on `d`: a kernel that leaves any element unwritten shows it.
inline Tensor poisoned(const Shape& s, DType dt, Device d) {
  return full(s, std::numeric_limits<double>::quiet_NaN(), {dt, d});
}

// Relative tolerance for outputs of dtype dt; the absolute part scales with the
// reference's magnitude, since sums can cancel to values near zero.
inline double sum_tolerance(DType dt) {
  switch (dt) {
    case DType::f64: return 1e-12;
    case DType::f32: return 2e-5;
    case DType::f16: return 2e-3;  // 2 ulps of 2^-10
    default: return 1.6e-2;        // bf16: 2 ulps of 2^-7
  }
}

// Requires `got` (any device) to equal the CPU result `want` elementwise within
// sum_tolerance(want.dtype()), NaN where want is NaN; reports the first element that differs.
inline void require_close(const Tensor& got, const Tensor& want, double tol_scale = 1.0) {
  REQUIRE(got.defined());
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const Tensor g = got.to(Device::cpu()).to(f64).contiguous(), w = want.to(f64).contiguous();
  const double* pg = g.data<double>();
  const double* pw = w.data<double>();
  const int64_t n = w.numel();
  double scale = 0;
  for (int64_t i = 0; i < n; ++i)
    if (std::isfinite(pw[i])) scale = std::max(scale, std::abs(pw[i]));
  const double rtol = sum_tolerance(want.dtype()) * tol_scale, atol = rtol * scale;
  for (int64_t i = 0; i < n; ++i) {
    const bool ok = std::isnan(pw[i]) ? std::isnan(pg[i])
                    : std::isinf(pw[i]) ? pg[i] == pw[i]
                                        : std::abs(pg[i] - pw[i]) <= atol + rtol * std::abs(pw[i]);
    if (!ok) {
      std::ostringstream msg;
      msg << "element " << i << " of " << shape_str(want.shape()) << " " << dtype_name(want.dtype()) << ": cuda "
          << pg[i] << ", cpu " << pw[i] << " (tolerance " << atol << " + " << rtol << " * |cpu|)";
      FAIL(msg.str());
    }
  }
}

// Requires the two tensors to be bit-identical (ops that only move or pick elements).
inline void require_equal(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const Tensor g = got.to(Device::cpu()).contiguous(), w = want.contiguous();
  const auto bytes = static_cast<size_t>(w.numel()) * dtype_size(w.dtype());
  REQUIRE(std::memcmp(g.data_ptr(), w.data_ptr(), bytes) == 0);
}

// The CPU's bmm of a [B, M, K] and b [B, K, N]: the reference the CUDA products are held to.
inline Tensor cpu_bmm(const Tensor& a, const Tensor& b) {
  Tensor out = empty({a.size(0), a.size(1), b.size(2)}, {a.dtype(), Device::cpu()});
  bmm_stub(Device::cpu(), a, b, out);
  return out;
}

inline constexpr DType kFloatingDtypes[] = {DType::f64, DType::f32, DType::f16, DType::bf16};

}  // namespace hg::test
