// Helpers of the data-parallel tests: a small MLP, a bitwise checksum of a model's
// parameters compared across ranks, and the data every rank can rebuild from a seed.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>

#include "dist/process_group.h"
#include "halfgrad.h"

namespace hg::dist_test {

inline std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(std::make_shared<nn::Linear>(8, 32), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(32, 16), std::make_shared<nn::ReLU>(),
                                          std::make_shared<nn::Linear>(16, 2));
}

// FNV-1a over every parameter's bytes: equal checksums mean bit-identical parameters.
inline int64_t checksum(nn::Module& m) {
  uint64_t h = 1469598103934665603ull;
  for (auto& [name, param] : m.named_parameters()) {
    const Tensor p = param.to(Device::cpu()).contiguous();
    const auto* b = static_cast<const unsigned char*>(p.data_ptr());
    size_t n = static_cast<size_t>(p.numel()) * dtype_size(p.dtype());
    for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  }
  int64_t out;
  std::memcpy(&out, &h, sizeof out);
  return out;
}

// True when every rank holds the same checksum.
inline bool same_on_all_ranks(dist::ProcessGroup& pg, nn::Module& m) {
  std::vector<Tensor> all = pg.all_gather(from_data<int64_t>({checksum(m)}, {1}));
  for (const Tensor& t : all)
    if (t.item<int64_t>() != all[0].item<int64_t>()) return false;
  return true;
}

// The largest |a - b| / max(1, |b|) over the parameters of two models of one architecture.
inline double max_rel_diff(nn::Module& a, nn::Module& b) {
  auto pa = a.named_parameters(), pb = b.named_parameters();
  double worst = 0;
  for (size_t i = 0; i < pa.size(); ++i) {
    std::vector<double> x = pa[i].second.to_vector<double>(), y = pb[i].second.to_vector<double>();
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(x[k] - y[k]) / std::max(1.0, std::abs(y[k])));
  }
  return worst;
}

}  // namespace hg::dist_test
