// Packing and unpacking of the numerics statistics; the kernels live per backend
// (ops/cpu/numerics_cpu.cpp).
#include "amp/tensor_stats.h"

#include <cmath>
#include <sstream>

#include "framework/autograd.h"

namespace hg {
DispatchStub<void(const Tensor&, const Tensor&)> numerics_stats_stub("numerics_stats");
}

namespace hg::amp {

Tensor compute_stats(const Tensor& x) {
  HG_CHECK(x.defined(), "compute_stats: the tensor is undefined");
  HG_CHECK(is_floating(x.dtype()), "compute_stats: needs a floating tensor, got ", dtype_name(x.dtype()));
  NoGrad no_grad;
  Tensor c = x.detach().contiguous();
  Tensor out = empty({kNumericsFields}, {f64, x.device()});
  numerics_stats_stub(x.device(), c, out);
  return out;
}

TensorStats unpack_stats(const Tensor& packed) {
  HG_CHECK(packed.defined() && packed.numel() == kNumericsFields && packed.dtype() == f64,
           "unpack_stats: expected the f64 [", kNumericsFields, "] tensor compute_stats returns");
  std::vector<double> v = packed.to_vector<double>();
  TensorStats s;
  s.numel = static_cast<int64_t>(v[0]);
  s.amax = v[1];
  s.min_nonzero = std::isfinite(v[2]) ? v[2] : 0.0;
  s.l2 = std::sqrt(v[3]);
  s.zeros = static_cast<int64_t>(v[5]);
  s.f16_subnormal = static_cast<int64_t>(v[6]);
  s.f16_flush = static_cast<int64_t>(v[7]);
  s.f16_overflow = static_cast<int64_t>(v[8]);
  s.inf = static_cast<int64_t>(v[9]);
  s.nan = static_cast<int64_t>(v[10]);
  const int64_t finite = s.numel - s.inf - s.nan;
  s.mean = finite > 0 ? v[4] / static_cast<double>(finite) : 0.0;
  for (int i = 0; i < kNumericsBins; ++i) s.hist[static_cast<size_t>(i)] = static_cast<int64_t>(v[static_cast<size_t>(kNumericsScalars + i)]);
  return s;
}

std::string TensorStats::json() const {
  std::ostringstream os;
  os.precision(6);
  os << "{\"numel\":" << numel << ",\"amax\":" << amax << ",\"min_nonzero\":" << min_nonzero << ",\"l2\":" << l2
     << ",\"mean\":" << mean << ",\"zeros\":" << zeros << ",\"f16_subnormal\":" << f16_subnormal
     << ",\"f16_flush\":" << f16_flush << ",\"f16_overflow\":" << f16_overflow << ",\"inf\":" << inf
     << ",\"nan\":" << nan << ",\"log2_hist_lo\":" << hist_lo << ",\"log2_hist\":[";
  for (size_t i = 0; i < hist.size(); ++i) os << (i ? "," : "") << hist[i];
  os << "]}";
  return os.str();
}

}  // namespace hg::amp
